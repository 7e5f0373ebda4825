"""Scratch directories on a given file system, always removed.

A run killed with SIGKILL cannot clean up after itself, so the next run in the
same place removes what dead runs left. Whether a scratch directory's run is
alive is asked of a lock, not of a pid: its run holds an flock on the
directory's `.alive` file for as long as the directory is in use. A pid names
a process only in its own pid namespace (CI containers sharing a workspace
with the host), and the kernel drops the flock of a process however it ends.
The file is locked before it takes its name, so one found unlocked is of a run
that ended. Directories without the file (older git-tune, or one being made
this instant) fall back to the pid in their name (`.git-tune-scratch-<pid>-XXXX`).
"""
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar

PREFIX = ".git-tune-scratch-"
# Removal is untimed housekeeping, but where each unlink is a round trip to a server it
# is a large share of a part run's wall and of the scratch directory's removal. Where
# the first removal, timed, prices the rest above POOL_WORTH seconds (a pool's own
# start), the rest go REMOVE_THREADS at a time (docs/planner.md, "Removal").
POOL_WORTH = 0.02
REMOVE_THREADS = 16


def _dev(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.major(st.st_dev), os.minor(st.st_dev)


def owner_alive(name: str, prefix: str) -> bool:
    """Whether the process a `<prefix><pid>-...` name was made by still runs.

    Names that carry no pid (older git-tune) count as alive: they are left alone.
    """
    pid_text = name[len(prefix):].split("-", 1)[0]
    if not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True   # another user's live process
    return True


def listdir(directory: str) -> List[str]:
    """The names in directory ([] when it cannot be listed)."""
    try:
        return os.listdir(directory)
    except OSError:
        return []


ALIVE = ".alive"


def hold_alive(path: str) -> int:
    """Mark the scratch directory path in use until the returned descriptor is closed
    (or its process ends, however).

    The file is locked under another name and only then renamed into place: another
    run's remove_dead() that finds `.alive` unlocked must be able to trust that its run
    is gone, so `.alive` never exists unlocked while its run lives."""
    pending = os.path.join(path, ALIVE + f".{os.getpid()}")
    fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(pending, os.path.join(path, ALIVE))
    except OSError:
        os.close(fd)
        raise
    return fd


def _in_use(path: str, name: str, prefix: str) -> bool:
    """Whether a live run still uses the scratch directory `path`."""
    try:
        fd = os.open(os.path.join(path, ALIVE), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        # Made this instant (its run is locking `.alive`), or by an older git-tune.
        return owner_alive(name, prefix)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True     # held: its run is alive, in whatever pid namespace
    finally:
        os.close(fd)


def remove_dead(directory: str, prefix: str = PREFIX) -> None:
    """Remove what runs that no longer run left in directory under `prefix`."""
    for name in listdir(directory):
        if not name.startswith(prefix):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            if not _in_use(path, name, prefix):
                shutil.rmtree(path, ignore_errors=True)
        elif not owner_alive(name, prefix):
            with contextlib.suppress(OSError):
                os.unlink(path)


T = TypeVar("T")


def _each(fn: Callable[[str], T], paths: Sequence[str]) -> List[T]:
    """fn on every path, in order: the first alone and timed, the rest in a pool where
    the first prices them above POOL_WORTH, else (or where no thread can start) one at
    a time. fn must bear being called twice on a path: a pool that fails half way is
    done again one at a time."""
    if not paths:
        return []
    t0 = time.monotonic()
    out = [fn(paths[0])]
    rest = paths[1:]
    if rest and (time.monotonic() - t0) * len(rest) > POOL_WORTH:
        try:
            with ThreadPoolExecutor(min(REMOVE_THREADS, len(rest))) as pool:
                return out + list(pool.map(fn, rest))
        except RuntimeError:
            pass    # no thread could start (a pid limit): one at a time, from the first
    return out + [fn(p) for p in rest]


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def remove_files(paths: Sequence[str]) -> None:
    """Unlink every path (one already missing is fine; any other error is raised)."""
    _each(_unlink, list(paths))


def remove_leading_directories(root: str, paths: Sequence[str]) -> None:
    """Remove the leading directories of `paths` (relative to `root`), which must hold
    nothing else by now: known, they need no listing, and they go a depth at a time,
    deepest first, many at a time where each is a round trip (_each). One that holds
    something else stays, as do its parents."""
    levels: Dict[int, Set[str]] = {}
    for p in paths:
        parts = p.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            levels.setdefault(depth, set()).add("/".join(parts[:depth]))
    for depth in sorted(levels, reverse=True):
        _each(_quietly(os.rmdir), [os.path.join(root, d) for d in sorted(levels[depth])])


def _listing(directory: str) -> Tuple[List[str], List[str]]:
    """(what is not a directory, the directories) in directory, never following a
    symbolic link; nothing where it cannot be listed."""
    files: List[str] = []
    dirs: List[str] = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    is_dir = e.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                (dirs if is_dir else files).append(e.path)
    except OSError:
        pass
    return files, dirs


def _quietly(fn: Callable[[str], None]) -> Callable[[str], None]:
    def call(p: str) -> None:
        with contextlib.suppress(OSError):
            fn(p)
    return call


def remove_tree(path: str) -> None:
    """Remove the directory `path` and everything below it, never following a symbolic
    link, ignoring errors (shutil.rmtree's contract): listed one depth at a time, the
    files removed, then the directories, deepest first; where the storage makes each
    of these a round trip, many at a time (_each)."""
    if os.path.islink(path) or not os.path.isdir(path):
        _quietly(os.unlink)(path)
        return
    files: List[str] = []
    levels: List[List[str]] = []
    level = [path]
    while level:
        levels.append(level)
        level = []
        for found, dirs in _each(_listing, levels[-1]):
            files += found
            level += dirs
    _each(_quietly(os.unlink), files)
    for directories in reversed(levels):
        _each(_quietly(os.rmdir), directories)
    # Whatever appeared meanwhile or could not be removed in the passes above.
    shutil.rmtree(path, ignore_errors=True)


def _own(directory: str, mine: str) -> Set[str]:
    return {n for n in listdir(directory) if n.startswith(mine)}


@contextlib.contextmanager
def interruptions_held() -> Iterator[None]:
    """Run the block to its end even where Ctrl-C or SIGTERM arrives in it (a scratch
    directory's removal), then raise KeyboardInterrupt for what arrived. Only the main
    thread receives signals; elsewhere the block simply runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: List[int] = []
    before = {sig: signal.signal(sig, lambda n, _f: arrived.append(n))
              for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:       # None: one set outside Python, left as it was
                signal.signal(sig, handler)
    if arrived:
        raise KeyboardInterrupt


@contextlib.contextmanager
def made_here(directory: str, prefix: str) -> Iterator[None]:
    """Around the making of a name `<prefix><pid>-...` in directory (mkdtemp, mkstemp):
    where the block raises, an interruption (Ctrl-C, SIGTERM) included, every such name
    of this process's that appeared in directory meanwhile is removed, the one whose
    maker was interrupted before it returned it too. Names of this process's that were
    there before are left alone."""
    mine = f"{prefix}{os.getpid()}-"
    had = _own(directory, mine)
    try:
        yield
    except BaseException:
        for name in _own(directory, mine) - had:
            remove_tree(os.path.join(directory, name))
        raise


@contextlib.contextmanager
def scratch_dir(candidates: Iterable[str], same_fs_as: Optional[str] = None) -> Iterator[Optional[str]]:
    """Yield a new directory in the first writable candidate on the same file
    system as `same_fs_as` (None when there is none: a read-only file
    system, no permission). The directory and everything in it is removed
    on exit, including on Ctrl-C, SIGTERM and errors, at whatever point of its making."""
    want = _dev(same_fs_as) if same_fs_as else None
    made: Optional[str] = None
    alive: Optional[int] = None
    try:
        for c in candidates:
            if not c or not os.path.isdir(c) or (want and _dev(c) != want):
                continue
            remove_dead(c)
            try:
                with made_here(c, PREFIX):
                    made = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=c)
                    alive = hold_alive(made)
                break
            except OSError:
                made = None       # made_here removed it
        yield made
    finally:
        with interruptions_held():
            if made:
                remove_tree(made)
            if alive is not None:
                os.close(alive)


@contextlib.contextmanager
def one_measurement_at_a_time(common_dir: str) -> Iterator[None]:
    """Wait for any other git-tune timing this repository, then hold it off until done:
    two runs on one repository would each time git under the other's load. The lock is
    an flock in the user's runtime directory (a dry run writes no cache), keyed by the
    repository's common git directory (its worktrees share it), dropped by the kernel
    however its process ends."""
    directory = os.path.join(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(),
                             f"git-tune-measuring-{os.getuid()}")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.lstat(directory).st_uid != os.getuid():
            raise PermissionError(directory)     # another user's: no lock to share
        fd = os.open(os.path.join(directory, hashlib.sha256(os.fsencode(common_dir)).hexdigest()[:24]),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield          # no cache to lock in: measure, unserialised
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

