"""Is a measured difference real? Medians, MAD outliers and bootstrap intervals.

With 5% run-to-run noise, the best of 20 equal configurations looks 4-6%
faster than the rest; only a confidence interval on the ratio, from
interleaved runs, tells a real gain from a lucky draw.
"""
from dataclasses import dataclass
from typing import Sequence

import numpy as np

FASTER, NO_CHANGE, SLOWER = "faster", "no change", "slower"
# A ratio interval must clear 1 by this much before we call it a change.
MIN_EFFECT = 0.02
MIN_RUNS = 5
# Every run of one side this much slower than every run of the other: a difference no
# noise of a few percent explains. After CLEAR_RUNS runs a side that is a verdict of its
# own (3 against 3 in this order by chance alone: 1 in 20, and 1.5x apart besides), so a
# large gain is not paid for with MIN_RUNS runs of a 10-second checkout.
CLEARLY = 1.5
CLEAR_RUNS = 3


@dataclass(frozen=True)
class RatioEstimate:
    """new/old time: below 1 is faster. Interval is a 95% bootstrap of the median ratio."""

    runs_old: int
    runs_new: int
    median_old: float
    median_new: float
    ratio: float
    low: float
    high: float
    verdict: str

    @property
    def speedup(self) -> float:
        return 1 / self.ratio if self.ratio else float("inf")


def drop_outliers(values: Sequence[float], k: float = 5.0) -> np.ndarray:
    """Drop points further than k scaled MADs from the median (a stalled run, a page-out)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 5:
        return v
    med = np.median(v)
    mad = 1.4826 * np.median(np.abs(v - med))
    if mad == 0:
        return v
    return v[np.abs(v - med) <= k * mad]


def clearly_apart(slow: Sequence[float], fast: Sequence[float], runs: int = CLEAR_RUNS) -> bool:
    """At least `runs` runs a side, and every run of `slow` CLEARLY times as long as every
    run of `fast`."""
    return (len(slow) >= runs and len(fast) >= runs
            and min(slow) > max(fast) * CLEARLY)


def conclusive(old: Sequence[float], new: Sequence[float]) -> bool:
    """Enough runs for a verdict: MIN_RUNS a side, or CLEAR_RUNS clearly apart."""
    return ((len(old) >= MIN_RUNS and len(new) >= MIN_RUNS)
            or clearly_apart(old, new) or clearly_apart(new, old))


def compare(old: Sequence[float], new: Sequence[float], seed: int = 0,
            resamples: int = 4000, min_effect: float = MIN_EFFECT) -> RatioEstimate:
    """Median ratio new/old with a bootstrap interval; any verdict but "no change" needs
    conclusive() runs (counted before outliers go)."""
    enough = conclusive(old, new)
    a, b = drop_outliers(old), drop_outliers(new)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("no measurements to compare")
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, size=(resamples, len(a)), replace=True), axis=1)
    mb = np.median(rng.choice(b, size=(resamples, len(b)), replace=True), axis=1)
    ratios = mb / ma
    low, high = (float(x) for x in np.percentile(ratios, [2.5, 97.5]))
    ratio = float(np.median(b) / np.median(a))
    if not enough:
        verdict = NO_CHANGE  # 3 against 3, overlapping, can never reach significance
    elif high < 1 - min_effect:
        verdict = FASTER
    elif low > 1 + min_effect:
        verdict = SLOWER
    else:
        verdict = NO_CHANGE
    return RatioEstimate(len(a), len(b), float(np.median(a)), float(np.median(b)), ratio,
                         low, high, verdict)
