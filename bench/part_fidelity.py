"""Does a part of the repository decide checkout.workers as the whole tree does (issue #30)?

On each bed, a generated repository; for every worker count of a grid, the sequence a
clone leaves the user with (every file written, then the next `git status -uno`) timed
on the whole tree and on part repositories (gitbench.Workspace.part: runs of consecutive
entries spread over the index, the user's objects, HEAD unborn) of a few sizes.
Each cell is the median of interleaved rounds; the table gives each count's speedup over
sequential on the part and on the whole, which count each picks, and how far the part's
pick is from the whole's best (on the whole tree). Part repositories cost what git's
start costs there, not the repository's size: their making is timed too.

    python3 bench/part_fidelity.py [--tiny] [--beds latfs-nfs disk] [--files 4000]
                                   [--parts 100 300] [--repeat 2]
"""
import os
import statistics
import time

from common import BEDS, BedUnavailable, bed_latency, parser, repo_on, report, storage
from testbeds.slow import NFS_NOCACHE as NOCACHE

from git_tune.advisor.measure import gitbench
from git_tune.probes.repo import locate

COUNTS = (1, 2, 4, 8, 16, 32)


def settings(w: int):
    return {} if w == 1 else {"checkout.workers": str(w), "checkout.thresholdForParallelism": "0"}


def grid(work: gitbench.WholeTreeWrite, counts, rounds: int, settle=None):
    """Median seconds per worker count: a pilot first (it makes the directories, which
    later runs find made; with the most workers, the quickest), then rounds in which
    every count runs once, in turn. settle(): called, untimed, before each run (a sync,
    so that on a disk no run pays for the write-back of the one before)."""
    work.run(settings(max(counts)))
    times = {w: [] for w in counts}
    for r in range(rounds):
        for w in (counts if r % 2 == 0 else counts[::-1]):
            if settle:
                settle()
            times[w].append(work.run(settings(w)))
    return {w: statistics.median(t) for w, t in times.items()}


def speedups(med):
    return {w: med[1] / t for w, t in med.items()}


def bed_rows(kind: str, files: int, parts, rounds: int, whole_counts):
    with storage(kind, bed_latency(False) if kind != "latfs-nfs" else NOCACHE,
                 size_mb=2048) as mnt:
        repo = repo_on(kind, mnt, files)
        scratch = os.path.join(mnt, "scratch")
        os.mkdir(scratch)
        ws = gitbench.Workspace(locate(repo), scratch)
        whole = gitbench.WholeTreeWrite(ws.clone(), _tracked(ws), scratch)
        w_med = grid(whole, whole_counts, 1)
        best = min(w_med, key=w_med.get)
        rows, data = [], {"whole": w_med, "parts": {}}
        rows.append((kind, files, "whole", "-", _cells(speedups(w_med)), best, "1.00"))
        for n in parts:
            t0 = time.monotonic()
            part = ws.part(n)
            made = time.monotonic() - t0
            p_med = grid(gitbench.WholeTreeWrite(part.worktree, part.paths, scratch), COUNTS,
                         rounds)
            pick = min(p_med, key=p_med.get)
            off = w_med[pick] / w_med[best] if pick in w_med else None
            rows.append((kind, files, f"part {len(part.paths)}", f"{made:.2f} s",
                         _cells(speedups(p_med)), pick,
                         f"{off:.2f}" if off is not None else "not timed whole"))
            data["parts"][str(n)] = {"made_seconds": made, "medians": p_med, "pick": pick,
                                     "whole_ratio_of_pick": off}
        return rows, data


def _tracked(ws: gitbench.Workspace):
    listed = gitbench.run_git(["ls-files", "-z"], ws.layout.worktree, gitbench.config_env({}),
                              hooks=False, output=True, repo=ws.layout).stdout
    return [p for p in listed.split("\0") if p]


def _cells(s) -> str:
    return ", ".join(f"{w}: {x:.2f}x" for w, x in sorted(s.items()) if w != 1)


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", default=["latfs-nfs"], choices=BEDS)
    p.add_argument("--files", type=int, default=4000)
    p.add_argument("--parts", type=int, nargs="+", default=[100, 300])
    args = p.parse_args()
    files = 300 if args.tiny else args.files
    parts = [40] if args.tiny else args.parts
    rounds = args.repeat or (1 if args.tiny else 2)
    # The whole tree on slow storage takes minutes a run: the counts the parts pick
    # and their neighbours, once each.
    whole_counts = (1, 4) if args.tiny else COUNTS
    beds = ["tmpfs"] if args.tiny else args.beds
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            r, d = bed_rows(kind, files, parts, rounds, whole_counts)
            rows += r
            data[kind] = d
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    if "latfs-nfs" in data:
        notes.append("latfs-nfs: 1 ms per metadata operation, no attribute or entry caching "
                     "(NFS with actimeo=0 and lookupcache=none)")
    report("part_fidelity", f"The whole tree written, then git status -uno: whole tree vs "
           f"parts, {files} files", ("bed", "files", "timed on", "part made in",
                                     "speedup over sequential", "picks", "pick on the whole / best"),
           rows, data, args.tiny, notes, beds=beds)


if __name__ == "__main__":
    main()
