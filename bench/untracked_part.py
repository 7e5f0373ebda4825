"""Does a part decide core.untrackedCache as the whole work tree does (issue #30)?

Where a whole `git status` with untracked files does not fit the budget left, calibration
times the untracked cache on a part of the work tree (keys/untracked.py _trial_on_part). For
each bed and repository size here: a generated repository, and `git status --porcelain`
(untracked files shown) on an index copy without the cache against one with it, real git,
interleaved (ab.run, unbounded: --repeat pairs after a warm-up pair), on the whole work tree
and on parts of a few sizes (gitbench.Part, its files written a second before its index is
refreshed, as calibration makes them). Each row: the status's speedup with the cache, its
95% interval and verdict, and whether the part's verdict is the whole tree's.

    python3 bench/untracked_part.py [--tiny] [--beds hdd latfs-nfs disk] [--files 20000 100000]
                                    [--parts 300 3000] [--repeat 10] [--settled]
"""
import os
import time

from common import (ALL_BEDS, BedUnavailable, bed_latency, parser, repo_on, report,
                    settler, storage)

from git_tune.advisor.keys import untracked
from git_tune.advisor.measure import ab, gitbench
from git_tune.probes.repo import locate

OFF, ON = {untracked.KEY: "false"}, {untracked.KEY: "true"}


def compare(where, ws: gitbench.Workspace, part, repeat: int):
    """Status with untracked files without the cache against with it, in `where` (the
    repository's layout or a part), on index copies of its index."""
    copies = [ws.index_copy(f"uc-{v}", untracked.index_shape(None, v), part)
              for v in ("false", "true")]
    run_off, run_on = (gitbench.status(where, c, untracked=True) for c in copies)
    return ab.run("untracked", OFF, ON, lambda: run_off(OFF), lambda: run_on(ON),
                  ab.Runs(repeat, stop_early=False, extensions=0))


def _cell(c) -> str:
    e = c.estimate
    return f"{1 / e.ratio:.2f}x [{1 / e.high:.2f}-{1 / e.low:.2f}]"


def size_rows(kind: str, mnt: str, files: int, parts, repeat: int, settle):
    repo = repo_on(kind, mnt, files, name=f"repo{files}")
    scratch = os.path.join(mnt, f"scratch{files}")
    os.mkdir(scratch)
    layout = locate(repo)
    ws = gitbench.Workspace(layout, scratch)
    if settle:
        settle()
    t0 = time.monotonic()
    whole = compare(layout, ws, None, repeat)
    took = time.monotonic() - t0
    rows = [(kind, files, "whole", "-", f"{took:.1f} s", _cell(whole),
             whole.estimate.verdict, "-")]
    data = {"whole": {"seconds": took, "default": whole.times_default,
                      "candidate": whole.times_candidate, "verdict": whole.estimate.verdict,
                      "ratio": whole.estimate.ratio}, "parts": {}}
    for n in parts:
        t0 = time.monotonic()
        part = ws.part(min(n, files))
        part.written()
        made = time.monotonic() - t0
        if settle:
            settle()
        t0 = time.monotonic()
        c = compare(part, ws, part, repeat)
        took = time.monotonic() - t0
        same = c.estimate.verdict == whole.estimate.verdict
        rows.append((kind, files, f"part {len(part.paths)}", f"{made:.2f} s", f"{took:.1f} s",
                     _cell(c), c.estimate.verdict, "yes" if same else "no"))
        data["parts"][str(len(part.paths))] = {
            "made_seconds": made, "seconds": took, "default": c.times_default,
            "candidate": c.times_candidate, "verdict": c.estimate.verdict,
            "ratio": c.estimate.ratio, "same_verdict": same}
    return rows, data


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", default=["hdd", "latfs-nfs"], choices=ALL_BEDS)
    p.add_argument("--files", type=int, nargs="+", default=[20000])
    p.add_argument("--parts", type=int, nargs="*", default=[300, 3000])
    p.add_argument("--settled", action="store_true",
                   help="sync the bed, untimed, before the whole tree's and each part's A/B")
    args = p.parse_args()
    sizes = [600] if args.tiny else args.files
    parts = [100] if args.tiny else args.parts
    repeat = args.repeat or (3 if args.tiny else 10)
    beds = ["tmpfs"] if args.tiny else args.beds
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=8192) as mnt:
                settle = settler(mnt, args.settled)
                data[kind] = {}
                for files in sizes:
                    r, d = size_rows(kind, mnt, files, parts, repeat, settle)
                    rows += r
                    data[kind][str(files)] = d
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    notes.append(f"each A/B: a warm-up pair, then {repeat} pairs interleaved (ABBA); the "
                 "speedup is the median ratio's inverse, with its 95% interval")
    report("untracked_part", "git status with untracked files, the untracked cache against "
           "none: the verdict on a part against the whole work tree",
           ("bed", "files", "timed on", "part made in", "A/B took",
            "speedup with the cache [95%]", "verdict", "the same verdict as the whole"),
           rows, data, args.tiny, notes, beds=beds)


if __name__ == "__main__":
    main()
