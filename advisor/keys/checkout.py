"""checkout.workers and checkout.thresholdForParallelism: parallel checkout.

The engine writes a sample of the repository's files with 1..N threads: the
curve and a cost model (serial, per file, per worker, parallelism) of this
storage. Real git decides: a scratch clone restores a batch of missing files
sequentially against N workers (workers), then at batch sizes bisected towards
where parallel starts to win (threshold).
"""
import dataclasses
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Set, Tuple, Union

from git_tune import engine
from git_tune.errors import EngineError
from git_tune.advisor.decide import advice
from git_tune.advisor.keys import preload, registry
from git_tune.advisor.measure import budget as plan, gitbench, search
from git_tune.advisor.measure.ab import (STOPPED_SLOWER, OutOfBudget, Run, least_seconds,
                                         longest_run)
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.record import Calibration, Comparison, Sweep, Trial, comparison
from git_tune.advisor.measure.search import Dim
from git_tune.advisor.measure.sweep import (MeasurementFailed, Share, engine_measure,
                                            by_point as sweep_points, run as run_sweep)
from git_tune.models import catalogue, costmodel, stats, workloads

WORKERS, THRESHOLD = "checkout.workers", "checkout.thresholdForParallelism"
CLONE = "clone"            # the workload: the whole tree written, then the next status
SAMPLE_FILES = 2000        # files the engine writes per checkout measurement, at most
ENGINE_PILOT = 20          # files the engine writes first, to price one
WARM_FILES = 200           # the engine's warm-up write, where it is cheap
MIN_ENGINE_BATCH = 40      # files per engine measurement, at least
CHECKOUT_FILES = 400       # files real git restores per timed checkout, at most
PILOT_FILES = 50           # the restore that prices a file before the batch is sized
TINY_FILES = 20            # the batch that prices one worker process
PART_PILOT = 48            # entries of the part that prices a file where the tree may not fit
PART_GROWTH = 1.5          # a larger part is made only where it holds this many times more
PART_FILES_PER_WORKER = 8  # files of a part a timed worker count gets, at least
PART_OVERRUN = 2           # a part's first run past this many runs' share: sized again
# The worker counts' rounds together (batch and tree write at each count) share
# plan.LADDER of what is left when they start: parallel checkout holds the largest
# gains on slow storage, and the keys after it (index threads, the untracked cache) keep
# the rest. A second count starts only where one more round like the first fits in it.
# Engine times within this share of the fastest count's are taken as equal (_engine_pick).
KNEE = 0.1
# The engine's ranking may set a worker count above what real git timed on a part, at
# most this many times it (_beyond_the_part).
EXTRAPOLATE = 2
# The whole tree gets a pilot run where the batch prices it within this many times its
# allowance (the batch's pathspec makes its files look dearer than the tree's).
PILOT_SLACK = 4
THRESHOLD_MARGIN = 0.05    # parallel must beat sequential by 5% at the threshold
THRESHOLD_CHANGE = 0.3     # and the threshold must differ from Git's by 30% to be worth a key
# The threshold's gain is on small batches, not the 400-file checkout the workers
# gain was timed on: a workload of its own, so the two are not multiplied together.
THRESHOLD_WORKLOAD = "checkout-small-batches"


@dataclass(frozen=True)
class BatchSize:
    """The batch real git restores, and what its pilot restores said of git's costs."""
    files: int
    warm: Optional[float]   # the pilot's seconds where the batch is the pilot's own files
    fixed: float            # seconds beside the files: git's start, the index, the status


@dataclass(frozen=True)
class Facts:
    files: int = 0                        # the engine's sample (0: a record without one)
    bytes: int = 0
    model: Optional[dict] = None          # costmodel.ParallelCost without its replicas
    model_samples: Optional[list] = None  # (workers, files, seconds)
    cores: int = 0                        # CPUs the engine's threads had (0: not recorded)


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


@dataclass(frozen=True)
class ThresholdFacts:
    """What the threshold trial recorded: the worker count its batches ran at, and the
    price of a worker process they showed."""
    workers: Optional[int] = None
    per_worker: float = 0.0


def _facts(s: Optional[Sweep]) -> Facts:
    """The checkout sweep's facts, typed; Facts() where there was no sweep."""
    return s.facts_as(Facts) if s else Facts()


def checkout_batch(target: str, paths, sizes, budget: float,
                   limits: engine.Limits = engine.NO_LIMITS) -> Tuple[list, list]:
    """Size the batch so about ten single-worker measurements fit the budget, from a
    small pilot write; where a warm-up (allocator, journal, dentry caches) of WARM_FILES
    costs under a tenth of the budget, it follows. On an NFS-like bed with a deep tree a
    file costs 15 ms: the 200-file warm-up alone took twice a 10 s budget's share."""
    pilot = min(len(paths), ENGINE_PILOT)
    t = engine.checkout(target, paths[:pilot], sizes[:pilot], workers=1, threshold=0,
                        limits=limits).wall
    per_file = max(t / max(1, pilot), 1e-6)
    warm = min(len(paths), WARM_FILES)
    if per_file * warm <= budget / 10:
        t = engine.checkout(target, paths[:warm], sizes[:warm], workers=1, threshold=0,
                            limits=limits).wall
        # The warm-up prices a file too, from ten times the files: on the disk a file
        # of the first 20 took 0.06 ms, of 200 0.56 ms and of 2,000 1.2 ms (each in a
        # directory of its own, the journal busier the more are written). Priced by the
        # pilot alone, the sweep's first count took its whole share, and a sweep of one
        # count predicts nothing.
        per_file = max(per_file, t / max(1, warm))
    keep = min(len(paths), max(MIN_ENGINE_BATCH, int(budget / 10 / per_file)))
    return paths[:keep], sizes[:keep]


def max_workers(bench: Bench) -> int:
    # Threads writing to a network server can usefully exceed the cores.
    return 32 if bench.storage_class == "network" else max(4, min(32, 4 * bench.cores))


def octaves(top: int) -> List[int]:
    """2, 4, 8 ... up to top, and top: a measured count in every interval (w, 2w]."""
    out, w = [], 2
    while w < top:
        out.append(w)
        w *= 2
    return out + [top] if top > 1 else out


def sweep_strategy(name: str, dims: List[Dim], seed: int) -> search.Strategy:
    """The checkout sweep's search: every octave first (top ... 8, 4, 2 threads, after
    Git's 1), then the strategy's picks. A short share measures a handful of counts, and
    _beyond_the_part reads the ranking between the count real git timed on a part and
    twice it: random picks had left 1, 3, 25 and 27 threads at 20,000 files on the
    NFS-like bed, no count in (6, 12], and 6 workers stood at 1.16 of the whole tree's
    best. The most threads first: where they matter (writes that wait on the storage)
    they cost least."""
    (dim,) = dims
    return search.Seeded(search.make(name, dims, seed),
                         [{dim.name: w} for w in reversed(octaves(dim.high))])


def sweep(bench: Bench) -> Optional[Sweep]:
    """Engine checkout of a sample with W workers: the curve behind checkout.workers."""
    if not bench.names:
        return None
    opts = bench.options
    target = os.path.join(bench.ws.root, "checkout")
    os.mkdir(target)
    top = max_workers(bench)
    dims = [Dim(WORKERS, 1, top, default=1)]
    share = Share(opts.budget * plan.SWEEP_CHECKOUT, bench.budget.end)
    paths, sizes = bench.sample(SAMPLE_FILES, seconds=share.seconds * plan.SAMPLE_OF_SWEEP)
    paths, sizes = checkout_batch(target, paths, sizes, share.seconds, share.bounded())

    def write(point, k=len(paths)):
        return engine.checkout(target, paths[:k], sizes[:k], workers=point[WORKERS],
                               threshold=0, limits=share.limits()).wall

    r = run_sweep(sweep_strategy(opts.strategy, dims, opts.seed), engine_measure(write),
                  share.left())
    samples = [(dict(k)[WORKERS], len(paths), statistics.median(v))
               for k, v in r.by_point().items()]
    # Smaller batches at 1 and the best worker count pin down serial cost and overhead,
    # while the share lasts.
    for frac in (0.125, 0.5):
        k = max(1, int(len(paths) * frac))
        for w in sorted({1, r.best[WORKERS]}):
            if not share.left():
                break
            try:
                samples.append((w, k, write({WORKERS: w}, k)))
            except EngineError:
                break       # the share ended during it
    facts = Facts(len(paths), sum(sizes), cores=bench.cores)
    if len({s[0] for s in samples}) >= 2 and len(samples) >= 3:
        model = costmodel.fit(samples, max_parallelism=top, seed=opts.seed)
        facts = Facts(len(paths), sum(sizes),
                      {k: v for k, v in asdict(model).items() if k != "replicas"}, samples,
                      bench.cores)
    return Sweep.of(r, dims, asdict(facts))


def _workload(bench: Bench, n: int, kind=gitbench.CheckoutWorkload) -> gitbench.CheckoutWorkload:
    """n tracked files spread evenly, restored into the scratch clone."""
    paths = bench.names[:: max(1, len(bench.names) // n)][:n]
    return kind(bench.ws.clone(), paths, bench.ws.root)


def _batch_files(bench: Bench) -> BatchSize:
    """CHECKOUT_FILES, or fewer where their A/B would not fit plan.CHECKOUT_BATCH of the budget
    left; and where the batch is the larger pilot's own files, that pilot's time (a run of
    Git's default on the batch already). Two sequential restores, each with its next
    status (PILOT_FILES and a tenth of it), price git's fixed cost and a file. On slow
    storage a smaller batch is what the budget can decide; parallel checkout gains less on
    a smaller batch (a worker's start is spread over fewer files), so the part errs
    towards keeping Git's default, never the other way."""
    n = min(len(bench.names), CHECKOUT_FILES)
    small, large = (_workload(bench, min(n, k)) for k in (PILOT_FILES // 10, PILOT_FILES))
    try:
        with gitbench.deadline(bench.budget.left()):
            # Below Git's threshold: sequential. The first warms the clone.
            small.run({})
            t_large = large.run({})
    except gitbench.DeadlineReached:
        raise OutOfBudget(None) from None
    except MeasurementFailed:
        return BatchSize(n, None, 0.0)  # the A/B itself sees and reports the failure
    k_large = len(large.paths)
    # Priced by their walls: a run costs the budget its untimed removal of the files too.
    per_file, fixed = _price(len(small.paths), small.last_wall, k_large, large.last_wall)
    # A pair is both sides; the warm-up pair and bench.runs pairs; parallel is taken to
    # cost what sequential does (its workers' start is not in the pilot).
    per_side = longest_run(bench.budget.left() * plan.CHECKOUT_BATCH, bench.runs)
    fits = int((per_side - fixed) / per_file)
    files = max(k_large, min(n, fits))
    return BatchSize(files, t_large if files == k_large else None, fixed)


def _price(k_small: int, t_small: float, k_large: int, t_large: float) -> Tuple[float, float]:
    """(seconds a file, seconds beside the files) from two sequential runs of k_small and
    k_large files; a file costs at least a tenth of the larger run's average (the two
    runs' noise can make their difference anything)."""
    per_file = max((t_large - t_small) / max(1, k_large - k_small), t_large / k_large / 10)
    return per_file, max(0.0, t_large - per_file * k_large)


def _candidate(workers: int) -> Dict[str, str]:
    return {WORKERS: str(workers), THRESHOLD: "0"}


def _trial_workers(bench: Bench) -> Optional[Trial]:
    """Real git writes files sequentially against the engine's pick of workers, then
    against twice the pick. The engine orders worker counts well where they matter most
    (latfs) but its threads start cheaper than Git's worker processes: on tmpfs and the
    disk git's best count was twice the pick (bench/fidelity.py, bench/tuner_quality.py),
    so real git sees both and the profile's objective chooses (chosen()). Where the
    whole tree fits the budget, a batch and the whole tree are timed in a scratch clone;
    where it does not (slow storage, a large repository), a part of the tree (_route)."""
    s = bench.sweeps.get("checkout")
    if s is None:
        return None
    if len(bench.names) < 100:
        return Trial.not_run(WORKERS, "fewer than 100 tracked files: Git never checks out in "
                             "parallel below its default threshold")
    pick = _engine_pick(s)
    counts = [pick] + ([2 * pick] if 2 * pick <= max_workers(bench) else [])
    route = _route(bench, counts)
    if isinstance(route, Route):
        return _trial_on_part(bench, route, _part_counts(bench, counts, len(route.part.paths)))
    size = _batch_files(bench)
    batch = _workload(bench, size.files)
    tree: List[Optional[Tuple[gitbench.TreeWrite, Optional[float]]]] = []

    def compare(i: int, cand: Dict[str, str]) -> List[Comparison]:
        # The batch's extensions share the budget left with the whole tree's comparison
        # after it, as with a trial after this one: at the budget's end on tmpfs at
        # 20,000 files, 4 workers' batch (3% slower by its median, within noise) took
        # 10 more pairs, and the tree's comparison was then 0.9-1.0 s short.
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
        work = {"checkout": batch, CLONE: tree[0][0] if tree and tree[0] else None}
        return [bench.resume(c, lambda w=work[c.workload]: w.run({}),
                             lambda w=work[c.workload]: w.run(cand))
                if _within_noise(c) and work.get(c.workload) else c for c in these]

    ladder = Ladder(bench, counts, compare, resume)
    ladder.climb()
    # Records from before the batch was timed with its next status lack this fact.
    return ladder.trial(lambda comparisons: Trial(WORKERS, comparisons,
                                                  asdict(WorkersFacts(next_status=True))))


Compare = Callable[[int, Dict[str, str]], List[Comparison]]
Resume = Callable[[Dict[str, str], List[Comparison]], List[Comparison]]


class Ladder:
    """The worker counts real git times, in order, each through compare(i, candidate)
    (its comparisons, the main one first), while one more count like those so far fits
    plan.LADDER of the budget left when it starts (climb). What that share left out waits
    for the budget's end (step, called by calibrate once every key has had its trial): a
    count not timed, then the count faster by its median but within noise, with more runs
    (resume(candidate, its comparisons)). On the hdd bed at 20,000 files, 2 workers took
    5.4-5.9 s of a 20 s budget, 4 (the grid's best) were not timed, and the calibration
    ended with 5-7 s unspent."""

    def __init__(self, bench: Bench, counts: List[int], compare: Compare, resume: Resume):
        self.bench, self.counts = bench, list(counts)
        self.compare, self.resume = compare, resume
        self.timed: Dict[int, List[Comparison]] = {}
        self.untimed: List[int] = []
        self.resumed: Set[int] = set()

    def comparisons(self) -> Tuple[Comparison, ...]:
        return tuple(c for w in self.counts if w in self.timed for c in self.timed[w])

    def climb(self) -> None:
        bench = self.bench
        start, allowance = plan.now(), bench.budget.left() * plan.LADDER
        for i, w in enumerate(self.counts):
            spent = plan.now() - start
            if i and spent / i * (i + 1) > allowance:
                bench.notes.append(f"{WORKERS}={w} not timed in its share: {self.counts[0]} "
                                   f"workers took {spent:.1f} s, and another count would "
                                   f"pass the {plan.LADDER:.0%} of the budget left that the "
                                   "worker counts share (it waits for what the other keys "
                                   "leave)")
                self.untimed = self.counts[i:]
                return
            try:
                these = self.compare(i, _candidate(w))
            except OutOfBudget as e:
                if not self.timed:
                    raise
                bench.notes.append(f"{WORKERS}={w} not timed: {e}")
                self.untimed = self.counts[i:]
                return
            self.timed[w] = these
            if these[0].fails or these[0].stopped == STOPPED_SLOWER:
                return       # more workers fail as well, or cost more still

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
            these = self.compare(max(1, len(self.timed)), _candidate(w))
            self.bench.notes.append(f"{WORKERS}={w} timed with what the other keys left")
            self.timed[w] = these
            if these[0].fails or these[0].stopped == STOPPED_SLOWER:
                self.untimed = []
            return True
        w = self._to_resume()
        if w is None:
            return False
        self.resumed.add(w)
        self.timed[w] = self.resume(_candidate(w), self.timed[w])
        self.bench.notes.append(f"{WORKERS}={w}: faster by its median but within noise, "
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
                 if w not in self.resumed and any(_within_noise(c) for c in cs)]
        if not noisy:
            return None
        best = max(noisy, key=speedup)
        shown = [w for w, cs in self.timed.items() if cs[0].estimate is not None
                 and cs[0].estimate.verdict == stats.FASTER and speedup(w) >= speedup(best)]
        return None if shown else best


def _within_noise(c: Comparison) -> bool:
    """Faster by its median than Git's default beyond stats.MIN_EFFECT, but not beyond
    its runs' noise: more runs could decide it."""
    return (c.estimate is not None and not c.fails and c.stopped != STOPPED_SLOWER
            and c.estimate.verdict == stats.NO_CHANGE
            and c.estimate.speedup > 1 + stats.MIN_EFFECT)


@dataclass(frozen=True)
class Route:
    """A part of the tree the worker counts are timed on, and where it is the pilot's
    part, the pilot's seconds (a run of Git's default there already)."""
    part: gitbench.Part
    warm: Optional[float]
    per_file: Optional[float]   # the pilots' price of a run: seconds a file,
    fixed: Optional[float]      # and beside the files (None: one pilot only)


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
    return gitbench.PartWrite(part.worktree, part.paths, os.path.join(part.worktree, ".git"),
                              part)


def _stakes(bench: Bench, files: int) -> Optional[float]:
    """The seconds the engine predicts its pick saves on `files` files written: its one
    thread against its pick. Before the sweep, what writing them takes at least by the
    probe's create latency (what parallel writes could save at most). Where the sweep
    timed one count only (its share ended), it predicts no gain and no loss: what the
    files take on one thread is what parallel writes could save at most.
    The engine's writes are not all of git's work: git's workers also read and inflate
    each blob, work that spreads over the CPUs wherever the writes wait or not. So the
    stakes are at least the CPUs' share of the engine's one-thread write (1 - 1/cores),
    whatever the engine's threads gained: on the disk at 100,000 files they gained
    nothing (their writes land in the page cache), the workers' trial went after every
    other key's and the budget's end left it undecided, where real git's whole tree
    then status is 1.6-1.7x faster with 4 workers (bench/part_fidelity.py)."""
    if "checkout" not in bench.sweeps:
        create = bench.latency.get("create")
        return files * create if create else None
    per_file = _engine_per_file(bench)
    if not per_file:
        return None
    s = bench.sweeps["checkout"]
    if len(_engine_medians(s)) < 2:
        return files * per_file
    cpus = 1 - 1 / max(1, min(bench.cores, max_workers(bench)))
    return files * per_file * max(_saved(s), cpus)


def _engine_medians(s: Sweep) -> Dict[int, float]:
    return {dict(k)[WORKERS]: statistics.median(v)
            for k, v in sweep_points(s.evaluations).items()}


def _route(bench: Bench, counts: List[int]) -> Union[Route, WholeTree]:
    """Where the worker counts are timed, priced by pilots of Git's default: a part of
    PART_PILOT entries written sequentially, then its status and its write-back
    (gitbench.PartWrite: as the counts' runs on a part are timed), and one of PART_PILOT // 8
    (git's cost beside the files, and a file's). Where the whole tree at that price (a
    part's files cost git more than the tree's: its runs change directory more often)
    fits a run of the counts' share within PILOT_SLACK, one run of the tree, stopped at
    that share, says (_whole_tree_pilot): the whole tree where it fits. Else the largest
    part whose runs fit, at least the pilot's: its work does not grow with the
    repository, and a larger part tells more of the whole (on the NFS-like bed at 20,000
    files, 8 workers were 1.3x faster on 48 entries, 1.5-1.9x on 100-150, 2.9x on the
    tree). Where the pilot's run alone takes what a run may, and the engine's own writes
    put the whole tree beyond PILOT_SLACK runs, the part is the pilot's and the small
    pilot is not run (on an NFS-like bed without attribute caching, 1.1 s of a 20 s
    budget)."""
    entries = len(bench.names)
    try:
        pilot = bench.ws.part(min(PART_PILOT, entries))
        with gitbench.deadline(bench.budget.left()):
            on_pilot = _on_part(pilot)
            t_pilot = on_pilot.run({})
            per_run = _per_run(bench, len(counts))
            floor = _engine_per_file(bench)
            if on_pilot.last_wall >= per_run and entries * floor > per_run * PILOT_SLACK:
                return Route(pilot, t_pilot, None, None)
            small = _on_part(bench.ws.part(min(PART_PILOT // 8, entries)))
            small.run({})
    except gitbench.DeadlineReached:
        raise OutOfBudget(None) from None
    except MeasurementFailed as e:
        bench.notes.append(f"{WORKERS}: no part of the tree could be timed ({e}); the "
                           "whole tree is")
        return WholeTree(None, None)
    # Priced by their walls: a run costs the budget its untimed removal of the files too.
    per_file, fixed = _price(len(small.paths), small.last_wall, len(pilot.paths),
                             on_pilot.last_wall)
    per_file = max(per_file, floor)
    per_run = _per_run(bench, len(counts))
    if _tree_may_fit(entries, small, on_pilot, floor, per_run):
        whole = _whole_tree_pilot(bench, per_run)
        if whole.seconds is not None:
            return whole
    piloted = Route(pilot, t_pilot, per_file, fixed)
    route = _sized_part(bench, counts, piloted)
    if route.warm is not None:
        return route
    try:
        with gitbench.deadline(min(per_run * PART_OVERRUN, bench.budget.left())):
            return dataclasses.replace(route, warm=_on_part(route.part).run({}))
    except gitbench.DeadlineReached:
        if bench.budget.left() <= 0:
            raise OutOfBudget(None) from None
    except MeasurementFailed:
        return route        # the A/B sees and reports git's failure
    # The part's first run overran: its own price, from many files, replaces the pilots'
    # (from 6 and 48 entries, as noisy as those runs are short: on a loaded tmpfs at
    # 20,000 files they put a file at 0.02 ms, the part's runs at 0.07, and a part of
    # 7,081 entries ran at 2.5 times its share).
    overran = (per_run * PART_OVERRUN - fixed) / len(route.part.paths)
    return _sized_part(bench, counts, dataclasses.replace(piloted, per_file=max(per_file, overran)))


def _tree_may_fit(entries: int, small: gitbench.PartWrite, pilot: gitbench.PartWrite,
                  floor: float, per_run: float) -> bool:
    """Whether the whole tree, at the pilots' price, fits a run within PILOT_SLACK. Its
    runs are not followed by a sync (what they leave is the tree's own to pay, in the run
    or after it), so its price leaves the pilots' write-back out: with it, on the hdd bed
    at 20,000 files a file was priced at 0.26 ms, 5.2 s for a tree whose settled runs
    take 0.55-0.69 s, which then would not even have been tried."""
    per_file, fixed = _price(len(small.paths), small.last_wall - small.last_write_back,
                             len(pilot.paths), pilot.last_wall - pilot.last_write_back)
    return fixed + entries * max(per_file, floor) <= per_run * PILOT_SLACK


def _sized_part(bench: Bench, counts: List[int], pilot: Route) -> Route:
    """The part whose runs fit at the pilot route's price (_part_size): the pilot's own
    (its run timed: `warm`) where a larger one would not hold PART_GROWTH times more
    entries or cannot be made, else a new one (`warm` None)."""
    n = _part_size(bench, counts, pilot.per_file, pilot.fixed)
    if n < len(pilot.part.paths) * PART_GROWTH:
        return pilot
    try:
        return Route(bench.ws.part(n), None, pilot.per_file, pilot.fixed)
    except MeasurementFailed:
        return pilot


def _whole_tree_pilot(bench: Bench, per_run: float) -> WholeTree:
    """One run of the whole tree written (Git's default), then its status, stopped at
    `per_run`: the tree's workload with those seconds, None where it did not fit (a part
    then decides).
    A tree that does not fit a run was timed before as an evenly spread slice of it in
    the full repository, whose pathspec git matches against every entry and whose next
    status reads every entry: costs that grow with the repository, the same on both
    sides, diluting the write's gain (on tmpfs at 20,000 files a 400-file slice took
    0.22-0.44 s a run, the whole tree 0.85 s; a part of 6,000 entries takes 0.3 s)."""
    whole = _workload(bench, len(bench.names), gitbench.WholeTreeWrite)
    try:
        with gitbench.deadline(bench.budget.left()):
            whole.make_directories()
    except gitbench.DeadlineReached:
        raise OutOfBudget(None) from None
    except MeasurementFailed:
        pass                        # the pilot's run makes them, or sees git fail
    try:
        with gitbench.deadline(min(per_run, bench.budget.left())):
            return WholeTree(whole, whole.run({}))
    except MeasurementFailed:       # stopped at the deadline, or git failed: a part says
        # What the stopped run wrote is written back before a part is timed: a part's runs
        # time their own write-back (gitbench.PartWrite), and the first would time this
        # too (on the hdd bed at 20,000 files, after a whole-tree pilot stopped at 0.44 s,
        # the part's warm-up pair did not fit a quarter of the 16 s left, where its runs
        # take 0.24 s). Counted in the budget, not in any run; where the budget ends first,
        # the trial's deadline (calibrate._bounded) stops it as it stops git.
        gitbench.written_back(whole.clone)
        return WholeTree(whole, None)


def _engine_per_file(bench: Bench) -> float:
    """The engine's seconds a file written on one thread (0.0 unmeasured): git writes a
    file with the same system calls and more besides, so no less."""
    s = bench.sweeps.get("checkout")
    medians = _engine_medians(s) if s else {}
    files = _facts(s).files
    return medians[1] / files if 1 in medians and files else 0.0


def _per_run(bench: Bench, counts: int) -> float:
    """What one run may cost: the ladder's share of the budget left, split between the
    counts, over bench.runs pairs and the warm-up pair. Not the CLEAR_RUNS pairs a gain
    beyond stats.APART needs, even where the engine predicts one: a part shows less of it
    (at 20,000 files on the NFS-like bed, a part sized for 3 pairs showed 1.2x in its
    warm-up, then needed 5 and did not fit)."""
    return longest_run(bench.budget.left() * plan.LADDER / counts, bench.runs)


def _part_size(bench: Bench, counts: List[int], per_file: float, fixed: float) -> int:
    """The entries of a part whose runs fit, sized for the counts that will be timed on
    it: where the part is too small to give every count PART_FILES_PER_WORKER files, the
    counts above become one (_part_counts), and the budget a second count would have had
    goes to a larger part for the first (a second count is still timed where the ladder
    finds it fits). Without this, at 20,000 files on the NFS-like bed, a 48-entry part was
    sized for two counts, both capped to the same 6 workers, and half the share unused."""
    entries = len(bench.names)
    timed = len(counts)
    while True:
        n = min(entries - 1, int((_per_run(bench, timed) - fixed) / per_file))
        distinct = len(dict.fromkeys(min(c, _part_top(n)) for c in counts))
        if distinct >= timed or timed == 1:
            return n
        timed = distinct


def _part_top(files: int) -> int:
    return max(2, files // PART_FILES_PER_WORKER)


def _part_counts(bench: Bench, counts: List[int], files: int) -> List[int]:
    """The counts timed on a part of `files` files: none above PART_FILES_PER_WORKER files
    a worker. More workers than that each start for a few files, which the whole tree's
    never do: on the NFS-like bed at 20,000 files a 48-file part showed 25 workers 1.02x,
    4-8 workers 1.3x, and the tree's own curve is nearly flat from 8 to 32 workers
    (2.85x, 3.19x, 2.93x)."""
    top = _part_top(files)
    out = list(dict.fromkeys(min(c, top) for c in counts))
    if out != counts:
        bench.notes.append(f"{WORKERS}: on a part of {files} files, at most {top} workers "
                           f"were timed ({PART_FILES_PER_WORKER} files a worker), not "
                           + " and ".join(str(c) for c in counts if c > top))
    return out


def _trial_on_part(bench: Bench, route: Route, counts: List[int]) -> Trial:
    """The worker counts on a part: its files written, then its status. The part stands
    for the whole tree written (a clone) where the profile weighs that, else for a
    branch switch (a slice of the tree written, then the next status)."""
    work = _on_part(route.part)
    workload = CLONE if bench.counts(CLONE) else "checkout"
    n = len(route.part.paths)
    bench.notes.append(f"{WORKERS}: timed on a part of the tree, {n} of its "
                       f"{route.part.entries} files (runs of consecutive entries from all "
                       "over it): the whole tree written does not fit the budget")

    statuses: Dict[str, List[float]] = {}     # worker count -> its timed runs' next statuses

    def timed(cand: Dict[str, str], a_b: Callable[[Run, Run], Comparison],
              before: Optional[Comparison] = None) -> List[Comparison]:
        seen: Dict[str, List[float]] = {}

        def run(c: Dict[str, str]) -> float:
            t = work.run(c)
            seen.setdefault(c.get(WORKERS, "1"), []).append(work.last_status)
            return t

        c = a_b(lambda: run({}), lambda: run(cand))
        # The timed runs are the last of each side (after `before`'s, where resumed);
        # the warm-up's (a first write at that count) are not among them.
        for w, times, had in (("1", c.times_default, before and before.times_default),
                              (cand[WORKERS], c.times_candidate,
                               before and before.times_candidate)):
            new = len(times) - len(had or ())
            if new > 0:
                statuses.setdefault(w, []).extend(seen.get(w, [])[-new:])
        return [c]

    def compare(i: int, cand: Dict[str, str]) -> List[Comparison]:
        return timed(cand, lambda a, b: bench.ab(workload, {}, cand, a, b, files=n,
                                                 warm_default=None if i else route.warm))

    def resume(cand: Dict[str, str], these: List[Comparison]) -> List[Comparison]:
        return timed(cand, lambda a, b: bench.resume(these[0], a, b), these[0])

    def trial(comparisons: Tuple[Comparison, ...]) -> Trial:
        after = _status_after(statuses)
        return Trial(WORKERS, comparisons,
                     asdict(WorkersFacts(True, n, route.part.entries,
                                         None if route.fixed is None else round(route.fixed, 4),
                                         None if route.per_file is None
                                         else round(route.per_file, 5),
                                         {w: round(e.ratio, 3) for w, e in after.items()}
                                         or None,
                                         {w: e.verdict for w, e in after.items()} or None)))

    ladder = Ladder(bench, counts, compare, resume)
    ladder.climb()
    return ladder.trial(trial)


def _status_after(statuses: Dict[str, List[float]]) -> Dict[str, stats.RatioEstimate]:
    """Each parallel count's next status against the one after a sequential write."""
    one = statuses.get("1")
    return {w: stats.compare(one, ts) for w, ts in statuses.items()
            if w != "1" and one and ts}


def _engine_pick(s: Sweep) -> int:
    """The worker count the ladder starts from: the fewest the engine measured within
    KNEE of its fastest. Git's workers are processes, dearer to start than the engine's
    threads, so among counts the engine cannot tell apart the fewest serve git best: on
    tmpfs on two cores the engine's fastest was 7 threads on a flat curve, and git's best
    2 workers (bench/tuner_quality.py); the cost model's parallelism, fitted to a few
    points, moved from 4 to 32 between runs on the NFS-like bed and cannot say this."""
    medians = _engine_medians(s)
    if not medians:
        return max(2, s.best[WORKERS])
    fastest = min(medians.values())
    return max(2, min(w for w, t in medians.items() if t <= fastest * (1 + KNEE)))


def _tree_workload(bench: Bench, batch: Comparison, size: BatchSize,
                   timed: WholeTree = WholeTree(None, None)
                   ) -> Optional[Tuple[gitbench.TreeWrite, Optional[float]]]:
    """The whole tree written as a clone writes it, then the next status (gitbench.TreeWrite),
    with the seconds of a pilot run of it (Git's default), which the A/B takes as its
    warm-up: `timed`'s, where _route timed one already. Else (no part could be made)
    a run may cost 1 / (2 x (runs + 1)) of half the budget left (a worker count's
    share: the ladder times a second count only where it fits, plan.LADDER). It is
    priced from the batch: git's cost beside its files (size.fixed), the lstat of every
    entry the next whole status makes (the preload sweep's engine pass), and the batch's
    cost a file. That price is high where the batch's pathspec, matched against every
    entry, costs more than its files (0.2 ms a file on tmpfs where the whole tree costs
    0.09: the part it sized, 1,400 of 3,000 files, hid the gain of the whole), so where
    the whole tree is priced within PILOT_SLACK of fitting, one run of it, stopped at its
    allowance, decides. Elsewhere an evenly spread part is timed, skipped only where it
    would be no larger than the batch, which has then said all it can."""
    if timed.seconds is not None:
        return timed.work, timed.seconds
    whole = _workload(bench, len(bench.names), gitbench.WholeTreeWrite)
    median, files = statistics.median(batch.times_default), max(1, batch.files or 1)
    lstat = preload.whole_lstat(bench)
    beside = size.fixed + (lstat or 0.0)
    per_file = max((median - size.fixed) / files, median / files / 10, 1e-6)

    def per_run() -> float:
        return longest_run(bench.budget.left() / 2, bench.runs)

    def fits(seconds: float) -> int:
        # Unmeasured, the status is priced as the files again (the old, safe rule).
        return (int((seconds - beside) / per_file) if lstat is not None
                else int(seconds / (2 * per_file)))

    allowance = per_run()
    if fits(allowance * PILOT_SLACK) >= len(whole.paths):
        try:
            with gitbench.deadline(allowance):
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
    return _workload(bench, n, gitbench.TreeWrite), None


def _tree_write(bench: Bench, work: gitbench.TreeWrite, cand: Dict[str, str],
                warm: Optional[float]) -> Tuple[Comparison, ...]:
    try:
        return (bench.ab(CLONE, {}, cand, lambda: work.run({}), lambda: work.run(cand),
                         files=len(work.paths), warm_default=warm),)
    except OutOfBudget as e:
        bench.notes.append(f"{WORKERS}={cand[WORKERS]}: whole-tree write not timed: {e}")
        return ()


def by_count(trial: Trial) -> Dict[int, Trial]:
    """The workers trial split by the worker count each comparison timed."""
    counts: Dict[int, List[Comparison]] = {}
    for c in trial.comparisons:
        counts.setdefault(int(c.candidate[WORKERS]), []).append(c)
    return {w: Trial(WORKERS, tuple(cs), trial.facts) for w, cs in counts.items()}


def _advice_for(key, w: int, t: Trial, cal: Calibration, weights) -> advice.KeyAdvice:
    s = cal.sweeps.get("checkout")
    f = _facts(s)
    ev = {"best": s.best if s else None, "curve": f.model_samples, "model": f.model}
    part = t.facts_as(WorkersFacts).part
    what = {c.workload: _timed(c, w, t) for c in t.comparisons}
    # A part's gain stands for the tree's, unmeasured: say so (bench/part_fidelity.py).
    extrapolated = ("; timed on a part of the tree only: the whole tree's own gain was not "
                    "timed, and a part's files, whose runs change directory more often, "
                    "gain less" if part else "")
    return advice.weighed(key, t, weights, str(w), what, ev, suffix=extrapolated)


def _timed(c: Comparison, w: int, t: Trial) -> str:
    """What real git timed in comparison c of the workers trial t, at w workers."""
    f = t.facts_as(WorkersFacts)
    if f.part:
        return (f"writing {c.files} of the tree's {f.entries} files (a part) "
                f"then git status of them, {w} workers")
    if c.workload == CLONE:
        return f"writing {c.files} files then git status, {w} workers"
    then = ", then git status of them" if f.next_status else ""
    return f"checkout of {c.files} files with {w} workers{then}"


def chosen(key, cal, weights) -> Tuple[Optional[int], advice.KeyAdvice]:
    """The worker count the profile's objective prefers among those real git timed: of
    the counts set on their own evidence (advice.weighed), the one with the lower weighted
    time ratio; the fewer workers when none is set; none when real git timed none. The
    threshold is trialled and decided at this count."""
    t = advice.trial_of(key, cal)
    if t is None or not t.comparisons:
        return None, advice.unmeasured(key)
    verdicts = [(w, _advice_for(key, w, g, cal, weights),
                 advice.weighted_ratio(g.comparisons, weights))
                for w, g in sorted(by_count(t).items())]
    kept = [v for v in verdicts if v[1].status == advice.SET] or verdicts[:1]
    w, a, ratio = min(kept, key=lambda v: v[2])
    others = [f"{o} workers {1 / r:.2f}x" for o, _, r in verdicts if o != w]
    if others and a.status == advice.SET:
        a = dataclasses.replace(a, reason=f"{a.reason} (weighted, against "
                                          + ", ".join(others) + ")")
    facts = t.facts_as(WorkersFacts)
    if a.status == advice.SET and facts.part:
        return _beyond_the_part(w, a, facts, cal.sweeps.get("checkout"))
    return w, a


def _beyond_the_part(w: int, a: advice.KeyAdvice, facts: WorkersFacts, s: Optional[Sweep]
                     ) -> Tuple[int, advice.KeyAdvice]:
    """Where a part capped the counts real git timed (PART_FILES_PER_WORKER files a
    worker) below the engine's pick, and real git showed the capped count faster beyond
    noise, the engine's ranking chooses the count, up to EXTRAPOLATE times the count
    real git timed: on the NFS-like bed at 20,000 files a 48-entry part timed at most 6
    workers, which gave 1.17 of the best count of a grid on the whole tree (16; 8 gave
    1.12). Only where the engine's own writes hid more latency than its threads had
    cores (one thread against its pick faster by more than the cores): there the writes
    wait on the storage, not the CPU, a worker process's start costs little beside them,
    and the engine ranks worker counts as git does (latfs: Spearman 1.00,
    bench/fidelity.py). On tmpfs and the disk, where it does not, the speedup never
    passes the cores and real git's count stands.

    The engine times writes only, not the next status, which re-reads what a burst of
    writes left racily clean: on an NFS-like bed without attribute caching the whole
    tree then status took 27.3 s with 4 workers and 41.2 s with 16, though 16 wrote
    faster (issue #30). So where the part's own next status after the timed count took
    more than KNEE longer than after the sequential write, real git's count stands; and
    never more than EXTRAPOLATE times it, whatever the engine's ranking."""
    f = _facts(s)
    top = _part_top(facts.part)
    medians = _engine_medians(s) if s else {}
    below = [c for c in medians if c <= w]
    if s is None or w < top or 1 not in medians or not below or not f.cores:
        return w, a
    slowdown = _status_paid(str(w), facts)
    if slowdown is not None:
        return w, dataclasses.replace(a, reason=(
            f"{a.reason}; not more than {w}: the part's next status took {slowdown:.2f}x "
            "as long after its parallel write as after a sequential one, beyond the "
            "statuses' noise, which the engine's writes do not show"))
    reach = {c: t for c, t in medians.items() if w < c <= EXTRAPOLATE * w and t > 0}
    if not reach:
        return w, a
    fastest = min(reach.values())
    pick, near = min(c for c, t in reach.items() if t <= fastest * (1 + KNEE)), max(below)
    hidden, ahead = medians[1] / medians[pick], medians[near] / medians[pick]
    if hidden <= f.cores or ahead <= 1 + KNEE:
        return w, a
    reason = (f"{a.reason}; {pick} set, not {w}: a part of {facts.part} files times at most "
              f"{top} workers, and the engine's writes on this storage, {hidden:.1f}x faster "
              f"with {pick} threads than one (more than its {f.cores} cores: they wait on the "
              f"storage, where the engine ranks worker counts as git does), put {pick} "
              f"{ahead:.2f}x ahead of {near}: extrapolated beyond the counts real git timed")
    return pick, dataclasses.replace(a, value=str(pick), reason=reason, evidence={
        **a.evidence, "extrapolated_from": w})


def _status_paid(w: str, facts: WorkersFacts) -> Optional[float]:
    """The part's next status after `w` workers against after a sequential write, where
    it took more than KNEE longer, beyond the noise of its runs; else None. By medians
    alone, a few statuses 1.18x slower on the NFS-like bed without attribute caching
    kept 6 workers at 30 and 60 s where 20 s had set 8 (1.02 of the grid's best against
    1.07-1.15): more budget, a worse count. A record from before the verdict was kept is
    read as it was then."""
    slowdown = (facts.status_slowdown or {}).get(w)
    if slowdown is None or slowdown <= 1 + KNEE:
        return None
    if facts.status_verdict is not None and facts.status_verdict.get(w) != stats.SLOWER:
        return None
    return slowdown


def _open_question(key, cal: Calibration, weights) -> Optional[Tuple[str, str]]:
    """What the user's own branch switches can settle (the agent's experiment): a count
    the engine's ranking chose above what real git timed on a part, against the count
    real git confirmed there; a count a part showed faster but within its noise, where
    the engine's writes waited on the storage (_within_noise_on_a_part); or, where the
    budget ended before real git timed any count, the engine's pick against the value in
    force (only where the engine measured a gain)."""
    s = cal.sweeps.get("checkout")
    t = advice.trial_of(key, cal)
    if t is not None and t.comparisons:
        _, a = chosen(key, cal, weights)
        confirmed = a.evidence.get("extrapolated_from")
        if a.status == advice.SET and confirmed:
            return str(confirmed), (f"{a.value} workers were set on the engine's ranking, "
                                    f"beyond the {confirmed} real git timed on a part of the "
                                    "tree: your branch switches compare the two")
        return None if a.status == advice.SET else _within_noise_on_a_part(t, s)
    if s is None or WORKERS not in cal.unfinished or not _saved(s):
        return None
    pick = _engine_pick(s)
    return str(pick), (f"the budget ended before real git timed {WORKERS}; the engine's "
                       f"writes were fastest from {pick} threads: your branch switches "
                       "compare that with the value in force")


def _within_noise_on_a_part(t: Trial, s: Optional[Sweep]) -> Optional[Tuple[str, str]]:
    """A part's runs are few and short, and on a busy host a real gain can stay within
    their noise: at 100,000 files on the NFS-like bed under load, 6 workers on a 48-entry
    part were not faster beyond noise, and Git's one worker was kept at 3.25x the whole
    tree's best. Where the part's count was faster by its median, not slower beyond
    noise, and the engine's writes hid more latency than its cores (the storage's wait,
    where it ranks counts as git does), the user's switches on the whole tree ask again."""
    facts, c = t.facts_as(WorkersFacts), t.main
    w = c.candidate.get(WORKERS)
    if not facts.part or s is None or w is None or not _within_noise(c):
        return None
    # One thread's time over the pick's: _saved is 0 where either is unmeasured.
    hidden, cores = 1 / (1 - _saved(s)), _facts(s).cores
    if not cores or hidden <= cores:
        return None
    pick = _engine_pick(s)
    return str(w), (f"real git timed {w} workers on a part of {facts.part} files: "
                    f"{c.estimate.speedup:.2f}x, within the noise of its runs; the engine's "
                    f"writes were {hidden:.1f}x faster with {pick} threads than one (more "
                    f"than its {cores} cores): your branch switches compare {w} with the "
                    "value in force")


def _saved(s: Sweep) -> float:
    """The share of a write's time the engine's pick saves against one thread. The pick
    is at least 2 workers, which an engine whose one thread was fastest may not have
    measured: no gain predicted."""
    medians = _engine_medians(s)
    at_pick = medians.get(_engine_pick(s), 0.0)
    if medians.get(1, 0.0) <= 0 or at_pick <= 0:
        return 0.0
    return max(0.0, 1 - at_pick / medians[1])


def _trial_threshold(bench: Bench) -> Optional[Trial]:
    """Real git, sequential vs parallel, from a tiny batch (the price of a worker process)
    up, at batch sizes bisected between the largest where parallel lost and the smallest
    where it won by THRESHOLD_MARGIN. Sequential time is not linear in files on a disk
    (write-back starts past a few hundred), so the threshold is measured, not interpolated."""
    workers = bench.trials.get(WORKERS)
    if workers is None or not workers.comparisons or workers.main.fails:
        return None     # no worker count to trial it at (the workers' record says why)
    w, parallel = chosen(catalogue.lookup(WORKERS), bench,
                         workloads.weights(bench.options.workload))
    if parallel.status != advice.SET:
        # The threshold does nothing where parallel checkout is off (_decide_threshold):
        # its batches wait for the budget's end, where the workers' further runs may set
        # a count (on the hdd bed at 100,000 files, 1 worker kept, they were 2 s short of
        # a 20 s budget that the other keys could have had).
        bench.sharpen[THRESHOLD] = lambda: _retimed_threshold(bench, None)
        return Trial.not_run(THRESHOLD, "not timed while no worker count was set (its "
                             "batches are timed at the count chosen)")
    cand = _candidate(w)
    on_part = bool(workers.facts_as(WorkersFacts).part)
    tiny = _batch(bench, TINY_FILES, on_part)
    first = bench.ab("checkout", {}, cand, lambda: tiny.run({}), lambda: tiny.run(cand),
                     files=len(tiny.paths), extensions=0)
    if first.fails:
        return Trial.not_run(THRESHOLD, f"a {len(tiny.paths)}-file checkout failed on the "
                             f"{first.fails} side: {first.error}")
    per_worker = max(0.0, (statistics.median(first.times_candidate)
                           - statistics.median(first.times_default)) / w)
    # The workers trial's own batch is a point where it timed this count; a count chosen
    # beyond what a part could time (_beyond_the_part) has only the batches timed here.
    timed = by_count(workers)
    points = [first] + ([timed[w].main] if w in timed else [])
    for _ in range(2):
        n = _bisect(points)
        if n is None:
            break
        try:
            work = _batch(bench, n, on_part)
            point = bench.ab("checkout", {}, cand, lambda: work.run({}),
                             lambda: work.run(cand), files=len(work.paths), extensions=0)
        except (OutOfBudget, MeasurementFailed):
            break   # the threshold rests on the batches timed so far
        if point.fails:
            break
        points.append(point)
    points.sort(key=lambda c: c.files)
    bench.sharpen[THRESHOLD] = lambda: _retimed_threshold(bench, w)
    return Trial(THRESHOLD, tuple(points), asdict(ThresholdFacts(w, per_worker)))


def _retimed_threshold(bench: Bench, timed_at: Optional[int]) -> Optional[Trial]:
    """At the budget's end (bench.sharpen, after the worker counts': their stakes are a
    whole tree's, the threshold's a batch's): the batches again where the worker count
    chosen and set has moved since they were timed (timed_at; None: not timed, no count
    was set then). Batches timed at another count say nothing of this one, and the
    threshold would be left at Git's default for want of them; None where the count
    stands (or parallel checkout is not set)."""
    w, workers = chosen(catalogue.lookup(WORKERS), bench,
                        workloads.weights(bench.options.workload))
    if w == timed_at or workers.status != advice.SET:
        return None
    before = ("were not timed: no count was set" if timed_at is None
              else f"were timed at {timed_at}")
    bench.notes.append(f"{THRESHOLD}: timed at {w} workers (its batches {before} before "
                       "the worker counts were timed with what the other keys left)")
    return _trial_threshold(bench)


def _batch(bench: Bench, n: int, on_part: bool) -> gitbench.CheckoutWorkload:
    """n files written then their status: a part of n entries where the workers were
    timed on a part (no scratch clone is made), else n files restored in the clone."""
    return _on_part(bench.ws.part(n)) if on_part else _workload(bench, n)


def _wins(c: Comparison) -> bool:
    return costmodel.parallel_wins(statistics.median(c.times_default),
                                   statistics.median(c.times_candidate), THRESHOLD_MARGIN)


def _bisect(points: List[Comparison]) -> Optional[int]:
    """The batch size halfway (geometrically) between the largest lost and next won."""
    points.sort(key=lambda c: c.files)
    lost = [c for c in points if not _wins(c)]
    won = [c for c in points if _wins(c) and (not lost or c.files > lost[-1].files)]
    if not lost or not won:
        return None
    lo, hi = lost[-1].files, won[0].files
    mid = int(round((lo * hi) ** 0.5))
    return mid if lo < mid < hi else None


def _decide_workers(key, cal: Calibration, weights) -> advice.KeyAdvice:
    return chosen(key, cal, weights)[1]


def _decide_threshold(key, cal: Calibration, weights) -> advice.KeyAdvice:
    w, workers = chosen(catalogue.lookup(WORKERS), cal, weights)
    if workers.status != advice.SET:
        return advice.not_set(key, "not set: parallel checkout is not recommended here")
    t, why, ev = _threshold(cal, w)
    default = int(key.default)
    if t is None:
        return advice.not_set(key, f"not set: {why}", ev)
    if abs(t - default) <= THRESHOLD_CHANGE * default:
        return advice.not_set(key, f"not set: {why}, close to Git's {default}", ev)
    trial = _threshold_trial(cal, w)
    est = _threshold_evidence(trial.comparisons if trial else (), t, default)
    if est is None:
        return advice.not_set(key, f"not set: {why}, but no batch between it and Git's "
                                   f"{default} was timed with real git", ev)
    gain = advice.Gain.of(THRESHOLD_WORKLOAD, est)
    if est.verdict != stats.FASTER:
        # The crossing may be real, but the batch it changes is not measurably faster:
        # writing the value would promise a gain `verify` cannot confirm.
        return advice.not_set(key, f"not set: {why}, but the batch it changes was "
                                   f"{gain.text()} ({est.verdict})", ev)
    return advice.KeyAdvice(key.name, advice.SET, str(t), key.default, gain, why, ev)


def _threshold_trial(cal: Calibration, workers: int) -> Optional[Trial]:
    """The batches real git timed at this worker count: a profile other than the one
    calibrated may choose another count, and those batches say nothing of it."""
    trial = cal.trials.get(THRESHOLD)
    return trial if trial and trial.facts_as(ThresholdFacts).workers == workers else None


def _threshold(cal: Calibration, workers: int) -> Tuple[Optional[int], str, dict]:
    """From real git at two batch sizes when both were timed, else from the engine model.

    The engine's threads cost less than Git's worker processes, so its break-even
    could sit above a batch real git already ran faster in parallel (a threshold
    of 455 on this disk after 400 files were measured 1.3-1.7x faster)."""
    trial = _threshold_trial(cal, workers)
    if trial:
        pts = [(c.files, statistics.median(c.times_default), statistics.median(c.times_candidate))
               for c in trial.comparisons]
        # The crossing lies between the largest batch parallel lost and the next one
        # (crossing() answers the first size when parallel never lost, None when it
        # lost at the largest).
        lost = [i for i, (n, s, p) in enumerate(pts)
                if not costmodel.parallel_wins(s, p, THRESHOLD_MARGIN)]
        if len(pts) == 1:
            even = None if lost else pts[0][0]
        else:
            i = min(lost[-1] if lost else 0, len(pts) - 2)
            even = costmodel.crossing(pts[i], pts[i + 1], THRESHOLD_MARGIN)
        ev = {"real_git": [{"files": n, "sequential": s, "parallel": p} for n, s, p in pts],
              "crossing_files": even}
        curve = ", ".join(f"{n} files {s / p:.2f}x" for n, s, p in pts)
        if even is not None:
            return even, (f"real git with {workers} workers: {curve}; parallel wins by "
                          f"{THRESHOLD_MARGIN:.0%} from about {even} files"), ev
    return _threshold_from_model(cal, workers, trial)


def _threshold_from_model(cal: Calibration, workers: int,
                          trial: Optional[Trial]) -> Tuple[Optional[int], str, dict]:
    m = _facts(cal.sweeps.get("checkout")).model
    if not m:
        return None, "no checkout model (too few measurements)", {}
    per_worker = m["per_worker"]
    if trial:
        # Git's workers are processes
        per_worker = max(per_worker, trial.facts_as(ThresholdFacts).per_worker)
    model = costmodel.ParallelCost(m["serial"], m["per_item"], per_worker, m["parallelism"],
                                   m["rmse"], m["points"])
    even = model.break_even(workers, THRESHOLD_MARGIN)
    ev = {"model": dict(m, per_worker=per_worker), "break_even_files": even}
    if even is None:
        return None, f"{workers} workers never beat one by {THRESHOLD_MARGIN:.0%} in the model", ev
    return even, f"{workers} workers beat one from about {even} files on (cost model: " \
                 f"{m['per_item'] * 1e6:.0f} µs a file, {per_worker * 1e3:.1f} ms a worker, " \
                 f"parallelism {m['parallelism']})", ev


def _threshold_evidence(points, threshold: int, default: int) -> Optional[stats.RatioEstimate]:
    """Real git at the batch size the new threshold changes most plainly: the smallest
    timed batch below Git's default that now goes parallel, or the largest at or above
    it that now stays sequential. None when no timed batch lies in between (the value
    would then rest on interpolation alone)."""
    # A batch cut short is no evidence for a change.
    points = [c for c in points if stats.conclusive(c.times_default, c.times_candidate)]
    if threshold < default:
        inside = [c for c in points if threshold <= c.files < default]
        if not inside:
            return None
        est = stats.compare(inside[0].times_default, inside[0].times_candidate)
    else:
        inside = [c for c in points if default <= c.files < threshold]
        if not inside:
            return None
        est = stats.compare(inside[-1].times_candidate, inside[-1].times_default)
    return est


def findings(cal: Calibration) -> List[str]:
    f = _facts(cal.sweeps.get("checkout"))
    m = f.model
    if not m:
        return []
    return [f"writing files: {m['per_item'] * 1e6:.0f} µs each, about {m['parallelism']} "
            f"served in parallel by this storage and CPUs (engine, {f.files} files)."]


def _upgrade_threshold_v1(validation: dict) -> Optional[Trial]:
    """Schema 1 kept the threshold's batches under "checkout.threshold_points" and the
    price of a worker under "checkout.worker_cost"."""
    points, cost = validation.get("checkout.threshold_points"), validation.get("checkout.worker_cost")
    workers = validation.get(WORKERS)
    if not points or not cost or not workers:
        return None
    cand = workers["candidate"]
    return Trial(THRESHOLD, tuple(comparison("checkout", {}, cand, p["times_sequential"],
                                             p["times_parallel"], files=p["files"])
                                  for p in points),
                 asdict(ThresholdFacts(cost["workers"], cost["per_worker"])))


class Workers(registry.Tuner):
    """checkout.workers: timed on the whole tree written where it fits the budget, on a
    part of it where not (_trial_workers); at stake, every file of the tree written."""

    def trial(self, key, bench: Bench) -> Optional[Trial]:
        return _trial_workers(bench)

    def stakes(self, key, bench: Bench) -> Optional[float]:
        return _stakes(bench, len(bench.names))

    def decide(self, key, cal: Calibration, weights) -> advice.KeyAdvice:
        return _decide_workers(key, cal, weights)

    def open_question(self, key, cal: Calibration, weights) -> Optional[Tuple[str, str]]:
        return _open_question(key, cal, weights)


class Threshold(registry.Tuner):
    """checkout.thresholdForParallelism: batches around Git's threshold; at stake, a
    batch of Git's threshold (below it git writes sequentially, at any worker count)."""

    def trial(self, key, bench: Bench) -> Optional[Trial]:
        return _trial_threshold(bench)

    def price(self, key, bench: Bench) -> Optional[float]:
        """Where the workers were timed on a part: its first batch, TINY_FILES on a part
        of its own, at the pilots' price; where the part was the pilot's (no price of a
        file), at the part's fastest sequential run: a part is gitbench.PART_RUNS runs
        of consecutive entries, each in directories of their own, so the tiny batch's
        part has as many directories as the pilot's, and git's start-up is no less on
        fewer files. On the NFS-like bed at 20,000 files the 20-file batch took 0.79 s
        a run where the 48-file part's took 0.59-0.73: priced at its files' share of
        that (0.42), the trial started with 3.7 s left and stopped 1.9 s short after
        0.9 s (at 100,000 files, before any price, 1-2 s short after 0.5-1.0 s)."""
        workers = bench.trials.get(WORKERS)
        f = workers.facts_as(WorkersFacts) if workers else None
        if f is None:
            return None
        if f.part_fixed is not None and f.part_per_file is not None:
            return least_seconds(f.part_fixed + TINY_FILES * f.part_per_file)
        sequential = workers.main.times_default if workers.comparisons else ()
        if f.part and sequential:
            return least_seconds(min(sequential))
        return None

    def stakes(self, key, bench: Bench) -> Optional[float]:
        return _stakes(bench, min(len(bench.names), int(key.default)))

    def decide(self, key, cal: Calibration, weights) -> advice.KeyAdvice:
        return _decide_threshold(key, cal, weights)

    def upgrade_v1(self, key, validation: dict) -> Optional[Trial]:
        return _upgrade_threshold_v1(validation)


TUNERS = {WORKERS: Workers(), THRESHOLD: Threshold()}
