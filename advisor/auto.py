"""`git-tune auto`: the pipeline, once. Probe -> calibrate -> recommend -> plan/write -> verify.

    advisor/measure/   probe the repository, sweep with the engine, trial with real git
    advisor/decide/    a value (or Git's default) per key, with its evidence
    advisor/write/     plan, diff, back up, write atomically, revert, show
    advisor/fleet/     profiles, apply, many repositories
    advisor/keys/      one module per key family: what each key needs at every stage

Idempotent: a fresh stored calibration is reused, so a second run with
nothing changed plans no change and writes nothing.
"""
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import ownpaths, repogen
from .decide.recommend import Recommendation, recommend
from .keys import registry
from .measure import calibrate, hostload, search, verify as verify_mod
from .measure.budget import Progress
from .measure.record import Calibration, Options, Trial
from .write import configwrite, journal, revert, scopes
from ..errors import GitError, UsageError
from ..models import catalogue
from ..probes.layout import RepoLayout

SCHEMA_VERSION = 1
DEMO_SHAPE = repogen.RepoShape(depth=3, width=10, files=9)   # 9,999 files
DEMO_CHANGED = 200


def demo_repo(say: Callable[[str], None] = lambda m: None) -> str:
    """A generated repository for trying git-tune out (made once, then reused; `say`
    hears about it only when it is made)."""
    root = os.path.join(ownpaths.cache_dir(), "demo-repo")
    if not os.path.exists(os.path.join(root, ".git", "index")):
        say(f"making the demo repository ({DEMO_SHAPE.file_count:,} files, once) in {root}")
        shutil.rmtree(root, ignore_errors=True)
        repogen.generate(root, DEMO_SHAPE, second_commit_changes=DEMO_CHANGED)
    return root


@dataclass(frozen=True, kw_only=True)
class AutoOptions:
    scope: str = "global"
    workload: str = "mixed"
    budget: float = 20.0
    strategy: str = search.DEFAULT_STRATEGY
    runs: int = 5
    dry_run: bool = False
    override: bool = False
    recalibrate: bool = False
    verify: bool = True
    # Values that change what other programs read (catalogue `readers`) at a scope wider
    # than one repository: written only with this, or a yes to their own question.
    format_changes: bool = False
    # Write even where other processes kept the host busy while measuring (a CI runner
    # that is never idle): the values may flip between runs, and the output says so.
    even_if_busy: bool = False

    def calibration(self) -> Options:
        return Options(budget=self.budget, strategy=self.strategy, runs=self.runs,
                       workload=self.workload)


@dataclass(frozen=True)
class Question:
    """What auto asks before it writes: the question, the answer that holds when the
    user just presses Enter, and what is shown before asking (the recommendation and
    the diff, as the result so far)."""

    text: str
    default: bool
    preview: Optional[Dict[str, Any]] = None
    own_yes: bool = False       # --yes does not answer it: a person, or its own flag


# The answer: True (write), False (declined), or None: nobody could be asked (no
# terminal and no --yes), which never writes, as apt-get refuses without -y.
Confirm = Callable[[Question], Optional[bool]]

# Who a write to each scope reaches, for the question; the wide ones default to No.
REACH = {"global": ("every repository of this user", False),
         "system": ("every user's repositories on this host", False),
         "local": ("this repository only", True),
         "file": ("wherever that file is included", True)}
Say = Callable[[str], None]


def provenance(record: Calibration, rec: Recommendation) -> configwrite.Provenance:
    return configwrite.Provenance(record.git_version, record.fingerprint,
                                  record.storage.storage_class, record.repository.path,
                                  record.repository.entries, rec.reasons())


def _rewrite_indexes(plan: configwrite.Plan, repo: str, confirm: Confirm) -> Optional[str]:
    """Values that reach an existing index only by rewriting it: ask, then rewrite."""
    done: List[str] = []
    for key, value in plan.settings.items():
        entry = registry.entry(key)
        if not (entry.key.needs_index_rewrite and entry.rewrites_index):
            continue
        if confirm(Question(f"rewrite {repo}'s index for {key}={value} now ({key} only "
                            "applies to new index files)?", default=True)):
            said = entry.rewrite_index(value, repo)
            if said:
                done.append(said)
        else:
            done.append(f"not rewritten: {key} takes effect on the next new index")
    return "; ".join(done) or None


def _not_writing(plan: configwrite.Plan, rec: Recommendation, record: Calibration,
                 opts: AutoOptions) -> Optional[str]:
    """Why auto writes nothing before asking (None: it asks): nothing to change, a busy
    host, a dry run."""
    note = configwrite.merge_note(plan)
    if not plan.changes:
        return ("nothing to change: the recommended values are already applied"
                if rec.settings() else
                "nothing to change: no setting beat Git's defaults here") \
            + (f"; {note}" if note else "")
    busy = None if opts.even_if_busy else _busy_while_measuring(record)
    return busy or ("dry run: nothing was written" if opts.dry_run else None)


def _busy_while_measuring(record: Calibration) -> Optional[str]:
    """Why nothing is written where other processes kept the host busy while the
    calibration measured (hostload.busy): its comparisons competed with them, and the
    same host quieter may decide otherwise. None where the host was quiet enough."""
    others = record.host.others_cpus
    cpus = len(os.sched_getaffinity(0))
    if others is None or not hostload.busy(others, record.host.effective_cores, cpus):
        return None
    return (f"nothing written: the host was busy while measuring (other processes kept "
            f"{others:.1f} of {cpus} CPUs busy), so values could flip from run to run; run "
            "again when it is quieter (git-tune auto --recalibrate), or let the agent "
            "settle them on your own commands (git-tune agent enable); --even-if-busy "
            "writes anyway")


def _format_changes_held_back(settings: Dict[str, str], scope: scopes.Scope, opts: AutoOptions,
                              confirm: Confirm) -> Dict[str, str]:
    """The values that change what other programs read (catalogue `readers`) held back
    from a write wider than one repository: each needs its own yes, which --yes alone
    is not (--format-changes is). key -> why it was held back."""
    held = {}
    for key, value in sorted(settings.items()):
        k = catalogue.lookup(key)
        if not k.readers or scope.name not in ("global", "system") or opts.format_changes \
                or opts.dry_run:
            continue
        answer = confirm(Question(f"also write {key}={value} for {REACH[scope.name][0]}? "
                                  f"It changes {k.changes}: {k.readers}", False, own_yes=True))
        if not answer:
            held[key] = (f"not written: {key}={value} changes {k.changes} ({k.readers}); "
                         "it needs its own yes (--format-changes, or --scope local for one "
                         "repository)")
    return held


def _split_per_repository(settings: Dict[str, str], scope: scopes.Scope, git_dir: str
                          ) -> Tuple[Dict[str, str], Optional[Dict[str, Dict[str, str]]]]:
    """(values for the scope, per-repository blocks). A key that belongs to one
    repository (it starts a daemon there) goes, in a scope wider than the repository,
    into this repository's own block; the other repositories' blocks stay as they are.
    `git_dir` is as the blocks name it (configwrite.read_per_repo: no trailing slash)."""
    if scope.name == "local":
        return settings, None
    mine = {k: v for k, v in settings.items() if catalogue.lookup(k).per_repository}
    blocks = configwrite.read_per_repo(scope.include_file)
    block = {k: v for k, v in blocks.pop(git_dir, {}).items()
             if not catalogue.lookup(k).per_repository}
    block.update(mine)
    if block:
        blocks[git_dir] = block
    return {k: v for k, v in settings.items() if k not in mine}, blocks


def _verify(plan: configwrite.Plan, after: Dict[str, str], git_dir: str, repo: Optional[str],
            opts: AutoOptions, say: Say, layout: Optional[RepoLayout],
            trials: Dict[str, Trial]) -> Tuple[Dict[str, Any], List[str]]:
    """Real git before and after, on the workloads that show the keys written (`after`:
    the scope's values and this repository's block); and the workloads slower beyond
    noise with them. A workload read slower is timed once more on its own, and counts
    only where that run agrees: five runs a side read a value slower by chance now and
    then, and a chance reading must not take back what the trial chose."""
    current = {**plan.current, **plan.current_per_repo.get(git_dir, {})}
    before = {k: current.get(k, verify_mod.defaults_for([k])[k]) for k in after}
    touched = registry.verify_workloads(after)
    say("verifying with real git")
    rep = verify_mod.verify(repo, after, before, runs=opts.runs,
                            workloads=tuple(w for w in verify_mod.all_workloads() if w in touched),
                            layout=layout, trials=trials).to_dict()
    first = verify_mod.slower_names(rep)
    if not first:
        return rep, []
    say("timing again what read slower")
    again = verify_mod.verify(repo, after, before, runs=opts.runs, workloads=tuple(first),
                              layout=layout, trials=trials).to_dict()
    agreed = set(verify_mod.slower_names(again))
    return rep, [s for name, s in zip(first, verify_mod.slower(rep)) if name in agreed]


def auto(repo: Optional[str], opts: AutoOptions, confirm: Confirm,
         progress: Optional[Progress] = None, say: Say = lambda m: None
         ) -> Dict[str, Any]:
    report = calibrate.probe_repository(repo, opts.budget)
    layout = report.layout
    if not layout or not layout.worktree:
        raise UsageError("git-tune auto needs a repository with a working tree "
                         "(--repo PATH, or --demo for a generated one)")
    located, repo = repo, layout.worktree   # as the user named it (None: as git would find it)
    scope = scopes.resolve(opts.scope, layout)
    record = None if opts.recalibrate else calibrate.load_fresh(report, opts.workload, opts.budget)
    reused = record is not None
    if record is None:
        say(f"calibrating {repo} (about {opts.budget:g} s)")
        record = calibrate.calibrate(report, opts.calibration(), progress, store=not opts.dry_run)
    rec = recommend(record, opts.workload)
    prov = provenance(record, rec)
    git_dir = layout.git_dir.rstrip("/")
    held_back = _format_changes_held_back(rec.settings(), scope, opts, confirm)
    settings, per_repo = _split_per_repository(
        {k: v for k, v in rec.settings().items() if k not in held_back}, scope, git_dir)
    plan = configwrite.plan(scope, settings, prov, override=opts.override, cwd=repo,
                           per_repo=per_repo)
    written = {**plan.settings, **plan.per_repo.get(git_dir, {})}   # what this repository gets
    out = {"schema": SCHEMA_VERSION, "repo": repo, "scope": asdict(scope),
           "calibration_reused": reused, "recommendation": rec.to_dict(), "plan": asdict(plan),
           "written": None, "index": None, "verify": None, "dry_run": opts.dry_run,
           "held_back": held_back}
    stop = _not_writing(plan, rec, record, opts)
    if stop:
        out["message"] = stop
        return out
    reach, default = REACH[scope.name]
    answer = confirm(Question(f"write {configwrite.count_values(len(written))} to "
                              f"{scope.include_file}, read by {reach}?", default, out))
    if not answer:
        out["message"] = ("not written: declined" if answer is False else
                          "not written: there is no terminal to ask on; run again with "
                          "--yes to write, or --dry-run to only look")
        return out
    first_write = scope.key not in journal.load_state()
    result = configwrite.apply(plan, prov, cwd=repo)
    out["written"] = asdict(result)
    out["message"] = result.message
    if opts.verify and written:
        try:
            out["verify"], slower = _verify(plan, written, git_dir, located, opts, say, layout,
                                            record.trials)
        except GitError as e:       # git cannot even run the workloads under them
            slower = [f"git fails: {e}"]
        if slower:
            calibrate.forget(report, opts.workload)   # the next run measures again
            return {**out, **_take_back(plan, prov, repo, first_write, slower)}
    out["index"] = _rewrite_indexes(plan, repo, confirm)
    return out


def _take_back(plan: configwrite.Plan, prov: configwrite.Provenance, repo: str,
               first_write: bool, slower: List[str]) -> Dict[str, Any]:
    """Undo the write of `plan`, which its verification read `slower`: the confirmation
    disagrees with the trial that chose the values, and they are not kept on a
    contradiction. Through the same safe path: where it was git-tune's first write to
    the scope, revert (the files as they were before it); else the values it changed put back to
    those it found, every other value as it is now. What auto reports of it."""
    if first_write:
        revert.revert(plan.scope)
    else:
        touched = tuple(sorted(set(plan.settings) | set(plan.current)))
        back = configwrite.plan(plan.scope, dict(plan.current), prov, cwd=repo,
                                per_repo=plan.current_per_repo, writer=configwrite.AUTO,
                                touches=touched)
        configwrite.apply(back, prov, cwd=repo)
    return {"taken_back": slower,
            "message": (f"taken back: with the values just written, {'; '.join(slower)} "
                        "(slower beyond noise); the configuration is as it was before this "
                        "run. Run again on a quieter host, or let the agent settle it on "
                        "your commands")}
