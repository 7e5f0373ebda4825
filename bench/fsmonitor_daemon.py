"""core.fsmonitor on git 2.55 (issue #14): `git status` with the daemon warm against without,
and what git-tune recommends there.

Per bed, a generated repository; git 2.55.0 built by tools/build-git (reused from the
user cache). Side by side in one run, interleaved: `git status -uno` and `git status`
(untracked files) with core.fsmonitor=false and with the daemon started and warm, each
side on its own copy of the index. Then `git-tune --git <2.55> recommend` on the same
repository, and its decision for core.fsmonitor. On the NFS-like bed (FUSE), git itself
refuses the daemon, and git-tune must not recommend it. No daemon is left running.

    python3 bench/fsmonitor_daemon.py [--tiny] [--beds disk latfs-nfs] [--repeat N]
"""
import json
import os
import shutil
import subprocess
import sys
import time

from common import (BedUnavailable, ab, bed_latency, median, parser, repo_on, report, storage,
                    timed)

from git_tune import fsmonitor
from git_tune.models import stats

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = "2.55.0"
BEDS = ("disk", "latfs-nfs")
WORKLOADS = {"status -uno": ["status", "-uno", "--porcelain"],
             "status (untracked)": ["status", "--porcelain"]}


def built_git() -> str:
    proc = subprocess.run([os.path.join(HERE, "..", "tools", "build-git"), VERSION],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise BedUnavailable(f"git {VERSION} could not be built: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def use(git: str) -> None:
    """Every `git` this benchmark and git_tune.fsmonitor start is this one."""
    os.environ["PATH"] = os.path.dirname(git) + os.pathsep + os.environ["PATH"]


def side_by_side(repo: str, scratch: str, repeat: int):
    """(rows, data): each workload without and with the warm daemon, or why there is none."""
    refused = fsmonitor.start(repo)
    if refused:
        return [("-", "-", "-", "git refuses the daemon: " + refused)], {"refused": refused}
    rows, data = [], {}
    try:
        for name, args in WORKLOADS.items():
            index = {}
            for side in ("off", "on"):
                index[side] = os.path.join(scratch, f"index.{side}")
                shutil.copyfile(os.path.join(repo, ".git", "index"), index[side])

            def run(side):
                settings = {"core.fsmonitor": "true" if side == "on" else "false"}
                return timed(["git", *args], repo, settings,
                             extra_env={"GIT_INDEX_FILE": index[side]})
            off, on = ab(lambda: run("off"), lambda: run("on"), repeat)
            est = stats.compare(off, on)
            rows.append((name, f"{median(off) * 1e3:.1f} ms", f"{median(on) * 1e3:.1f} ms",
                         f"{1 / est.ratio:.2f}x ({est.verdict})"))
            data[name] = {"off": off, "on": on}
    finally:
        fsmonitor.stop(repo)
    return rows, data


def recommended(git: str, repo: str, budget: float):
    """git-tune's decision for core.fsmonitor on this repository, and its wall time."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "git_tune", "--git", git, "recommend", "--repo",
                           repo, "--budget", str(budget), "--json", "--recalibrate"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if proc.returncode:
        return f"git-tune failed: {proc.stderr.strip()[-200:]}", wall
    key = next(k for k in json.loads(proc.stdout)["keys"] if k["key"] == "core.fsmonitor")
    return (f"{key['value']}: {key['reason']}" if key["value"] else key["reason"]), wall


def run_bed(kind: str, git: str, files: int, repeat: int, budget: float, tiny: bool):
    with storage(kind, bed_latency(tiny), size_mb=4096) as mnt:
        repo = repo_on(kind, mnt, files)
        scratch = os.path.join(mnt, "scratch")
        os.makedirs(scratch, exist_ok=True)
        rows, data = side_by_side(repo, scratch, repeat)
        decision, wall = recommended(git, repo, budget)
        if fsmonitor.running(repo):
            fsmonitor.stop(repo)
            decision += " [a daemon was left running: a bug]"
        data["recommendation"] = decision
        return [(kind, f"{files:,}", *r) for r in rows], data, \
            f"{kind}, {files:,} files: git-tune recommend --budget {budget:g} ({wall:.0f} s): " \
            f"core.fsmonitor {decision}"


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", choices=BEDS, default=list(BEDS))
    args = p.parse_args()
    repeat = args.repeat or (3 if args.tiny else 15)
    sizes = {"disk": 2000 if args.tiny else 50000, "latfs-nfs": 300 if args.tiny else 3000}
    budget = 3 if args.tiny else 20
    rows, data, notes = [], {}, []
    try:
        git = built_git()
        use(git)
    except BedUnavailable as e:
        git, notes = None, [str(e)]
    for kind in (args.beds if git else []):
        try:
            r, data[kind], note = run_bed(kind, git, sizes[kind], repeat, budget, args.tiny)
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
            continue
        rows += r
        notes.append(note)
    report("fsmonitor_daemon", f"git {VERSION}: git status with the fsmonitor daemon warm "
           "against without", ("bed", "files", "workload", "without", "with the daemon",
                               "speedup"), rows, data, args.tiny,
           notes + [f"{repeat} interleaved runs a side after a warm-up, each side on its own "
                    "index copy; speedup = median without / median with, verdict from a 95% "
                    "bootstrap interval"])


if __name__ == "__main__":
    main()
