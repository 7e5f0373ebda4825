"""What a key module's sweep and trial are given: the workspace, the repository's
files, the budget, and the results measured so far; plus the one A/B helper.
"""
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.record import Comparison, Options, Sweep, Trial, comparison
from git_tune.models import stats
from git_tune.probes.gitinfo import GitFacts
from git_tune.probes.repo import RepoLayout

Progress = Callable[[str, float], None]   # (phase, fraction of budget used)


class Budget:
    """Wall-clock seconds for the whole calibration, and progress reports against it."""

    def __init__(self, total: float, progress: Optional[Progress] = None):
        self.total = total
        self.start = time.monotonic()
        self.progress = progress

    def used(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return max(0.0, self.total - self.used())

    def tick(self, phase: str) -> None:
        if self.progress:
            self.progress(phase, min(1.0, self.used() / self.total))


@dataclass
class Bench:
    """Shared by every sweep and trial of one calibration (trials are added as they end,
    so a later key can build on an earlier one's result)."""

    ws: gitbench.Workspace
    names: List[str]                  # every tracked path
    cores: int
    storage_class: str
    git_facts: GitFacts
    options: Options
    budget: Budget
    notes: List[str] = field(default_factory=list)
    sweeps: Dict[str, Sweep] = field(default_factory=dict)
    trials: Dict[str, Trial] = field(default_factory=dict)

    @property
    def layout(self) -> RepoLayout:
        return self.ws.layout

    @property
    def worktree(self) -> str:
        return self.ws.layout.worktree

    @property
    def runs(self) -> int:
        return max(stats.MIN_RUNS, self.options.runs)

    def sample(self, n: int) -> Tuple[List[str], List[int]]:
        """n tracked files spread evenly over the tree, with their real sizes."""
        step = max(1, len(self.names) // n)
        paths, sizes = [], []
        for p in self.names[::step][:n]:
            try:
                st = os.lstat(os.path.join(self.worktree, p))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                paths.append(p)
                sizes.append(st.st_size)
        return paths, sizes

    def ab(self, workload: str, default: Dict[str, str], candidate: Dict[str, str],
           run_default: Callable[[], float], run_candidate: Callable[[], float],
           files: Optional[int] = None, extensions: int = 2) -> Comparison:
        """Real git, interleaved: Git's default against the candidate. When the interval
        straddles the noise band but the point estimate is a clear change, and the
        budget has time left, more runs are added (at most `extensions` times): a noisy
        disk needs 10-15 runs a side to tell a 20% gain (bench/tuner_quality.py), a
        quiet one decides after 5."""
        seed = self.options.seed
        ta, tb = gitbench.interleaved(run_default, run_candidate, self.runs)
        c = comparison(workload, default, candidate, ta, tb, seed, files)
        for _ in range(extensions):
            est = c.estimate
            if est.verdict != stats.NO_CHANGE or abs(est.ratio - 1) <= stats.MIN_EFFECT \
                    or self.budget.left() <= 0:
                break
            more_a, more_b = gitbench.interleaved(run_default, run_candidate, self.runs,
                                                  warmup=0)
            ta, tb = ta + more_a, tb + more_b
            c = comparison(workload, default, candidate, ta, tb, seed, files)
        return c
