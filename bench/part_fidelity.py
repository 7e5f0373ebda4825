"""Does a part of the repository decide checkout.workers as the whole tree does (issue #30)?

On each bed and repository size, a generated repository; for every worker count of a
grid, the sequence a clone leaves the user with (every file written, then the next `git
status -uno`) timed on the whole tree and on part repositories (gitbench.Workspace.part:
runs of consecutive entries spread over the index, the user's objects, HEAD unborn) of a
few sizes, a part's runs with the write-back they leave (gitbench.PartWrite), as
calibration times them. A part is timed with the counts calibration times on it (at most one worker
per keys/checkout.py's PART_FILES_PER_WORKER files), in rounds, each a decision of its
own: the count that round found fastest. Each row says how often that decision, taken on
the whole tree, is within 1.15x of the whole tree's best count (the issue's bar) and how
often it agrees on parallel against sequential; and each count's median speedup over
sequential on the part and on the whole. Part repositories cost what git's start costs
there, not the repository's size: their making is timed too.

    python3 bench/part_fidelity.py [--tiny] [--beds latfs-nocache disk] [--files 4000 20000]
                                   [--parts 48 100 300] [--repeat 5] [--whole-rounds 1]
                                   [--settled]
"""
import os
import statistics
import time

from common import (ALL_BEDS, BedUnavailable, bed_latency, parser, repo_on, report,
                    settler, storage)

from git_tune.advisor.keys.checkout_trial import PART_FILES_PER_WORKER
from git_tune.advisor.measure import gitbench
from git_tune.models import stats
from git_tune.models.stats import MIN_EFFECT
from git_tune.probes.repo import locate

COUNTS = (1, 2, 4, 8, 16, 32)


def settings(w: int):
    return {} if w == 1 else {"checkout.workers": str(w), "checkout.thresholdForParallelism": "0"}


def first_run(work: gitbench.WholeTreeWrite, counts) -> None:
    """Untimed, before any timed run of a clone: it makes the tree's directories, which
    later runs find made (the removal between runs leaves them); with the most workers,
    the quickest."""
    work.run(settings(max(counts)))


def grid_runs(work: gitbench.WholeTreeWrite, counts, rounds: int, settle=None):
    """Seconds per worker count, one run a round: first_run, then rounds in which every
    count runs once, in turn (the order reversed every other round). settle(): called,
    untimed, in each run between the removal of the files and their write (a sync, so
    that on a disk no run pays for the write-back of the one before, nor of its own
    removal: on the hdd bed at 100,000 files, a sync before the removal left the
    removal's write-back of 100,000 unlinks to the timed write)."""
    first_run(work, counts)
    times = {w: [] for w in counts}
    for r in range(rounds):
        for w in (counts if r % 2 == 0 else counts[::-1]):
            times[w].append(work.run(settings(w), settle=settle))
    return times


def medians(runs):
    """Median seconds per worker count, of grid_runs' runs."""
    return {w: statistics.median(t) for w, t in runs.items()}


def grid(work: gitbench.WholeTreeWrite, counts, rounds: int, settle=None):
    """Median seconds per worker count (grid_runs)."""
    return medians(grid_runs(work, counts, rounds, settle))


def speedups(med):
    return {w: med[1] / t for w, t in med.items()}


# The bar: git-tune's count within this of the grid's best, on the whole tree.
WITHIN = 1.15


def part_counts(n: int):
    """The counts calibration times on a part of n entries (keys/checkout.py)."""
    top = max(2, n // PART_FILES_PER_WORKER)
    return tuple(c for c in COUNTS if c <= top)


def size_rows(kind: str, mnt: str, files: int, parts, rounds: int, whole_rounds: int,
              whole_counts, settle):
    repo = repo_on(kind, mnt, files, name=f"repo{files}")
    scratch = os.path.join(mnt, f"scratch{files}")
    os.mkdir(scratch)
    ws = gitbench.Workspace(locate(repo), scratch)
    whole = gitbench.WholeTreeWrite(ws.clone(), _tracked(ws), scratch)
    w_runs = grid_runs(whole, whole_counts, whole_rounds, settle)
    w_med = medians(w_runs)
    best = min(w_med, key=w_med.get)
    parallel = w_med[best] * (1 + MIN_EFFECT) < w_med[1]
    # The best median may be a draw: on the hdd bed one count's whole-tree write of
    # 100,000 files ranged over 6x from run to run (stalls whatever the count), so the rows
    # say whether the best count beats one worker beyond the rounds' noise.
    beyond = stats.compare(w_runs[1], w_runs[best]) if best != 1 and whole_rounds > 1 else None
    rows, data = [], {"whole": w_med, "whole_runs": w_runs, "best": best, "parallel": parallel,
                      "best_vs_sequential": vars(beyond) if beyond else None, "parts": {}}
    rows.append((kind, files, "whole", "-", _cells(speedups(w_med)), _best(best, beyond),
                 "-", "-"))
    for n in parts:
        t0 = time.monotonic()
        part = ws.part(min(n, files - 1))
        made = time.monotonic() - t0
        counts = part_counts(len(part.paths))
        runs = grid_runs(gitbench.PartWrite(part.worktree, part.paths, scratch), counts,
                         rounds, settle)
        picks = [min(counts, key=lambda w: runs[w][r]) for r in range(rounds)]
        within = [w_med[p] <= w_med[best] * WITHIN for p in picks if p in w_med]
        same_kind = [(p != 1) == parallel for p in picks]
        p_med = medians(runs)
        rows.append((kind, files, f"part {len(part.paths)}", f"{made:.2f} s",
                     _cells(speedups(p_med)), ", ".join(map(str, picks)),
                     f"{sum(within)} of {len(within)}",
                     f"{sum(same_kind)} of {len(same_kind)}"))
        data["parts"][str(len(part.paths))] = {
            "made_seconds": made, "counts": counts, "runs": runs, "picks": picks,
            "within": sum(within), "same_kind": sum(same_kind), "rounds": rounds}
    return rows, data


def bed_rows(kind: str, sizes, parts, rounds: int, whole_rounds: int, whole_counts,
             settled: bool):
    with storage(kind, bed_latency(False), size_mb=8192) as mnt:
        settle = settler(mnt, settled)
        rows, data = [], {}
        for files in sizes:
            r, d = size_rows(kind, mnt, files, parts, rounds, whole_rounds, whole_counts,
                             settle)
            rows += r
            data[str(files)] = d
        return rows, data


def _tracked(ws: gitbench.Workspace):
    listed = gitbench.run_git(["ls-files", "-z"], ws.layout.worktree, gitbench.config_env({}),
                              hooks=False, output=True, repo=ws.layout).stdout
    return [p for p in listed.split("\0") if p]


def _best(best: int, beyond) -> str:
    """The whole tree's best count, and (over several rounds) whether it beats one worker
    beyond noise: the speedup's 95% interval."""
    if beyond is None:
        return str(best)
    return (f"{best} ({beyond.verdict} vs 1: {1 / beyond.ratio:.2f}x "
            f"[{1 / beyond.high:.2f}-{1 / beyond.low:.2f}])")


def _cells(s) -> str:
    return ", ".join(f"{w}: {x:.2f}x" for w, x in sorted(s.items()) if w != 1)


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", default=["latfs-nocache"], choices=ALL_BEDS)
    p.add_argument("--files", type=int, nargs="+", default=[4000])
    p.add_argument("--parts", type=int, nargs="*", default=[48, 100, 300],
                   help="part sizes (none: the whole tree's grid only)")
    p.add_argument("--whole-rounds", type=int, default=1,
                   help="rounds of the whole tree's grid (one run a count a round)")
    p.add_argument("--settled", action="store_true",
                   help="sync the bed, untimed, before every run")
    args = p.parse_args()
    sizes = [300] if args.tiny else args.files
    parts = [40] if args.tiny else args.parts
    rounds = args.repeat or (2 if args.tiny else 5)
    # The whole tree on slow storage takes minutes a run.
    whole_counts = (1, 4) if args.tiny else COUNTS
    beds = ["tmpfs"] if args.tiny else args.beds
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            r, d = bed_rows(kind, sizes, parts, rounds, args.whole_rounds, whole_counts,
                            args.settled)
            rows += r
            data[kind] = d
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    for kind, what in (("latfs-nfs", "attributes and entries cached 1 s (NFS lookupcache="
                        "positive)"), ("latfs-noac", "attributes never cached (NFS actimeo=0)"),
                       ("latfs-nocache", "no attribute or entry caching (NFS actimeo=0 and "
                        "lookupcache=none)")):
        if kind in data:
            notes.append(f"{kind}: 1 ms per metadata operation, {what}")
    report("part_fidelity", "The whole tree written, then git status -uno: the decision on "
           "a part against the whole tree", ("bed", "files", "timed on", "part made in",
                                              "median speedup over sequential",
                                              "each round's pick",
                                              f"pick on the whole within {WITHIN}x of its best",
                                              "parallel or not, as the whole"),
           rows, data, args.tiny, notes, beds=beds)


if __name__ == "__main__":
    main()
