"""checkout.workers' engine sweep: how this storage takes files written in parallel.

The engine writes a sample of the repository's files with 1..N threads: the curve, a
cost model (serial, per file, per worker, parallelism), the count real git starts
from (_engine_pick) and what a tree written could save (_stakes). The sample's
directories are made before the threads start and are not in the curve: git's main
process makes them one at a time whatever the worker count. They are made once a sweep
and kept between its measurements (only the files are removed): work alike at every
count is common mode, and where each lookup is a round trip it cost more than the files.
"""
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

from ... import engine
from ...errors import EngineError
from ...probes import scratch
from ..measure import planner, search
from ..measure.bench import Bench
from ..measure.record import Sweep
from ..measure.search import Dim, Point
from ..measure.sweep import (Share, engine_measure, by_point as sweep_points,
                             run as run_sweep)
from ...models import costmodel
from ...models.storage import NETWORK

WORKERS, THRESHOLD = "checkout.workers", "checkout.thresholdForParallelism"
SAMPLE_FILES = 2000        # files the engine writes per checkout measurement, at most
WARM_FILES = 200           # the engine's warm-up write, where it is cheap
MIN_ENGINE_BATCH = 40      # files per engine measurement, at least
# Engine times within this share of the fastest count's are taken as equal (_engine_pick).
KNEE = 0.1


@dataclass(frozen=True)
class Facts:
    files: int = 0                        # the engine's sample (0: a record without one)
    bytes: int = 0
    model: Optional[Dict[str, Any]] = None  # costmodel.ParallelCost without its replicas
    model_samples: Optional[List[Any]] = None  # (workers, files, seconds)
    cores: int = 0                        # CPUs the engine's threads had (0: not recorded)


def _facts(s: Optional[Sweep]) -> Facts:
    """The checkout sweep's facts, typed; Facts() where there was no sweep."""
    return s.facts_as(Facts) if s else Facts()


class _Writes:
    """The sweep's engine writes into `target`: every one keeps its directories for the
    next (common mode: git's main process makes them whatever the worker count), and
    remove() removes them, all known, once."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.written: Set[str] = set()

    def checkout(self, paths: List[str], sizes: List[int], workers: int,
                 limits: engine.Limits) -> engine.CheckoutResult:
        self.written.update(paths)
        return engine.checkout(self.target, paths, sizes, workers=workers, threshold=0,
                               keep_dirs=True, limits=limits)

    def remove(self) -> None:
        scratch.remove_leading_directories(self.target, sorted(self.written))


def checkout_batch(target: str, paths: List[str], sizes: List[int], budget: float,
                   limits: engine.Limits = engine.NO_LIMITS) -> Tuple[List[str], List[int]]:
    """Size the batch so about ten single-worker measurements fit the budget, from a
    pilot write of the least batch; where a warm-up (allocator, journal, dentry caches)
    of WARM_FILES costs under a tenth of the budget, it follows."""
    writes = _Writes(target)
    try:
        paths, sizes, _ = _sized_batch(writes, paths, sizes, budget, limits)
    finally:
        writes.remove()
    return paths, sizes


def spread(paths: List[str], sizes: List[int], k: int) -> Tuple[List[str], List[int]]:
    """k of the files, evenly spread over them, in their order. Threads split a batch in
    contiguous slices as git's workers split the tree, so a spread batch puts each
    thread where a worker's slice of the tree is: in a directory of its own where the
    tree has many, in the one directory where it has one. A prefix of the files would
    put every thread in the tree's first directories, where creations in one parent
    wait on its lock."""
    n = len(paths)
    if k >= n:
        return paths, sizes
    at = [i * n // k for i in range(k)]
    return [paths[i] for i in at], [sizes[i] for i in at]


def _sized_batch(writes: _Writes, paths: List[str], sizes: List[int], budget: float,
                 limits: engine.Limits) -> Tuple[List[str], List[int], Optional[float]]:
    """checkout_batch's batch (spread()), and the pilot's one-thread seconds where the
    batch is the pilot's own files (the least batch: where files are that dear, the
    pilot is the sweep's measurement of one thread, not a write to repeat)."""
    pilot_paths, pilot_sizes = spread(paths, sizes, MIN_ENGINE_BATCH)
    pilot = len(pilot_paths)
    r = writes.checkout(pilot_paths, pilot_sizes, 1, limits)
    # A measurement's price holds its directories too, though its time does not (later
    # measurements find most of them made: the price errs high).
    per_file = max((r.wall + r.dirs) / max(1, pilot), 1e-6)
    first: Optional[float] = r.wall
    warm = min(len(paths), WARM_FILES)
    if per_file * warm <= budget / 10:
        r = writes.checkout(*spread(paths, sizes, warm), 1, limits)
        t = r.wall + r.dirs
        # The warm-up prices a file too, from ten times the files: a file's cost can
        # grow with the files written (the journal busier the more are written), and
        # priced by the pilot alone the sweep's first count could take its whole share:
        # a sweep of one count predicts nothing.
        per_file = max(per_file, t / max(1, warm))
        first = None
    keep = min(len(paths), max(MIN_ENGINE_BATCH, int(budget / 10 / per_file)))
    return (*spread(paths, sizes, keep), first if keep == pilot else None)


def max_workers(bench: Bench) -> int:
    # Threads writing to a network server can usefully exceed the cores.
    return 32 if bench.storage_class == NETWORK else max(4, min(32, 4 * bench.cores))


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
    twice it, so every interval (w, 2w] holds a measured count. The most threads first: where they matter (writes that wait on the storage)
    they cost least."""
    (dim,) = dims
    return search.Seeded(search.make(name, dims, seed),
                         [{dim.name: w} for w in reversed(octaves(dim.high))])


def sweep(bench: Bench) -> Optional[Sweep]:
    """Engine checkout of a sample with W workers: the curve behind checkout.workers."""
    if not bench.names:
        return None
    share = planner.sweep_share(bench, "checkout")
    paths, sizes = bench.sample(SAMPLE_FILES, seconds=planner.sample_seconds(share))
    target = os.path.join(bench.ws.root, "checkout")
    os.mkdir(target)
    writes = _Writes(target)
    try:
        return _sweep_into(bench, share, writes, paths, sizes)
    finally:
        writes.remove()
        scratch.remove_tree(target)


def _sweep_into(bench: Bench, share: Share, writes: _Writes, paths: List[str],
                sizes: List[int]) -> Sweep:
    opts = bench.options
    top = max_workers(bench)
    dims = [Dim(WORKERS, 1, top, default=1)]
    paths, sizes, piloted = _sized_batch(writes, paths, sizes, share.seconds, share.bounded())

    def write(point: Point, k: int = len(paths)) -> float:
        nonlocal piloted
        if piloted is not None and k == len(paths) and point[WORKERS] == 1:
            seconds, piloted = piloted, None        # the pilot wrote these files already
            return seconds
        return writes.checkout(*spread(paths, sizes, k), point[WORKERS], share.limits()).wall

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


def _stakes(bench: Bench, files: int) -> Optional[float]:
    """The seconds the engine predicts its pick saves on `files` files written: its one
    thread against its pick. Before the sweep, what writing them takes at least by the
    probe's create latency (what parallel writes could save at most). Where the sweep
    timed one count only (its share ended), it predicts no gain and no loss: what the
    files take on one thread is what parallel writes could save at most.
    The engine's writes are not all of git's work: git's workers also read and inflate
    each blob, work that spreads over the CPUs wherever the writes wait or not. So the
    stakes are at least the CPUs' share of the engine's one-thread write (1 - 1/cores),
    whatever the engine's threads gained (where their writes land in the page cache they
    gain nothing, while git's workers still spread the inflating)."""
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


def _engine_per_file(bench: Bench) -> float:
    """The engine's seconds a file written on one thread (0.0 unmeasured): git writes a
    file with the same system calls and more besides, so no less."""
    s = bench.sweeps.get("checkout")
    medians = _engine_medians(s) if s else {}
    files = _facts(s).files
    return medians[1] / files if 1 in medians and files else 0.0


def _engine_pick(s: Sweep) -> int:
    """The worker count the ladder starts from: the fewest the engine measured within
    KNEE of its fastest. Git's workers are processes, dearer to start than the engine's
    threads, so among counts the engine cannot tell apart the fewest serve git best; the
    cost model's parallelism, fitted to a few points, is too unstable to say this."""
    medians = _engine_medians(s)
    if not medians:
        return max(2, int(s.best[WORKERS]))
    fastest = min(medians.values())
    return max(2, min(w for w, t in medians.items() if t <= fastest * (1 + KNEE)))


def _saved(s: Sweep) -> float:
    """The share of a write's time the engine's pick saves against one thread. The pick
    is at least 2 workers, which an engine whose one thread was fastest may not have
    measured: no gain predicted."""
    medians = _engine_medians(s)
    at_pick = medians.get(_engine_pick(s), 0.0)
    if medians.get(1, 0.0) <= 0 or at_pick <= 0:
        return 0.0
    return max(0.0, 1 - at_pick / medians[1])
