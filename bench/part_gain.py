"""How large must a part be to show parallel checkout's gain?

On each bed, a generated repository; for part sizes of 9 to 243 files (the entries a
part repository holds: runs of consecutive entries spread over the index,
gitbench.sample_entries), the files removed and written again by `git checkout-index
--stdin` with 1, 2, 4 and 8 workers, median of the rounds, interleaved. Where every file
is dear, a worker's start weighs on a small part: the gain it shows grows with the part
towards the tree's. keys/checkout_trial.py's PART_LEAST_WORKERS rests on this.

    python3 bench/part_gain.py [--tiny] [--beds latfs-nocache disk] [--files 4000]
                               [--repeat 3]
"""
import subprocess

from common import (ALL_BEDS, BedUnavailable, bed_latency, median, parser, remove, repo_on,
                    report, storage, timed)

from git_tune.advisor.measure.gitbench import PART_RUNS, sample_entries

SIZES = (9, 27, 81, 243)
COUNTS = (1, 2, 4, 8)


def written(repo: str, paths, workers: int) -> float:
    """The paths removed (untimed), then written again by git with `workers` workers."""
    settings = {"checkout.workers": str(workers), "checkout.thresholdForParallelism": "0"}
    return timed(["git", "checkout-index", "-f", "--stdin"], repo, settings,
                 setup=lambda: remove(repo, paths), stdin="".join(p + "\n" for p in paths))


def on_bed(kind: str, files: int, sizes, repeat: int, tiny: bool):
    rows, data = [], {}
    with storage(kind, bed_latency(tiny)) as mnt:
        repo = repo_on(kind, mnt, files)
        listed = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=repo, check=True,
                                capture_output=True, text=True).stdout.split("\0")[:-1]
        for n in sizes:
            paths = [r.split("\t", 1)[1] for r in sample_entries(listed, n, PART_RUNS)]
            times = {w: [] for w in COUNTS}
            for i in range(repeat):
                for w in (COUNTS if i % 2 == 0 else COUNTS[::-1]):
                    times[w].append(written(repo, paths, w))
            seq = median(times[1])
            rows.append((kind, files, len(paths), f"{seq * 1e3:.1f} ms",
                         *(f"{seq / median(times[w]):.2f}x" for w in COUNTS[1:])))
            data[f"{kind}|{len(paths)}"] = times
    return rows, data


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", default=["latfs-nocache", "disk"], choices=ALL_BEDS)
    p.add_argument("--files", type=int, default=4000)
    args = p.parse_args()
    sizes = SIZES[:2] if args.tiny else SIZES
    files = 300 if args.tiny else args.files
    repeat = args.repeat or (1 if args.tiny else 3)
    rows, data, notes = [], {}, []
    for kind in (args.beds[:1] if args.tiny else args.beds):
        try:
            r, d = on_bed(kind, files, sizes, repeat, args.tiny)
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
            continue
        rows += r
        data.update(d)
    notes.append("speed-up: sequential's median over the count's; each round writes every "
                 "count once, in alternating order")
    report("part_gain", f"A part's files written again by real git: the gain by part size "
           f"and worker count (median of {repeat})",
           ("bed", "files", "part", "sequential", "2 workers", "4 workers", "8 workers"),
           rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
