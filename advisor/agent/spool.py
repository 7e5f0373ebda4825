"""git's event files, read into records once their command has ended, then deleted.

trace2's directory target makes git write each process's events to a file of its own
in the spool (trace2.eventTarget), named after the last component of its session id
(EVENT_NAME). No process has to be listening: git never waits for the agent, and a
collector that died costs git nothing. trace2.maxFiles bounds the spool: at MAX_FILES
entries git writes a sentinel and stops tracing there until ingest() has emptied it.

The files hold the raw events, argument values included, in a 0700 directory of
git-tune's own, only until ingest() reads them; the records keep what
events.reduce() lets through, nothing else. The spool is in the user's runtime
directory where there is one ($XDG_RUNTIME_DIR: memory, the user's alone, gone at
logout), else in git-tune's state directory. Never a shared directory such as
/dev/shm: after a reboot anyone could create the path first and read the events.

What the spool's path may be is fixed (spool_places): a path read from the agent's
state is used only where it is one of them. The directory is opened O_NOFOLLOW and
checked on its descriptor; names are listed, read and removed relative to that
descriptor, and only names of git's event-file form (and git's sentinel) are ever
removed. Anything else found there is counted and left.
"""
import os
import re
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional

from ... import ownpaths
from . import events, store
from ..write import safefile
from ...errors import UnsafeState

MAX_FILES = 1000            # trace2.maxFiles, the spool in memory
# On disk the raw events (argv: commit messages, -c values, URLs) rest on a disk until
# read: while no collector runs, at most this many commands' worth.
MAX_FILES_ON_DISK = 100
MEMORY_FS = ("tmpfs", "ramfs")
SENTINEL = "git-trace2-discard"
STALE = 600.0               # a file unfinished this long: a killed git; read as it is
MAX_READ = 4 << 20          # bytes read of one file (a command's events are a few KiB)
# trace2/tr2_sid.c and tr2_dst.c: "<UTC yyyymmddThhmmss.uuuuuuZ>-H<8 hex>|Localhost-P<8
# hex>", then ".1" to ".9" where that name was taken.
EVENT_NAME = re.compile(r"\d{8}T\d{6}\.\d{6}Z-(?:H[0-9a-f]{8}|Localhost)-P[0-9a-f]{8}"
                        r"(?:\.\d{1,2})?\Z")
RUNTIME_SUBDIR = "git-tune"


@dataclass(frozen=True)
class Ingested:
    read: int               # event files read and removed
    kept: int               # records stored (commands of the repositories watched)
    waiting: int            # files of commands still running
    discarded: bool         # git had found the spool full and stopped tracing
    bad: int = 0            # event files that held no command git-tune could read: removed
    foreign: int = 0        # entries that are not git's event files: left alone
    replaced_file: bool = False   # the spool had been a file (git's events after the
                                  # directory was removed): removed, the directory made anew


def spool_places() -> List[str]:
    """Where a spool of git-tune's may be: the runtime directory's, the state's."""
    runtime = ownpaths.runtime_dir()
    places = [os.path.join(store.agent_dir(), "spool")]
    if runtime:
        places.insert(0, os.path.join(runtime, RUNTIME_SUBDIR, "spool"))
    return places


def in_memory(path: str) -> bool:
    """Whether `path` lies on a memory file system (gone at reboot, never on a disk)."""
    from ...probes import mounts
    try:
        mount = mounts.find_mount(path, mounts.read_mounts())
    except OSError:
        return False
    return mount is not None and mount.base_type in MEMORY_FS


def max_files(path: str) -> int:
    """trace2.maxFiles for a spool at `path`."""
    return MAX_FILES if in_memory(path) else MAX_FILES_ON_DISK


def spool_dir() -> str:
    """Where a new `agent enable` routes the events (agent state keeps the one in use)."""
    return spool_places()[0]


def is_own_place(path: str) -> bool:
    """Whether `path` (from the agent's state) is a place a spool of git-tune's may be:
    one of spool_places(), or `<a runtime directory of the user's>/git-tune/spool` (the
    session that enabled the agent may have had another $XDG_RUNTIME_DIR)."""
    if not isinstance(path, str) or not os.path.isabs(path) or path != os.path.normpath(path):
        return False
    if path in spool_places():
        return True
    runtime, sub = os.path.split(os.path.dirname(path))
    if os.path.basename(path) != "spool" or sub != RUNTIME_SUBDIR:
        return False
    try:
        st = os.lstat(runtime)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
            and not st.st_mode & 0o077 and os.path.realpath(path) == path)


def ensure(path: str) -> str:
    """The spool directory at `path`, made 0700 (again after a reboot emptied the runtime
    dir); UnsafeState where `path` is no place of git-tune's, or fails ownpaths' check."""
    _prepare(path)
    return path


def _prepare(path: str) -> bool:
    """ensure(); True where a file stood at the spool's path (git appends every command's
    events to one file named like the spool once its directory is gone) and was removed."""
    if not is_own_place(path):
        raise UnsafeState(f"'{path}' is not where git-tune keeps its spool; the agent's "
                          "state is refused (run `git-tune agent disable`, then enable)")
    parent = ownpaths.private_dir(os.path.dirname(path))
    replaced = False
    with ownpaths.dir_fd(parent) as pfd:
        try:
            st = os.stat("spool", dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            # In git-tune's own 0700 directory, at the spool's own name: git's events.
            os.unlink("spool", dir_fd=pfd)
            replaced = True
        if st is None or replaced:
            try:
                os.mkdir("spool", 0o700, dir_fd=pfd)
            except FileExistsError:
                pass
    ownpaths.private_dir(path)
    return replaced


@contextmanager
def _exclusive() -> Iterator[bool]:
    """One ingester at a time (the collector and a `git-tune agent` command); the other
    skips: the files wait for the next round, never read twice."""
    fd = ownpaths.try_lock(os.path.join(store.agent_dir(), "ingest.lock"))
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)


def _remove(dfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        pass        # a directory, or gone already


def ingest(d: str, watched: Optional[Iterable[str]], tuned: Iterable[str]) -> Ingested:
    """Read every finished event file of spool `d` into records of the watched work
    trees (None: every repository), one file at a time: its record is stored, then the
    file removed, so a kill loses nothing (at most one record is stored twice). A file
    that holds no command git-tune can read is removed as well (`bad`); names that are
    not git's are left alone (`foreign`). Re-opens the spool if git closed it."""
    tuned = list(tuned)
    watched = None if watched is None else {os.path.realpath(w) for w in watched}
    replaced = _prepare(d)
    read = waiting = bad = foreign = kept = 0
    with _exclusive() as mine:
        if not mine:
            return Ingested(0, 0, 0, False, replaced_file=replaced)
        with ownpaths.dir_fd(d) as dfd:
            now = time.time()
            discarded = False
            for name in sorted(os.listdir(dfd)):
                if name == SENTINEL:
                    discarded = True
                    continue
                if not EVENT_NAME.match(name):
                    foreign += 1
                    continue
                data = safefile.read_regular(name, MAX_READ, follow=False, dir_fd=dfd)
                if data is None:
                    _remove(dfd, name)          # a FIFO or link under git's name
                    bad += 1
                    continue
                try:
                    mtime = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mtime
                except OSError:
                    continue
                if b'"event":"atexit"' not in data and now - mtime < STALE:
                    waiting += 1
                    continue
                record = _reduce(data, tuned, now)
                if record is None:
                    bad += 1
                elif watched is None or (record.repo and os.path.realpath(record.repo)
                                         in watched):
                    store.append([record])
                    kept += 1
                _remove(dfd, name)
                read += 1
            if discarded:
                _remove(dfd, SENTINEL)
                _count_discard()
    return Ingested(read, kept, waiting, discarded, bad, foreign, replaced)


DISCARDS = "spool-full.log"


def _count_discard() -> None:
    """One line a time git found the spool full and stopped tracing (status counts)."""
    fd = os.open(os.path.join(store.agent_dir(), DISCARDS),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, b"%.0f\n" % time.time())
    finally:
        os.close(fd)


def discards() -> List[float]:
    """When git found the spool full and stopped tracing (commands then went unrecorded
    until the spool was read)."""
    try:
        data = ownpaths.read_file(os.path.join(store.agent_dir(), DISCARDS), limit=1 << 20)
    except UnsafeState:
        return []
    out = []
    for line in (data or b"").splitlines()[-1000:]:
        try:
            out.append(float(line))
        except ValueError:
            continue
    return out


def _reduce(data: bytes, tuned: List[str], now: float) -> Optional[events.Command]:
    """The file's record; None where it holds none (a nested git, damaged bytes)."""
    try:
        return events.reduce(data.decode("utf-8", "surrogateescape").splitlines(), tuned, now)
    except Exception:       # noqa: BLE001 - a file no reader foresaw is dropped, not fatal
        return None


def pending(d: str) -> int:
    """Event files waiting in spool `d` (0 where it cannot be read as git-tune's)."""
    try:
        with ownpaths.dir_fd(d) as dfd:
            return sum(1 for n in os.listdir(dfd) if EVENT_NAME.match(n))
    except (OSError, UnsafeState):
        return 0


def clear(d: str) -> None:
    """Remove every event file of spool `d`, and git's sentinel (nothing else)."""
    if not d or not is_own_place(d):
        return
    try:
        with ownpaths.dir_fd(d) as dfd:
            for name in os.listdir(dfd):
                if name == SENTINEL or EVENT_NAME.match(name):
                    _remove(dfd, name)
    except (OSError, UnsafeState):
        return
