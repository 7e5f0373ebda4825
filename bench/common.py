"""Shared pieces of the benchmarks: sizes, tables, JSON results, machine facts, beds.

Every benchmark prints a markdown table of ratios measured side by side in
one run and writes the same data as JSON to bench/results/NAME.json.
`--tiny` runs a size small enough for CI, so no benchmark rots.
"""
import argparse
import contextlib
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # testbeds/ lives beside the package; the installed git_tune wins

from testbeds import BedUnavailable, bed, hdd, latfs  # noqa: E402
from testbeds.slow import NFS_NOAC, NFS_NOCACHE, NFS_POSITIVE, Latency  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results")

# `kill` (SIGTERM) unwinds like Ctrl-C, so the beds' context managers unmount
# and remove what they made instead of leaving mounts and images behind.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tiny", action="store_true", help="CI size: checks the benchmark still runs")
    p.add_argument("--repeat", type=int, default=None, help="measurements per cell")
    return p


def machine() -> Dict[str, str]:
    git = subprocess.run(["git", "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    return {"cpus": str(os.cpu_count()), "kernel": platform.release(), "python": platform.python_version(),
            "git": git, "memory_gib": f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f}"}


def _commit_now() -> str:
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if head.returncode:
        return "unknown"
    # What benchmarks write (results, this page) is not what they measure: a run after
    # another in one batch is of the same code.
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                            "--", ".", ":!bench/results", ":!bench/README.md", ":!bench/says"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return head.stdout.strip() + ("-dirty" if dirty.strip() else "")


# Read when the benchmark starts: the code it loaded, whatever is committed while it runs.
_STARTED_AT = _commit_now()


def commit() -> str:
    """The commit the benchmark ran at ("-dirty" where tracked files other than the
    benchmarks' own results differed from it when it started)."""
    return _STARTED_AT


def command() -> str:
    """The command line that ran this benchmark, as bench/README.md gives it to reproduce."""
    args = " ".join(shlex.quote(a) for a in sys.argv[1:])
    return f"python3 bench/{os.path.basename(sys.argv[0])}" + (f" {args}" if args else "")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def timeit(fn: Callable[[], object], repeat: int, warmup: int = 1) -> List[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 10 else f"{s:.2f} s"


# What a result's figures depend on: a result stored at another commit is this code's
# only where git diff of these paths between the two is empty.
CODE = ("advisor", "core", "engine", "models", "probes", "testbeds", "setup.py", "setup.cfg")


def same_code(at: str) -> bool:
    """Whether commit `at` ran this checkout's code (not where it was dirty: unknown)."""
    if at == commit():
        return True
    return bool(at) and not at.endswith("-dirty") and subprocess.run(
        ["git", "-C", ROOT, "diff", "--quiet", at, "--", *CODE],
        stderr=subprocess.DEVNULL).returncode == 0


def report(name: str, title: str, headers, rows, data: dict, tiny: bool, notes: Sequence[str] = (),
           beds: Sequence[str] = ()) -> None:
    """Print and store a result. With `beds` (the first column of every row, the first
    word of every note, the keys of `data`), a run over some beds replaces only their
    rows in the stored result and keeps the other beds' from the last run."""
    this_run = {"commit": commit(), "time": time.time(), "command": command()}
    runs = {b: this_run for b in beds}
    if beds:
        rows, data, notes, runs = _merged(name, tiny, beds, rows, data, notes, runs)
    md = f"### {title}\n\n{table(headers, rows)}\n"
    if notes:
        md += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    print(md)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{name}{'-tiny' if tiny else ''}.json"), "w") as f:
        json.dump({"name": name, "title": title, "tiny": tiny, "machine": machine(),
                   **this_run, "runs": runs, "headers": list(headers),
                   "rows": [list(map(str, r)) for r in rows],
                   "data": data, "notes": list(notes)}, f, indent=1, default=str)
    with open(os.path.join(RESULTS, f"{name}{'-tiny' if tiny else ''}.md"), "w") as f:
        f.write(md)


def _merged(name: str, tiny: bool, beds: Sequence[str], rows, data: dict, notes: Sequence[str],
            runs: dict):
    path = os.path.join(RESULTS, f"{name}{'-tiny' if tiny else ''}.json")
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return rows, data, notes, runs
    def bed_of(note: str) -> Optional[str]:
        head = note.split(":", 1)[0]
        return head if ":" in note and " " not in head else None

    known = set(old.get("data", {}))     # the beds of the last run
    kept = lambda bed: bed in known and bed not in beds
    rows = [r for r in old.get("rows", []) if kept(r[0])] + [list(map(str, r)) for r in rows]
    data = {**{b: d for b, d in old.get("data", {}).items() if kept(b)}, **data}
    # Notes of the kept beds, then this run's (its general notes replace the old ones).
    notes = [n for n in old.get("notes", []) if kept(bed_of(n))] + list(notes)
    # Each kept bed keeps the commit and time it was measured at (the whole old run's
    # where the old result predates per-bed runs).
    old_run = {"commit": old.get("commit"), "time": old.get("time")}
    runs = {**{b: old.get("runs", {}).get(b, old_run) for b in known if kept(b)}, **runs}
    return rows, data, notes, runs


# The latency FUSE beds, by the NFS client they stand for: attributes and entries cached
# 1 s, misses not (lookupcache=positive); attributes not cached (actimeo=0, the issue #30
# bed: a clone's whole tree 47.5 s sequentially, 23 s with 4 workers); nothing cached.
LATFS = {"latfs-nfs": NFS_POSITIVE, "latfs-noac": NFS_NOAC, "latfs-nocache": NFS_NOCACHE}
# The beds a benchmark runs on unless told otherwise; the other latfs beds by name
# (--beds), where a benchmark studies that storage.
BEDS = ("tmpfs", "disk", "latfs-nfs", "hdd")
ALL_BEDS = BEDS + tuple(b for b in LATFS if b not in BEDS)
# CI size: 0.1-0.2 ms a metadata operation keeps the latency bed quick.
TINY_LATENCY = Latency(lookup_us=150, open_us=150, read_us=50, write_us=50, create_us=150,
                       fsync_us=300, readdir_us=150)


def beds_for(tiny: bool, beds: Sequence[str] = BEDS) -> Tuple[str, ...]:
    """The beds a run covers: at --tiny size all but the one-spindle bed, whose every
    request waits its 4 ms (tests/test_beds.py checks that bed itself)."""
    return tuple(b for b in beds if not (tiny and b == "hdd"))


def bed_latency(tiny: bool) -> Optional[Latency]:
    """The latency beds' delays: CI's where tiny, else each bed's own (None)."""
    return TINY_LATENCY if tiny else None


@contextlib.contextmanager
def storage(kind: str, latency: Optional[Latency] = None, size_mb: int = 1024) -> Iterator[str]:
    """A bed by name: tmpfs, disk, ext4, a latfs bed (FUSE, NFS-like: LATFS, with
    `latency` instead of its own where given), hdd (one slow spindle)."""
    if kind in LATFS:
        with latfs(latency or LATFS[kind]) as m:
            yield m
    elif kind == "hdd":
        with hdd(size_mb=size_mb) as m:
            yield m
    else:
        with bed(kind, size_mb=size_mb) as m:
            yield m


def repo_on(kind: str, mnt: str, files: int, changed: int = 0, name: str = "repo") -> str:
    """A generated repository on a mounted bed. On latfs it is written to the backing
    directory (fast) and used through the mount (slow)."""
    from git_tune import repogen
    shape = repogen.RepoShape.for_files(files)
    if kind in LATFS:
        backing = os.path.join(os.path.dirname(mnt), "backing")
        repogen.generate(os.path.join(backing, name), shape, limit=files, second_commit_changes=changed)
        return os.path.join(mnt, name)
    path = os.path.join(mnt, name)
    repogen.generate(path, shape, limit=files, second_commit_changes=changed)
    return path


def tracked(repo: str) -> List[str]:
    return git("ls-files", "-z", cwd=repo).stdout.split("\0")[:-1]


def remove(repo: str, paths: Sequence[str]) -> None:
    """Delete these tracked files from the working tree (a checkout then restores them):
    untimed, many at a time where one removal is dear, as git-tune's own runs remove
    them (probes/scratch.remove_files)."""
    from git_tune.probes.scratch import remove_files
    remove_files([os.path.join(repo, p) for p in paths])


# A sync of the bed that returns within this many seconds found it written back.
SETTLED_SYNC = 0.5
# ... and syncs for at most this long (untimed: a day-old checkout has had longer).
SETTLED_LIMIT = 1800.0


def settler(mnt: str, settled: bool, limit: float = SETTLED_LIMIT
            ) -> Optional[Callable[[], None]]:
    """Where --settled: what writes the bed back (syncs of its file system, untimed), so
    that no timed run pays for the write-back of what ran before it; else None. One sync
    is not always enough: on the hdd bed, right after a 100,000-file repository was
    generated, it took four (156.5, 5.2, 6.8 and 0.0 s). So it syncs again until a sync
    returns within SETTLED_SYNC, for `limit` seconds at most (a bed that never settles is
    then timed as it is)."""
    def settle() -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            t0 = time.monotonic()
            subprocess.run(["sync", "--file-system", mnt], check=False)
            if time.monotonic() - t0 < SETTLED_SYNC:
                return
    return settle if settled else None


def drop_caches() -> bool:
    if os.geteuid() != 0:
        return False
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    return True


def config_env(settings: Dict[str, str]) -> dict:
    from git_tune.advisor.measure.gitbench import config_env as env
    return env(settings)


def timed(cmd: Sequence[str], cwd: str, settings: Dict[str, str], cold: bool = False,
          trace: Optional[str] = None, setup: Optional[Callable[[], None]] = None,
          extra_env: Optional[Dict[str, str]] = None, stdin: Optional[str] = None) -> float:
    """One timed real-git run (`stdin`: its input); caches dropped first when cold
    (root)."""
    if setup:
        setup()
    if cold:
        drop_caches()
    env = dict(config_env(settings), **(extra_env or {}))
    if trace:
        env["GIT_TRACE2_EVENT"] = trace
        env["GIT_TRACE2_EVENT_NESTING"] = "10"
    t0 = time.perf_counter()
    subprocess.run(list(cmd), cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, input=stdin, text=stdin is not None)
    return time.perf_counter() - t0


def ab(run_a: Callable[[], float], run_b: Callable[[], float], repeat: int) -> Tuple[List[float], List[float]]:
    """Interleaved A/B (ABBA) after one warm-up each."""
    from git_tune.advisor.measure.ab import interleaved
    return interleaved(run_a, run_b, repeat)


def git(*args, cwd=None, env=None, check=True):
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
