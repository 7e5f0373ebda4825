"""git's event files, read into records once their command has ended, then deleted.

trace2's directory target makes git write each process's events to a file of its own
in the spool (trace2.eventTarget). No process has to be listening: git never waits for
the agent, and a collector that died costs git nothing (measured in
bench/agent_overhead.py). trace2.maxFiles bounds the spool: at MAX_FILES files git
writes a sentinel and stops tracing there until ingest() has emptied it.

The files hold the raw events, argument values included, in a 0700 directory, only
until ingest() reads them (the collector does every POLL seconds); the records keep
what events.reduce() lets through, nothing else. The spool is in the user's runtime
directory where there is one ($XDG_RUNTIME_DIR: memory, the user's alone, gone at
logout), else in git-tune's state directory: creating a file per command cost git
0.29 ms on tmpfs and 0.50-0.70 ms on the ext4 disk, against 0.24 ms for the same events
sent to /dev/null (bench/agent_overhead.py). Never a shared directory such as
/dev/shm: after a reboot anyone could create the path first and read the events.
"""
import fcntl
import os
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, List, Optional

from git_tune.advisor.agent import events, store
from git_tune.advisor.write import safefile

MAX_FILES = 1000            # trace2.maxFiles
SENTINEL = "git-trace2-discard"
STALE = 600.0               # a file unfinished this long: a killed git; read as it is
MAX_READ = 4 << 20          # bytes read of one file (a command's events are a few KiB)


@dataclass(frozen=True)
class Ingested:
    read: int               # event files read and removed
    kept: int               # records stored (commands of the repositories watched)
    waiting: int            # files of commands still running
    discarded: bool         # git had found the spool full and stopped tracing


def _runtime_dir() -> Optional[str]:
    """$XDG_RUNTIME_DIR where it is the user's own (owned, 0700), else None."""
    path = os.environ.get("XDG_RUNTIME_DIR")
    try:
        st = os.stat(path) if path and os.path.isabs(path) else None
    except OSError:
        return None
    if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() \
            or st.st_mode & 0o077:
        return None
    return path


def spool_dir() -> str:
    """Where a new `agent enable` routes the events (agent state keeps the one in use)."""
    runtime = _runtime_dir()
    return os.path.join(runtime, "git-tune", "spool") if runtime else \
        os.path.join(store.agent_dir(), "spool")


def ensure(path: str) -> str:
    """The spool directory, made 0700 (again after a reboot emptied the runtime dir)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


@contextmanager
def _exclusive():
    """One ingester at a time (the collector and a `git-tune agent` command); the other
    skips: the files wait for the next round, never read twice."""
    fd = os.open(os.path.join(store.agent_dir(), "ingest.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    """Unlink a file (a directory someone made here is left: git ignores it too)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def ingest(d: str, watched: Optional[Iterable[str]], tuned: Iterable[str]) -> Ingested:
    """Read every finished event file of spool `d` into records of the watched work
    trees (None: every repository), remove the files read, and re-open the spool if git
    closed it."""
    tuned = list(tuned)
    watched = None if watched is None else {os.path.realpath(w) for w in watched}
    ensure(d)
    kept: List[events.Command] = []
    read = waiting = 0
    with _exclusive() as mine:
        if not mine:
            return Ingested(0, 0, 0, False)
        now = time.time()
        names = [n for n in os.listdir(d) if n != SENTINEL]
        for name in names:
            path = os.path.join(d, name)
            data = safefile.read_regular(path, MAX_READ, follow=False)
            if data is None:
                _remove(path)           # not git's: nothing else belongs here
                continue
            done = b'"event":"atexit"' in data
            if not done and now - os.lstat(path).st_mtime < STALE:
                waiting += 1
                continue
            record = events.reduce(data.decode("utf-8", "surrogateescape").splitlines(), tuned, now)
            _remove(path)
            read += 1
            if record and (watched is None or (record.repo and os.path.realpath(record.repo)
                                               in watched)):
                kept.append(record)
        store.append(kept)
        discarded = os.path.lexists(os.path.join(d, SENTINEL))
        if discarded:
            _remove(os.path.join(d, SENTINEL))
    return Ingested(read, len(kept), waiting, discarded)


def pending(d: str) -> int:
    try:
        return sum(1 for n in os.listdir(d) if n != SENTINEL)
    except FileNotFoundError:
        return 0


def clear(d: str) -> None:
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return
    for name in names:
        _remove(os.path.join(d, name))
