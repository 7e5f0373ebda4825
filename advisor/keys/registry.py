"""The key registry: models/keys.toml names each key's module; the module knows the key.

What a key may have is declared once, in `Tuner` below (trial, stakes, decide,
verify_workloads, index_shape, rewrite_index, on_disk, upgrade_v1, after_revert,
open_question, price, rank, stopped_paying),
each with what a key without it gets. A module that owns several keys gives each its own
Tuner in `TUNERS = {name: tuner}`, sharing the module's helpers (two keys, two tuners:
no tuner asks which key it is); a module of one key may define the parts as module-level
functions of the same names instead (ModuleTuner), as a plug-in's toy key does. What a
module shares across its keys stays at module level:

    sweep(bench)                  engine measurements its keys share (run once per module),
                                  a record.Sweep or None; its share of the budget is the
                                  planner's (advisor/measure/planner.py: sweep_share)
    findings(cal)                 sentences on what its sweep found that no key sets
    TRIAL_RANK                    a ModuleTuner's rank (Tuner.rank: when its trial runs,
                                  lower first; where the budget cannot reach every trial,
                                  the cheap ones with the most at stake go first)

A key without a module (or without decide) is reported and left at Git's default.
Adding a key is one toml entry and, to measure it, one module here.
"""
import importlib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from types import ModuleType
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence,
                    Tuple)

from ..measure.gitbench import ON_INDEX, IndexShape, Runner
from ...errors import UsageError
from ...models import catalogue, workloads
from ...models.catalogue import Key
from ...probes.layout import RepoLayout

if TYPE_CHECKING:   # they read the registry
    from ..agent.events import Command
    from ..decide.advice import KeyAdvice
    from ..measure.bench import Bench
    from ..measure.record import Calibration, Sweep, Trial

Weights = Dict[str, float]


class Tuner:
    """What a key module measures and decides for one key: every part a key may have,
    declared here with what a key without it gets. A module gives each of its keys a
    Tuner of its own in `TUNERS = {name: tuner}` (two keys, two tuners, sharing the
    module's helpers); a module without TUNERS gives its module-level functions of the
    same names to every key it owns (ModuleTuner). Each part takes the key first."""

    rank: int = 1     # when its trial runs, lower first (the module's TRIAL_RANK)

    def trial(self, key: Key, bench: "Bench") -> Optional["Trial"]:
        """Real git, Git's default against a candidate: a record.Trial (Trial.not_run
        with the reason where it was not run), or None where nothing was timed."""
        return None

    def stakes(self, key: Key, bench: "Bench") -> Optional[float]:
        """Seconds a command of the key's workloads could save at most, from what the
        engine or git measured so far (None: not known yet)."""
        return None

    def price(self, key: Key, bench: "Bench") -> Optional[float]:
        """Seconds the key's trial needs at least (ab.least_seconds of its cheapest run),
        from what the engine or git measured so far (None: not known). A trial priced
        above the budget left is not started: the record says how many seconds it was
        short, and what it would have spent goes to the trials that fit: a trial started
        only to stop at its warm-up takes what the keys after it could decide with."""
        return None

    def decide(self, key: Key, cal: "Calibration", weights: Weights) -> Optional["KeyAdvice"]:
        """A decide.advice.KeyAdvice from the calibration, for the profile's weights."""
        return None

    def verify_workloads(self, key: Key) -> Tuple[str, ...]:
        """The workloads `verify` times for the key: by default those whose git commands
        its `affects` names (models/workloads.toml)."""
        return workloads.showing([key.name])

    def index_shape(self, key: Key, value: str) -> IndexShape:
        return IndexShape()

    def rewrite_index(self, key: Key, value: str, repo: str) -> Optional[str]:
        """Make an existing index follow the value; a sentence saying what was done."""
        return None

    def on_disk(self, key: Key, value: str, repo: str) -> Tuple[Dict[str, str], List[str]]:
        """(facts, to-dos) `show` reports beyond the config."""
        return {}, []

    def upgrade_v1(self, key: Key, validation: Dict[str, Any]) -> Optional["Trial"]:
        """The key's record.Trial from a schema-1 record."""
        return None

    def after_revert(self, key: Key, value: str) -> List[str]:
        """End what the reverted value started; sentences saying what."""
        return []

    def stopped_paying(self, key: Key, value: str, records: Sequence["Command"],
                       repo: Optional[str]) -> Optional[str]:
        """Why `value`, in force, no longer pays in `repo` (None: any repository), from
        the user's own commands the agent recorded; None where it does, or they are too
        few to say (the agent's drift check)."""
        return None

    def index_leftover(self, key: Key, value: str) -> Optional[str]:
        """What the value leaves in an index git wrote under it, which a revert of the
        config does not undo, said with the command that does; None where nothing."""
        return None

    def verify_runner(self, key: Key, repo: RepoLayout, index_file: str,
                      trial: Optional["Trial"]) -> Optional[Runner]:
        """For a key that brings its own workload (catalogue [workload]): the timed runner
        `verify` calls, runner(settings, trace_file=None) -> seconds, on the user's
        repository (`repo`, a RepoLayout) and an index copy; gitbench.on_copy makes one.
        `trial`: the key's trial in the calibration the values came from (None where
        there is none: values set by hand), to time where it decided.
        gitbench.NotTimed where verify cannot time it here (its message says why)."""
        return None

    def open_question(self, key: Key, cal: "Calibration", weights: Weights
                      ) -> Optional[Tuple[str, str]]:
        """What the calibration left open for the user's own commands to settle (the
        agent's experiment): (a value for the agent to compare with the one in force,
        why), or None.
        Where the budget decided on a part and extrapolated, or could not decide."""
        return None

    def has(self, part: str) -> bool:
        """Whether this tuner has the part itself (not Tuner's default)."""
        return getattr(type(self), part) is not getattr(Tuner, part)


PARTS = ("trial", "stakes", "price", "decide", "verify_workloads", "index_shape",
         "rewrite_index", "on_disk", "upgrade_v1", "after_revert", "verify_runner", "open_question",
         "index_leftover", "stopped_paying")


class ModuleTuner(Tuner):
    """The module-level functions of a module without TUNERS (a plug-in's toy key), looked
    up at each call, so a function the module replaces later is the one called."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.rank = getattr(module, "TRIAL_RANK", 1)

    def has(self, part: str) -> bool:
        return callable(getattr(self.module, part, None))

    def __getattribute__(self, name: str) -> Any:
        if name in PARTS:
            fn = getattr(object.__getattribute__(self, "module"), name, None)
            if callable(fn):
                return fn
        return object.__getattribute__(self, name)


@dataclass(frozen=True)
class Entry:
    """One key, the module that measures it, and the module's tuner for it."""

    key: Key
    module: Optional[ModuleType]

    @cached_property
    def tuner(self) -> Tuner:
        if self.module is None:
            return Tuner()
        tuners = getattr(self.module, "TUNERS", None)
        if tuners is None:
            return ModuleTuner(self.module)
        return tuners.get(self.key.name) or Tuner()

    @property
    def family(self) -> str:
        """The module's short name: its sweep is stored under it."""
        return self.module.__name__.rsplit(".", 1)[-1] if self.module else ""

    @property
    def has_trial(self) -> bool:
        return self.tuner.has("trial")

    def trial(self, bench: "Bench") -> Optional["Trial"]:
        return self.tuner.trial(self.key, bench)

    def decide(self, cal: "Calibration", weights: Weights) -> Optional["KeyAdvice"]:
        """The module's decision (a decide.advice.KeyAdvice), None without one: what a
        key without a decision gets, and a trial that was not run, is decide/recommend's."""
        return self.tuner.decide(self.key, cal, weights)

    def stakes(self, bench: "Bench") -> Optional[float]:
        return self.tuner.stakes(self.key, bench)

    def price(self, bench: "Bench") -> Optional[float]:
        return self.tuner.price(self.key, bench)

    @property
    def rank(self) -> int:
        return self.tuner.rank

    def verify_workloads(self) -> Tuple[str, ...]:
        return tuple(self.tuner.verify_workloads(self.key))

    def index_shape(self, value: str) -> IndexShape:
        return self.tuner.index_shape(self.key, value)

    def rewrite_index(self, value: str, repo: str) -> Optional[str]:
        return self.tuner.rewrite_index(self.key, value, repo)

    @property
    def rewrites_index(self) -> bool:
        return self.tuner.has("rewrite_index")

    def on_disk(self, value: str, repo: str) -> Tuple[Dict[str, str], List[str]]:
        return self.tuner.on_disk(self.key, value, repo)

    def upgrade_v1(self, validation: Dict[str, Any]) -> Optional["Trial"]:
        return self.tuner.upgrade_v1(self.key, validation)

    def after_revert(self, value: str) -> List[str]:
        return self.tuner.after_revert(self.key, value)

    def index_leftover(self, value: str) -> Optional[str]:
        return self.tuner.index_leftover(self.key, value)

    def open_question(self, cal: "Calibration", weights: Weights
                      ) -> Optional[Tuple[str, str]]:
        return self.tuner.open_question(self.key, cal, weights)

    def stopped_paying(self, value: str, records: Sequence["Command"], repo: Optional[str]
                       ) -> Optional[str]:
        return self.tuner.stopped_paying(self.key, value, records, repo)


def _import(key: Key) -> Optional[ModuleType]:
    if not key.module:
        return None
    try:
        return importlib.import_module(key.module)
    except ImportError as e:
        raise UsageError(f"{key.name}: its module '{key.module}' cannot be imported: {e}") from None


@lru_cache(maxsize=1)
def _entries() -> Tuple[Entry, ...]:
    return tuple(Entry(k, _import(k)) for k in catalogue.catalogue().values())


def entries() -> Tuple[Entry, ...]:
    """Every catalogue key, in catalogue order, with its module."""
    return _entries()


def trial_order() -> Tuple[Entry, ...]:
    """Every entry in the order its trial runs (TRIAL_RANK, then catalogue order)."""
    return tuple(sorted(_entries(), key=lambda e: e.rank))


def entry(name: str) -> Entry:
    """The entry for a key (UsageError for one not in the catalogue)."""
    key = catalogue.lookup(name)
    return next(e for e in _entries() if e.key.name == key.name)


def find(name: str) -> Optional[Entry]:
    """The entry for a key, or None (a key written by a catalogue no longer loaded)."""
    try:
        return entry(name)
    except UsageError:
        return None


def families() -> List[Tuple[str, ModuleType]]:
    """Each key module once, in the order its first key appears in the catalogue."""
    seen: Dict[str, ModuleType] = {}
    for e in _entries():
        if e.module and e.family not in seen:
            seen[e.family] = e.module
    return list(seen.items())


def sweepers() -> List[Tuple[str, Callable[["Bench"], Optional["Sweep"]]]]:
    """(family, sweep function) of every key module that sweeps, once each."""
    return [(family, m.sweep) for family, m in families() if hasattr(m, "sweep")]


def findings(cal: "Calibration") -> List[str]:
    out: List[str] = []
    for _, m in families():
        if hasattr(m, "findings"):
            out += m.findings(cal)
    return out


def verify_workloads(keys: Iterable[str]) -> Tuple[str, ...]:
    """The workloads that show these keys' effect, each once."""
    out: List[str] = []
    for k in keys:
        out += [w for w in entry(k).verify_workloads() if w not in out]
    return tuple(out)


def open_questions(cal: "Calibration", weights: Weights) -> Dict[str, Tuple[str, str]]:
    """Key -> (value to compare on the user's commands, why) for every key the
    calibration left open (Tuner.open_question)."""
    out = {}
    for e in _entries():
        q = e.open_question(cal, weights)
        if q is not None:
            out[e.key.name] = q
    return out


def after_revert(undone: List[Dict[str, str]]) -> List[str]:
    """Each reverted key's module ends what its value had started (once per key and
    value, whichever blocks held it); sentences saying what was ended."""
    out: List[str] = []
    for k, v in sorted({(k, v) for values in undone for k, v in values.items()}):
        e = find(k)
        out += e.after_revert(v) if e else []
    return out


def workload_runner(name: str, repo: RepoLayout, index_file: str,
                    trials: Optional[Dict[str, "Trial"]] = None
                    ) -> Optional[Tuple[str, Runner]]:
    """(the command as reports name it, its timed runner on `index_file`) for a workload
    timed on an index copy: the table's own (gitbench.ON_INDEX) or one a key brought with
    it (`trials`: the calibration's the values came from); None for the others (switch,
    checkout and clone write files in a scratch clone)."""
    if name in ON_INDEX:
        return workloads.command(name), ON_INDEX[name](repo, index_file)
    for e in _entries():
        w = e.key.workload
        runner = e.tuner.verify_runner(e.key, repo, index_file,
                                       (trials or {}).get(e.key.name)) \
            if w and w.name == name else None
        if w and runner is not None:
            return w.command, runner
    return None


def index_shape(settings: Dict[str, str]) -> IndexShape:
    """How an index copy carries every one of these values."""
    shape = IndexShape()
    for k, v in sorted(settings.items()):
        shape = shape + entry(k).index_shape(v)
    return shape


def clear() -> None:
    """Forget the loaded catalogue and modules (after GIT_TUNE_KEYS changed)."""
    catalogue.catalogue.cache_clear()
    _entries.cache_clear()
