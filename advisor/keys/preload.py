"""core.preloadIndex: lstat the index entries in threads before `git status` compares them.

The engine sweep gives the lstat curve (threads, split mode) on this storage;
Git has no key for the thread count (preload-index.c starts entries/500, at
most 20), so that is a finding. Real git decides the key itself: status
-uno with preload on (Git's default) against off.
"""
import time
from dataclasses import asdict, dataclass
from typing import List, Optional

from git_tune import engine
from git_tune.errors import EngineError
from git_tune.advisor.decide import advice
from git_tune.advisor.measure import coldcache, gitbench, search
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.sweep import engine_measure, run as run_sweep
from git_tune.advisor.measure.record import Calibration, Sweep, Trial
from git_tune.advisor.measure.search import Dim

KEY = "core.preloadIndex"
SWEEP_SHARE = 0.08
MAX_PRELOAD_PATHS = 200000
THREADS, SPLIT = "engine.preload.threads", "engine.preload.split"


def git_threads(entries: int) -> int:
    """How many threads preload-index.c starts: entries/500, at most 20, none below 2."""
    t = min(entries // 500, 20)
    return t if t >= 2 else 1


@dataclass(frozen=True)
class Facts:
    entries: int
    git_threads: int
    git_default: Optional[float]     # seconds, the engine at Git's own thread count
    single_thread: Optional[float]   # None: the sweep's share of the budget had run out


def sweep(bench: Bench) -> Optional[Sweep]:
    """Engine lstat of every tracked file: threads and split mode (findings, no Git key).

    Behind a network file system's attribute cache (NFS acregmin, FUSE
    attr_timeout) a pass is hot or cold depending on how long ago the last one
    ran, which made the measured surface timing noise (bench/search_strategies.py
    on latfs). There each measured pass follows an unmeasured one, so all are
    hot, unless --cold makes them all cold."""
    if not bench.names:
        return None
    opts, names = bench.options, bench.names
    listing = names[:MAX_PRELOAD_PATHS]
    network = bench.storage_class == "network"
    dims = [Dim(THREADS, 1, 20, default=git_threads(len(names))),
            Dim(SPLIT, categories=(engine.SPLIT_SLICES, engine.SPLIT_STREAMS),
                default=engine.SPLIT_SLICES)]
    cold_note = None

    def lstat_once(point):
        return engine.preload(listing, base=bench.worktree, threads=point[THREADS],
                              split=point[SPLIT], io_streams=1, batch=500).wall

    def lstat_all(point):
        nonlocal cold_note
        if opts.cold:
            cold_note = coldcache.make_cold([])
        elif network:
            lstat_once(point)
        return lstat_once(point)

    share = opts.budget * SWEEP_SHARE
    end = time.monotonic() + share
    r = run_sweep(search.make(opts.strategy, dims, opts.seed), engine_measure(lstat_all), share,
                  max_evals=60)
    if cold_note:
        bench.notes.append(f"preload sweep cold: {cold_note}")
    elif network:
        bench.notes.append("preload sweep hot: on network storage each measured pass followed "
                           "an unmeasured one (attribute cache); --cold measures cold")
    groups = r.by_point()
    at = {}
    for label, threads in (("git_default", git_threads(len(names))), ("single_thread", 1)):
        # Reference points the search did not measure: once each, in the share's time only
        # (one pass of a large tree on NFS can take longer than the whole share).
        key = tuple(sorted({THREADS: threads, SPLIT: engine.SPLIT_SLICES}.items()))
        if key not in groups and time.monotonic() < end:
            try:
                groups[key] = [lstat_all(dict(key))]
            except EngineError as e:    # threads a pid limit refuses: the point stays unmeasured
                bench.notes.append(f"preload sweep: {threads} threads failed: {e.message}")
        at[label] = sorted(groups[key])[len(groups[key]) // 2] if key in groups else None
    facts = Facts(len(listing), git_threads(len(names)), at["git_default"], at["single_thread"])
    return Sweep.of(r, dims, asdict(facts))


def trial(key, bench: Bench) -> Optional[Trial]:
    """status -uno, preload on against off; from a cold cache where the profile starts cold
    (preload's threads overlap the lstat misses: 1.33x on a cold disk, nothing hot)."""
    index = bench.ws.index_copy("plain")
    st = gitbench.status(bench.worktree, index, untracked=False)
    on, off = {KEY: "true"}, {KEY: "false"}
    how = []   # what making the cache cold did (root drops it; otherwise file data only)

    def run(settings):
        if bench.cold:
            how.append(coldcache.make_cold([index]))
        return st(settings)
    c = bench.ab("status", on, off, lambda: run(on), lambda: run(off))
    if not how:
        return Trial(KEY, (c,))
    bench.notes.append(f"{KEY} timed cold: {how[-1]}")
    return Trial(KEY, (c,), {"cold": how[-1]})


def decide(key, cal: Calibration, weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    s = cal.sweeps.get("preload")
    ev = {k: None for k in ("best", "best_value", "git_default", "single_thread", "git_threads")}
    if s:
        ev.update(best=s.best, best_value=s.best_value, git_default=s.facts["git_default"],
                  single_thread=s.facts["single_thread"], git_threads=s.facts["git_threads"])
    return advice.weighed(key, t, weights, "false",
                          {"status": "git status -uno with preload off"}, ev)


def findings(cal: Calibration) -> List[str]:
    s = cal.sweeps.get("preload")
    if not s:
        return []
    f = Facts(**s.facts)

    def ms(t):
        return "not measured" if t is None else f"{t * 1e3:.1f} ms"
    return [f"lstat of {f.entries} files: fastest with {s.best[THREADS]} threads "
            f"({s.best[SPLIT]}, {s.best_value * 1e3:.1f} ms); Git starts {f.git_threads} "
            f"({ms(f.git_default)}), one thread takes {ms(f.single_thread)}. "
            "Git has no key for the thread count."]


def verify_workloads(key):
    return ("status",)
