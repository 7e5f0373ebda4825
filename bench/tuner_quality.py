"""Tuner quality: git-tune's recommendation vs Git's defaults vs Scalar vs an exhaustive grid of real git.

On each bed, real git times a fixed mix, weighed as git-tune's default `mixed`
profile weighs these workloads (models/workloads.toml): `git status -uno`;
restoring 400 removed files with `git checkout -f`, then the next
`git status -uno`; the whole tree removed and written again by
`git checkout -f`, then the next `git status -uno` (a clone's or a CI
checkout's burst, where parallel checkout gains most, and whose racily clean
entries the next status re-reads); and `git ls-files`. A mix's figure is the
weighted geometric mean of its workloads' times, the objective git-tune
itself optimizes, so the whole-tree write (seconds) does not drown a status
(milliseconds). Beds: tmpfs, the disk hot, the disk cold (caches dropped
before every timed git command but the next status; calibrated with --cold)
and the latfs NFS-like FUSE bed.

The grid is every combination of the keys this mix reads: checkout.workers
x checkout.thresholdForParallelism x core.preloadIndex, each cell timed with
real git. index.threads is left out: below 20,000 entries git writes no
offset table, so it changes nothing here (see bench/index_pool.py). The
three best cells are then timed again, interleaved with Git's defaults,
Scalar's settings (2.39's and 2.55's lists, bench/scalar.toml) and git-tune's
recommendation, and "grid best" is the fastest of them in those rounds.

Targets (autotuner issue): the recommendation within 5% of the grid's best,
never slower than Git's defaults beyond noise, and calibrate + recommend
costing under 5% of the grid's time. The search strategies are compared in
bench/search_strategies.py.

    python3 bench/tuner_quality.py [--tiny] [--beds latfs-nfs] [--reuse-grid]
                                   [--files 20000 --grid workers-preload --without-scalar]

With --files other than 3,000 a bed's row is its own ("latfs-nfs 20000"). On the NFS-like
bed at 20,000 files one mix takes minutes (the whole tree written through 1 ms a metadata
operation): `--grid workers-preload` leaves the threshold out of the grid (Git's 100;
every batch of the mix is far above any threshold) and times 12 cells, not 38, and
`--without-scalar` leaves Scalar's two lists out of the final rounds (neither sets
checkout.workers, so each writes the whole tree sequentially, as Git's defaults do, which
stay).
"""
import json
import os
import random
import time
from typing import Optional

from common import (RESULTS, BedUnavailable, bed_latency, median, ms, parser, remove, repo_on,
                    report, storage, timed, tracked)

from git_tune import fsmonitor
from git_tune.advisor.measure import calibrate
from git_tune.advisor.measure.record import Options
from git_tune.advisor.decide.recommend import recommend
from git_tune.models import stats, workloads

MIX = ("status", "checkout", "clone", "index")
WEIGHTS = {k: w for k, w in workloads.weights("mixed").items() if k in MIX}
NEXT_STATUS = ("git", "status", "-uno", "--porcelain")


def scalar_lists() -> dict:
    """Scalar's recommended settings per release (bench/scalar.toml), with what needs
    support added only where the git in use has it."""
    import tomllib
    from git_tune.probes import gitinfo
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scalar.toml"), "rb") as f:
        lists = tomllib.load(f)
    supported = {"fsmonitor_daemon": gitinfo.fsmonitor_daemon(os.getcwd())[0] is True}
    out = {}
    for release, entry in lists.items():
        settings = dict(entry["settings"])
        for feature, extra in entry.get("where_supported", {}).items():
            if supported.get(feature):
                settings.update(extra)
        out[f"scalar {release}"] = settings
    return out


class Mix:
    def __init__(self, repo: str, k: int, cold: bool = False):
        self.repo = repo
        self.cold = cold
        self.names = tracked(repo)
        self.pick = random.Random(1).sample(self.names, min(k, len(self.names)))
        self.written = time.monotonic()

    def _write(self, paths, settings) -> float:
        """The paths removed, `git checkout -f` writes them, then the next status (never
        from a dropped cache: it follows the checkout)."""
        c = timed(["git", "checkout", "-q", "-f"], self.repo, settings, self.cold,
                  setup=lambda: remove(self.repo, paths))
        t = c + timed(NEXT_STATUS, self.repo, settings)
        self.written = time.monotonic()
        return t

    def _settle(self) -> None:
        """After a write, files and index may share a second: such entries are racily
        clean, and every status re-reads their contents until one writes the index in a
        later second. The hot status is timed on a settled tree: wait out the second,
        then an untimed status writes the index."""
        time.sleep(max(0.0, self.written + 1.05 - time.monotonic()))
        timed(NEXT_STATUS, self.repo, {})

    def times(self, settings) -> dict:
        self._settle()
        return {"status": timed(NEXT_STATUS, self.repo, settings, self.cold),
                "checkout": self._write(self.pick, settings),
                "clone": self._write(self.names, settings),
                "index": timed(["git", "ls-files"], self.repo, settings, self.cold)}

    def run(self, settings) -> float:
        return objective(self.times(settings))

    def measure(self, settings, repeat):
        return [self.run(settings) for _ in range(repeat)]


def objective(times: dict) -> float:
    """The weighted geometric mean of the workloads' times, in seconds."""
    return workloads.weighted_geomean((w, times[k]) for k, w in WEIGHTS.items())


def grid_configs(tiny: bool, restricted: bool = False):
    workers = (1, 4) if tiny else (1, 2, 4, 8, 16, 32)
    thresholds = ("1",) if tiny else ("100",) if restricted else ("1", "100", "1000")
    for p in ("true", "false"):
        yield {"checkout.workers": "1", "core.preloadIndex": p}
        for w in workers[1:]:
            for t in thresholds:
                yield {"checkout.workers": str(w), "checkout.thresholdForParallelism": t,
                       "core.preloadIndex": p}


def label(cfg) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(cfg.items())) or "(defaults)"


def grid_measured(stored: dict) -> float:
    """When a stored row's grid cells were timed: a row that reused them says whose."""
    return stored.get("grid_reused_from") or stored["when"]


def cross_fitted(times: dict, finalists, tuned: str):
    """Paired (grid best, git-tune) times in which no round both picks the grid's best and
    is compared with it. Picking the fastest of the finalists on the rounds that then
    measure it favours it by the luck of the draw (with three equal finalists and a 7%
    error on a median, by about 6%). So the rounds are split in two, odd and even; each
    half's grid best is the finalist fastest on the other half, and git-tune is compared
    with it on this half. Both halves' pairs together are all the rounds, each used once."""
    rounds = len(times[tuned])
    halves = (range(0, rounds, 2), range(1, rounds, 2))
    best, tuned_times = [], []
    for this, other in (halves, halves[::-1]):
        other = other or range(rounds)      # a single round: nothing to hold out
        pick = min(finalists, key=lambda k: median([times[k][i] for i in other]))
        best += [times[pick][i] for i in this]
        tuned_times += [times[tuned][i] for i in this]
    return best, tuned_times


def run_bed(kind: str, cold: bool, mnt: str, files: int, repeat: int, final: int, budget: float,
            tiny: bool, stored_grid: Optional[dict] = None, restricted: bool = False,
            with_scalar: bool = True):
    repo = repo_on(kind, mnt, files, changed=50)
    mix = Mix(repo, min(400, files // 5), cold)
    t0 = time.monotonic()
    record = calibrate.calibrate(calibrate.probe_repository(repo, budget), Options(budget=budget, cold=cold),
                           store=False)
    tuned = recommend(record).settings()
    tune_cost = time.monotonic() - t0
    # One mix on the NFS-like bed takes about a minute (the whole tree written through
    # 1 ms a metadata operation): there each grid cell is timed once; the three best
    # are timed again below, interleaved, in any case.
    t0 = time.monotonic()
    mix.run({})
    slow = time.monotonic() - t0 > SLOW_MIX
    repeat = repeat or (1 if slow or tiny else 3)
    final = min(final, stats.MIN_RUNS) if slow else final
    t0 = time.monotonic()
    grid = {}
    for cfg in grid_configs(tiny, restricted):
        if stored_grid:     # --reuse-grid: the cells' stored times pick the three finalists
            grid[label(cfg)] = (cfg, stored_grid["grid"][label(cfg)])
        else:
            grid[label(cfg)] = (cfg, median(mix.measure(cfg, repeat)))
    grid_cost = stored_grid["grid_cost"] if stored_grid else time.monotonic() - t0
    top = sorted(grid.values(), key=lambda cv: cv[1])[:3]
    # The contenders, interleaved so drift hits them alike; settings two contenders
    # share are timed once, for both.
    lists = scalar_lists()      # the row names every list, timed or not
    scalars = lists if with_scalar else {}
    contenders = {"git defaults": {}, **scalars, "git-tune": tuned}
    for i, (cfg, _) in enumerate(top):
        contenders[f"grid #{i + 1}"] = cfg
    timed_as = {k: next(j for j in contenders if contenders[j] == cfg)
                for k, cfg in contenders.items()}
    each = {k: [] for k in contenders if timed_as[k] == k}
    # At least `final` rounds; then more, up to 30, while the rounds so far took under
    # FINAL_SECONDS: a mix of milliseconds-long commands is too noisy to tell 5% in 7.
    t0 = time.monotonic()
    rounds = 0
    # Each round starts one contender later, so none always follows the same other's
    # whole-tree write (page cache, writeback) or always comes first.
    order = list(each)
    more_for = 0 if tiny else FINAL_SECONDS     # --tiny: only checks the benchmark runs
    while rounds < final or (rounds < 30 and time.monotonic() - t0 < more_for):
        turn = order[rounds % len(order):] + order[:rounds % len(order)]
        for k in turn:
            each[k].append(mix.times(contenders[k]))
        rounds += 1
    times = {k: [objective(t) for t in each[timed_as[k]]] for k in contenders}
    # Scalar's core.fsmonitor=true starts a daemon with a git that has one: never leave it.
    fsmonitor.stop(repo)
    med = {k: median(v) for k, v in times.items()}
    finalists = [k for k in contenders if k.startswith("grid #")]
    best = min(finalists, key=med.get)
    # Each round times every contender once, back to back: the rounds' ratios are paired,
    # so drift between rounds cancels instead of widening the interval.
    vs_default = stats.compare_paired(times["git defaults"], times["git-tune"])
    vs_best = stats.compare_paired(*cross_fitted(times, finalists, "git-tune"))
    by_workload = {w: {k: median([t[w] for t in each[timed_as[k]]])
                       for k in ("git defaults", "git-tune", best)} for w in MIX}
    row = (kind + (" cold" if cold else "") + ("" if files == FILES or tiny else f" {files}"),
           f"{med['git defaults'] * 1e3:.0f} ms",
           *(f"{med[k] * 1e3:.0f} ms" if k in med else "not timed" for k in lists),
           f"{med['git-tune'] * 1e3:.0f} ms",
           f"{med[best] * 1e3:.0f} ms", f"{vs_best.ratio:.3f} [{vs_best.low:.3f}-{vs_best.high:.3f}]",
           f"{vs_default.verdict} ({vs_default.ratio:.3f})",
           " / ".join(ms(t) for t in by_workload["clone"].values()),
           f"{tune_cost:.0f} s / {grid_cost:.0f} s = {tune_cost / grid_cost:.0%}", label(tuned),
           label(contenders[best]))
    data = {"times": times, "workload_times": {k: each[timed_as[k]] for k in contenders},
            "by_workload": by_workload,
            "same_settings": {k: v for k, v in timed_as.items() if k != v},
            "grid": {k: v for k, (_, v) in grid.items()}, "tuned": tuned,
            "grid_best": contenders[best], "tune_cost": tune_cost, "grid_cost": grid_cost,
            "vs_default": vars(vs_default), "vs_grid_best": vars(vs_best),
            "vs_grid_best_hindsight": vars(stats.compare_paired(times[best], times["git-tune"])),
            "vs_grid_best_unpaired": vars(stats.compare(times[best], times["git-tune"])),
            "calibration_seconds": record.seconds, "calibration_notes": list(record.notes),
            "grid_reused_from": grid_measured(stored_grid) if stored_grid else None}
    return row, data


FILES = 3000         # the rows' repository size, unless --files says otherwise
SLOW_MIX = 10.0      # seconds: a mix this long is timed once per grid cell
# The final rounds go on to 30 while they have taken less. At 120 s the hot disk had 7
# rounds, and two runs on the same grid put git-tune at 1.090 [1.016-1.171] and 0.974
# [0.936-1.124] of the grid's best: too few to tell 5%.
FINAL_SECONDS = 300

BEDS = {"tmpfs": ("tmpfs", False), "disk": ("disk", False), "disk-cold": ("disk", True),
        "latfs-nfs": ("latfs-nfs", False)}


def _row_order(name: str):
    bed, _, files = name.partition(" ")
    return (list(BEDS).index(bed) if bed in BEDS else len(BEDS), int(files or FILES))


def kept_results() -> dict:
    """The stored full-size rows, by bed (--reuse-grid reads their grid cells)."""
    try:
        with open(os.path.join(RESULTS, "tuner_quality.json")) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return {}
    # Rows from before the mix held the whole-tree write measured something else.
    return {k: v for k, v in old["data"].items() if "row" in v and "by_workload" in v}


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", choices=sorted(BEDS),
                   help="run these beds again and keep the stored rows of the others")
    p.add_argument("--reuse-grid", action="store_true",
                   help="take each bed's grid cells from its stored row instead of timing them "
                        "again (they only pick the three finalists, which the final rounds "
                        "time again, interleaved with git-tune); the NFS-like bed's grid is "
                        "23 of its 55 minutes")
    p.add_argument("--files", type=int, default=FILES,
                   help="the generated repository's files (a size other than 3,000 gets rows "
                        "of its own)")
    p.add_argument("--grid", choices=("full", "workers-preload"), default="full",
                   help="workers-preload: checkout.workers x core.preloadIndex only (12 cells)")
    p.add_argument("--without-scalar", action="store_true",
                   help="leave Scalar's lists out of the final rounds: like Git's defaults they "
                        "write the whole tree sequentially (on the NFS-like bed at 20,000 files "
                        "about 3 minutes a mix each)")
    args = p.parse_args()
    files = 300 if args.tiny else args.files
    repeat = args.repeat
    final = 2 if args.tiny else 7
    budget = 4 if args.tiny else Options().budget
    names = ["disk"] if args.tiny else (args.beds or list(BEDS))
    row_of = {n: n if files == FILES or args.tiny else f"{n} {files}" for n in names}
    data = {}
    stored = kept_results() if args.reuse_grid else {}
    notes = [f"{n}: grid cells reused from the stored run of "
             f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(grid_measured(stored[n])))} UTC "
             "(--reuse-grid); the finalists were timed again in this run's rounds"
             for n in names if row_of[n] in stored]
    for name in names:
        kind, cold = BEDS[name]
        if cold and os.geteuid() != 0:
            notes.append(f"{name}: dropping caches needs root")
            continue
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                key = row_of[name]
                row, data[key] = run_bed(kind, cold, mnt, files, repeat, final, budget, args.tiny,
                                         stored.get(key), args.grid == "workers-preload",
                                         not args.without_scalar)
                row = (key, *row[1:])       # a row is named by its bed, as report() keeps it
                data[key]["row"], data[key]["when"] = row, time.time()
                print(row, flush=True)
        except BedUnavailable as e:
            notes.append(f"{name}: {e}")
    rows = [data[n]["row"] for n in sorted(data, key=_row_order) if "row" in data[n]]
    report("tuner_quality", f"Real git, weighted mix on {files if args.tiny else FILES} files "
           "(a row named with a size: that many): git-tune against an exhaustive grid",
           ("bed", "git defaults", *scalar_lists(), "git-tune", "grid best",
            "git-tune / grid best [95%]",
            "git-tune vs defaults", "whole tree + next status: defaults / git-tune / grid best",
            "calibrate+recommend / grid", "git-tune wrote", "grid best is"),
           rows, data, args.tiny,
           notes + [f"grid: {sum(1 for _ in grid_configs(args.tiny))} cells (checkout.workers x "
                    "checkout.thresholdForParallelism x core.preloadIndex; rows run with "
                    "--grid workers-preload: "
                    f"{sum(1 for _ in grid_configs(args.tiny, True))}, the threshold at Git's "
                    "100), each the median of "
                    f"{repeat or 3} real-git mixes (1 where a mix takes over {SLOW_MIX:g} s); "
                    "then the 3 best cells, Git's defaults, Scalar's settings (each release's "
                    "list, bench/scalar.toml; core.fsmonitor only with a git that has the "
                    f"daemon) and git-tune's, interleaved (each round starting one contender later), "
                    f"{final} to 30 rounds (more while the "
                    f"rounds have taken under {FINAL_SECONDS} s; {stats.MIN_RUNS} where a mix takes over "
                    f"{SLOW_MIX:g} s); contenders with the same settings are timed once",
                    "a mix's figure is the weighted geometric mean of its workloads' times, "
                    "with the `mixed` profile's weights: "
                    + ", ".join(f"{k} {w:g}" for k, w in WEIGHTS.items())
                    + " (clone: the whole tree removed, written by `git checkout -f`, then "
                    "the next `git status -uno`)",
                    "rows come from one run per bed; `--beds NAME` re-runs a bed and keeps the "
                    "others' stored rows, each with the commit it ran at",
                    "ratios are the median of the rounds' ratios (each round times every "
                    "contender back to back) with a 95% bootstrap interval over rounds; 'no "
                    "change' means the interval stays within 2% of 1; against the grid's best, "
                    "cross-fitted: each half of the rounds (odd, even) is compared with the "
                    "finalist fastest on the other half (the hindsight pick, fastest on all "
                    "rounds, is in the JSON as vs_grid_best_hindsight)"],
           beds=list(data))


if __name__ == "__main__":
    main()
