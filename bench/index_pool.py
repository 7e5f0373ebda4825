"""Index load: one malloc per entry vs a memory pool, at 100k/1M/2M entries, and git reading the same index.

Seed 003 saw 13-43% less time with block allocation. Indexes are synthetic,
shaped like t/perf/repos/many-files.sh (4 10 9, 5 10 9, 6 8 7).

    python3 bench/index_pool.py [--tiny]
"""
import os
import subprocess
import tempfile

from common import median, parser, report, timeit

from git_tune import engine

# Whole many-files.sh shapes: 99,999, 999,999 and 2,097,151 entries.
SHAPES = {"100k": (0, 4, 10, 9), "1M": (0, 5, 10, 9), "2M": (0, 6, 8, 7)}


def main():
    args = parser(__doc__).parse_args()
    shapes = {"10k": (0, 3, 10, 9)} if args.tiny else SHAPES
    repeat = args.repeat or (3 if args.tiny else 7)
    rows, data = [], {}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        subprocess.run(["git", "init", "-q", d], check=True)
        for label, (n, depth, width, files) in shapes.items():
            index = os.path.join(d, f"index-{label}")
            engine.index_write_synthetic(index, entries=n, version=2, depth=depth, width=width, files=files)
            times = {engine.ALLOC_MALLOC: [], engine.ALLOC_POOL: []}
            last = {}
            for _ in range(repeat):  # allocators interleaved, one load + free each
                for alloc in times:
                    last[alloc] = r = engine.index_read(index, alloc=alloc)
                    times[alloc].append(r.parse + r.free)
            cell = {a: (median(t), last[a].allocations, last[a].peak_bytes) for a, t in times.items()}
            env = dict(os.environ, GIT_INDEX_FILE=index)
            git_t = median(timeit(lambda: subprocess.run(["git", "-C", d, "ls-files"], env=env,
                                                         stdout=subprocess.DEVNULL, check=True), repeat))
            m, p = cell[engine.ALLOC_MALLOC], cell[engine.ALLOC_POOL]
            rows.append((f"{r.entries:,}", f"{m[0] * 1e3:.1f} ms", f"{p[0] * 1e3:.1f} ms", f"{p[0] / m[0]:.2f}",
                         f"{m[1]:,} / {p[1]:,}", f"{git_t * 1e3:.0f} ms"))
            data[label] = {"malloc": m, "pool": p, "git_ls_files": git_t, "entries": r.entries}
            os.unlink(index)
    report("index_pool", f"Index load: malloc per entry vs memory pool (engine, parse + free, median of {repeat})",
           ("entries", "malloc", "pool", "pool/malloc", "allocations malloc / pool", "git ls-files (same index)"),
           rows, data, args.tiny,
           ["git ls-files includes process start, reading and printing every path; it is a yardstick, not a ratio"])


if __name__ == "__main__":
    main()
