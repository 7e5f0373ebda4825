"""Storage under a path: its file system, mount, devices, measured latencies and class."""
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, TypedDict

from .. import engine
from ..errors import EngineError
from ..models import storage as storage_model
from . import blockdev, mounts

# statfs f_type values (linux/magic.h) for the types git-tune cares about.
FS_MAGIC = {
    0xEF53: "ext2/3/4", 0x01021994: "tmpfs", 0x858458F6: "ramfs", 0x58465342: "xfs",
    0x9123683E: "btrfs", 0x2FC12FC1: "zfs", 0x6969: "nfs", 0x65735546: "fuse",
    0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x01021997: "9p", 0x00C36400: "ceph",
    0x794C7630: "overlay", 0x0BD00BD0: "lustre", 0x6A656A63: "virtiofs",
    0x5346544E: "ntfs", 0x4D44: "vfat", 0xF2F52010: "f2fs",
}
# Mount-table types whose statfs family above has another name; the rest are named alike.
MOUNT_FAMILY = {"ext2": "ext2/3/4", "ext3": "ext2/3/4", "ext4": "ext2/3/4", "nfs4": "nfs",
                "fuseblk": "fuse", "smb3": "smb2"}


def fstype_of(mount: Optional[mounts.Mount], magic: int) -> str:
    """The file system's type as the mount table names it ("ext4", "fuse.sshfs"), else,
    where no entry for it is visible (a chroot below its mount), its statfs family."""
    return mount.fstype if mount else FS_MAGIC.get(magic, hex(magic))


def fs_family(fstype: str) -> str:
    """The statfs family of a type as either source names it: "ext4" -> "ext2/3/4"."""
    base = fstype.split(".", 1)[0]
    return MOUNT_FAMILY.get(base, base)


def same_file_system(a: str, b: str) -> bool:
    """Whether two types name the same file system, either of them perhaps known only
    by its statfs family: equal, or a family and one of its members ("ext2/3/4" and
    "ext4", "fuse" and "fuse.sshfs"; not "fuse.sshfs" and "fuse.s3fs")."""
    families = set(FS_MAGIC.values())
    return a == b or ((a in families or b in families) and fs_family(a) == fs_family(b))


class Samples(TypedDict):
    """How many of each operation engine.latency() times."""
    samples: int
    fsync_samples: int
    cold_samples: int


QUICK = Samples(samples=200, fsync_samples=5, cold_samples=8)
THOROUGH = Samples(samples=2000, fsync_samples=20, cold_samples=32)
PILOT = Samples(samples=16, fsync_samples=1, cold_samples=1)


@dataclass(frozen=True)
class StorageReport:
    path: str
    fstype: str
    statfs_type: str
    mount_point: Optional[str]
    source: Optional[str]
    mount_options: Tuple[str, ...]
    network_options: Dict[str, str]
    fuse_subtype: Optional[str]
    read_only: bool
    dev: Tuple[int, int]
    devices: Tuple[Dict[str, Any], ...]
    rotational: Optional[bool]
    latency: Dict[str, Dict[str, Any]]
    measured: str                 # "scratch" | "read-only sample" | "none"
    storage_class: str
    evidence: Tuple[str, ...]
    notes: Tuple[str, ...]


def _latency_dicts(lat: Dict[str, engine.Latency]) -> Dict[str, Dict[str, Any]]:
    return {k: asdict(v) for k, v in lat.items() if v.count}


def _measure_read_only(sample_files: Sequence[str], base: str,
                       allowance: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
    """Only lookups can be measured where nothing may be written. With `allowance`, as
    many of the sample as a pilot of PILOT["samples"] lookups says fit half of it (the
    misses take the other half), each call stopped at the allowance and keeping the
    lookups it made: during a write-back, a whole sample's lookups can take many times
    the probe's share. The files measured follow the pilot's, whose lookups the cache
    now holds (their second lookup would time the cache, not the storage). A kind of
    lookup no call completed is left out."""
    if not sample_files:
        return {}
    files = list(sample_files)
    limits = engine.NO_LIMITS if allowance is None else engine.Limits(timeout=allowance)
    if allowance is not None:
        pilot, rest = files[:PILOT["samples"]], files[PILOT["samples"]:]
        ran = engine.preload(pilot, base=base, threads=1, limits=limits, partial=True)
        per = ran.wall / max(1, ran.done)
        n = max(len(pilot), int(allowance / 2 / per)) if per > 0 else len(rest)
        files = rest[:n] or pilot
    hit = engine.preload(files, base=base, threads=1, record_latency=True, limits=limits,
                         partial=True)
    miss = engine.preload([f + ".git-tune-missing" for f in files], base=base,
                          threads=1, record_latency=True, limits=limits, partial=True)
    return _latency_dicts({"lstat_hit": hit.latency, "lstat_miss": miss.latency})


def _sized(scratch: str, allowance: float) -> Samples:
    """QUICK's sample counts, fewer where a pilot run shows they would take longer than
    `allowance` seconds (1 ms a metadata operation makes QUICK take 2 s), never fewer
    than the pilot's."""
    t0 = time.perf_counter()
    engine.latency(scratch, **PILOT)
    per = (time.perf_counter() - t0) / PILOT["samples"]    # the pool's files included
    left = max(0.0, allowance - per * PILOT["samples"])
    scale = min(1.0, left / (per * QUICK["samples"])) if per > 0 else 1.0
    return Samples(samples=max(PILOT["samples"], int(QUICK["samples"] * scale)),
                   fsync_samples=max(PILOT["fsync_samples"], int(QUICK["fsync_samples"] * scale)),
                   cold_samples=max(PILOT["cold_samples"], int(QUICK["cold_samples"] * scale)))


def probe_storage(path: str, scratch: Optional[str], sample_files: Sequence[str] = (),
                  thorough: bool = False, root: str = "/",
                  mount_table: Optional[List[mounts.Mount]] = None,
                  allowance: Optional[float] = None,
                  unwritten: Optional[str] = None) -> StorageReport:
    """Describe and measure the storage holding `path`.

    Latencies come from the engine in `scratch`, a directory on the same
    file system (see scratch.scratch_dir); without one (a read-only file
    system) only lookups of `sample_files` (relative to path) are timed.
    With `allowance`, a quick probe sizes its samples to about that many seconds.
    `unwritten`: why no scratch was given, where it is not the file system's fault.
    """
    notes: List[str] = []
    info = engine.fs_info(path)
    mount = mounts.find_mount(path, mount_table if mount_table is not None else mounts.read_mounts(root),
                              info.dev)
    statfs_type = FS_MAGIC.get(info.magic, hex(info.magic))
    fstype = fstype_of(mount, info.magic)
    if mount is None:
        notes.append("no /proc/self/mountinfo entry for this path; type from statfs only")
    dev = mount.dev if mount else info.dev
    stack = blockdev.resolve(dev, root)
    leaves = stack.leaves() if stack else []
    rotational = any(l.rotational for l in leaves) if any(l.rotational is not None for l in leaves) else None

    latency: Dict[str, Dict[str, Any]] = {}
    measured = "none"
    params = THOROUGH if thorough else QUICK
    if scratch:
        try:
            if allowance is not None and not thorough:
                params = _sized(scratch, allowance)
            latency = _latency_dicts(engine.latency(scratch, **params))
            measured = "scratch"
        except EngineError as e:
            notes.append(f"latency measurement failed: {e.message}")
    if not latency:
        reason = unwritten or ("the file system is read-only" if info.read_only
                               else "no writable directory on it")
        notes.append(f"writes not measured: {reason}")
        try:
            latency = _measure_read_only(sample_files, path,
                                         None if thorough else allowance)
            measured = "read-only sample" if latency else "none"
        except EngineError as e:
            notes.append(f"lookup measurement failed: {e.message}")

    cls = storage_model.classify(fstype, latency, rotational)
    return StorageReport(
        path=path, fstype=fstype, statfs_type=statfs_type,
        mount_point=mount.mount_point if mount else None, source=mount.source if mount else None,
        mount_options=mount.options if mount else (),
        network_options=mount.network_options() if mount else {},
        fuse_subtype=mount.subtype if mount and mount.base_type == "fuse" else None,
        read_only=info.read_only, dev=dev,
        devices=tuple(asdict(d) for d in ([stack] if stack else [])), rotational=rotational,
        latency=latency, measured=measured, storage_class=cls.storage_class,
        evidence=cls.evidence, notes=tuple(notes) + cls.notes)
