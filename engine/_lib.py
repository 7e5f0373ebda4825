"""ctypes declarations of libgittune.so: the only module that touches pointers.

Structures mirror gittune.h; after loading, their sizes are checked against
gt_sizeof() so a stale library fails loudly instead of corrupting memory.
"""
import ctypes
import os
import signal
import sys
import threading
from typing import Any, Optional, Sequence, Tuple
from ctypes import POINTER, c_char, c_char_p, c_int, c_size_t, c_uint32, c_uint64, c_void_p

from ..errors import EngineError, EngineLoadError

ABI_VERSION = 4
MAX_THREADS = 64
HIST_BUCKETS = 128
ERRNO_SLOTS = 160
LAT_NR = 6
SIZE_BUCKETS = 34
ERR_LEN = 512

STATUS_NAMES = {
    -1: "invalid-argument",
    -2: "system-error",
    -3: "out-of-memory",
    -4: "corrupt",
    -5: "cancelled",
    -6: "timed-out",
    -7: "over-budget",
}
CANCELLED = -5
TIMED_OUT = -6


class Ctl(ctypes.Structure):
    _fields_ = [("cancel", c_int), ("reserved", c_int),
                ("timeout_ns", c_uint64), ("byte_budget", c_uint64)]


class Hist(ctypes.Structure):
    _fields_ = [("count", c_uint64), ("min_ns", c_uint64), ("max_ns", c_uint64),
                ("sum_ns", c_uint64), ("bucket", c_uint64 * HIST_BUCKETS)]


class ThreadStat(ctypes.Structure):
    _fields_ = [("start_ns", c_uint64), ("end_ns", c_uint64), ("ops", c_uint64),
                ("errors", c_uint64), ("bytes", c_uint64)]


class PreloadOpts(ctypes.Structure):
    _fields_ = [("threads", c_int), ("split", c_int), ("io_streams", c_int),
                ("batch", c_int), ("record_latency", c_int), ("reserved", c_int)]


class PreloadResult(ctypes.Structure):
    _fields_ = [("wall_ns", c_uint64), ("entries", c_uint64), ("done", c_uint64),
                ("errors", c_uint64), ("threads", c_int), ("reserved", c_int),
                ("thread", ThreadStat * MAX_THREADS),
                ("errno_count", c_uint64 * ERRNO_SLOTS), ("latency", Hist)]


class CheckoutOpts(ctypes.Structure):
    _fields_ = [("workers", c_int), ("threshold", c_int), ("fsync", c_int), ("keep", c_int)]


class CheckoutResult(ctypes.Structure):
    _fields_ = [("wall_ns", c_uint64), ("remove_ns", c_uint64), ("dirs_ns", c_uint64),
                ("files", c_uint64), ("bytes", c_uint64), ("dirs_created", c_uint64),
                ("workers_used", c_int),
                ("reserved", c_int), ("worker", ThreadStat * MAX_THREADS)]


class IndexOpts(ctypes.Structure):
    _fields_ = [("threads", c_int), ("alloc", c_int), ("pool_block", c_uint64),
                ("verify_checksum", c_int), ("hash_algo", c_int)]


class IndexResult(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("entries", c_uint32), ("file_bytes", c_uint64),
                ("read_ns", c_uint64), ("checksum_ns", c_uint64), ("parse_ns", c_uint64),
                ("free_ns", c_uint64), ("peak_bytes", c_uint64), ("allocations", c_uint64),
                ("name_bytes", c_uint64), ("threads_used", c_int), ("has_eoie", c_int),
                ("has_ieot", c_int), ("ieot_blocks", c_int), ("extensions", c_int),
                ("skip_hash", c_int), ("ext_sig", (c_char * 4) * 16),
                ("dirs", c_uint32), ("max_depth", c_uint32),
                ("size_hist", c_uint64 * SIZE_BUCKETS), ("gitlinks", c_uint64),
                ("symlinks", c_uint64), ("skip_worktree", c_uint64)]


class IndexShape(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("entries", c_uint32), ("depth", c_int),
                ("width", c_int), ("files", c_int), ("ieot_blocks", c_int)]


class SmallfileOpts(ctypes.Structure):
    _fields_ = [("files", c_uint64), ("file_size", c_uint64), ("per_dir", c_uint32),
                ("sync", c_int)]


class SmallfileResult(ctypes.Structure):
    _fields_ = [("create_ns", c_uint64), ("sync_create_ns", c_uint64), ("stat_ns", c_uint64),
                ("read_ns", c_uint64), ("remove_ns", c_uint64), ("sync_remove_ns", c_uint64),
                ("files", c_uint64), ("dirs", c_uint64), ("bytes", c_uint64)]


class LatencyResult(ctypes.Structure):
    _fields_ = [("op", Hist * LAT_NR)]


class FsInfo(ctypes.Structure):
    _fields_ = [("magic", c_uint64), ("block_size", c_uint64), ("blocks", c_uint64),
                ("blocks_free", c_uint64), ("flags", c_uint64), ("dev_major", c_uint32),
                ("dev_minor", c_uint32), ("name_max", c_uint32), ("reserved", c_int)]


class Residency(ctypes.Structure):
    _fields_ = [("bytes", c_uint64), ("pages", c_uint64), ("resident", c_uint64)]


class StatCheck(ctypes.Structure):
    _fields_ = [(name, c_uint32) for name in (
        "sampled", "missing", "mtime_sec", "mtime_nsec", "ctime_sec", "ctime_nsec",
        "ino", "dev", "owner", "size", "changed")]


_CTL = POINTER(Ctl)
_ERR = (c_char_p, c_size_t)

# name: (restype, argtypes); every entry point is declared here and only here.
_FUNCTIONS = {
    "gt_abi_version": (c_int, ()),
    "gt_sizeof": (c_size_t, (c_char_p,)),
    "gt_strstatus": (c_char_p, (c_int,)),
    "gt_hist_lower": (c_uint64, (c_int,)),
    "gt_ctl_init": (None, (_CTL, c_uint64, c_uint64)),
    "gt_ctl_cancel": (None, (_CTL,)),
    "gt_preload_run": (c_int, (c_char_p, c_char_p, c_size_t, POINTER(PreloadOpts), _CTL,
                               POINTER(PreloadResult)) + _ERR),
    "gt_checkout_run": (c_int, (c_char_p, c_char_p, POINTER(c_uint64), c_size_t,
                                POINTER(CheckoutOpts), _CTL, POINTER(CheckoutResult)) + _ERR),
    "gt_index_read": (c_int, (c_char_p, POINTER(IndexOpts), _CTL, POINTER(IndexResult)) + _ERR),
    "gt_index_parse": (c_int, (c_void_p, c_size_t, POINTER(IndexOpts), _CTL,
                               POINTER(IndexResult)) + _ERR),
    "gt_index_write_synthetic": (c_int, (c_char_p, POINTER(IndexShape), _CTL) + _ERR),
    "gt_smallfile_run": (c_int, (c_char_p, POINTER(SmallfileOpts), _CTL,
                                 POINTER(SmallfileResult)) + _ERR),
    "gt_latency_run": (c_int, (c_char_p, c_uint32, c_uint32, c_uint32, _CTL,
                               POINTER(LatencyResult)) + _ERR),
    "gt_fs_info": (c_int, (c_char_p, POINTER(FsInfo)) + _ERR),
    "gt_cache_residency": (c_int, (c_char_p, c_char_p, POINTER(Residency)) + _ERR),
    "gt_index_stat_check": (c_int, (c_char_p, c_char_p, POINTER(IndexOpts), c_uint32, _CTL,
                                    POINTER(StatCheck)) + _ERR),
}

_STRUCTS = {
    "struct gt_ctl": Ctl, "struct gt_hist": Hist, "struct gt_thread_stat": ThreadStat,
    "struct gt_preload_opts": PreloadOpts, "struct gt_preload_result": PreloadResult,
    "struct gt_checkout_opts": CheckoutOpts, "struct gt_checkout_result": CheckoutResult,
    "struct gt_index_opts": IndexOpts, "struct gt_index_result": IndexResult,
    "struct gt_stat_check": StatCheck,
    "struct gt_index_shape": IndexShape, "struct gt_smallfile_opts": SmallfileOpts,
    "struct gt_smallfile_result": SmallfileResult, "struct gt_latency_result": LatencyResult,
    "struct gt_fs_info": FsInfo, "struct gt_residency": Residency,
}

_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_load_lock = threading.Lock()


def library_path() -> str:
    """Where the library is loaded from: $GIT_TUNE_ENGINE, the frozen bundle, or beside this file."""
    override = os.environ.get("GIT_TUNE_ENGINE")
    if override:
        return override
    if getattr(sys, "frozen", False):
        return os.path.join(getattr(sys, "_MEIPASS"), "git_tune", "engine", "libgittune.so")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgittune.so")


def lib() -> ctypes.CDLL:
    """Load libgittune.so once, declare every function, check ABI and struct sizes."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _load_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise EngineLoadError(f"cannot load the git-tune engine '{path}': {e}") from None
        for name, (restype, argtypes) in _FUNCTIONS.items():
            try:
                fn = getattr(handle, name)
            except AttributeError:
                raise EngineLoadError(
                    f"the engine '{path}' lacks {name}(): it is not libgittune "
                    f"ABI {ABI_VERSION}") from None
            fn.restype = restype
            fn.argtypes = argtypes
        found = handle.gt_abi_version()
        if found != ABI_VERSION:
            raise EngineLoadError(
                f"the engine '{path}' has ABI {found} but this git-tune needs ABI {ABI_VERSION}; "
                "reinstall git-tune or unset GIT_TUNE_ENGINE")
        for cname, struct in _STRUCTS.items():
            size = handle.gt_sizeof(cname.encode())
            if size != ctypes.sizeof(struct):
                raise EngineLoadError(
                    f"the engine '{path}' lays out {cname} in {size} bytes, "
                    f"the binding expects {ctypes.sizeof(struct)}")
        _lib, _lib_path = handle, path
        return _lib


def loaded_path() -> str:
    lib()
    assert _lib_path is not None    # lib() has loaded it, or raised
    return _lib_path


def _check(status: int, err: "ctypes.Array[c_char]") -> None:
    """Turn a negative engine status into EngineError carrying the C message."""
    if status >= 0:
        return
    message = err.value.decode("utf-8", "replace")
    raise EngineError(status, STATUS_NAMES.get(status, f"status {status}"), message)


def call(name: str, args: Tuple[Any, ...], result: Any, timeout_s: float = 0.0,
         byte_budget: int = 0, partial: bool = False) -> Any:
    """Call `name(*args, ctl, &result, err, errlen)` (no &result when it is None).
    With `partial`, a call stopped by its timeout returns the result it filled so far
    (what the kernel measured before the deadline) instead of raising.

    From the main thread the call runs in a helper thread (ctypes drops the
    GIL), so Ctrl-C lands here: it sets the call's cancel flag, waits for the
    engine to stop and clean up (it polls every few ms), then re-raises.
    """
    handle = lib()
    fn = getattr(handle, name)
    ctl = Ctl()
    handle.gt_ctl_init(ctypes.byref(ctl), int(max(timeout_s, 0) * 1e9), int(max(byte_budget, 0)))
    err = ctypes.create_string_buffer(ERR_LEN)
    tail = (ctypes.byref(result),) if result is not None else ()
    outcome = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["status"] = fn(*args, ctypes.byref(ctl), *tail, err, ERR_LEN)
        finally:
            done.set()

    if threading.current_thread() is not threading.main_thread():
        target()  # only the main thread receives KeyboardInterrupt
    else:
        # An Event, not Thread.join: a join interrupted by Ctrl-C can return
        # early on the next call (CPython gh-90882), before the engine cleaned up.
        worker = threading.Thread(target=target, name="git-tune-engine", daemon=True)
        try:
            # Thread.start() waits for the thread to run: a Ctrl-C there escaped the
            # cancel below while the engine went on writing into the scratch directory
            # being removed. SIGINT is held until start() returns, then raised here.
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                worker.start()
            except RuntimeError:
                # No thread to be had (a cgroup's pids.max, reached by the git runs
                # around us): the call runs here, where Ctrl-C waits for its end, and the
                # engine says itself if it cannot start its own threads.
                target()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
            while not done.wait(0.02):
                pass
            if worker.ident is not None:
                # Ended, not only done: under a pid limit a lingering thread is a task
                # the next git is refused for.
                worker.join()
        except KeyboardInterrupt:
            if worker.ident is not None:        # started: stop it and wait for its clean-up
                handle.gt_ctl_cancel(ctypes.byref(ctl))
                while not done.wait(0.02):
                    pass
            raise
    if not (partial and outcome["status"] == TIMED_OUT):
        _check(outcome["status"], err)
    return result


def call_quick(name: str, args: Tuple[Any, ...], result: Any) -> Any:
    """Call a short, uncancellable `name(*args, &result, err, errlen)`."""
    err = ctypes.create_string_buffer(ERR_LEN)
    _check(getattr(lib(), name)(*args, ctypes.byref(result), err, ERR_LEN), err)
    return result


def by_ref(struct: Any) -> Any:
    return ctypes.byref(struct)


def u64_array(values: Sequence[int]) -> Any:
    return (c_uint64 * len(values))(*values)


def hist_lower(bucket: int) -> int:
    return int(lib().gt_hist_lower(bucket))


def buffer_address(data: bytes) -> c_void_p:
    """A pointer to an immutable bytes object, valid while `data` lives."""
    return ctypes.cast(ctypes.c_char_p(data), c_void_p)
