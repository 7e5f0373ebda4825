"""Workload profiles: how much each timed workload matters to a kind of user."""
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Dict

from git_tune.errors import UsageError

WORKLOADS = ("status", "untracked", "checkout", "clone", "index")


@lru_cache(maxsize=1)
def profiles() -> Dict[str, dict]:
    return tomllib.loads(resources.files("git_tune.models").joinpath("workloads.toml").read_text())


def weights(profile: str) -> Dict[str, float]:
    p = profiles().get(profile)
    if p is None:
        raise UsageError(f"unknown workload '{profile}'; choose from {', '.join(profiles())}")
    return {w: float(p.get(w, 0.0)) for w in WORKLOADS}
