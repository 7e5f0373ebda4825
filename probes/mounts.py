"""Which mount a path lives on, from /proc/self/mountinfo, and what its options say."""
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .sysfs import SysRoot


@dataclass(frozen=True)
class Mount:
    mount_id: int
    dev: Tuple[int, int]
    root: str
    mount_point: str
    options: Tuple[str, ...]        # per-mount (rw, noatime, ...)
    fstype: str                     # "ext4", "nfs4", "fuse.gittune-lat", ...
    source: str
    super_options: Dict[str, str] = field(default_factory=dict)

    @property
    def base_type(self) -> str:
        return self.fstype.split(".", 1)[0]

    @property
    def subtype(self) -> Optional[str]:
        return self.fstype.split(".", 1)[1] if "." in self.fstype else None

    @property
    def read_only(self) -> bool:
        return "ro" in self.options or self.super_options.get("ro") == ""

    def network_options(self) -> Dict[str, str]:
        """The NFS/SMB options that change Git's speed: version, lookup and attribute caching."""
        wanted = ("vers", "lookupcache", "actimeo", "acregmin", "acregmax", "acdirmin",
                  "acdirmax", "noac", "nconnect", "proto", "rsize", "wsize", "cache")
        return {k: v for k, v in self.super_options.items() if k in wanted}


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and len(text[i + 1:i + 4]) == 3 and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _options(text: str) -> Dict[str, str]:
    out = {}
    for item in text.split(","):
        if item:
            k, _, v = item.partition("=")
            out[k] = v
    return out


def parse_mountinfo(text: str) -> List[Mount]:
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        a, b = left.split(), right.split()
        if len(a) < 6 or len(b) < 2:
            continue
        major, _, minor = a[2].partition(":")
        mounts.append(Mount(
            mount_id=int(a[0]), dev=(int(major), int(minor)), root=_unescape(a[3]),
            mount_point=_unescape(a[4]), options=tuple(a[5].split(",")), fstype=b[0],
            source=_unescape(b[1]), super_options=_options(b[2] if len(b) > 2 else "")))
    return mounts


def read_mounts(root: str = "/") -> List[Mount]:
    return parse_mountinfo(SysRoot(root).read("proc/self/mountinfo") or "")


def _is_under(path: str, mount_point: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def find_mount(path: str, mounts: List[Mount], dev: Optional[Tuple[int, int]] = None) -> Optional[Mount]:
    """The mount holding path: same device and the longest mount point above it.

    With no device match (btrfs subvolumes report anonymous devices), the
    longest mount point above the path wins.
    """
    real = os.path.realpath(path)
    if dev is None:
        st = os.stat(real)
        dev = (os.major(st.st_dev), os.minor(st.st_dev))
    above = [m for m in mounts if _is_under(real, m.mount_point)]
    same = [m for m in above if m.dev == dev] or above
    if not same:
        return None
    # The last mounted of equally long points is the one visible.
    return max(same, key=lambda m: (len(m.mount_point), m.mount_id))
