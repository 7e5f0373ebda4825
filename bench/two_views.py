"""One work tree through two views whose stat data differ (issue #62, item 1): what
Windows git and WSL git on one checkout, or a host and a container over virtiofs, see.
The second view is a copy of the work tree (same contents and mtimes, other inodes and
ctimes) sharing the one index (GIT_DIR, GIT_WORK_TREE), so every `git status` from the
other view re-reads the whole tree, forever, under Git's defaults.

The loop as a user meets it, with real git on the disk, per tree size:
- after how many alternating statuses the agent flags the storm;
- what `git-tune recommend` says of core.checkStat there;
- the experiment the user says yes to (`agent experiment core.checkStat=minimal --yes`),
  stepped on the alternating statuses as the collector steps it: its decision and the
  commands it took;
- the alternating statuses under Git's defaults, then under the value kept, against a
  status repeated in one view (median of --repeat, each run its own).

    python3 bench/two_views.py [--tiny] [--sizes 5000 50000] [--repeat N]
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

from common import median, ms, parser, report

from stat_storm import isolate

BUDGET = 20                 # recommend's budget, the README's example (--tiny: TINY_BUDGET)
TINY_BUDGET = 3
MOST_PAIRS = 120            # alternating pairs the experiment may take


def status(view: str, git_dir: str) -> float:
    """`git status -uno` in `view` with the index shared, as the user runs it (traced)."""
    env = dict(os.environ, GIT_DIR=git_dir, GIT_WORK_TREE=view)
    t0 = time.perf_counter()
    subprocess.run(["git", "status", "-uno", "--porcelain"], cwd=view, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def alternating(a: str, b: str, git_dir: str, repeat: int) -> list:
    """The status in view a, each after one in view b: the user's switch of views."""
    out = []
    for _ in range(repeat):
        status(b, git_dir)
        out.append(status(a, git_dir))
    return out


def one_size(root: str, files: int, repeat: int, budget: float) -> tuple:
    from git_tune.advisor.agent import collector, experiment, store, storm, switch
    from git_tune import repogen
    a, b, git_dir = repogen.two_views(root, files)
    # Past the second the files were written in, one status writes the index with
    # stat data that are no longer racy: what a view's steady status reads.
    time.sleep(1.1)
    single = [status(a, git_dir) for _ in range(repeat + 1)][1:]
    before = alternating(a, b, git_dir, repeat)
    subprocess.run(["git-tune", "agent", "enable", "--repo", a], check=True,
                   stdout=subprocess.DEVNULL)
    collector.stop()            # the bench steps the agent, as the collector would
    try:
        # Counted in view a, whose records the agent reads as one work tree's (view b's
        # are another's; where b is another OS's git, the agent sees none of them).
        flagged, seen = None, 0
        while flagged is None and seen < 10:
            status(b, git_dir)
            status(a, git_dir)
            seen += 1
            switch.collect()
            if storm.recurring(a) is not None:
                flagged = seen
        rec = subprocess.run(["git-tune", "recommend", "--repo", a, "--budget", str(budget),
                              "--json"], capture_output=True, text=True)
        advice = ({k["key"]: k for k in json.loads(rec.stdout)["keys"]}.get("core.checkStat")
                  if rec.returncode == 0 else None)
        said = ("failed: " + rec.stderr.strip()[-80:] if advice is None else
                advice["value"] if advice["status"] == "set" else
                "names the experiment" if "agent experiment core.checkStat" in advice["reason"]
                else "not set")
        experiment.start("local", "core.checkStat", "minimal", a, yes=True)
        decided, pairs = None, 0
        while pairs < MOST_PAIRS and not (decided and "decided" in decided):
            status(b, git_dir)
            status(a, git_dir)
            pairs += 1
            switch.collect()
            decided = experiment.step(store.records())
        kept = subprocess.run(["git", "-C", a, "config", "core.checkStat"],
                              capture_output=True, text=True).stdout.strip() or "Git's default"
        after = alternating(a, b, git_dir, repeat)      # under the repository's config now
    finally:
        collector.stop()
        subprocess.run(["git-tune", "agent", "disable", "--forget"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    decision = (decided or {}).get("decided", f"none in {MOST_PAIRS} pairs")
    d = {"files": files, "single": single, "before": before, "after": after,
         "flagged_after": flagged, "recommend": said, "decision": decision,
         "experiment_statuses_in_view": pairs, "kept": kept}
    row = (files, f"{flagged} statuses in the view" if flagged else "not within 10", said,
           f"{decision} after {pairs} statuses in the view", kept, ms(median(single)), ms(median(before)),
           ms(median(after)), f"{median(after) / median(single):.2f}")
    return row, d


def main():
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=None)
    args = p.parse_args()
    sizes = args.sizes or ([500] if args.tiny else [5000, 50000])
    repeat = args.repeat or (2 if args.tiny else 10)
    budget = TINY_BUDGET if args.tiny else BUDGET
    home = tempfile.mkdtemp(prefix="git-tune-views-bench-")
    isolate(home)
    rows, data = [], {}
    try:
        for files in sizes:
            root = tempfile.mkdtemp(prefix="git-tune-views-", dir="/var/tmp")
            try:
                row, d = one_size(root, files, repeat, budget)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            rows.append(row)
            data[str(files)] = d
    finally:
        shutil.rmtree(home, ignore_errors=True)
    report("two_views", f"One work tree through two views on the disk: the agent, recommend "
           f"and the experiment (median of {repeat})",
           ("files", "agent flagged after", f"recommend --budget {budget}", "experiment",
            "kept", "one view's status", "alternating, Git's defaults", "alternating, kept",
            "kept / one view"), rows, data, args.tiny,
           ["alternating: a status in one view after one in the other (the time of the "
            "second); one view: a status repeated in one view",
            "experiment: core.checkStat=minimal against Git's default on the alternating "
            "statuses, with the user's yes, stepped after each pair as the collector does",
            "statuses in the view: those in view a, each after one in view b; the agent reads "
            "each view as its own work tree"])


if __name__ == "__main__":
    main()
