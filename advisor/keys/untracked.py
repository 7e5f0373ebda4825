"""core.untrackedCache: remember untracked directories by their mtime.

It only works where directory mtimes change with their entries (git's own
`update-index --test-untracked-cache`, run by the probe). Real git decides:
`git status` with untracked files on an index copy with the cache against one
without.
"""
from typing import Optional

from git_tune.advisor.decide import advice
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.gitbench import IndexShape
from git_tune.advisor.measure.record import Calibration, Trial

KEY = "core.untrackedCache"


def index_shape(key, value: str) -> IndexShape:
    if value == "true":
        return IndexShape(args=("--untracked-cache", "--force-untracked-cache"))
    if value == "false":
        return IndexShape(args=("--no-untracked-cache",))
    return IndexShape()


def trial(key, bench: Bench) -> Optional[Trial]:
    works = bench.git_facts.untracked_cache_works
    if works is False:
        bench.notes.append("the untracked cache fails git's mtime test on this file system")
        return None
    ws, wt = bench.ws, bench.worktree
    off, on = {KEY: "false"}, {KEY: "true"}
    s_off = gitbench.status(wt, ws.index_copy("uc-off", index_shape(key, "false")), True)
    s_on = gitbench.status(wt, ws.index_copy("uc-on", index_shape(key, "true")), True)
    c = bench.ab("untracked", off, on, lambda: s_off(off), lambda: s_on(on))
    return Trial(KEY, (c,), {"fs_test": works})


def decide(key, cal: Calibration, weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    return advice.weighed(key, t, weights, "true",
                          {"untracked": "git status with untracked files"},
                          {"fs_test": t.facts.get("fs_test")},
                          suffix="; bypassed by `git status -uall`")


def verify_workloads(key):
    return ("untracked",)
