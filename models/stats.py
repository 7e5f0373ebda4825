"""Is a measured difference real? Medians, MAD outliers and bootstrap intervals.

With 5% run-to-run noise, the best of 20 equal configurations looks 4-6%
faster than the rest; only a confidence interval on the ratio, from
interleaved runs, tells a real gain from a lucky draw.
"""
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

FASTER, NO_CHANGE, SLOWER = "faster", "no change", "slower"
# A ratio interval must clear 1 by this much before we call it a change.
MIN_EFFECT = 0.02
MIN_RUNS = 5
# A large difference is certain in fewer runs: every run of one side slower than every
# run of the other by a margin (APART), and the medians CLEARLY apart. After CLEAR_RUNS
# runs a side that is a verdict of its own (3 against 3 in this order by chance alone: 1
# in 20; a 1.22x gap between the closest runs and 1.5x between the medians besides, which
# no noise of a few percent explains), so a large gain is not paid for with MIN_RUNS runs
# of a 10-second checkout (docs/planner.md, "Figures behind the A/B's rules": why the
# closest runs need APART, not CLEARLY).
CLEARLY = 1.5
APART = CLEARLY ** 0.5
CLEAR_RUNS = 3
# A gain short of CLEARLY is as certain where each side's runs agree far more closely
# than the two sides do: the gap between the closest runs SPREAD_MARGIN times the range
# of either side's own runs (on a log scale). Under no change, 3 runs a side falling
# apart in order (1 in 20) with a gap that wide beside their ranges is beyond any noise
# that shows in the ranges; a busy host's runs spread and need the medians CLEARLY apart
# or MIN_RUNS (docs/planner.md, "Figures behind the A/B's rules").
SPREAD_MARGIN = 4.0


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
    return np.asarray(v[np.abs(v - med) <= k * mad])


def clearly_apart(slow: Sequence[float], fast: Sequence[float], runs: int = CLEAR_RUNS) -> bool:
    """At least `runs` runs a side, every run of `slow` APART times as long as every run
    of `fast`, and either its median CLEARLY times theirs or the gap between the closest
    runs SPREAD_MARGIN times either side's own range (log scale)."""
    if len(slow) < runs or len(fast) < runs or min(slow) <= max(fast) * APART:
        return False
    if float(np.median(slow)) >= float(np.median(fast)) * CLEARLY:
        return True
    if min(fast) <= 0:
        return False        # a run of no time: its side's range has no bound
    gap = math.log(min(slow) / max(fast))
    spread = max(math.log(max(v) / min(v)) for v in (slow, fast))
    return gap >= SPREAD_MARGIN * spread


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
    ma = _boot_medians(rng, a, resamples)      # a first: the same draws as ever
    ratios = _boot_medians(rng, b, resamples) / ma
    low, high = (float(x) for x in np.percentile(ratios, [2.5, 97.5]))
    ratio = float(np.median(b) / np.median(a))
    return RatioEstimate(len(a), len(b), float(np.median(a)), float(np.median(b)), ratio,
                         low, high, _verdict(enough, low, high, min_effect))


def _boot_medians(rng: np.random.Generator, values: np.ndarray, resamples: int) -> np.ndarray:
    """The medians of `resamples` bootstrap resamples of values."""
    return np.asarray(np.median(rng.choice(values, size=(resamples, len(values)), replace=True),
                                axis=1))


def _verdict(enough: bool, low: float, high: float, min_effect: float) -> str:
    """A change only on enough runs (3 against 3, overlapping, can never reach
    significance) and an interval clear of 1 by min_effect."""
    if not enough:
        return NO_CHANGE
    if high < 1 - min_effect:
        return FASTER
    if low > 1 + min_effect:
        return SLOWER
    return NO_CHANGE


def compare_paired(old: Sequence[float], new: Sequence[float], seed: int = 0,
                   resamples: int = 4000, min_effect: float = MIN_EFFECT) -> RatioEstimate:
    """Like compare(), for runs taken in pairs (old[i] beside new[i], one round each):
    the median of the rounds' ratios with a bootstrap interval over rounds. Drift that
    slows a whole round (a neighbour's burst, a cache filling) cancels within the pair,
    so the interval is as wide as the two configurations really differ, not as wide as
    the machine wanders."""
    if len(old) != len(new):
        raise ValueError("paired runs need as many old runs as new")
    logs = drop_outliers(np.log(np.asarray(new, dtype=float) / np.asarray(old, dtype=float)))
    if len(logs) == 0:
        raise ValueError("no measurements to compare")
    boot = _boot_medians(np.random.default_rng(seed), logs, resamples)
    low, high = (float(x) for x in np.exp(np.percentile(boot, [2.5, 97.5])))
    ratio = float(np.exp(np.median(logs)))
    return RatioEstimate(len(logs), len(logs), float(np.median(old)), float(np.median(new)),
                         ratio, low, high, _verdict(conclusive(old, new), low, high, min_effect))
