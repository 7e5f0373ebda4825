"""The planner (advisor/measure/planner.py, issue #63): prices measured on this host and
re-priced when a run contradicts them, and the budget owed to the key with the most at
stake. Real git and a real scratch workspace where anything is timed."""
import os
import types

from conftest import bench_on

from git_tune.advisor.measure import budget as budget_plan, planner
from git_tune.advisor.measure.budget import Budget
from git_tune.advisor.measure.planner import PartRun, Prices

PRICED = Prices(least=PartRun(48, 0.5, 0.6, 0.0, None), entries=48, part_made=0.2, git_start=0.01, fixed=0.1, per_file=0.01,
                write_back=0.0, timed=0.55)


def test_a_run_within_twice_its_price_keeps_the_prices():
    assert PRICED.run(100) == 0.1 + 100 * 0.01
    for seconds in (0.56, 1.1, 2.2):
        assert PRICED.repriced(100, seconds) is PRICED


def test_a_run_beyond_twice_its_price_prices_a_file_from_itself():
    """A part of 400 files priced at 4.1 s that took 12 s: a file is priced by the line
    through the pricing run (48 files, 0.58 s) and this one, and a run of 400 is never
    priced below what it took (the line's fixed cost is not negative)."""
    again = PRICED.repriced(400, 12.0)
    assert again is not PRICED and again.per_file == (12.0 - PRICED.run(48)) / (400 - 48)
    assert again.run(400) >= 12.0 and again.fixed == 0.0
    # Cheaper than half its price: priced down the same way.
    cheap = PRICED.repriced(400, 1.0)
    assert cheap.per_file < PRICED.per_file and abs(cheap.run(400) - 1.0) < 1e-9


def test_two_noisy_runs_never_price_a_file_at_nothing():
    """Where the larger run was no slower than the smaller (noise), a file still costs a
    tenth of the larger run's average."""
    per_file, fixed = planner.line_through(6, 0.5, 48, 0.48)
    assert per_file == 0.48 / 48 / 10
    assert fixed >= 0


def test_one_run_dearer_in_git_than_in_files_never_prices_a_file_at_nothing():
    """A pilot run of 32 files that cost 0.30 s where git's starts and write-back, timed
    apart on a loaded host, took 0.35 s: a file still costs a tenth of the run's
    average (a file priced at nothing sized a part by dividing by it)."""
    per_file, fixed = planner.one_run_price(32, 0.30, 0.35)
    assert per_file == 0.30 / 10 / 32
    assert abs(fixed + 32 * per_file - 0.30) < 1e-12
    # Where the files cost more than the tenth, git's own is the fixed price.
    per_file, fixed = planner.one_run_price(32, 0.30, 0.10)
    assert abs(per_file - 0.20 / 32) < 1e-12 and abs(fixed - 0.10) < 1e-12


def _bench(left: float, mine: float, others, prices=PRICED):
    pending = [types.SimpleNamespace(stakes=lambda bench, s=s: s) for s in others]
    return types.SimpleNamespace(budget=types.SimpleNamespace(left=lambda: left), runs=5,
                                 prices=prices, pending=pending), mine


def test_the_usual_share_where_it_holds_the_pricing_run():
    # 60% of 60 s over 12 runs is 3 s a run, more than the pricing part's 0.58 s.
    bench, mine = _bench(60.0, 10.0, [1.0])
    assert planner.run_share(bench, mine, 1) == 60.0 * 0.6 / 12


def test_the_key_with_the_most_at_stake_is_owed_the_budget_left():
    """10 s left: 60% over 12 runs is 0.5 s, short of the pricing part's 0.58 s. The key
    with the most at stake gets all 10 s (0.83 s a run); one with less keeps the usual
    share, and so does one whose own stakes are unknown."""
    bench, mine = _bench(10.0, 14.0, [1.2, None])
    assert planner.run_share(bench, mine, 1) == 10.0 / 12
    bench, mine = _bench(10.0, 1.2, [14.0])
    assert planner.run_share(bench, mine, 1) == 10.0 * 0.6 / 12
    bench, mine = _bench(10.0, None, [])
    assert planner.run_share(bench, mine, 1) == 10.0 * 0.6 / 12
    # Before any price, the usual share.
    bench, mine = _bench(10.0, 14.0, [], prices=None)
    assert planner.run_share(bench, mine, 1) == 10.0 * 0.6 / 12


def test_prices_are_measured_once_by_real_git_on_a_part_and_have_a_line_of_their_own(tmp_path):
    """Cheap here (a run of the least part far under SMALL_PILOT of 60 s): a part
    PRICE_SPAN times larger is run too, and a file's price is the line through both."""
    b = bench_on(tmp_path, 600, Budget(60))
    p = planner.prices(b, 32)
    assert p.least.files == 32 and p.entries == 32 * planner.PRICE_SPAN
    assert p.per_file > 0 and p.fixed >= 0
    assert p.git_start > 0 and p.timed > 0 and p.part_made > 0
    # Both parts are ones a trial can use: their files were written by the pricing runs.
    for n in (32, p.entries):
        part = b.ws.part(n)
        assert all(os.path.exists(os.path.join(part.worktree, f)) for f in part.paths)
    assert planner.prices(b, 32) is p                     # once per calibration
    assert b.budget.went.get("prices", 0) > 0             # its seconds are a line


def test_a_trials_facts_are_what_its_stored_record_will_hold():
    """A tuple in a key's facts (the untracked cache's costs not timed, where the budget
    ended first) is a list once stored: the record in memory holds the stored form, so a
    calibration equals its JSON round trip and a decision reads the same from either."""
    import json
    from git_tune.advisor.measure.record import Trial
    t = Trial("core.untrackedCache", (), {"costs_not_timed": ("status", "index"), "part": 48})
    assert t.facts == {"costs_not_timed": ["status", "index"], "part": 48}
    assert Trial(t.key, (), json.loads(json.dumps(t.facts))) == t


def _graced(total: float, mine, others, graced=False):
    from git_tune.advisor.measure.budget import Budget as Clock
    pending = [types.SimpleNamespace(stakes=lambda bench, s=s: s) for s in others]
    return types.SimpleNamespace(budget=Clock(total), pending=pending, graced=graced), mine


def test_only_the_key_with_the_most_at_stake_may_finish_past_the_budget_and_only_once():
    """budget_plan.OWED_GRACE of the budget (3 s of 20), to the key whose stakes are the
    highest still to run and more than the grace itself; none to a key with less at
    stake, to stakes unknown or worth less than the wait, or a second time."""
    grace = 20 * budget_plan.OWED_GRACE
    assert planner.owed_grace(*_graced(20, 60.0, [1.2, None])) == grace
    assert planner.owed_grace(*_graced(20, 60.0, [90.0])) == 0.0
    assert planner.owed_grace(*_graced(20, None, [])) == 0.0
    assert planner.owed_grace(*_graced(20, grace / 2, [])) == 0.0
    assert planner.owed_grace(*_graced(20, 60.0, [], graced=True)) == 0.0


def test_a_grace_lengthens_the_budget_only_within_its_block():
    from git_tune.advisor.measure.budget import Budget as Clock, FakeClock, use_clock
    with use_clock(FakeClock()) as clock:
        b = Clock(20)
        clock.advance(19)
        with b.extended(3):
            assert b.left() == 4
            clock.advance(3.5)
            assert b.left() == 0.5
        assert b.left() == 0 and b.total == 20     # what it spent past the end leaves none
