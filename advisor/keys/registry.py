"""The key registry: models/keys.toml names each key's module; the module knows the key.

A key module may provide, for the keys it owns (all optional; a sweep's share of the
budget is in advisor/measure/budget.py, with every other share):

    sweep(bench)                  engine measurements its keys share (run once per module),
                                  a record.Sweep or None
    trial(key, bench)             real git, Git's default against a candidate: a
                                  record.Trial, or None (with a note in bench.notes)
    decide(key, cal, weights)     a decide.advice.KeyAdvice from the calibration record, for
                                  the workload profile's weights (advice.weighed)
    findings(cal)                 sentences on what its sweep found that no key sets
    verify_workloads(key)         which `verify` workloads show the key's effect
    index_shape(key, value)       a gitbench.IndexShape: how an index copy carries the value
    rewrite_index(key, value, repo)   make an existing index follow the value; a sentence
    on_disk(key, value, repo)     (facts, to-dos) `show` reports beyond the config
    upgrade_v1(validation)        the key's record.Trial from a schema-1 record
    after_revert(key, value)      end what the reverted value started; sentences saying what
    TRIAL_RANK                    when its trials run, lower first (default 1): where the
                                  budget cannot reach every trial, the cheap ones with the
                                  most at stake go first; ties keep catalogue order
    stakes(key, bench)            seconds a command of the key's workloads could save at
                                  most, from what the engine or git measured so far (None:
                                  not known yet); a key with far less at stake than another
                                  of its rank waits for the rest (advisor/measure/calibrate)

A key without a module (or without decide) is reported and left at Git's default.
Adding a key is one toml entry and, to measure it, one module here.
"""
import importlib
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Callable, Dict, List, Optional, Tuple

from git_tune.advisor.measure.gitbench import IndexShape
from git_tune.errors import UsageError
from git_tune.models import catalogue
from git_tune.models.catalogue import Key

DEFAULT_VERIFY = ("status",)


@dataclass(frozen=True)
class Entry:
    """One key and the module that measures it."""

    key: Key
    module: Optional[ModuleType]

    def _get(self, name: str):
        return getattr(self.module, name, None) if self.module else None

    @property
    def family(self) -> str:
        """The module's short name: its sweep is stored under it."""
        return self.module.__name__.rsplit(".", 1)[-1] if self.module else ""

    @property
    def has_trial(self) -> bool:
        return self._get("trial") is not None

    def trial(self, bench):
        fn = self._get("trial")
        return fn(self.key, bench) if fn else None

    def decide(self, cal, weights: Dict[str, float]):
        """The module's decision (a decide.advice.KeyAdvice), None without one: what a
        key without a decision gets, and a trial that was not run, is decide/recommend's."""
        fn = self._get("decide")
        return fn(self.key, cal, weights) if fn else None

    def stakes(self, bench) -> Optional[float]:
        fn = self._get("stakes")
        return fn(self.key, bench) if fn else None

    @property
    def rank(self) -> int:
        return getattr(self.module, "TRIAL_RANK", 1)

    def verify_workloads(self) -> Tuple[str, ...]:
        fn = self._get("verify_workloads")
        return tuple(fn(self.key)) if fn else DEFAULT_VERIFY

    def index_shape(self, value: str):
        fn = self._get("index_shape")
        return fn(self.key, value) if fn else IndexShape()

    def rewrite_index(self, value: str, repo: str) -> Optional[str]:
        fn = self._get("rewrite_index")
        return fn(self.key, value, repo) if fn else None

    @property
    def rewrites_index(self) -> bool:
        return self._get("rewrite_index") is not None

    def on_disk(self, value: str, repo: str) -> Tuple[Dict[str, str], List[str]]:
        fn = self._get("on_disk")
        return fn(self.key, value, repo) if fn else ({}, [])

    def upgrade_v1(self, validation: dict):
        fn = self._get("upgrade_v1")
        return fn(self.key, validation) if fn else None


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


def sweepers() -> List[Tuple[str, Callable]]:
    """(family, sweep function) of every key module that sweeps, once each."""
    return [(family, m.sweep) for family, m in families() if hasattr(m, "sweep")]


def findings(cal) -> List[str]:
    out: List[str] = []
    for _, m in families():
        if hasattr(m, "findings"):
            out += m.findings(cal)
    return out


def verify_workloads(keys) -> Tuple[str, ...]:
    """The workloads that show these keys' effect, each once."""
    out: List[str] = []
    for k in keys:
        out += [w for w in entry(k).verify_workloads() if w not in out]
    return tuple(out)


def after_revert(undone: List[Dict[str, str]]) -> List[str]:
    """Each reverted key's module ends what its value had started (once per key and
    value, whichever blocks held it); sentences saying what was ended."""
    out: List[str] = []
    for k, v in sorted({(k, v) for values in undone for k, v in values.items()}):
        e = find(k)
        fn = e._get("after_revert") if e else None
        out += fn(e.key, v) if fn else []
    return out


def index_shape(settings: Dict[str, str]):
    """How an index copy carries every one of these values."""
    shape = IndexShape()
    for k, v in sorted(settings.items()):
        shape = shape + entry(k).index_shape(v)
    return shape


def clear() -> None:
    """Forget the loaded catalogue and modules (after GIT_TUNE_KEYS changed)."""
    catalogue.catalogue.cache_clear()
    _entries.cache_clear()
