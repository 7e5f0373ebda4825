"""`git-tune apply PROFILE`: write a fleet profile's values where this host is of its class.

Kept lean for fleet hosts: no numpy, no optimiser, one quick probe.
"""
import os
from collections import Counter
from dataclasses import asdict
from typing import Any, Dict, Optional

from ..write import configwrite, scopes
from . import profiles
from ...errors import ProfileMismatch
from ...models import catalogue
from ...probes import gitinfo, repo as repo_probe
from ...probes.report import probe

SCHEMA_VERSION = 1


def apply_profile(path: str, scope_spec: str, repo: Optional[str], *, check: bool, force: bool,
                  override: bool) -> Dict[str, Any]:
    profile = profiles.load(path)
    understood = catalogue.understood(gitinfo.require_git())     # GitError without a git
    report = probe(repo)
    version = report.git.version or "unknown"
    here = dict(profiles.host_class(report), git_version=version)
    if here["storage_class"] != profile["class"]["storage_class"]:
        here["storage_class"] = _storage_class_again(repo, here["storage_class"])
    problems = profiles.mismatches(profile, here)
    if problems and not force:
        raise ProfileMismatch("this host is not of the profile's class: " + "; ".join(problems)
                                       + " (--force applies it anyway)")
    settings = {k: v for k, v in profile["settings"].items() if k in understood}
    dropped = sorted(set(profile["settings"]) - set(settings))
    layout = repo_probe.locate(repo)
    scope = scopes.resolve(scope_spec, layout)
    cwd = layout.worktree if layout else None
    prov = configwrite.Provenance(
        version, f"profile:{profile['provenance']['fingerprint'] or 'merged'}",
        profile["class"]["storage_class"], cwd, None,
        {k: f"fleet profile {os.path.basename(path)}: {_evidence(profile['measurements'].get(k))}"
         for k in settings})
    plan = configwrite.plan(scope, settings, prov, override=override, cwd=cwd,
                            writer=configwrite.APPLY)
    out = {"schema": SCHEMA_VERSION, "profile": path, "class": profile["class"], "host_class": here,
           "mismatches": problems, "forced": bool(problems), "dropped_keys": dropped,
           "plan": asdict(plan), "check": check, "would_change": plan.changes, "written": None}
    if check or not plan.changes:
        return out
    out["written"] = asdict(configwrite.apply(plan, prov, cwd=cwd))
    return out


def _storage_class_again(repo: Optional[str], first: str) -> str:
    """The storage class is measured (latencies), and a busy or CPU-throttled host can
    measure a flash disk slow once: on a mismatch, two more probes, and the majority."""
    classes = [first] + [profiles.host_class(probe(repo))["storage_class"] for _ in range(2)]
    return Counter(classes).most_common(1)[0][0]


def _evidence(m: Optional[Dict[str, Any]]) -> str:
    """What the profile says was measured for a key (already checked by profiles.parse)."""
    if not m:
        return "measured on the profile's host"
    if "speedup" in m:
        return f"{m['speedup']:.2f}x ({m['low']:.2f}-{m['high']:.2f}) on {m['workload']}"
    return f"median {m['speedup_median']:.2f}x over {m['hosts']} hosts"
