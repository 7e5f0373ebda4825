"""checkout.thresholdForParallelism: the batch size from which git checks out in parallel.

Real git, sequential against parallel at the worker count checkout.workers chose, from
a tiny batch (the price of a worker process) up, at batch sizes bisected between the
largest where parallel lost and the smallest where it won by THRESHOLD_MARGIN. Where no
count is set, the threshold does nothing and is not timed.
"""
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..decide import advice
from . import registry
from .checkout import by_count, chosen
from .checkout_sweep import THRESHOLD, WORKERS, _facts, _stakes
from .checkout_trial import (WorkersFacts, _candidate, _on_part,
                             _workload)
from ..measure import gitbench
from ..measure.ab import STOPPED_BUDGET, OutOfBudget, least_seconds
from ..measure.bench import Bench
from ..measure.record import Calibration, Comparison, Trial, comparison
from ..measure.sweep import MeasurementFailed
from ...models import catalogue, costmodel, stats, workloads
from ...models.catalogue import Key
from .registry import Weights

TINY_FILES = 20            # the batch that prices one worker process
THRESHOLD_MARGIN = 0.05    # parallel must beat sequential by 5% at the threshold
THRESHOLD_CHANGE = 0.3     # and the threshold must differ from Git's by 30% to be worth a key
# The threshold's gain is on small batches, not the 400-file checkout the workers
# gain was timed on: a workload of its own, so the two are not multiplied together.
THRESHOLD_WORKLOAD = "checkout-small-batches"


@dataclass(frozen=True)
class ThresholdFacts:
    """What the threshold trial recorded: the worker count its batches ran at, and the
    price of a worker process they showed."""
    workers: Optional[int] = None
    per_worker: float = 0.0


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
    if parallel.status != advice.SET or w is None:
        # The threshold does nothing where parallel checkout is off (_decide_threshold):
        # its batches wait for the budget's end, where the workers' further runs may set
        # a count; timed now, they would take what the other keys could have had.
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
        if not _a_point(point):
            break
        points.append(point)
    points.sort(key=_files)
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
    if w == timed_at or workers.status != advice.SET or w is None:
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


def _a_point(c: Comparison) -> bool:
    """Whether a batch's comparison places the crossing: not where git failed, nor where
    the budget cut it short (the median of fewer pairs than a verdict needs would move
    the crossing; the threshold then rests on the batches timed in full)."""
    return not c.fails and c.stopped != STOPPED_BUDGET


def _files(c: Comparison) -> int:
    """A batch's files (every batch comparison names them)."""
    return c.files or 0


def _wins(c: Comparison) -> bool:
    return costmodel.parallel_wins(statistics.median(c.times_default),
                                   statistics.median(c.times_candidate), THRESHOLD_MARGIN)


def _bisect(points: List[Comparison]) -> Optional[int]:
    """The batch size halfway (geometrically) between the largest lost and next won."""
    points.sort(key=_files)
    lost = [c for c in points if not _wins(c)]
    won = [c for c in points if _wins(c) and (not lost or _files(c) > _files(lost[-1]))]
    if not lost or not won:
        return None
    lo, hi = _files(lost[-1]), _files(won[0])
    mid = int(round((lo * hi) ** 0.5))
    return mid if lo < mid < hi else None


def _decide_threshold(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    w, workers = chosen(catalogue.lookup(WORKERS), cal, weights)
    if workers.status != advice.SET or w is None:
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


def _threshold(cal: Calibration, workers: int
               ) -> Tuple[Optional[int], str, Dict[str, Any]]:
    """From real git at two batch sizes when both were timed, else from the engine model.

    The engine's threads cost less than Git's worker processes, so its break-even can
    sit above a batch real git already ran faster in parallel: real git's batches,
    where there are two, decide."""
    trial = _threshold_trial(cal, workers)
    if trial:
        pts = [(_files(c), statistics.median(c.times_default),
                statistics.median(c.times_candidate)) for c in trial.comparisons]
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
                          trial: Optional[Trial]
                          ) -> Tuple[Optional[int], str, Dict[str, Any]]:
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


def _threshold_evidence(points: Sequence[Comparison], threshold: int, default: int
                       ) -> Optional[stats.RatioEstimate]:
    """Real git at the batch size the new threshold changes most plainly: the smallest
    timed batch below Git's default that now goes parallel, or the largest at or above
    it that now stays sequential. None when no timed batch lies in between (the value
    would then rest on interpolation alone)."""
    # A batch cut short is no evidence for a change.
    points = [c for c in points if stats.conclusive(c.times_default, c.times_candidate)]
    if threshold < default:
        inside = [c for c in points if c.files is not None and threshold <= c.files < default]
        if not inside:
            return None
        est = stats.compare(inside[0].times_default, inside[0].times_candidate)
    else:
        inside = [c for c in points if c.files is not None and default <= c.files < threshold]
        if not inside:
            return None
        est = stats.compare(inside[-1].times_candidate, inside[-1].times_default)
    return est


def _upgrade_threshold_v1(validation: Dict[str, Any]) -> Optional[Trial]:
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


class Threshold(registry.Tuner):
    """checkout.thresholdForParallelism: batches around Git's threshold; at stake, a
    batch of Git's threshold (below it git writes sequentially, at any worker count)."""

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return _trial_threshold(bench)

    def price(self, key: Key, bench: Bench) -> Optional[float]:
        """Where the workers were timed on a part: its first batch, TINY_FILES on a part
        of its own, at the pilots' price; where the part was the pilot's (no price of a
        file), at the part's fastest sequential run: a part is runs of consecutive
        entries (gitbench.part_runs), each in directories of their own, so the tiny
        batch's part has as many directories as the pilot's or nearly, and git's start-up is no less on
        fewer files: priced at its files' share, the trial starts where it cannot finish
        (docs/planner.md, "Figures behind the threshold's rules")."""
        workers = bench.trials.get(WORKERS)
        if workers is None:
            return None
        f = workers.facts_as(WorkersFacts)
        if f.part_fixed is not None and f.part_per_file is not None:
            return least_seconds(f.part_fixed + TINY_FILES * f.part_per_file)
        sequential = workers.main.times_default if workers.comparisons else ()
        if f.part and sequential:
            return least_seconds(min(sequential))
        return None

    def stakes(self, key: Key, bench: Bench) -> Optional[float]:
        return _stakes(bench, min(len(bench.names), int(key.default)))

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
        return _decide_threshold(key, cal, weights)

    def upgrade_v1(self, key: Key, validation: Dict[str, Any]) -> Optional[Trial]:
        return _upgrade_threshold_v1(validation)


TUNERS = {THRESHOLD: Threshold()}
