"""A git run's peak memory beside its time, confined so that it cannot take the host down.

The peak is the largest resident set of git and the children it waited for (wait4's
ru_maxrss). Where the kernel lets this process make a memory cgroup below its own (v1
memory.limit_in_bytes, v2 memory.max with the memory controller delegated), the run
goes into one of its own, limited to what it is allowed: a run that would pass it is
killed there by the kernel, never the calibration or the container around it. Where no
cgroup can be made, the run is unconfined and judged by its peak afterwards.
"""
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from ...errors import GitError

CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class PeakRun:
    """One git run: its seconds, its peak resident bytes, and how it ended."""
    seconds: float
    peak: int                 # bytes: the largest resident set of git and its children
    returncode: int
    killed_at_limit: bool     # the kernel killed it in its cgroup (out of memory)
    timed_out: bool
    confined: str             # "cgroup v1", "cgroup v2", or "" (unconfined)
    stderr: str

    def over(self, allowed: int) -> bool:
        """Whether the run peaked above `allowed` bytes, or was killed at its limit."""
        return self.killed_at_limit or self.peak > allowed


class Confinement:
    """A memory cgroup of its own for one run (make() returns None where none can be made)."""

    def __init__(self, path: str, version: int) -> None:
        self.path, self.version = path, version

    @classmethod
    def make(cls, limit: int) -> Optional["Confinement"]:
        for version, parent in _own_cgroups():
            path = os.path.join(parent, f"git-tune-{os.getpid()}-{time.monotonic_ns()}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            c = cls(path, version)
            try:
                c._write("memory.limit_in_bytes" if version == 1 else "memory.max", str(limit))
                if version == 1:
                    # No swap to fall back on: past the limit the run is killed, as a
                    # container without swap would kill it.
                    with contextlib.suppress(OSError):
                        c._write("memory.memsw.limit_in_bytes", str(limit))
                else:
                    with contextlib.suppress(OSError):
                        c._write("memory.swap.max", "0")
            except OSError:
                c.remove()
                continue
            return c
        return None

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def enter(self) -> None:
        """Called in the child before exec: the run and everything it starts are in it."""
        self._write("cgroup.procs", str(os.getpid()))

    def oom_killed(self) -> bool:
        name, field = (("memory.oom_control", "oom_kill") if self.version == 1
                       else ("memory.events", "oom_kill"))
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == field:
                        return int(v) > 0
        except (OSError, ValueError):
            pass
        return False

    def remove(self) -> None:
        # The group empties as its last process is reaped; rmdir may race that briefly.
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def _own_cgroups() -> Iterator[Tuple[int, str]]:
    """(version, directory) of this process's own memory cgroups, v1's first."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [l.rstrip("\n").split(":", 2) for l in f]
    except OSError:
        return
    for h, controllers, path in (l for l in lines if len(l) == 3):
        if "memory" in controllers.split(","):
            yield 1, os.path.join(CGROUP_ROOT, "memory", path.lstrip("/"))
    for h, controllers, path in (l for l in lines if len(l) == 3):
        if h == "0" and controllers == "":
            top = os.path.join(CGROUP_ROOT, path.lstrip("/"))
            try:
                with open(os.path.join(top, "cgroup.subtree_control")) as f:
                    if "memory" in f.read().split():
                        yield 2, top
            except OSError:
                pass


def run(args: List[str], cwd: str, env: Dict[str, str], limit: int, timeout: float,
        stdin_file: Optional[str] = None) -> PeakRun:
    """git ARGS with stdout discarded, its peak measured, confined to `limit` bytes where
    a cgroup can be made; killed (with what it started) after `timeout` seconds."""
    confine = Confinement.make(limit)
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(tempfile.TemporaryFile())
        src = stack.enter_context(open(stdin_file, "rb")) if stdin_file else subprocess.DEVNULL
        if confine:
            stack.callback(confine.remove)
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(["git", *args], cwd=cwd, env=env, stdin=src,
                                    stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True,
                                    preexec_fn=confine.enter if confine else None)
        except FileNotFoundError:
            raise GitError("git is not installed (no 'git' on PATH)") from None
        expired = threading.Event()

        def stop() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        timer = threading.Timer(max(0.001, timeout), stop)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            stop()
            os.waitpid(proc.pid, 0)
            raise
        finally:
            timer.cancel()
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read(4096).decode("utf-8", "replace")
        killed = bool(confine and not expired.is_set() and confine.oom_killed())
        return PeakRun(seconds, usage.ru_maxrss * 1024, proc.returncode, killed,
                       expired.is_set(), f"cgroup v{confine.version}" if confine else "",
                       stderr)
