"""checkout.workers' real-git trial: Git's one worker against the engine's pick.

Where the whole tree fits the budget, a batch restored in a scratch clone and the whole
tree written, each with its next status; where it does not, a part of the tree in a
repository of its own, sized at this host's prices (planner.prices). The worker counts
are a ladder: one more is timed only where it fits, the rest waits for the budget's end.
"""
import dataclasses
import statistics
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Tuple, Type, TypeVar, Union

from . import preload
from .checkout_sweep import (THRESHOLD, WORKERS, _engine_per_file,
                             _engine_pick, _stakes, max_workers)
from ..measure import gitbench, planner
from ..measure.ab import STOPPED_SLOWER, OutOfBudget, Run, longest_run
from ..measure.bench import Bench
from ..measure.record import Comparison, Trial
from ..measure.sweep import MeasurementFailed
from ...models import stats

CLONE = "clone"            # the workload: the whole tree written, then the next status
CHECKOUT_FILES = 400       # files real git restores per timed checkout, at most
PILOT_FILES = 50           # the restore that prices a file before the batch is sized
PART_GROWTH = 1.5          # a larger part is made only where it holds this many times more
PART_FILES_PER_WORKER = 8  # files of a part a timed worker count gets, at least
PART_OVERRUN = 2           # a part's first run past this many runs' share: sized again
# The fewest workers a part gives PART_FILES_PER_WORKER files each. On a smaller part a
# worker's start outweighs its files where every file is dear, and a part that cannot
# show the tree's gain would decide against it; where a part this large does not fit,
# the budget that would fit it is named instead (docs/planner.md, "A part too small to
# show the gain").
PART_LEAST_WORKERS = 4
# A part's status after the write is run after this many runs of each count, its first
# (the warm-up, or the pilot's for Git's default), not after the timed runs: what it
# shows is a fixed cost of the burst, weighed once (checkout.chosen), and the pairs a
# verdict needs are priced without it.
STATUS_RUNS = 1
# The worker counts' rounds together (batch and tree write at each count) share
# budget.LADDER of what is left when they start: parallel checkout holds the largest
# gains on slow storage, and the keys after it (index threads, the untracked cache) keep
# the rest. A second count starts only where one more round like the first fits in it.
# The whole tree gets a pilot run where the batch prices it within this many times its
# allowance (the batch's pathspec makes its files look dearer than the tree's).
PILOT_SLACK = 4


@dataclass(frozen=True)
class BatchSize:
    """The batch real git restores, and what its pilot restores said of git's costs."""
    files: int
    warm: Optional[float]   # the pilot's seconds where the batch is the pilot's own files
    fixed: float            # seconds beside the files: git's start, the index, the status


@dataclass(frozen=True)
class WorkersFacts:
    """What the workers trial recorded beside its comparisons."""
    next_status: bool = False     # the batch timed with its next status (older records: not)
    part: Optional[int] = None    # entries of the part the counts were timed on, if one
    entries: Optional[int] = None  # the repository's entries, beside the part
    # The part's pilots' price of a run, where one was timed: git's seconds beside the
    # files, and a file's (what a later trial on a part needs at least: Threshold.price).
    part_fixed: Optional[float] = None
    part_per_file: Optional[float] = None
    # On a part: each timed count's next status against the one after a sequential write
    # (median seconds over median seconds): what more workers cost the next command; and
    # whether that was beyond the statuses' noise (stats.compare's verdict; older
    # records: None, their medians alone were taken).
    status_slowdown: Optional[Dict[str, float]] = None
    status_verdict: Optional[Dict[str, str]] = None
    # On a part: each count's next status, median seconds ("1": after a sequential write).
    status_seconds: Optional[Dict[str, float]] = None


W = TypeVar("W", bound=gitbench.CheckoutWorkload)


def _workload(bench: Bench, n: int) -> gitbench.CheckoutWorkload:
    """n tracked files spread evenly, restored into the scratch clone."""
    return _spread(bench, n, gitbench.CheckoutWorkload)


def _spread(bench: Bench, n: int, kind: Type[W]) -> W:
    """n tracked files spread evenly, written into the scratch clone by `kind`."""
    paths = bench.names[:: max(1, len(bench.names) // n)][:n]
    return kind(bench.ws.clone(), paths, bench.ws.root)


def _batch_files(bench: Bench) -> BatchSize:
    """CHECKOUT_FILES, or fewer where their A/B would not fit budget.CHECKOUT_BATCH of the budget
    left; and where the batch is the larger pilot's own files, that pilot's time (a run of
    Git's default on the batch already). Two sequential restores, each with its next
    status (PILOT_FILES and a tenth of it), price git's fixed cost and a file. On slow
    storage a smaller batch is what the budget can decide; parallel checkout gains less on
    a smaller batch (a worker's start is spread over fewer files), so the part errs
    towards keeping Git's default, never the other way."""
    n = min(len(bench.names), CHECKOUT_FILES)
    small, large = (_workload(bench, min(n, k)) for k in (PILOT_FILES // 10, PILOT_FILES))
    try:
        with planner.within_budget(bench):
            # Below Git's threshold: sequential. The first warms the clone.
            small.run({})
            t_large = large.run({})
    except MeasurementFailed:
        return BatchSize(n, None, 0.0)  # the A/B itself sees and reports the failure
    k_large = len(large.paths)
    assert small.last_wall is not None and large.last_wall is not None     # both ran
    # Priced by their walls: a run costs the budget its untimed removal of the files too.
    per_file, fixed = planner.line_through(len(small.paths), small.last_wall, k_large,
                                           large.last_wall)
    # A pair is both sides; the warm-up pair and bench.runs pairs; parallel is taken to
    # cost what sequential does (its workers' start is not in the pilot).
    per_side = longest_run(planner.share_of_left(bench, "checkout-batch"), bench.runs)
    fits = int((per_side - fixed) / per_file)
    files = max(k_large, min(n, fits))
    return BatchSize(files, t_large if files == k_large else None, fixed)


def _candidate(workers: int) -> Dict[str, str]:
    return {WORKERS: str(workers), THRESHOLD: "0"}


def _trial_workers(bench: Bench) -> Optional[Trial]:
    """Real git writes files sequentially against the engine's pick of workers, then
    against twice the pick (where the engine's sweep measured no count, the most workers
    the route can time: docs/planner.md, rule 4b). The engine's threads start cheaper
    than Git's worker processes, so git's best count can lie above the engine's
    (docs/planner.md, "Figures behind checkout_trial"): real git times both and the
    profile's objective chooses (chosen()). Where the whole tree fits the budget, a
    batch and the whole tree are timed in a scratch clone; where it does not (slow
    storage, a large repository), a part of the tree (_route)."""
    if not bench.names:
        return None
    if len(bench.names) < 100:
        return Trial.not_run(WORKERS, "fewer than 100 tracked files: Git never checks out in "
                             "parallel below its default threshold")
    s = bench.sweeps.get("checkout")
    if s is None:
        # The sweep measured nothing (its one-thread pilot outlasted its share: files that
        # dear are where workers matter most). Real git decides all the same, from the
        # most workers the route can time.
        bench.notes.append(f"{WORKERS}: the engine's sweep measured no worker count; real "
                           "git times the most workers its route can show")
    pick = _engine_pick(s) if s is not None else max_workers(bench)
    counts = [pick] + ([2 * pick] if 2 * pick <= max_workers(bench) else [])
    route = _route(bench, counts)
    if isinstance(route, Route):
        return _trial_on_part(bench, route, _part_counts(bench, counts, len(route.part.paths)))
    size = _batch_files(bench)
    batch = _workload(bench, size.files)
    tree: List[Optional[Tuple[gitbench.TreeWrite, Optional[float]]]] = []

    def compare(i: int, cand: Dict[str, str]) -> List[Comparison]:
        # The batch's extensions share the budget left with the whole tree's comparison
        # after it, as with a trial after this one: a batch within noise must not take
        # the pairs the tree's comparison needs.
        then = 1 if bench.counts(CLONE) and (not tree or tree[0]) else 0
        c = bench.ab("checkout", {}, cand, lambda: batch.run({}), lambda: batch.run(cand),
                     files=len(batch.paths), warm_default=None if i else size.warm,
                     then=then)
        if c.fails or c.stopped == STOPPED_SLOWER or not bench.counts(CLONE):
            return [c]
        warm = None
        if not tree:
            tree.append(_tree_workload(bench, c, size, route))
            warm = tree[0][1] if tree[0] else None
        return [c] + (list(_tree_write(bench, tree[0][0], cand, warm)) if tree[0] else [])

    def resume(cand: Dict[str, str], these: List[Comparison]) -> List[Comparison]:
        work: Dict[str, Optional[gitbench.CheckoutWorkload]] = {
            "checkout": batch, CLONE: tree[0][0] if tree and tree[0] else None}

        def more(c: Comparison, w: gitbench.CheckoutWorkload) -> Comparison:
            return bench.resume(c, lambda: w.run({}), lambda: w.run(cand))
        return [more(c, w) if planner.within_noise(c) and (w := work.get(c.workload)) else c
                for c in these]

    ladder = planner.Ladder(bench, WORKERS, _candidate, counts, compare, resume)
    ladder.climb()
    # Records from before the batch was timed with its next status lack this fact.
    return ladder.trial(lambda comparisons: Trial(WORKERS, comparisons,
                                                  asdict(WorkersFacts(next_status=True))))


@dataclass(frozen=True)
class Route:
    """A part of the tree the worker counts are timed on, and where it is the pilot's
    part, the pilot's seconds (a run of Git's default there already)."""
    part: gitbench.Part
    warm: Optional[float]
    per_file: Optional[float]   # the pilots' price of a run: seconds a file,
    fixed: Optional[float]      # and beside the files (None: one pilot only)
    warm_status: Optional[float] = None     # the part's status after the pilot's run


@dataclass(frozen=True)
class WholeTree:
    """The worker counts are timed on a batch, then on the whole tree, in a scratch clone:
    where a run of the whole tree (`work`) fits a run's share (`seconds`: that run's,
    Git's default, the A/B's warm-up), or where no part could be made (both None)."""
    work: Optional[gitbench.WholeTreeWrite]
    seconds: Optional[float]


def _on_part(part: gitbench.Part) -> gitbench.PartWrite:
    """Every file of the part written, then the part's whole status, then its write-back:
    the sequence a clone or a branch switch lives with, with the part's work only (its
    pathspec list, unused, is kept in the part's own git directory)."""
    return gitbench.PartWrite(part.worktree, part.paths, part.git_dir,
                              part)


def _route(bench: Bench, counts: List[int]) -> Union[Route, WholeTree]:
    """Where the worker counts are timed, priced by this host's prices (planner.prices:
    a small part written sequentially, its status and its write-back, as a part's runs
    are timed; a file never below the engine's one-thread write). Where the whole tree at
    that price fits a run of the counts' share within PILOT_SLACK, one run of the tree,
    stopped at that share, says (_whole_tree_pilot): the whole tree where it fits. Else
    the largest part whose runs fit: its work does not grow with the repository, and a
    larger part tells more of the whole. Its first run (Git's default) is the A/B's
    warm-up; where it cost more than planner.REPRICE times its price, it re-prices the
    part and a smaller one is made at once."""
    entries = len(bench.names)
    try:
        with planner.within_budget(bench):
            prices = planner.prices(bench, _least_part(bench))
    except MeasurementFailed as e:
        bench.notes.append(f"{WORKERS}: no part of the tree could be timed ({e}); the "
                           "whole tree is")
        return WholeTree(None, None)
    floor = _engine_per_file(bench)
    if prices.per_file < floor:
        prices = dataclasses.replace(prices, per_file=floor)
    per_run = _per_run(bench, len(counts))
    # The tree's runs are not followed by a wait for the write-back (what they leave is
    # the tree's own to pay, in the run or after it): its price leaves it out.
    if prices.run(entries) - prices.write_back <= per_run * PILOT_SLACK:
        whole = _whole_tree_pilot(bench, per_run)
        if whole.seconds is not None:
            return whole
    route = _sized_part(bench, counts, prices)
    for _ in range(2):
        if route.warm is not None:
            return route
        n = len(route.part.paths)
        # The part was sized at its price (for fewer counts where the part caps them);
        # its first run also runs the status, priced from the pricing part's.
        allowed = max(per_run, prices.run(n)) * PART_OVERRUN
        status = (prices.status or 0.0) * max(1.0, n / prices.entries)
        try:
            with planner.capped(bench, allowed + status):
                work = _on_part(route.part)
                warm = work.run({})
        except gitbench.DeadlineReached:
            repriced = prices.repriced(n, allowed * planner.REPRICE)
        except MeasurementFailed:
            return route        # the A/B sees and reports git's failure
        else:
            assert work.last_wall is not None       # it ran
            repriced = prices.repriced(n, work.last_wall - (work.last_status or 0.0))
            if repriced.run(n) <= allowed:
                return dataclasses.replace(route, warm=warm, warm_status=work.last_status)
        smaller = _sized_part(bench, counts, repriced)
        if len(smaller.part.paths) >= n:
            return route
        route, prices = smaller, repriced
    return route


def _sized_part(bench: Bench, counts: List[int], prices: planner.Prices) -> Route:
    """The part whose runs fit at these prices (_part_size). The largest pricing part
    no larger than that, with its run as the A/B's warm-up, where a new one would not
    hold PART_GROWTH times its entries or cannot be made."""
    n = _part_size(bench, counts, prices.per_file, prices.fixed)
    runs = [(prices.entries, prices.timed, prices.status),
            (prices.least.files, prices.least.timed, prices.least.status)]
    entries, timed, status = next((r for r in runs if r[0] <= n), runs[-1])
    priced = Route(bench.ws.part(entries), timed, prices.per_file, prices.fixed, status)
    if n < entries * PART_GROWTH:
        return priced
    try:
        return Route(bench.ws.part(n), None, prices.per_file, prices.fixed)
    except MeasurementFailed:
        return priced


def _least_part(bench: Bench) -> int:
    """The fewest entries a part's comparison can show the gain on (PART_LEAST_WORKERS
    workers with PART_FILES_PER_WORKER files each; fewer where the tree has fewer)."""
    return min(len(bench.names) - 1, PART_LEAST_WORKERS * PART_FILES_PER_WORKER)


def _whole_tree_pilot(bench: Bench, per_run: float) -> WholeTree:
    """One run of the whole tree written (Git's default), then its status, stopped at
    `per_run`: the tree's workload with those seconds, None where it did not fit (a part
    then decides).
    A tree that does not fit a run was timed before as an evenly spread slice of it in
    the full repository, whose pathspec git matches against every entry and whose next
    status reads every entry: costs that grow with the repository, the same on both
    sides, diluting the write's gain."""
    whole = _spread(bench, len(bench.names), gitbench.WholeTreeWrite)
    try:
        with planner.within_budget(bench):
            whole.make_directories()
    except MeasurementFailed:
        pass                        # the pilot's run makes them, or sees git fail
    try:
        with planner.capped(bench, per_run):
            return WholeTree(whole, whole.run({}))
    except MeasurementFailed:       # stopped at the deadline, or git failed: a part says
        # What the stopped run wrote is written back before a part is timed: a part's runs
        # time their own write-back (gitbench.PartWrite), and the first would time this
        # too, pricing the part's runs far above their cost. Counted in the budget, not
        # in any run; where the budget ends first,
        # the trial's deadline (calibrate._bounded) stops it as it stops git.
        gitbench.written_back(whole.clone)
        return WholeTree(whole, None)


def _per_run(bench: Bench, counts: int) -> float:
    """What one run may cost (planner.run_share): the ladder's share of the budget left,
    split between the counts, over bench.runs pairs and the warm-up pair; where that
    cannot hold the pricing part and the workers have the most at stake, the budget
    left."""
    return planner.run_share(bench, _stakes(bench, len(bench.names)), counts)


def _part_size(bench: Bench, counts: List[int], per_file: float, fixed: float) -> int:
    """The entries of a part whose runs fit, sized for the counts that will be timed on
    it, and never fewer than PART_LEAST_WORKERS workers' files (whether its comparison
    fits is then the A/B's to say: ab.run's OutOfBudget names the seconds short): where
    the part is too small to give every count PART_FILES_PER_WORKER files, the
    counts above become one (_part_counts), and the budget a second count would have had
    goes to a larger part for the first (a second count is still timed where the ladder
    finds it fits): no share is sized for a count that would be capped to another."""
    entries = len(bench.names)
    least = _least_part(bench)
    timed = len(counts)
    while True:
        n = min(entries - 1, int((_per_run(bench, timed) - fixed) / per_file))
        distinct = len(dict.fromkeys(min(c, _part_top(n)) for c in counts))
        if distinct >= timed or timed == 1:
            return max(n, least)
        timed = distinct


def _part_top(files: int) -> int:
    return max(2, files // PART_FILES_PER_WORKER)


def _part_counts(bench: Bench, counts: List[int], files: int) -> List[int]:
    """The counts timed on a part of `files` files: none above PART_FILES_PER_WORKER files
    a worker. More workers than that each start for a few files, which the whole tree's
    never do. (A rule to replace: docs/planner.md, "Not done yet".)"""
    top = _part_top(files)
    out = list(dict.fromkeys(min(c, top) for c in counts))
    if out != counts:
        bench.notes.append(f"{WORKERS}: on a part of {files} files, at most {top} workers "
                           f"were timed ({PART_FILES_PER_WORKER} files a worker), not "
                           + " and ".join(str(c) for c in counts if c > top))
    return out


def _trial_on_part(bench: Bench, route: Route, counts: List[int]) -> Trial:
    """The worker counts on a part: its files written and written back, timed; the
    status after them run after the first STATUS_RUNS runs of each count and kept apart,
    the racy re-read a faster write leaves weighed once (checkout.chosen). The part stands for
    the whole tree written (a clone) where the profile weighs that, else for a branch
    switch (a slice of the tree written, then the next status)."""
    work = _on_part(route.part)
    workload = CLONE if bench.counts(CLONE) else "checkout"
    n = len(route.part.paths)
    bench.notes.append(f"{WORKERS}: timed on a part of the tree, {n} of its "
                       f"{route.part.entries} files (runs of consecutive entries from all "
                       "over it): the whole tree written does not fit the budget")

    # worker count -> the part's next statuses after its first runs (STATUS_RUNS)
    statuses: Dict[str, List[float]] = ({"1": [route.warm_status]}
                                       if route.warm_status is not None else {})

    def timed(cand: Dict[str, str], a_b: Callable[[Run, Run], Comparison]) -> List[Comparison]:
        def run(c: Dict[str, str]) -> float:
            w = c.get(WORKERS, "1")
            work.with_status = len(statuses.get(w, ())) < STATUS_RUNS
            t = work.run(c)
            if work.last_status is not None:
                statuses.setdefault(w, []).append(work.last_status)
            return t

        return [a_b(lambda: run({}), lambda: run(cand))]

    def compare(i: int, cand: Dict[str, str]) -> List[Comparison]:
        return timed(cand, lambda a, b: bench.ab(workload, {}, cand, a, b, files=n,
                                                 warm_default=None if i else route.warm,
                                                 warm_does_more=True))

    def resume(cand: Dict[str, str], these: List[Comparison]) -> List[Comparison]:
        return timed(cand, lambda a, b: bench.resume(these[0], a, b))

    ladder = planner.Ladder(bench, WORKERS, _candidate, counts, compare, resume)
    ladder.climb()
    return ladder.trial(lambda comparisons: Trial(WORKERS, comparisons,
                                                  asdict(_part_facts(route, statuses))))


def _part_facts(route: Route, statuses: Dict[str, List[float]]) -> WorkersFacts:
    """What a trial on route's part records: the part, its pilots' prices, and the next
    statuses after each count."""
    after = _status_after(statuses)
    return WorkersFacts(True, len(route.part.paths), route.part.entries,
                        None if route.fixed is None else round(route.fixed, 4),
                        None if route.per_file is None else round(route.per_file, 5),
                        {w: round(e.ratio, 3) for w, e in after.items()} or None,
                        # A verdict only where the statuses were enough for one:
                        # else their medians alone are read (checkout._status_paid).
                        {w: e.verdict for w, e in after.items()
                         if stats.conclusive(statuses["1"], statuses[w])} or None,
                        {w: round(statistics.median(ts), 4) for w, ts in statuses.items()
                         if ts} or None)


def _status_after(statuses: Dict[str, List[float]]) -> Dict[str, stats.RatioEstimate]:
    """Each parallel count's next status against the one after a sequential write (its
    verdict stays "no change" on fewer runs than stats.conclusive needs)."""
    one = statuses.get("1")
    return {w: stats.compare(one, ts) for w, ts in statuses.items()
            if w != "1" and one and ts}


def _tree_workload(bench: Bench, batch: Comparison, size: BatchSize,
                   timed: WholeTree = WholeTree(None, None)
                   ) -> Optional[Tuple[gitbench.TreeWrite, Optional[float]]]:
    """The whole tree written as a clone writes it, then the next status (gitbench.TreeWrite),
    with the seconds of a pilot run of it (Git's default), which the A/B takes as its
    warm-up: `timed`'s, where _route timed one already. Else (no part could be made)
    a run may cost 1 / (2 x (runs + 1)) of half the budget left (a worker count's
    share: the ladder times a second count only where it fits, budget.LADDER). It is
    priced from the batch: git's cost beside its files (size.fixed), the lstat of every
    entry the next whole status makes (the preload sweep's engine pass), and the batch's
    cost a file. That price is high where the batch's pathspec, matched against every
    entry, costs more than its files, so where the whole tree is priced within PILOT_SLACK of fitting, one run of it, stopped at its
    allowance, decides. Elsewhere an evenly spread part is timed, skipped only where it
    would be no larger than the batch, which has then said all it can."""
    if timed.work is not None and timed.seconds is not None:
        return timed.work, timed.seconds
    whole = _spread(bench, len(bench.names), gitbench.WholeTreeWrite)
    median, files = statistics.median(batch.times_default), max(1, batch.files or 1)
    lstat = preload.whole_lstat(bench)
    beside = size.fixed + (lstat or 0.0)
    per_file = max((median - size.fixed) / files, median / files / 10, 1e-6)

    def per_run() -> float:
        return longest_run(planner.share_of_left(bench, "tree-run"), bench.runs)

    def fits(seconds: float) -> int:
        # Unmeasured, the status is priced as the files again (the old, safe rule).
        return (int((seconds - beside) / per_file) if lstat is not None
                else int(seconds / (2 * per_file)))

    allowance = per_run()
    if fits(allowance * PILOT_SLACK) >= len(whole.paths):
        try:
            with planner.capped(bench, allowance):
                return whole, whole.run({})
        except gitbench.DeadlineReached:
            # The whole tree took longer than the allowance: a floor on a file's price.
            per_file = max(per_file, (allowance - beside) / len(whole.paths))
        except MeasurementFailed:
            return whole, None      # the A/B sees and reports git's failure
    n = min(len(whole.paths) - 1, max(0, fits(per_run())))
    if n <= (batch.files or 0):
        bench.notes.append(f"{WORKERS}: whole-tree write not timed: the budget left fits "
                           f"{n} files, no more than the batch; a larger --budget would time it")
        return None
    bench.notes.append(f"{WORKERS}: the tree write timed {n} of {len(whole.paths)} files "
                       "(spread evenly) to fit the budget")
    return _spread(bench, n, gitbench.TreeWrite), None


def _tree_write(bench: Bench, work: gitbench.TreeWrite, cand: Dict[str, str],
                warm: Optional[float]) -> Tuple[Comparison, ...]:
    try:
        return (bench.ab(CLONE, {}, cand, lambda: work.run({}), lambda: work.run(cand),
                         files=len(work.paths), warm_default=warm),)
    except OutOfBudget as e:
        bench.notes.append(f"{WORKERS}={cand[WORKERS]}: whole-tree write not timed: {e}")
        return ()
