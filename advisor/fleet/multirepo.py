"""Per-repository recommendations: what all repositories share, and what differs.

Values every repository agrees on go to the include file itself; a value
only some repositories need (a large index wants index.threads, a small one
does not) goes to that repository's own file, included through an
includeIf "gitdir:..." block.
"""
import os
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..measure import calibrate
from ..measure.budget import Progress
from ..measure.record import Options
from ..decide.recommend import recommend
from ...errors import UsageError
from ...probes import repo as repo_probe

SCAN_DEPTH = 4


def scan(root: str, depth: int = SCAN_DEPTH) -> List[str]:
    """Working trees below root (a .git directory or file), not descending into them."""
    if not os.path.isdir(root):
        raise UsageError(f"--scan '{root}' is not a directory")
    found = []
    base = os.path.abspath(root).rstrip("/").count("/")
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames or ".git" in filenames:
            found.append(os.path.abspath(dirpath))
            dirnames[:] = []
            continue
        if dirpath.rstrip("/").count("/") - base >= depth:
            dirnames[:] = []
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return sorted(found)


@dataclass(frozen=True)
class RepoAdvice:
    repo: str
    git_dir: str
    entries: Optional[int]          # None where the index could not be read
    recommendation: Dict[str, Any]


@dataclass(frozen=True)
class MultiRecommendation:
    repos: Tuple[RepoAdvice, ...]
    common: Dict[str, str]
    per_repo: Dict[str, Dict[str, str]]      # git dir -> values beyond the common ones

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def recommend_many(repos: Sequence[str], workload: str, options: Options,
                   progress: Optional[Progress] = None) -> MultiRecommendation:
    advice, settings = [], {}
    for r in repos:
        layout = repo_probe.locate(os.path.abspath(r))
        if layout is None or not layout.worktree:
            raise UsageError(f"'{r}' is not a repository with a working tree")
        report = calibrate.probe_repository(layout.worktree, options.budget)
        record = (calibrate.load_fresh(report, options.workload, options.budget)
                  or calibrate.calibrate(report, options, progress))
        rec = recommend(record, workload)
        advice.append(RepoAdvice(layout.worktree, layout.git_dir, record.repository.entries,
                                 rec.to_dict()))
        settings[layout.git_dir] = rec.settings()
    keys = set().union(*settings.values()) if settings else set()
    common = {}
    for k in sorted(keys):
        values = {s.get(k) for s in settings.values()}
        only = values.pop()
        if not values and only is not None:     # every repository's, the same value
            common[k] = only
    per_repo = {d: {k: v for k, v in s.items() if k not in common} for d, s in settings.items()}
    return MultiRecommendation(tuple(advice), common, {d: v for d, v in per_repo.items() if v})


def write_many(many: MultiRecommendation, scope_spec: str) -> Dict[str, Any]:
    """The values every repository shares into the scope, each repository's own into its
    includeIf block, through the same safe write as auto."""
    from ..write import configwrite, scopes
    from ...models import catalogue
    from ...probes import gitinfo
    if scope_spec == "local":
        raise UsageError("per-repository values need a shared scope: global, system or "
                         "file:PATH")
    target = scopes.resolve(scope_spec)
    version = gitinfo.require_git()
    prov = configwrite.Provenance(catalogue.format_version(version), "several-repositories",
                                  "per-repository",
                                  reasons={k: "shared by every repository" for k in many.common})
    plan = configwrite.plan(target, many.common, prov, per_repo=many.per_repo)
    result = configwrite.apply(plan, prov)
    return {"plan": asdict(plan), "result": asdict(result)}
