"""Engine lstat throughput vs a bare single-threaded C loop over the same list (target: < 5% overhead).

    python3 bench/engine_lstat.py [--tiny]
"""
import os
import subprocess
import tempfile

from common import ROOT, median, parser, report

from git_tune import engine
from git_tune import repogen


def main():
    args = parser(__doc__).parse_args()
    files = 2000 if args.tiny else 50000
    rounds = args.repeat or (5 if args.tiny else 21)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        shape = repogen.RepoShape.for_files(files)
        repogen.write_tree(d, shape, limit=files)
        listing = [os.path.join(d, p) for p in repogen.paths(shape, files)]
        lst = os.path.join(d, "list")
        with open(lst, "wb") as f:
            f.write(b"".join(p.encode() + b"\0" for p in listing))
        bare_bin = os.path.join(d, "bare")
        subprocess.run(["cc", "-O2", "-o", bare_bin, os.path.join(ROOT, "bench", "bare_lstat.c")], check=True)
        bare, eng, eng_lat = [], [], []
        # Interleaved rounds so drift hits both alike.
        for _ in range(rounds):
            out = subprocess.run([bare_bin, lst, "1"], stdout=subprocess.PIPE, text=True, check=True)
            bare.append(float(out.stdout))
            eng.append(engine.preload(listing, threads=1).wall)
            eng_lat.append(engine.preload(listing, threads=1, record_latency=True).wall)
    b, e, el = median(bare), median(eng), median(eng_lat)
    rows = [("bare C loop", files, f"{b * 1e3:.2f} ms", f"{files / b / 1e6:.2f} M/s", "1.000"),
            ("engine preload, 1 thread", files, f"{e * 1e3:.2f} ms", f"{files / e / 1e6:.2f} M/s", f"{e / b:.3f}"),
            ("engine, latency histogram on", files, f"{el * 1e3:.2f} ms", f"{files / el / 1e6:.2f} M/s", f"{el / b:.3f}")]
    report("engine_lstat", f"Engine lstat overhead vs a bare C loop (hot cache, median of {rounds} interleaved rounds)",
           ("loop", "paths", "time", "rate", "ratio to bare"), rows,
           {"bare": bare, "engine": eng, "engine_latency": eng_lat}, args.tiny,
           [f"engine overhead {100 * (e / b - 1):+.1f}% (target < 5%)"])


if __name__ == "__main__":
    main()
