"""The single-folder binary: build it, then time its start-up, probe and a short calibrate
with no Python packages importable (a bare environment: PATH=/usr/bin:/bin, no PYTHONPATH).

Target (fleet issue): probe and apply start in under 0.5 s from the shipped artefact.

    python3 bench/binary.py [--tiny]      (builds dist/git-tune/ with tools/build-binary)
"""
import os
import subprocess
import tempfile

from common import ROOT, median, parser, report, timeit

from git_tune import repogen

BINARY = os.path.join(ROOT, "dist", "git-tune", "git-tune")


def du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    args = parser(__doc__).parse_args()
    repeat = args.repeat or (3 if args.tiny else 9)
    subprocess.run([os.path.join(ROOT, "tools", "build-binary")], check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        home = os.path.join(d, "home")
        os.mkdir(home)
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "GIT_CONFIG_NOSYSTEM": "1"}
        repo = repogen.generate(os.path.join(d, "repo"), repogen.RepoShape.for_files(2000), limit=2000)
        run = lambda *a: subprocess.run([BINARY, *a], env=env, check=True, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        version = run("--version").stdout.strip()
        start = timeit(lambda: run("--version"), repeat)
        probe = timeit(lambda: run("probe", "--repo", repo, "--json"), repeat)
        t0 = __import__("time").perf_counter()
        cal = run("calibrate", "--repo", repo, "--budget", "2", "--json")
        cal_t = __import__("time").perf_counter() - t0
    size = du(os.path.dirname(BINARY))
    rows = [("start-up (--version)", f"{median(start):.2f} s"), ("probe --json, 2,000 files", f"{median(probe):.2f} s"),
            ("calibrate --budget 2", f"{cal_t:.1f} s"), ("size of dist/git-tune/", f"{size / 2**20:.0f} MiB")]
    report("binary", f"Single-folder binary, bare environment (median of {repeat})", ("what", "measured"),
           rows, {"startup": start, "probe": probe, "calibrate": cal_t, "size": size, "version": version,
                  "calibration_keys": list(__import__("json").loads(cal.stdout)["trials"])},
           args.tiny, [version])


if __name__ == "__main__":
    main()
