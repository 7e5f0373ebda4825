"""What a key module's sweep and trial are given: the workspace, the repository's
files, the budget, and the results measured so far; plus the one A/B helper.
"""
import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.budget import EXTEND, Budget, now
from git_tune.advisor.measure.record import (FAILS_CANDIDATE, FAILS_DEFAULT, Comparison, Options,
                                             Sweep, Trial, comparison, failed_comparison)
from git_tune.advisor.measure.sweep import MeasurementFailed
from git_tune.models import stats, workloads
from git_tune.probes.gitinfo import GitFacts
from git_tune.probes.repo import RepoLayout
from git_tune.probes.repo import spread_order

# A candidate whose every run is stats.CLEARLY slower than every run of Git's default,
# after EARLY_RUNS pairs, is dropped: no number of further runs would make it faster.
# One clearly faster after stats.CLEAR_RUNS pairs has its verdict: a large gain is
# certain before MIN_RUNS.
EARLY_RUNS = 2
# More runs for a comparison still within noise (extensions) may take budget.EXTEND of
# what is left, no more: they serve to prove a gain, and the keys after it keep the rest
# (on tmpfs, a whole-tree write at 1.12x took 15+15 runs and 12 s of a 20 s budget, and
# six keys were left undecided).
STOPPED_SLOWER, STOPPED_FASTER, STOPPED_BUDGET = "clearly slower", "clearly faster", "budget"


class OutOfBudget(Exception):
    """A trial's minimum runs do not fit in the budget left: seconds_short says by how
    much (at least), None when the budget had ended before the trial could start."""

    def __init__(self, seconds_short: Optional[float]):
        super().__init__("budget spent" if seconds_short is None else f"{seconds_short:.1f} s short")
        self.seconds_short = seconds_short


MIN_SAMPLE = 100


def sample_files(worktree: str, names: List[str], n: int,
                 seconds: Optional[float] = None) -> Tuple[List[str], List[int]]:
    """n of the tracked names spread evenly over the tree, regular files only, with their
    real sizes. With `seconds`, the lstat-ing stops when they are up (at 1 ms a lookup,
    2,000 files take 2 s), after MIN_SAMPLE at least; the names are taken in an order
    whose every prefix is spread over the tree too."""
    step = max(1, len(names) // n)
    spread = names[::step][:n]
    position = {p: i for i, p in enumerate(spread)}
    spread = spread_order(spread, MIN_SAMPLE)
    end = None if seconds is None else now() + seconds
    paths, sizes = [], []
    for p in spread:
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


class _SideFailed(MeasurementFailed):
    """Git failed on one side of a comparison after its warm-up had worked."""

    def __init__(self, side: str, error: str):
        super().__init__(error)
        self.side, self.error = side, error


def _side(run: Callable[[], float], side: str) -> Callable[[], float]:
    """The run, with a failure named by its side (the deadline is not a failure)."""
    def tagged() -> float:
        try:
            return run()
        except gitbench.DeadlineReached:
            raise
        except MeasurementFailed as e:
            raise _SideFailed(side, str(e)) from None
    return tagged


@dataclass
class Bench:
    """Shared by every sweep and trial of one calibration (trials are added as they end,
    so a later key can build on an earlier one's result)."""

    ws: Optional[gitbench.Workspace]  # None where nothing is timed (settle)
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
    stat_data: Optional[dict] = None  # the probe's statdata.StatData: index vs lstat, sampled

    @property
    def worktree(self) -> str:
        return self.ws.layout.worktree

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
        return sample_files(self.worktree, self.names, n, seconds)

    def ab(self, workload: str, default: Dict[str, str], candidate: Dict[str, str],
           run_default: Callable[[], float], run_candidate: Callable[[], float],
           files: Optional[int] = None, extensions: int = 2,
           warm_default: Optional[float] = None) -> Comparison:
        """Real git, interleaved (ABBA): Git's default against the candidate.

        Keeping Git's default needs no proof, changing it does, so the runs are
        asymmetric: a candidate clearly slower after EARLY_RUNS pairs is dropped
        there, and a comparison the budget cannot finish keeps fewer than MIN_RUNS
        runs a side (whose verdict is never "faster"). A warm-up pair prices the
        runs first: when the minimum does not fit in what is left, OutOfBudget says
        how many seconds it needed. When the interval straddles the noise band but
        the point estimate is a clear change, more runs are added while they fit
        (at most `extensions` times): a noisy disk needs 10-15 runs a side to tell
        a 20% gain (bench/tuner_quality.py), a quiet one decides after 5.

        `warm_default`: Git's default has just run this very workload (a pilot), in that
        many seconds: it stands for the warm-up's default side, whose run would only
        repeat it (on the NFS-like bed, a second of a 20 s budget)."""
        error_default, error_candidate, first, second = self._warm_up(
            run_default, run_candidate, warm_default)
        if error_default and error_candidate:
            raise MeasurementFailed(f"git failed with Git's default and with {candidate}: "
                                    f"{error_default}")
        if error_default or error_candidate:
            return self._one_side_fails(workload, default, candidate, run_default, run_candidate,
                                        error_default, error_candidate, files)
        pair = first + second
        # A warm-up that already shows a gain beyond stats.APART may be decided in
        # CLEAR_RUNS pairs: those must fit. Whether they do decide is the runs' business,
        # not the warm-up's (one pair is noisier than the median of three: on the NFS-like
        # bed a 1.52x checkout gain showed 1.33-1.50x in its warm-ups).
        minimum = stats.CLEAR_RUNS if first > second * stats.APART else self.runs
        if pair * minimum > self.budget.left():
            raise OutOfBudget(pair * minimum - self.budget.left())
        try:
            return self._timed(workload, default, candidate, _side(run_default, FAILS_DEFAULT),
                               _side(run_candidate, FAILS_CANDIDATE), files, extensions, pair)
        except _SideFailed as e:
            # It worked in its warm-up and failed later (a pid limit that threads exceed
            # only when enough of them overlap): failing sometimes is failing.
            error = f"{e.error} (worked in its warm-up: it fails only sometimes)"
            return self._one_side_fails(
                workload, default, candidate, run_default, run_candidate,
                error if e.side == FAILS_DEFAULT else None,
                error if e.side == FAILS_CANDIDATE else None, files)

    def _warm_up(self, run_default, run_candidate, warm_default: Optional[float]):
        """The warm-up pair: (git's error or None, and seconds) for each side."""
        left = self.budget.left()
        if left <= 0:
            raise OutOfBudget(None)
        t0 = now()
        try:
            # The fewest pairs any verdict needs come after the warm-up, each priced at
            # it: a warm-up past a quarter of what is left already says "does not fit"
            # (on the NFS-like bed, status with preload off ran 5 s of a 17 s remainder
            # to say it).
            with gitbench.deadline(left / (stats.CLEAR_RUNS + 1)):
                error_default = None if warm_default is not None else gitbench.attempt(run_default)
                t1 = now()
                error_candidate = gitbench.attempt(run_candidate)
        except gitbench.DeadlineReached:
            # At least that per pair, for the warm-up and the minimum runs.
            raise OutOfBudget((now() - t0) * (self.runs + 1) - left) from None
        first = t1 - t0 if warm_default is None else warm_default
        return error_default, error_candidate, first, now() - t1

    def _timed(self, workload, default, candidate, run_default, run_candidate, files,
               extensions, pair) -> Comparison:
        """The interleaved runs after a warm-up pair that worked on both sides."""
        ta: List[float] = []
        tb: List[float] = []
        stopped = self._pairs(run_default, run_candidate, ta, tb, self.runs)
        if not ta:    # the budget's end came during the first pair
            raise OutOfBudget(pair * self.runs)
        c = comparison(workload, default, candidate, ta, tb, self.options.seed, files, stopped)
        for _ in range(extensions):
            est = c.estimate
            # Priced at the pairs so far (the warm-up's can be a cold outlier).
            pair = (sum(ta) + sum(tb)) / len(ta)
            if stopped or est.verdict != stats.NO_CHANGE or abs(est.ratio - 1) <= stats.MIN_EFFECT \
                    or pair * self.runs > self.budget.left() * EXTEND:
                break
            stopped = self._pairs(run_default, run_candidate, ta, tb, self.runs, clearly=False)
            c = comparison(workload, default, candidate, ta, tb, self.options.seed, files,
                           stopped)
        return c

    def _one_side_fails(self, workload, default, candidate, run_default, run_candidate,
                        error_default, error_candidate, files) -> Comparison:
        """Git failed on one side only (a pid limit Git's preload threads exceed, workers
        that cannot start): the failing side is tried once more, so one unlucky moment
        does not decide, and the working side runs the minimum times, so that it is
        known to work every time. A side that works only sometimes is a failure too."""
        failing = run_default if error_default else run_candidate
        working = run_candidate if error_default else run_default
        fails = FAILS_DEFAULT if error_default else FAILS_CANDIDATE
        error = error_default or error_candidate
        times: List[float] = []
        try:
            with gitbench.deadline(self.budget.left()):
                if gitbench.attempt(failing) is None:
                    error += " (then worked once: it fails only sometimes)"
                for _ in range(self.runs):
                    times.append(working())
        except gitbench.DeadlineReached:
            if not times:
                raise OutOfBudget(None) from None
        return failed_comparison(workload, default, candidate, fails, error, times, files)

    def _pairs(self, a: Callable[[], float], b: Callable[[], float], ta: List[float],
               tb: List[float], runs: int, clearly: bool = True) -> str:
        """`runs` more ABBA pairs into ta and tb; why they stopped early, or "". A pair
        the budget's end interrupts (its git killed) is dropped whole."""
        for i in range(runs):
            try:
                with gitbench.deadline(self.budget.left()):
                    if i % 2 == 0:
                        t_a, t_b = a(), b()
                    else:
                        t_b, t_a = b(), a()
            except gitbench.DeadlineReached:
                return STOPPED_BUDGET
            ta.append(t_a)
            tb.append(t_b)
            if clearly and stats.clearly_apart(tb, ta, EARLY_RUNS):
                return STOPPED_SLOWER
            if stats.clearly_apart(ta, tb):
                return STOPPED_FASTER
            if i + 1 < runs and self.budget.left() <= 0:
                return STOPPED_BUDGET
        return ""
