"""The agent, part 2 (issue #33): an online comparison of two values on the user's own
commands, with its bounds. Real git switching branches in a watched repository; the
agent's state is read and stepped here as the collector does every minute."""
import json
import subprocess

import pytest

from git_tune import repogen
from git_tune.advisor.agent import collector, experiment, store, switch
from git_tune.advisor.agent.events import Command
from git_tune.advisor.write import journal
from git_tune.errors import UsageError
from git_tune.models import stats


def cli(*args, check=True):
    proc = subprocess.run(["git-tune", *args], text=True, capture_output=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def git(repo, *args, check=True):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=check)


@pytest.fixture
def watched(tmp_path):
    repo = tmp_path / "r"
    repogen.generate(str(repo), repogen.RepoShape(depth=1, width=3, files=60),
                     second_commit_changes=20)
    git(repo, "branch", "other", "HEAD~1")
    cli("set", "checkout.workers=2", "--repo", str(repo), "--scope", "global")
    cli("agent", "enable", "--repo", str(repo))
    collector.stop()            # stepped here, deterministically
    yield repo
    collector.stop()
    cli("agent", "disable", check=False)


def include_file():
    (entry,) = [e for e in journal.applied() if e.scope.name == "global"]
    return entry.scope.include_file


def switches(repo, n):
    """n branch switches: what checkout.workers changes (catalogue affects)."""
    for i in range(n):
        git(repo, "checkout", "-q", "other" if i % 2 == 0 else "-")


def step():
    switch.collect()
    return experiment.step(store.records())


def value_in_force(repo):
    return git(repo, "config", "checkout.workers", check=False).stdout.strip()


def test_slots_alternate_the_values_through_gits_own_config(watched):
    exp = experiment.start("global", "checkout.workers", "4")
    assert exp.classes and "checkout" in exp.classes and exp.arm == "approved"
    switches(watched, experiment.SLOT_COMMANDS - 1)
    assert step() is None and value_in_force(watched) == "2"       # slot not full yet
    switches(watched, 1)
    assert step() == {"switched": "candidate"} and value_in_force(watched) == "4"
    # Commands before the switch do not count for the candidate's slot.
    assert step() is None
    switches(watched, experiment.SLOT_COMMANDS)
    assert step() == {"switched": "approved"} and value_in_force(watched) == "2"
    a, b = experiment.pairs(experiment.load())
    assert len(a) == len(b) == 1 and a[0] > 0 and b[0] > 0
    status = json.loads(cli("agent", "status", "--json").stdout)["experiment"]
    assert status["key"] == "checkout.workers" and status["pairs"] == 1
    assert "experiment switched" in cli("agent", "log").stdout


def test_a_failing_command_ends_the_candidate_and_restores_the_values(watched):
    before = open(include_file(), "rb").read()
    experiment.start("global", "checkout.workers", "4")
    switches(watched, experiment.SLOT_COMMANDS)
    assert step() == {"switched": "candidate"}
    git(watched, "checkout", "no-such-branch", check=False)          # exits 1
    done = step()
    assert done["decided"] == "approved" and "exited 1" in done["why"]
    assert open(include_file(), "rb").read() == before and experiment.load() is None


def test_a_user_edit_stops_the_experiment_and_is_left_alone(watched):
    experiment.start("global", "checkout.workers", "4")
    switches(watched, experiment.SLOT_COMMANDS)
    assert step() == {"switched": "candidate"}
    subprocess.run(["git", "config", "--file", include_file(), "checkout.workers", "3"],
                   check=True)
    edited = open(include_file(), "rb").read()
    assert step() == {"stopped": "written by someone else"}
    assert open(include_file(), "rb").read() == edited and experiment.load() is None


def test_disable_mid_experiment_restores_the_config_byte_for_byte(watched, isolated_git):
    include = include_file()
    before = open(include, "rb").read()
    experiment.start("global", "checkout.workers", "4")
    switches(watched, experiment.SLOT_COMMANDS)
    assert step() == {"switched": "candidate"} and open(include, "rb").read() != before
    cli("agent", "disable")
    assert open(include, "rb").read() == before and experiment.load() is None
    assert value_in_force(watched) == "2"
    (entry,) = [e for e in journal.applied() if e.scope.name == "global"]
    assert entry.settings == {"checkout.workers": "2"}


def test_keys_that_change_more_than_speed_are_never_experimented_on(watched):
    with pytest.raises(UsageError, match="changes"):
        experiment.start("global", "index.version", "4")
    with pytest.raises(UsageError, match="in force already"):
        experiment.start("global", "checkout.workers", "2")


def _exp(costs):
    """An experiment whose slots had these (approved, candidate) costs, in turn."""
    slots = []
    for a, b in costs:
        slots += [experiment.Slot("approved", a, 5), experiment.Slot("candidate", b, 5)]
    return experiment.Experiment("global", "/r", "checkout.workers", "2", "4", ("checkout",),
                                 "approved", 0.0, tuple(slots))


def test_the_pairs_decide_with_calibrations_statistics():
    # A candidate twice as slow is abandoned after EARLY_RUNS pairs (4 slots: 20 commands).
    keep, why = experiment._verdict(_exp([(1.0, 2.0), (1.1, 2.1)]))
    assert keep == "approved" and "clearly slower" in why
    assert experiment._verdict(_exp([(1.0, 2.0)])) is None
    # A 1.3x gain whose commands spread 10% is kept once the minimum runs are in, not
    # before; one whose commands agree within 0.2% after stats.CLEAR_RUNS pairs.
    gain = [(1.0 + 0.1 * (i % 2), 0.77 + 0.08 * ((i + 1) % 2)) for i in range(5)]
    assert experiment._verdict(_exp(gain[:4])) is None
    keep, why = experiment._verdict(_exp(gain))
    assert keep == "candidate" and "faster beyond noise" in why
    steady = [(1.0 + 0.001 * i, 0.77 + 0.001 * i) for i in range(stats.CLEAR_RUNS)]
    assert experiment._verdict(_exp(steady[:-1])) is None
    keep, why = experiment._verdict(_exp(steady))
    assert keep == "candidate" and "clearly faster" in why
    # The same within EQUIVALENT once the minimum pairs are in: the value in force stays
    # then, paired slot by slot, though the day drifted 20% across them.
    same = [(1.0 + 0.05 * i, (1.0 + 0.05 * i) * (1.01 if i % 2 else 0.99)) for i in range(5)]
    assert experiment._verdict(_exp(same[:4])) is None
    keep, why = experiment._verdict(_exp(same))
    assert keep == "approved" and "the same within 5%" in why
    # Too noisy to say either for MAX_PAIRS pairs: the value in force stays.
    noisy = [(1.0, 1.0 + (0.15 if i % 2 else -0.14)) for i in range(experiment.MAX_PAIRS)]
    assert experiment._verdict(_exp(noisy[:-1])) is None
    keep, why = experiment._verdict(_exp(noisy))
    assert keep == "approved" and "no difference" in why


def test_a_value_calibration_found_slower_is_never_tried(watched):
    """The stored calibration of the repository (real, with a comparison of 4 workers on
    record) says 4 workers were slower: the experiment is refused, naming the workload."""
    import dataclasses
    from git_tune.advisor.measure import calibrate as cal
    from git_tune.advisor.measure.record import Trial, comparison
    from git_tune.probes import memo
    report = cal.probe_repository(str(watched))
    record = cal.calibrate(report, cal.Options(budget=3))
    slower = comparison("clone", {}, {"checkout.workers": "4"}, [1.0] * 5, [2.0] * 5)
    assert slower.estimate.verdict == "slower"
    trials = dict(record.trials, **{"checkout.workers": Trial("checkout.workers", (slower,))})
    memo.save("calibration", cal.cache_key(report),
              dataclasses.replace(record, trials=trials).to_json())
    assert experiment.measured_slower(str(watched), "checkout.workers", "4") == "clone"
    with pytest.raises(UsageError, match="slower beyond noise"):
        experiment.start("global", "checkout.workers", "4")
    assert experiment.measured_slower(str(watched), "checkout.workers", "8") is None


def test_an_experiment_where_git_tune_wrote_nothing_yet_is_undone_by_revert(tmp_path):
    """A calibration that decided nothing wrote nothing: the experiment's candidate is
    git-tune's first write to the scope, and stopping it gives the files back as they
    were (no include file, no include.path)."""
    repo = tmp_path / "r"
    repogen.generate(str(repo), repogen.RepoShape(depth=1, width=3, files=60),
                     second_commit_changes=20)
    git(repo, "branch", "other", "HEAD~1")
    cli("agent", "enable", "--repo", str(repo))
    collector.stop()
    try:
        gitconfig = subprocess.run(["git", "config", "--global", "--list", "--show-origin"],
                                   capture_output=True, text=True).stdout
        exp = experiment.start("global", "checkout.workers", "4", str(repo))
        assert exp.approved is None and exp.entry is None
        switches(repo, experiment.SLOT_COMMANDS)
        assert step() == {"switched": "candidate"} and value_in_force(repo) == "4"
        cli("agent", "experiment", "--stop")
        assert value_in_force(repo) == ""
        assert not [e for e in journal.applied() if e.scope.name == "global"]
        assert subprocess.run(["git", "config", "--global", "--list", "--show-origin"],
                              capture_output=True, text=True).stdout == gitconfig
    finally:
        collector.stop()
        cli("agent", "disable", check=False)


def _store_an_open_question(repo):
    """The repository's calibration (real, 3 s), stored as if its budget had ended before
    real git timed checkout.workers, with an engine sweep that measured a gain from 8
    threads: the open question registry.open_questions names."""
    import dataclasses
    from git_tune.advisor.measure import calibrate as cal
    from git_tune.probes import memo
    from tests.test_part import engine_sweep
    report = cal.probe_repository(str(repo))
    record = cal.calibrate(report, cal.Options(budget=3))
    trials = {k: t for k, t in record.trials.items() if k != "checkout.workers"}
    sweep = engine_sweep({1: 1.8, 2: 0.95, 4: 0.5, 8: 0.27, 16: 0.25}, 2)
    memo.save("calibration", cal.cache_key(report), dataclasses.replace(
        record, trials=trials, sweeps={**record.sweeps, "checkout": sweep},
        unfinished={"checkout.workers": 4.0}).to_json())


def test_the_agent_asks_the_users_commands_what_the_budget_left_open(watched):
    """A stored calibration of the repository whose budget ended before real git timed
    checkout.workers, and whose engine measured a gain from 8 threads: the agent starts,
    on its own, 8 against the value in force (2), once; stopped, it is not asked again."""
    _store_an_open_question(watched)
    assert experiment.propose(store.records()) is None      # no command of the repo seen yet
    switches(watched, 2)
    switch.collect()
    started = experiment.propose(store.records())
    assert started["started"] == "checkout.workers" and started["candidate"] == "8"
    exp = experiment.load()
    assert (exp.approved, exp.candidate) == ("2", "8") and "budget ended" in started["why"]
    assert value_in_force(watched) == "2"                    # the slots switch it later
    assert experiment.stop()
    assert experiment.propose(store.records()) is None       # asked once


def _repo(path):
    repogen.generate(str(path), repogen.RepoShape(depth=1, width=3, files=60),
                     second_commit_changes=20)
    git(path, "branch", "other", "HEAD~1")
    return path


def test_a_calibration_that_wrote_nothing_is_asked_in_the_repositorys_own_scope(tmp_path):
    """The repository's stored calibration kept Git's defaults (the budget ended before
    real git timed checkout.workers, the engine measured a gain from 8 threads), so
    git-tune wrote nothing for it. The agent still asks: in the repository's local
    scope, so no other repository's commands change, and another repository's local
    write is not the one switched. Stopped, both repositories' config bytes are as
    before."""
    asked, neighbour = _repo(tmp_path / "asked"), _repo(tmp_path / "neighbour")
    cli("set", "checkout.workers=3", "--repo", str(neighbour), "--scope", "local")
    neighbour_include = neighbour / ".git" / "git-tune.gitconfig"
    configs = {p: p.read_bytes() for p in (asked / ".git" / "config",
                                          neighbour / ".git" / "config", neighbour_include)}
    cli("agent", "enable", "--repo", str(asked))
    collector.stop()
    try:
        _store_an_open_question(asked)
        switches(asked, 2)
        switch.collect()
        started = experiment.propose(store.records())
        assert started["scope"] == "local" and started["candidate"] == "8"
        assert value_in_force(asked) == ""                     # Git's default in force
        switches(asked, experiment.SLOT_COMMANDS)
        assert step() == {"switched": "candidate"}
        assert value_in_force(asked) == "8" and value_in_force(neighbour) == "3"
        assert neighbour_include.read_bytes() == configs[neighbour_include]
        assert experiment.stop()
        assert {p: p.read_bytes() for p in configs} == configs
        assert not (asked / ".git" / "git-tune.gitconfig").exists()
        assert experiment.propose(store.records()) is None   # asked once
    finally:
        collector.stop()
        cli("agent", "disable", check=False)


def test_a_value_set_outside_git_tunes_scope_is_never_experimented_on(tmp_path):
    """The user set the key in the repository's own config: an experiment on the local
    scope would switch a value git never reads there (the user's wins), and the user's
    value is theirs. The start is refused, naming where it was set; nothing is written."""
    repo = _repo(tmp_path / "r")
    git(repo, "config", "checkout.workers", "5")
    before = (repo / ".git" / "config").read_bytes()
    with pytest.raises(UsageError, match="left alone"):
        experiment.start("local", "checkout.workers", "8", str(repo))
    assert (repo / ".git" / "config").read_bytes() == before and experiment.load() is None


def test_an_experiment_whose_switch_cannot_be_written_ends_and_the_agent_goes_on(tmp_path):
    """The repository vanished mid-experiment (moved, deleted): the switch to the
    candidate cannot be written. The collector's tend ends the experiment, logs why, and
    returns, instead of dying with the error; the next tend starts from nothing."""
    import shutil
    repo = _repo(tmp_path / "gone")
    cli("agent", "enable", "--repo", str(repo))
    collector.stop()
    try:
        experiment.start("local", "checkout.workers", "4", str(repo))
        switches(repo, experiment.SLOT_COMMANDS)
        switch.collect()
        shutil.rmtree(repo)
        (done,) = switch.tend()
        assert "could not go on" in done["stopped"] and experiment.load() is None
        assert "could not go on" in " ".join(cli("agent", "log").stdout.split())
        assert not any("stopped" in d for d in switch.tend())
    finally:
        collector.stop()
        cli("agent", "disable", check=False)


def _index_extensions(repo):
    from git_tune import engine
    return engine.index_read(str(repo / ".git" / "index")).extensions


def test_a_key_that_changes_the_index_is_tried_only_with_the_users_yes_against_its_take_back(
        watched):
    """core.untrackedCache adds an index extension, and Git's default ("keep") keeps it once
    added: the experiment needs the user's yes, and its "Git's default" slots run with
    false, which removes the extension (else they would time the candidate's cache).
    Stopping it gives the include file back byte for byte and says what the index kept,
    with the command that removes it (git-tune does not write the user's index)."""
    include = include_file()
    before = open(include, "rb").read()
    with pytest.raises(UsageError, match="--yes"):
        experiment.start("global", "core.untrackedCache", "true")
    assert experiment.load() is None and open(include, "rb").read() == before
    exp = experiment.start("global", "core.untrackedCache", "true", yes=True)
    assert exp.approved is None and exp.classes == ()       # every command reads the index
    uc = lambda: git(watched, "config", "core.untrackedCache", check=False).stdout.strip()
    assert uc() == "false"                      # the first slot already runs without it

    def statuses(n):
        for _ in range(n):
            git(watched, "status", "--porcelain")
    statuses(experiment.SLOT_COMMANDS)
    assert step() == {"switched": "candidate"} and uc() == "true"
    statuses(experiment.SLOT_COMMANDS)
    assert "UNTR" in _index_extensions(watched)            # git added it under the candidate
    assert step() == {"switched": "approved"} and uc() == "false"
    statuses(1)
    assert "UNTR" not in _index_extensions(watched)        # and removed it under false
    a, b = experiment.pairs(experiment.load())
    assert len(a) == len(b) == 1
    statuses(experiment.SLOT_COMMANDS - 1)
    assert step() == {"switched": "candidate"}
    statuses(1)
    cli("agent", "experiment", "--stop")
    assert open(include, "rb").read() == before and uc() == ""
    log = cli("agent", "log").stdout
    assert "with the user's yes" in log and "update-index --no-untracked-cache" in log
    # Keys whose values reach an index only through update-index: refused, yes or not.
    with pytest.raises(UsageError, match="update-index"):
        experiment.start("global", "index.version", "4", yes=True)


def test_a_slot_holds_both_directions_of_a_back_and_forth_alike():
    """A user switching back and forth between two branches: one direction writes more
    than the other (here twice the time). Every slot's cost is the same, so neither arm
    gets the dearer direction's time: with an odd count a side, alternate slots held a
    majority of one direction, and the arms compared the directions."""
    day = [Command("s%d" % i, "checkout", (), "/r", "2.55.0", 2.0 if i % 2 else 1.0, 0, None,
                   counts={"entries": 1}, ended=float(i))
           for i in range(8 * experiment.SLOT_COMMANDS)]
    costs = {experiment._cost(day[i:i + experiment.SLOT_COMMANDS])
             for i in range(0, len(day), experiment.SLOT_COMMANDS)}
    assert len(costs) == 1, costs


def _records(repo, value, seconds, start, n=experiment.SLOT_COMMANDS, command="checkout"):
    """n of the user's commands as the agent records them, run with `value` in force."""
    return [Command(f"s{start + i}", command, (), str(repo), "2.47", seconds, 0, None, {},
                    {"entries": 100}, {"checkout.workers": value}, start + i)
            for i in range(n)]


def _run_slots(repo, costs):
    """Step the running experiment through slots whose commands cost as `costs` says
    (arm -> seconds, or a callable of the slot's number), until it decides."""
    import time as _time
    t, records, done = _time.time() + 10, [], None
    for slot in range(40):
        exp = experiment.load()
        cost = costs[exp.arm]
        records += _records(repo, exp.value(), cost(slot) if callable(cost) else cost, t)
        t += 100
        done = experiment.step(records)
        if done and "decided" in done:
            return done, slot
    return done, None


def test_a_winner_is_re_tested_for_one_more_pair_before_it_is_final(watched):
    experiment.start("global", "checkout.workers", "4")
    done, slot = _run_slots(watched, {"approved": 2.0, "candidate": 1.0})
    assert done["decided"] == "candidate" and "again in one more pair" in done["why"]
    assert slot == 7                        # clearly faster at 3 pairs, kept at the 4th
    assert "re-testing" in cli("agent", "log").stdout


def test_a_winner_that_does_not_hold_in_the_re_test_is_dropped(watched):
    experiment.start("global", "checkout.workers", "4")
    done, slot = _run_slots(watched, {"approved": 2.0,
                                      "candidate": lambda s: 1.0 if s < 6 else 3.0})
    assert done["decided"] == "approved" and "not in the one more pair" in done["why"]
    assert value_in_force(watched) == "2"


def test_slots_are_compared_class_by_class():
    """A slot of statuses against one of switches is not a comparison: the pair is
    compared on the classes both slots hold."""
    a = experiment.Slot("approved", 1.0, 6, {"status": 1.0, "checkout": 4.0})
    b = experiment.Slot("candidate", 3.0, 6, {"status": 1.0, "checkout": 2.0})
    assert experiment._like_with_like(a, b) == pytest.approx((2.0, 2 ** 0.5))
    c = experiment.Slot("candidate", 3.0, 6, {"checkout": 3.0})
    assert experiment._like_with_like(a, c) == pytest.approx((4.0, 3.0))
