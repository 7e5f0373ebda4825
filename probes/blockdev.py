"""The block devices behind a file system, through partitions, device-mapper, md and loop.

Flags are evidence, not truth: a virtio disk may say rotational=1 and
answer like flash. The storage probe measures; this says what the kernel
claims.
"""
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .sysfs import SysRoot, read_int

# Device nodes are followed to absolute real paths, already below any root.
_abs = SysRoot("/")


@dataclass(frozen=True)
class BlockDevice:
    name: str
    kind: str                   # disk | partition | dm | md | loop | zram | other
    rotational: Optional[bool]
    scheduler: Optional[str]
    nr_requests: Optional[int]
    read_ahead_kb: Optional[int]
    size_bytes: Optional[int]
    model: Optional[str]
    backing_file: Optional[str] = None
    slaves: Tuple["BlockDevice", ...] = ()

    def leaves(self) -> List["BlockDevice"]:
        """The devices at the bottom of the stack (the ones that seek or not)."""
        if not self.slaves:
            return [self]
        return [leaf for s in self.slaves for leaf in s.leaves()]


def _kind(name: str, sys: SysRoot, node: str) -> str:
    if os.path.exists(os.path.join(node, "partition")):
        return "partition"
    for prefix, kind in (("dm-", "dm"), ("md", "md"), ("loop", "loop"), ("zram", "zram")):
        if name.startswith(prefix):
            return kind
    return "disk"


def _scheduler(text: Optional[str]) -> Optional[str]:
    if not text:
        return None
    for word in text.split():
        if word.startswith("["):
            return word.strip("[]")
    return text


def resolve(dev: Tuple[int, int], root: str = "/", _depth: int = 0) -> Optional[BlockDevice]:
    """The device stack for (major, minor), or None for a device with no block node (tmpfs, NFS, FUSE)."""
    sys = SysRoot(root)
    link = sys.path("sys/dev/block", f"{dev[0]}:{dev[1]}")
    if not os.path.exists(link) or _depth > 8:
        return None
    node = os.path.realpath(link)
    name = os.path.basename(node)
    kind = _kind(name, sys, node)
    if kind == "partition":
        parent = os.path.basename(os.path.dirname(node))
        whole = _device_dev(sys, parent)
        inner = resolve(whole, root, _depth + 1) if whole else None
        return BlockDevice(name, kind, inner.rotational if inner else None, None, None, None,
                           _size(node), None, slaves=(inner,) if inner else ())
    slaves = []
    for slave in _abs.listdir(node, "slaves"):
        sdev = _device_dev(sys, slave)
        if sdev and (sd := resolve(sdev, root, _depth + 1)):
            slaves.append(sd)
    backing = None
    if kind == "loop":
        backing = _abs.read(node, "loop/backing_file")
        if backing and root == "/" and os.path.exists(backing):
            st = os.stat(backing)
            bd = resolve((os.major(st.st_dev), os.minor(st.st_dev)), root, _depth + 1)
            if bd:
                slaves.append(bd)
    rot = read_int(_abs.read(node, "queue/rotational"))
    return BlockDevice(
        name=name, kind=kind, rotational=None if rot is None else bool(rot),
        scheduler=_scheduler(_abs.read(node, "queue/scheduler")),
        nr_requests=read_int(_abs.read(node, "queue/nr_requests")),
        read_ahead_kb=read_int(_abs.read(node, "queue/read_ahead_kb")),
        size_bytes=_size(node), model=_abs.read(node, "device/model"),
        backing_file=backing, slaves=tuple(slaves))


def _size(node: str) -> Optional[int]:
    sectors = read_int(_abs.read(node, "size"))
    return sectors * 512 if sectors is not None else None


def _device_dev(sys: SysRoot, name: str) -> Optional[Tuple[int, int]]:
    text = sys.read("sys/class/block", name, "dev")
    if not text or ":" not in text:
        return None
    major, minor = text.split(":")
    return int(major), int(minor)
