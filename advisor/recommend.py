"""From a calibration record to recommended Git settings, each with its evidence.

A key gets a value only when real git, timed interleaved against Git's
default, was faster beyond noise; everything else stays at Git's default
with the reason. Keys the installed git does not read are never offered.
"""
import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

from git_tune.models import catalogue, costmodel, stats, workloads

SET, NOT_SET, NOT_OFFERED = "set", "not set", "not offered"
THRESHOLD_MARGIN = 0.05      # parallel must beat sequential by 5% at the threshold
THRESHOLD_CHANGE = 0.3       # and the threshold must differ from Git's by 30% to be worth a key
# The threshold's gain is on small batches, not the 400-file checkout the workers
# gain was timed on: a workload of its own, so the two are not multiplied together.
THRESHOLD_WORKLOAD = "checkout-small-batches"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Gain:
    workload: str
    speedup: float          # old time / new time: above 1 is faster
    low: float
    high: float
    runs: int

    @classmethod
    def from_estimate(cls, workload: str, est: dict) -> "Gain":
        return cls(workload, 1 / est["ratio"], 1 / est["high"], 1 / est["low"],
                   min(est["runs_old"], est["runs_new"]))


@dataclass(frozen=True)
class KeyAdvice:
    key: str
    status: str              # set | not set | not offered
    value: Optional[str]
    git_default: str
    gain: Optional[Gain]
    reason: str
    evidence: dict = field(default_factory=dict)
    needs_index_rewrite: bool = False


@dataclass(frozen=True)
class Recommendation:
    schema: int
    workload: str
    git_version: str
    storage_class: str
    fingerprint: str
    keys: Tuple[KeyAdvice, ...]
    findings: Tuple[str, ...]
    expected: Dict[str, float]       # workload -> speedup of the values set together
    weighted_speedup: float
    calibration_created: float

    def settings(self) -> Dict[str, str]:
        return {k.key: k.value for k in self.keys if k.status == SET}

    def to_dict(self) -> dict:
        return asdict(self)


def _gain_text(g: Gain) -> str:
    return f"{g.speedup:.2f}x ({g.low:.2f}-{g.high:.2f}, {g.runs}+{g.runs} runs)"


def _validated(key: str, v: dict, value: str, what: str) -> Tuple[str, Optional[str], Gain, str]:
    est = v["estimate"]
    gain = Gain.from_estimate(v["workload"], est)
    if est["verdict"] == stats.FASTER:
        return SET, value, gain, f"{what}: {_gain_text(gain)} faster with real git"
    if est["verdict"] == stats.SLOWER:
        return NOT_SET, None, gain, f"{what} was slower with {value}: {_gain_text(gain)}; Git's default kept"
    return NOT_SET, None, gain, f"not set: {what} {_gain_text(gain)}, within noise"


def _threshold(cal: dict, workers: int) -> Tuple[Optional[int], str, dict]:
    """From real git at two batch sizes when both were timed, else from the engine model.

    The engine's threads cost less than Git's worker processes, so its break-even
    could sit above a batch real git already ran faster in parallel (a threshold
    of 455 on this disk after 400 files were measured 1.3-1.7x faster)."""
    measured = cal["validation"].get("checkout.threshold_points")
    if measured:
        pts = [(p["files"], statistics.median(p["times_sequential"]),
                statistics.median(p["times_parallel"])) for p in measured]
        # The crossing lies between the largest batch parallel lost and the next one
        # (crossing() answers the first size when parallel never lost, None when it
        # lost at the largest).
        lost = [i for i, (n, s, p) in enumerate(pts)
                if not costmodel.parallel_wins(s, p, THRESHOLD_MARGIN)]
        if len(pts) == 1:
            even = None if lost else pts[0][0]
        else:
            i = min(lost[-1] if lost else 0, len(pts) - 2)
            even = costmodel.crossing(pts[i], pts[i + 1], THRESHOLD_MARGIN)
        ev = {"real_git": [{"files": n, "sequential": s, "parallel": p} for n, s, p in pts],
              "crossing_files": even}
        curve = ", ".join(f"{n} files {s / p:.2f}x" for n, s, p in pts)
        if even is not None:
            return even, (f"real git with {workers} workers: {curve}; parallel wins by "
                          f"{THRESHOLD_MARGIN:.0%} from about {even} files"), ev
    co = cal["sweeps"].get("checkout", {})
    m = co.get("model")
    if not m:
        return None, "no checkout model (too few measurements)", {}
    per_worker = m["per_worker"]
    wc = cal["validation"].get("checkout.worker_cost")
    if wc:
        per_worker = max(per_worker, wc["per_worker"])  # Git's workers are processes
    model = costmodel.ParallelCost(m["serial"], m["per_item"], per_worker, m["parallelism"],
                                   m["rmse"], m["points"])
    even = model.break_even(workers, THRESHOLD_MARGIN)
    ev = {"model": dict(m, per_worker=per_worker), "break_even_files": even}
    if even is None:
        return None, f"{workers} workers never beat one by {THRESHOLD_MARGIN:.0%} in the model", ev
    return even, f"{workers} workers beat one from about {even} files on (cost model: " \
                 f"{m['per_item'] * 1e6:.0f} µs a file, {per_worker * 1e3:.1f} ms a worker, " \
                 f"parallelism {m['parallelism']})", ev


def _threshold_gain(points: List[dict], threshold: int, default: int) -> Optional[Gain]:
    """Real git at the batch size the new threshold changes most plainly: the smallest
    timed batch below Git's default that now goes parallel, or the largest at or above
    it that now stays sequential. None when no timed batch lies in between (the value
    would then rest on interpolation alone)."""
    if threshold < default:
        inside = [p for p in points if threshold <= p["files"] < default]
        point, old, new = (inside[0] if inside else None), "times_sequential", "times_parallel"
    else:
        inside = [p for p in points if default <= p["files"] < threshold]
        point, old, new = (inside[-1] if inside else None), "times_parallel", "times_sequential"
    if point is None:
        return None
    est = stats.compare(point[old], point[new])
    return Gain.from_estimate(THRESHOLD_WORKLOAD, asdict(est))


def _advise(key: catalogue.Key, cal: dict, understood: Dict[str, str]) -> KeyAdvice:
    name, default = key.name, key.default
    if name not in understood:
        need = catalogue.format_version(key.since_linux or key.since) if key.since_linux else \
            catalogue.format_version(key.since)
        return KeyAdvice(name, NOT_OFFERED, None, default, None,
                         f"git {cal['git_version']} does not read it (needs {need} on this platform)")
    val = cal["validation"]
    sweeps = cal["sweeps"]
    rewrite = key.needs_index_rewrite
    if name == "core.preloadIndex" and name in val:
        status, value, gain, why = _validated(name, val[name], "false", "git status -uno with preload off")
        p = sweeps.get("preload", {})
        ev = {k: p.get(k) for k in ("best", "best_value", "git_default", "single_thread", "git_threads")}
        return KeyAdvice(name, status, value, default, gain, why, ev)
    if name == "checkout.workers" and name in val:
        v = val[name]
        w = v["candidate"]["checkout.workers"]
        status, value, gain, why = _validated(name, v, w, f"checkout of {v['files']} files with {w} workers")
        co = sweeps.get("checkout", {})
        ev = {"best": co.get("best"), "curve": co.get("model_samples"), "model": co.get("model")}
        return KeyAdvice(name, status, value, default, gain, why, ev)
    if name == "checkout.thresholdForParallelism":
        w = val.get("checkout.workers")
        if not w or w["estimate"]["verdict"] != stats.FASTER:
            return KeyAdvice(name, NOT_SET, None, default, None,
                             "not set: parallel checkout is not recommended here")
        t, why, ev = _threshold(cal, int(w["candidate"]["checkout.workers"]))
        if t is None:
            return KeyAdvice(name, NOT_SET, None, default, None, f"not set: {why}", ev)
        if abs(t - int(default)) <= THRESHOLD_CHANGE * int(default):
            return KeyAdvice(name, NOT_SET, None, default, None,
                             f"not set: {why}, close to Git's {default}", ev)
        gain = _threshold_gain(val.get("checkout.threshold_points") or [], t, int(default))
        if gain is None:
            return KeyAdvice(name, NOT_SET, None, default, None,
                             f"not set: {why}, but no batch between it and Git's {default} "
                             "was timed with real git", ev)
        return KeyAdvice(name, SET, str(t), default, gain, why, ev)
    if name == "index.threads":
        entries = cal["repository"]["entries"] or 0
        if name in val:
            v = val[name]
            status, value, gain, why = _validated(
                name, v, v["candidate"]["index.threads"], "reading the index (git ls-files)")
            return KeyAdvice(name, status, value, default, gain, why,
                             {"best": sweeps.get("index", {}).get("best")})
        return KeyAdvice(name, NOT_SET, None, default, None,
                         f"not set: {entries} entries; Git loads at most one thread per 10,000")
    if name == "index.version" and name in val:
        status, value, gain, why = _validated(name, val[name], "4", "reading a version 4 index")
        ix = sweeps.get("index", {})
        ev = {"bytes_v2": ix.get("bytes_v2"), "bytes_v4": ix.get("bytes_v4")}
        if ix.get("bytes_v2"):
            why += f"; v4 is {1 - ix['bytes_v4'] / ix['bytes_v2']:.0%} smaller"
        return KeyAdvice(name, status, value, default, gain, why, ev, rewrite)
    if name == "core.untrackedCache" and name in val:
        status, value, gain, why = _validated(name, val[name], "true", "git status with untracked files")
        return KeyAdvice(name, status, value, default, gain, why + "; bypassed by `git status -uall`",
                         {"fs_test": val[name].get("fs_test")})
    if name == "feature.manyFiles":
        return KeyAdvice(name, NOT_SET, None, default, None,
                         "not set: it bundles index.version and core.untrackedCache, which "
                         "git-tune sets one by one where measured", needs_index_rewrite=rewrite)
    if key.measured_by == "none":
        return KeyAdvice(name, NOT_SET, None, default, None,
                         "left to Git: git-tune does not measure it yet")
    return KeyAdvice(name, NOT_SET, None, default, None, "not set: not measured in this calibration",
                     needs_index_rewrite=rewrite)


def _findings(cal: dict) -> List[str]:
    out = []
    p = cal["sweeps"].get("preload")
    if p:
        best = p["best"]
        out.append(f"lstat of {p['entries']} files: fastest with {best['engine.preload.threads']} "
                   f"threads ({best['engine.preload.split']}, {p['best_value'] * 1e3:.1f} ms); Git starts "
                   f"{p['git_threads']} ({p['git_default'] * 1e3:.1f} ms), one thread takes "
                   f"{p['single_thread'] * 1e3:.1f} ms. Git has no key for the thread count.")
    ix = cal["sweeps"].get("index")
    if ix:
        b = ix["best"]
        out.append(f"index load: fastest with {b['index.threads']} threads and "
                   f"{b['engine.index.alloc']} allocation ({ix['best_value'] * 1e3:.2f} ms, engine).")
    co = cal["sweeps"].get("checkout")
    if co and co.get("model"):
        m = co["model"]
        out.append(f"writing files: {m['per_item'] * 1e6:.0f} µs each, about {m['parallelism']} "
                   f"served in parallel by this storage and CPUs (engine, {co['files']} files).")
    return out


def recommend(cal: dict, workload: str = "mixed") -> Recommendation:
    weights = workloads.weights(workload)
    understood = catalogue.understood(catalogue.parse_version(cal["git_version"]))
    keys = tuple(_advise(k, cal, understood) for k in catalogue.catalogue().values())
    expected: Dict[str, float] = {}
    for k in keys:
        if k.status == SET and k.gain:
            expected[k.gain.workload] = expected.get(k.gain.workload, 1.0) * k.gain.speedup
    if "checkout" in expected:
        expected.setdefault("clone", expected["checkout"])  # same write path, more files
    total = sum(weights.values())
    weighted = math.exp(sum(w * math.log(expected.get(name, 1.0)) for name, w in weights.items())
                        / total) if total else 1.0
    return Recommendation(SCHEMA_VERSION, workload, cal["git_version"],
                          cal["storage"]["storage_class"], cal["fingerprint"], keys,
                          tuple(_findings(cal)), expected, weighted, cal["created"])
