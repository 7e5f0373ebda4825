"""A work tree used through two views whose stat data differ (issue #62, item 1): what
another OS's git or a container sees of one checkout. Here the second view is a copy of
the work tree (same contents and mtimes, other inodes and ctimes) sharing the one index
(GIT_DIR, GIT_WORK_TREE), so every `git status` from the other view re-reads the whole
tree, forever. Real git, real files, no root. The loop end to end: the agent flags the
storm, `recommend` names it instead of calling it settled, and the experiment the user
says yes to keeps core.checkStat=minimal, after which git re-reads nothing."""
import json
import os
import subprocess

import pytest

from git_tune import repogen
from git_tune.advisor.agent import collector, experiment, store, storm, switch

FILES = 2000


def status(view, git_dir, settings=()):
    """`git status -uno` in `view`, the index shared: git's own count of entries re-read."""
    env = dict(os.environ, GIT_DIR=str(git_dir), GIT_WORK_TREE=str(view))
    args = ["git"]
    for k, v in settings:
        args += ["-c", f"{k}={v}"]
    subprocess.run(args + ["status", "-uno", "--porcelain"], cwd=view, env=env, check=True,
                   capture_output=True)


@pytest.fixture
def two_views(tmp_path):
    a, b, git_dir = repogen.two_views(str(tmp_path), FILES)
    yield a, b, git_dir
    collector.stop()
    subprocess.run(["git-tune", "agent", "disable"], capture_output=True)


def test_a_storm_across_two_views_is_flagged_and_settled(two_views):
    a, b, git_dir = two_views
    subprocess.run(["git-tune", "agent", "enable", "--repo", str(a)], check=True,
                   capture_output=True)
    collector.stop()
    for _ in range(storm.STORM_RUN):
        status(b, git_dir)              # the other view writes its stat data
        status(a, git_dir)              # ... and this view re-reads everything
    switch.collect()
    (flagged,) = storm.storms(store.records())
    assert flagged.index_written and flagged.rehashed >= 0.9 * FILES
    assert storm.recurring(str(a)) is not None
    report = subprocess.run(["git-tune", "agent", "report", "--repo", str(a)],
                            capture_output=True, text=True,
                            env=dict(os.environ, COLUMNS="400")).stdout
    assert "git-tune agent experiment core.checkStat=minimal --yes" in report
    # recommend: not "the mismatch was once", but the agent's evidence and what to type.
    rec = json.loads(subprocess.run(["git-tune", "recommend", "--repo", str(a), "--budget",
                                     "6", "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    advice = {k["key"]: k for k in rec["keys"]}["core.checkStat"]
    assert "the agent saw" in advice["reason"] and "re-read 0" not in advice["reason"]
    assert "agent experiment core.checkStat=minimal --yes" in advice["reason"]
    # The user says yes: the experiment alternates on their own statuses, both views.
    exp = experiment.start("local", "core.checkStat", "minimal", str(a), yes=True)
    assert exp.candidate == "minimal"
    decided = None
    for _ in range(90):
        status(b, git_dir)
        status(a, git_dir)
        switch.collect()
        decided = experiment.step(store.records())
        if decided and "decided" in decided:
            break
    assert decided and decided["decided"] == "candidate", (decided, experiment.status())
    got = subprocess.run(["git", "-C", str(a), "config", "core.checkStat"],
                         capture_output=True, text=True).stdout.strip()
    assert got == "minimal"
    # Now the two views agree: alternating statuses re-read nothing.
    before = len(store.records())
    status(b, git_dir)
    status(a, git_dir)
    status(b, git_dir)
    status(a, git_dir)
    switch.collect()
    mine = [c for c in store.records()[before:] if c.repo == os.path.realpath(a)]
    assert mine and all(c.counts.get("rehashed", 0) <= 0.01 * FILES for c in mine), \
        [c.counts for c in mine]
