"""Does `--budget` hold (issue #11): wall time / budget on every bed x size x budget.

For each bed (tmpfs, the disk, the latfs NFS-like bed, the one-spindle hdd bed), each
repository size and each budget, one whole calibration as `git-tune calibrate` runs it
(probe included: it counts against the budget), timed from the probe's start to the
record. The promise is wall / budget <= 1.25 in every cell. Each cell also says which
keys real git decided (a trial with its full runs), and for the keys the budget left at
Git's default, how many seconds more would have decided the first of them.

    python3 bench/calibrate_speed.py [--tiny] [--beds disk latfs-nfs] [--sizes 3000 20000]
                                     [--budgets 10 20 60] [--quality [--repeat 2]
                                     [--reuse-grid]] [--settled]

With --quality, each cell also says what the sequence a clone lives with (the whole tree
written, then the next git status -uno) takes under the calibration's checkout values,
against Git's defaults and against the best worker count of a grid (1-32) timed on that
repository beforehand.

With --settled, the bed is written back (sync, untimed) before every cell and before each
run of the quality grid: a day-old checkout, and no run paying for the write-back of the
one before (on the hdd bed, a grid of single runs without it put 4 workers slower than 1
and 16 twice as fast: the flush's timing, not git's).

A run over some beds keeps the other beds' rows of the last run in bench/results, each
labelled with its own commit; a run over some cells of a bed keeps its other cells only
where they were of this code.
"""
import json
import os
import statistics
import time
from typing import Dict, Optional

from common import (RESULTS, ALL_BEDS, BEDS, BedUnavailable, bed_latency, parser, repo_on,
                    report, same_code, settler, storage, tracked)
from part_fidelity import COUNTS, first_run, grid

from git_tune.advisor.decide.recommend import recommend
from git_tune.advisor.measure import calibrate
from git_tune.advisor.measure.ab import STOPPED_SLOWER
from git_tune.advisor.measure.record import Options
from git_tune.models import stats

PROMISE = 1.25
# A whole-tree write of 100,000 files on the NFS-like bed, one file at a time, takes
# longer than a git run's usual limit (gitbench.RUN_TIMEOUT).
WHOLE_TREE_LIMIT = 3 * 3600


def timed_calibration(repo: str, budget: float):
    t0 = time.monotonic()
    report = calibrate.probe_repository(repo, budget)
    # Where the budget went: the probe's own timings, then each phase's end (the budget's
    # ticks), in seconds from the probe's start.
    phases = [[f"probe {k}", round(v, 2)] for k, v in report.timings.items()]

    def tick(phase, _):
        # A phase's ticks in a row (one per git run) are one entry: when it ended.
        t = round(time.monotonic() - t0, 2)
        if phases and phases[-1][0] == phase:
            phases[-1][1] = t
        else:
            phases.append([phase, t])
    record = calibrate.calibrate(report, Options(budget=budget), store=False, progress=tick)
    wall = time.monotonic() - t0
    settings = recommend(record).settings()
    # A key is decided when its main comparison ran its full runs, stopped clearly apart
    # in 3 pairs (clearly faster), or was dropped clearly slower after its first pairs.
    decided = sorted(k for k, t in record.trials.items() if t.comparisons
                     and (t.main.stopped == STOPPED_SLOWER
                          or stats.conclusive(t.main.times_default, t.main.times_candidate)))
    # Kept without an A/B: trials not run, for the reason each record gives (the engine
    # measured no gain, pack.threads' quick pass, git's own count of stat-data re-reads).
    # The data's field keeps its first name, "kept_by_prediction".
    kept = sorted(k for k, t in record.trials.items() if t.why_not_run)
    return wall, decided, kept, dict(record.unfinished), settings, phases, record.notes


class Quality:
    """The sequence a clone lives with, on the whole tree (every file written, then the
    next git status -uno, in a scratch clone): Git's defaults, each worker count of a grid
    (timed once per bed and size, `rounds` times in turn), and each calibration's values.

    `stored`: a grid of this bed and size from an earlier run (--reuse-grid; a 100,000-file
    grid on the NFS-like bed takes over half an hour a round). Then each calibration's
    count and the stored grid's best are timed again here, side by side, `rounds` times,
    after one untimed run (as the grid's first):
    the ratio to the grid's best is of this run, the ratio to Git's default is scaled
    from the stored grid's (said so in the cell's data)."""

    def __init__(self, repo: str, scratch: str, rounds: int, settle=None,
                 stored: Optional[Dict[int, float]] = None):
        from git_tune.advisor.measure import gitbench
        from git_tune.probes.repo import locate
        os.mkdir(scratch)
        ws = gitbench.Workspace(locate(repo), scratch)
        clone = ws.clone()
        self.work = gitbench.WholeTreeWrite(clone, tracked(clone), scratch)
        self.rounds, self.settle, self.reused = rounds, settle, stored is not None
        with gitbench.deadline(WHOLE_TREE_LIMIT):
            if stored is None:
                stored = grid(self.work, COUNTS, rounds, settle)
            else:
                # As the grid's own: the clone has no directories yet. Without it the
                # calibration's count, timed first, paid for them: on the NFS-like bed at
                # 20,000 files 8 workers took 51.6 s in their first run, 46.9 and 47.7 s
                # in the next two rounds (16 workers 46.0, 43.2, 44.4 s), and a cell of
                # one round had put them at 1.29 of 16.
                first_run(self.work, COUNTS)
        self.grid = stored
        self.best = min(self.grid, key=self.grid.get)

    def _run(self, settings) -> float:
        return self.work.run(settings, settle=self.settle)

    @staticmethod
    def settings(values):
        w = int(values.get("checkout.workers", "1"))
        return {} if w == 1 else {"checkout.workers": str(w), "checkout.thresholdForParallelism":
                                  values.get("checkout.thresholdForParallelism", "100")}

    def of(self, values) -> dict:
        """git-tune's values against Git's defaults and the grid's best count."""
        w = int(values.get("checkout.workers", "1"))
        from git_tune.advisor.measure import gitbench
        best = {"checkout.workers": str(self.best), "checkout.thresholdForParallelism": "100"}
        with gitbench.deadline(WHOLE_TREE_LIMIT):
            if self.reused and w != self.best:
                mine, theirs = [], []
                for r in range(self.rounds):
                    pair = [(mine, self.settings(values)), (theirs, best)]
                    for times, s in (pair if r % 2 == 0 else pair[::-1]):
                        times.append(self._run(s))
                ratio = statistics.median(m / t for m, t in zip(mine, theirs))
                mine_s = self.grid[self.best] * ratio
            else:
                mine_s = self.grid[w] if w in self.grid else statistics.median(
                    [self._run(self.settings(values)) for _ in range(2)])
                ratio = mine_s / self.grid[self.best]
        # Git's default is itself by definition (a ratio scaled across runs is not 1).
        vs_default = 1.0 if w == 1 else self.grid[1] / mine_s
        return {"workers": w, "seconds": mine_s, "vs_default": vs_default,
                "vs_grid_best": ratio, "grid_best": self.best, "grid": self.grid,
                "grid_reused": self.reused}


def stored_grid(bed: str, files: int) -> Optional[Dict[int, float]]:
    """The whole-tree grid of an earlier run's cell of this bed and size, if any."""
    try:
        with open(os.path.join(RESULTS, "calibrate_speed.json")) as f:
            cells = json.load(f).get("data", {}).get(bed, {})
    except (OSError, ValueError):
        return None
    for cell, v in cells.items():
        q = v.get("quality") if isinstance(v, dict) else None
        if cell.split("|")[0] == str(files) and q and q.get("grid"):
            return {int(w): t for w, t in q["grid"].items()}
    return None


def _with_other_cells(rows, data, sizes, budgets):
    """A run over some sizes and budgets keeps the stored cells of the others on its beds
    (the 100,000-file cells take long enough to be run on their own), where the bed's
    stored run was of this code (common.same_code): cells of other code are dropped,
    never shown beside this run's."""
    try:
        with open(os.path.join(RESULTS, "calibrate_speed.json")) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return rows, data
    ours = {bed for bed in data
            if same_code(old.get("runs", {}).get(bed, {}).get("commit") or "")}
    kept = lambda bed, files, budget: bed in ours and (int(files) not in sizes
                                                       or float(budget) not in budgets)
    width = len(rows[0]) if rows else 0
    rows = [list(r) + ["-"] * (width - len(r)) for r in old.get("rows", [])
            if r[0] in data and kept(r[0], r[1], str(r[2]).split()[0])] + list(rows)
    for bed in data:
        data[bed] = {**{cell: v for cell, v in old.get("data", {}).get(bed, {}).items()
                        if kept(bed, *cell.split("|"))}, **data[bed]}
    order = list(data)
    rows.sort(key=lambda r: (order.index(r[0]), int(r[1]), float(str(r[2]).split()[0])))
    return rows, data


def _quality_cell(q) -> str:
    if not q:
        return "-"
    return (f"{q['workers']} workers: {q['vs_default']:.2f}x Git's default, "
            f"{q['vs_grid_best']:.2f} of the grid's best ({q['grid_best']})")


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", choices=ALL_BEDS, default=list(BEDS))
    p.add_argument("--sizes", nargs="+", type=int)
    p.add_argument("--budgets", nargs="+", type=float)
    p.add_argument("--settled", action="store_true",
                   help="write the generated repository back (sync) before its cells")
    p.add_argument("--reuse-grid", action="store_true",
                   help="with --quality: the stored grid of each bed and size; only the "
                        "calibration's count and the grid's best are timed again")
    p.add_argument("--quality", action="store_true",
                   help="also time the whole tree written then git status under each "
                        "calibration's values, Git's defaults and a grid of worker counts")
    args = p.parse_args()
    sizes = args.sizes or ([300] if args.tiny else [3000, 20000])
    budgets = args.budgets or ([5] if args.tiny else [10, 20, 60])
    beds = ["disk"] if args.tiny else args.beds
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=8192) as mnt:
                data[kind] = {}
                for files in sizes:
                    repo = repo_on(kind, mnt, files, name=f"repo{files}")
                    sync = settler(mnt, args.settled)
                    stored = stored_grid(kind, files) if args.reuse_grid else None
                    quality = (Quality(repo, os.path.join(mnt, f"quality{files}"),
                                       1 if args.tiny else args.repeat or 2, sync, stored)
                               if args.quality or args.tiny else None)
                    for budget in budgets:
                        if sync:
                            # Untimed: the repository (and the quality grid's writes, and
                            # the cell before) written back, as a day-old checkout is: the
                            # cell times git, not the flush of what the benchmark wrote.
                            sync()
                        wall, decided, kept, unfinished, values, phases, said = \
                            timed_calibration(repo, budget)
                        short = [s for s in unfinished.values() if s is not None]
                        q = quality.of(values) if quality else None
                        data[kind][f"{files}|{budget:g}"] = {
                            "wall": wall, "decided": decided, "kept_by_prediction": kept,
                            "unfinished": unfinished, "values": values, "quality": q,
                            "phases": phases, "notes": list(said)}
                        rows.append((kind, files, f"{budget:g} s", f"{wall:.1f} s",
                                     f"{wall / budget:.2f}" + ("" if wall <= PROMISE * budget
                                                               else " OVER"),
                                     ", ".join(decided) or "-", ", ".join(kept) or "-",
                                     (f"{len(unfinished)} (first: +{min(short):.0f} s)"
                                      if short else str(len(unfinished))),
                                     _quality_cell(q)))
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    if (args.sizes or args.budgets) and not args.tiny:
        rows, data = _with_other_cells(rows, data, sizes, budgets)
    worst = {b: max(float(r[4].split()[0]) for r in rows if r[0] == b)
             for b in beds if any(r[0] == b for r in rows)}
    report("calibrate_speed", "Whole calibration (probe included) against its --budget: "
           "bed x repository size x budget",
           ("bed", "files", "budget", "wall", "wall / budget", "decided by real git",
            "kept without an A/B (the engine's prediction or git's own count)", "left at Git's default",
            "whole tree then status (--quality)"),
           rows, data, args.tiny,
           notes + [f"{b}: worst wall / budget {w:.2f}" for b, w in worst.items()]
           + [f"promise: wall / budget <= {PROMISE} in every cell",
              "decided: the key's trial ran its full runs, or stopped clearly faster or "
                    "slower; left at Git's default: "
                    "trials the budget did not fit (+N s: what the closest one needed more)"],
           beds=beds)


if __name__ == "__main__":
    main()
