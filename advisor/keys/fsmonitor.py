"""core.fsmonitor: Git's built-in daemon tells `git status` what changed, instead of an
lstat of every entry (and, with the untracked cache, a scan of every directory).

Linux git has the daemon from 2.55 (inotify); an older git accepts `true` and only
pays for asking. Whether this git has it is read from its behaviour (the probe's
`fsmonitor--daemon status`), and git itself refuses network file systems (NFS, SMB,
FUSE) unless fsmonitor.allowRemote: its refusal is the answer there. The daemon
needs one inotify watch per directory. Real git decides: `git status` with the
daemon warm against without, on index copies. A daemon the trial started is always
stopped; one the user already ran is left running.

The value is per repository (one daemon per working tree): a write to a wider scope
puts it in that repository's own block (`per_repository` in keys.toml).
"""
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Optional

from ... import fsmonitor as daemon
from ..decide import advice
from ..measure import gitbench
from ..measure.bench import Bench
from ..measure.record import Calibration, Trial
from ...models import workloads
from ...models.storage import NETWORK
from . import registry
from ...models.catalogue import Key
from .registry import Weights

KEY = "core.fsmonitor"
# First: its trial times only status runs, and on a large local tree it is the biggest
# gain there is (6.4x on 50,000 files, bench/fsmonitor_daemon.py).
TRIAL_RANK = 0
# Watches are per user and shared by every daemon and editor: one repository may take
# at most this share of the limit.
WATCH_SHARE = 0.5
WORKLOADS = {"status": ("git status -uno with the daemon warm", False),
             "untracked": ("git status with the daemon warm", True)}


def _fresh_clones(profile: str) -> Optional[str]:
    """Why a profile whose work starts cold (fresh CI clones) never gets the daemon."""
    if not workloads.cold(profile):
        return None
    # A fresh clone has no daemon: its first command starts one, which then outlives the
    # job on a shared runner.
    return (f"the {profile} profile's clones are fresh, and each would start a daemon that "
            "outlives it")


@dataclass(frozen=True)
class TrialFacts:
    """What the trial recorded beside its comparisons."""
    directories: Optional[int] = None       # one inotify watch each
    max_user_watches: Optional[int] = None
    daemon_was_running: bool = False


def directories(names: Iterable[str]) -> int:
    return len({os.path.dirname(n) for n in names} | {""})


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    fresh = _fresh_clones(bench.options.workload)
    if fresh:          # not measured: the decision could only be "not set"
        return Trial.not_run(key.name, fresh)
    if bench.storage_class == NETWORK:
        # inotify sees only this host's writes; git 2.55's is_remote_fs() treats Lustre,
        # GPFS, CephFS, BeeGFS and 9p (WSL's /mnt/c) as local and runs the daemon there.
        return Trial.not_run(key.name, "the work tree is on network or shared storage, where "
                             "the daemon (inotify) misses edits made by other hosts or the "
                             "VM's host, and `git status` would not show them")
    if bench.git_facts.fsmonitor_daemon is not True:
        return Trial.not_run(key.name, f"git {bench.git_facts.version} has no fsmonitor "
                             f"daemon here ({bench.git_facts.fsmonitor_detail}); `true` would "
                             "only add a query to every command")
    dirs, limit = directories(bench.names), daemon.max_user_watches()
    if limit is not None and dirs > limit * WATCH_SHARE:
        return Trial.not_run(key.name, f"the daemon needs one inotify watch per directory "
                             f"({dirs:,}) and fs.inotify.max_user_watches is {limit:,}",
                             directories=dirs, max_user_watches=limit)
    wt = bench.worktree
    was_running = daemon.running(wt)
    state = daemon.state_dir(bench.ws.layout.git_dir)
    state_existed = os.path.exists(state)
    # The submodules' daemons: status recurses into them with core.fsmonitor=true in its
    # environment, and each starts one.
    common = bench.ws.layout.common_dir
    running_before, states_before = daemon.below(common), daemon.submodule_state_dirs(common)
    if not was_running:
        refused = daemon.start(wt, gitbench.config_env({}))
        if refused:
            return Trial.not_run(key.name, f"git refuses the daemon here: {refused}")
    try:
        comparisons = []
        for workload, (_, untracked) in WORKLOADS.items():
            if workload != "status" and not bench.counts(workload):
                continue
            off, on = {KEY: "false"}, {KEY: "true"}
            s_off = gitbench.status(bench.repo, bench.ws.index_copy(f"fsm-off-{workload}"), untracked)
            s_on = gitbench.status(bench.repo, bench.ws.index_copy(f"fsm-on-{workload}"), untracked)
            comparisons.append(bench.ab(workload, off, on, lambda: s_off(off),
                                        lambda: s_on(on)))
    finally:
        if not was_running:
            daemon.stop(wt)
            if not state_existed:       # the daemon's cookie directory, made for this trial
                shutil.rmtree(state, ignore_errors=True)
        daemon.stop_started(running_before, common, states_before)
    return Trial(KEY, tuple(comparisons), asdict(TrialFacts(dirs, limit, was_running)))


def decide(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    fresh = _fresh_clones(cal.options.workload)
    if fresh:
        return advice.not_set(key, "not set: " + fresh)
    return advice.weighed(key, t, weights, "true", {w: text for w, (text, _) in WORKLOADS.items()},
                          _evidence(t.facts_as(TrialFacts)),
                          suffix="; one daemon per repository, started by its next git command")


def _evidence(f: TrialFacts) -> Dict[str, Any]:
    return {"directories": f.directories, "max_user_watches": f.max_user_watches}


def after_revert(key: Key, value: str) -> List[str]:
    """The daemons the reverted value started, in repositories that no longer ask for one
    (a daemon the user's own config still asks for stays)."""
    if value != "true":
        return []
    stopped = daemon.stop_unwanted()
    return [f"stopped the fsmonitor daemon of {d}" for d in stopped]


class Fsmonitor(registry.Tuner):
    """core.fsmonitor: git's own daemon against none, where git offers it here."""

    rank = TRIAL_RANK

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return decide(key, cal, weights)

    def after_revert(self, key: Key, value: str) -> List[str]:
        return after_revert(key, value)


TUNERS = {KEY: Fsmonitor()}
