"""What else ran on the host while git-tune measured: other processes' CPU time.

A calibration's comparisons are interleaved, so load that holds steady cancels in
the ratios; load that comes and goes adds noise, and any load competes with the
parallel settings being measured (checkout workers, preload and index threads): a
busy host can flip a result between runs. The CPU time of the whole host minus
git-tune's own and its children's (git, waited for), over the wall time, is how
many CPUs other processes kept busy.
"""
import os
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import psutil

# Other processes leaving idle fewer CPUs than git-tune may use, less this share of them,
# make its result one to re-check: on two cores, one busy loop elsewhere; on a 64-CPU host
# that gives a container 2, only a host nearly saturated.
BUSY_SHARE = 0.25


def _busy(t: Any) -> float:
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "steal", 0.0)
                 - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0))


def _cpus() -> List[int]:
    """The CPUs this process may run on (its affinity), those whose time counts."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(psutil.cpu_count() or 1))


def _host_busy(cpus: Sequence[int]) -> float:
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(_busy(per_cpu[c]) for c in cpus if c < len(per_cpu))


def _own() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def busy(others_cpus: float, cores: float, cpus: int) -> bool:
    """Whether other processes left idle fewer CPUs than git-tune may use, less
    BUSY_SHARE of them."""
    return max(cpus, cores) - others_cpus < cores * (1 - BUSY_SHARE)


@dataclass(frozen=True)
class Load:
    seconds: float          # wall time watched
    others_cpus: float      # CPUs other processes kept busy on average (of those below)
    cores: float            # the CPUs git-tune may use (affinity, bounded by a quota)
    cpus: int = 0           # the CPUs it may run on (affinity), whose time was watched

    @property
    def busy(self) -> bool:
        return busy(self.others_cpus, self.cores, self.cpus)

    def note(self, again: str = "git-tune auto --recalibrate") -> Optional[str]:
        """The warning where other processes were busy, naming the command to run again."""
        if not self.busy:
            return None
        took = f"{self.seconds:.1f}" if self.seconds < 10 else f"{self.seconds:.0f}"
        return (f"unreliable: other processes kept {self.others_cpus:.1f} of "
                f"{max(self.cpus, int(self.cores))} CPUs busy during the {took} s of measuring, so the timings are noisier and "
                f"parallel settings competed with them; run again when the host is quieter "
                f"({again})")


class Watch:
    """Started before measuring; `load()` says what other processes used since."""

    def __init__(self, cores: float) -> None:
        self.cores, self.cpus = max(1.0, float(cores)), _cpus()
        self.t0, self.host0, self.own0 = time.monotonic(), _host_busy(self.cpus), _own()

    def load(self) -> Load:
        wall = max(1e-6, time.monotonic() - self.t0)
        others = max(0.0, (_host_busy(self.cpus) - self.host0) - (_own() - self.own0))
        return Load(round(wall, 2), round(others / wall, 2), self.cores, len(self.cpus))
