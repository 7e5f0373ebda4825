"""Fidelity of the engine (issue #11): does it order configurations as real git does?

git-tune uses the engine's measurements for two decisions: the checkout sweep picks
the worker count real git then confirms (so its order must match git's), and preload
off is not trialled where one thread was 1.5x slower than Git's count on the engine
(so its gain must not overstate git's). On each bed, the same repository, the same
files, interleaved rounds, each configuration's median:

    checkout  W in 1..32 workers: the engine writes a batch of tracked files
              (engine.checkout, threshold 0); real git restores the same files
              (git checkout --pathspec-from-file, checkout.workers=W, threshold 0)
    preload   one thread against Git's count (entries / 500, at most 20): the engine
              lstat()s every tracked file; real git runs git status -uno with
              core.preloadIndex false / true. Hot, and cold where root can drop caches.
    index     1, 2, 4 loader threads: the engine reads the index; real git runs
              git ls-files with the index.threads that loads on as many (unset, 3,
              7: index.git_value; the index written with 4 offset-table blocks)

Columns: Spearman's rank correlation of the engine's order against git's (families of
3 or more), the gain the engine predicts for its own pick, what real git measured for
that pick, the error, and, for checkout, how far git under the engine's pick is from
git's own best. For preload, git's gain is given for the whole command and for its
lstat regions (trace2 index/preload + index/refresh), which is what the engine times.

    python3 bench/fidelity.py [--tiny] [--beds tmpfs disk latfs-nfs hdd] [--repeat N]
"""
import os
import tempfile
from typing import Callable, Dict, Sequence

from scipy.stats import spearmanr

from common import (ALL_BEDS, BEDS, BedUnavailable, bed_latency, drop_caches, git, median, parser,
                    remove, repo_on, report, storage, timed, tracked)

from git_tune import engine
from git_tune.advisor.keys import index as index_keys, preload
from git_tune.advisor.measure.gitbench import trace_phases

WORKERS = (1, 2, 4, 8, 16, 32)
INDEX_THREADS = (1, 2, 4)
STATUS = ["git", "status", "-uno", "--porcelain"]


def rounds(configs: Sequence, run: Callable, repeat: int, cold: bool = False) -> Dict:
    """Median of each configuration over `repeat` rounds after a warm-up round; the
    order rotates each round so no configuration always follows the same one."""
    configs = list(configs)
    for c in configs:
        run(c)
    times = {c: [] for c in configs}
    for r in range(repeat):
        k = r % len(configs)
        for c in configs[k:] + configs[:k]:
            if cold:
                drop_caches()
            times[c].append(run(c))
    return {c: median(v) for c, v in times.items()}


def rank_correlation(predicted: Dict, measured: Dict) -> str:
    keys = list(predicted)
    if len(keys) < 3:
        return "-"
    rho = spearmanr([predicted[k] for k in keys], [measured[k] for k in keys]).statistic
    return "-" if rho != rho else f"{rho:.2f}"      # nan: one side was flat


def checkout_family(repo: str, mnt: str, names, batch_files: int, repeat: int):
    batch = names[:: max(1, len(names) // batch_files)][:batch_files]
    sizes = [os.lstat(os.path.join(repo, p)).st_size for p in batch]
    target = os.path.join(mnt, "engine-checkout")
    os.makedirs(target, exist_ok=True)
    eng = rounds(WORKERS, lambda w: engine.checkout(target, batch, sizes, workers=w,
                                                    threshold=0).wall, repeat)
    spec = os.path.join(mnt, "batch.list")
    with open(spec, "w") as f:
        f.write("\0".join(batch))
    cmd = ["git", "checkout", f"--pathspec-from-file={spec}", "--pathspec-file-nul"]
    real = rounds(WORKERS, lambda w: timed(
        cmd, repo, {"checkout.workers": str(w), "checkout.thresholdForParallelism": "0"},
        setup=lambda: remove(repo, batch)), repeat)
    pick, best = min(eng, key=eng.get), min(real, key=real.get)
    predicted, measured = eng[1] / eng[pick], real[1] / real[pick]
    return ({"engine": eng, "git": real, "pick": pick, "git_best": best},
            (f"workers 1-{WORKERS[-1]} ({len(batch)} files)", rank_correlation(eng, real),
             f"{pick}: {predicted:.2f}x", f"{measured:.2f}x", _error(predicted, measured),
             f"{best}: {real[best] / real[pick]:.2f}x of the pick's time"))


def preload_family(repo: str, names, repeat: int, cold: bool):
    threads = preload.git_threads(len(names))
    if threads < 2:
        return None
    eng = rounds((1, threads), lambda t: engine.preload(names, base=repo, threads=t).wall,
                 repeat, cold)
    regions = {"false": [], "true": []}

    def status(value: str) -> float:
        with tempfile.NamedTemporaryFile() as trace:
            t = timed(STATUS, repo, {"core.preloadIndex": value}, trace=trace.name)
            p = trace_phases(trace.name)
        regions[value].append(p.get("index/preload", 0.0) + p.get("index/refresh", 0.0))
        return t

    real = rounds(("false", "true"), status, repeat, cold)
    predicted, measured = eng[1] / eng[threads], real["false"] / real["true"]
    lstat = median(regions["false"]) / median(regions["true"])
    return ({"engine": eng, "git": real, "regions": regions, "threads": threads},
            (f"preload off vs {threads} threads, {'cold' if cold else 'hot'}", "-",
             f"{predicted:.2f}x", f"{measured:.2f}x (lstat regions {lstat:.2f}x)",
             _error(predicted, lstat), "-"))


def index_family(repo: str, repeat: int):
    git("-c", f"index.threads={INDEX_THREADS[-1]}", "update-index", "--force-write-index",
        cwd=repo)
    index = os.path.join(repo, ".git", "index")
    eng = rounds(INDEX_THREADS, lambda t: _engine_index(index, t), repeat)
    # Git's value for t loaders: one thread more loads the extensions (index.git_value).
    real = rounds(INDEX_THREADS, lambda t: timed(
        ["git", "ls-files"], repo, {"index.threads": index_keys.git_value(t)} if t > 1 else {}),
        repeat)
    pick = min(eng, key=eng.get)
    predicted, measured = eng[1] / eng[pick], real[1] / real[pick]
    return ({"engine": eng, "git": real, "pick": pick},
            (f"index loaders {', '.join(map(str, INDEX_THREADS))}",
             rank_correlation(eng, real), f"{pick}: {predicted:.2f}x", f"{measured:.2f}x",
             _error(predicted, measured), "-"))


def _engine_index(index: str, threads: int) -> float:
    # Git reads without verifying the trailer (read-cache.c: verify_index_checksum is off
    # outside fsck), so neither does the engine here.
    r = engine.index_read(index, threads=threads, verify_checksum=False)
    return r.read + r.parse


def _error(predicted: float, measured: float) -> str:
    return f"{(predicted / measured - 1) * 100:+.0f}%"


def run_bed(kind: str, mnt: str, files: int, batch_files: int, repeat: int):
    repo = repo_on(kind, mnt, files)
    names = tracked(repo)
    timed(STATUS, repo, {})                    # settles the index's stat data
    rows, data = [], {}
    d, row = checkout_family(repo, mnt, names, batch_files, repeat)
    rows.append((kind, *row))
    data["checkout"] = d
    for cold in ((False, True) if os.geteuid() == 0 and kind != "tmpfs" else (False,)):
        got = preload_family(repo, names, repeat, cold)
        if got:
            data[f"preload-{'cold' if cold else 'hot'}"] = got[0]
            rows.append((kind, *got[1]))
    d, row = index_family(repo, repeat)
    rows.append((kind, *row))
    data["index"] = d
    return rows, data


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", choices=ALL_BEDS, default=list(BEDS))
    args = p.parse_args()
    files, batch_files = (1200, 100) if args.tiny else (3000, 400)
    repeat = args.repeat or (3 if args.tiny else 5)
    beds = ["tmpfs"] if args.tiny else args.beds
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                r, data[kind] = run_bed(kind, mnt, files, batch_files, repeat)
                rows += r
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    report("fidelity", f"Engine against real git on {files} files: order and gains "
           f"(median of {repeat} interleaved rounds)",
           ("bed", "family", "Spearman", "engine's pick: predicted gain", "git's gain there",
            "error", "git's own best"), rows, data, args.tiny,
           notes + ["gain = time with one worker / thread (preload off) over the pick's; "
                    "error = predicted / measured - 1 (preload: against git's lstat regions)"],
           beds=beds)


if __name__ == "__main__":
    main()
