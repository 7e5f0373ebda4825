"""How long `git-tune probe` takes on a hot 50,000-file repository (target: under 2 s).

    python3 bench/probe_speed.py [--tiny]
"""
import os
import subprocess
import sys
import tempfile

from common import median, parser, report, timeit

from git_tune import repogen


def main():
    args = parser(__doc__).parse_args()
    files = 2000 if args.tiny else 50000
    repeat = args.repeat or (3 if args.tiny else 7)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        repo = os.path.join(d, "repo")
        repogen.generate(repo, repogen.RepoShape.for_files(files), limit=files)
        cmd = [sys.executable, "-m", "git_tune", "probe", "--repo", repo, "--json"]
        hot = timeit(lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True), repeat)
        start = timeit(lambda: subprocess.run([sys.executable, "-m", "git_tune", "--version"],
                                              stdout=subprocess.DEVNULL, check=True), repeat)
    rows = [("git-tune probe --json (hot)", files, f"{median(hot):.2f} s", f"{min(hot):.2f} s", f"{max(hot):.2f} s"),
            ("git-tune --version (start-up)", "-", f"{median(start):.2f} s", f"{min(start):.2f} s", f"{max(start):.2f} s")]
    report("probe_speed", f"Probe wall time, whole process, {repeat} runs", ("command", "files", "median", "min", "max"),
           rows, {"hot": hot, "startup": start, "files": files}, args.tiny,
           [f"target: hot probe of 50,000 files under 2 s; measured median {median(hot):.2f} s"])


if __name__ == "__main__":
    main()
