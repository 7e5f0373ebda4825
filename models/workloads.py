"""The workloads git-tune times (one table: models/workloads.toml, and those keys bring
with them) and the workload profiles: how much each matters to a kind of user."""
import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Dict, Iterable, Tuple

from ..errors import UsageError
from . import catalogue

# A workload weighed at least this much is measured for the profile, and no key's value
# may make it slower beyond noise.
MIN_WEIGHT = 0.1


@dataclass(frozen=True)
class Workload:
    """A row of the workload table. commands: the git commands it runs, matched against
    keys' `affects`; stands_for: the `affects` phrases it stands for beside them ("every
    command that reads the index"); verify: `verify` times it; sized: what its work grows
    with; key: the key that brought it ("" for the built-in ones)."""
    name: str
    command: str
    commands: Tuple[str, ...]
    stands_for: Tuple[str, ...] = ()
    verify: bool = True
    sized: str = "index"
    key: str = ""

    def shows(self, key: "catalogue.Key") -> bool:
        """Whether the key's value changes what this workload runs (its `affects`)."""
        if self.key:
            return self.key == key.name
        return any(a in self.stands_for or a.split()[0] in self.commands for a in key.affects)


@lru_cache(maxsize=1)
def _toml() -> Dict[str, Any]:
    return tomllib.loads(resources.files("git_tune.models").joinpath("workloads.toml").read_text())


def profiles() -> Dict[str, Dict[str, Any]]:
    profile: Dict[str, Dict[str, Any]] = _toml()["profile"]
    return profile


@lru_cache(maxsize=1)
def table() -> Dict[str, Workload]:
    """Every workload by name: the built-in ones, then those keys bring with them."""
    out = {name: Workload(name, w["command"], tuple(w["commands"]), tuple(w.get("stands_for", ())),
                          bool(w.get("verify", True)), w.get("sized", "index"))
           for name, w in _toml()["workload"].items()}
    for k in catalogue.catalogue().values():
        if k.workload and k.workload.name not in out:
            out[k.workload.name] = Workload(k.workload.name, k.workload.command,
                                            tuple(a.split()[0] for a in k.affects),
                                            sized="index", key=k.name)
    return out


def verified() -> Tuple[str, ...]:
    """The workloads `verify` can time, in the table's order."""
    return tuple(w.name for w in table().values() if w.verify)


def built_in_verified() -> Tuple[str, ...]:
    """verified() without the keys' own workloads: what it is without the key catalogue."""
    return tuple(name for name, w in _toml()["workload"].items() if w.get("verify", True))


def showing(keys: Iterable[str]) -> Tuple[str, ...]:
    """The workloads `verify` times for these keys: those whose commands the keys affect."""
    ks = [catalogue.lookup(k) for k in keys]
    return tuple(w.name for w in table().values() if w.verify and any(w.shows(k) for k in ks))


def command(name: str) -> str:
    """The workload's command, as reports name it."""
    w = table().get(name)
    return w.command if w else name


def weights(profile: str) -> Dict[str, float]:
    """Each workload's weight in the profile: the built-in ones from workloads.toml, and
    the workload a key brings with it from its own catalogue entry."""
    p = profiles().get(profile)
    if p is None:
        raise UsageError(f"unknown workload '{profile}'; choose from {', '.join(profiles())}")
    out = {w.name: float(p.get(w.name, 0.0)) for w in table().values() if not w.key}
    for w in keys_workloads():
        out.setdefault(w.name, dict(w.weights).get(profile, 0.0))
    return out


def keys_workloads() -> Tuple["catalogue.Workload", ...]:
    """The workloads keys bring with them (catalogue entries with a [workload] table)."""
    return tuple(k.workload for k in catalogue.catalogue().values() if k.workload)


def counted(profile: str) -> Dict[str, float]:
    """The workloads the profile's keys are measured and decided on."""
    return {w: x for w, x in weights(profile).items() if x >= MIN_WEIGHT}


def weighted_geomean(weighed: Iterable[Tuple[float, float]]) -> float:
    """A profile's objective over (weight, value) pairs, values being per-workload times
    or ratios: their weighted geometric mean, so a seconds-long clone does not drown a
    millisecond status. 1.0 when nothing weighs."""
    pairs = list(weighed)
    total = sum(w for w, _ in pairs)
    if not total:
        return 1.0
    return math.exp(sum(w * math.log(v) for w, v in pairs) / total)


def cold(profile: str) -> bool:
    """Whether the profile's work starts from a cold cache (a fresh CI runner)."""
    return bool(profiles()[profile].get("cold", False))
