"""Generalisation: git-tune on storage nobody tuned it for, beds drawn at random.

Each bed is the latfs FUSE server with its delays drawn from a fixed seed (printed):
lookup/getattr, create, readdir and data (open, read, write; fsync twice it) each
0.1-3 ms on a log scale, drawn separately; the kernel's attribute cache and entry cache
each on (1 s) or off; 1-64 server threads. The repository is generated at one of the
sizes, flat (100 files a directory, one level) or deep (3 subdirectories and 4 files a
directory, as deep as it takes).

On each bed `recommend --budget B` runs (calibrate then recommend, timed), then real git
times the whole tree written (`git checkout -f` after every tracked file was removed)
then the next `git status -uno`, under Git's defaults, the recommendation, and every
worker count of the grid: each once to rank them, then the defaults, the recommendation
and the grid's two fastest interleaved for `--rounds` rounds (an arm is a worker count:
arms of the same count are timed once a round and shared, and the ranking's run counts
as one of its samples). The grid's best is the fastest of those by its median. Per size
the table gives the share of beds where: checkout.workers was decided by real git (a
verdict on a count, not runs the budget stopped within noise); the result is within
1.15 of the grid's best; it is slower than Git's defaults beyond noise
(models/stats.compare).

latfs delays LOOKUP and GETATTR alike (the high-level FUSE API hands both to getattr),
so the two draws are one here: the lookup draw stands for both.

    python3 bench/generalise.py [--tiny] [--seed 63] [--beds 12] [--only N ...]
                                [--sizes 4000 20000 100000] [--budget 20] [--rounds 3]
"""
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Dict, List

from common import (CODE, RESULTS, commit, median, parser, remove, report, same_code, storage,
                    timed, tracked)

from testbeds.slow import Latency

from git_tune import repogen
from git_tune.advisor.decide.recommend import recommend
from git_tune.advisor.keys.checkout_sweep import _engine_medians
from git_tune.advisor.measure import calibrate
from git_tune.advisor.measure.ab import STOPPED_BUDGET
from git_tune.advisor.measure.record import Options
from git_tune.models import stats

WORKERS = "checkout.workers"
NEXT_STATUS = ("git", "status", "-uno", "--porcelain")
GRID = (2, 4, 8, 16, 32)
NEAR_BEST = 1.15
# Where the grid's best beats Git's defaults by this much, the workers are at stake.
AT_STAKE = 1.3


@dataclass(frozen=True)
class Draw:
    """One bed of the family: the server's delays, its caches and threads, the repository."""
    lookup_us: int
    create_us: int
    readdir_us: int
    data_us: int
    attr_cache: bool
    entry_cache: bool
    threads: int
    files: int
    shape: str

    def latency(self) -> Latency:
        return Latency(lookup_us=self.lookup_us, open_us=self.data_us, read_us=self.data_us,
                       write_us=self.data_us, create_us=self.create_us,
                       fsync_us=2 * self.data_us, readdir_us=self.readdir_us,
                       attr_timeout=1.0 if self.attr_cache else 0.0,
                       entry_timeout=1.0 if self.entry_cache else 0.0, negative_timeout=0.0,
                       max_threads=self.threads)

    def name(self) -> str:
        caches = ("a" if self.attr_cache else "-") + ("e" if self.entry_cache else "-")
        return (f"L{self.lookup_us / 1e3:.1f} C{self.create_us / 1e3:.1f} "
                f"R{self.readdir_us / 1e3:.1f} D{self.data_us / 1e3:.1f} {caches} "
                f"t{self.threads} {self.shape}")


def draw(rng: random.Random, files: int, tiny: bool) -> Draw:
    lo, hi = (20, 200) if tiny else (100, 3000)

    def us() -> int:
        return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return Draw(us(), us(), us(), us(), rng.random() < 0.5, rng.random() < 0.5,
                int(math.exp(rng.uniform(0, math.log(64)))), files, rng.choice(("flat", "deep")))


def shape(d: Draw) -> repogen.RepoShape:
    if d.shape == "flat":
        return repogen.RepoShape(depth=1, width=max(1, d.files // 100), files=100)
    return repogen.RepoShape.for_files(d.files, width=3, files=4)


def whole_tree(repo: str, names: List[str], settings: Dict[str, str]) -> float:
    """Every tracked file removed (untimed), written by `git checkout -f`, then the next
    status: what a clone's checkout and the command after it cost."""
    t = timed(["git", "checkout", "-q", "-f"], repo, settings,
              setup=lambda: remove(repo, names))
    return t + timed(NEXT_STATUS, repo, settings)


def workers(settings: Dict[str, str]) -> int:
    return int(settings.get(WORKERS, "1"))


def grid_cell(w: int) -> Dict[str, str]:
    return {} if w == 1 else {WORKERS: str(w)}


def run_bed(d: Draw, budget: float, rounds: int) -> dict:
    with storage("latfs-nocache", d.latency()) as mnt:
        backing = os.path.join(os.path.dirname(mnt), "backing")
        repogen.generate(os.path.join(backing, "repo"), shape(d), limit=d.files)
        repo = os.path.join(mnt, "repo")
        names = tracked(repo)
        t0 = time.monotonic()
        record = calibrate.calibrate(calibrate.probe_repository(repo, budget), Options(budget=budget),
                               store=False)
        advised = recommend(record)
        rec = advised.settings()
        tune = time.monotonic() - t0
        # Decided: real git reached a verdict on a worker count (a count whose runs the
        # budget stopped within noise decides nothing).
        decided = (WORKERS in record.trials and WORKERS not in record.unfinished
                   and any(c.fails or c.stopped != STOPPED_BUDGET or
                           (c.estimate is not None and c.estimate.verdict != stats.NO_CHANGE)
                           for c in record.trials[WORKERS].comparisons))
        mine = workers(rec)
        # Every arm is a worker count: each count is timed once to rank the grid (and
        # git-tune's, where the grid lacks it), then each arm's count once a round,
        # interleaved. The ranking run is a sample of its count too.
        counts = list(dict.fromkeys((1,) + GRID + (mine,)))
        times_at = {w: [whole_tree(repo, names, grid_cell(w))] for w in counts}
        top = sorted(GRID, key=lambda w: times_at[w][0])[:2]
        arms = {"defaults": 1, "git-tune": mine, **{f"grid {w}": w for w in top}}
        distinct = list(dict.fromkeys(arms.values()))
        for i in range(rounds):
            for w in (distinct if i % 2 == 0 else distinct[::-1]):
                times_at[w].append(whole_tree(repo, names, grid_cell(w)))
        times = {k: times_at[w] for k, w in arms.items()}
    best = min((k for k in arms if k != "git-tune"), key=lambda k: median(times[k]))
    verdict = stats.compare(times["defaults"], times["git-tune"]).verdict
    return {"bed": d.name(), "draw": asdict(d), "commit": commit(), "tune_seconds": round(tune, 1),
            "decided": decided, "settings": rec, "best": best,
            "medians": {k: round(median(v), 3) for k, v in times.items()},
            "times": times, "versus_defaults": verdict,
            "unfinished": record.unfinished, "notes": list(record.notes),
            # Why the count: real git's comparisons, the engine's curve, the reason.
            "workers_reason": next((k.reason for k in advised.keys if k.key == WORKERS), None),
            "engine": {str(w): round(t, 4) for w, t in sorted(_engine_medians(
                record.sweeps["checkout"]).items())} if "checkout" in record.sweeps else None}


def summary(rows: List[dict], files: int) -> List:
    mine = [r for r in rows if r["draw"]["files"] == files]
    if not mine:
        return [files, 0, "-", "-", "-", "-"]
    best = lambda r: r["medians"][r["best"]]
    at_stake = [r for r in mine if r["medians"]["defaults"] / best(r) >= AT_STAKE]
    near = [r for r in mine if r["medians"]["git-tune"] <= best(r) * NEAR_BEST]
    slower = [r for r in mine if r["versus_defaults"] == stats.SLOWER]
    share = lambda part, whole: f"{len(part)}/{len(whole)}" if whole else "-"
    return [files, len(mine), share([r for r in at_stake if r["decided"]], at_stake),
            share(near, mine), share(slower, mine),
            f"{median([r['tune_seconds'] for r in mine]):.1f} s"]


def result_name(sizes: List[int]) -> str:
    """The result's name: "generalise" for a run that includes the 4,000-file beds,
    else one naming its sizes (generalise_20000), so a run of the larger sizes, hours a
    bed, is a table of its own commit beside the 4,000-file one."""
    return "generalise" if not sizes or 4000 in sizes else \
        "generalise_" + "_".join(map(str, sizes))


def stored(name: str, tiny: bool) -> List[dict]:
    """The beds of this code a run before this one stored (a run adds its beds to them,
    replacing a bed of the same draw), so a long run interrupted keeps the beds it
    finished. Beds of other code are dropped, never mixed with this code's."""
    path = os.path.join(RESULTS, f"{name}{'-tiny' if tiny else ''}.json")
    try:
        with open(path) as f:
            stored_run = json.load(f)
        return [bed for bed in stored_run["data"]["beds"] if same_code(bed.get("commit", ""))]
    except (OSError, ValueError, KeyError):
        return []


def write(name: str, rows: List[dict], sizes: List[int], seed: int, budget: float,
          rounds: int, tiny: bool, beds: int) -> None:
    table_rows = [summary(rows, n) for n in sizes]
    numbers = " ".join(str(r["number"]) for r in rows if "number" in r)
    notes = [f"seed {seed}, {len(rows)} beds, --budget {budget:g}, {rounds} interleaved "
             f"rounds; reproduce: python3 bench/generalise.py --seed {seed} --beds {beds} "
             f"--rounds {rounds} --sizes {' '.join(map(str, sizes))}"
             + (f" --only {numbers}" if numbers else "")]
    at = {c: [str(r.get("number", "?")) for r in rows if r["commit"] == c]
          for c in dict.fromkeys(r["commit"] for r in rows)}
    if len(at) > 1:
        notes.append("beds by the commit they ran at (one code: " + ", ".join(CODE)
                     + " the same at each): "
                     + "; ".join(f"{c}: {' '.join(n)}" for c, n in at.items()))
    for r in rows:
        m = r["medians"]
        notes.append(
            f"{r.get('number', '')} {r['bed']} ({r['draw']['files']} files): tuned in "
            f"{r['tune_seconds']} s, "
            f"workers decided {'yes' if r['decided'] else 'no'}, set "
            f"{r['settings'].get(WORKERS, '-')}, grid best {r['best']}, git-tune "
            f"{m['defaults'] / m['git-tune']:.2f}x Git's defaults and "
            f"{m['git-tune'] / m[r['best']]:.2f} of the grid's best (against the defaults: "
            f"{r['versus_defaults']}, {len(r['times']['git-tune'])} runs a side)")
    report(name, "git-tune on beds drawn at random (whole tree then next status)"
           + ("" if name == "generalise" else f", {', '.join(f'{n:,}' for n in sizes)} files"),
           ["files", "beds", "workers decided where >= 1.3x at stake",
            "within 1.15 of the grid's best", "slower than defaults", "median tune wall"],
           table_rows, {"beds": rows}, tiny, notes)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=63)
    p.add_argument("--beds", type=int, default=12, help="beds drawn (each a size in turn)")
    p.add_argument("--skip", type=int, default=0, help="draw and skip the first N beds")
    p.add_argument("--only", type=int, nargs="+", help="run only these beds (1 is the first)")
    p.add_argument("--sizes", type=int, nargs="+", default=[4000, 20000, 100000])
    p.add_argument("--budget", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    sizes = [300] if a.tiny else a.sizes
    beds = 1 if a.tiny else a.beds
    rounds = 1 if a.tiny else a.rounds
    budget = 5.0 if a.tiny else a.budget
    rng = random.Random(a.seed)
    name = result_name([] if a.tiny else a.sizes)
    rows = [] if a.tiny else stored(name, a.tiny)
    for i in range(beds):
        d = draw(rng, sizes[i % len(sizes)], a.tiny)
        if i < a.skip or (a.only and i + 1 not in a.only):
            continue
        print(f"bed {i + 1}/{beds}: {d.name()}, {d.files} files", flush=True)
        r = {"number": i + 1, **run_bed(d, budget, rounds)}
        same = [k for k, x in enumerate(rows) if x["draw"] == r["draw"]]
        if same:
            rows[same[0]] = r           # a bed run again keeps its place
        else:
            rows.append(r)
        print(f"  tuned in {r['tune_seconds']} s, workers decided: {r['decided']}, "
              f"medians {r['medians']}", flush=True)
        write(name, rows, sizes, a.seed, budget, rounds, a.tiny, beds)


if __name__ == "__main__":
    main()
