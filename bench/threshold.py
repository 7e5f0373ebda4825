"""checkout.thresholdForParallelism: N changed files, 8 workers vs sequential (seed 001's sweep).

Seed 001 (local SSD, `git checkout -f` after removing N random files, 10
workers vs sequential): 1.00x at 10, 1.11x at 100, 1.90x at 1000, 2.26x
at 2000; Git's default threshold of 100 came from it.

    python3 bench/threshold.py [--tiny]
"""
import os
import random

from common import bed_latency, BedUnavailable, ab, median, parser, repo_on, report, storage, timed

SIZES = (10, 50, 100, 200, 500, 1000, 2000)


def main():
    args = parser(__doc__).parse_args()
    sizes = (10, 100) if args.tiny else SIZES
    files = 500 if args.tiny else 10000
    repeat = args.repeat or (5 if args.tiny else 15)
    beds = ("disk",) if args.tiny else ("disk", "tmpfs")
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                repo = repo_on(kind, mnt, files)
                names = [l for l in os.popen(f"git -C '{repo}' ls-files").read().split("\n") if l]
                rng = random.Random(1)
                for n in sizes:
                    pick = rng.sample(names, min(n, len(names)))

                    def remove():
                        for p in pick:
                            try:
                                os.unlink(os.path.join(repo, p))
                            except FileNotFoundError:
                                pass
                    cmd = ["git", "checkout", "-q", "-f"]
                    seq = lambda: timed(cmd, repo, {"checkout.workers": "1"}, setup=remove)
                    par = lambda: timed(cmd, repo, {"checkout.workers": "8",
                                                    "checkout.thresholdForParallelism": "0"}, setup=remove)
                    t_seq, t_par = ab(seq, par, repeat)
                    rows.append((kind, n, f"{median(t_seq) * 1e3:.0f} ms", f"{median(t_par) * 1e3:.0f} ms",
                                 f"{median(t_seq) / median(t_par):.2f}x"))
                    data[f"{kind}-{n}"] = [t_seq, t_par]
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    report("threshold", f"Restoring N removed files: 8 workers vs sequential (median of {repeat}, interleaved)",
           ("bed", "files", "sequential", "8 workers", "speedup"), rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
