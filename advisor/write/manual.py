"""`git-tune set`: values chosen by hand, written through the same safe path as auto."""
from dataclasses import asdict
from typing import Any, Dict, Optional, Sequence

from . import configwrite, scopes
from ...errors import UsageError
from ...models import catalogue
from ...probes import gitinfo, repo as repo_probe


def set_values(assignments: Sequence[str], repo: Optional[str], scope_spec: str, *,
               override: bool, dry_run: bool) -> Dict[str, Any]:
    version = gitinfo.require_git()
    understood = catalogue.understood(version)
    settings = dict(catalogue.parse_assignment(a) for a in assignments)
    for key in settings:
        if key not in understood:
            raise UsageError(f"git {catalogue.format_version(version)} does not read {key}")
    layout = repo_probe.locate(repo)
    target = scopes.resolve(scope_spec, layout)
    cwd = layout.worktree if layout else None
    # These keys only: what git-tune already wrote there stays as it is.
    prov = configwrite.Provenance(catalogue.format_version(version), "manual", "manual",
                                  layout.worktree if layout else None, None,
                                  {k: "set by hand with git-tune set" for k in settings})
    plan = configwrite.plan(target, settings, prov, override=override, cwd=cwd,
                            writer=configwrite.SET, touches=tuple(settings))
    result = None
    if plan.changes and not dry_run:
        result = asdict(configwrite.apply(plan, prov, cwd=cwd))
    return {"plan": asdict(plan), "written": result, "dry_run": dry_run}
