"""Tuner quality: git-tune's recommendation vs Git's defaults vs Scalar vs an exhaustive grid of real git.

On each bed, real git times a fixed mix: `git status -uno` (0.4), restoring
K removed files with `git checkout -f` (0.4) and `git ls-files` (0.2).
Targets (autotuner issue): the recommendation within 5% of the grid's best,
never slower than Git's defaults beyond noise, and `recommend` costing under
5% of the grid's time. A second table compares the search strategies on the
engine's checkout sweep: regret against an exhaustive engine sweep, and cost.

    python3 bench/tuner_quality.py [--tiny]
"""
import itertools
import os
import random
import time

from common import BedUnavailable, bed_latency, median, parser, repo_on, report, storage, timed

from git_tune import engine
from git_tune.advisor import calibrate as cal, search, sweep
from git_tune.advisor.recommend import recommend
from git_tune.models import stats

WEIGHTS = {"status": 0.4, "checkout": 0.4, "index": 0.2}
SCALAR = {"core.preloadIndex": "true", "core.untrackedCache": "true", "index.threads": "true",
          "index.version": "4"}


class Mix:
    def __init__(self, repo: str, k: int):
        self.repo = repo
        names = [l for l in os.popen(f"git -C '{repo}' ls-files").read().split("\n") if l]
        self.pick = random.Random(1).sample(names, min(k, len(names)))

    def _remove(self):
        for p in self.pick:
            try:
                os.unlink(os.path.join(self.repo, p))
            except FileNotFoundError:
                pass

    def run(self, settings) -> float:
        s = timed(["git", "status", "-uno", "--porcelain"], self.repo, settings)
        c = timed(["git", "checkout", "-q", "-f"], self.repo, settings, setup=self._remove)
        i = timed(["git", "ls-files"], self.repo, settings)
        return WEIGHTS["status"] * s + WEIGHTS["checkout"] * c + WEIGHTS["index"] * i

    def measure(self, settings, repeat):
        return [self.run(settings) for _ in range(repeat)]


def grid_configs(tiny: bool):
    workers = (1, 4) if tiny else (1, 2, 4, 8, 16, 32)
    threads = ("1",) if tiny else ("1", "4")
    for w, p, t in itertools.product(workers, ("true", "false"), threads):
        cfg = {"checkout.workers": str(w), "core.preloadIndex": p, "index.threads": t}
        if w > 1:
            cfg["checkout.thresholdForParallelism"] = "1"
        yield cfg


def strategies(repo: str, budget: float, tiny: bool):
    """Engine checkout sweep per strategy: regret vs exhaustive, and seconds spent."""
    layout = cal.repo_probe.locate(repo)
    names = cal.repo_probe.tracked_sample(layout, n=10 ** 9)
    paths, sizes = cal._sample(layout, names, 500 if tiny else 2000)
    scratch = os.path.join(layout.git_dir, "bench-co")
    os.makedirs(scratch, exist_ok=True)
    max_w = 8 if tiny else 32
    truth = {}
    for w in range(1, max_w + 1):
        truth[w] = median([engine.checkout(scratch, paths, sizes, workers=w, threshold=0).wall
                           for _ in range(3)])
    best = min(truth.values())
    out = []
    for name in ("gp", "coordinate", "random", "grid"):
        t0 = time.monotonic()
        dims = [search.Dim("checkout.workers", 1, max_w, default=1)]
        r = sweep.run(search.make(name, dims, 0),
                      lambda p: engine.checkout(scratch, paths, sizes, workers=p["checkout.workers"],
                                                threshold=0).wall, budget)
        chosen = r.best["checkout.workers"]
        out.append((name, chosen, truth[chosen] / best - 1, time.monotonic() - t0, len(r.evaluations)))
    return out, truth


def main():
    args = parser(__doc__).parse_args()
    files = 300 if args.tiny else 3000
    repeat = args.repeat or (3 if args.tiny else 5)
    budget = 4 if args.tiny else 20
    beds = ("disk",) if args.tiny else ("tmpfs", "disk", "latfs-nfs")
    rows, srows, data, notes = [], [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                repo = repo_on(kind, mnt, files, changed=50)
                mix = Mix(repo, min(400, files // 5))
                t0 = time.monotonic()
                record = cal.calibrate(repo, cal.Options(budget=budget), store=False)
                rec = recommend(record)
                tune_cost = time.monotonic() - t0
                tuned = rec.settings()
                t0 = time.monotonic()
                grid = {}
                for cfg in grid_configs(args.tiny):
                    grid[tuple(sorted(cfg.items()))] = median(mix.measure(cfg, repeat))
                grid_cost = time.monotonic() - t0
                best_cfg = min(grid, key=grid.get)
                # The contenders, interleaved so drift hits them alike.
                contenders = {"git defaults": {}, "scalar": SCALAR, "git-tune": tuned,
                              "grid best": dict(best_cfg)}
                times = {k: [] for k in contenders}
                for _ in range(repeat):
                    for k, cfg in contenders.items():
                        times[k].append(mix.run(cfg))
                med = {k: median(v) for k, v in times.items()}
                vs_default = stats.compare(times["git defaults"], times["git-tune"])
                rows.append((kind, f"{med['git defaults'] * 1e3:.0f} ms", f"{med['scalar'] * 1e3:.0f} ms",
                             f"{med['git-tune'] * 1e3:.0f} ms", f"{med['grid best'] * 1e3:.0f} ms",
                             f"{med['git-tune'] / med['grid best']:.3f}", vs_default.verdict,
                             f"{tune_cost:.0f} s / {grid_cost:.0f} s = {tune_cost / grid_cost:.0%}",
                             ", ".join(f"{k}={v}" for k, v in sorted(tuned.items())) or "(defaults)"))
                st, truth = strategies(repo, budget / 4, args.tiny)
                for name, chosen, regret, secs, n in st:
                    srows.append((kind, name, chosen, f"{regret:+.1%}", f"{secs:.1f} s", n))
                data[kind] = {"times": times, "grid": {str(k): v for k, v in grid.items()},
                              "tuned": tuned, "tune_cost": tune_cost, "grid_cost": grid_cost,
                              "strategies": st, "engine_truth": truth}
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    report("tuner_quality", f"Real git, weighted mix on {files} files (median of {repeat}, interleaved)",
           ("bed", "git defaults", "scalar", "git-tune", "grid best", "git-tune / grid best",
            "git-tune vs defaults", "tune cost / grid cost", "git-tune wrote"), rows, data, args.tiny,
           notes + ["grid: checkout.workers x core.preloadIndex x index.threads, every cell timed with real git"])
    report("search_strategies", "Search strategies on the engine checkout sweep: regret vs an exhaustive sweep",
           ("bed", "strategy", "chose workers", "regret", "cost", "measurements"), srows, {}, args.tiny,
           ["regret: how much slower the chosen worker count is than the exhaustive sweep's best (engine time)"])


if __name__ == "__main__":
    main()
