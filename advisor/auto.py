"""`git-tune auto`: probe, calibrate, recommend, show the diff, write safely, verify.

Idempotent: a fresh stored calibration is reused, so a second run with
nothing changed plans no change and writes nothing.
"""
import os
import subprocess
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import platformdirs

from git_tune.advisor import calibrate as cal, configwrite, repogen, scopes, search, verify as verify_mod
from git_tune.advisor.recommend import recommend
from git_tune.errors import UsageError
from git_tune.models import catalogue
from git_tune.probes import repo as repo_probe

SCHEMA_VERSION = 1
DEMO_SHAPE = repogen.RepoShape(depth=3, width=10, files=9)   # 9,999 files
DEMO_CHANGED = 200


def demo_repo() -> str:
    """A generated repository for trying git-tune out (made once, then reused)."""
    root = os.path.join(platformdirs.user_cache_dir("git-tune"), "demo-repo")
    if not os.path.exists(os.path.join(root, ".git", "index")):
        import shutil
        shutil.rmtree(root, ignore_errors=True)
        repogen.generate(root, DEMO_SHAPE, second_commit_changes=DEMO_CHANGED)
    return root


@dataclass
class AutoOptions:
    scope: str = "global"
    workload: str = "mixed"
    budget: float = 20.0
    strategy: str = search.DEFAULT_STRATEGY
    dry_run: bool = False
    override: bool = False
    recalibrate: bool = False
    verify: bool = True
    runs: int = 5


Confirm = Callable[[str], bool]


def _rewrite_index(repo: str, version: str) -> str:
    proc = subprocess.run(["git", "update-index", "--index-version", version], cwd=repo,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        return f"could not rewrite the index: {proc.stderr.strip()}"
    return f"rewrote {repo}'s index as version {version}"


def auto(repo: Optional[str], opts: AutoOptions, confirm: Confirm,
         progress=None, say: Callable[[str], None] = lambda m: None) -> dict:
    layout = repo_probe.locate(os.path.abspath(repo or os.getcwd()))
    if layout is None or not layout.worktree:
        raise UsageError("git-tune auto needs a repository with a working tree "
                         "(--repo PATH, or --demo for a generated one)")
    repo = layout.worktree
    scope = scopes.resolve(opts.scope, layout.git_dir)
    record = None if opts.recalibrate else cal.load_fresh(repo)
    reused = record is not None
    if record is None:
        say(f"calibrating {repo} (about {opts.budget:g} s)")
        record = cal.calibrate(repo, cal.Options(budget=opts.budget, strategy=opts.strategy,
                                                 runs=opts.runs), progress, store=not opts.dry_run)
    rec = recommend(record, opts.workload)
    settings = rec.settings()
    prov = configwrite.Provenance(
        record["git_version"], record["fingerprint"], record["storage"]["storage_class"],
        repo, record["repository"]["entries"],
        {k.key: k.reason for k in rec.keys if k.status == "set"})
    plan = configwrite.plan(scope, settings, prov, opts.override, cwd=repo)
    out = {"schema": SCHEMA_VERSION, "repo": repo, "scope": asdict(scope),
           "calibration_reused": reused, "recommendation": rec.to_dict(), "plan": asdict(plan),
           "written": None, "index": None, "verify": None, "dry_run": opts.dry_run}
    if not plan.changes:
        out["message"] = ("nothing to change: the recommended values are already applied"
                          if settings else "nothing to change: no setting beat Git's defaults here")
        return out
    if opts.dry_run:
        out["message"] = "dry run: nothing was written"
        return out
    if not confirm(f"write {len(plan.settings)} values to {scope.include_file}?"):
        out["message"] = "not written: declined"
        return out
    result = configwrite.apply(plan, prov, cwd=repo)
    out["written"] = asdict(result)
    rewrite = [k for k in plan.settings if catalogue.lookup(k).needs_index_rewrite]
    if "index.version" in rewrite:
        if confirm(f"rewrite {repo}'s index as version {plan.settings['index.version']} now "
                   "(index.version only applies to new index files)?"):
            out["index"] = _rewrite_index(repo, plan.settings["index.version"])
        else:
            out["index"] = "not rewritten: index.version takes effect on the next new index"
    if opts.verify and plan.settings:
        before = {k: plan.current.get(k, verify_mod.defaults_for([k])[k]) for k in plan.settings}
        touched = set()
        for k in plan.settings:
            touched |= {"checkout.workers": {"switch"}, "checkout.thresholdForParallelism": {"switch"},
                        "core.untrackedCache": {"untracked"}, "index.threads": {"index"},
                        "index.version": {"index", "status"}}.get(k, {"status"})
        say("verifying with real git")
        rep = verify_mod.verify(repo, dict(plan.settings), before, runs=opts.runs,
                                workloads=tuple(w for w in verify_mod.ALL_WORKLOADS if w in touched))
        out["verify"] = rep.to_dict()
    out["message"] = result.message
    return out
