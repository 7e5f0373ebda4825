"""No git-tune writer silently undoes another write (issue #62, item 2): a value set by
hand stays through `auto`, a re-tune or a profile unless the user asks, and every value
a write removes is named; an experiment notices any other write to its scope, ends,
and keeps the user's bytes; `agent disable` always takes the routing out. Real git,
real config files, the experiment stepped here as the collector does."""
import dataclasses
import os
import random
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner

from git_tune import repogen
from git_tune.advisor.agent import collector, experiment, store, switch
from git_tune.advisor.write import configwrite, journal, scopes
from git_tune.cli import cli
from git_tune.probes import repo as repo_probe

USER_CONFIG = "[user]\n\tname = me\n"


def invoke(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


def ok(*args):
    res = invoke(*args)
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def value(repo, key):
    return subprocess.run(["git", "-C", str(repo), "config", key], capture_output=True,
                          text=True).stdout.strip()


def include():
    return scopes.resolve("global").include_file


@pytest.fixture
def home(isolated_git):
    (isolated_git / ".gitconfig").write_text(USER_CONFIG)
    return isolated_git


@pytest.fixture
def repo(tmp_path, home):
    root = tmp_path / "r"
    repogen.generate(str(root), repogen.RepoShape(depth=1, width=3, files=20),
                     second_commit_changes=10)
    subprocess.run(["git", "-C", str(root), "branch", "other", "HEAD~1"], check=True)
    return root


def test_a_whole_scope_write_keeps_a_value_set_by_hand_and_names_what_it_removes(home):
    ok("set", "checkout.workers=2", "--scope", "global")
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.39.5", "fp", "ssd")
    # auto measured nothing worth writing: the hand value stays, and is named as kept.
    p = configwrite.plan(scope, {}, prov)
    assert not p.changes and [k.key for k in p.kept] == ["checkout.workers"]
    assert "keeps checkout.workers=2 (set by hand" in configwrite.apply(p, prov).message
    # auto recommends another value: the hand value stays.
    p = configwrite.plan(scope, {"checkout.workers": "8", "index.threads": "2"}, prov)
    configwrite.apply(p, prov)
    assert configwrite.read_include(include()) == {"checkout.workers": "2",
                                                   "index.threads": "2"}
    # A measured value no longer recommended is removed, and the removal is named.
    p = configwrite.plan(scope, {}, prov)
    assert p.removed == {"index.threads": "2"}
    assert "removes index.threads=2" in configwrite.apply(p, prov).message
    # --override: the user asks to replace the hand value.
    p = configwrite.plan(scope, {"checkout.workers": "8"}, prov, override=True)
    configwrite.apply(p, prov)
    assert configwrite.read_include(include()) == {"checkout.workers": "8"}
    ok("revert", "--scope", "global")
    assert (home / ".gitconfig").read_text() == USER_CONFIG


def test_set_then_auto_keeps_the_hand_value(repo, home):
    """The issue's case with the real pipeline: `set`, then `auto --yes` whatever it
    measures: the include file still holds the hand value afterwards."""
    ok("set", "checkout.workers=2", "--scope", "global")
    res = invoke("auto", "--repo", repo, "--scope", "global", "--budget", "3", "--yes",
                 "--no-verify")
    assert res.exit_code == 0, res.output
    assert configwrite.read_include(include())["checkout.workers"] == "2"
    assert value(repo, "checkout.workers") == "2"


def test_set_keeps_what_auto_wrote(home):
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.39.5", "fp", "ssd", reasons={"index.threads": "measured"})
    configwrite.apply(configwrite.plan(scope, {"index.threads": "2"}, prov), prov)
    ok("set", "checkout.workers=4", "--scope", "global")
    assert configwrite.read_include(include()) == {"index.threads": "2", "checkout.workers": "4"}
    text = open(include()).read()
    assert "index.threads = 2: measured" in text and "checkout.workers = 4: set by hand" in text
    origins = journal.load_state()[scope.key]["origins"]
    assert origins == {"index.threads": "auto", "checkout.workers": "set"}


@pytest.fixture
def experimenting(repo, home):
    """`set checkout.workers=2`, the agent enabled, an experiment of 4 in its candidate slot."""
    ok("set", "checkout.workers=2", "--scope", "global")
    ok("agent", "enable", "--repo", repo)
    collector.stop()
    exp = experiment.start("global", "checkout.workers", "4", str(repo))
    experiment._save(dataclasses.replace(experiment._write(exp, experiment.CANDIDATE),
                                         arm=experiment.CANDIDATE))
    assert value(repo, "checkout.workers") == "4"
    yield repo
    collector.stop()
    invoke("agent", "disable")


def test_set_mid_experiment_is_kept_when_it_stops(experimenting):
    repo = experimenting
    ok("set", "index.threads=2", "--scope", "global")
    ok("agent", "experiment", "--stop")
    assert value(repo, "index.threads") == "2" and value(repo, "checkout.workers") == "2"
    assert experiment.load() is None


def test_set_mid_experiment_ends_it_at_the_next_step(experimenting):
    repo = experimenting
    ok("set", "index.threads=2", "--scope", "global")
    assert experiment.step(store.records()) == {"stopped": "written by someone else"}
    assert value(repo, "index.threads") == "2" and value(repo, "checkout.workers") == "2"
    assert "written by someone else" in invoke("agent", "log").output


def test_revert_mid_experiment_is_not_undone(experimenting, home):
    repo = experimenting
    ok("revert", "--scope", "global")
    gitconfig = (home / ".gitconfig").read_bytes()
    assert b"global.gitconfig" not in gitconfig
    assert experiment.step(store.records()) == {"stopped": "written by someone else"}
    assert (home / ".gitconfig").read_bytes() == gitconfig
    assert value(repo, "checkout.workers") == "" and not os.path.exists(include())
    ok("agent", "disable")
    assert (home / ".gitconfig").read_text() == USER_CONFIG
    ok("agent", "experiment", "checkout.workers=4", "--repo", repo)   # no stale refusal
    ok("agent", "experiment", "--stop")
    assert (home / ".gitconfig").read_text() == USER_CONFIG


def test_the_key_set_elsewhere_ends_the_experiment(experimenting):
    repo = experimenting
    subprocess.run(["git", "-C", str(repo), "config", "--local", "checkout.workers", "6"],
                   check=True)
    assert experiment.step(store.records()) == {"stopped": "set elsewhere"}
    assert value(repo, "checkout.workers") == "6"
    assert configwrite.read_include(include())["checkout.workers"] == "2"


def test_disable_takes_the_routing_out_whatever_state_it_finds(repo, home):
    ok("agent", "enable", "--repo", repo)
    collector.stop()
    os.unlink(os.path.join(store.agent_dir(), switch.STATE))
    state = journal.load_state()
    del state[scopes.resolve("agent").key]              # git-tune's record of it lost
    journal.save_state(state)
    ok("agent", "disable")
    assert (home / ".gitconfig").read_text() == USER_CONFIG
    assert not os.path.exists(scopes.resolve("agent").include_file)


def test_an_experiment_killed_at_random_leaves_valid_config(experimenting, home):
    """200 kills of a process switching arms, at random instants: the include file is
    valid config after every one, and disable gives the global config back exactly."""
    rng = random.Random(62)
    for i in range(200):
        pid = os.fork()
        if pid == 0:
            try:
                exp = experiment.load()
                if exp is not None:
                    arm = experiment.APPROVED if i % 2 else experiment.CANDIDATE
                    experiment._save(experiment._write(exp, arm))
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0, 0.15))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        proc = subprocess.run(["git", "config", "--file", include(), "--list"],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert subprocess.run(["git", "-C", str(experimenting), "status", "-uno"],
                              capture_output=True).returncode == 0
    ok("agent", "disable")
    ok("revert", "--scope", "global")
    assert (home / ".gitconfig").read_text() == USER_CONFIG


def test_an_experiment_stays_in_its_repository(repo, home, tmp_path):
    """By default an experiment runs in the repository whose commands it times: the
    global value git-tune wrote stays in force everywhere else, and is the approved arm."""
    other = tmp_path / "other"
    repogen.generate(str(other), repogen.RepoShape(depth=1, width=2, files=5))
    ok("set", "checkout.workers=2", "--scope", "global")
    ok("agent", "enable", "--repo", repo)
    collector.stop()
    try:
        ok("agent", "experiment", "checkout.workers=4", "--repo", repo)
        exp = experiment.load()
        assert exp.scope == "local" and exp.approved == "2" and exp.inherited
        exp = dataclasses.replace(experiment._write(exp, experiment.CANDIDATE),
                                  arm=experiment.CANDIDATE)
        experiment._save(exp)
        assert value(repo, "checkout.workers") == "4" and value(other, "checkout.workers") == "2"
        exp = dataclasses.replace(experiment._write(exp, experiment.APPROVED),
                                  arm=experiment.APPROVED)
        experiment._save(exp)
        assert value(repo, "checkout.workers") == "2"
        local = scopes.resolve("local", repo_probe.locate(str(repo))).include_file
        assert "checkout.workers" not in configwrite.read_include(local)
        ok("agent", "experiment", "--stop")
        assert value(repo, "checkout.workers") == "2" and not os.path.exists(local)
        assert b"git-tune" not in (repo / ".git" / "config").read_bytes()
    finally:
        collector.stop()
        invoke("agent", "disable")


def test_a_format_change_needs_its_own_yes_at_global_scope(repo, home):
    """A value that changes the index's format is held back from `auto --yes` at global
    scope, said why; --format-changes (or a person's yes) writes it."""
    from git_tune.advisor import auto as auto_mod
    from git_tune.models import catalogue
    scope = scopes.resolve("global")
    asked = []

    def yes_flag(q):
        asked.append(q)
        return None if q.own_yes else True
    held = auto_mod._format_changes_held_back({"index.version": "4", "checkout.workers": "4"},
                                              scope, auto_mod.AutoOptions(), yes_flag)
    assert list(held) == ["index.version"] and "its own yes" in held["index.version"]
    assert asked and asked[0].own_yes and catalogue.lookup("index.version").readers in asked[0].text
    assert not auto_mod._format_changes_held_back(
        {"index.version": "4"}, scope, auto_mod.AutoOptions(format_changes=True), yes_flag)
    assert not auto_mod._format_changes_held_back(
        {"index.version": "4"}, scopes.resolve("local", repo_probe.locate(str(repo))),
        auto_mod.AutoOptions(), yes_flag)


def test_a_format_change_that_saves_little_is_not_set():
    """The stake floor: a faster index write of a few ms is not worth a format others
    cannot read (the recommendation's reason says how much it saved)."""
    from git_tune.advisor.decide import advice, recommend
    from git_tune.advisor.measure.record import comparison
    c = comparison("write", {"index.skipHash": "false"}, {"index.skipHash": "true"},
                   [0.010] * 5, [0.007] * 5)
    gain = advice.Gain.of("write", c.estimate)
    k = advice.KeyAdvice("index.skipHash", advice.SET, "true", "false", gain, "faster")

    class Cal:
        trials = {"index.skipHash": type("T", (), {"comparisons": (c,)})()}
    out = recommend._worth_a_format_change(k, Cal)
    assert out.status == advice.NOT_SET and "3.0 ms" in out.reason and "libgit2" in out.reason
    big = comparison("write", {"index.skipHash": "false"}, {"index.skipHash": "true"},
                     [0.100] * 5, [0.050] * 5)
    Cal.trials = {"index.skipHash": type("T", (), {"comparisons": (big,)})()}
    assert recommend._worth_a_format_change(
        dataclasses.replace(k, gain=advice.Gain.of("write", big.estimate)), Cal).status == advice.SET
