"""Start one command from a small process and report its peak memory and time.

A child's ru_maxrss starts from the memory of the process it was forked from: at exec
the kernel keeps the larger of the old image's high-water mark and the new one's
(fs/exec.c, exec_mmap). Forked from git-tune (tens of MiB of Python and numpy), every
git run would seem to peak at git-tune's size at least. This script runs as a process
of its own (`python -S`, only the standard library), so what it forks starts from a few
MiB.

    python -S peakspawn.py RESULT_FD CGROUP_PROCS COMMAND...

It joins the cgroup whose `cgroup.procs` is CGROUP_PROCS (none where empty), forks and
execs COMMAND with its own standard streams, waits for it, and writes
"<wait status> <ru_maxrss KiB> <seconds>" to RESULT_FD. It exits 0 once it has
written; COMMAND exits CANNOT_RUN, saying so on its standard error, where it could not be started. Killed (its process group), it writes
nothing.
"""
import os
import sys
import time

CANNOT_RUN = 127
CANNOT_RUN_SAID = "peakspawn: cannot run"


def main(argv: "list[str]") -> None:
    result_fd, procs, command = int(argv[0]), argv[1], argv[2:]
    if procs:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(result_fd)
            os.execvp(command[0], command)
        except OSError as e:
            os.write(2, f"{CANNOT_RUN_SAID} {command[0]}: {e.strerror}\n".encode())
        finally:
            os._exit(CANNOT_RUN)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    os.write(result_fd, f"{status} {usage.ru_maxrss} {seconds!r}\n".encode())
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
