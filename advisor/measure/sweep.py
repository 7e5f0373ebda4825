"""The sweep loop: ask a strategy, measure, tell, within a wall-clock budget.

It owns what the strategies do not: the budget, repeated measurements at
the incumbent (noise control), failed measurements (recorded as failed,
never as a fake huge time), early stopping and progress.
"""
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ... import engine
from .budget import now
from .search import Point, Strategy
from ...errors import EngineError, GitError

# A point as a dictionary key: its (name, value) pairs, sorted.
PointKey = Tuple[Tuple[str, Any], ...]


class MeasurementFailed(GitError):
    """One measurement could not be taken; the sweep records it and goes on. Where
    nothing catches it, it is git failing (exit 4), not a traceback."""


@dataclass(frozen=True)
class Evaluation:
    point: Point
    value: Optional[float]    # seconds; None = failed
    error: Optional[str] = None
    repeat: bool = False


@dataclass(frozen=True)
class SweepResult:
    strategy: str
    evaluations: Tuple[Evaluation, ...]
    best: Point
    best_value: Optional[float]   # None: no point could be measured (nothing() only)
    best_samples: int
    seconds: float
    stopped: str              # budget | evaluations | converged | failures | deferred

    def by_point(self) -> Dict[PointKey, List[float]]:
        return by_point(self.evaluations)

    @classmethod
    def nothing(cls, strategy: str, seconds: float, stopped: str = "failures") -> "SweepResult":
        """A search none of whose points could be measured in its share (or, "deferred",
        left until after the trials): what was measured beside it (a family's facts)
        still stands."""
        return cls(strategy, (), {}, None, 0, seconds, stopped)


def _key(point: Point) -> PointKey:
    return tuple(sorted(point.items()))


def by_point(evals: Sequence[Evaluation]) -> Dict[PointKey, List[float]]:
    """Each measured point's values (failed evaluations left out), keyed by _key."""
    out: Dict[PointKey, List[float]] = {}
    for e in evals:
        if e.value is not None:
            out.setdefault(_key(e.point), []).append(e.value)
    return out


def _incumbent(evals: Sequence[Evaluation]) -> Tuple[Optional[PointKey], float, int]:
    groups = by_point(evals)
    if not groups:
        return None, float("inf"), 0
    key = min(groups, key=lambda k: (statistics.median(groups[k]), k))
    return key, statistics.median(groups[key]), len(groups[key])


class Share:
    """A sweep's share of the budget, and the time limit of each engine call in it.

    The first call (Git's own point, or a comparison measured before the search) may
    take what the budget has left, or the share when less is left: a sweep always has
    it. No later call may run past the share (one single-threaded pass of a large tree
    on NFS takes longer than all of it): the engine stops it, and the point fails."""

    def __init__(self, seconds: float, budget_end: float) -> None:
        self.seconds, self.budget_end = seconds, budget_end
        self.end = now() + seconds
        self._first = True

    def left(self) -> float:
        return max(0.0, self.end - now())

    def elapsed(self) -> float:
        """Seconds since the share started."""
        return now() - (self.end - self.seconds)

    def limits(self) -> engine.Limits:
        if not self._first:
            return self.bounded()
        self._first = False
        return engine.Limits(timeout=max(self.seconds, self.budget_end - now()))

    def bounded(self) -> engine.Limits:
        """A call that ends with the share, and leaves the first call's allowance to the
        point it is meant for (a pilot before the search)."""
        return engine.Limits(timeout=max(0.01, self.left()))


def engine_measure(fn: Callable[[Point], float]) -> Callable[[Point], float]:
    """fn with the engine's refusal (EngineError) recorded as a failed measurement."""
    def measure(point: Point) -> float:
        try:
            return fn(point)
        except EngineError as e:
            raise MeasurementFailed(e.message) from None
    return measure


def auto_patience(strategy: Strategy, repeat_every: int) -> int:
    """Evaluations without improvement before the sweep calls it converged: at
    least 10, and enough for new points to cover the space (up to 40 of them)
    besides the incumbent's repeats, so a cheap surface is covered before a
    noisy early incumbent is declared the winner (bench/search_strategies.py:
    stopping after 10 left 6-34% regret on tmpfs)."""
    new_points = min(strategy.space_size(), 40)
    return max(10, -(-new_points * repeat_every // max(1, repeat_every - 1)))


def run(strategy: Strategy, measure: Callable[[Point], float], budget: float,
        max_evals: int = 200, repeat_every: int = 4, patience: Optional[int] = None,
        min_gain: float = 0.02, clock: Optional[Callable[[], float]] = None,
        progress: Optional[Callable[[int], None]] = None) -> SweepResult:
    """Measure points until the budget, max_evals or convergence.

    Every `repeat_every` evaluations the incumbent is measured again so a
    lucky single draw cannot win; the sweep stops early when `patience`
    evaluations in a row (default: auto_patience) have not improved the
    incumbent's median by `min_gain`.
    """
    patience = auto_patience(strategy, repeat_every) if patience is None else patience
    clock = clock or now
    start = clock()
    evals: List[Evaluation] = []
    failures = 0
    since_improvement = 0
    best_seen = float("inf")
    stopped = "evaluations"
    # Git's own configuration is measured first: a sweep cut short by its budget
    # (one or two points on slow, cold storage) then picks nothing worse than
    # what Git does already (bench/search_strategies.py, latfs cold preload).
    first = strategy.default_point()
    while len(evals) < max_evals:
        if clock() - start >= budget and evals:   # Git's own point is always measured
            stopped = "budget"
            break
        repeat = bool(evals) and len(evals) % repeat_every == 0
        key, _, _ = _incumbent(evals)
        if first is not None:
            point, first = first, None
        else:
            point = dict(key) if (repeat and key) else strategy.ask()
        try:
            value = measure(point)
        except MeasurementFailed as e:
            evals.append(Evaluation(point, None, str(e)))
            failures += 1
            if failures >= 3:
                stopped = "failures"
                break
            continue
        failures = 0
        evals.append(Evaluation(point, value, None, repeat and key is not None))
        strategy.tell(point, value)
        if progress:
            progress(len(evals))
        _, inc_value, _ = _incumbent(evals)
        if inc_value < best_seen * (1 - min_gain):
            best_seen = inc_value
            since_improvement = 0
        else:
            since_improvement += 1
            if since_improvement >= patience:
                stopped = "converged"
                break
    key, value, n = _incumbent(evals)
    if key is None:
        raise MeasurementFailed("; ".join(e.error for e in evals if e.error) or "no measurement")
    return SweepResult(strategy.name, tuple(evals), dict(key), value, n, clock() - start, stopped)
