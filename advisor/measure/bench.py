"""What a key module's sweep and trial are given: the workspace, the repository's
files, the budget, and the results measured so far; its A/B comparisons run through
ab.run under the calibration's budget.
"""
import dataclasses
import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from . import ab, gitbench
from .ab import Runs
from .budget import Budget, now
from .planner import Prices
from .record import Comparison, Options, Sweep, Trial
from ...models import stats, workloads
from ...probes.gitinfo import GitFacts
from ...probes.layout import RepoLayout
from ...probes.repo import spread_order

if TYPE_CHECKING:   # the registry reads Bench
    from ..keys.registry import Entry

MIN_SAMPLE = 100


def sample_files(worktree: str, names: List[str], n: int, seconds: Optional[float] = None,
                 recorded: Optional[Dict[str, int]] = None) -> Tuple[List[str], List[int]]:
    """n of the tracked names spread evenly over the tree, regular files only, with their
    sizes: the index's (`recorded`, regular files only) where it records one, else the
    file's own by lstat. With `seconds`, the lstat-ing stops when they are up (at 1 ms a
    lookup, 2,000 files take 2 s), after MIN_SAMPLE at least; the names are taken in an
    order whose every prefix is spread over the tree too."""
    recorded = recorded or {}
    step = max(1, len(names) // n)
    spread = names[::step][:n]
    position = {p: i for i, p in enumerate(spread)}
    spread = spread_order(spread, MIN_SAMPLE)
    end = None if seconds is None else now() + seconds
    paths: List[str] = []
    sizes: List[int] = []
    for p in spread:
        if recorded.get(p):
            paths.append(p)
            sizes.append(recorded[p])
            continue
        if end is not None and len(paths) >= MIN_SAMPLE and now() > end:
            break
        try:
            st = os.lstat(os.path.join(worktree, p))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            paths.append(p)
            sizes.append(st.st_size)
    # Back in index order, the order git writes them in.
    pairs = sorted(zip(paths, sizes), key=lambda ps: position[ps[0]])
    return [p for p, _ in pairs], [n for _, n in pairs]


@dataclass
class Bench:
    """Shared by every sweep and trial of one calibration (trials are added as they end,
    so a later key can build on an earlier one's result)."""

    workspace: Optional[gitbench.Workspace]  # None where nothing is timed (settle)
    names: List[str]                  # every tracked path
    cores: int
    storage_class: str
    git_facts: GitFacts
    options: Options
    budget: Budget
    notes: List[str] = field(default_factory=list)
    sweeps: Dict[str, Sweep] = field(default_factory=dict)
    trials: Dict[str, Trial] = field(default_factory=dict)
    unfinished: Dict[str, Optional[float]] = field(default_factory=dict)  # key -> s short
    required: Dict[str, str] = field(default_factory=dict)  # what git needs to run here
    pid_limit: Optional[int] = None   # the cgroup's pids.max: threads git starts may fail
    # Sweeps whose results no trial needs (findings only), run after every trial in what
    # the budget has left: (family, a sweep like the family's, returning its record in full).
    later: List[Tuple[str, Callable[["Bench"], Optional[Sweep]]]] = field(default_factory=list)
    flushing: bool = False            # the file system was still writing back: nothing timed
    stat_data: Optional[Dict[str, Any]] = None  # probe's statdata.StatData: index vs lstat
    online_cpus: Optional[int] = None  # what git's online_cpus() answers here (None: unknown)
    # The probe's storage latencies, seconds at the median by operation (lstat_hit,
    # create, ...): what a key's stakes are before its family's sweep has measured them.
    latency: Dict[str, float] = field(default_factory=dict)
    # The probe's untracked walk (`git ls-files -o`): seconds it took, or had run where it
    # was given up. What a status with untracked files costs at least.
    untracked_walk: Optional[float] = None
    # Trials still to run after the one running now (calibrate sets it before each): a
    # comparison within noise gets more runs from one such trial's share of the budget
    # left, no more (ab.Runs.extend_share).
    trials_after: int = 0
    # What a trial left for the budget's end (counts it could not time, a comparison
    # still within noise): key -> a call that times one more of those and answers the
    # key's trial again, or None where nothing is left. calibrate makes the calls once
    # every key has had its trial, stakes first, while the budget lasts.
    sharpen: Dict[str, Callable[[], Optional[Trial]]] = field(default_factory=dict)
    # The registry entries whose trials are still to run after the one running now
    # (calibrate sets it before each): what the planner weighs a trial's stakes against.
    pending: List["Entry"] = field(default_factory=list)
    # Whether a key has had planner.owed_grace's seconds past the budget (once a run).
    graced: bool = False
    # This host's prices (planner.prices), measured on the first trial that asks.
    prices: Optional[Prices] = None
    # What more than one key times on, made once per calibration by the first that asks
    # (planner.made_once): name -> what was made. Shared by a bench's copies.
    made: Dict[str, Any] = field(default_factory=dict)
    # Bytes this process may use (the cgroup's memory limit, else the host's available
    # memory; 0: not known) and which of the two it is.
    memory_limit: int = 0
    memory_source: str = ""

    @property
    def ws(self) -> gitbench.Workspace:
        """The scratch workspace; asked for only by what times git, which a calibration
        without one (settle) never runs."""
        if self.workspace is None:
            raise RuntimeError("this calibration has no scratch workspace: nothing is timed")
        return self.workspace

    @property
    def worktree(self) -> str:
        worktree = self.ws.layout.worktree
        assert worktree is not None     # calibrate refuses a repository without one
        return worktree

    @property
    def repo(self) -> RepoLayout:
        """The user's repository, for runs in its work tree on index copies."""
        return self.ws.layout

    @property
    def runs(self) -> int:
        return max(stats.MIN_RUNS, self.options.runs)

    @property
    def cold(self) -> bool:
        """Whether status-like trials start from a cold cache (--cold, or the profile's)."""
        return self.options.cold or workloads.cold(self.options.workload)

    def counts(self, workload: str) -> bool:
        """Whether the workload profile weighs this workload (so it is measured)."""
        return workload in workloads.counted(self.options.workload)

    def sample(self, n: int, seconds: Optional[float] = None) -> Tuple[List[str], List[int]]:
        recorded = self.ws.recorded_sizes() if self.workspace else None
        return sample_files(self.worktree, self.names, n, seconds, recorded)

    def ab(self, workload: str, default: Dict[str, str], candidate: Dict[str, str],
           run_default: Callable[[], float], run_candidate: Callable[[], float],
           files: Optional[int] = None, extensions: int = 2,
           warm_default: Optional[float] = None, slower_expected: bool = False,
           then: int = 0, warm_does_more: bool = False) -> Comparison:
        """Real git, Git's default against the candidate, under this calibration's budget,
        runs and seed (ab.run); `slower_expected`: the engine has shown the candidate
        clearly slower, and the warm-up may take what leaves room for the pairs that drop
        it (ab.Runs.fewest); `then`: comparisons of the same trial still to run after this
        one, which its extensions share the budget left with as with the trials after it;
        `warm_does_more`: the warm-up's runs do more than the timed runs (ab.run)."""
        how = self._runs(extensions, then)
        if slower_expected:
            how = dataclasses.replace(how, fewest=ab.EARLY_RUNS)
        return ab.run(workload, default, candidate, run_default, run_candidate, how,
                      files=files, warm_default=warm_default, warm_does_more=warm_does_more)

    def resume(self, c: Comparison, run_default: Callable[[], float],
               run_candidate: Callable[[], float]) -> Comparison:
        """More runs for comparison c, in what the budget has left (ab.resume)."""
        return ab.resume(c, run_default, run_candidate, self._runs(2))

    def _runs(self, extensions: int, then: int = 0) -> Runs:
        return ab.Runs(self.runs, self.options.seed, self.budget, extensions=extensions,
                       extend_share=1 / (1 + self.trials_after + then))
