"""pack.threads: the threads `git index-pack` resolves deltas with, the CPU a clone or a
fetch spends once the pack has arrived.

Git's own choice (unset, or 0) follows online_cpus(), which ignores a CPU quota; since
2.29 index-pack caps it (fewer than 4 CPUs: all; then 3, half, at most 20). Real git
decides: index-pack of the repository's largest pack (or, with none, the pack a clone
of it would receive, made once in the scratch directory) with each count from 1 to the
cores, then Git's choice against the fastest. 0 is never written.
"""
import glob
import os
from dataclasses import asdict, dataclass
from typing import Dict, Optional

from git_tune import git
from git_tune.errors import GitError
from git_tune.advisor.decide import advice
from git_tune.advisor.measure import budget as plan, gitbench
from git_tune.advisor.measure.ab import OutOfBudget
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.record import Calibration, Trial
from git_tune.advisor.measure.sweep import MeasurementFailed
from git_tune.probes import repo as repo_probe

KEY = "pack.threads"
MAX_COUNT = 8      # index-pack's delta resolution stops scaling well before this on a client
# Last: packing a repository without packs reads every object, and a client spends
# little of its day in index-pack.
TRIAL_RANK = 2


@dataclass(frozen=True)
class TrialFacts:
    """What the trial recorded: the pack's size and each thread count's quick pass."""
    pack_bytes: int = 0
    seconds_by_count: Optional[Dict[str, float]] = None


def _pack_for(bench: Bench) -> str:
    """The largest pack the repository has, or the whole history packed into scratch;
    MeasurementFailed where git packs nothing."""
    packs = repo_probe.pack_files(bench.ws.layout)
    if packs:
        return max(packs, key=os.path.getsize)
    # Every object reachable from any ref: what a clone of the repository receives.
    base = os.path.join(bench.ws.root, "clone")
    limit = bench.budget.left() * plan.PACK
    if limit < 1:
        raise OutOfBudget(None)
    try:
        proc = git.run(["pack-objects", "--all", "--revs", "-q", base], cwd=bench.worktree,
                       input="", env=gitbench.config_env({}), timeout=limit, repo=bench.repo)
    except GitError:       # did not finish in its share: the budget, not git, ended it
        raise OutOfBudget(None) from None
    made = glob.glob(base + "-*.pack")
    if proc.returncode or not made:
        raise MeasurementFailed("git pack-objects: "
                                + (git.first_lines(proc.stderr) or "nothing written"))
    return made[0]


def index_pack(pack: str, root: str):
    out = os.path.join(root, "index-pack.idx")

    def run(settings, trace_file=None) -> float:
        for leftover in (out, out[:-4] + ".rev"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        return gitbench.timed_git(["index-pack", "-o", out, pack], root, settings,
                                  trace_file=trace_file)
    return run


def trial(key, bench: Bench) -> Optional[Trial]:
    if repo_probe.partial_clone(bench.repo):
        # Its packs lack the blobs a full clone indexes, and what it fetches later comes
        # a few objects at a time: no pack here stands for the work the key changes.
        return Trial.not_run(KEY, "a partial clone: its packs hold no blobs, so no pack "
                             "here stands for what clone and fetch index")
    counts = range(1, min(bench.cores, MAX_COUNT) + 1)
    if len(counts) < 2:
        return Trial.not_run(KEY, "one CPU to use, so there is no thread count to choose")
    try:
        pack = _pack_for(bench)
    except MeasurementFailed as e:
        return Trial.not_run(KEY, f"no pack to time ({e})")
    run = index_pack(pack, bench.ws.root)
    once = run({})                                        # warms the pack into the cache
    # One quick pass over the counts picks the candidate (two runs each where a quarter
    # of the budget left holds them); the A/B against Git's own choice is what decides.
    passes = 2 if 2 * len(counts) * once < bench.budget.left() / 4 else 1
    times = {n: min(run({KEY: str(n)}) for _ in range(passes)) for n in counts}
    best = str(min(times, key=times.get))
    facts = asdict(TrialFacts(os.path.getsize(pack),
                              {str(n): round(t, 4) for n, t in times.items()}))
    if bench.online_cpus and int(best) == git_threads(bench.online_cpus):
        # The same threads as Git's own choice: the A/B would time one setting twice, and
        # its one chance in forty of "faster" would write a value that changes nothing.
        return Trial.not_run(KEY, f"the fastest count, {best}, is what index-pack starts "
                             f"itself on {bench.online_cpus} CPUs", **facts)
    cand = {KEY: best}
    c = bench.ab("clone", {}, cand, lambda: run({}), lambda: run(cand))
    return Trial(KEY, (c,), facts)


def git_threads(online_cpus: int) -> int:
    """The threads index-pack starts with pack.threads unset (builtin/index-pack.c since
    2.29): every CPU below 4, then 3, then half, at most 20."""
    if online_cpus < 4:
        return online_cpus
    if online_cpus < 6:
        return 3
    return min(online_cpus // 2, 20)


def decide(key, cal: Calibration, weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    threads = t.main.candidate[KEY]
    f = t.facts_as(TrialFacts)
    mib = f.pack_bytes / 2 ** 20
    return advice.weighed(key, t, weights, threads,
                          {"clone": f"indexing a {mib:.1f} MiB pack (git index-pack, what clone "
                                    "and fetch spend their CPU on)"},
                          {"seconds_by_count": f.seconds_by_count})
