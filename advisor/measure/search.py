"""Search strategies behind one small ask/tell interface.

A strategy only proposes points and records results; the sweep loop
(advisor/sweep.py) owns budgets, repetitions, failures and progress.
Dimensions are named by the Git key they stand for.
"""
import itertools
import random
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

Point = Dict[str, Any]


@dataclass(frozen=True)
class Dim:
    """An integer range or a list of categories, named by its Git key."""

    name: str
    low: int = 0
    high: int = 0
    categories: Tuple[Any, ...] = ()
    default: Any = None

    def values(self, max_points: int = 64) -> List[Any]:
        if self.categories:
            return list(self.categories)
        span = self.high - self.low + 1
        if span <= max_points:
            return list(range(self.low, self.high + 1))
        # Roughly geometric spacing: fine where small counts differ most.
        vals = {self.low, self.high}
        x = float(max(self.low, 1))
        while x < self.high and len(vals) < max_points:
            vals.add(int(round(x)))
            x *= (self.high / max(self.low, 1)) ** (1 / (max_points - 1))
        return sorted(v for v in vals if self.low <= v <= self.high)

    def to_skopt(self) -> Any:
        from skopt.space import Categorical, Integer
        if self.categories:
            return Categorical(list(self.categories), name=self.name)
        return Integer(self.low, self.high, name=self.name)


def _py(v: Any) -> Any:
    """numpy scalars to Python (json.dumps(np.int64(5)) fails)."""
    return v.item() if hasattr(v, "item") else v


class Strategy:
    name = "base"

    def __init__(self, dims: Sequence[Dim], seed: int = 0) -> None:
        self.dims = list(dims)
        self.seed = seed

    def space_size(self) -> int:
        n = 1
        for d in self.dims:
            n *= len(d.values())
        return n

    def default_point(self) -> Optional[Point]:
        """Git's defaults, when every dimension has one."""
        if any(d.default is None for d in self.dims):
            return None
        return {d.name: d.default for d in self.dims}

    def ask(self) -> Point:
        raise NotImplementedError

    def tell(self, point: Point, value: float) -> None:
        pass


class GridStrategy(Strategy):
    """Every point of the grid, in a seeded order, then again."""

    name = "grid"

    def __init__(self, dims: Sequence[Dim], seed: int = 0) -> None:
        super().__init__(dims, seed)
        self.points = [dict(zip([d.name for d in dims], combo))
                       for combo in itertools.product(*(d.values() for d in dims))]
        random.Random(seed).shuffle(self.points)
        self.i = 0

    def ask(self) -> Point:
        p = self.points[self.i % len(self.points)]
        self.i += 1
        return dict(p)


class RandomStrategy(Strategy):
    name = "random"

    def __init__(self, dims: Sequence[Dim], seed: int = 0) -> None:
        super().__init__(dims, seed)
        self.rng = random.Random(seed)

    def ask(self) -> Point:
        return {d.name: self.rng.choice(d.values()) for d in self.dims}


class CoordinateStrategy(Strategy):
    """One key at a time from Git's defaults, like a careful human would tune."""

    name = "coordinate"

    def __init__(self, dims: Sequence[Dim], seed: int = 0) -> None:
        super().__init__(dims, seed)
        self.current = {d.name: d.default if d.default is not None else d.values()[0] for d in dims}
        self.best_value: Optional[float] = None
        self.queue: List[Point] = []
        self.dim_index = -1

    def _refill(self) -> None:
        self.dim_index = (self.dim_index + 1) % len(self.dims)
        d = self.dims[self.dim_index]
        here = self.current[d.name]
        vals = d.values()
        # Nearest values first: a small step is likelier to help than a leap.
        if not d.categories:
            vals = sorted(vals, key=lambda v: (abs(v - here), v))
        self.queue = [dict(self.current, **{d.name: v}) for v in vals]

    def ask(self) -> Point:
        if not self.queue:
            self._refill()
        return self.queue.pop(0)

    def tell(self, point: Point, value: float) -> None:
        if self.best_value is None or value < self.best_value:
            self.best_value = value
            self.current = dict(point)


class SkoptStrategy(Strategy):
    """Gaussian-process Bayesian optimisation (scikit-optimize), noise-aware."""

    name = "gp"

    def __init__(self, dims: Sequence[Dim], seed: int = 0, initial_points: Optional[int] = None
                ) -> None:
        super().__init__(dims, seed)
        from skopt import Optimizer
        n_init = initial_points or min(6, max(3, 2 * len(dims) + 1))
        # The spaces are small and discrete: 1000 random candidates cover them, and
        # skip L-BFGS restarts that made each ask 1.5-1.7x slower (measured).
        self.opt = Optimizer([d.to_skopt() for d in dims], base_estimator="GP",
                             acq_func="EI", n_initial_points=n_init,
                             initial_point_generator="lhs", random_state=seed,
                             acq_optimizer="sampling", acq_optimizer_kwargs={"n_points": 1000})
        self.names = [d.name for d in dims]

    def ask(self) -> Point:
        with warnings.catch_warnings(), _one_blas_thread():
            # Re-proposing a measured point is fine here: the objective is noisy.
            warnings.simplefilter("ignore", UserWarning)
            x = self.opt.ask()
        return {n: _py(v) for n, v in zip(self.names, x)}

    def tell(self, point: Point, value: float) -> None:
        with _one_blas_thread():
            self.opt.tell([point[n] for n in self.names], float(value))


def _one_blas_thread() -> Any:
    """BLAS worker threads spin on after a fit; on 2 cores they would steal CPU
    from the measurement that follows."""
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=1)


class Seeded(Strategy):
    """`points` first, in turn, then `inner`'s own choices (each result told to it): a
    design that must cover some points before a short budget ends, whatever the
    strategy. The name is the inner strategy's: the seeds are the caller's design."""

    def __init__(self, inner: Strategy, points: Sequence[Point]) -> None:
        super().__init__(inner.dims, inner.seed)
        self.inner, self.queue, self.name = inner, [dict(p) for p in points], inner.name

    def ask(self) -> Point:
        return self.queue.pop(0) if self.queue else self.inner.ask()

    def tell(self, point: Point, value: float) -> None:
        self.inner.tell(point, value)


STRATEGIES = {s.name: s for s in (SkoptStrategy, GridStrategy, RandomStrategy, CoordinateStrategy)}
# Tied with grid and gp on mean regret in bench/search_strategies.py, the lowest mean,
# no compute of its own (docs/deciding.md); change it only with that benchmark.
DEFAULT_STRATEGY = "random"


def make(name: str, dims: Sequence[Dim], seed: int = 0) -> Strategy:
    return STRATEGIES[name](dims, seed)
