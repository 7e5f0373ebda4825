"""Before anything is timed: has the repository's file system finished writing what
earlier commands left in the page cache?

A burst of writes (a fresh clone, a build) is written back by the kernel seconds
later. On a slow disk that write-back holds the journal, and every file created or
removed meanwhile waits for it (docs/planner.md, "Figures behind the wait for
write-back"). What is timed during such a flush is the flush, not git, and no deadline can interrupt a
system call that waits on it: so the flush is waited for first, within a share of
the budget, and where it takes longer nothing is timed.
"""
import subprocess
import time
from dataclasses import dataclass
from typing import Optional



@dataclass(frozen=True)
class Settled:
    """seconds: how long the file system took to have nothing left to write, or None
    where it was still writing when the wait ended."""

    seconds: Optional[float]
    waited: float

    @property
    def flushing(self) -> bool:
        return self.seconds is None


def wait(path: str, seconds: float) -> Settled:
    """`sync --file-system` on path's file system, waited for `seconds` at most. One
    that has not finished by then is left to finish on its own (a process of its own
    session): git-tune does not wait for it, and a flush is never interrupted."""
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(["sync", "--file-system", path], start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return Settled(0.0, 0.0)     # no sync(1): nothing to wait with, time as ever
    try:
        proc.wait(timeout=max(0.0, seconds))
    except subprocess.TimeoutExpired:
        return Settled(None, time.monotonic() - t0)
    took = time.monotonic() - t0
    return Settled(took, took)
