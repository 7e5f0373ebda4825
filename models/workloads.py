"""Workload profiles: how much each timed workload matters to a kind of user."""
import math
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Dict, Iterable, Tuple

from git_tune.errors import UsageError
from git_tune.models import catalogue

WORKLOADS = ("status", "untracked", "checkout", "clone", "index", "write")
# A workload weighed at least this much is measured for the profile, and no key's value
# may make it slower beyond noise.
MIN_WEIGHT = 0.1


@lru_cache(maxsize=1)
def profiles() -> Dict[str, dict]:
    return tomllib.loads(resources.files("git_tune.models").joinpath("workloads.toml").read_text())


def weights(profile: str) -> Dict[str, float]:
    """Each workload's weight in the profile: the built-in ones from workloads.toml, and
    the workload a key brings with it from its own catalogue entry."""
    p = profiles().get(profile)
    if p is None:
        raise UsageError(f"unknown workload '{profile}'; choose from {', '.join(profiles())}")
    out = {w: float(p.get(w, 0.0)) for w in WORKLOADS}
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
