"""`git-tune verify`: real git, before and after, everything else held equal.

"Before" is Git's defaults for every key git-tune manages, "after" the
values in force (or a candidate set); both reach git through GIT_CONFIG_*
on the same index copies and the same scratch clone, interleaved, with
warm-ups. One traced run per side gives the trace2 phase breakdown.
"""
import os
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from git_tune import git
from git_tune.advisor.keys import registry
from git_tune.advisor.write import journal
from git_tune.advisor.measure import coldcache, gitbench, hostload
from git_tune.advisor.measure.sweep import MeasurementFailed
from git_tune.errors import GitError, UsageError
from git_tune.models import catalogue, stats, workloads as workloads_model
from git_tune.probes import repo as repo_probe
from git_tune.probes.scratch import one_measurement_at_a_time, scratch_dir

SCHEMA_VERSION = 1
SWITCH_MIN_FILES = 10
ALL_WORKLOADS = ("status", "untracked", "diff", "index", "write", "switch")


def all_workloads() -> Tuple[str, ...]:
    """The built-in workloads and those keys bring with them (their [workload] table)."""
    return ALL_WORKLOADS + tuple(w.name for w in workloads_model.keys_workloads()
                                 if w.name not in ALL_WORKLOADS)


@dataclass(frozen=True)
class WorkloadResult:
    name: str
    command: str
    times_before: Tuple[float, ...]
    times_after: Tuple[float, ...]
    estimate: Optional[stats.RatioEstimate]   # None: git failed on one side
    phases_before: Dict[str, float]
    phases_after: Dict[str, float]
    fails: str = ""           # "" | "before" | "after": the side where git failed
    error: str = ""


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

    def to_dict(self) -> dict:
        return asdict(self)

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


def defaults_for(keys) -> Dict[str, str]:
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
    """Alternate a populated scratch clone between two commits."""

    def __init__(self, ws: gitbench.Workspace, a: str, b: str):
        self.clone = os.path.join(ws.root, "switch")
        env = gitbench.config_env({})
        gitbench.run_git(["clone", "-q", "--shared", "--no-checkout",
                          gitbench.clone_source(ws.layout), self.clone], ws.root, env, hooks=False)
        gitbench.without_filters(self.clone)
        gitbench.run_git(["checkout", "-q", "-f", "--detach", a], self.clone, env, hooks=False)
        self.targets = [b, a]
        self.i = 0

    def run(self, settings, trace_file=None):
        target = self.targets[self.i % 2]
        self.i += 1
        return gitbench.timed_git(["checkout", "-q", "-f", "--detach", target], self.clone,
                                  settings, trace_file=trace_file)


def _runner(name: str, ws: gitbench.Workspace, copies: Dict[str, str], side: str,
            switch: Optional[_Switch]) -> Tuple[str, Callable]:
    index = copies[side]
    if name in gitbench.ON_INDEX:
        cmd, make = gitbench.ON_INDEX[name]
        return cmd, make(ws.layout, index)
    if name == "diff":
        # Exit 1 is git's answer "the work tree differs" (an unstaged change, a merge
        # or rebase in progress), not a failure.
        return "git diff --quiet", gitbench.on_copy(["diff", "--quiet", "--exit-code"],
                                                    ws.layout, index, ok=(0, 1))
    if name == "switch":
        return "git checkout (switch commits)", switch.run
    found = registry.workload_runner(name, ws.layout, index)
    if found is None:
        raise UsageError(f"unknown workload {name}")
    return found


def _time_workload(name: str, ws: gitbench.Workspace, copies: Dict[str, str],
                   switch: Optional[_Switch], settings: Dict[str, Dict[str, str]], runs: int,
                   cold: bool, seed: int) -> WorkloadResult:
    """Interleaved runs of one workload before and after, then one traced run a side."""
    cmd, run_before = _runner(name, ws, copies, "before", switch)
    _, run_after = _runner(name, ws, copies, "after", switch)
    runners = {"before": run_before, "after": run_after}

    def side(which):
        def run():
            if cold:
                coldcache.make_cold([copies[which]])
            return runners[which](settings[which])
        return run

    errors = {which: gitbench.attempt(side(which)) for which in runners}   # the warm-ups
    if errors["before"] and errors["after"]:
        raise GitError(f"{cmd} fails before and after: {errors['after']}")
    if errors["before"] or errors["after"]:
        fails = "before" if errors["before"] else "after"
        works = side("after" if fails == "before" else "before")
        times = tuple(works() for _ in range(runs))
        return WorkloadResult(name, cmd, () if fails == "before" else times,
                              times if fails == "before" else (), None, {}, {}, fails,
                              errors[fails])
    ta, tb = gitbench.interleaved(side("before"), side("after"), runs, warmup=0)
    phases = {}
    for which, fn in runners.items():
        trace = os.path.join(ws.root, f"trace-{name}-{which}.json")
        fn(settings[which], trace_file=trace)
        phases[which] = gitbench.trace_phases(trace)
    return WorkloadResult(name, cmd, tuple(ta), tuple(tb), stats.compare(ta, tb, seed=seed),
                          phases["before"], phases["after"])


def _layout(repo: Optional[str], located: Optional[repo_probe.RepoLayout]
            ) -> repo_probe.RepoLayout:
    layout = located or repo_probe.locate(repo)
    if layout is None or not layout.worktree:
        raise UsageError("verify needs a repository with a working tree")
    if not os.path.exists(layout.index_file):
        raise UsageError("the repository has no index yet: run `git status` once")
    return layout


def _switch(ws: gitbench.Workspace, notes: List[str]) -> Optional[_Switch]:
    if repo_probe.partial_clone(ws.layout):
        # Switching commits there fetches the blobs it lacks from its remote: a network
        # fetch, not the checkout the values change, and it fails offline.
        notes.append("switch not timed: a partial clone lacks the blobs a switch writes")
        return None
    pair = _commit_pair(ws.layout)
    if pair is None:
        notes.append(f"switch not timed: no two commits in the last 30 differ in "
                     f"{SWITCH_MIN_FILES}+ files")
        return None
    notes.append(f"switch: {pair[0][:10]} <-> {pair[1][:10]}, {pair[2]} files differ")
    return _Switch(ws, pair[0], pair[1])


def verify(repo: Optional[str], after: Dict[str, str], before: Optional[Dict[str, str]] = None,
           runs: int = stats.MIN_RUNS, cold: bool = False,
           workloads: Tuple[str, ...] = ALL_WORKLOADS, seed: int = 0,
           layout: Optional[repo_probe.RepoLayout] = None) -> VerifyReport:
    """`layout`: the repository as the command located it already (else repo's)."""
    if runs < stats.MIN_RUNS:
        raise UsageError(f"--runs must be at least {stats.MIN_RUNS}: 3 against 3 can never "
                         "reach significance")
    layout = _layout(repo, layout)
    settings = {"before": before if before is not None else defaults_for(after), "after": after}
    notes: List[str] = []
    cold_method = coldcache.make_cold([]) if cold else None
    results = []
    # Other processes' CPU while verify times git: the same warning as calibration's.
    watch = hostload.Watch(len(os.sched_getaffinity(0)))
    with one_measurement_at_a_time(layout.common_dir), \
            scratch_dir([layout.git_dir, os.path.dirname(layout.worktree)],
                        same_fs_as=layout.worktree) as scratch:
        if scratch is None:
            raise UsageError("no writable scratch directory on the repository's file system")
        ws = gitbench.Workspace(layout, scratch)
        try:
            copies = {side: _index_copy(ws, side, values) for side, values in settings.items()}
        except MeasurementFailed as e:
            raise GitError(f"git cannot use this repository's index: {e}") from None
        switch = _switch(ws, notes) if "switch" in workloads else None
        for name in workloads:
            if name == "switch" and switch is None:
                continue
            results.append(_time_workload(name, ws, copies, switch, settings, runs, cold, seed))
    if cold and cold_method and "only file data" in cold_method:
        notes.append(f"cold runs: {cold_method}")
    busy = watch.load().note(again="git-tune verify")
    if busy:
        notes.insert(0, busy)
    return VerifyReport(SCHEMA_VERSION, layout.worktree, settings["before"], after, runs, cold,
                        cold_method, tuple(results), tuple(notes))
