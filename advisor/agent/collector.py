"""The collector: a process that reads the spool every POLL seconds (spool.ingest).

git never waits for it (the spool is a directory, not a socket): when it is not
running, events stay in the spool, at most spool.max_files() files, and are read by
the next `git-tune agent` command or collector. It is started detached, in a session
of its own, by `agent enable` and `agent start`, and stops by itself when the agent is
disabled. Its pid file holds the pid and the process's start time, so a reused pid is
never taken for it.
"""
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Protocol

import psutil

from ... import ownpaths
from . import store
from ..write import scopes
from ...errors import UnsafeState

POLL = 1.0
TEND_EVERY = 60.0


class AgentStateLike(Protocol):
    """What the loop reads of the agent's state (switch.AgentState)."""
    @property
    def enabled(self) -> bool: ...


PID_FILE = "collector.pid"


@dataclass(frozen=True)
class CollectorState:
    running: bool
    pid: Optional[int]
    rss_bytes: Optional[int]


def _pid_path() -> str:
    return os.path.join(store.agent_dir(), PID_FILE)


def _process() -> Optional[psutil.Process]:
    try:
        data = ownpaths.read_file(_pid_path(), limit=256)
        pid, started = (data or b"").decode().split()
        proc = psutil.Process(int(pid))
        if abs(proc.create_time() - float(started)) > 0.01 or _exited(proc):
            return None
        return proc
    except (OSError, ValueError, UnicodeDecodeError, UnsafeState, psutil.Error):
        return None


def _exited(proc: psutil.Process) -> bool:
    """Whether proc has ended: gone, or a zombie. A collector's parent is whatever
    adopted it (a container's init may reap late, or never); a zombie holds no lock and
    reads nothing, so it is not running."""
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return True


def running() -> CollectorState:
    proc = _process()
    if proc is None:
        return CollectorState(False, None, None)
    try:
        return CollectorState(True, proc.pid, proc.memory_info().rss)
    except psutil.Error:
        return CollectorState(False, None, None)


def start() -> CollectorState:
    """The collector, started unless it runs already."""
    if running().running:
        return running()
    log = os.open(os.path.join(store.agent_dir(), "collector.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "git_tune", "agent", "run"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                                start_new_session=True, env=environ())
    finally:
        os.close(log)
    for _ in range(50):                 # until it has written its pid file
        if running().running or proc.poll() is not None:
            break
        time.sleep(0.05)
    return running()


def environ() -> Dict[str, Any]:
    """The collector's environment: no repository of the caller's (hooks export GIT_DIR),
    and no trace2 target of its own."""
    from ... import git
    env = git.clean_environ()
    env["GIT_TRACE2_EVENT"] = "0"
    return env


def stop() -> bool:
    proc = _process()
    if proc is None:
        return False
    try:
        proc.send_signal(signal.SIGTERM)
    except psutil.Error:
        pass
    deadline = time.monotonic() + 5      # its last read of the spool, then it exits
    while not _exited(proc):
        if time.monotonic() > deadline:
            try:
                proc.kill()
            except psutil.Error:
                pass
            break
        time.sleep(0.02)
    try:
        os.unlink(_pid_path())
    except FileNotFoundError:
        pass
    return True


LOCK_FILE = "collector.lock"
# A step that raised is retried after this long, doubling up to BACKOFF_MAX: a fault
# that persists costs a line in collector.log a few times an hour, never the collector.
BACKOFF, BACKOFF_MAX = 5.0, 600.0


def _hold_singleton() -> Optional[int]:
    """The collector's lock, held for its life (the kernel drops it however it ends);
    None where another collector holds it."""
    return ownpaths.try_lock(os.path.join(store.agent_dir(), LOCK_FILE))


def run(load: Callable[[], "AgentStateLike"], collect: Callable[..., object],
        tend: Callable[[], object] = lambda: None, poll: float = POLL) -> None:
    """The collector's loop (`git-tune agent run`, which passes switch.load, switch.collect
    and switch.tend), until the agent is disabled, its routing reverted, or a SIGTERM;
    what git wrote until then is read first. Every TEND_EVERY seconds, `tend` (re-tune
    what has drifted, when the host is idle). One collector at a time: a second exits
    at once. A step that raises is logged and retried later; the loop goes on."""
    lock = _hold_singleton()
    if lock is None:
        return
    me = psutil.Process()
    ownpaths.write_file(_pid_path(), f"{me.pid} {me.create_time()}\n".encode())
    include = scopes.resolve("agent").include_file     # a stat a second, no git run
    stopping = threading.Event()        # set by SIGTERM, which also ends the wait below
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    tended = time.monotonic()
    failing = {"until": 0.0, "wait": BACKOFF}

    def guarded(step: Callable[..., object], *args: object) -> None:
        if time.monotonic() < failing["until"]:
            return
        try:
            step(*args)
            failing["wait"] = BACKOFF
        except Exception:   # noqa: BLE001 - the collector outlives any one bad input
            sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} step failed, retried in "
                             f"{failing['wait']:.0f} s:\n{traceback.format_exc(limit=8)}")
            sys.stderr.flush()
            failing["until"] = time.monotonic() + failing["wait"]
            failing["wait"] = min(BACKOFF_MAX, failing["wait"] * 2)

    while not stopping.is_set():
        try:
            state = load()
        except Exception:   # noqa: BLE001
            state = None
        if state is not None and (not state.enabled or not os.path.exists(include)):
            break           # disabled, or `git-tune revert --scope agent` took the routing
        if state is not None:
            guarded(collect, state)
        if time.monotonic() - tended >= TEND_EVERY:
            guarded(tend)
            tended = time.monotonic()
        stopping.wait(poll)
    guarded(collect)
    os.close(lock)
