"""One key's advice: the value (or Git's default), the gain real git showed, and why.

The helpers here are what most key modules decide with: a value is set only
when real git, timed interleaved against Git's default, was faster beyond noise.
"""
import dataclasses
import enum
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..measure.ab import STOPPED_BUDGET, STOPPED_FASTER, STOPPED_SLOWER
from ..measure.record import FAILS_DEFAULT, Calibration, Comparison, Measured, Trial
from ...models import catalogue, stats, workloads
from ...models.catalogue import Key



class Status(enum.StrEnum):
    """What the advice does with the key. A str: the JSON forms, the views and stored
    profiles say "set", "not set" and "not offered"."""
    SET = "set"
    NOT_SET = "not set"
    NOT_OFFERED = "not offered"


SET, NOT_SET, NOT_OFFERED = Status.SET, Status.NOT_SET, Status.NOT_OFFERED


@dataclass(frozen=True)
class Gain:
    workload: str
    speedup: float          # old time / new time: above 1 is faster
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, workload: str, est: stats.RatioEstimate) -> "Gain":
        return cls(workload, 1 / est.ratio, 1 / est.high, 1 / est.low,
                   min(est.runs_old, est.runs_new))

    def text(self) -> str:
        return f"{self.speedup:.2f}x ({self.low:.2f}-{self.high:.2f}, {self.runs}+{self.runs} runs)"


@dataclass(frozen=True)
class KeyAdvice:
    key: str
    status: Status
    value: Optional[str]
    git_default: str
    gain: Optional[Gain]
    reason: str
    evidence: Dict[str, Any] = field(default_factory=dict)
    needs_index_rewrite: bool = False
    # Where real git timed the value on several weighed workloads (a checkout batch and
    # a whole-tree write), the gain on each; `gain` is the one the reason leads with.
    gains: Tuple[Gain, ...] = ()

    def measured(self) -> Tuple[Gain, ...]:
        """The gain on every workload real git timed this value on."""
        return self.gains or ((self.gain,) if self.gain else ())


def not_set(key: Key, reason: str, evidence: Optional[Dict[str, Any]] = None) -> KeyAdvice:
    return KeyAdvice(key.name, NOT_SET, None, key.default, None, reason, evidence or {},
                     key.needs_index_rewrite)


def unmeasured(key: Key) -> KeyAdvice:
    """A key no module trials: reported, left to Git."""
    if key.measured_by == "none":
        return KeyAdvice(key.name, NOT_SET, None, key.default, None,
                         "left to Git: git-tune does not measure it yet")
    return not_set(key, "not set: not measured in this calibration")


def not_offered(key: Key, git_version: str) -> KeyAdvice:
    need = catalogue.format_version(key.since_linux or key.since)
    return KeyAdvice(key.name, NOT_OFFERED, None, key.default, None,
                     f"git {git_version} does not read it (needs {need} on this platform)")


def validated(key: Key, c: Comparison, value: str, what: str, evidence: Optional[Dict[str, Any]] = None,
              suffix: str = "") -> KeyAdvice:
    """Set `value` if real git was faster with it beyond noise, else keep Git's default.
    Where git failed on one side, the side that works wins whatever its speed."""
    if c.fails:
        return _works(key, c, value, what, evidence)
    assert c.estimate is not None       # both sides ran: the comparison has its estimate
    gain = Gain.of(c.workload, c.estimate)
    verdict = c.estimate.verdict
    runs = f"{len(c.times_default)}+{len(c.times_candidate)} runs"
    if c.stopped == STOPPED_SLOWER:
        status, chosen, why = NOT_SET, None, \
            f"{what} was clearly slower with {value} after {runs}: {gain.text()}; Git's default kept"
    elif c.stopped == STOPPED_BUDGET and verdict != stats.FASTER:
        status, chosen, why = NOT_SET, None, \
            f"not set: the budget ended after {runs} of {what} ({gain.text()} so far)"
        if c.budget_needed is not None:
            why += f"; {would_decide(c.budget_needed)}"
    elif verdict == stats.FASTER:
        # Stopped clearly faster: every run 1.5x apart, so fewer runs decided.
        apart = ", every run clearly apart" if c.stopped == STOPPED_FASTER else ""
        status, chosen, why = SET, value, f"{what}: {gain.text()} faster with real git{apart}"
    elif verdict == stats.SLOWER:
        status, chosen, why = NOT_SET, None, \
            f"{what} was slower with {value}: {gain.text()}; Git's default kept"
    else:
        status, chosen, why = NOT_SET, None, f"not set: {what} {gain.text()}, within noise"
    return KeyAdvice(key.name, status, chosen, key.default, gain, why + suffix, evidence or {},
                     key.needs_index_rewrite)


def weighed(key: Key, trial: Trial, weights: Dict[str, float], value: str,
            what: Dict[str, str], evidence: Optional[Dict[str, Any]] = None, suffix: str = "") -> KeyAdvice:
    """The value chosen by the workload profile's objective: the comparisons on workloads it
    weighs (workloads.MIN_WEIGHT or more) decide. One failing or slower beyond noise keeps
    Git's default (the guard); otherwise at least one must be faster beyond noise, and the
    weighted mean log ratio must favour the value. `what` names each workload's command."""
    counted = _counted(trial.comparisons, weights)
    if not counted:
        measured = ", ".join(sorted({c.workload for c in trial.comparisons}))
        return not_set(key, f"not set: measured on {measured}, which this workload profile "
                            "does not weigh", evidence)
    if len(counted) == 1:
        c = counted[0]
        return validated(key, c, value, what.get(c.workload, c.workload), evidence, suffix)
    verdicts = [(c, validated(key, c, value, what.get(c.workload, c.workload), evidence))
                for c in counted]
    for c, a in verdicts:
        if c.fails:     # git fails on one side here: that decides, whatever the speeds
            return a
    for c, a in verdicts:
        if c.stopped == STOPPED_SLOWER or (c.estimate is not None
                                           and c.estimate.verdict == stats.SLOWER):
            return dataclasses.replace(a, reason=a.reason + suffix)
    faster = [(c, a) for c, a in verdicts if a.status == SET]
    ratio = weighted_ratio(counted, weights)
    gains = tuple(Gain.of(c.workload, c.estimate) for c in counted if c.estimate is not None)
    each = "; ".join(f"{what.get(g.workload, g.workload)}: {g.text()}" for g in gains)
    if not faster or ratio >= 1:
        # What was measured stays in the advice (the reason leads with the first gain).
        return dataclasses.replace(
            not_set(key, f"not set: {each}; not faster beyond noise where it weighs "
                         f"{1 / ratio:.2f}x" + suffix, evidence),
            gain=gains[0] if gains else None, gains=gains)
    best = max(faster, key=lambda ca: weights[ca[0].workload])[1]
    return dataclasses.replace(best, reason=f"{each}; weighted {1 / ratio:.2f}x faster"
                                            + suffix, gains=gains)


def _counted(comparisons: Iterable[Comparison], weights: Dict[str, float]) -> List[Comparison]:
    """The comparisons on workloads the profile weighs (workloads.MIN_WEIGHT or more)."""
    return [c for c in comparisons if weights.get(c.workload, 0) >= workloads.MIN_WEIGHT]


def weighted_ratio(comparisons: Iterable[Comparison], weights: Dict[str, float]) -> float:
    """The profile's weighted geometric mean time ratio over the comparisons it weighs that
    timed both sides (where git failed on one side, that decides, not a ratio)."""
    return workloads.weighted_geomean((weights[c.workload], c.estimate.ratio)
                                      for c in _counted(comparisons, weights)
                                      if c.estimate is not None)


def _works(key: Key, c: Comparison, value: str, what: str, evidence: Optional[Dict[str, Any]]) -> KeyAdvice:
    """One side of the trial could not run here: git's own words say why."""
    ev = dict(evidence or {}, git_error=c.error)
    runs = len(c.times_default) + len(c.times_candidate)
    if c.fails == FAILS_DEFAULT:
        return KeyAdvice(key.name, SET, value, key.default, None,
                         f"git fails here with Git's default ({c.error}); {what} worked "
                         f"in {runs} of {runs} runs", ev, key.needs_index_rewrite)
    return not_set(key, f"not set: git fails here with {key.name}={value} ({c.error}); "
                        "Git's default kept", ev)


def would_decide(budget: float) -> str:
    """The advice's words for a budget that would have held a key's real-git runs."""
    return f"--budget {math.ceil(budget):d} or more would decide it"


def unfinished(key: Key, cal: Calibration, seconds_short: Optional[float],
               ask: Optional[str] = None) -> KeyAdvice:
    """Real git could not decide this key in the budget (its trial not started, or cut):
    Git's default, and the budget that would have let it (when a warm-up run priced it). `ask`: the value
    the user's own commands could settle it with, where only the user may start that
    (a key that changes more than speed: agent experiment --yes)."""
    then = (f"; or your own commands settle it, with your yes: `git-tune agent experiment "
            f"{key.name}={ask} --yes --repo {shlex.quote(cal.repository.path)}`" if ask else "")
    if seconds_short is None:
        # Not started, or cut before its runs could be priced: either way the budget.
        return not_set(key, f"not set: the {cal.options.budget:g} s budget ended before "
                            "real git could decide it; a larger --budget would decide "
                            f"it{then}", {"seconds_short": None})
    budget = cal.options.budget + seconds_short
    short = max(1, math.ceil(seconds_short))
    return not_set(key, f"not set: its real-git runs needed {short} s more than the budget "
                        f"left; {would_decide(budget)}{then}",
                   {"seconds_short": seconds_short})


def trial_of(key: Key, cal: Measured) -> Optional[Trial]:
    return cal.trials.get(key.name)
