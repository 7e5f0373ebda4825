"""The budget scheduler (issue #11): asymmetric, sequential A/B runs.

Scripted workloads stand in for git here, on a clock the test moves itself
(budget.FakeClock): a run of 0.2 s takes exactly 0.2 s of the budget and no
wall time. What is tested is the scheduler's decisions, not any timing of git.
"""
import math
import os
import time
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from git_tune.advisor.keys import checkout_trial
from git_tune import repogen
from git_tune.advisor.keys import preload, registry
from git_tune.advisor.measure.bench import MIN_SAMPLE, sample_files
from git_tune.advisor.measure.record import Trial
from git_tune.probes import report, storage

from git_tune.advisor.decide import advice
from git_tune.advisor.decide.recommend import decide_measured
from git_tune.advisor.measure import budget as budget_plan, gitbench
from git_tune.advisor.measure.ab import (EARLY_RUNS, STOPPED_BUDGET, STOPPED_FASTER,
                                         STOPPED_SLOWER, OutOfBudget)
from git_tune.advisor.measure.bench import Bench, Budget
from git_tune.advisor.measure.record import Options
from git_tune.advisor.measure.sweep import MeasurementFailed
from git_tune.models import catalogue, stats
from tests.conftest import bench_on, git_out

# Its claims are measurements under a budget: run beside at most one other such test (tools/test).
pytestmark = pytest.mark.timed

KEY = catalogue.lookup("core.untrackedCache")


def bench(budget: float) -> Bench:
    return Bench(workspace=None, names=[], cores=2, storage_class="local-ssd", git_facts=None,
                 options=Options(budget=budget), budget=Budget(budget))


@pytest.fixture
def clock():
    """A fake clock for the budget: a scripted run moves it by its seconds. The tests
    that run real git keep the real one."""
    with budget_plan.use_clock(budget_plan.FakeClock()) as fake:
        yield fake


def sleeper(*seconds, cycle: bool = False):
    """A workload whose n-th run takes seconds[n] of the budget's clock (the last value
    repeats; with cycle, all of them over and over)."""
    calls = []

    def run():
        n = len(calls)
        t = seconds[n % len(seconds) if cycle else min(n, len(seconds) - 1)]
        calls.append(t)
        _advance(t)
        return t
    run.calls = calls
    return run


def _advance(seconds: float) -> None:
    budget_plan._clock.get().advance(seconds)


def test_a_clearly_slower_candidate_stops_after_the_minimum_runs(clock):
    default, candidate = sleeper(0.005), sleeper(0.2)
    c = bench(60).ab("status", {}, {KEY.name: "true"}, default, candidate)
    assert c.stopped == STOPPED_SLOWER
    assert len(c.times_default) == len(c.times_candidate) == EARLY_RUNS
    assert len(candidate.calls) == EARLY_RUNS + 1          # plus the warm-up
    a = advice.validated(KEY, c, "true", "git status")
    assert a.status == advice.NOT_SET and "clearly slower" in a.reason


def test_a_large_gain_is_decided_after_the_clear_runs(clock):
    default, candidate = sleeper(0.1), sleeper(0.005)
    c = bench(60).ab("status", {}, {KEY.name: "true"}, default, candidate)
    assert c.stopped == STOPPED_FASTER
    assert len(c.times_default) == len(c.times_candidate) == stats.CLEAR_RUNS
    assert c.estimate.verdict == stats.FASTER
    a = advice.validated(KEY, c, "true", "git status")
    assert a.status == advice.SET and "clearly apart" in a.reason


def test_a_large_gain_fits_a_budget_the_minimum_runs_would_not(clock):
    # Warm-up pair 0.305 s; 3 more pairs fit in what is left, MIN_RUNS pairs would not.
    b = bench(1.5)
    c = b.ab("status", {}, {KEY.name: "true"}, sleeper(0.3), sleeper(0.005))
    assert c.stopped == STOPPED_FASTER and c.estimate.verdict == stats.FASTER
    assert b.budget.used() < 1.5
    # Without a large gain in the warm-up, the same budget refuses the trial.
    with pytest.raises(OutOfBudget):
        bench(1.5).ab("status", {}, {KEY.name: "true"}, sleeper(0.3), sleeper(0.25))


def test_a_clearly_slower_candidate_fits_a_budget_the_minimum_runs_would_not(clock):
    # Warm-up pair 0.4 s; the EARLY_RUNS pairs that drop a clearly slower candidate fit
    # in what is left (0.9 s), MIN_RUNS pairs would not: the comparison runs, and keeps
    # Git's default by real git's runs, not by the budget's end.
    b = bench(1.3)
    c = b.ab("status", {}, {KEY.name: "true"}, sleeper(0.1), sleeper(0.3))
    assert c.stopped == STOPPED_SLOWER and len(c.times_candidate) == EARLY_RUNS
    assert b.budget.used() <= 1.3
    # A candidate no slower than that in its warm-up gets no such discount.
    with pytest.raises(OutOfBudget):
        bench(1.3).ab("status", {}, {KEY.name: "true"}, sleeper(0.2), sleeper(0.22))
    # The warm-up pair's git runs are killed at a quarter of what is left, or a third
    # where the caller expects the candidate dropped in EARLY_RUNS pairs (the engine
    # showed it clearly slower).
    for expected, share in ((False, 1 / 4), (True, 1 / 3)):
        b, deadlines = bench(1.2), []

        def warm():
            deadlines.append(gitbench._deadline.get() - budget_plan.now())
            return sleeper(0.1)()
        b.ab("status", {}, {KEY.name: "true"}, warm, sleeper(0.25), slower_expected=expected)
        assert deadlines[0] == pytest.approx(1.2 * share)


def test_a_trial_that_cannot_fit_keeps_the_default_and_names_the_budget(clock):
    b = bench(0.2)
    with pytest.raises(OutOfBudget) as e:
        b.ab("status", {}, {KEY.name: "true"}, sleeper(0.05), sleeper(0.05))
    assert e.value.seconds_short > 0.1     # 5 pairs of 0.1 s in less than 0.2 s
    # The warm-up pair is all that ran.


def test_a_faster_candidate_cut_short_by_the_budget_is_never_set(clock):
    # The warm-up pair is quick, so the minimum seems to fit; then git slows down and
    # the budget ends after a few runs, with the candidate 1.25x faster so far (not
    # stats.CLEARLY, which would decide in fewer runs).
    b = bench(0.6)
    c = b.ab("status", {}, {KEY.name: "true"}, sleeper(0.005, 0.2), sleeper(0.004, 0.16))
    assert c.stopped == STOPPED_BUDGET
    assert len(c.times_candidate) < stats.MIN_RUNS
    assert c.estimate.verdict == stats.NO_CHANGE
    a = advice.validated(KEY, c, "true", "git status")
    assert a.status == advice.NOT_SET and "budget ended" in a.reason


def test_pairs_no_verdict_can_come_from_in_the_budget_left_are_not_run(clock):
    """#30: a warm-up 1.4x apart prices the 3 pairs of a clear verdict; the pairs then
    show 1.43x, short of stats.CLEARLY, with runs that spread too much for their gap to
    decide (stats.SPREAD_MARGIN), and a verdict needs MIN_RUNS pairs, which the budget
    left cannot hold: the comparison stops there, leaving that budget to the keys after
    it, instead of running on to the budget's end undecided."""
    def default():
        return sleeper(0.7, 0.8, cycle=True)

    def candidate():
        return sleeper(0.5, 0.56, cycle=True)
    b = bench(6.5)
    c = b.ab("clone", {}, {KEY.name: "true"}, default(), candidate())
    assert c.stopped == STOPPED_BUDGET and len(c.times_candidate) == stats.CLEAR_RUNS
    assert b.budget.left() > 1.0        # 2 more pairs (2.4 s) could not have fitted
    # The advice names the budget that holds them, and that budget decides.
    needed = math.ceil(c.budget_needed)
    a = advice.validated(KEY, c, "true", "a clone")
    assert a.status == advice.NOT_SET and f"--budget {needed} or more would decide it" in a.reason
    c = bench(needed).ab("clone", {}, {KEY.name: "true"}, default(), candidate())
    assert not c.stopped and c.estimate.verdict == stats.FASTER
    assert c.budget_needed is None


def test_more_runs_within_noise_take_one_waiting_trials_share_no_more(clock):
    """#30: a comparison still within noise gets more pairs from its share of what is
    left beside the trials still to run: alone it is extended, with seven trials after
    it (the keys not reached yet) it stops at its runs and leaves them the budget. The
    comparisons its own trial runs after it (`then`: the whole tree's after the
    workers' batch) count as such trials."""
    def compare(trials_after, then=0):
        b = bench(30)
        b.trials_after = trials_after
        return b.ab("clone", {}, {KEY.name: "true"}, sleeper(0.30, 0.50, 0.35, cycle=True),
                    sleeper(0.45, 0.28, 0.40, cycle=True), then=then), b
    alone, _ = compare(0)
    assert alone.estimate.verdict == stats.NO_CHANGE
    assert len(alone.times_default) > bench(30).runs          # extended
    waiting, b = compare(7)
    assert waiting.estimate.verdict == stats.NO_CHANGE
    assert len(waiting.times_default) == b.runs               # its runs, no more
    waiting, b = compare(0, then=7)
    assert len(waiting.times_default) == b.runs


def test_with_time_enough_a_faster_candidate_is_set(clock):
    # 1.43x: every run apart, but not by stats.CLEARLY, and runs spread 12% beside a
    # gap of 1.28x: the minimum runs are needed.
    c = bench(60).ab("status", {}, {KEY.name: "true"}, sleeper(0.05, 0.056, cycle=True),
                     sleeper(0.035, 0.039, cycle=True))
    assert not c.stopped and len(c.times_candidate) >= stats.MIN_RUNS
    assert advice.validated(KEY, c, "true", "git status").status == advice.SET
    assert stats.compare([1.0, 1.06, 1.0], [0.8, 0.84, 0.8]).verdict == stats.NO_CHANGE
    assert stats.compare([1.0, 0.3, 1.0], [0.5, 0.5, 0.5]).verdict == stats.NO_CHANGE


def test_an_unfinished_key_stays_at_default_and_names_the_budget():
    """A recorded calibration in which the budget ended before one key's trial."""
    import json
    import os
    from git_tune.advisor.decide.recommend import recommend
    from git_tune.advisor.measure.record import Calibration
    path = os.path.join(os.path.dirname(__file__), "data", "calibrations", "disk-v1.json")
    with open(path) as f:
        cal = Calibration.from_json(json.load(f)["calibration"])
    assert recommend(cal).settings().get("checkout.workers")        # set with its trial
    trials = {k: t for k, t in cal.trials.items() if k != "checkout.workers"}
    cut = Calibration(**{**cal.__dict__, "trials": trials, "unfinished": {"checkout.workers": 12.4}})
    by_key = {k.key: k for k in recommend(cut).keys}
    w = by_key["checkout.workers"]
    assert w.status == advice.NOT_SET and w.value is None
    assert f"--budget {int(cal.options.budget + 12.4) + 1} or more" in w.reason, w.reason
    # The threshold follows: no parallel checkout was shown to win.
    assert by_key["checkout.thresholdForParallelism"].status == advice.NOT_SET
    assert "agent experiment" not in w.reason     # the agent asks about it on its own
    # A key that changes more than speed: the user is told how their commands settle it.
    trials = {k: t for k, t in cal.trials.items() if k != "core.untrackedCache"}
    cut = Calibration(**{**cal.__dict__, "trials": trials,
                         "unfinished": {"core.untrackedCache": 300.0}})
    u = {k.key: k for k in recommend(cut).keys}["core.untrackedCache"]
    assert u.status == advice.NOT_SET and "--budget" in u.reason
    assert (f"git-tune agent experiment core.untrackedCache=true --yes --repo "
            f"{cal.repository.path}") in u.reason, u.reason


def test_the_deadline_stops_a_git_run_and_what_it_started(tmp_path):
    """A real git whose post-checkout hook would take 30 s: stopped at the deadline with
    the hook (it holds git's stderr open; a plain kill of git would wait for it)."""
    import subprocess
    from git_tune.advisor.measure import gitbench
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x")
    subprocess.run(["git", "-C", str(repo), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "f"], check=True)
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\nsleep 30\ntouch {tmp_path}/hook-finished\n")
    hook.chmod(0o755)
    t0 = time.monotonic()
    with pytest.raises(gitbench.DeadlineReached):
        with gitbench.deadline(0.5):
            gitbench.timed_git(["checkout", "-q", "-f", "HEAD"], str(repo), {})
    assert time.monotonic() - t0 < 15          # not the hook's 30 s
    time.sleep(0.5)
    assert not (tmp_path / "hook-finished").exists()


def failing(after: int = 0):
    """A workload that fails as git does under a pid limit, after `after` good runs."""
    calls = []

    def run():
        calls.append(1)
        if len(calls) > after:
            raise MeasurementFailed("git status failed: fatal: unable to create threaded "
                                    "lstat: Resource temporarily unavailable")
        return 0.001
    run.calls = calls
    return run


def test_git_default_that_fails_here_loses_to_a_candidate_that_works(clock):
    c = bench(60).ab("status", {}, {"core.preloadIndex": "false"}, failing(), sleeper(0.001))
    assert c.fails == "default" and c.estimate is None
    assert len(c.times_candidate) == stats.MIN_RUNS and not c.times_default
    a = advice.validated(catalogue.lookup("core.preloadIndex"), c, "false", "git status")
    assert (a.status, a.value) == (advice.SET, "false") and "threaded lstat" in a.reason


def test_a_candidate_that_fails_here_is_never_set(clock):
    c = bench(60).ab("status", {}, {KEY.name: "true"}, sleeper(0.001), failing())
    assert c.fails == "candidate"
    a = advice.validated(KEY, c, "true", "git status")
    assert a.status == advice.NOT_SET and "fails here" in a.reason


def test_git_failing_on_both_sides_is_a_failure_not_a_decision():
    with pytest.raises(MeasurementFailed):
        bench(60).ab("status", {}, {KEY.name: "true"}, failing(), failing())


def test_git_default_that_fails_only_sometimes_still_fails(clock):
    """Under a pid limit Git's preload threads exceed only when enough of them overlap,
    so git status works now and then (5 of 40 under pids.max=6 here): a default that
    worked in its warm-up and failed later is a failing default, not "not decided"."""
    c = bench(60).ab("status", {}, {"core.preloadIndex": "false"}, failing(after=2),
                     sleeper(0.001))
    assert c.fails == "default" and c.estimate is None
    assert "fails only sometimes" in c.error and "threaded lstat" in c.error
    a = advice.validated(catalogue.lookup("core.preloadIndex"), c, "false", "git status")
    assert (a.status, a.value) == (advice.SET, "false")


# --- what the budget is spent on (issue #11): the probe, the samples, hopeless trials ---

def _bench_with_preload(pid_limit=None, **facts):
    """What preload's trial reads of a calibration in progress: its sweep's facts."""
    f = preload.Facts(**dict(dict(entries=3000, git_threads=6, git_default=None,
                                  single_thread=None), **facts))
    from git_tune.advisor.measure.record import Sweep
    sweep = Sweep("grid", (), (), {}, None, 0, 0.0, "deferred", asdict(f))
    return SimpleNamespace(sweeps={"preload": sweep}, pid_limit=pid_limit)


def test_preload_off_is_not_tried_where_the_engine_shows_it_hopeless():
    # One thread 4x slower than Git's six on a part: no real git is spent on "off".
    why = preload._hopeless(_bench_with_preload(part_files=300, part_git_default=0.1,
                                                part_single_thread=0.4))
    assert why and "4.0x" in why and "off cannot be faster" in why
    # The whole-tree figures win over the part's when both exist.
    assert preload._hopeless(_bench_with_preload(git_default=0.1, single_thread=0.12,
                                                 part_files=300, part_git_default=0.1,
                                                 part_single_thread=0.4)) is None
    # Close: real git decides.
    assert preload._hopeless(_bench_with_preload(part_files=300, part_git_default=0.1,
                                                 part_single_thread=0.12)) is None
    # Below 1,000 entries Git starts no threads: on and off are the same work.
    assert "no preload threads" in preload._hopeless(
        _bench_with_preload(entries=999, git_threads=1))
    # Under a pid limit Git's threads may fail where the engine's did not: real git decides.
    assert preload._hopeless(_bench_with_preload(pid_limit=6, part_files=300,
                                                 part_git_default=0.1,
                                                 part_single_thread=0.4)) is None


def test_off_real_git_times_faster_is_not_set_where_the_engine_ruled_it_out(clock):
    """Real git's runs of a comparison meet the same entries again, from the caches; the
    engine's part met them the first time. Where the engine showed one thread clearly
    slower, off timed faster by real git is not written (only where both agree); where
    the engine did not, real git's verdict stands."""
    key = catalogue.lookup("core.preloadIndex")
    c = bench(60).ab("status", {}, {"core.preloadIndex": "false"}, sleeper(0.02),
                     sleeper(0.01))
    cal = SimpleNamespace(trials={key.name: Trial(key.name, (c,))})
    ruled_out = _bench_with_preload(part_files=300, part_git_default=0.1,
                                    part_single_thread=0.4)
    close = _bench_with_preload(part_files=300, part_git_default=0.1, part_single_thread=0.11)
    cal.sweeps = ruled_out.sweeps
    kept = preload.decide(key, cal, {"status": 1.0})
    assert kept.status == advice.NOT_SET and "met the first time" in kept.reason
    cal.sweeps = close.sweeps
    assert preload.decide(key, cal, {"status": 1.0}).status == advice.SET


def test_a_trial_not_run_keeps_the_default_and_says_why():
    t = Trial.not_run("core.preloadIndex", "because")
    assert t.why_not_run == "because" and not t.comparisons
    cal = type("Cal", (), {"trials": {"core.preloadIndex": t}, "sweeps": {}})()
    # Whatever the key's module: the registry keeps Git's default and quotes why.
    for key in ("core.preloadIndex", "core.fsmonitor"):
        cal.trials = {key: Trial.not_run(key, "because")}
        a = decide_measured(registry.entry(key), cal, {"status": 1.0})
        assert a.status == advice.NOT_SET and a.value is None and "because" in a.reason


def test_a_timed_sample_keeps_index_order_and_a_spread_minimum(tmp_path):
    names = [f"d{i // 10:03d}/f{i % 10}" for i in range(1000)]
    for n in names:
        (tmp_path / n).parent.mkdir(exist_ok=True)
        (tmp_path / n).write_bytes(b"x" * (len(n) % 7))
    paths, sizes = sample_files(str(tmp_path), names, 500, seconds=0.0)
    # No time at all still gives MIN_SAMPLE files, from all over the tree, in index order.
    assert len(paths) == MIN_SAMPLE and paths == sorted(paths)
    assert paths[0] < "d010" and paths[-1] > "d090"
    assert sizes == [len(p) % 7 for p in paths]
    everything, _ = sample_files(str(tmp_path), names, 500)
    assert len(everything) == 500 and everything == sorted(everything)


def test_a_samples_sizes_are_the_indexs_where_it_records_them(tmp_path):
    """The calibration's one listing of the index carries each regular file's recorded
    size (`ls-files --debug`), and the listing without it is what it was. A sample takes
    those sizes and lstats only where the index records none (an entry added by
    update-index --cacheinfo, never refreshed) or where it is no regular file (a link)."""
    from git_tune.probes import repo as repo_probe
    repo = tmp_path / "r"
    repo.mkdir()
    git_out(str(repo), "init", "-q")
    (repo / "d").mkdir()
    (repo / "d" / "a.c").write_bytes(b"x" * 1234)
    (repo / "empty").write_bytes(b"")
    (repo / "new\nline").write_bytes(b"yy")
    (repo / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(repo / "run.sh", 0o755)
    os.symlink("d/a.c", repo / "link")
    # Written well before the index: no entry is racily clean, which git would smudge.
    for p in ("d/a.c", "empty", "new\nline", "run.sh", "link"):
        os.utime(repo / p, (time.time() - 60,) * 2, follow_symlinks=False)
    git_out(str(repo), "add", "-A")
    blob = git_out(str(repo), "rev-parse", ":d/a.c").strip()
    git_out(str(repo), "update-index", "--add", "--cacheinfo", f"100644,{blob},d/b.c")
    (repo / "d" / "b.c").write_bytes(b"z" * 99)
    plain = git_out(str(repo), "ls-files", "-s", "-t", "-z")
    debug = git_out(str(repo), "ls-files", "-s", "-t", "-z", "--debug")
    listing, sizes = repo_probe.listing_with_sizes(debug)
    assert listing == plain
    assert sizes == {"d/a.c": 1234, "d/b.c": 0, "empty": 0, "new\nline": 2, "run.sh": 10}
    names = [r.partition("\t")[2] for r in repo_probe.in_worktree(plain)]
    paths, got = sample_files(str(repo), names, 10, recorded=sizes)
    assert dict(zip(paths, got)) == {"d/a.c": 1234, "d/b.c": 99, "empty": 0,
                                     "new\nline": 2, "run.sh": 10}
    # Recorded sizes are taken as they are: no lstat of those files at all.
    os.unlink(repo / "d" / "a.c")
    paths, got = sample_files(str(repo), names, 10, recorded=sizes)
    assert dict(zip(paths, got))["d/a.c"] == 1234


def test_the_probe_sizes_its_samples_to_its_allowance(latfs_bed):
    # On the NFS-like bed (1 ms a metadata operation) the quick probe's 200 samples of
    # each operation take seconds; a small allowance makes it take fewer, never none.
    backing = os.path.join(os.path.dirname(latfs_bed), "backing", "repo")
    repogen.generate(backing, repogen.RepoShape.for_files(1500), limit=1500)
    repo = os.path.join(latfs_bed, "repo")
    small = report.probe(repo, allowance=0.5)
    lat = small.primary_storage().latency
    assert storage.PILOT["samples"] <= lat["lstat_hit"]["count"] < storage.QUICK["samples"]
    assert any("sampled to keep within the time allowed" in n for n in small.cache.notes)
    assert small.cache.tracked_sample.files < 500
    full = report.probe(repo)
    assert full.primary_storage().latency["lstat_hit"]["count"] == storage.QUICK["samples"]
    assert full.repository.loose_objects == small.repository.loose_objects


def test_a_batch_checkout_is_timed_with_the_next_status_of_its_files(tmp_path):
    """The batch A/B times `git checkout` and the next `git status` of the batch (what
    the burst of writes costs next). Paths too long for one command line fall back to
    the whole status, so no repository shape ends in E2BIG."""
    from git_tune.advisor.measure import gitbench
    repo = tmp_path / "repo"
    deep = "d" * 200
    repo.mkdir()
    git_out(repo, "init", "-q")
    for i in range(400):
        (repo / f"{deep}{i:03d}").write_text(f"{i}\n")
    git_out(repo, "add", "-A")
    git_out(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    names = git_out(repo, "ls-files", "-z").split("\0")[:-1]
    for paths in (names[:10], names):          # 10 paths: a pathspec; 400: 80 KB of them
        work = gitbench.CheckoutWorkload(str(repo), paths, str(tmp_path))
        assert work.run({}) > 0
        assert all((repo / p).exists() for p in paths)
        assert git_out(repo, "status", "--porcelain") == ""
        assert ("--" in work._next_status()) == (paths is not names)


def test_the_scratch_clone_starts_from_the_users_index_whatever_its_shape(tmp_path):
    """The checkout trials' clone gets a copy of the user's index (what is staged
    included, and its cache-tree, which spares each status a walk of HEAD's trees). A
    split index, whose shared part stays behind, falls back to HEAD's tree; either way
    the batch can be written, and the user's repository is left as it was."""
    from git_tune.advisor.measure import gitbench
    from git_tune.probes import repo as repo_probe
    repo = tmp_path / "repo"
    repo.mkdir()
    git_out(repo, "init", "-q")
    (repo / "d").mkdir()
    for name in ("a", "b", "d/c"):
        (repo / name).write_text(f"{name} committed\n")
    git_out(repo, "add", "-A")
    git_out(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    (repo / "a").write_text("a staged\n")
    git_out(repo, "add", "a")
    for split, expected in ((False, "a staged\n"), (True, "a committed\n")):
        if split:
            git_out(repo, "update-index", "--split-index")
        before = git_out(repo, "status", "--porcelain")
        scratch = tmp_path / f"scratch-{split}"
        scratch.mkdir()
        clone = gitbench.Workspace(repo_probe.locate(str(repo)), str(scratch)).clone()
        work = gitbench.CheckoutWorkload(clone, ["a", "d/c"], str(scratch))
        assert work.run({}) > 0
        assert open(os.path.join(clone, "a")).read() == expected
        assert open(os.path.join(clone, "d", "c")).read() == "d/c committed\n"
        assert git_out(repo, "status", "--porcelain") == before


def test_findings_no_trial_needs_wait_until_every_trial_has_had_the_budget(monkeypatch, clock):
    # Two families: the first's sweep decides its own trial at once and leaves its
    # search (findings only) for later; the second's sweep and trial come before that
    # search, which then gets what is left, or, with nothing left, is not run.
    from types import ModuleType
    from git_tune.advisor.measure import calibrate
    calls = []

    def family(name, defer):
        m = ModuleType(f"fake.{name}")

        def sweep(b):
            calls.append(f"{name} sweep")
            if defer:
                b.later.append((name, lambda _: calls.append(f"{name} search") or "full"))
            return "first"
        m.sweep = sweep
        m.trial = lambda key, b: calls.append(f"{name} trial")
        return m
    a, b = family("a", True), family("b", False)
    keys = [catalogue.lookup("core.preloadIndex"), catalogue.lookup("checkout.workers")]
    entries = (registry.Entry(keys[0], a), registry.Entry(keys[1], b))
    monkeypatch.setattr(registry, "trial_order", lambda: entries)
    monkeypatch.setattr(registry, "sweepers", lambda: [("a", a.sweep), ("b", b.sweep)])
    understood = {k.name for k in keys}
    run = bench(60)
    calibrate._measure(run, understood)
    assert calls == ["a sweep", "a trial", "b sweep", "b trial", "a search"]
    assert run.sweeps == {"a": "full", "b": "first"} and not run.notes
    # The trials spent the budget: the search is not run, and the note says so.
    calls.clear()
    spent = bench(0.05)
    m = b.trial
    b.trial = lambda key, bb: m(key, bb) or _advance(0.1)
    calibrate._measure(spent, understood)
    assert calls == ["a sweep", "a trial", "b sweep", "b trial"]
    assert spent.sweeps["a"] == "first"
    assert spent.notes == ["a sweep (findings, after the trials) not run: the budget had ended"]


def test_the_untracked_cache_is_weighed_with_what_every_index_read_pays():
    """The cache speeds up only a status with untracked files, and its extension is read
    by every command: a status -uno shown slower beyond noise keeps Git's default, a cost
    within noise does not."""
    import json
    from git_tune.advisor.decide.recommend import recommend
    from git_tune.advisor.measure.record import Calibration, comparison
    path = os.path.join(os.path.dirname(__file__), "data", "calibrations", "disk-v1.json")
    with open(path) as f:
        cal = Calibration.from_json(json.load(f)["calibration"])
    off, on = {KEY.name: "false"}, {KEY.name: "true"}
    gain = comparison("untracked", off, on, [0.013, 0.0131, 0.0129, 0.013, 0.0132],
                      [0.010, 0.0101, 0.0099, 0.010, 0.0102])
    steady = [0.0100, 0.0101, 0.0099, 0.0100, 0.0102]

    def advice_with(status_on, untimed=None):
        costs = (comparison("status", off, on, steady, status_on),) if status_on else ()
        facts = {"fs_test": True, "costs_not_timed": untimed}
        trials = {**cal.trials, KEY.name: Trial(KEY.name, (gain, *costs), facts)}
        cut = Calibration(**{**cal.__dict__, "trials": trials})
        return {k.key: k for k in recommend(cut).keys}[KEY.name]

    slower = advice_with([0.0110, 0.0111, 0.0109, 0.0110, 0.0112])
    assert slower.status == advice.NOT_SET and "git status -uno" in slower.reason, slower.reason
    within = advice_with(steady)
    assert within.status == advice.SET, within.reason
    assert "git status with untracked files" in within.reason and "weighted" in within.reason
    assert "not timed" not in within.reason
    # Costs the budget left untimed: the gain decides, and the advice names them.
    gain_only = advice_with(None, ["status", "index", "write"])
    assert gain_only.status == advice.SET, gain_only.reason
    assert ("its cost on git status -uno, reading the index (git ls-files), writing the "
            "index (git update-index --force-write-index) not timed") in gain_only.reason


def test_the_untracked_trial_times_the_caches_costs_only_after_its_gain(tmp_path):
    """Real git on a real repository with untracked files in many directories: the
    trial's first comparison is the gain; the costs (status -uno, ls-files, an index
    write, as the mixed profile weighs them) follow only where the gain was shown."""
    from git_tune.advisor.keys import untracked
    from git_tune.advisor.measure import calibrate, gitbench
    from git_tune.probes import repo as repo_probe
    repo = tmp_path / "repo"
    repogen.generate(str(repo), repogen.RepoShape.for_files(600), limit=600)
    for d in range(60):
        os.makedirs(repo / f"scratch{d}")
        for f in range(10):
            (repo / f"scratch{d}" / f"u{f}").write_text("x")
    report = calibrate.probe_repository(str(repo), 60)
    layout = report.repository.layout
    b = Bench(gitbench.Workspace(layout, str(tmp_path / "ws")),
              repo_probe.tracked_sample(layout, n=10 ** 9), 2, "local-ssd", report.git,
              Options(budget=60), Budget(60))
    os.makedirs(b.ws.root, exist_ok=True)
    t = untracked.trial(KEY, b)
    # The gain first; its costs wait until every key has had its trial (bench.sharpen),
    # one workload a step, in order, each step's trial holding those timed so far.
    assert [c.workload for c in t.comparisons] == ["untracked"]
    if t.comparisons[0].estimate.verdict == stats.FASTER:
        assert t.facts_as(untracked.TrialFacts).costs_not_timed == untracked.COSTS
        step = b.sharpen[untracked.KEY]
        while True:
            more = step()
            if more is None:
                break
            t = more
        workloads = [c.workload for c in t.comparisons]
        assert workloads == ["untracked", *untracked.COSTS[:len(workloads) - 1]]
        assert t.facts_as(untracked.TrialFacts).costs_not_timed is None
    else:
        assert untracked.KEY not in b.sharpen
        assert t.facts_as(untracked.TrialFacts).costs_not_timed is None
    # Each cost's command runs with real git on both copies, whatever the gain was here.
    copies = (b.ws.index_copy("uc-off", untracked.index_shape(KEY, "false")),
              b.ws.index_copy("uc-on", untracked.index_shape(KEY, "true")))
    for c in [*t.comparisons, *(untracked._ab(b, w, copies) for w in untracked.COSTS)]:
        assert c.default == {KEY.name: "false"} and c.candidate == {KEY.name: "true"}
        assert not c.fails and c.times_candidate and c.times_default


def test_the_whole_tree_is_written_where_one_run_of_it_fits_and_left_alone_where_not(tmp_path):
    """The tree write times every file, as a clone writes them (no pathspec, the index
    kept current, so the next status is clean), where one run fits its allowance; the
    batch's price, which its pathspec inflates, does not keep it from trying. Where the
    budget left cannot hold it, it is not tried at all (its files' removal alone would
    overrun on slow storage), and a part no larger than the batch is not timed either."""
    from git_tune.advisor.measure import gitbench
    from git_tune.advisor.measure.record import comparison
    b = bench_on(tmp_path, 600, Budget(60))
    size = checkout_trial._batch_files(b)
    cand = checkout_trial._candidate(2)

    def batch(seconds):
        return comparison("checkout", {}, cand, [seconds] * 5, [seconds] * 5,
                          files=size.files)
    # Priced within PILOT_SLACK of fitting (a file at 1/4 of the allowance each): tried.
    allowance = b.budget.left() / 2 / (2 * (b.runs + 1))
    dear = size.fixed + size.files * allowance / len(b.names)
    work, warm = checkout_trial._tree_workload(b, batch(dear), size)
    assert isinstance(work, gitbench.WholeTreeWrite) and work.paths == b.names
    assert 0 < warm < allowance
    clone = b.ws.clone()
    assert all(os.path.exists(os.path.join(clone, p)) for p in b.names)
    assert git_out(clone, "status", "--porcelain", "-uno") == ""
    # With half a second left, the whole tree is priced far past its allowance.
    b.budget = Budget(60, spent=59.5)
    assert checkout_trial._tree_workload(b, batch(1.0), size) is None
    assert all(os.path.exists(os.path.join(clone, p)) for p in b.names)   # not even removed
    assert any("whole-tree write not timed" in n for n in b.notes), b.notes
