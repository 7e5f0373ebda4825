"""core.deltaBaseCacheLimit: the curve of `git log -p` of a file with a long history
over the cache's size, each run's time and peak memory, and the value git-tune's trial
chose for each memory limit against the best value of the grid that fits that limit.

The repository has two text files rewritten a little in each of many commits and
repacked, so every version is stored as a delta of another (repogen.LargeFiles). Each
grid value is run once a round, in an order drawn for that round, and the table gives
the median over the rounds. The trial runs as calibrate runs it, given the limit (its
runs are confined to their allowance in a memory cgroup of their own where the kernel
allows one).

    python3 bench/basecache.py [--tiny] [--repeat ROUNDS]
"""
import os
import random
import statistics
import subprocess
import tempfile
from dataclasses import asdict
from typing import Optional

from common import ab, parser, report

from git_tune import repogen
from git_tune.advisor.keys import basecache
from git_tune.advisor.measure import budget as budget_plan, calibrate, gitbench, peak, planner
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.record import FAILS_DEFAULT, Options
from git_tune.models import catalogue, stats
from git_tune.probes import host, repo as repo_probe

MIB = 1 << 20
FULL = repogen.LargeFiles(size=2 << 20, versions=100, changed=0.01, binary=64 << 10)
TINY = repogen.LargeFiles(size=256 << 10, versions=12, changed=0.02, binary=16 << 10)
GRID = ("3m", "6m", "12m", "16m", "24m", "32m", "48m", "96m", "192m", "384m")
UNLIMITED = 0


def log_p(repo: str, path: str, value: str, limit: int = 1 << 40) -> peak.PeakRun:
    """One run of the trial's workload with the cache at `value`, in a memory cgroup of
    its own limited to `limit` bytes where one can be made (peak.run)."""
    return peak.run(basecache.log_args(path), repo,
                    gitbench.config_env({basecache.KEY: value}), limit, 3600)


def curve(repo: str, path: str, rounds: int, values):
    """{value: (median seconds, largest peak bytes)} over rounds, each round in an order
    of its own (seeded): a machine that drifts within a run favours no value for its
    place in the round."""
    seen = {v: ([], []) for v in values}
    for round_ in range(rounds):
        for v in random.Random(round_).sample(list(values), len(values)):
            r = log_p(repo, path, v)
            assert r.returncode == 0, r.stderr
            seen[v][0].append(r.seconds)
            seen[v][1].append(r.peak)
    return {v: (statistics.median(t), max(p)) for v, (t, p) in seen.items()}


def fits_in(repo: str, path: str, value: str, allowed: int) -> bool:
    """Whether a run of `value` fits `allowed` bytes as the trial judges one (PeakRun.over):
    confined to them where a memory cgroup can be made (the kernel drops mapped pack
    pages there before it kills git), else by its peak."""
    r = log_p(repo, path, value, allowed)
    return r.returncode == 0 and not r.over(allowed)


def against_best(repo: str, path: str, chosen: str, best: str,
                 pairs: int) -> Optional[stats.RatioEstimate]:
    """The chosen value's time over the best's, from runs in ABBA pairs (neighbours in
    the grid differ by less than its rounds' medians wander, which pairs cancel); None
    where the chosen value is the best."""
    if chosen == best:
        return None
    ta, tb = ab(lambda: log_p(repo, path, best).seconds,
                lambda: log_p(repo, path, chosen).seconds, pairs)
    return stats.compare_paired(ta, tb)


def chosen_value(t) -> tuple:
    """The value the trial's comparison sets (Git's default where it sets none), and why."""
    if t.why_not_run or not t.comparisons:
        return "96m", t.why_not_run or "nothing compared"
    c = t.main
    cand = c.candidate[basecache.KEY]
    if c.fails == FAILS_DEFAULT:
        return cand, f"Git's default failed ({c.error}); {cand} fits"
    if c.estimate and c.estimate.verdict == stats.FASTER:
        return cand, f"{cand} faster: {c.estimate.speedup:.2f}x"
    return "96m", (f"{cand}: {c.estimate.speedup:.2f}x, {c.estimate.verdict}" if c.estimate
                   else f"{cand} failed: {c.error}")


def bench_for(repo: str, scratch: str, limit: int) -> Bench:
    report_ = calibrate.probe_repository(repo, 10)
    layout = report_.repository.layout
    memory = limit or host.host_facts().memory_available
    b = Bench(gitbench.Workspace(layout, scratch), repo_probe.tracked_sample(layout, n=10 ** 9),
              os.cpu_count() or 1, "local-ssd", report_.git, Options(budget=120),
              budget_plan.Budget(120), online_cpus=os.cpu_count(), memory_limit=memory,
              memory_source="the limit given" if limit else "the host's available memory")
    os.makedirs(scratch, exist_ok=True)
    return b


def main():
    args = parser(__doc__).parse_args()
    shape = TINY if args.tiny else FULL
    rounds = args.repeat or (1 if args.tiny else 3)
    pairs = 2 if args.tiny else 10
    limits = [UNLIMITED, 256 * MIB, 128 * MIB, 64 * MIB]
    rows, data, notes = [], {}, []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        repo = repogen.generate_large(os.path.join(d, "repo"), shape)
        subprocess.run(["git", "-C", repo, "repack", "-adq"], check=True)
        layout = calibrate.probe_repository(repo, 10).repository.layout
        bases = basecache.delta_bases(layout, 0)
        path = bases.path or "large-0.txt"
        trials = {}
        for i, limit in enumerate(limits):
            b = bench_for(repo, os.path.join(d, f"ws{i}"), limit)
            trials[limit] = (planner.memory_allowed(b.memory_limit),
                             basecache.trial(catalogue.lookup(basecache.KEY), b))
        chosen = {limit: chosen_value(t) for limit, (_, t) in trials.items()}
        values = sorted(set(GRID) | {v for v, _ in chosen.values()},
                        key=catalogue.parse_size)
        points = curve(repo, path, rounds, values)
        default = points["96m"][0]
        for v in values:
            rows.append(("grid" if v in GRID else "chosen", v, f"{points[v][0]:.3f} s",
                         f"{points[v][1] / MIB:.0f} MiB", f"{default / points[v][0]:.2f}x", ""))
        data["curve"] = {v: {"seconds": s, "peak": p} for v, (s, p) in points.items()}
        for limit, (allowed, t) in trials.items():
            name = f"{limit // MIB} MiB" if limit else "none"
            value, why = chosen[limit]
            fits = {v: fits_in(repo, path, v, allowed) for v in set(GRID) | {value}}
            fitting = {v: points[v][0] for v in GRID if fits[v]}
            best = min(fitting, key=lambda v: fitting[v]) if fitting else None
            at = points[value]
            fit = fits[value]
            paired = against_best(repo, path, value, best, pairs) if best and fit else None
            ratio = (f"{paired.ratio:.2f} [{paired.low:.2f}-{paired.high:.2f}]" if paired
                     else "1 (the best)" if best == value and fit else "-")
            rows.append((name, value, f"{at[0]:.3f} s", f"{at[1] / MIB:.0f} MiB"
                         + ("" if fit else " (over)"),
                         f"best fitting: {best}" if best else "none fits", ratio))
            data[name] = {"allowed": allowed, "chosen": value, "reason": why,
                          "best_fitting": best, "facts": t.facts,
                          "against_best": asdict(paired) if paired else None}
            notes.append(f"{name}: {why}")
    notes.append(f"repository: {shape.files} text files of {shape.size // 1024} KiB in "
                 f"{shape.versions} versions, repacked; {bases.total / MIB:.0f} MiB of blob "
                 f"delta bases, {bases.path_bytes / MIB:.0f} MiB in the history of {path}")
    notes.append(f"grid rows: median of {rounds} rounds of git log -p of {path}, each "
                 "round in an order of its own; the last column is Git's default's time "
                 "over the value's")
    notes.append(f"limit rows: the value git-tune's trial chose, its grid time and peak, and "
                 f"its time over the best grid value's ({pairs} ABBA pairs, median of the "
                 "pairs' ratios [95% bootstrap interval]) that fits the memory a run may "
                 "use (half the limit) as the trial judges it: one run confined to it ends "
                 "whole (the kernel drops mapped pack pages before it kills git), or, "
                 "where no cgroup can be made, its peak stays below it; (over): the "
                 "chosen value does not fit by that test")
    report("basecache", "core.deltaBaseCacheLimit: git log -p of a long history by cache size, "
           "and git-tune's choice per memory limit",
           ("limit", "value", "time", "peak", "vs", "ratio"), rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
