"""From a calibration record to recommended Git settings, each with its evidence.

Each key's module decides its value from its own trial (advisor/keys/); a key
gets a value only when real git, timed interleaved against Git's default, was
faster beyond noise. Keys the installed git does not read are never offered.
"""
import dataclasses
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .advice import NOT_SET, SET, KeyAdvice
from . import advice
from ..keys import registry
from ..measure.record import FAILS_DEFAULT, Calibration
from ...models import catalogue, workloads

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Recommendation:
    schema: int
    workload: str
    git_version: str
    storage_class: str
    fingerprint: str
    keys: Tuple[KeyAdvice, ...]
    findings: Tuple[str, ...]
    expected: Dict[str, float]       # workload -> speedup of the values set together
    weighted_speedup: float
    calibration_created: float
    notes: Tuple[str, ...] = ()      # the calibration's: its limits, what it could not do
    spent: Dict[str, float] = field(default_factory=dict)   # the calibration's: where it went

    def settings(self) -> Dict[str, str]:
        return {k.key: k.value for k in self.keys if k.status == SET and k.value is not None}

    def reasons(self) -> Dict[str, str]:
        return {k.key: k.reason for k in self.keys if k.status == SET}

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _expected(keys: Tuple[KeyAdvice, ...]) -> Dict[str, float]:
    """Per workload, the product of the gains real git measured for the values set. A
    workload none was timed on is not expected faster: a clone's tree write gains what its
    own trial showed, not what a 400-file batch did (worker start-up weighs differently)."""
    expected: Dict[str, float] = {}
    for k in keys:
        if k.status == SET:
            for g in k.measured():
                expected[g.workload] = expected.get(g.workload, 1.0) * g.speedup
    return expected


def _decide(entry: registry.Entry, cal: Calibration, understood: Mapping[str, catalogue.Key],
            weights: Dict[str, float]) -> KeyAdvice:
    name = entry.key.name
    if name not in understood:
        return advice.not_offered(entry.key, cal.git_version)
    needed = needed_by_another(entry.key, cal, weights)
    if needed is not None:
        return needed
    if name in cal.unfinished and name not in cal.trials:
        # The agent asks the user's commands on its own about keys that change only
        # speed; for one that changes more, the user is told how to.
        question = entry.open_question(cal, weights) if entry.key.changes else None
        return advice.unfinished(entry.key, cal, cal.unfinished[name],
                                 question[0] if question else None)
    return decide_measured(entry, cal, weights)


def needed_by_another(key: catalogue.Key, cal: Calibration,
                      weights: Dict[str, float]) -> Optional[KeyAdvice]:
    """Where another key's trial found git failing under Git's defaults and working only
    with this key in its candidate too (pack-objects fits the memory a run may use only
    with fewer threads), that comparison decides this key, whatever its own trial
    measured: a value without which git fails comes first. None elsewhere, and where
    the profile does not weigh that comparison's workload."""
    for name, t in cal.trials.items():
        if name == key.name or not t.comparisons:
            continue
        c = t.main
        # The key changed between the sides (not a value carried on both from a trial
        # before).
        if c.fails == FAILS_DEFAULT and key.name in c.candidate \
                and c.candidate[key.name] != c.default.get(key.name):
            other = catalogue.lookup(name)
            what = {c.workload: other.workload.command} if other.workload else {}
            decided = advice.weighed(key, t, weights, c.candidate[key.name], what,
                                     {"decided_with": name})
            if decided.status == SET:     # else the profile does not weigh it: its own
                return decided
    return None


def decide_measured(entry: registry.Entry, cal: Calibration,
                    weights: Dict[str, float]) -> KeyAdvice:
    """The key module's decision; a trial real git was not run for (Trial.not_run) keeps
    Git's default with its reason, whatever the module, as does a key without one."""
    trial = cal.trials.get(entry.key.name)
    if trial is not None and trial.why_not_run:
        return advice.not_set(entry.key, "not set: " + trial.why_not_run, dict(trial.facts))
    decided = entry.decide(cal, weights)
    return decided if decided is not None else advice.unmeasured(entry.key)


# A value that changes what other programs can read (catalogue `readers`: the index's
# format) is set only where it saves at least this much on each command it speeds up:
# below it, the risk to every tool that reads the index buys the user nothing they feel.
FORMAT_CHANGE_MIN_SAVING = 0.020


def saving(cal: Calibration, k: KeyAdvice) -> Optional[float]:
    """Seconds the value saved per command on the workload its gain leads with: the
    difference of the two sides' medians real git timed (None: no such comparison)."""
    trial = cal.trials.get(k.key)
    if trial is None or k.gain is None:
        return None
    for c in trial.comparisons:
        if c.workload == k.gain.workload and c.times_default and c.times_candidate \
                and c.candidate.get(k.key) == k.value:
            return statistics.median(c.times_default) - statistics.median(c.times_candidate)
    return None


def _worth_a_format_change(k: KeyAdvice, cal: Calibration) -> KeyAdvice:
    key = catalogue.lookup(k.key)
    if k.status != SET or not key.readers:
        return k
    saved = saving(cal, k)
    if saved is not None and saved >= FORMAT_CHANGE_MIN_SAVING:
        return k
    shown = f"{saved * 1e3:.1f} ms" if saved is not None else "an unmeasured amount"
    return dataclasses.replace(
        k, status=NOT_SET, value=None,
        reason=(f"not set: {k.gain.text() if k.gain else 'faster'} saves {shown} a command, "
                f"under the {FORMAT_CHANGE_MIN_SAVING * 1e3:.0f} ms a change of {key.changes} "
                f"must buy ({key.readers})"),
        evidence={**k.evidence, "saved_seconds": saved})


def recommend(cal: Calibration, workload: str = "mixed") -> Recommendation:
    weights = workloads.weights(workload)
    understood = catalogue.understood(catalogue.parse_version(cal.git_version))
    keys = tuple(_worth_a_format_change(_decide(e, cal, understood, weights), cal)
                 for e in registry.entries())
    expected = _expected(keys)
    weighted = workloads.weighted_geomean((w, expected.get(name, 1.0))
                                          for name, w in weights.items())
    return Recommendation(SCHEMA_VERSION, workload, cal.git_version, cal.storage.storage_class,
                          cal.fingerprint, keys, tuple(registry.findings(cal)), expected,
                          weighted, cal.created, cal.notes, dict(cal.spent))
