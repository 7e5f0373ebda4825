"""Is core.preloadIndex's decision on a sample index the decision on the whole tree (#30)?

For each bed and repository size, side by side in one run:
- the whole tree: `git status -uno`, preload on against off (what the user lives with);
- the sample git-tune's trial times at a 20 s budget (keys/preload.py: `git diff-files`
  on an index copy whose entries but the sample's are skip-worktree; Git starts the
  preload threads of the whole index, and they lstat the sample alone), sized as a
  calibration sizes it (the engine's lstat of a part, then _sample_size); on network
  storage each run on a sample of its own (gitbench.fresh_files_diff);
- the same sample timed over and over, which is what a sample trial did before: behind
  an attribute cache that expires by time it is served from the cache.
Each is ABBA-interleaved, `--repeat` pairs after a warm-up pair; the verdict is the one
the A/B's statistics give (faster / slower / no change), and "same" says whether the
sample's decision (set preload off, or keep it on) is the whole tree's.

    python3 bench/preload_sample.py [--tiny] [--beds hdd latfs-nfs] [--sizes 20000]
                                    [--repeat 5]
"""
import os
import time

from common import (ALL_BEDS, BedUnavailable, bed_latency, median, parser, repo_on, report,
                    storage)

from git_tune.advisor.keys import preload
from git_tune.advisor.measure import calibrate, gitbench
from git_tune.advisor.measure.ab import interleaved
from git_tune.advisor.measure.bench import Bench, Budget
from git_tune.advisor.measure.record import Options
from git_tune.models import stats

ON, OFF = {preload.KEY: "true"}, {preload.KEY: "false"}


def verdict(t_on, t_off) -> str:
    """The A/B's verdict for off against on (faster: off is), as a calibration reads it."""
    return stats.compare(t_on, t_off).verdict


def decision(v: str) -> str:
    """What git-tune writes on that verdict: off only where it is faster."""
    return "off" if v == stats.FASTER else "on"


def bench_on(repo: str, budget: float) -> Bench:
    """A calibration's Bench on the repository (as calibrate makes it), with preload's
    sweep run: its part, which sizes the sample."""
    report_ = calibrate.probe_repository(repo, budget)
    scratch = os.path.join(os.path.dirname(repo), "preload-scratch")
    os.makedirs(scratch, exist_ok=True)
    b = calibrate.bench_for(report_, Options(budget=budget), Budget(budget),
                      gitbench.Workspace(report_.repository.layout, scratch))
    sweep = preload.sweep(b)
    if sweep:
        b.sweeps["preload"] = sweep
    return b


def cell(kind: str, mnt: str, files: int, repeat: int) -> dict:
    repo = repo_on(kind, mnt, files, name=f"repo{files}")
    b = bench_on(repo, 20.0)
    n = preload._sample_size(b)
    layout = b.ws.layout
    whole_index = b.ws.index_copy("plain")
    whole = gitbench.status(layout, whole_index, untracked=False)
    out = {"files": files, "sample": n, "hopeless": preload._hopeless(b),
           "storage_class": b.storage_class}
    with gitbench.deadline(3600):
        t0 = time.monotonic()
        out["whole"] = interleaved(lambda: whole(ON), lambda: whole(OFF), repeat)
        out["whole_s"] = time.monotonic() - t0
        if n is not None:
            fresh = gitbench.fresh_files_diff(b.ws, n)
            same = gitbench.files_diff(layout, b.ws.sample(n))
            t0 = time.monotonic()
            if b.storage_class == "network":
                out["fresh"] = interleaved(lambda: fresh(ON), lambda: fresh(OFF), repeat)
            out["same"] = interleaved(lambda: same(ON), lambda: same(OFF), repeat)
            out["sample_s"] = time.monotonic() - t0
    return out


def row(kind: str, c: dict):
    def ab(pair):
        on, off = pair
        v = verdict(on, off)
        return f"{median(on) * 1e3:.1f} / {median(off) * 1e3:.1f} ms, off {median(on) / median(off):.2f}x ({v})", v
    whole, vw = ab(c["whole"])
    cells = [kind, str(c["files"]), whole]
    for label in ("fresh", "same"):
        if label in c:
            text, v = ab(c[label])
            cells.append(f"{text}, {'same' if decision(v) == decision(vw) else 'differs'}")
        else:
            cells.append("-" if c["sample"] is not None else "whole tree (no sample)")
    cells.append(str(c["sample"] or "-"))
    return cells


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", default=None, choices=ALL_BEDS)
    p.add_argument("--sizes", nargs="+", type=int, default=None)
    args = p.parse_args()
    # --tiny (CI): the NFS-like bed alone, where the sample and its fresh runs are timed.
    beds = args.beds or (["latfs-nfs"] if args.tiny else ["latfs-nfs", "hdd", "disk"])
    sizes = args.sizes or ([1500] if args.tiny else [20000])
    repeat = args.repeat or (2 if args.tiny else 5)
    rows, data, notes = [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=8192) as mnt:
                for files in sizes:
                    c = cell(kind, mnt, files, repeat)
                    data[f"{kind}-{files}"] = c
                    rows.append(row(kind, c))
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    report("preload_sample", f"core.preloadIndex on a sample against the whole tree "
           f"(preload on / off, median of {repeat} interleaved pairs)",
           ("bed", "files", "whole tree: git status -uno", "sample, each run its own (network)",
            "the same sample every run", "sample entries"), rows, data, args.tiny,
           notes + ["off Nx: on's time over off's (below 1: off slower); the verdict is "
                    "the A/B's; same/differs: whether the sample's decision (off only where "
                    "faster) is the whole tree's"])


if __name__ == "__main__":
    main()
