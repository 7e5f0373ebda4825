"""Seed 002's workload: 100,000 x 4 KiB files, 10 per directory: create, read, remove, sync included.

The engine's kernel against `tar` doing the same on the same bed: untar a
tarball of the tree (create), tar it to /dev/null (read), rm -rf (remove),
with a sync after the writes in both.

    python3 bench/smallfile.py [--tiny]
"""
import os
import subprocess
import tempfile
import time

from common import BedUnavailable, bed_latency, drop_caches, parser, report, storage

from git_tune import engine


def tar_side(mnt: str, files: int, size: int, per_dir: int) -> dict:
    src = tempfile.mkdtemp(dir="/var/tmp")
    try:
        for i in range(files):
            d = os.path.join(src, f"d{i // per_dir}")
            if i % per_dir == 0:
                os.mkdir(d)
            with open(os.path.join(d, f"f{i % per_dir}"), "wb") as f:
                f.write(b"s" * size)
        ball = os.path.join("/var/tmp", f"sf-{os.getpid()}.tar")
        subprocess.run(["tar", "cf", ball, "-C", src, "."], check=True)
    finally:
        subprocess.run(["rm", "-rf", src], check=True)
    dest = os.path.join(mnt, "tar")
    os.mkdir(dest)
    out = {}
    try:
        t0 = time.perf_counter()
        subprocess.run(["tar", "xf", ball, "--no-same-owner", "-C", dest], check=True)
        out["create"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        os.sync()
        out["sync_create"] = time.perf_counter() - t0
        drop_caches()
        t0 = time.perf_counter()
        subprocess.run(["tar", "cf", "/dev/null", "-C", dest, "."], check=True)
        out["read"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(["rm", "-rf", dest], check=True)
        out["remove"] = time.perf_counter() - t0
    finally:
        os.unlink(ball)
    return out


def main():
    args = parser(__doc__).parse_args()
    files = 2000 if args.tiny else 100000
    beds = ("tmpfs", "disk") if args.tiny else ("tmpfs", "disk", "hdd", "latfs-nfs")
    rows, data, notes = [], {}, []
    for kind in beds:
        n = files if kind != "latfs-nfs" or args.tiny else 10000
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                d = os.path.join(mnt, "engine")
                os.mkdir(d)
                e = engine.smallfile(d, files=n, file_size=4096, per_dir=10, sync=True)
                t = tar_side(mnt, n, 4096, 10)
                rows.append((kind, n, f"{e.create + e.sync_create:.2f} s", f"{t['create'] + t['sync_create']:.2f} s",
                             f"{e.read + e.stat:.2f} s", f"{t['read']:.2f} s",
                             f"{e.remove + e.sync_remove:.2f} s", f"{t['remove']:.2f} s"))
                data[kind] = {"engine": e.__dict__, "tar": t, "files": n}
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    notes.append("engine read = stat + read of every file right after its create and sync, from whatever the "
                 "page cache kept; tar read is after drop_caches (root) and walks directories in order: "
                 "compare the create and remove columns like for like")
    report("smallfile", "Many small files (4 KiB, 10 per directory): engine kernel vs tar, sync included",
           ("bed", "files", "create engine", "create tar", "read engine", "read tar", "remove engine",
            "remove tar"), rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
