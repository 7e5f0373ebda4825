"""A git run's peak memory beside its time, confined so that it cannot take the host down.

The peak is the largest resident set of git and the children it waited for (wait4's
ru_maxrss), git started by a small process of its own (peakspawn), so that git-tune's
own memory is not counted in it. Where the kernel lets this process make a memory
cgroup below its own (v1 memory.limit_in_bytes, v2 memory.max with the memory
controller delegated), the run
goes into one of its own, limited to what it is allowed: a run that would pass it is
killed there by the kernel, never the calibration or the container around it, and a
run that ends whole there fits (PeakRun.over). Where no cgroup can be made, the run is
unconfined: its spawner reads the memory git and its children hold as it runs and stops
them past what the run is allowed (peakspawn), and it is judged by its peak.
"""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from . import peakspawn
from ... import git
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
    # Bytes its cgroup was limited to or, unconfined, past which it was stopped: the
    # allowance, or less where the container had less left.
    limit: int = 0
    # Unconfined, it was stopped once git and its children held more than it may use.
    stopped_at_limit: bool = False

    def over(self, allowed: int) -> bool:
        """Whether the run did not fit `allowed` bytes. Confined to them, the kernel
        judges: it fits unless killed there. The resident set counts the pack files git
        maps, pages the kernel drops under the cgroup's limit rather than kill git, so a
        run can end whole in its cgroup with a peak above it. Unconfined, the peak judges,
        and a run stopped at the limit did not fit."""
        if self.confined:
            return self.killed_at_limit
        return self.stopped_at_limit or self.peak > allowed


class Confinement:
    """A memory cgroup of its own for one run (make() returns None where none can be made).

    Its limit is the one asked for, or less where a limit above it leaves less: what
    git-tune itself and whatever runs beside it in the container hold counts there too,
    and the kernel must kill the run in its own group, not git-tune in the container's."""

    def __init__(self, path: str, version: int, limit: int = 0) -> None:
        self.path, self.version, self.limit = path, version, limit

    @classmethod
    def make(cls, limit: int) -> Optional["Confinement"]:
        for version, parent in _own_cgroups():
            path = os.path.join(parent, f"git-tune-{os.getpid()}-{time.monotonic_ns()}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            room = room_below(version, parent)
            if room is not None:
                limit = max(PAGE, min(limit, room - RESERVE))
            c = cls(path, version, limit)
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
        """Called in a child before exec (a Popen's preexec_fn): it and all it starts
        are in the group."""
        self._write("cgroup.procs", str(os.getpid()))

    @property
    def procs(self) -> str:
        """The file a process writes its pid to to join the group (peakspawn does): the
        run and everything it starts are in it."""
        return os.path.join(self.path, "cgroup.procs")

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


PAGE = 4096
UNLIMITED_FROM = 1 << 60        # v1 writes "no limit" as LONG_MAX rounded to a page
# Kept back from the room a limit above leaves: pages a run uses but the group above is
# charged for (the binaries and libraries git maps are charged where they were first
# read), its page tables, and the charges each CPU holds in advance. Without it a run
# allowed the whole room fills the group above with its own, and the kernel may kill
# there (docs/deciding.md, pack memory, rule 2).
RESERVE = 8 << 20
# A run no cgroup confines is read every peakspawn.POLL_SECONDS, so it passes its stop by
# what git faults in meanwhile (docs/deciding.md, pack memory, rule 2): kept back too
# where it shares the container's group.
OVERSHOOT = 24 << 20


def room_below(version: int, own: str) -> Optional[int]:
    """Bytes a new memory cgroup below `own` (of cgroup `version`) can be charged before
    a limit on `own` or above it is reached: the least, over those groups, of the limit
    less what is held there (_held). None where no limit applies or none can be read."""
    top = os.path.join(CGROUP_ROOT, "memory") if version == 1 else CGROUP_ROOT
    least: Optional[int] = None
    group = os.path.normpath(own)
    while group.startswith(top + os.sep):
        if version == 1 and _read(group, "memory.use_hierarchy") != "1":
            break           # the groups above do not count what is below this one
        limit = _read(group, "memory.limit_in_bytes" if version == 1 else "memory.max")
        if limit and limit.isdigit() and int(limit) < UNLIMITED_FROM:
            room = int(limit) - _held(group, version)
            least = room if least is None else min(least, room)
        group = os.path.dirname(group)
    return least


def _held(group: str, version: int) -> int:
    """Bytes charged to `group` that the kernel cannot take back before it kills: all
    but the file pages no process maps (those it drops first)."""
    prefix = "total_" if version == 1 else ""
    stat: Dict[str, int] = {}
    for line in (_read(group, "memory.stat") or "").splitlines():
        name, _, value = line.partition(" ")
        if value.isdigit():
            stat[name] = int(value)
    used = _read(group, "memory.usage_in_bytes" if version == 1 else "memory.current")
    if not used or not used.isdigit():
        return 0
    mapped = stat.get(prefix + ("mapped_file" if version == 1 else "file_mapped"), 0)
    files = stat.get(prefix + "active_file", 0) + stat.get(prefix + "inactive_file", 0)
    return max(0, int(used) - max(0, files - mapped))


def _read(group: str, name: str) -> Optional[str]:
    try:
        with open(os.path.join(group, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def unconfined_limit(limit: int) -> int:
    """Where a run cannot have a cgroup of its own it is charged to this process's: the
    bytes past which it is stopped, `limit` or what the limits on the way up leave
    (room_below) less RESERVE and OVERSHOOT, whichever is less. Those groups are read,
    not written, so this holds in a container that delegates nothing."""
    rooms = [room for version, group in _memory_groups()
             for room in [room_below(version, group)] if room is not None]
    return max(PAGE, min([limit] + [room - RESERVE - OVERSHOOT for room in rooms]))


def _memory_groups() -> Iterator[Tuple[int, str]]:
    """(version, directory) of this process's memory cgroups: v1's, and v2's whether
    or not it delegates the memory controller below."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [l.rstrip("\n").split(":", 2) for l in f]
    except OSError:
        return
    for h, controllers, path in (l for l in lines if len(l) == 3):
        if "memory" in controllers.split(","):
            yield 1, os.path.join(CGROUP_ROOT, "memory", path.lstrip("/"))
        elif h == "0" and controllers == "":
            yield 2, os.path.join(CGROUP_ROOT, path.lstrip("/"))


def _own_cgroups() -> Iterator[Tuple[int, str]]:
    """(version, directory) of this process's memory cgroups below which a group can be
    made: v1's first, then v2's where it delegates the memory controller."""
    groups = list(_memory_groups())
    yield from ((v, g) for v, g in groups if v == 1)
    for version, top in groups:
        if version == 2 and "memory" in (_read(top, "cgroup.subtree_control") or "").split():
            yield 2, top

SPAWN_FLAG = "--peak-spawn"      # a frozen git-tune's entry runs peakspawn with it


def spawner() -> List[str]:
    """The command that starts peakspawn: this interpreter without site packages (its
    start-up a few MiB), or a frozen git-tune's own entry."""
    if getattr(sys, "frozen", False):
        return [sys.executable, SPAWN_FLAG]
    return [sys.executable, "-S", "-E", os.path.abspath(peakspawn.__file__)]


def run(args: List[str], cwd: str, env: Dict[str, str], limit: int, timeout: float,
        stdin_file: Optional[str] = None) -> PeakRun:
    """git ARGS with stdout discarded, its peak measured, confined to `limit` bytes where
    a cgroup can be made, else stopped past them by its spawner; killed (with what it
    started) after `timeout` seconds.

    git is started by peakspawn, not by this process: its peak then counts git's own
    memory and the spawner's few MiB, never git-tune's (module docstring there)."""
    confine = Confinement.make(limit)
    stop_above = 0 if confine else unconfined_limit(limit)
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(tempfile.TemporaryFile())
        src = stack.enter_context(open(stdin_file, "rb")) if stdin_file else subprocess.DEVNULL
        if confine:
            stack.callback(confine.remove)
        result, write_end = os.pipe()
        stack.callback(os.close, result)
        started = time.perf_counter()
        try:
            proc = git.start(spawner() + [str(write_end), confine.procs if confine else "",
                                          str(stop_above), "git", *args],
                             cwd=cwd, env=env, stdin=src, stdout=subprocess.DEVNULL,
                             stderr=err, start_new_session=True, pass_fds=(write_end,))
        finally:
            os.close(write_end)
        try:
            expired = _wait_or_kill(proc, timeout)
        except BaseException:       # Ctrl-C, SIGTERM: git stops with git-tune
            git.kill_group(proc.pid)
            proc.wait()
            raise
        said = os.read(result, 256).decode().split()
        err.seek(0)
        stderr = err.read(4096).decode("utf-8", "replace")
        killed = bool(confine and not expired and confine.oom_killed())
        if len(said) != 4:
            # The spawner and git were killed together: at the deadline, or by the kernel
            # at the limit (the spawner is inside it too).
            return PeakRun(time.perf_counter() - started, 0, -signal.SIGKILL, killed,
                           expired, _confined(confine), stderr, _limit(confine, stop_above))
        status, maxrss_kib, seconds = int(said[0]), int(said[1]), float(said[2])
        stopped_at = int(said[3])
        returncode = os.waitstatus_to_exitcode(status)
        if returncode == peakspawn.CANNOT_RUN and peakspawn.CANNOT_RUN_SAID in stderr:
            raise GitError("git is not installed (no 'git' on PATH)")
        return PeakRun(seconds, max(maxrss_kib * 1024, stopped_at), returncode, killed, expired,
                       _confined(confine), stderr, _limit(confine, stop_above), stopped_at > 0)


def _wait_or_kill(proc: "subprocess.Popen[bytes]", timeout: float) -> bool:
    """Reap the spawner, killing its group first where it runs past `timeout` seconds:
    True where it was killed for that. No thread is started (under a cgroup's pids.max
    one may not be had): git.start's wait wakes at the exit."""
    try:
        proc.wait(timeout=max(0.0, timeout))
        return False
    except subprocess.TimeoutExpired:
        git.kill_group(proc.pid)
        proc.wait()
        return True


def _confined(confine: Optional[Confinement]) -> str:
    return f"cgroup v{confine.version}" if confine else ""


def _limit(confine: Optional[Confinement], stop_above: int) -> int:
    return confine.limit if confine else stop_above
