"""The calibration's planner: what this host charges for the work trials are made of,
and which trial is owed the budget.

Prices are measured, never assumed. The planner's first git seconds time the least part
the asking trial can use, and where that was cheap one PRICE_SPAN times larger, each
written sequentially, its status run and its write-back waited for, as every later run
on a part is (gitbench.PartWrite).
That gives what a run costs beside its files (git's starts, the index read and written,
the write-back) and what a file costs (written, refreshed, removed); beside them, the
part's making (a fixed cost, once per size) and git's start on this storage.

Every later price derives from these (Prices.run), and a run that costs more than
REPRICE times or less than 1/REPRICE of its price re-prices it there and then
(Prices.repriced), so a trial sized on a wrong price is sized again at once, not at the
budget's end.

Shares: a trial's runs get budget.LADDER of the budget left; where that cannot hold its
smallest comparison and no key still to run has more at stake, the budget left is
its (run_share), and once per calibration that key may finish up to budget.OWED_GRACE
of the budget past its end (owed_grace). A trial of several counts climbs a Ladder:
one more count only where it fits that share, the rest (and more runs for a count
within noise) at the budget's end.
"""
import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Callable, ContextManager, Dict, Iterator, List, Optional, Set,
                    Tuple, TypeVar)

from . import budget as budget_plan, gitbench, peak
from .ab import STOPPED_SLOWER, OutOfBudget, full_seconds, longest_run
from .record import Comparison, Trial
from .sweep import MeasurementFailed, Share
from ...git import repo_environ
from ...models import stats

if TYPE_CHECKING:   # bench.py reads Prices from here
    from .bench import Bench
    from ...probes.host import HostFacts
    from ...probes.layout import RepoLayout

# The parts prices are measured on: first the least part the asking trial can use (a
# smaller one would be made and run for its price alone, a fixed cost slow storage
# cannot afford), then, only where that run took at most SMALL_PILOT of the budget
# left, one PRICE_SPAN times larger: git's cost beside the files and a file's are the
# line through their runs. Where the first run was dear, it is Git's default's first run
# on that part, and its price alone (git's starts and the write-back apart, the rest a
# file's) errs towards smaller parts.
PRICE_SPAN = 4
SMALL_PILOT = 0.02
# A run priced off by more than this factor either way is priced again from itself.
REPRICE = 2.0


@dataclass(frozen=True)
class Prices:
    """Seconds this host charges for a run on a part (its files removed, written
    sequentially, its status, its write-back), from runs on the least part a trial can
    use and, where that was cheap, on one PRICE_SPAN times larger: what a run costs
    beside its files (`fixed`: git's starts, the index read and written, the write-back)
    and a file (`per_file`: written, refreshed by the status, removed before the run)."""

    least: "PartRun"        # the run on the least part (the only one where it was dear)
    entries: int            # the pricing part's entries (the larger where two were run)
    part_made: float        # seconds that part took to make (a fixed cost, once a size)
    git_start: float        # one git command that reads nothing but its config
    fixed: float
    per_file: float
    write_back: float       # of the larger part's run
    timed: float            # the larger part's run as a trial times it (Git's default)
    status: Optional[float] = None  # the pricing part's status after that run

    def run(self, files: int) -> float:
        """A sequential run on a part of `files` files, as the budget pays for it (the
        status after it apart: `status`)."""
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


def least_per_file(files: int, seconds: float) -> float:
    """The least a file is priced at from a run of `files` files that took `seconds`: a
    tenth of the run's average (what is subtracted or differenced to price a file can be
    anything on a noisy or loaded host, nothing included)."""
    return seconds / max(1, files) / 10


def line_through(k0: int, t0: float, k1: int, t1: float) -> Tuple[float, float]:
    """(seconds a file, seconds beside the files) through two runs of k0 and k1 files; a
    file costs at least a tenth of the larger run's average (two runs' noise can make
    their difference anything), and the fixed cost is never negative."""
    if k1 < k0:
        k0, t0, k1, t1 = k1, t1, k0, t0
    per_file = max((t1 - t0) / max(1, k1 - k0), least_per_file(k1, t1))
    return per_file, max(0.0, t1 - per_file * k1)


def one_run_price(files: int, cost: float, beside: float) -> Tuple[float, float]:
    """(seconds a file, seconds beside the files) from one run of `files` files, `beside`
    of its `cost` being git's own (its starts, the write-back), a file priced at least
    least_per_file(): on a loaded host the starts timed apart can take as long as the
    whole run did."""
    per_file = max((cost - beside) / max(1, files), least_per_file(files, cost))
    return per_file, max(0.0, cost - per_file * max(1, files))


def prices(bench: "Bench", least: int) -> Prices:
    """This host's prices, measured once per calibration on the first call (kept on the
    bench), from a part of `least` entries first: the least part the asking trial can
    use, whose run is then its first of Git's default there. MeasurementFailed where no
    part can be made or git fails there; DeadlineReached where the budget's deadline
    came first."""
    if bench.prices is not None:
        return bench.prices
    with gitbench.after_each_run(lambda: bench.budget.tick("prices")):
        bench.prices = _measured(bench, least)
    bench.budget.tick("prices")
    return bench.prices


T = TypeVar("T")


def made_once(bench: "Bench", name: str, make: Callable[[], T]) -> T:
    """What `make` makes, made on the first call of a calibration and kept (a fixed cost
    two keys share: a sample pack both index-pack trials time on)."""
    if name not in bench.made:
        bench.made[name] = make()
    made: T = bench.made[name]
    return made


def _measured(bench: "Bench", least: int) -> Prices:
    entries = len(bench.names)
    started = budget_plan.now()
    part = bench.ws.part(max(1, min(least, entries)))
    made = budget_plan.now() - started
    t0 = budget_plan.now()
    gitbench.run_git(["rev-parse", "--git-dir"], part.worktree, gitbench.config_env({}),
                     hooks=False)
    start = budget_plan.now() - t0
    small = _run_on(part)
    priced = small
    if small.wall <= bench.budget.left() * SMALL_PILOT and entries > small.files:
        # Cheap here: a part many times larger prices a file apart from a run's own cost.
        t0 = budget_plan.now()
        large_part = bench.ws.part(min(small.files * PRICE_SPAN, entries))
        made = budget_plan.now() - t0
        priced = _run_on(large_part)
        per_file, fixed = line_through(small.files, small.cost, priced.files, priced.cost)
    else:
        per_file, fixed = one_run_price(small.files, small.cost, 2 * start + small.write_back)
    return Prices(small, priced.files, made, start, fixed, per_file, priced.write_back,
                  priced.timed, priced.status)


@dataclass(frozen=True)
class PartRun:
    """One sequential run on a part: what it timed, its wall time (the removal and the
    status included), the write-back it timed and the status after it."""

    files: int
    timed: float
    wall: float
    write_back: float
    status: Optional[float]

    @property
    def cost(self) -> float:
        """What a run like it costs the budget where no status follows it: a trial runs
        the status after a count's first run only (its racy re-read weighed once)."""
        return self.wall - (self.status or 0.0)


def _run_on(part: gitbench.Part) -> PartRun:
    """One sequential run on the part, as a trial's runs there are made."""
    run = gitbench.PartWrite(part.worktree, part.paths, part.git_dir,
                             part)
    timed = run.run({})
    assert run.last_wall is not None and run.last_write_back is not None    # set by run()
    return PartRun(len(run.paths), timed, run.last_wall, run.last_write_back, run.last_status)


def run_share(bench: "Bench", mine: Optional[float], counts: int) -> float:
    """The longest one run of a trial may take, for a key with `mine` seconds at stake
    whose comparisons cover `counts` candidates: budget_plan.LADDER of the budget left, over
    the warm-up pair and bench.runs pairs each. Where that cannot hold one run on the
    least pricing part at this host's prices and no key still to
    run (bench.pending) has more at stake, all the budget left: the key with the most at
    stake is decided before keys with less start, or says how much budget it needs.
    Still over bench.runs pairs, not the fewest a clear gain needs: a part shows less of
    the gain than the tree, so its comparison must be able to reach a verdict without
    ending early."""
    left = bench.budget.left()
    usual = longest_run(left * budget_plan.LADDER / counts, bench.runs)
    if bench.prices is None or usual >= bench.prices.run(bench.prices.least.files):
        return usual
    if not _most_at_stake(bench, mine):
        return usual
    return longest_run(left / counts, bench.runs)


def _most_at_stake(bench: "Bench", stakes: Optional[float]) -> bool:
    """Whether a key with `stakes` seconds at stake (None: unknown) has at least as much
    at stake as every key still to run (bench.pending) whose stakes are known."""
    if stakes is None:
        return False
    return not any(s is not None and s > stakes for s in (e.stakes(bench) for e in bench.pending))


def owed_grace(bench: "Bench", stakes: Optional[float]) -> float:
    """The seconds past the budget a key with `stakes` seconds at stake may finish its
    trial in: budget_plan.OWED_GRACE of the budget, once per calibration, for the key with the
    most at stake of those still to run (bench.pending), where those stakes are more
    than the grace itself (the user waits that much longer once, for a gain each time
    the work runs); else none. Where the budget cannot hold the key's least comparison,
    that key is owed it (run_share): a gain of 1.7x is not left at Git's default for
    want of a few seconds, and where even the grace cannot hold it the key says by how
    much."""
    grace = bench.budget.total * budget_plan.OWED_GRACE
    if bench.graced or stakes is None or stakes <= grace:
        return 0.0
    return grace if _most_at_stake(bench, stakes) else 0.0


Compare = Callable[[int, Dict[str, str]], List[Comparison]]
Resume = Callable[[Dict[str, str], List[Comparison]], List[Comparison]]
Candidate = Callable[[int], Dict[str, str]]


class Ladder:
    """The values of a count (`key`: worker counts) real git times, in order, each through
    compare(i, candidate(count)) (its comparisons, the main one first), while one more
    count like those so far fits budget_plan.LADDER of the budget left when it starts (climb).
    What that share left out waits for the budget's end (step, called by calibrate once every key has had its trial): a
    count not timed, then the count faster by its median but within noise, with more runs
    (resume(candidate, its comparisons)): no count is left untimed while the budget has
    seconds to spare."""

    def __init__(self, bench: "Bench", key: str, candidate: Candidate, counts: List[int],
                 compare: Compare, resume: Resume) -> None:
        self.bench, self.key, self.candidate, self.counts = bench, key, candidate, list(counts)
        self.compare, self.resume = compare, resume
        self.timed: Dict[int, List[Comparison]] = {}
        self.untimed: List[int] = []
        self.resumed: Set[int] = set()

    def comparisons(self) -> Tuple[Comparison, ...]:
        return tuple(c for w in self.counts if w in self.timed for c in self.timed[w])

    def climb(self) -> None:
        bench = self.bench
        start, allowance = budget_plan.now(), bench.budget.left() * budget_plan.LADDER
        for i, w in enumerate(self.counts):
            spent = budget_plan.now() - start
            if i and spent / i * (i + 1) > allowance:
                bench.notes.append(f"{self.key}={w} not timed in its share: "
                                   f"{self.key}={self.counts[0]} took {spent:.1f} s, and "
                                   f"another count would pass the {budget_plan.LADDER:.0%} of the "
                                   "budget left that the counts share (it waits for what "
                                   "the other keys leave)")
                self.untimed = self.counts[i:]
                return
            try:
                these = self.compare(i, self.candidate(w))
            except OutOfBudget as e:
                if not self.timed:
                    raise
                bench.notes.append(f"{self.key}={w} not timed: {e}")
                self.untimed = self.counts[i:]
                return
            self.timed[w] = these
            if these[0].fails or these[0].stopped == STOPPED_SLOWER:
                return       # larger counts fail as well, or cost more still

    def trial(self, make: Callable[[Tuple[Comparison, ...]], Trial]) -> Trial:
        """The trial of the counts timed so far (make(comparisons)); where something is
        left for the budget's end, bench.sharpen answers it again after one more step."""
        def sharpen() -> Optional[Trial]:
            return make(self.comparisons()) if self.step() else None
        trial = make(self.comparisons())
        if self.untimed or self._to_resume() is not None:
            self.bench.sharpen[trial.key] = sharpen
        return trial

    def step(self) -> bool:
        """One more thing timed: the next count not timed, else more runs for the count
        _to_resume names; False where nothing is left."""
        if self.untimed:
            w = self.untimed.pop(0)
            these = self.compare(max(1, len(self.timed)), self.candidate(w))
            self.bench.notes.append(f"{self.key}={w} timed with what the other keys left")
            self.timed[w] = these
            if these[0].fails or these[0].stopped == STOPPED_SLOWER:
                self.untimed = []
            return True
        again = self._to_resume()
        if again is None:
            return False
        self.resumed.add(again)
        self.timed[again] = self.resume(self.candidate(again), self.timed[again])
        self.bench.notes.append(f"{self.key}={again}: faster by its median but within noise, "
                                "more runs with what the other keys left")
        return True

    def _to_resume(self) -> Optional[int]:
        """The count faster by its median than Git's default but within noise, the
        fastest such not resumed yet; None where a count already shown faster was faster
        still by its median (more runs could not make this one the choice)."""
        def speedup(w: int) -> float:
            e = self.timed[w][0].estimate
            return e.speedup if e else 0.0
        noisy = [w for w, cs in self.timed.items()
                 if w not in self.resumed and any(within_noise(c) for c in cs)]
        if not noisy:
            return None
        best = max(noisy, key=speedup)
        shown = [w for w, cs in self.timed.items() if cs[0].estimate is not None
                 and cs[0].estimate.verdict == stats.FASTER and speedup(w) >= speedup(best)]
        return None if shown else best


def within_noise(c: Comparison) -> bool:
    """Faster by its median than Git's default beyond stats.MIN_EFFECT, but not beyond
    its runs' noise: more runs could decide it."""
    return (c.estimate is not None and not c.fails and c.stopped != STOPPED_SLOWER
            and c.estimate.verdict == stats.NO_CHANGE
            and c.estimate.speedup > 1 + stats.MIN_EFFECT)


def step_price(steps: List[Tuple[int, float]], n: int) -> float:
    """What a part of n entries is priced at from the parts priced so far: in proportion
    to the last one's price from a single step (git's start counted as if it grew with
    the entries: high), else on the line through the last two, never below the last."""
    (n1, p1), = steps[-1:]
    if len(steps) == 1:
        return p1 * n / n1
    n0, p0 = steps[-2]
    return max(p1, p1 + (p1 - p0) / (n1 - n0) * (n - n1))


@dataclass(frozen=True)
class PricedPart:
    """A part made and priced for a trial that grows its part (grown_part)."""

    part: gitbench.Part
    ready_at: float         # when its index may be settled (FilesWritten.ready_at)
    wrote: float            # the write's seconds
    runs: float             # the least runs of the A/B of one status there (ab.least_seconds)
    # The status that priced it, where its index was settled first (files a checkout
    # trial left there): a run of Git's default as the A/B's are (None: racily clean).
    warm: Optional[float]


def grown_part(bench: "Bench", entries: int, first: int, step: int,
               priced: Callable[[int], PricedPart]) -> PricedPart:
    """The largest part that fits budget_plan.GROWN_PART of the budget left, its files settled
    (Part.settle_index): from `first` entries, `step` times larger at each step while the
    next step's price (step_price) and the one wait for the files to age fit. A part is
    priced by `priced(entries)`: its files' write and the A/B's least runs there. A larger
    part tells more of the tree: git's start weighs on a small part
    (bench/untracked_part.py)."""
    share = budget_plan.GROWN_PART
    share_end = budget_plan.now() + bench.budget.left() * share
    if share_end - budget_plan.now() < gitbench.RACY_SECONDS:
        # Not even the wait for a part's files to age fits: nothing is made.
        raise OutOfBudget(gitbench.RACY_SECONDS / share - bench.budget.left())
    steps: List[Tuple[int, float]] = []
    made: Optional[PricedPart] = None
    n = min(first, entries)
    while True:
        try:
            with gitbench.deadline(share_end - budget_plan.now()):
                made_now = priced(n)
        except gitbench.DeadlineReached:
            if made is None:
                raise OutOfBudget(None) from None
            break
        made, size = made_now, len(made_now.part.paths)
        steps.append((size, made_now.wrote + made_now.runs))
        if size >= entries or size < n:
            break           # every entry, or every regular file, is in the part
        n = min(entries, size * step)
        if budget_plan.now() + step_price(steps, n) + gitbench.RACY_SECONDS > share_end:
            break
    # The wait and the A/B's least runs must fit what is left, or neither is spent.
    needed = max(0.0, made.ready_at - time.time()) + made.runs
    if needed > bench.budget.left():
        raise OutOfBudget(needed - bench.budget.left())
    with within_budget(bench):
        made.part.settle_index()
    return made


# Each family's engine sweep: its share of the whole budget (a share of TOTAL, so a
# sweep always gets its time, even late in the run).
SWEEPS = {"checkout": budget_plan.SWEEP_CHECKOUT, "preload": budget_plan.SWEEP_PRELOAD,
          "index": budget_plan.SWEEP_INDEX}


def sweep_share(bench: "Bench", family: str) -> Share:
    """The family's sweep's share of the budget, starting now."""
    return Share(bench.options.budget * SWEEPS[family], bench.budget.end)


def later_seconds(bench: "Bench", family: str) -> float:
    """What a sweep left for after the trials (findings only) may take: its family's
    share, or what is left of the budget where less."""
    return min(bench.options.budget * SWEEPS[family], bench.budget.left())


def later_share(bench: "Bench", family: str) -> Share:
    """A Share of later_seconds, starting now: a deferred sweep's."""
    return Share(later_seconds(bench, family), bench.budget.end)


def has_budget(bench: "Bench") -> bool:
    return bench.budget.left() > 0


# Trials' named shares of the budget left (budget.py says what each is for; "tree-run":
# one run of the whole tree written may take half of what is left).
SHARES_OF_LEFT = {"pack": budget_plan.PACK, "checkout-batch": budget_plan.CHECKOUT_BATCH,
                  "tree-run": 0.5, "history": budget_plan.HISTORY}


def share_of_left(bench: "Bench", name: str) -> float:
    """The named share of the budget left (SHARES_OF_LEFT), in seconds (0 once it ended)."""
    return bench.budget.left() * SHARES_OF_LEFT[name]


def part_of_left(bench: "Bench", name: str) -> float:
    """The named share of the budget left (SHARES_OF_LEFT), in seconds; OutOfBudget
    where nothing is left."""
    seconds = share_of_left(bench, name)
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


def within_budget(bench: "Bench") -> ContextManager[None]:
    """Every git run inside killed when the budget ends; its end is OutOfBudget."""
    return within(bench.budget.left())


@contextlib.contextmanager
def capped(bench: "Bench", seconds: float) -> Iterator[None]:
    """Every git run inside killed `seconds` from now, or when the budget ends if sooner:
    the first is the caller's (DeadlineReached), the budget's end is OutOfBudget."""
    try:
        with gitbench.deadline(min(seconds, bench.budget.left())):
            yield
    except gitbench.DeadlineReached:
        if bench.budget.left() <= 0:
            raise OutOfBudget(None) from None
        raise


def fits(bench: "Bench", seconds: float, share: float) -> bool:
    """Whether `seconds` of work fit `share` of the budget left."""
    return seconds < bench.budget.left() * share


def price_fits(bench: "Bench", price: Callable[[float], float]) -> bool:
    """Whether work priced by `price(left)` (seconds; past `left`, it may stop pricing)
    fits what the budget has left."""
    left = bench.budget.left()
    return price(left) <= left


def holds_runs(seconds: float, runs: int) -> bool:
    """Whether the deadline the git runs inside are held to (within, capped; else a
    run's own time limit) leaves `runs` more runs of `seconds` each."""
    try:
        return gitbench.time_left() >= runs * seconds
    except gitbench.DeadlineReached:
        return False


def run_limit(bench: "Bench", one_run: Optional[float]) -> Optional[float]:
    """Where a comparison of runs of `one_run` seconds (an estimate, such as the probe's)
    cannot fit its full runs in the budget left, the longest run that could; None where
    they fit or nothing estimates the run."""
    left = bench.budget.left()
    if one_run is None or full_seconds(one_run, bench.runs) <= left:
        return None
    return longest_run(left, bench.runs)


def bounded_run(run: Callable[[], float], most: float) -> Optional[float]:
    """run's seconds, or None where it passed `most` seconds (its git killed there)."""
    try:
        with gitbench.deadline(most):
            return run()
    except gitbench.DeadlineReached:
        return None


def sample_seconds(share: Share) -> float:
    """What a sweep may spend reading its sample's file sizes, of its share."""
    return share.seconds * budget_plan.SAMPLE_OF_SWEEP


def in_share(bench: "Bench", share: Share, price: Callable[[float], float],
             compare: Callable[..., Trial]) -> Optional[Trial]:
    """compare(bench'), where bench' has for budget what `share` has left, where
    `price(left)` fits it: its git killed at the share's end. None where it does not
    fit, the share ends first or git fails: the trial then runs in its turn."""
    left = share.left()
    inside = dataclasses.replace(bench, budget=budget_plan.Budget(left), sharpen={})
    try:
        with gitbench.deadline(left):
            if price(left) > left:
                return None
            return compare(inside)
    except (OutOfBudget, gitbench.DeadlineReached, MeasurementFailed):
        return None



# The most a trial's git run may peak at: this share of the memory this process may use
# (the cgroup's limit, else what the host has available). A value whose run peaks above
# it is never written, however fast; the rest is left to whatever runs beside git.
MEMORY_SHARE = 0.5
MIB = 1 << 20


def memory_allowed(limit: int) -> int:
    """Bytes a trial's git run may peak at, of `limit` this process may use."""
    return int(limit * MEMORY_SHARE)


def how_it_fit(r: peak.PeakRun, allowed: int) -> str:
    """How run r fitted `allowed` bytes, for a reason that says it did: its peak, or,
    confined where the peak passed them, that the kernel let it end there (its resident
    set counts the pack files git maps, pages dropped under the limit: PeakRun.over)."""
    if r.peak <= allowed or not r.confined:
        return f"peaked at {r.peak / MIB:.0f} MiB of the {allowed / MIB:.0f} MiB a run may use"
    within = (f"the {allowed / MIB:.0f} MiB" if not 0 < r.limit < allowed else
              f"{r.limit / MIB:.0f} MiB (what the container had left) of the "
              f"{allowed / MIB:.0f} MiB")
    return (f"ended whole confined to {within} a run may use (its "
            f"resident set peaked at {r.peak / MIB:.0f} MiB, the pack files git maps "
            "included, pages the kernel drops under the limit rather than kill git)")


def memory_here(host: "HostFacts") -> Tuple[int, str]:
    """(bytes a git run may peak at, of what) on the host of `host` (probes.host's
    HostFacts, read now): verify's allowance."""
    if host.memory_limit:
        return memory_allowed(host.memory_limit), "the cgroup's memory limit"
    return memory_allowed(host.memory_available), "the host's available memory"


def how_it_did_not_fit(r: peak.PeakRun, allowed: int) -> str:
    """How run r did not fit `allowed` bytes."""
    if r.stopped_at_limit:
        past = (f"the {allowed / MIB:.0f} MiB a run may use" if r.limit >= allowed else
                f"the {r.limit / MIB:.0f} MiB the container had left beside git-tune's own "
                f"memory of the {allowed / MIB:.0f} MiB a run may use")
        return f"was stopped at {r.peak / MIB:.0f} MiB without a cgroup of its own, past {past}"
    if not r.killed_at_limit:
        return f"peaked at {r.peak / MIB:.0f} MiB, above the {allowed / MIB:.0f} MiB a run may use"
    if r.limit < allowed:
        return (f"was killed by the kernel at {r.limit / MIB:.0f} MiB, what the container "
                f"had left beside git-tune's own memory of the {allowed / MIB:.0f} MiB a "
                "run may use")
    return f"was killed by the kernel at the {allowed / MIB:.0f} MiB a run may use"


class OverMemory(MeasurementFailed):
    """A run peaked above the memory it may use, or was killed there."""


def memory_runner(what: str, args: List[str], repo: "RepoLayout", allowed: int, within: str,
                  named_by: str, seen: Optional[Dict[str, peak.PeakRun]] = None,
                  stdin_file: Optional[str] = None) -> gitbench.Runner:
    """A timed run of `git ARGS` (`what`, as messages name it) in `repo` (a RepoLayout: from its work tree, its git
    directory where it has none), its peak measured
    (peak.run): runner(settings, trace_file=None) -> seconds. OverMemory where it peaked
    above `allowed` (`within`: of what) or was killed there, MeasurementFailed where git
    failed, DeadlineReached at the deadline. Each value of the key `named_by` has its
    first run kept in `seen` ("default" for Git's)."""
    cwd = repo.top

    def run(settings: Dict[str, str], trace_file: Optional[str] = None) -> float:
        env = repo_environ(repo, gitbench.config_env(settings))
        if trace_file:
            env["GIT_TRACE2_EVENT"] = trace_file
        r = peak.run(args, cwd, env, allowed, gitbench.time_left(), stdin_file)
        gitbench.ran()
        if seen is not None:
            seen.setdefault(settings.get(named_by, "default"), r)
        if r.timed_out:
            raise gitbench.DeadlineReached(f"{what}: stopped at the deadline")
        if r.over(allowed):
            raise OverMemory(f"{what} {how_it_did_not_fit(r, allowed)} ({MEMORY_SHARE:.0%} of {within})")
        if r.returncode != 0:
            raise MeasurementFailed(f"{what} failed: {r.stderr.strip()[:300]}")
        return r.seconds
    return run
