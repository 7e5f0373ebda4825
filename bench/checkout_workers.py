"""Checkout and clone, sequential vs N workers, on each storage bed, cold cache (seed 001).

Seed 001: 2.2-2.5x on a local SSD (10 workers), 4.1-4.4x on NFS/EFS (32
workers), nothing on a spinning disk. Here: every tracked file removed and
restored by `git checkout -f HEAD`, and a local `git clone --no-hardlinks`,
both on the bed, caches dropped before each run (root).

    python3 bench/checkout_workers.py [--tiny]
"""
import os
import shutil
import subprocess

from common import bed_latency, beds_for, BedUnavailable, ab, median, parser, repo_on, report, storage, timed

WORKERS = {"tmpfs": 8, "disk": 8, "latfs-nfs": 32, "hdd": 8}


def remove_tracked(repo: str) -> None:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=repo, stdout=subprocess.PIPE,
                           text=True, check=True).stdout.split("\0")
    for n in filter(None, names):
        try:
            os.unlink(os.path.join(repo, n))
        except FileNotFoundError:
            pass


def main():
    args = parser(__doc__).parse_args()
    files = 300 if args.tiny else 2000
    repeat = args.repeat or (1 if args.tiny else 5)
    cold = os.geteuid() == 0
    rows, data, notes = [], {}, []
    if not cold:
        notes.append("not root: caches stay warm, so these are not the seed's cold numbers")
    for kind in beds_for(args.tiny):
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                repo = repo_on(kind, mnt, files)
                w = WORKERS[kind]
                par = {"checkout.workers": str(w), "checkout.thresholdForParallelism": "0"}
                seq = {"checkout.workers": "1"}
                cmd = ["git", "checkout", "-q", "-f", "HEAD"]
                run = lambda s: timed(cmd, repo, s, cold, setup=lambda: remove_tracked(repo))
                t_seq, t_par = ab(lambda: run(seq), lambda: run(par), repeat)
                rows.append((kind, "checkout (all files)", w, f"{median(t_seq):.2f} s",
                             f"{median(t_par):.2f} s", f"{median(t_seq) / median(t_par):.2f}x"))
                dest = os.path.join(mnt, "clone")

                def clone(s):
                    shutil.rmtree(dest, ignore_errors=True)
                    return timed(["git", "clone", "-q", "--no-hardlinks", repo, dest], mnt, s, cold)
                c_seq, c_par = ab(lambda: clone(seq), lambda: clone(par), repeat)
                rows.append((kind, "clone --no-hardlinks", w, f"{median(c_seq):.2f} s",
                             f"{median(c_par):.2f} s", f"{median(c_seq) / median(c_par):.2f}x"))
                data[kind] = {"checkout": [t_seq, t_par], "clone": [c_seq, c_par], "workers": w}
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    report("checkout_workers", f"Parallel checkout on {files} files, {'cold' if cold else 'warm'} cache "
           f"(median of {repeat}, interleaved)", ("bed", "operation", "workers", "sequential", "parallel",
                                                   "speedup"), rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
