"""Start one command from a small process and report its peak memory and time.

A child's ru_maxrss starts from the memory of the process it was forked from: at exec
the kernel keeps the larger of the old image's high-water mark and the new one's
(fs/exec.c, exec_mmap). Forked from git-tune (tens of MiB of Python and numpy), every
git run would seem to peak at git-tune's size at least. This script runs as a process
of its own (`python -S`, only the standard library), so what it forks starts from a few
MiB.

    python -S peakspawn.py RESULT_FD CGROUP_PROCS STOP_ABOVE COMMAND...

It joins the cgroup whose `cgroup.procs` is CGROUP_PROCS (none where empty), forks and
execs COMMAND with its own standard streams, waits for it, and writes
"<wait status> <ru_maxrss KiB> <seconds> <stopped at bytes>" to RESULT_FD. Where
STOP_ABOVE is not 0 (a run no cgroup confines), it reads the resident memory of COMMAND
and what it started every POLL_SECONDS, and kills them all once together they hold more
than STOP_ABOVE bytes: the run is stopped where a cgroup's limit would have killed it,
before it can take the container or the host down; the last field is then what they
held, else 0. It exits 0 once it has written; COMMAND exits CANNOT_RUN, saying so on its
standard error, where it could not be started. Killed (its process group), it writes
nothing. Where the process that started it dies first (SIGKILL, the OOM killer), it
kills its process group, COMMAND and what it started included: nobody is left to wait
for the run, and it must not run on.
"""
import ctypes
import os
import signal
import sys
import time

CANNOT_RUN = 127
CANNOT_RUN_SAID = "peakspawn: cannot run"
# How often a run no cgroup confines has its memory read. Memory faulted in at a few
# GiB/s makes each poll's overshoot tens of MiB at most; the allowance keeps half the
# limit for that and for everything else.
POLL_SECONDS = 0.01
PAGE = os.sysconf("SC_PAGE_SIZE")


def main(argv: "list[str]") -> None:
    result_fd, procs, stop_above, command = int(argv[0]), argv[1], int(argv[2]), argv[3:]
    _end_with(os.getppid())
    if procs:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    # Ignored (inherited so from a hook), the kernel would reap the run before its wait.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # SIGCHLD stays pending, so the wait between polls ends the moment the run does.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(result_fd)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            os.execvp(command[0], command)
        except OSError as e:
            os.write(2, f"{CANNOT_RUN_SAID} {command[0]}: {e.strerror}\n".encode())
        finally:
            os._exit(CANNOT_RUN)
    stopped_at = 0
    if stop_above:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            held = sum(_resident(p) for p in _tree(pid))
            if held > stop_above:
                stopped_at = held
                os.kill(pid, signal.SIGKILL)
                _kill_all_but_me()
                break
            signal.sigtimedwait({signal.SIGCHLD}, POLL_SECONDS)
    if not stop_above or stopped_at:
        _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    os.write(result_fd, f"{status} {usage.ru_maxrss} {seconds!r} {stopped_at}\n".encode())
    os._exit(0)


PR_SET_PDEATHSIG = 1


def _end_with(parent: int) -> None:
    """Have the kernel send SIGTERM here when `parent` ends, and end the process group
    then (prctl takes integers only: no pointer crosses here)."""
    signal.signal(signal.SIGTERM, lambda *_: os.killpg(0, signal.SIGKILL))
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return                  # no prctl (not Linux): the run ends on its own
    if os.getppid() != parent:  # it ended before prctl
        os.killpg(0, signal.SIGKILL)


def _tree(pid: int) -> "list[int]":
    """pid and the processes it started, and theirs (/proc/PID/task/TID/children); where
    the kernel has no such file, every other live process of this one's group."""
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        return [p for p in _live_in_group(os.getpgrp()) if p != os.getpid()]
    found, i = [pid], 0
    while i < len(found):
        task_dir = f"/proc/{found[i]}/task"
        i += 1
        try:
            tasks = os.listdir(task_dir)
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"{task_dir}/{tid}/children") as f:
                    found.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                pass
    return found


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0        # it ended meanwhile


def _kill_all_but_me() -> None:
    """SIGKILL every other live process of this one's process group (peak.run starts this
    one leading a session of its own), again until none is left: a process forked while
    the last pass was killing is in the group too."""
    me, group = os.getpid(), os.getpgrp()
    for _ in range(100):
        others = [p for p in _live_in_group(group) if p != me]
        if not others:
            return
        for p in others:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(POLL_SECONDS)


def _live_in_group(group: int) -> "list[int]":
    """The processes of process group `group` that are not zombies (/proc/PID/stat)."""
    found: "list[int]" = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        # After the command's name: state, ppid, pgrp.
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(group):
            found.append(int(name))
    return found

if __name__ == "__main__":
    main(sys.argv[1:])
