"""The calibration's planner: what this host charges for the work trials are made of,
and which trial is owed the budget.

Prices are measured, never assumed. The planner's first git seconds time a part of
PRICE_LARGE entries, and where that was cheap one of PRICE_SMALL, each written
sequentially, its status run and its write-back waited for, as every later run on a part
is (gitbench.PartWrite).
That gives what a run costs beside its files (git's starts, the index read and written,
the write-back) and what a file costs (written, refreshed, removed); beside them, the
part's making (a fixed cost, once per size) and git's start on this storage.

Every later price derives from these (Prices.run), and a run that costs more than
REPRICE times or less than 1/REPRICE of its price re-prices it there and then
(Prices.repriced), so a trial sized on a wrong price is sized again at once, not at the
budget's end.

Shares: a trial's runs get plan.LADDER of the budget left; where that cannot hold its
smallest comparison and no key still to run has more at stake, the budget left is
its (run_share).
"""
import contextlib
import dataclasses
import os
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

from git_tune.advisor.measure import budget as plan, gitbench
from git_tune.advisor.measure.ab import OutOfBudget, longest_run
from git_tune.advisor.measure.sweep import Share

# The parts prices are measured on: git's cost beside the files and a file's are the
# line through their runs. The small one is run only where the large one's run took at
# most SMALL_PILOT of the budget left: where runs are dear, the large part is the one a
# trial can afford, its run already Git's default's first, and its price alone (git's
# starts and the write-back apart, the rest a file's) errs towards smaller parts.
PRICE_SMALL, PRICE_LARGE = 6, 48
SMALL_PILOT = 0.02
# A run priced off by more than this factor either way is priced again from itself.
REPRICE = 2.0


@dataclass(frozen=True)
class Prices:
    """Seconds this host charges for a run on a part (its files removed, written
    sequentially, its status, its write-back), from runs on parts of PRICE_LARGE and
    PRICE_SMALL entries: what a run costs beside its files (`fixed`: git's starts, the
    index read and written, the write-back) and a file (`per_file`: written, refreshed by
    the status, removed before the run)."""

    entries: int            # the larger pricing part's entries
    part_made: float        # seconds that part took to make (a fixed cost, once a size)
    git_start: float        # one git command that reads nothing but its config
    fixed: float
    per_file: float
    write_back: float       # of the larger part's run
    timed: float            # the larger part's run as a trial times it (Git's default)
    status: Optional[float] = None  # the larger part's status after that run

    def run(self, files: int) -> float:
        """A sequential run on a part of `files` files, as the budget pays for it."""
        return self.fixed + files * self.per_file

    def repriced(self, files: int, seconds: float) -> "Prices":
        """These prices, or where a run of `files` files took more than REPRICE times
        its price or less than 1/REPRICE of it, the line through that run and the larger
        pricing run (a file never priced below a tenth of that run's average)."""
        priced = self.run(files)
        if files <= 0 or priced <= 0 or 1 / REPRICE <= seconds / priced <= REPRICE:
            return self
        per_file, fixed = line_through(self.entries, self.run(self.entries), files, seconds)
        return dataclasses.replace(self, per_file=per_file, fixed=fixed)


def line_through(k0: int, t0: float, k1: int, t1: float) -> Tuple[float, float]:
    """(seconds a file, seconds beside the files) through two runs of k0 and k1 files; a
    file costs at least a tenth of the larger run's average (two runs' noise can make
    their difference anything), and the fixed cost is never negative."""
    if k1 < k0:
        k0, t0, k1, t1 = k1, t1, k0, t0
    per_file = max((t1 - t0) / max(1, k1 - k0), t1 / max(1, k1) / 10)
    return per_file, max(0.0, t1 - per_file * k1)


def prices(bench) -> Prices:
    """This host's prices, measured once per calibration on the first call (kept on the
    bench). MeasurementFailed where no part can be made or git fails there;
    DeadlineReached where the budget's deadline came first."""
    if bench.prices is not None:
        return bench.prices
    with gitbench.after_each_run(lambda: bench.budget.tick("prices")):
        bench.prices = _measured(bench)
    bench.budget.tick("prices")
    return bench.prices


def _measured(bench) -> Prices:
    started = plan.now()
    part = bench.ws.part(min(PRICE_LARGE, len(bench.names)))
    made = plan.now() - started
    t0 = plan.now()
    gitbench.run_git(["rev-parse", "--git-dir"], part.worktree, gitbench.config_env({}),
                     hooks=False)
    start = plan.now() - t0
    large, timed = _run_on(part)
    k = len(part.paths)
    if large.last_wall <= bench.budget.left() * SMALL_PILOT and k > PRICE_SMALL:
        small, _ = _run_on(bench.ws.part(PRICE_SMALL))
        per_file, fixed = line_through(len(small.paths), small.last_wall, k, large.last_wall)
    else:
        fixed = 2 * start + large.last_write_back
        per_file = max(large.last_wall - fixed, 0.0) / max(1, k)
    return Prices(k, made, start, fixed, per_file, large.last_write_back, timed,
                  large.last_status)


def _run_on(part: gitbench.Part) -> Tuple[gitbench.PartWrite, float]:
    """One sequential run on the part, as a trial's runs there are made, and its timed
    seconds."""
    run = gitbench.PartWrite(part.worktree, part.paths, os.path.join(part.worktree, ".git"),
                             part)
    return run, run.run({})


def run_share(bench, mine: Optional[float], counts: int) -> float:
    """The longest one run of a trial may take, for a key with `mine` seconds at stake
    whose comparisons cover `counts` candidates: plan.LADDER of the budget left, over
    the warm-up pair and bench.runs pairs each. Where that cannot hold one run on the
    larger pricing part (the smallest comparison the planner prices) and no key still to
    run (bench.pending) has more at stake, all the budget left: the key with the most at
    stake is decided before keys with less start, or says how much budget it needs.
    Still over bench.runs pairs, not the fewest a clear gain needs: a part shows less of
    the gain than the tree, so its comparison must be able to reach a verdict without
    ending early."""
    left = bench.budget.left()
    usual = longest_run(left * plan.LADDER / counts, bench.runs)
    if bench.prices is None or usual >= bench.prices.run(bench.prices.entries):
        return usual
    others = [s for s in (e.stakes(bench) for e in bench.pending) if s is not None]
    if mine is None or any(s > mine for s in others):
        return usual
    return longest_run(left / counts, bench.runs)


# Each family's engine sweep: its share of the whole budget (a share of TOTAL, so a
# sweep always gets its time, even late in the run).
SWEEPS = {"checkout": plan.SWEEP_CHECKOUT, "preload": plan.SWEEP_PRELOAD,
          "index": plan.SWEEP_INDEX}


def sweep_share(bench, family: str) -> Share:
    """The family's sweep's share of the budget, starting now."""
    return Share(bench.options.budget * SWEEPS[family], bench.budget.end)


def later_seconds(bench, family: str) -> float:
    """What a sweep left for after the trials (findings only) may take: its family's
    share, or what is left of the budget where less."""
    return min(bench.options.budget * SWEEPS[family], bench.budget.left())


def later_share(bench, family: str) -> Share:
    """A Share of later_seconds, starting now: a deferred sweep's."""
    return Share(later_seconds(bench, family), bench.budget.end)


def has_budget(bench) -> bool:
    return bench.budget.left() > 0


# Trials' named shares of the budget left (budget.py says what each is for).
SHARES_OF_LEFT = {"pack": plan.PACK}


def part_of_left(bench, name: str) -> float:
    """The named share of the budget left (SHARES_OF_LEFT), in seconds; OutOfBudget
    where nothing is left."""
    seconds = bench.budget.left() * SHARES_OF_LEFT[name]
    if seconds <= 0:
        raise OutOfBudget(None)
    return seconds


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Every git run inside killed `seconds` from now at the latest; the deadline's
    coming is the budget's end for the trial (OutOfBudget), not git's failure."""
    try:
        with gitbench.deadline(seconds):
            yield
    except gitbench.DeadlineReached:
        raise OutOfBudget(None) from None


def within_budget(bench):
    """Every git run inside killed when the budget ends; its end is OutOfBudget."""
    return within(bench.budget.left())


def fits(bench, seconds: float, share: float) -> bool:
    """Whether `seconds` of work fit `share` of the budget left."""
    return seconds < bench.budget.left() * share



# The most a trial's git run may peak at: this share of the memory this process may use
# (the cgroup's limit, else what the host has available). A value whose run peaks above
# it is never written, however fast; the rest is left to whatever runs beside git.
MEMORY_SHARE = 0.5


def memory_allowed(limit: int) -> int:
    """Bytes a trial's git run may peak at, of `limit` this process may use."""
    return int(limit * MEMORY_SHARE)
