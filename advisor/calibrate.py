"""`git-tune calibrate`: short engine sweeps plus real-git A/B runs, within a budget.

Everything runs in a scratch directory on the repository's file system
(never inside the working tree), removed afterwards even on Ctrl-C. The
engine sweeps give the curves (how time falls with workers or threads on
this storage); real git, timed interleaved against Git's defaults, decides
whether a setting is really faster.
"""
import hashlib
import statistics
import os
import platform
import socket
import stat
import time
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Tuple

from git_tune import __version__, engine
from git_tune.advisor import coldcache, gitbench, search, sweep
from git_tune.advisor.recommend import THRESHOLD_MARGIN
from git_tune.advisor.search import Dim
from git_tune.errors import EngineError, UsageError
from git_tune.models import costmodel, stats
from git_tune.probes import gitinfo, memo, repo as repo_probe
from git_tune.probes.report import probe
from git_tune.probes.scratch import scratch_dir

SCHEMA_VERSION = 1
RESULT_MAX_AGE = 7 * 86400
# Share of the budget each phase may use; validation gets what is left.
SHARES = {"checkout": 0.15, "preload": 0.08, "index": 0.05}
SAMPLE_FILES = 2000        # files the engine writes per checkout measurement, at most
CHECKOUT_FILES = 400       # files real git restores per timed checkout
MAX_PRELOAD_PATHS = 200000


@dataclass(frozen=True)
class Options:
    budget: float = 20.0
    strategy: str = search.DEFAULT_STRATEGY
    seed: int = 0
    cold: bool = False
    runs: int = stats.MIN_RUNS


Progress = Callable[[str, float], None]   # (phase, fraction of budget used)


def host_fingerprint(report) -> str:
    """What makes measurements comparable across runs: host, CPUs, memory, storage."""
    s = report.primary_storage() or {}
    parts = [socket.gethostname(), platform.machine(), str(report.host["effective_cores"]),
             str(report.host["memory_total"] >> 30), s.get("fstype", ""), s.get("source") or "",
             s.get("storage_class", "")]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def git_threads(entries: int) -> int:
    """How many threads preload-index.c starts: entries/500, at most 20, none below 2."""
    t = min(entries // 500, 20)
    return t if t >= 2 else 1


class _Budget:
    def __init__(self, total: float, progress: Optional[Progress]):
        self.total = total
        self.start = time.monotonic()
        self.progress = progress

    def used(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return max(0.0, self.total - self.used())

    def tick(self, phase: str) -> None:
        if self.progress:
            self.progress(phase, min(1.0, self.used() / self.total))


def _sample(layout, names: List[str], n: int) -> Tuple[List[str], List[int]]:
    """n tracked files spread evenly over the tree, with their real sizes."""
    step = max(1, len(names) // n)
    paths, sizes = [], []
    for p in names[::step][:n]:
        try:
            st = os.lstat(os.path.join(layout.worktree, p))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            paths.append(p)
            sizes.append(st.st_size)
    return paths, sizes


def _sweep_result(r: sweep.SweepResult, dims: List[Dim]) -> dict:
    return {"strategy": r.strategy, "dims": [asdict(d) for d in dims],
            "evaluations": [asdict(e) for e in r.evaluations], "best": r.best,
            "best_value": r.best_value, "best_samples": r.best_samples,
            "seconds": round(r.seconds, 3), "stopped": r.stopped}


def _engine_measure(fn):
    def measure(point):
        try:
            return fn(point)
        except EngineError as e:
            raise sweep.MeasurementFailed(e.message) from None
    return measure


def checkout_batch(target: str, paths, sizes, budget: float) -> Tuple[list, list]:
    """A warm-up (allocator, journal, dentry caches) that also sizes the batch so
    about ten single-worker measurements fit the budget on slow storage too."""
    probe_n = min(len(paths), 200)
    t = engine.checkout(target, paths[:probe_n], sizes[:probe_n], workers=1, threshold=0).wall
    keep = max(100, min(len(paths), int(budget / 10 / max(t / probe_n, 1e-6))))
    return paths[:keep], sizes[:keep]


def sweep_checkout(scratch: str, paths, sizes, max_workers: int, opts: Options,
                   budget: float) -> dict:
    """Engine checkout of the sample with W workers: the curve behind checkout.workers."""
    target = os.path.join(scratch, "checkout")
    os.mkdir(target)
    dims = [Dim("checkout.workers", 1, max_workers, default=1)]

    def write(point):
        return engine.checkout(target, paths, sizes, workers=point["checkout.workers"],
                               threshold=0).wall

    paths, sizes = checkout_batch(target, paths, sizes, budget)
    r = sweep.run(search.make(opts.strategy, dims, opts.seed), _engine_measure(write), budget)
    samples = [(dict(k)["checkout.workers"], len(paths), statistics.median(v))
               for k, v in r.by_point().items()]
    # Smaller batches at 1 and the best worker count pin down serial cost and overhead.
    best = r.best["checkout.workers"]
    for frac in (0.125, 0.5):
        k = max(1, int(len(paths) * frac))
        for w in sorted({1, best}):
            t = engine.checkout(target, paths[:k], sizes[:k], workers=w, threshold=0).wall
            samples.append((w, k, t))
    out = _sweep_result(r, dims)
    out["files"], out["bytes"] = len(paths), sum(sizes)
    if len({s[0] for s in samples}) >= 2 and len(samples) >= 3:
        model = costmodel.fit(samples, max_parallelism=max_workers, seed=opts.seed)
        out["model"] = {k: v for k, v in asdict(model).items() if k != "replicas"}
        out["model_samples"] = samples
    return out


def sweep_preload(worktree: str, names: List[str], opts: Options, budget: float,
                  notes: List[str], network: bool = False) -> dict:
    """Engine lstat of every tracked file: threads and split mode (findings, no Git key).

    Behind a network file system's attribute cache (NFS acregmin, FUSE
    attr_timeout) a pass is hot or cold depending on how long ago the last one
    ran, which made the measured surface timing noise (bench/search_strategies.py
    on latfs). There each measured pass follows an unmeasured one, so all are
    hot, unless --cold makes them all cold."""
    listing = names[:MAX_PRELOAD_PATHS]
    dims = [Dim("engine.preload.threads", 1, 20, default=git_threads(len(names))),
            Dim("engine.preload.split", categories=(engine.SPLIT_SLICES, engine.SPLIT_STREAMS),
                default=engine.SPLIT_SLICES)]
    cold_note = None

    def lstat_once(point):
        return engine.preload(listing, base=worktree, threads=point["engine.preload.threads"],
                              split=point["engine.preload.split"], io_streams=1,
                              batch=500).wall

    def lstat_all(point):
        nonlocal cold_note
        if opts.cold:
            cold_note = coldcache.make_cold([])
        elif network:
            lstat_once(point)
        return lstat_once(point)

    r = sweep.run(search.make(opts.strategy, dims, opts.seed), _engine_measure(lstat_all), budget,
                  max_evals=60)
    if cold_note:
        notes.append(f"preload sweep cold: {cold_note}")
    elif network:
        notes.append("preload sweep hot: on network storage each measured pass followed an "
                     "unmeasured one (attribute cache); --cold measures cold")
    out = _sweep_result(r, dims)
    out["entries"] = len(listing)
    out["git_threads"] = git_threads(len(names))
    groups = r.by_point()
    git_key = tuple(sorted({"engine.preload.threads": out["git_threads"],
                            "engine.preload.split": engine.SPLIT_SLICES}.items()))
    one_key = tuple(sorted({"engine.preload.threads": 1,
                            "engine.preload.split": engine.SPLIT_SLICES}.items()))
    for label, key in (("git_default", git_key), ("single_thread", one_key)):
        if key not in groups:
            point = dict(key)
            groups[key] = [lstat_all(point) for _ in range(3)]
        out[label] = sorted(groups[key])[len(groups[key]) // 2]
    return out


def sweep_index(ws: gitbench.Workspace, cores: int, entries: int, opts: Options,
                budget: float) -> dict:
    """Engine load of the real index rewritten with an offset table: threads and allocator."""
    blocks = max(4, 2 * cores)
    ieot = ws.index_copy("ieot", threads=blocks)
    dims = [Dim("index.threads", 1, blocks, default=1),
            Dim("engine.index.alloc", categories=(engine.ALLOC_POOL, engine.ALLOC_MALLOC),
                default=engine.ALLOC_POOL)]

    def load(point):
        r = engine.index_read(ieot, threads=point["index.threads"],
                              alloc=point["engine.index.alloc"])
        return r.parse + r.free

    r = sweep.run(search.make(opts.strategy, dims, opts.seed), _engine_measure(load), budget,
                  max_evals=40)
    out = _sweep_result(r, dims)
    info = engine.index_read(ieot)
    out["ieot_blocks"], out["entries"] = info.ieot_blocks, entries
    v2, v4 = ws.index_copy("v2", version=2), ws.index_copy("v4", version=4)
    out["bytes_v2"], out["bytes_v4"] = os.path.getsize(v2), os.path.getsize(v4)
    out["parse_v2"] = min(engine.index_read(v2).parse for _ in range(3))
    out["parse_v4"] = min(engine.index_read(v4).parse for _ in range(3))
    return out


def _ab(name: str, workload: str, a_settings, b_settings, run_a, run_b, runs: int,
        seed: int, budget: Optional[_Budget] = None, extensions: int = 2) -> dict:
    """Interleaved A/B. When the interval straddles the noise band but the point
    estimate is a clear change, and the budget has time left, more runs are
    added (at most `extensions` times): a noisy disk needs 10-15 runs a side
    to tell a 20% gain (bench/tuner_quality.py), a quiet one decides after 5."""
    ta, tb = gitbench.interleaved(run_a, run_b, runs)
    est = stats.compare(ta, tb, seed=seed)
    for _ in range(extensions):
        if est.verdict != stats.NO_CHANGE or abs(est.ratio - 1) <= stats.MIN_EFFECT \
                or budget is None or budget.left() <= 0:
            break
        more_a, more_b = gitbench.interleaved(run_a, run_b, runs, warmup=0)
        ta, tb = ta + more_a, tb + more_b
        est = stats.compare(ta, tb, seed=seed)
    return {"key": name, "workload": workload, "default": a_settings, "candidate": b_settings,
            "times_default": ta, "times_candidate": tb, "estimate": asdict(est)}


def threshold_points(clone: str, names: List[str], scratch: str, cand, runs: int, measured,
                     steps: int = 2) -> List[dict]:
    """Real git, sequential vs parallel, at batch sizes bisected (geometrically) between
    the largest batch where parallel lost and the smallest where it won by
    THRESHOLD_MARGIN. Sequential time is not linear in files on a disk (write-back
    starts past a few hundred), so the threshold is measured, not interpolated."""
    points = [(n, list(a), list(b)) for n, a, b in measured]

    def wins(p):
        return costmodel.parallel_wins(statistics.median(p[1]), statistics.median(p[2]),
                                       THRESHOLD_MARGIN)

    for _ in range(steps):
        points.sort(key=lambda p: p[0])
        lost = [p for p in points if not wins(p)]
        won = [p for p in points if wins(p) and (not lost or p[0] > lost[-1][0])]
        if not lost or not won:
            break
        lo, hi = lost[-1][0], won[0][0]
        mid = int(round((lo * hi) ** 0.5))
        if not lo < mid < hi:
            break
        work = gitbench.CheckoutWorkload(clone, names[:: max(1, len(names) // mid)][:mid], scratch)
        ta, tb = gitbench.interleaved(lambda: work.run({}), lambda: work.run(cand), runs)
        points.append((len(work.paths), ta, tb))
    return [{"files": n, "times_sequential": a, "times_parallel": b}
            for n, a, b in sorted(points, key=lambda p: p[0])]


def validate(ws: gitbench.Workspace, layout, report, sweeps: dict, names: List[str],
             opts: Options, budget: _Budget, notes: List[str]) -> Dict[str, dict]:
    """Real git, interleaved, Git's defaults against each candidate the sweeps suggest.

    Every applicable key is validated with at least MIN_RUNS runs a side even
    when the budget is spent: an unvalidated key could only stay at default.
    """
    out: Dict[str, dict] = {}
    runs = max(stats.MIN_RUNS, opts.runs)
    understood = report.git["keys_understood"]
    wt = layout.worktree
    plain = ws.index_copy("plain")

    if "core.preloadIndex" in understood:
        st = gitbench.status(wt, plain, untracked=False)
        out["core.preloadIndex"] = _ab(
            "core.preloadIndex", "status", {"core.preloadIndex": "true"},
            {"core.preloadIndex": "false"},
            lambda: st({"core.preloadIndex": "true"}), lambda: st({"core.preloadIndex": "false"}),
            runs, opts.seed, budget)
        budget.tick("validate")

    co = sweeps.get("checkout")
    if co and len(names) < 100:
        notes.append("fewer than 100 tracked files: Git never checks out in parallel below "
                     "its default threshold, so checkout.workers was not timed")
    elif co and "checkout.workers" in understood:
        clone = ws.clone()
        k = min(len(names), CHECKOUT_FILES)
        step = max(1, len(names) // k)
        work = gitbench.CheckoutWorkload(clone, names[::step][:k], ws.root)
        w = max(2, co["best"]["checkout.workers"])
        cand = {"checkout.workers": str(w), "checkout.thresholdForParallelism": "0"}
        out["checkout.workers"] = _ab(
            "checkout.workers", "checkout", {}, cand, lambda: work.run({}),
            lambda: work.run(cand), runs, opts.seed, budget)
        out["checkout.workers"]["files"] = len(work.paths)
        # Per-worker cost of real git (processes): a tiny batch, parallel vs sequential.
        tiny = gitbench.CheckoutWorkload(clone, names[:: max(1, len(names) // 20)][:20], ws.root)
        ta, tb = gitbench.interleaved(lambda: tiny.run({}), lambda: tiny.run(cand), runs)
        out["checkout.worker_cost"] = {
            "workers": w, "files": len(tiny.paths), "times_sequential": ta, "times_parallel": tb,
            "per_worker": max(0.0, (statistics.median(tb) - statistics.median(ta)) / w)}
        v = out["checkout.workers"]
        out["checkout.threshold_points"] = threshold_points(
            clone, names, ws.root, cand, runs,
            [(len(tiny.paths), ta, tb), (len(work.paths), v["times_default"], v["times_candidate"])])
        budget.tick("validate")

    ix = sweeps.get("index")
    if ix:
        if "index.threads" in understood and ix["ieot_blocks"] > 1:
            threads = ix["best"]["index.threads"]
            copy = ws.index_copy("threads", threads=max(2, threads))
            load = gitbench.index_load(wt, copy)
            cand = {"index.threads": str(max(2, threads))}
            out["index.threads"] = _ab("index.threads", "index", {}, cand, lambda: load({}),
                                       lambda: load(cand), runs, opts.seed, budget)
        if "index.version" in understood:
            v2, v4 = ws.index_copy("v2", version=2), ws.index_copy("v4", version=4)
            l2, l4 = gitbench.index_load(wt, v2), gitbench.index_load(wt, v4)
            out["index.version"] = _ab("index.version", "index", {"index.version": "2"},
                                       {"index.version": "4"}, lambda: l2({}), lambda: l4({}),
                                       runs, opts.seed, budget)
        budget.tick("validate")

    if "core.untrackedCache" in understood:
        works = report.git["untracked_cache_works"]
        if works is False:
            notes.append("the untracked cache fails git's mtime test on this file system")
        else:
            off, on = ws.index_copy("uc-off", untracked_cache=False), ws.index_copy("uc-on", untracked_cache=True)
            s_off, s_on = gitbench.status(wt, off, True), gitbench.status(wt, on, True)
            out["core.untrackedCache"] = _ab(
                "core.untrackedCache", "untracked", {"core.untrackedCache": "false"},
                {"core.untrackedCache": "true"}, lambda: s_off({"core.untrackedCache": "false"}),
                lambda: s_on({"core.untrackedCache": "true"}), runs, opts.seed, budget)
            out["core.untrackedCache"]["fs_test"] = works
        budget.tick("validate")
    return out


def cache_key(report, fingerprint: str) -> str:
    rep = report.repository or {}
    layout = rep.get("layout", {})
    return f"{fingerprint}|{report.git['version']}|{layout.get('git_dir')}|{rep.get('tracked_files')}"


def calibrate(repo: Optional[str] = None, opts: Options = Options(),
              progress: Optional[Progress] = None, store: bool = True) -> dict:
    """Measure this host and repository; returns the raw calibration record (stored
    in the user's cache unless store=False)."""
    if opts.strategy not in search.STRATEGIES:
        raise UsageError(f"unknown strategy '{opts.strategy}'; choose from "
                         + ", ".join(search.STRATEGIES))
    if opts.budget <= 0:
        raise UsageError("--budget must be positive")
    budget = _Budget(opts.budget, progress)
    gitinfo.require_git()
    repo_probe.locate(os.path.abspath(repo or os.getcwd()))  # git's own refusal, with its words
    report = probe(repo)
    if report.repository is None:
        raise UsageError(f"'{report.path}' is not inside a git repository")
    layout = repo_probe.RepoLayout(**report.repository["layout"])
    if not layout.worktree:
        raise UsageError("calibration needs a working tree; this repository is bare")
    if report.repository["index_error"] or not report.repository["index"]:
        raise UsageError("the repository's index cannot be read: "
                         f"{report.repository['index_error'] or 'no index'}; "
                         "run `git status` to recreate it before calibrating")
    notes: List[str] = []
    names = [n for n in repo_probe.tracked_sample(layout, n=10 ** 9)]
    cores = report.host["effective_cores"]
    storage = report.primary_storage()
    # Threads writing to a network server can usefully exceed the cores.
    max_workers = 32 if storage["storage_class"] == "network" else max(4, min(32, 4 * cores))
    record = {"schema": SCHEMA_VERSION, "git_tune_version": __version__, "created": time.time(),
              "fingerprint": host_fingerprint(report), "options": asdict(opts),
              "host": {"effective_cores": cores, "logical_cpus": report.host["logical_cpus"]},
              "storage": {k: storage[k] for k in ("fstype", "storage_class", "evidence", "notes")},
              "git_version": report.git["version"],
              "repository": {"path": layout.worktree, "git_dir": layout.git_dir,
                             "entries": report.repository["tracked_files"],
                             "index_version": report.repository["index"]["version"]},
              "cache_state": report.cache["state"] if report.cache else None,
              "sweeps": {}, "validation": {}, "notes": notes}
    candidates = [layout.git_dir, os.path.dirname(layout.worktree)]
    with scratch_dir(candidates, same_fs_as=layout.worktree) as scratch:
        if scratch is None:
            raise UsageError("no writable directory on the repository's file system outside "
                             "the working tree (read-only?): nothing can be calibrated")
        if names:
            paths, sizes = _sample(layout, names, SAMPLE_FILES)
            record["sweeps"]["checkout"] = sweep_checkout(
                scratch, paths, sizes, max_workers, opts, opts.budget * SHARES["checkout"])
            budget.tick("checkout")
            record["sweeps"]["preload"] = sweep_preload(
                layout.worktree, names, opts, opts.budget * SHARES["preload"], notes,
                network=storage["storage_class"] == "network")
            budget.tick("preload")
        ws = gitbench.Workspace(layout, scratch)
        record["sweeps"]["index"] = sweep_index(ws, cores, len(names), opts,
                                                opts.budget * SHARES["index"])
        budget.tick("index")
        record["validation"] = validate(ws, layout, report, record["sweeps"], names, opts,
                                        budget, notes)
    record["seconds"] = round(budget.used(), 3)
    if budget.used() > opts.budget * 1.5:
        notes.append(f"took {budget.used():.1f} s for a {opts.budget:g} s budget: "
                     "real git runs on this repository are slow; they were kept at the minimum")
    record["stored_at"] = (memo.save("calibration", cache_key(report, record["fingerprint"]), record)
                           if store else None)
    budget.tick("done")
    return record


def load_fresh(repo: Optional[str] = None) -> Optional[dict]:
    """A stored calibration for this host, repository and git, if fresh."""
    report = probe(repo)
    if report.repository is None:
        return None
    return memo.load("calibration", cache_key(report, host_fingerprint(report)), RESULT_MAX_AGE)
