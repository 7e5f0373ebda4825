"""The git-tune engine: Git's file-system hot paths, measured on this host.

Each function runs one C kernel (see gittune.h) and returns a frozen
dataclass. Engine failures raise EngineError with the engine's sentence;
Ctrl-C cancels the running kernel, which removes what it created.
"""
import os
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from . import _lib
from ..errors import EngineError

SPLIT_SLICES = "slices"
SPLIT_STREAMS = "streams"
_SPLITS = {SPLIT_SLICES: 0, SPLIT_STREAMS: 1}
ALLOC_MALLOC = "malloc"
ALLOC_POOL = "pool"
_ALLOCS = {ALLOC_MALLOC: 0, ALLOC_POOL: 1}
_REMOVE, _KEEP, _KEEP_DIRS = 0, 1, 2        # enum gt_checkout_keep
LATENCY_OPS = ("lstat_hit", "lstat_miss", "read_4k", "create", "fsync", "cold_read")
MAX_THREADS = _lib.MAX_THREADS


@dataclass(frozen=True)
class Latency:
    """A latency distribution in seconds, from the engine's log histogram."""

    count: int
    min: float
    max: float
    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def from_hist(cls, h: Any) -> "Latency":
        if not h.count:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        buckets = list(h.bucket)

        def quantile(q: float) -> float:
            target = q * h.count
            seen = 0
            for b, n in enumerate(buckets):
                seen += n
                if n and seen >= target:
                    lo, hi = _lib.hist_lower(b), _lib.hist_lower(b + 1)
                    mid = (lo * hi) ** 0.5 if lo else hi / 2
                    return float(min(max(mid, h.min_ns), h.max_ns)) / 1e9
            return float(h.max_ns) / 1e9

        return cls(int(h.count), h.min_ns / 1e9, h.max_ns / 1e9, h.sum_ns / h.count / 1e9,
                   quantile(0.5), quantile(0.9), quantile(0.99))


@dataclass(frozen=True)
class ThreadTiming:
    start: float
    end: float
    ops: int
    errors: int
    bytes: int


def _threads(array: Any, n: int) -> Tuple[ThreadTiming, ...]:
    return tuple(ThreadTiming(t.start_ns / 1e9, t.end_ns / 1e9, int(t.ops), int(t.errors),
                              int(t.bytes)) for t in array[:n])


@dataclass(frozen=True)
class PreloadResult:
    wall: float
    entries: int
    done: int
    errors: int
    threads: Tuple[ThreadTiming, ...]
    errors_by_errno: Dict[int, int]
    latency: Latency


@dataclass(frozen=True)
class CheckoutResult:
    wall: float                 # the workers writing the files
    remove: float
    files: int
    bytes: int
    dirs_created: int
    dirs: float                 # making the leading directories, before `wall`
    workers_used: int
    workers: Tuple[ThreadTiming, ...]


@dataclass(frozen=True)
class IndexResult:
    version: int
    entries: int
    file_bytes: int
    read: float
    checksum: float
    parse: float
    free: float
    peak_bytes: int
    allocations: int
    name_bytes: int
    threads_used: int
    has_eoie: bool
    has_ieot: bool
    ieot_blocks: int
    extensions: Tuple[str, ...]
    skip_hash: bool
    dirs: int
    max_depth: int
    size_histogram: Tuple[int, ...]  # [0]: empty files; [k]: 2**(k-1) <= size < 2**k
    gitlinks: int
    symlinks: int
    skip_worktree: int


@dataclass(frozen=True)
class SmallfileResult:
    create: float
    sync_create: float
    stat: float
    read: float
    remove: float
    sync_remove: float
    files: int
    dirs: int
    bytes: int


@dataclass(frozen=True)
class Limits:
    """Bounds for one engine call: seconds (0 = none) and bytes (0 = none)."""

    timeout: float = 0.0
    byte_budget: int = 0


NO_LIMITS = Limits()


def _path_list(paths: Sequence[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _enc(path: str) -> bytes:
    # The bytes the file system has: a name that is not UTF-8 round-trips (surrogateescape).
    return os.fsencode(path)


def version() -> int:
    return int(_lib.lib().gt_abi_version())


def library_path() -> str:
    return _lib.loaded_path()


def preload(paths: Sequence[str], base: Optional[str] = None, threads: int = 1,
            split: str = SPLIT_SLICES, io_streams: int = 1, batch: int = 500,
            record_latency: bool = False, limits: Limits = NO_LIMITS,
            partial: bool = False) -> PreloadResult:
    """lstat() every path with `threads` threads (see gt_preload_run). With `partial`, a
    run stopped by its timeout returns the entries done so far (`done` < `entries`) and
    the time they took, instead of EngineError."""
    opts = _lib.PreloadOpts(threads=threads, split=_SPLITS[split], io_streams=io_streams,
                            batch=batch, record_latency=int(record_latency))
    r = _lib.call("gt_preload_run",
                  (_enc(base) if base is not None else None, _path_list(paths), len(paths),
                   _lib.by_ref(opts)),
                  _lib.PreloadResult(), limits.timeout, limits.byte_budget, partial)
    by_errno = {e: int(n) for e, n in enumerate(r.errno_count) if n}
    return PreloadResult(r.wall_ns / 1e9, int(r.entries), int(r.done), int(r.errors),
                         _threads(r.thread, r.threads), by_errno, Latency.from_hist(r.latency))


def checkout(directory: str, paths: Sequence[str], sizes: Sequence[int], workers: int = 1,
             threshold: int = 100, fsync: bool = False, keep: bool = False,
             keep_dirs: bool = False, limits: Limits = NO_LIMITS) -> CheckoutResult:
    """Write files like Git's (parallel) checkout, then remove them unless keep, and the
    directories made unless keep or keep_dirs (then a later run on the same paths makes
    none, and leaves them). On error everything made is removed."""
    if len(sizes) != len(paths):
        raise ValueError("paths and sizes differ in length")
    opts = _lib.CheckoutOpts(workers=workers, threshold=threshold, fsync=int(fsync),
                             keep=_KEEP if keep else _KEEP_DIRS if keep_dirs else _REMOVE)
    r = _lib.call("gt_checkout_run",
                  (_enc(directory), _path_list(paths), _lib.u64_array(sizes), len(paths),
                   _lib.by_ref(opts)),
                  _lib.CheckoutResult(), limits.timeout, limits.byte_budget)
    return CheckoutResult(r.wall_ns / 1e9, r.remove_ns / 1e9, int(r.files), int(r.bytes),
                          int(r.dirs_created), r.dirs_ns / 1e9, r.workers_used,
                          _threads(r.worker, r.workers_used))


def _index_result(r: Any) -> IndexResult:
    sigs = tuple(bytes(r.ext_sig[i][:]).decode("latin-1") for i in range(min(r.extensions, 16)))
    return IndexResult(r.version, r.entries, int(r.file_bytes), r.read_ns / 1e9,
                       r.checksum_ns / 1e9, r.parse_ns / 1e9, r.free_ns / 1e9,
                       int(r.peak_bytes), int(r.allocations), int(r.name_bytes), r.threads_used,
                       bool(r.has_eoie), bool(r.has_ieot), r.ieot_blocks, sigs, bool(r.skip_hash),
                       r.dirs, r.max_depth, tuple(int(n) for n in r.size_hist), int(r.gitlinks),
                       int(r.symlinks), int(r.skip_worktree))


# `git rev-parse --show-object-format` -> enum gt_hash_id
_OBJECT_FORMATS = {"sha1": 0, "sha256": 1}


def _index_opts(threads: int, alloc: str, pool_block: int, verify_checksum: bool,
                object_format: str = "sha1") -> Any:
    if object_format not in _OBJECT_FORMATS:
        raise EngineError(-1, "GT_EINVAL", f"unknown object format {object_format!r}")
    return _lib.IndexOpts(threads=threads, alloc=_ALLOCS[alloc], pool_block=pool_block,
                          verify_checksum=int(verify_checksum),
                          hash_algo=_OBJECT_FORMATS[object_format])


def index_read(path: str, threads: int = 1, alloc: str = ALLOC_POOL, pool_block: int = 0,
               verify_checksum: bool = True, limits: Limits = NO_LIMITS,
               object_format: str = "sha1") -> IndexResult:
    """Read a Git index file and materialise its entries (see gt_index_read); the
    repository's object format says how long its hashes are (sha1 or sha256)."""
    opts = _index_opts(threads, alloc, pool_block, verify_checksum, object_format)
    r = _lib.call("gt_index_read", (_enc(path), _lib.by_ref(opts)), _lib.IndexResult(),
                  limits.timeout, limits.byte_budget)
    return _index_result(r)


def index_parse(data: bytes, threads: int = 1, alloc: str = ALLOC_POOL, pool_block: int = 0,
                verify_checksum: bool = True, limits: Limits = NO_LIMITS,
                object_format: str = "sha1") -> IndexResult:
    """Same as index_read, from bytes in memory."""
    opts = _index_opts(threads, alloc, pool_block, verify_checksum, object_format)
    r = _lib.call("gt_index_parse", (_lib.buffer_address(data), len(data), _lib.by_ref(opts)),
                  _lib.IndexResult(), limits.timeout, limits.byte_budget)
    return _index_result(r)


@dataclass(frozen=True)
class StatCheck:
    """The index's stat data against lstat, over a sample (gt_stat_check): how many
    entries differ in each field, and how many git's default checks find changed."""

    sampled: int
    missing: int
    mtime_sec: int
    mtime_nsec: int
    ctime_sec: int
    ctime_nsec: int
    ino: int
    dev: int
    owner: int
    size: int
    changed: int


def index_stat_check(path: str, base: str, sample: int = 200, object_format: str = "sha1",
                     limits: Limits = NO_LIMITS) -> StatCheck:
    """Compare up to `sample` entries' stat data in the index at `path` with lstat of
    their files below `base` (the work tree), field by field."""
    opts = _index_opts(1, ALLOC_POOL, 0, True, object_format)
    r = _lib.call("gt_index_stat_check", (_enc(path), _enc(base), _lib.by_ref(opts), sample),
                  _lib.StatCheck(), limits.timeout, limits.byte_budget)
    return StatCheck(*(int(getattr(r, field[0])) for field in _lib.StatCheck._fields_))


def index_write_synthetic(path: str, entries: int, version: int = 2, depth: int = 4,
                          width: int = 10, files: int = 9, ieot_blocks: int = 0,
                          limits: Limits = NO_LIMITS) -> None:
    """Write a many-files.sh shaped index (0 entries = the whole shape)."""
    shape = _lib.IndexShape(version=version, entries=entries, depth=depth, width=width,
                            files=files, ieot_blocks=ieot_blocks)
    _lib.call("gt_index_write_synthetic", (_enc(path), _lib.by_ref(shape)), None,
              limits.timeout, limits.byte_budget)


def smallfile(directory: str, files: int, file_size: int = 4096, per_dir: int = 10,
              sync: bool = False, limits: Limits = NO_LIMITS) -> SmallfileResult:
    """Create, stat, read and remove small files (seed 002)."""
    opts = _lib.SmallfileOpts(files=files, file_size=file_size, per_dir=per_dir, sync=int(sync))
    r = _lib.call("gt_smallfile_run", (_enc(directory), _lib.by_ref(opts)),
                  _lib.SmallfileResult(), limits.timeout, limits.byte_budget)
    return SmallfileResult(r.create_ns / 1e9, r.sync_create_ns / 1e9, r.stat_ns / 1e9,
                           r.read_ns / 1e9, r.remove_ns / 1e9, r.sync_remove_ns / 1e9,
                           int(r.files), int(r.dirs), int(r.bytes))


def latency(directory: str, samples: int = 200, fsync_samples: int = 5, cold_samples: int = 0,
            limits: Limits = NO_LIMITS) -> Dict[str, Latency]:
    """Per-operation latency distributions, keyed by LATENCY_OPS names."""
    r = _lib.call("gt_latency_run", (_enc(directory), samples, fsync_samples, cold_samples),
                  _lib.LatencyResult(), limits.timeout, limits.byte_budget)
    return {name: Latency.from_hist(r.op[i]) for i, name in enumerate(LATENCY_OPS)}


@dataclass(frozen=True)
class FsInfo:
    magic: int
    block_size: int
    blocks: int
    blocks_free: int
    read_only: bool
    dev: Tuple[int, int]
    name_max: int


ST_RDONLY = 1


def fs_info(path: str) -> FsInfo:
    """statfs() and the st_dev of path."""
    r = _lib.call_quick("gt_fs_info", (_enc(path),), _lib.FsInfo())
    return FsInfo(int(r.magic), int(r.block_size), int(r.blocks), int(r.blocks_free),
                  bool(r.flags & ST_RDONLY), (r.dev_major, r.dev_minor), r.name_max)


@dataclass(frozen=True)
class Residency:
    bytes: int
    pages: int
    resident: int

    @property
    def fraction(self) -> float:
        return self.resident / self.pages if self.pages else 1.0


def cache_residency(paths: Sequence[str], base: Optional[str] = None) -> Residency:
    """Page-cache residency summed over regular files (unreadable ones, and anything
    that is no regular file, are skipped). With `base`, paths are relative to it and
    opened beneath it without following links (a work tree's tracked paths)."""
    total = _lib.Residency()
    for p in paths:
        try:
            _lib.call_quick("gt_cache_residency",
                            (_enc(base) if base is not None else None, _enc(p)), total)
        except EngineError:
            continue
    return Residency(int(total.bytes), int(total.pages), int(total.resident))
