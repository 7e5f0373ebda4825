"""The calibration record: what `calibrate` measured, as typed, frozen data.

JSON appears only at the edges (the user's cache, `calibrate --json`), through
to_json() and from_json(). A record of schema 1 (git-tune before the key
registry) is read and upgraded; anything else is refused with RecordUnreadable,
which the cache treats as "no stored calibration".
"""
import dataclasses
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, Type, TypeVar, cast

import cattrs

from ..keys import registry
from .search import DEFAULT_STRATEGY, Dim
from .sweep import Evaluation, SweepResult
from ...models.stats import MIN_RUNS, RatioEstimate, compare, compare_paired

T = TypeVar("T")

SCHEMA_VERSION = 2
# How a record's runs were timed. A stored record of an older method is not reused
# (calibrate.load_fresh): its figures are not what this git-tune would measure.
# 2: a run ends when git is reaped (core/git.py ExactWait), not at subprocess's next poll.
METHOD = 2


class RecordUnreadable(ValueError):
    """A stored record this git-tune cannot read (another schema, damaged)."""


@dataclass(frozen=True, kw_only=True)
class Options:
    budget: float = 20.0
    strategy: str = DEFAULT_STRATEGY
    seed: int = 0
    cold: bool = False
    runs: int = MIN_RUNS
    workload: str = "mixed"      # the profile whose workloads were measured


@dataclass(frozen=True)
class Host:
    effective_cores: int
    logical_cpus: int
    cpu_quota: Optional[float] = None    # cgroup CPU quota the calibration ran under (CPUs)
    pids_max: Optional[int] = None       # cgroup pid limit it ran under
    others_cpus: Optional[float] = None  # CPUs other processes kept busy meanwhile (hostload)


@dataclass(frozen=True)
class Storage:
    fstype: str
    storage_class: str
    evidence: Tuple[str, ...]
    notes: Tuple[str, ...]


@dataclass(frozen=True)
class Repository:
    path: str
    git_dir: str
    entries: Optional[int]
    index_version: Optional[int]


@dataclass(frozen=True)
class Sweep:
    """An engine sweep over one family's dimensions; `facts` holds what that family's
    module measured beside it (read back through the module's own dataclass)."""

    strategy: str
    dims: Tuple[Dim, ...]
    evaluations: Tuple[Evaluation, ...]
    best: Dict[str, Any]
    best_value: Optional[float]   # None: no point of the search was measured (facts stand)
    best_samples: int
    seconds: float
    stopped: str
    facts: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, result: SweepResult, dims: List[Dim], facts: Dict[str, Any]) -> "Sweep":
        # Facts are stored as JSON values (tuples become lists), so that a record read
        # back from the cache equals the one measured.
        return cls(result.strategy, tuple(dims), result.evaluations, dict(result.best),
                   result.best_value, result.best_samples, round(result.seconds, 3),
                   result.stopped, json.loads(json.dumps(facts)))

    def facts_as(self, kind: Type[T]) -> T:
        """The family's facts as its own dataclass (typed_facts)."""
        return typed_facts(kind, self.facts)


def typed_facts(kind: Type[T], facts: Dict[str, Any]) -> T:
    """A record's facts as the module's own dataclass: a field an older record lacks takes
    its default, one a newer record adds is left out, and a tuple field stored as a JSON
    list is a tuple again."""
    try:
        hints = typing.get_type_hints(kind)
    except (NameError, TypeError):     # an annotation this module cannot resolve
        hints = {}
    names = {f.name for f in dataclasses.fields(cast(Any, kind))}

    def typed(name: str, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) and _a_tuple(hints.get(name)) else value
    return kind(**{k: typed(k, v) for k, v in facts.items() if k in names})


def _a_tuple(hint: Any) -> bool:
    """Whether a field's type is a tuple (Optional[Tuple[...]] included)."""
    if hint is tuple or typing.get_origin(hint) is tuple:
        return True
    return typing.get_origin(hint) is typing.Union and any(_a_tuple(a) for a in typing.get_args(hint))


FAILS_DEFAULT, FAILS_CANDIDATE = "default", "candidate"


@dataclass(frozen=True)
class Comparison:
    """Real git, interleaved: Git's default against a candidate on one workload. When
    git failed on one side (a pid limit its threads exceed), `fails` names that side,
    `error` is git's message, only the other side was timed and there is no estimate."""

    workload: str
    default: Dict[str, str]
    candidate: Dict[str, str]
    times_default: Tuple[float, ...]
    times_candidate: Tuple[float, ...]
    estimate: Optional[RatioEstimate]
    files: Optional[int] = None
    stopped: str = ""        # why runs ended before the minimum: "clearly slower" or
    #                          "clearly faster" (bench.py), "budget"
    fails: str = ""          # "" | "default" | "candidate"
    error: str = ""
    # Where the budget stopped the runs ("budget"): the --budget that would have held
    # the runs a verdict still needed (ab._budget_needed); None otherwise.
    budget_needed: Optional[float] = None


NOT_RUN = "refused"       # the facts entry of a trial real git was not run for


@dataclass(frozen=True)
class Trial:
    """Everything real git showed about one key. The first comparison is the one its
    decision rests on; a key may need more (a threshold: one per batch size)."""

    key: str
    comparisons: Tuple[Comparison, ...]
    facts: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The facts as the stored record will hold them (a tuple is a list there): what a
        # decision reads now is what it reads from the record later.
        object.__setattr__(self, "facts", json.loads(json.dumps(self.facts)))

    @property
    def main(self) -> Comparison:
        return self.comparisons[0]

    @classmethod
    def not_run(cls, key: str, reason: str, **facts: Any) -> "Trial":
        """Real git was not run for the key, and why: its decision keeps Git's default
        and quotes the reason (git refuses the candidate, the engine's prediction
        makes it hopeless)."""
        return cls(key, (), {NOT_RUN: reason, **facts})

    @property
    def why_not_run(self) -> Optional[str]:
        return None if self.comparisons else self.facts.get(NOT_RUN)

    def facts_as(self, kind: Type[T]) -> T:
        """The key's facts as its module's own dataclass (typed_facts)."""
        return typed_facts(kind, self.facts)


class Measured(Protocol):
    """What a decision reads of a calibration: its trials and sweeps by name (a finished
    Calibration, or the Bench of one still running)."""
    @property
    def trials(self) -> Dict[str, "Trial"]: ...

    @property
    def sweeps(self) -> Dict[str, "Sweep"]: ...


@dataclass(frozen=True)
class Calibration:
    schema: int
    git_tune_version: str
    created: float
    fingerprint: str
    options: Options
    host: Host
    storage: Storage
    git_version: str
    repository: Repository
    cache_state: Optional[str]
    sweeps: Dict[str, Sweep]          # family (the key module's short name) -> sweep
    trials: Dict[str, Trial]          # Git key -> its trial
    notes: Tuple[str, ...]
    seconds: float = 0.0
    stored_at: Optional[str] = None
    # Keys whose minimum real-git runs did not fit in the budget: seconds short (None: the
    # budget had ended before their trial could start, or cut it before it was priced).
    unfinished: Dict[str, Optional[float]] = field(default_factory=dict)
    # Where the budget went, seconds by phase: the probe's parts ("probe storage", ...),
    # the wait for write-back ("settle"), each key family's sweep and trials ("checkout",
    # "preload", ...), storing the trials' records ("validate").
    spent: Dict[str, float] = field(default_factory=dict)
    method: int = 1       # METHOD of the git-tune that measured it (1: before the field)

    def to_json(self) -> Dict[str, Any]:
        return cast(Dict[str, Any], _converter.unstructure(self))

    @classmethod
    def from_json(cls, data: Any) -> "Calibration":
        if not isinstance(data, dict) or data.get("schema") not in (1, SCHEMA_VERSION):
            raise RecordUnreadable("not a calibration record of a schema this git-tune reads")
        try:
            if data["schema"] == 1:
                data = _upgrade_v1(data)
            return _converter.structure(data, cls)
        except (cattrs.BaseValidationError, KeyError, TypeError, ValueError,
                AttributeError, IndexError) as e:
            raise RecordUnreadable(f"damaged calibration record: {e}") from None


_converter = cattrs.Converter()


def comparison(workload: str, default: Dict[str, str], candidate: Dict[str, str],
               times_default: Sequence[float], times_candidate: Sequence[float],
               seed: int = 0,
               files: Optional[int] = None, stopped: str = "",
               paired: bool = False, budget_needed: Optional[float] = None) -> Comparison:
    """The record of an A/B; `paired`: times_default[i] and times_candidate[i] were taken
    side by side (an ABBA pair, the agent's adjacent slots), and the estimate is over
    their ratios."""
    estimate = (compare_paired if paired else compare)(times_default, times_candidate,
                                                        seed=seed)
    return Comparison(workload, dict(default), dict(candidate), tuple(times_default),
                      tuple(times_candidate), estimate, files, stopped,
                      budget_needed=budget_needed)


def failed_comparison(workload: str, default: Dict[str, str], candidate: Dict[str, str],
                      fails: str, error: str, times_working: Sequence[float],
                      files: Optional[int] = None
                      ) -> Comparison:
    working = tuple(times_working)
    return Comparison(workload, dict(default), dict(candidate),
                      working if fails == FAILS_CANDIDATE else (),
                      working if fails == FAILS_DEFAULT else (), None, files, "", fails, error)


_SWEEP_FIELDS = ("strategy", "dims", "evaluations", "best", "best_value", "best_samples",
                 "seconds", "stopped")


def _upgrade_v1(old: Dict[str, Any]) -> Dict[str, Any]:
    """Schema 1 kept auxiliary results beside the keys' (under key-like names) and each
    family's facts inside its sweep; schema 2 gives every key one trial."""
    new = {k: v for k, v in old.items() if k not in ("sweeps", "validation")}
    new["schema"] = SCHEMA_VERSION
    new["sweeps"] = {name: dict({f: s[f] for f in _SWEEP_FIELDS},
                                facts={k: v for k, v in s.items() if k not in _SWEEP_FIELDS})
                     for name, s in old.get("sweeps", {}).items()}
    trials = {}
    for key, v in old.get("validation", {}).items():
        if isinstance(v, dict) and "estimate" in v:
            trials[key] = {"key": key, "facts": {k: v[k] for k in ("fs_test",) if k in v},
                           "comparisons": [{
                               "workload": v["workload"], "default": v["default"],
                               "candidate": v["candidate"], "times_default": v["times_default"],
                               "times_candidate": v["times_candidate"],
                               "estimate": v["estimate"], "files": v.get("files")}]}
    for entry in registry.entries():
        upgraded = entry.upgrade_v1(old.get("validation", {}))
        if upgraded is not None:
            trials[entry.key.name] = _converter.unstructure(upgraded)
    new["trials"] = trials
    return new
