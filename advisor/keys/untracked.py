"""core.untrackedCache: remember untracked directories by their mtime.

It only works where directory mtimes change with their entries (git's own
`update-index --test-untracked-cache`, run by the probe). Real git decides:
`git status` with untracked files on an index copy with the cache against one
without. The cache is an index extension, so every command pays for it, reading
the index and writing it, while only a status with untracked files gains: where the
workload profile weighs them, `git status -uno`, `git ls-files` and an index write
are timed on the same two copies, and the profile weighs the lot (on the hot disk,
3,000 files, status -uno and ls-files were 5-6% slower with the cache in 10
interleaved rounds of bench/tuner_quality.py's mix).
"""
from dataclasses import asdict, dataclass
from typing import Optional

from git_tune.advisor.decide import advice
from git_tune.advisor.keys import preload
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.ab import OutOfBudget, least_seconds
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.gitbench import IndexShape
from git_tune.advisor.measure.record import Calibration, Comparison, Trial
from git_tune.advisor.measure.sweep import MeasurementFailed
from git_tune.models import stats

KEY = "core.untrackedCache"


@dataclass(frozen=True)
class TrialFacts:
    fs_test: Optional[bool] = None    # git's mtime test on this file system (None: not run)


def index_shape(key, value: str) -> IndexShape:
    if value == "true":
        return IndexShape(args=("--untracked-cache", "--force-untracked-cache"))
    if value == "false":
        return IndexShape(args=("--no-untracked-cache",))
    return IndexShape()


def price(key, bench: Bench) -> Optional[float]:
    """A status with untracked files lstats every entry before it reads a directory.
    (The probe's untracked walk is no price: it may have run colder than the trial's
    runs will; _pilot times one where it says the trial may not fit.)"""
    return preload.status_price(bench)


def trial(key, bench: Bench) -> Optional[Trial]:
    works = bench.git_facts.untracked_cache_works
    if works is False:
        return Trial.not_run(KEY, "the untracked cache fails git's mtime test on this file "
                             "system (git update-index --test-untracked-cache)")
    off = bench.ws.index_copy("uc-off", index_shape(key, "false"))
    warm = _pilot(bench, off)
    copies = (off, bench.ws.index_copy("uc-on", index_shape(key, "true")))
    gain = _ab(bench, "untracked", copies, warm)
    comparisons = [gain]
    # Only a gain needs its costs weighed: without one Git's default stands anyway.
    if gain.estimate is not None and gain.estimate.verdict == stats.FASTER:
        comparisons += [_ab(bench, w, copies) for w in COSTS if bench.counts(w)]
    return Trial(KEY, tuple(comparisons), asdict(TrialFacts(works)))


# Where the extension costs: workloads timed on an index copy (gitbench.ON_INDEX).
COSTS = ("status", "index", "write")
WHAT = {"untracked": "git status with untracked files", "status": "git status -uno",
        "index": "reading the index (git ls-files)",
        "write": "writing the index (git update-index --force-write-index)"}


def _ab(bench: Bench, workload: str, copies, warm: Optional[float] = None) -> Comparison:
    """`workload` on the index copy without the cache against the one with it (`warm`:
    a run without it just timed, the warm-up's)."""
    off, on = {KEY: "false"}, {KEY: "true"}
    make = gitbench.ON_INDEX[workload]
    run_off, run_on = (make(bench.repo, index) for index in copies)
    return bench.ab(workload, off, on, lambda: run_off(off), lambda: run_on(on),
                    warm_default=warm)


def _pilot(bench: Bench, index: str) -> Optional[float]:
    """Where the probe's untracked walk prices the trial above the budget left, one status
    with untracked files without the cache, stopped where a run is too slow for the
    trial to fit (ab.least_seconds): its seconds, the A/B's warm-up, or OutOfBudget.
    The probe's walk may have run colder than the trial's will, so it does not decide
    alone; before this, on the NFS-like bed at 100,000 files the trial made both index
    copies and ran its warm-up (1.4 s of a 20 s budget), then stopped, and the index
    keys were 0.1 s short. None where the probe's walk says the trial fits."""
    walk, left = bench.untracked_walk, bench.budget.left()
    if walk is None or least_seconds(walk) <= left:
        return None
    most = left / least_seconds(1.0)
    run = gitbench.status(bench.repo, index, untracked=True)
    try:
        with gitbench.deadline(most):
            return run({KEY: "false"})
    except gitbench.DeadlineReached:
        # Slower than `most`, and as the probe's walk says, at least.
        raise OutOfBudget(least_seconds(max(most, walk)) - left) from None
    except MeasurementFailed:
        return None     # the A/B sees and reports git's failure


def open_question(key, cal: Calibration, weights):
    """Left undecided by the budget (on slow storage and large repositories a status with
    untracked files does not fit it 5+5 times): the cache against Git's default, on the
    user's own commands. Only the user starts that (the key adds an index extension:
    experiment.start refuses it without their yes)."""
    if KEY in cal.unfinished and KEY not in cal.trials:
        return "true", "the budget left it undecided"
    return None


def decide(key, cal: Calibration, weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    return advice.weighed(key, t, weights, "true", WHAT, asdict(t.facts_as(TrialFacts)),
                          suffix="; bypassed by `git status -uall`")

