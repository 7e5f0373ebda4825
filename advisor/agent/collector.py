"""The collector: a process that reads the spool every POLL seconds (spool.ingest).

git never waits for it (the spool is a directory, not a socket): when it is not
running, events stay in the spool, at most spool.MAX_FILES files, and are read by
the next `git-tune agent` command or collector. It is started detached, in a session
of its own, by `agent enable` and `agent start`, and stops by itself when the agent is
disabled. Its pid file holds the pid and the process's start time, so a reused pid is
never taken for it.
"""
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

import psutil

from git_tune.advisor.agent import store
from git_tune.advisor.write import scopes

POLL = 1.0
TEND_EVERY = 60.0


class AgentStateLike(Protocol):
    enabled: bool
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
        with open(_pid_path()) as f:
            pid, started = f.read().split()
        proc = psutil.Process(int(pid))
        if abs(proc.create_time() - float(started)) > 0.01:
            return None
        return proc
    except (OSError, ValueError, psutil.Error):
        return None


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
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "git_tune", "agent", "run"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                                start_new_session=True, env=_environ())
    finally:
        os.close(log)
    for _ in range(50):                 # until it has written its pid file
        if running().running or proc.poll() is not None:
            break
        time.sleep(0.05)
    return running()


def _environ() -> dict:
    """The collector's environment: no repository of the caller's (hooks export GIT_DIR),
    and no trace2 target of its own."""
    from git_tune import git
    env = git.clean_environ()
    env["GIT_TRACE2_EVENT"] = "0"
    return env


def stop() -> bool:
    proc = _process()
    if proc is None:
        return False
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(5)
    except psutil.TimeoutExpired:
        proc.kill()
    except psutil.Error:
        pass
    try:
        os.unlink(_pid_path())
    except FileNotFoundError:
        pass
    return True


def run(load: Callable[[], "AgentStateLike"], collect: Callable[..., object],
        tend: Callable[[], object] = lambda: None, poll: float = POLL) -> None:
    """The collector's loop (`git-tune agent run`, which passes switch.load, switch.collect
    and switch.tend), until the agent is disabled, its routing reverted, or a SIGTERM;
    what git wrote until then is read first. Every TEND_EVERY seconds, `tend` (re-tune
    what has drifted, when the host is idle)."""
    me = psutil.Process()
    tmp = _pid_path() + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{me.pid} {me.create_time()}\n")
    os.replace(tmp, _pid_path())
    include = scopes.resolve("agent").include_file     # a stat a second, no git run
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    tended = time.monotonic()
    while not stopping:
        state = load()
        if not state.enabled or not os.path.exists(include):
            break           # disabled, or `git-tune revert --scope agent` took the routing
        collect(state)
        if time.monotonic() - tended >= TEND_EVERY:
            tend()
            tended = time.monotonic()
        time.sleep(poll)
    collect()
