"""The agent, part 2 (issue #33): it notices when the answer has changed and re-tunes on
its own, within bounds. Real git: the machine's, then a newer one built from
../shared/git-src (tools/build-git), run by the user in a watched repository."""
import json
import os
import subprocess

import pytest

from conftest import BUILT_GITS, git_version_of
from git_tune import repogen
from git_tune.advisor.agent import collector, drift, retune, store, switch
from git_tune.advisor.keys import untracked
from git_tune.advisor.write import journal
from git_tune.models import catalogue

SYSTEM = catalogue.format_version(git_version_of("git"))
NEWER = [g for g in BUILT_GITS if git_version_of(g) > git_version_of("git")]


def cli(*args, check=True, git=None):
    cmd = ["git-tune"] + (["--git", git] if git else []) + list(args)
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def watched(tmp_path):
    repo = tmp_path / "r"
    repogen.generate(str(repo), repogen.RepoShape(depth=1, width=3, files=40))
    # Values the user approved with git-tune on the machine's git: one that changes only
    # speed, one that changes the index's format.
    cli("set", "checkout.workers=2", "index.version=4", "--repo", str(repo),
        "--scope", "global")
    cli("agent", "enable", "--repo", str(repo))
    collector.stop()            # the test reads the spool itself, deterministically
    yield repo
    collector.stop()
    cli("agent", "disable", check=False)


def _run(git, repo, *args):
    subprocess.run([git, *args], cwd=repo, check=True, capture_output=True)


@pytest.mark.skipif(not NEWER, reason="no git newer than the machine's was built "
                                      "(tools/build-git 2.55.0)")
def test_a_git_upgrade_is_seen_in_the_users_commands_and_leads_to_a_retune(watched):
    newer = NEWER[-1]
    version = catalogue.format_version(git_version_of(newer))
    _run("git", watched, "status", "-uno")
    switch.collect()
    assert not any("git changed" in r for d in drift.detect(store.records()) for r in d.reasons)
    _run(newer, watched, "status", "-uno")      # the user upgraded git
    status = json.loads(cli("agent", "status", "--json").stdout)
    reasons = [r for d in status["drift"] for r in d["reasons"]]
    assert f"git changed from {SYSTEM} to {version}" in reasons, status["drift"]
    assert "drift in scope global" in cli("agent", "status").stdout

    out = json.loads(cli("agent", "retune", "--budget", "6", "--json", git=newer).stdout)
    (done,) = out["retuned"]
    assert done["retuned"] and done["measured_with"] == version, done
    # The key that changes the index's format keeps the value the user approved; the
    # speed-only key is the new calibration's to decide (set, or Git's default).
    assert done["after"].get("index.version") == "4"
    (entry,) = [e for e in journal.applied() if e.scope.name == "global"]
    assert entry.git_version == version and entry.settings == done["after"]
    got = subprocess.run([newer, "-C", str(watched), "config", "index.version"], text=True,
                         capture_output=True).stdout.strip()
    assert got == "4"
    # Measured with the git the user runs: nothing drifts any more, and the log says why.
    assert not drift.detect(store.records())
    assert "re-tuned (git changed" in cli("agent", "log").stdout


def test_values_edited_by_hand_are_left_alone(watched, tmp_path):
    (entry,) = [e for e in journal.applied() if e.scope.name == "global"]
    subprocess.run(["git", "config", "--file", entry.scope.include_file, "checkout.workers",
                    "5"], check=True)
    before = open(entry.scope.include_file, "rb").read()
    (d,) = drift.detect(store.records())
    assert d.edited
    done = retune.retune(d, budget=5)
    assert not done["retuned"] and "edited by hand" in done["why"]
    assert open(entry.scope.include_file, "rb").read() == before


def test_only_speed_keys_are_written_unattended():
    settings, asks = retune.unattended(
        {"checkout.workers": "8", "core.untrackedCache": "true", "index.version": "2"},
        {"checkout.workers": "2", "index.version": "4", "core.preloadIndex": "false"})
    # Speed-only keys follow the new measurement (preload, no longer recommended, goes
    # back to Git's default); format and behaviour keys keep what the user approved.
    assert settings == {"checkout.workers": "8", "index.version": "4"}
    assert asks == ["core.untrackedCache", "index.version"]


def test_an_idle_host_is_one_with_no_recent_command_and_spare_cores():
    from git_tune.advisor.agent.events import Command
    recent = [Command("s", "status", (), "/r", "2.39.5", 0.1, 0, None, ended=1000.0)]
    assert not drift.idle(recent, 1000.0 + drift.IDLE_SECONDS / 2, cores=2, load=0.1)
    assert drift.idle(recent, 1000.0 + drift.IDLE_SECONDS, cores=2, load=0.1)
    assert not drift.idle(recent, 1000.0 + drift.IDLE_SECONDS, cores=2, load=2.5)


def test_the_same_drift_is_not_retried_all_day(watched):
    (entry,) = [e for e in journal.applied() if e.scope.name == "global"]
    subprocess.run(["git", "config", "--file", entry.scope.include_file, "checkout.workers",
                    "5"], check=True)
    first = retune.retune_drifting(store.records(), budget=5)
    assert len(first) == 1 and not first[0]["retuned"]
    assert retune.retune_drifting(store.records(), budget=5) == []     # tried lately
    assert "not re-tuned" in cli("agent", "log").stdout


def _untracked_reasons():
    return [r for d in drift.detect(store.records()) for r in d.reasons
            if "untracked cache stopped working" in r]


def test_an_untracked_cache_that_stopped_working_is_seen_in_the_users_statuses(tmp_path):
    """git's own counts of each status's untracked walk (dir.c, trace2 nesting 3): while
    the cache works, a status reads no directory again; once every directory's mtime
    changes between statuses, each re-reads them all, and the agent says so."""
    repo = tmp_path / "r"
    repogen.generate(str(repo), repogen.RepoShape(depth=2, width=3, files=40))
    cli("set", "core.untrackedCache=true", "--repo", str(repo), "--scope", "global")
    cli("agent", "enable", "--repo", str(repo))
    collector.stop()
    try:
        for _ in range(untracked.IDLE_WINDOW + 1):
            _run("git", repo, "status", "--porcelain")
        switch.collect()
        assert not _untracked_reasons()
        dirs = [d for d, _, _ in os.walk(repo) if ".git" not in d.split(os.sep)]
        base = os.stat(repo).st_mtime - 10_000
        for i in range(untracked.IDLE_WINDOW):
            for d in dirs:      # a tool that touches every directory between statuses
                os.utime(d, (base + i, base + i))
            _run("git", repo, "status", "--porcelain")
        switch.collect()
        (reason,) = _untracked_reasons()
        assert "read every directory again" in reason
        status = json.loads(cli("agent", "status", "--json").stdout)
        assert reason in [r for d in status["drift"] for r in d["reasons"]]
    finally:
        collector.stop()
        cli("agent", "disable", check=False)
