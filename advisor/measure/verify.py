"""`git-tune verify`: real git, before and after, everything else held equal.

"Before" is Git's defaults for every key git-tune manages, "after" the
values in force (or a candidate set); both reach git through GIT_CONFIG_*
on the same index copies and the same scratch clone, interleaved, with
warm-ups. One traced run per side gives the trace2 phase breakdown.
"""
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ... import git
from ..keys import registry
from ..write import journal
from . import ab, calibrate, coldcache, gitbench, hostload
from .record import FAILS_CANDIDATE, FAILS_DEFAULT, Comparison, Trial
from .sweep import MeasurementFailed
from ...errors import GitError, UsageError
from ...models import catalogue, stats, workloads as workloads_model
from ...probes import repo as repo_probe
from ...probes.scratch import one_measurement_at_a_time, scratch_dir

SCHEMA_VERSION = 1
SWITCH_MIN_FILES = 10
# The whole tree written (the clone workload) is timed where one run of it, Git's
# defaults', takes at most this many seconds: its runs (a warm-up pair, the pairs, one
# traced run a side) then take about half a minute at most. A policy on how long verify
# may take, not a figure of any host's: where one run takes longer, the calibration's
# comparison (on the tree or a part of it) stands alone and the note says so.
TREE_RUN_SECONDS = 2.0


def all_workloads(keys: Optional[Iterable[str]] = None) -> Tuple[str, ...]:
    """The workloads verify can time: models/workloads.toml's, and those keys bring
    (with `keys`, those these keys bring only: a repack is not timed to verify a
    checkout key)."""
    table = workloads_model.table()
    return tuple(w for w in workloads_model.verified()
                 if keys is None or not table[w].key or table[w].key in keys)


# The workloads timed in a scratch clone of their own (verify's, not on an index copy).
SCRATCH_CLONE = ("switch", "clone")

# The sides of a comparison as verify's report names them.
SIDE = {FAILS_DEFAULT: "before", FAILS_CANDIDATE: "after"}


@dataclass(frozen=True)
class WorkloadResult:
    """One workload timed before and after: the comparison record calibration keeps
    (Git's defaults as the "default" side, the values verified as the candidate), with
    the command and one traced run a side."""
    name: str
    command: str
    comparison: Comparison
    phases_before: Dict[str, float]
    phases_after: Dict[str, float]

    @property
    def estimate(self) -> Optional[stats.RatioEstimate]:
        return self.comparison.estimate    # None: git failed on one side

    @property
    def fails(self) -> str:
        """"" | "before" | "after": the side where git failed."""
        return SIDE.get(self.comparison.fails, "")

    def to_dict(self) -> Dict[str, Any]:
        """The report's stable JSON (schema 1): the sides named before and after."""
        c = self.comparison
        return {"name": self.name, "command": self.command,
                "times_before": list(c.times_default), "times_after": list(c.times_candidate),
                "estimate": asdict(c.estimate) if c.estimate else None,
                "phases_before": self.phases_before, "phases_after": self.phases_after,
                "fails": self.fails, "error": c.error}


def slower_names(report: Dict[str, Any]) -> List[str]:
    """The names of the workloads slower beyond noise (or failing) with the values
    after, in the report's order (slower() says them)."""
    return [w["name"] for w in report["workloads"]
            if (w["estimate"] and w["estimate"]["verdict"] == stats.SLOWER)
            or (not w["estimate"] and w["fails"] == "after")]


def slower(report: Dict[str, Any]) -> List[str]:
    """The workloads of a verification (its JSON form) slower beyond noise, or failing,
    with the values after: each said as "<command> <speedup>" or "<command> fails"."""
    out = []
    for w in report["workloads"]:
        e = w["estimate"]
        if e and e["verdict"] == stats.SLOWER:
            out.append(f"{w['command']} {1 / e['ratio']:.2f}x ({1 / e['high']:.2f}-"
                       f"{1 / e['low']:.2f})")
        elif not e and w["fails"] == "after":
            out.append(f"{w['command']} fails")
    return out


@dataclass(frozen=True)
class VerifyReport:
    schema: int
    repo: str
    before: Dict[str, str]
    after: Dict[str, str]
    runs: int
    cold: bool
    cold_method: Optional[str]
    workloads: Tuple[WorkloadResult, ...]
    notes: Tuple[str, ...]

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "workloads": [w.to_dict() for w in self.workloads]}

    def verdict(self) -> str:
        # Git failing under git-tune's values is worse than any slowdown; failing only
        # under Git's defaults (a pid limit) and working now is a gain.
        verdicts = {w.estimate.verdict if w.estimate else
                    (stats.SLOWER if w.fails == "after" else stats.FASTER) for w in self.workloads}
        if stats.SLOWER in verdicts:
            return stats.SLOWER
        return stats.FASTER if stats.FASTER in verdicts else stats.NO_CHANGE


def values_to_verify(assignments: Sequence[str] = ()) -> Dict[str, str]:
    """The values `verify` times: those given (KEY=VALUE), else every value git-tune has
    applied; a usage error where there are none."""
    if assignments:
        return dict(catalogue.parse_assignment(item) for item in assignments)
    after: Dict[str, str] = {}
    for entry in journal.applied():
        after.update(entry.settings)
    if not after:
        raise UsageError("git-tune has applied nothing to verify; run `git-tune auto` or "
                         "pass --set KEY=VALUE")
    return after


def defaults_for(keys: Iterable[str]) -> Dict[str, str]:
    """Git's own behaviour for each key, as an explicit value."""
    out = {}
    for k in keys:
        key = catalogue.lookup(k)
        out[key.name] = {"keep": "false"}.get(key.default, key.default)
    return out


def _index_copy(ws: gitbench.Workspace, name: str, settings: Dict[str, str]) -> str:
    """The user's index as git writes it under these values (each key module says how)."""
    return ws.index_copy(name, registry.index_shape(settings))


def _commit_pair(layout: repo_probe.RepoLayout) -> Optional[Tuple[str, str, int]]:
    """HEAD and the nearest ancestor that differs in at least SWITCH_MIN_FILES files."""
    revs = git.run(["rev-list", "--max-count=30", "HEAD"], repo=layout).stdout.split()
    for old in revs[1:]:
        diff = git.run(["diff", "-z", "--name-only", "--no-renames", old, revs[0]],
                       repo=layout).stdout
        n = diff.count("\0")
        if n >= SWITCH_MIN_FILES:
            return revs[0], old, n
    return None


class _Switch:
    """A populated scratch clone switched between two commits. One run is the round
    trip, each switch followed by the `git status -uno` that pays for the files it wrote
    (those written in the index's second are racily clean: the status reads them again),
    so that every run of either side does the same work: with one switch a run, each
    side's runs alternate directions, an odd count of them has more of one direction,
    and where the two directions differ in cost the verdict compares directions, not
    values."""

    def __init__(self, ws: gitbench.Workspace, a: str, b: str) -> None:
        self.clone = os.path.join(ws.root, "switch")
        env = gitbench.config_env({})
        gitbench.run_git(["clone", "-q", "--shared", "--no-checkout",
                          gitbench.clone_source(ws.layout), self.clone], ws.root, env, hooks=False)
        gitbench.without_filters(self.clone)
        gitbench.run_git(["checkout", "-q", "-f", "--detach", a], self.clone, env, hooks=False)
        self.targets = (b, a)

    def run(self, settings: Dict[str, str], trace_file: Optional[str] = None) -> float:
        took = 0.0
        for target in self.targets:
            for args in (["checkout", "-q", "-f", "--detach", target],
                         list(gitbench.WHOLE_STATUS)):
                took += gitbench.timed_git(args, self.clone, settings, trace_file=trace_file)
        return took


def _runner(name: str, ws: gitbench.Workspace, copies: Dict[str, str], side: str,
            scratch: Dict[str, gitbench.Runner], trials: Dict[str, Trial]
            ) -> Tuple[str, gitbench.Runner]:
    if name in SCRATCH_CLONE:
        # verify skips these where _scratch_runners made none
        return workloads_model.command(name), scratch[name]
    found = registry.workload_runner(name, ws.layout, copies[side], trials)
    if found is None:
        raise UsageError(f"unknown workload {name}")
    return found


def _time_workload(name: str, ws: gitbench.Workspace, copies: Dict[str, str],
                   scratch: Dict[str, gitbench.Runner], settings: Dict[str, Dict[str, str]],
                   runs: int, cold: bool, seed: int, trials: Dict[str, Trial]
                   ) -> WorkloadResult:
    """Interleaved runs of one workload before and after, then one traced run a side."""
    cmd, run_before = _runner(name, ws, copies, "before", scratch, trials)
    _, run_after = _runner(name, ws, copies, "after", scratch, trials)
    runners = {"before": run_before, "after": run_after}

    def side(which: str) -> Callable[[], float]:
        def run() -> float:
            if cold:
                coldcache.make_cold([copies[which]])
            return runners[which](settings[which])
        return run

    try:
        c = ab.run(name, settings["before"], settings["after"], side("before"), side("after"),
                   ab.Runs(runs, seed, budget=None, stop_early=False, extensions=0))
    except MeasurementFailed as e:
        raise GitError(f"{cmd} fails before and after: {e}") from None
    phases = {}
    if not c.fails:
        for which, fn in runners.items():
            trace = os.path.join(ws.root, f"trace-{name}-{which}.json")
            fn(settings[which], trace_file=trace)
            phases[which] = gitbench.trace_phases(trace)
    return WorkloadResult(name, cmd, c, phases.get("before", {}), phases.get("after", {}))


def _layout(repo: Optional[str], located: Optional[repo_probe.RepoLayout]
            ) -> Tuple[repo_probe.RepoLayout, str]:
    """The repository and its work tree (verify times commands that need one)."""
    layout = located or repo_probe.locate(repo)
    if layout is None or not layout.worktree:
        raise UsageError("verify needs a repository with a working tree")
    if not os.path.exists(layout.index_file):
        raise UsageError("the repository has no index yet: run `git status` once")
    return layout, layout.worktree


def _scratch_runners(ws: gitbench.Workspace, workloads: Sequence[str],
                     before: Dict[str, str], notes: List[str]) -> Dict[str, gitbench.Runner]:
    """The runners of the workloads asked for that write files in a scratch clone (switch,
    clone), where they can be timed here; each one left out has a note saying why."""
    asked = [w for w in SCRATCH_CLONE if w in workloads]
    if asked and repo_probe.partial_clone(ws.layout):
        # Writing files there fetches the blobs it lacks from its remote: a network
        # fetch, not the checkout the values change, and it fails offline.
        notes.extend(f"{w} not timed: a partial clone lacks the blobs it writes" for w in asked)
        return {}
    out: Dict[str, gitbench.Runner] = {}
    made: Dict[str, Callable[[], Optional[gitbench.Runner]]] = {
        "switch": lambda: _switch(ws, notes), "clone": lambda: _tree(ws, before, notes)}
    for w in asked:
        try:
            runner = made[w]()
        except MeasurementFailed as e:
            # Its scratch clone, made with Git's defaults before any value is timed
            # (`git clone` forks, which a pid limit can refuse): not the values' doing.
            notes.append(f"{w} not timed: its scratch clone could not be made: {e}")
            continue
        if runner is not None:
            out[w] = runner
    return out


def _tree(ws: gitbench.Workspace, before: Dict[str, str], notes: List[str]
          ) -> Optional[gitbench.Runner]:
    """The whole tree written in a scratch clone, then the next status (calibration's
    clone workload), where each of two runs of it with the values before takes at most
    TREE_RUN_SECONDS; they are then the runs' first warm-ups. Two, because the first
    writes files where none were and every later run writes them where the run before
    removed them, which some file systems make several times slower (docs/deciding.md,
    "Verify"). A run that says no is stopped at that limit (the directories made first,
    within as long again), so a tree that takes minutes costs verify seconds; what it
    wrote is written back before this returns, so the workloads timed after it do not
    pay for it (as checkout_trial's pilot of the whole tree)."""
    paths = repo_probe.tracked_sample(ws.layout, n=10 ** 9)
    if not paths:
        notes.append("clone not timed: the tree has no file git writes (submodules or "
                     "skip-worktree entries only)")
        return None
    tree = gitbench.WholeTreeWrite(ws.clone(), paths, ws.root)
    why = (f"one run of the whole tree written then git status takes over "
           f"{TREE_RUN_SECONDS:g} s")
    try:
        with gitbench.deadline(TREE_RUN_SECONDS):
            tree.make_directories()
        runs = []
        for _ in range(2):
            with gitbench.deadline(TREE_RUN_SECONDS):
                runs.append(tree.run(before))
        took: Optional[float] = max(runs)
    except gitbench.DeadlineReached:
        took = None
    except MeasurementFailed as e:
        took, why = None, f"git failed writing it: {e}"
    gitbench.written_back(tree.clone)
    if took is None or took > TREE_RUN_SECONDS:
        notes.append(f"clone not timed: {why}; calibration's comparison stands")
        return None
    notes.append(f"clone: the whole tree, {len(tree.paths):,} files, written then git status")
    return tree.run


def _switch(ws: gitbench.Workspace, notes: List[str]) -> Optional[gitbench.Runner]:
    pair = _commit_pair(ws.layout)
    if pair is None:
        notes.append(f"switch not timed: no two commits in the last 30 differ in "
                     f"{SWITCH_MIN_FILES}+ files")
        return None
    notes.append(f"switch: {pair[0][:10]} <-> {pair[1][:10]}, {pair[2]} files differ")
    return _Switch(ws, pair[0], pair[1]).run


def verify(repo: Optional[str], after: Dict[str, str], before: Optional[Dict[str, str]] = None,
           runs: int = stats.MIN_RUNS, cold: bool = False,
           workloads: Optional[Tuple[str, ...]] = None, seed: int = 0,
           layout: Optional[repo_probe.RepoLayout] = None,
           trials: Optional[Dict[str, Trial]] = None) -> VerifyReport:
    """`layout`: the repository as the command located it already (else repo's);
    `workloads`: those timed (by default every one verify can time); `trials`: the
    calibration's the values came from (by default the repository's stored ones), where
    a key's workload is timed where its trial decided (registry.Tuner.verify_runner)."""
    workloads = all_workloads(after) if workloads is None else workloads
    if runs < stats.MIN_RUNS:
        raise UsageError(f"--runs must be at least {stats.MIN_RUNS}: 3 against 3 can never "
                         "reach significance")
    layout, worktree = _layout(repo, layout)
    if trials is None:
        trials = calibrate.stored_trials(calibrate.probe_repository(worktree))
    settings = {"before": before if before is not None else defaults_for(after), "after": after}
    notes: List[str] = []
    cold_method = coldcache.make_cold([]) if cold else None
    results = []
    # Other processes' CPU while verify times git: the same warning as calibration's.
    watch = hostload.Watch(len(os.sched_getaffinity(0)))
    with one_measurement_at_a_time(layout.common_dir), \
            scratch_dir([layout.git_dir, os.path.dirname(worktree)],
                        same_fs_as=worktree) as scratch:
        if scratch is None:
            raise UsageError("no writable scratch directory on the repository's file system")
        ws = gitbench.Workspace(layout, scratch)
        try:
            copies = {side: _index_copy(ws, side, values) for side, values in settings.items()}
        except MeasurementFailed as e:
            raise GitError(f"git cannot use this repository's index: {e}") from None
        scratch_runners = _scratch_runners(ws, workloads, settings["before"], notes)
        for name in workloads:
            if name in SCRATCH_CLONE and name not in scratch_runners:
                continue
            try:
                results.append(_time_workload(name, ws, copies, scratch_runners, settings,
                                              runs, cold, seed, trials))
            except gitbench.NotTimed as e:
                notes.append(f"{name} not timed: {e}")
    if cold and cold_method and "only file data" in cold_method:
        notes.append(f"cold runs: {cold_method}")
    busy = watch.load().note(again="git-tune verify")
    if busy:
        notes.insert(0, busy)
    return VerifyReport(SCHEMA_VERSION, worktree, settings["before"], after, runs, cold,
                        cold_method, tuple(results), tuple(notes))
