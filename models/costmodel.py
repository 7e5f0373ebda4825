"""An explainable cost model for work split across parallel workers.

    time(workers, n) = serial + n * per_item / min(workers, parallelism) + workers * per_worker

`parallelism` is how many requests the storage and CPUs really serve at
once (cores for hot metadata, far more for a network server, about one for
a spindle); `per_worker` is what each extra worker costs to start and
coordinate. The fit is linear least squares for each candidate
parallelism, keeping the best; intervals come from a residual bootstrap.
"""
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np


@dataclass(frozen=True)
class ParallelCost:
    serial: float
    per_item: float
    per_worker: float
    parallelism: int
    rmse: float
    points: int
    # Bootstrap refits (serial, per_item, per_worker, parallelism) for intervals.
    replicas: Tuple[Tuple[float, float, float, int], ...] = field(default=(), repr=False)

    def predict(self, workers: int, n: int) -> float:
        return _predict((self.serial, self.per_item, self.per_worker, self.parallelism), workers, n)

    def interval(self, workers: int, n: int, level: float = 0.95) -> Tuple[float, float]:
        if not self.replicas:
            p = self.predict(workers, n)
            return p, p
        preds = [_predict(r, workers, n) for r in self.replicas]
        lo, hi = np.percentile(preds, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
        return float(lo), float(hi)

    def best_workers(self, n: int, max_workers: int) -> int:
        return min(range(1, max_workers + 1), key=lambda w: (self.predict(w, n), w))

    def break_even(self, workers: int, margin: float = 0.05, limit: int = 100000) -> Optional[int]:
        """Smallest n at which `workers` beat one worker by `margin`, or None."""
        n = 1
        while n <= limit:
            if self.predict(workers, n) < (1 - margin) * self.predict(1, n):
                return n
            n = max(n + 1, int(n * 1.1))
        return None


def _predict(params: Sequence[float], workers: float, n: float) -> float:
    serial, per_item, per_worker, parallelism = params
    return serial + n * per_item / min(workers, parallelism) + workers * per_worker


def _fit_once(w: np.ndarray, n: np.ndarray, t: np.ndarray,
              max_parallelism: int) -> Tuple[Tuple[float, float, float, int], float]:
    best = None
    for p in range(1, max_parallelism + 1):
        design = np.column_stack([np.ones_like(t), n / np.minimum(w, p), w])
        coef, *_ = np.linalg.lstsq(design, t, rcond=None)
        coef = np.maximum(coef, 0.0)  # costs are never negative
        sse = float(np.sum((design @ coef - t) ** 2))
        # Prefer the smaller parallelism when it explains the data as well.
        if best is None or sse < best[0] * 0.98:
            best = (sse, coef, p)
    assert best is not None     # max_parallelism >= 1
    sse, coef, p = best
    return (float(coef[0]), float(coef[1]), float(coef[2]), p), sse


def fit(samples: Sequence[Tuple[int, int, float]], max_parallelism: int = 64,
        bootstrap: int = 200, seed: int = 0) -> ParallelCost:
    """samples: (workers, items, seconds) triples, at least 3 distinct worker counts."""
    arr = np.asarray(samples, dtype=float)
    if len(arr) < 3:
        raise ValueError("need at least 3 samples to fit a cost model")
    w, n, t = arr[:, 0], arr[:, 1], arr[:, 2]
    params, sse = _fit_once(w, n, t, max_parallelism)
    fitted = np.array([_predict(params, wi, ni) for wi, ni in zip(w, n)])
    resid = t - fitted
    rng = np.random.default_rng(seed)
    replicas = []
    for _ in range(bootstrap):
        t_star = fitted + rng.choice(resid, size=len(resid), replace=True)
        replicas.append(_fit_once(w, n, t_star, max_parallelism)[0])
    serial, per_item, per_worker, parallelism = params
    return ParallelCost(serial, per_item, per_worker, parallelism, rmse=float(np.sqrt(sse / len(t))), points=len(t),
                        replicas=tuple(replicas))


def parallel_wins(sequential: float, parallel: float, margin: float = 0.05) -> bool:
    return parallel <= (1 - margin) * sequential


def crossing(small: Tuple[int, float, float], large: Tuple[int, float, float],
             margin: float = 0.05) -> Optional[int]:
    """Where parallel starts to beat sequential by `margin`, from real git timed at two
    batch sizes: (files, sequential seconds, parallel seconds) each.

    Both times are taken as linear in the number of files between the two sizes.
    Returns a file count within [small files, large files], or None when parallel
    did not win at the large size.
    """
    (n1, s1, p1), (n2, s2, p2) = small, large
    if n2 <= n1 or not parallel_wins(s2, p2, margin):
        return None
    if parallel_wins(s1, p1, margin):
        return n1
    slope_s, slope_p = (s2 - s1) / (n2 - n1), (p2 - p1) / (n2 - n1)
    # p1 + slope_p*x = (1 - margin)*(s1 + slope_s*x), with x files beyond n1.
    x = (p1 - (1 - margin) * s1) / ((1 - margin) * slope_s - slope_p)
    return max(n1, min(n2, int(math.ceil(n1 + x))))
