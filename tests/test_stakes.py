"""Issue #30: the budget goes where the gain is. Keys are trialled stakes first (what the
engine measured a key could save), and where the whole tree does not fit the budget,
checkout.workers is timed on a part of it whose git work does not grow with the
repository. Real git, the real engine, the latency FUSE bed (root)."""
import dataclasses
import json
import os
import subprocess
import time
import types

import pytest

from git_tune.advisor.keys import checkout_trial
from git_tune import repogen
from git_tune.advisor.keys import registry
from git_tune.advisor.measure import gitbench, planner
from git_tune.advisor.measure.bench import Budget
from git_tune.models import catalogue
from tests.conftest import bench_on, git_out

# Its claims are measurements under a budget: run beside at most one other such test (tools/test).
pytestmark = pytest.mark.timed


def _entry(name: str, stakes, rank: int = 1) -> registry.Entry:
    module = types.ModuleType(f"toy_{name.replace('.', '_')}")
    module.TRIAL_RANK = rank
    if stakes is not None:
        module.stakes = lambda key, bench, v=stakes: v
    key = dataclasses.replace(catalogue.lookup("index.threads"), name=name)
    return registry.Entry(key, module)


def _order_taken(entries):
    from git_tune.advisor.measure.calibrate import next_trial
    pending, taken = list(entries), []
    while pending:
        e = next_trial(pending, entries, bench=None)
        pending.remove(e)
        taken.append(e.key.name)
    return taken


def test_the_key_with_the_most_at_stake_is_trialled_before_keys_with_a_few_percent_of_it():
    # Catalogue order puts the index load (2 ms at stake) before a tree write (14 s).
    entries = (_entry("toy.index", 0.002), _entry("toy.threshold", 0.46),
               _entry("toy.workers", 14.0), _entry("toy.untracked", None))
    assert _order_taken(entries) == ["toy.workers", "toy.untracked", "toy.threshold",
                                     "toy.index"]


def test_stakes_not_known_yet_keep_their_place_and_ranks_still_come_first():
    entries = (_entry("toy.first", None, rank=0), _entry("toy.small", 0.01),
               _entry("toy.unknown", None), _entry("toy.large", 5.0))
    # The rank-0 key first whatever its stakes; then the large one; the small one waits
    # for the key whose stakes are not known (its sweep may show them large).
    assert _order_taken(entries) == ["toy.first", "toy.unknown", "toy.large", "toy.small"]
    # Keys of comparable stakes keep catalogue order.
    entries = (_entry("toy.a", 1.0), _entry("toy.b", 2.0), _entry("toy.c", 1.5))
    assert _order_taken(entries) == ["toy.a", "toy.b", "toy.c"]


def _part_worktrees_work(trace: str):
    """For each git run in a part repository (trace2 def_repo), the largest index it read
    and the most entries its refresh lstat-ed; and the part directories seen."""
    where, counts = {}, {}
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "def_repo":
                where[e["sid"]] = e.get("worktree", "")
            elif e.get("event") == "data" and e.get("category") == "index":
                key = e["key"].rsplit("/", 1)[-1]
                counts.setdefault(e["sid"], {})[key] = max(
                    int(e["value"]), counts.get(e["sid"], {}).get(key, 0))
    parts = {sid: w for sid, w in where.items() if "/part-" in w}
    return [counts.get(sid, {}) for sid in parts], set(parts.values())


def _on_latfs_part(tmp_path, monkeypatch, latfs_bed, files: int, run):
    """A generated repository of `files` files on the NFS-like bed, a 16 s calibration's
    Bench on it, and run(bench) under its deadline with trace2 on: (the bench, what run
    returned or None where the budget ran out, the largest part made). Every git run in
    a part must have run in the bench's scratch and read an index of no more than the
    part's entries, and lstat-ed no more."""
    from git_tune.advisor.measure import calibrate, gitbench
    from git_tune.advisor.measure.ab import OutOfBudget
    from git_tune.advisor.measure.bench import Bench, Budget
    from git_tune.advisor.measure.record import Options
    from git_tune.probes import repo as repo_probe
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path / "cache"))
    name = f"{run.__name__}{files}"
    backing = os.path.join(os.path.dirname(latfs_bed), "backing", name)
    repogen.generate(backing, repogen.RepoShape.for_files(files), limit=files)
    report = calibrate.probe_repository(os.path.join(latfs_bed, name))
    layout = report.repository.layout
    scratch = os.path.join(latfs_bed, f"scratch-{name}")
    os.mkdir(scratch)
    trace = str(tmp_path / f"trace-{name}")
    monkeypatch.setenv("GIT_TRACE2_EVENT", trace)
    opts = Options(budget=16)
    bench = Bench(gitbench.Workspace(layout, scratch),
                  repo_probe.tracked_sample(layout, n=10 ** 9), 2, "network", report.git,
                  opts, Budget(opts.budget))
    try:
        with gitbench.deadline(bench.budget.left()):
            trial = run(bench)
    except OutOfBudget:
        trial = None    # a loaded host: the part was still made and timed once
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    runs, worktrees = _part_worktrees_work(trace)
    assert runs and all(w.startswith(scratch) for w in worktrees), worktrees
    part = max(bench.ws.parts, key=lambda p: len(p.paths))
    assert part.entries == files and len(part.paths) < files
    assert max(r.get("cache_nr", 0) for r in runs) <= len(part.paths)
    assert max(r.get("sum_lstat", 0) for r in runs) <= len(part.paths)
    return bench, trial, part


def test_on_slow_storage_checkout_workers_is_decided_on_a_part_whose_work_does_not_grow(
        tmp_path, monkeypatch, latfs_bed):
    """On the NFS-like bed (1 ms a metadata operation) the whole tree written does not fit
    a 16 s budget: the worker counts are timed on a part, and every git run there reads
    an index of the part's entries and refreshes no more, for a repository of 600 files
    as for one four times that size."""
    from git_tune.advisor.keys import checkout

    def workers(bench):
        bench.sweeps["checkout"] = checkout.sweep(bench)
        return registry.entry(checkout.WORKERS).trial(bench)
    seen = {}
    for files in (600, 2400):
        _, trial, part = _on_latfs_part(tmp_path, monkeypatch, latfs_bed, files, workers)
        if trial is not None:
            assert trial.facts["part"] == len(part.paths) and trial.facts["entries"] == files
            assert all(c.files == len(part.paths) for c in trial.comparisons)
            # The runs time the write; each timed count's next status is run once, after
            # its first run, and set against the one after the sequential pilot's.
            facts = trial.facts_as(checkout_trial.WorkersFacts)
            timed = {c.candidate[checkout.WORKERS] for c in trial.comparisons
                     if c.times_candidate and c.times_default}
            assert set(facts.status_slowdown or {}) == timed
            assert set(facts.status_seconds or {}) == timed | {"1"}
            # One status a side is no verdict: its medians are read (checkout._status_paid).
            assert not facts.status_verdict
        seen[files] = len(part.paths)
    # The part is sized by the budget and the price of a file, not by the repository.
    assert seen[2400] <= 2 * max(seen[600], 32 * planner.PRICE_SPAN), seen


def test_a_part_is_sized_for_the_worker_counts_it_can_tell_apart():
    """Counts a small part caps to one count get one count's share: the part doubles,
    rather than half the share waiting for a second count that would time the same."""
    clock = types.SimpleNamespace(left=lambda: 12.0)
    bench = types.SimpleNamespace(budget=clock, runs=5, names=["f"] * 20000, sweeps={},
                                  pending=[], latency={}, prices=None)
    per_run_two = checkout_trial._per_run(bench, 2)
    fixed, per_file = 0.05, (per_run_two - 0.05) / 48.5         # two counts: 48 files a run
    assert checkout_trial._part_size(bench, [4, 8], per_file, fixed) == 48      # 4 and 6 apart
    n = checkout_trial._part_size(bench, [10, 20], per_file, fixed)             # both capped to 6
    assert n == int((checkout_trial._per_run(bench, 1) - fixed) / per_file) and n > 96
    assert checkout_trial._part_counts(types.SimpleNamespace(notes=[]), [10, 20], n) == [10, 20][:1] + \
        [min(20, n // checkout_trial.PART_FILES_PER_WORKER)]


def test_before_any_sweep_the_probes_latencies_put_the_largest_stakes_first():
    """#30: before any engine sweep, the probe's measured latencies give each family its
    plausible stakes: a tree of 4,000 files written at 3 ms a create against a status's
    lstat pass at 1 ms a file over Git's 8 threads. checkout.workers' family goes first,
    and preload's sweep (a second of a 20 s budget on that bed) waits. Without
    latencies (a probe that could not measure), catalogue order stands."""
    from git_tune.advisor.measure.bench import Bench, Budget
    from git_tune.advisor.measure.calibrate import next_trial
    from git_tune.advisor.measure.record import Options

    def first(latency):
        bench = Bench(workspace=None, names=[f"f{i}" for i in range(4000)], cores=2,
                      storage_class="network", git_facts=None, options=Options(budget=20),
                      budget=Budget(20), latency=latency)
        order = registry.trial_order()
        return next_trial([e for e in order if e.rank == 1], order, bench).key.name

    assert first({"create": 0.003, "lstat_hit": 0.001}) == "checkout.workers"
    assert first({}) == "core.preloadIndex"


def _cheap_prices(bench, least=16):
    """Prices of next to nothing a file, on the bench's own 16-entry part."""
    from git_tune.advisor.measure.planner import PartRun, Prices
    bench.ws.part(16)
    return Prices(least=PartRun(16, 0.001, 0.001, 0.0, None), entries=16, part_made=0.0, git_start=0.0, fixed=0.001, per_file=1e-7,
                  write_back=0.0, timed=0.001)


def test_a_tree_priced_near_a_runs_share_is_timed_whole_only_where_one_run_of_it_fits(
        tmp_path, monkeypatch):
    """#30, tmpfs at 20,000 files: the pilots priced the whole tree within PILOT_SLACK of a
    run's share, a run of it took three times the share, and an evenly spread slice of
    the full repository was timed instead, whose next status read all 20,000 entries:
    1 worker kept, 1.70 of a grid's best. Now one run of the tree, stopped at the share,
    says: where it fits, the whole tree (its run the A/B's warm-up); where it does not, a
    part of the tree, in a repository of its own."""
    b = bench_on(tmp_path, 1500, Budget(60))
    # Prices of next to nothing a file put the tree within reach of any share.
    monkeypatch.setattr(planner, "prices", _cheap_prices)
    monkeypatch.setattr(checkout_trial, "_per_run", lambda bench, counts: 30.0)
    route = checkout_trial._route(b, [2, 4])
    assert isinstance(route, checkout_trial.WholeTree) and 0 < route.seconds < 30
    clone = b.ws.clone()
    assert all(os.path.exists(os.path.join(clone, p)) for p in b.names)
    # No run of 1,500 files written, then their status, fits 5 ms: a part decides.
    monkeypatch.setattr(checkout_trial, "_per_run", lambda bench, counts: 0.005)
    route = checkout_trial._route(b, [2, 4])
    assert isinstance(route, checkout_trial.Route)
    assert route.part.entries == 1500 and len(route.part.paths) < 1500


def test_a_part_whose_first_run_overruns_its_share_is_sized_again_by_that_run(
        tmp_path, monkeypatch):
    """Prices measured on small parts are as noisy as their runs are short. The part's
    first run is stopped at PART_OVERRUN shares, and where it is, a part sized by the
    price that run shows replaces it (planner.Prices.repriced)."""
    b = bench_on(tmp_path, 1500, Budget(60))
    monkeypatch.setattr(planner, "prices", _cheap_prices)
    monkeypatch.setattr(checkout_trial, "_per_run", lambda bench, counts: 0.005)
    route = checkout_trial._route(b, [2, 4])
    sizes = sorted(len(p.paths) for p in b.ws.parts)
    assert sizes[-1] == 1499                 # the prices' size: every entry but one
    assert len(route.part.paths) < sizes[-1] / 2 and route.warm is None
    assert route.per_file > 1e-7


def test_an_untracked_trial_the_probes_walk_prices_out_is_stopped_at_its_first_status(tmp_path):
    """#30: where the probe's untracked walk says the trial does not fit the budget left,
    one status with untracked files runs first, stopped where a run is too slow for the
    trial to fit: nothing more is spent on the whole tree (no second index copy, no
    warm-up pair), and no part is made where what is left cannot hold the wait for its
    files to age. The probe's walk alone does not decide (it may have run colder): where that
    status is quick, it is the A/B's warm-up and the trial runs on the whole tree. Real
    git, a generated repository."""
    from git_tune.advisor.keys import untracked
    from git_tune.advisor.measure.ab import OutOfBudget
    key = catalogue.lookup(untracked.KEY)
    bench = bench_on(tmp_path, 3000, Budget(0.02))
    bench.untracked_walk = 100.0          # as if the probe's walk had taken 100 s
    try:
        untracked.trial(key, bench)
        raise AssertionError("a status cannot run in what 0.02 s leave a run of it")
    except OutOfBudget as e:
        # Nor a part: half of what is left cannot hold the wait for its files to age.
        assert e.seconds_short is not None and e.seconds_short > 1
    assert not os.path.exists(os.path.join(bench.ws.root, "index.uc-on"))
    assert not bench.ws.parts
    # The same walk with a budget the status fits: the trial runs, with both copies.
    bench.budget = Budget(60)
    t = untracked.trial(key, bench)
    assert t.comparisons[0].workload == "untracked" and t.comparisons[0].times_default
    assert os.path.exists(os.path.join(bench.ws.root, "index.uc-on"))
    assert t.facts_as(untracked.TrialFacts).part is None


def test_on_network_storage_a_whole_status_whose_lstats_alone_cannot_fit_is_not_tried(tmp_path):
    """#30: on network storage, where the probe's lstat latency spread over Git's preload
    threads puts a status's lstat pass far past the longest run the whole tree's trial
    could fit, no whole-tree status is run and no copy of the whole index made: the
    cache is timed on a part at once. On local storage the pilot still decides (an inode
    cache may serve the status what the probe met cold). Real git."""
    from git_tune.advisor.keys import untracked
    key = catalogue.lookup(untracked.KEY)
    bench = bench_on(tmp_path, 3000, Budget(60))
    bench.untracked_walk = 100.0          # as if the probe's walk had taken 100 s
    bench.latency = {"lstat_hit": 1.0}    # and each of its lstats 1 s
    bench.storage_class = "network"
    t = untracked.trial(key, bench)
    assert t.facts_as(untracked.TrialFacts).part
    assert not os.path.exists(os.path.join(bench.ws.root, "index.uc-off"))
    # The same on local storage: the pilot's status is quick, and the whole tree is timed.
    local = bench_on(tmp_path / "local", 3000, Budget(60))
    local.untracked_walk, local.latency = 100.0, {"lstat_hit": 1.0}
    t = untracked.trial(key, local)
    assert t.facts_as(untracked.TrialFacts).part is None
    assert os.path.exists(os.path.join(local.ws.root, "index.uc-off"))


def test_on_slow_storage_the_untracked_cache_is_decided_on_a_part_whose_work_does_not_grow(
        tmp_path, monkeypatch, latfs_bed):
    """#30: on the NFS-like bed (1 ms a metadata operation), where a whole status with
    untracked files does not fit the budget left, the cache is timed on a part, sized by
    what a pilot part cost, and every git run there reads an index of the part's entries
    and lstats no more, for a repository of 600 files as for one four times that size.
    Both sides ran. Real git, the FUSE bed (root)."""
    from git_tune.advisor.keys import untracked
    key = catalogue.lookup(untracked.KEY)

    def cache(bench):
        # The route trial() takes where a whole status does not fit (at 100,000 files;
        # here the tree is kept small, so the route is taken directly).
        return untracked._trial_on_part(key, bench, None)
    seen = {}
    for files in (600, 2400):
        bench, t, part = _on_latfs_part(tmp_path, monkeypatch, latfs_bed, files, cache)
        if t is not None:
            facts = t.facts_as(untracked.TrialFacts)
            assert facts.part == len(part.paths) and facts.entries == files
            c = t.comparisons[0]
            assert c.workload == "untracked" and c.times_default and c.times_candidate
            assert any(f"part of {facts.part} of the {files} entries" in n for n in bench.notes)
        seen[files] = len(part.paths)
    # The part is sized by the budget and the price of an entry, not by the repository.
    assert seen[2400] <= 2 * max(seen[600], untracked.PART_PILOT), seen


def test_a_parts_files_are_written_old_enough_that_its_status_reads_none_of_them(tmp_path):
    """gitbench.Part.written: after it, a status in the part lstats each entry and reads
    none of them again (trace2 index/refresh: no entry racily clean), so a timed status there does
    what one does in a tree checked out a while ago. Real git, a generated repository."""
    from git_tune.advisor.measure import gitbench
    bench = bench_on(tmp_path, 600, Budget(60))
    part = bench.ws.part(100)
    part.written()
    assert all(os.path.isfile(os.path.join(part.worktree, p)) for p in part.paths)
    trace = str(tmp_path / "trace")
    gitbench.status(part, part.index_file, untracked=True)({}, trace_file=trace)
    phases = gitbench.trace_phases(trace)
    assert phases.get("data/index/refresh/sum_lstat") == len(part.paths), phases
    assert phases.get("data/index/refresh/sum_scan") == 0, phases


def test_a_parts_wait_ends_with_the_file_systems_second_and_leaves_no_entry_racy(tmp_path):
    """The wait before a part's index is refreshed lasts what is left of the second its
    index was written in, on the file system's clock (FilesWritten.ready_at), not a
    whole second after every write: written and settled again and again, wherever in a
    second the write ends, the status after reads no file again (trace2 index/refresh
    sum_scan). Real git, the disk."""
    from git_tune.advisor.measure import gitbench
    bench = bench_on(tmp_path, 300, Budget(60))
    part = bench.ws.part(40)
    waits = []
    for i in range(6):
        time.sleep(i / 6)      # writes ending all over a second
        files = part.write_files()
        assert files.index_mtime is not None
        waits.append(files.ready_at() - files.at)
        assert waits[-1] == pytest.approx(1 - files.index_mtime % 1 + gitbench.CLOCK_TICK)
        part.settle_index()
        assert part.files.settled
        trace = str(tmp_path / f"trace{i}")
        gitbench.status(part, part.index_file, untracked=True)({}, trace_file=trace)
        phases = gitbench.trace_phases(trace)
        assert phases.get("data/index/refresh/sum_scan") == 0, (i, phases)
    # Shorter than the 1.05 s every write waited before, where a write ended late in its
    # second (six writes do not all end in a second's first 50 ms).
    assert min(waits) < gitbench.RACY_SECONDS - 0.05, waits


def test_a_parts_files_the_workers_runs_left_are_not_written_or_waited_for_again(tmp_path):
    """#30: the untracked cache's part, where it is the one the workers' runs wrote, is
    priced and settled on the files they left (no second write; their wait to age runs
    from their write), and its status then reads none of them again. A run that removes
    them (stopped half way) leaves them to be written again by whoever needs them; a
    parallel run's write is not the price of writing them. Real git."""
    from git_tune.advisor.keys import untracked
    key = catalogue.lookup(untracked.KEY)
    bench = bench_on(tmp_path, 600, Budget(60))
    part = bench.ws.part(48)
    work = gitbench.PartWrite(part.worktree, part.paths, os.path.join(part.worktree, ".git"),
                              part)
    assert part.files is None
    work.run({})
    files = part.files
    assert files is not None and files.seconds > 0 and not files.settled
    mtimes = _mtimes(part)
    priced = untracked._priced_part(key, bench, 48)
    assert priced.part is part and priced.ready_at == files.ready_at()
    assert priced.wrote == files.seconds and priced.runs > 0
    # Settled before it was priced (what was left of the wait waited): its status is the
    # A/B's first run of Git's default.
    assert priced.warm is not None and priced.warm > 0
    assert part.files.settled and _mtimes(part) == mtimes
    trace = str(tmp_path / "trace")
    gitbench.status(part, part.index_file, untracked=True)({}, trace_file=trace)
    phases = gitbench.trace_phases(trace)
    assert phases.get("data/index/refresh/sum_scan") == 0, phases
    work.run({"checkout.workers": "2", "checkout.thresholdForParallelism": "0"})
    assert part.files.seconds == files.seconds and not part.files.settled
    with gitbench.deadline(0), pytest.raises(gitbench.DeadlineReached):
        work.run({})
    assert part.files is None
    again = part.present_files()
    assert again is part.files and again.at > files.at
    assert all(os.path.isfile(os.path.join(part.worktree, p)) for p in part.paths)


def _mtimes(part):
    return {p: os.stat(os.path.join(part.worktree, p)).st_mtime_ns for p in part.paths}


def test_one_thread_clearly_slower_than_gits_count_is_stopped_once_that_is_certain(
        tmp_path, latfs_bed):
    """#30: on the NFS-like bed (1 ms a lookup), preload's part sweep stops one thread at
    stats.CLEARLY times what Git's threads took: off cannot win, and the rest of its
    lookups would only spend the budget. Real engine, real FUSE bed (root)."""
    from git_tune.advisor.keys import preload
    from git_tune.advisor.measure import gitbench
    from git_tune.advisor.measure.bench import Bench
    from git_tune.advisor.measure.record import Options
    from git_tune.advisor.measure.sweep import Share
    from git_tune.models import stats
    from git_tune.probes import repo as repo_probe
    backing = os.path.join(os.path.dirname(latfs_bed), "backing", "repo")
    repogen.generate(backing, repogen.RepoShape.for_files(3000), limit=3000)
    layout = repo_probe.locate(os.path.join(latfs_bed, "repo"))
    budget = Budget(20)
    bench = Bench(gitbench.Workspace(layout, str(tmp_path / "ws")),
                  repo_probe.tracked_sample(layout, n=10 ** 9), 2, "network", None,
                  Options(budget=20), budget)
    files, at_git, one, done = preload._part(bench, bench.names, Share(10, budget.end))
    assert files == preload.PART_FILES and preload.git_threads(3000) == 6
    assert one >= at_git * stats.CLEARLY
    stopped = [n for n in bench.notes if "one thread stopped after" in n]
    assert stopped, bench.notes
    assert done == int(stopped[0].split("stopped after ")[1].split()[0])
    assert done < files      # it did not look up the rest
    facts = preload.Facts(3000, 6, None, None, files, at_git, one, done)
    assert preload._off_cannot_win(facts)
    # What one thread's lstat of an entry costs is what it took for those it did.
    bench.sweeps["preload"] = types.SimpleNamespace(facts_as=lambda kind: facts)
    assert preload._serial_lstat(bench) == one / done


def test_the_threshold_trial_is_priced_by_the_part_the_workers_were_timed_on():
    """#30: a tiny batch costs at least the part's fastest sequential run (git's start-up
    does not shrink with the files, and the batch's part has as many runs of entries,
    each in directories of their own); with the pilots' price of a file it is priced by
    that; before the workers' trial, not at all."""
    from dataclasses import asdict
    from git_tune.advisor.keys import checkout, threshold
    from git_tune.advisor.measure.ab import least_seconds
    from git_tune.advisor.measure.record import Trial, comparison
    key = catalogue.lookup(checkout.THRESHOLD)
    entry = registry.entry(checkout.THRESHOLD)
    cand = checkout_trial._candidate(6)

    def bench_with(facts):
        c = comparison("clone", {}, cand, [0.9, 0.75, 0.8], [0.6, 0.62, 0.61], files=48)
        trials = {checkout.WORKERS: Trial(checkout.WORKERS, (c,), asdict(facts))}
        return types.SimpleNamespace(trials=trials)

    assert entry.price(types.SimpleNamespace(trials={})) is None
    pilot_part = checkout_trial.WorkersFacts(True, 48, 100000)
    assert threshold.TINY_FILES >= gitbench.PART_RUNS    # as many runs of entries as the part
    assert entry.price(bench_with(pilot_part)) == least_seconds(0.75)
    priced = dataclasses.replace(pilot_part, part_fixed=0.3, part_per_file=0.01)
    assert entry.price(bench_with(priced)) == least_seconds(0.3 + threshold.TINY_FILES * 0.01)
    assert threshold.TUNERS[checkout.THRESHOLD].price(key, bench_with(priced)) == \
        entry.price(bench_with(priced))


def test_checkout_stakes_count_what_gits_workers_spread_over_the_cpus_and_a_sweep_of_one_count():
    """#30: the engine's threads only write; git's workers also read and inflate every
    blob, which spreads over the CPUs wherever the writes wait or not. Where the engine's
    threads gained nothing (writes landing in the page cache), the workers' stakes are
    still the CPUs' share of the write, so their trial is not put after every other
    key's. A sweep that timed one count only (its share ended) predicts nothing: the
    whole write is at stake. On one CPU, nothing but what the engine measured."""
    from git_tune.advisor.keys import checkout
    from git_tune.advisor.measure.bench import Bench
    from git_tune.advisor.measure.record import Options
    from tests.test_part import engine_sweep

    def stakes(engine_seconds, cores):
        bench = Bench(workspace=None, names=[f"f{i}" for i in range(100_000)], cores=cores,
                      storage_class="local-ssd", git_facts=None,
                      options=Options(budget=20), budget=Budget(20))
        bench.sweeps["checkout"] = engine_sweep(engine_seconds, cores)
        return registry.entry(checkout.WORKERS).stakes(bench)

    write = 100_000 * 1.0 / 200          # the engine's one thread, every file
    assert stakes({1: 1.0, 2: 1.3, 8: 1.6}, cores=2) == pytest.approx(write / 2)
    assert stakes({1: 1.0, 2: 1.3, 8: 1.6}, cores=1) == 0.0
    assert stakes({1: 1.0}, cores=2) == pytest.approx(write)
    # Where the engine's threads gained more than the CPUs could, their gain.
    assert stakes({1: 1.0, 2: 0.6, 8: 0.2}, cores=2) == pytest.approx(write * 0.8)


def test_preloads_sweep_times_only_what_its_trial_needs_before_the_trials(tmp_path):
    """#30: before the trials, preload's sweep times one thread against Git's count, on a
    part and, where the part rules nothing out, on the whole tree: what decides whether
    real git is run at all. The search over thread counts and split modes (findings,
    no Git key) waits for what the trials leave (bench.later): on the disk at 100,000
    files it took its whole share before the trials. Real git, the real engine."""
    from git_tune.advisor.keys import preload
    bench = bench_on(tmp_path, 1500, Budget(20))
    sweep = preload.sweep(bench)
    facts = sweep.facts_as(preload.Facts)
    assert sweep.stopped == "deferred" and not sweep.evaluations
    assert facts.git_threads == 3 and facts.part_files
    # Either the part showed off cannot win, or the whole tree was timed at Git's count.
    assert preload._off_cannot_win(dataclasses.replace(
        facts, git_default=None, single_thread=None)) or facts.git_default
    [(family, later)] = bench.later
    full = later(bench)
    assert family == "preload" and full.evaluations and full.best_value is not None


def test_the_index_sweep_loads_only_what_the_trials_need_before_them(tmp_path):
    """#30: before the trials, the index sweep loads each thread count the offset table
    allows once with Git's allocator, the quickest again (what index.threads' trial takes
    its candidate from); the search over both allocators, a finding, waits for what the
    trials leave (bench.later). Every load is a real engine load of a copy git wrote."""
    from git_tune import engine
    from git_tune.advisor.keys import index
    bench = bench_on(tmp_path, 3000, Budget(20))
    sweep = index.sweep(bench)
    counts = {e.point[index.THREADS] for e in sweep.evaluations}
    blocks = max(4, 2 * bench.cores)
    assert counts == set(index._quick_counts(blocks)) and blocks in counts
    assert {e.point[index.ALLOC] for e in sweep.evaluations} == {engine.ALLOC_POOL}
    assert len(sweep.evaluations) <= len(counts) + 1 + len(counts) // 3
    facts = sweep.facts_as(index.Facts)
    assert facts.entries == 3000 and facts.parse_v2 > 0 and facts.ieot_blocks > 1
    assert facts.parse_v4 is None       # a finding: parsed with the search, after the trials
    bench.sweeps["index"] = sweep
    assert index._stakes(bench) == facts.parse_v2
    [(family, later)] = bench.later
    full = later(bench)
    found = full.facts_as(index.Facts)
    assert family == "index" and found.parse_v4 > 0
    assert dataclasses.replace(found, parse_v4=None) == facts
    assert engine.ALLOC_MALLOC in {e.point[index.ALLOC] for e in full.evaluations}


def _deltas_in(pack_path: str) -> int:
    """The objects stored as deltas in a pack (git verify-pack -v: a delta's line names
    its base)."""
    out = subprocess.run(["git", "verify-pack", "-v", pack_path[:-len(".pack")] + ".idx"],
                         check=True, text=True, stdout=subprocess.PIPE).stdout
    return sum(1 for line in out.splitlines() if len(line.split()) == 7)


def test_pack_threads_is_timed_on_a_sample_pack_that_keeps_deltas_and_does_not_grow(
        tmp_path, monkeypatch):
    """index-pack's threads resolve deltas. Past a sample's size the trial times a sample
    pack: as many objects for a repository four times larger, and the repository's
    stored deltas kept (each sampled object's chain followed to its base)."""
    from git_tune.advisor.keys import pack
    monkeypatch.setattr(pack, "SAMPLE_OBJECTS", 60)
    monkeypatch.setattr(pack, "MAX_SAMPLE", 300)
    sampled = {}
    for files in (400, 1600):
        b = bench_on(tmp_path / str(files), files, Budget(60))
        repo = b.ws.layout.worktree
        names = git_out(repo, "ls-files", "-z").split("\0")[:-1]
        for i in range(8):              # history: every file edited a little, 8 times
            for name in names:
                with open(os.path.join(repo, name), "a") as f:
                    f.write(f"edit {i} of {name}\n")
            git_out(repo, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "gc.auto=0",
                    "commit", "-qam", f"edit {i}")
        git_out(repo, "repack", "-adq")
        assert pack._objects_in(pack.repo_probe.pack_files(b.ws.layout)[0]) > 300
        path, what = pack._pack_for(b)
        assert what.startswith("a sample pack: 60 of the "), what
        # pack-objects' temporary files went to the sample's own object directory.
        assert os.path.dirname(path) == b.ws.root
        assert not [f for f in os.listdir(os.path.join(repo, ".git", "objects", "pack"))
                    if f.startswith("tmp_")]
        assert os.path.isdir(os.path.join(b.ws.root, "sample-objects", "pack"))
        sampled[files] = pack._objects_in(path)
        # The last level of bases may pass MAX_SAMPLE, by fewer than the sample.
        assert 60 < sampled[files] <= 300 + 60
        assert _deltas_in(path) > 0
    assert abs(sampled[400] - sampled[1600]) <= 60


def test_where_the_whole_trees_runs_turn_out_too_long_the_untracked_cache_is_timed_on_a_part(
        tmp_path, monkeypatch):
    """#30: the probe's walk said a whole status fits, and the whole tree's A/B found its
    runs longer than what is left (on the hdd bed at 100,000 files, 5.1 s short): a part
    is timed with what is left instead of leaving the key undecided. The whole tree's
    shortfall is made here (its A/B says OutOfBudget); the part's runs are real git's."""
    from git_tune.advisor.keys import untracked
    from git_tune.advisor.measure.ab import OutOfBudget
    key = catalogue.lookup(untracked.KEY)
    bench = bench_on(tmp_path, 600, Budget(60))
    bench.untracked_walk = 0.001
    real = untracked._compare

    def compare(bench_, where, copies, warm, facts):
        if where is bench_.repo:
            raise OutOfBudget(5.1)
        return real(bench_, where, copies, warm, facts)
    monkeypatch.setattr(untracked, "_compare", compare)
    t = untracked.trial(key, bench)
    facts = t.facts_as(untracked.TrialFacts)
    assert facts.part and facts.entries == 600 and t.comparisons[0].times_default
    assert any(f"part of {facts.part} of the 600 entries" in n for n in bench.notes)
    # Where not even a part fits, the whole tree's shortfall is what the record says.
    bench.budget = Budget(0.5)
    with pytest.raises(OutOfBudget) as e:
        untracked.trial(key, bench)
    assert e.value.seconds_short == 5.1


def _diff_files_work(trace: str):
    """For each `git diff-files` in the trace: the entries its index held and the most its
    preload threads lstat-ed (trace2 index data; none where preload was off)."""
    cmds, counts = {}, {}
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "cmd_name":
                cmds[e["sid"]] = e["name"]
            elif e.get("event") == "data" and e.get("category") == "index":
                key = e["key"].rsplit("/", 1)[-1]
                counts.setdefault(e["sid"], {})[key] = int(e["value"])
    return [counts.get(sid, {}) for sid, name in cmds.items() if name == "diff-files"]


def _hashed(*paths) -> list:
    import hashlib
    return [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths]


def test_preload_is_decided_by_real_git_on_a_sample_whose_lstats_do_not_grow(
        tmp_path, monkeypatch):
    """#30: where one thread's lstat of every entry does not fit its share of the budget,
    preload on against off is timed by `git diff-files` on a sample index: git reads the
    whole index and starts the threads its size calls for, which lstat the sample alone
    (the rest skip-worktree). The same sample's lstats for a repository four times larger;
    the user's index and HEAD untouched. Real git, counted in trace2."""
    from git_tune.advisor.keys import preload
    key = catalogue.lookup(preload.KEY)
    for files in (1500, 6000):
        bench = bench_on(tmp_path / str(files), files, Budget(60))
        bench.latency["lstat_hit"] = 0.0025   # 2.5 ms a serial lstat: a sample of 120
        repo = bench.ws.layout.worktree
        before = _hashed(os.path.join(repo, ".git", "index"), os.path.join(repo, ".git", "HEAD"))
        trace = str(tmp_path / f"trace-{files}")
        monkeypatch.setenv("GIT_TRACE2_EVENT", trace)
        trial = preload.trial(key, bench)
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        facts = trial.facts_as(preload.TrialFacts)
        assert trial.comparisons and facts.sample_entries == 120 and facts.entries == files
        runs = _diff_files_work(trace)
        assert runs and all(r["cache_nr"] == files for r in runs)
        lstats = [r["sum_lstat"] for r in runs if "sum_lstat" in r]
        assert lstats and max(lstats) <= 120
        assert _hashed(os.path.join(repo, ".git", "index"),
                       os.path.join(repo, ".git", "HEAD")) == before
        assert git_out(repo, "status", "--porcelain") == ""
        assert os.path.dirname(bench.ws.sample(120).index_file) == bench.ws.root
    # Behind an attribute cache that expires by time, each run meets entries of its own
    # (the sample's index made before the timer, in the host's temporary scratch where
    # there is one, and removed after it).
    # Their index holds a frame of the entries where the repository has more than git's
    # preload needs to start its most threads (gitbench.PRELOAD_FULL_ENTRIES, made
    # smaller here): what git reads and writes around the lstats does not grow either.
    bench.storage_class = "network"
    bench.ws.local = str(tmp_path / "local")
    os.mkdir(bench.ws.local)
    monkeypatch.setattr(gitbench, "PRELOAD_FULL_ENTRIES", 2000)
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(tmp_path / "trace-network"))
    trial = preload.trial(key, bench)
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    runs = _diff_files_work(str(tmp_path / "trace-network"))
    assert trial.comparisons and len(runs) == 2 * len(trial.main.times_default) + 2
    assert max(r["sum_lstat"] for r in runs if "sum_lstat" in r) <= 120
    assert all(r["cache_nr"] == 2000 for r in runs)
    facts = trial.facts_as(preload.TrialFacts)
    assert facts.sample_entries == 120 and facts.entries == 2000
    assert any("120 of the 2000 entries of a copy that holds that many of its 6000" in n
               for n in bench.notes), bench.notes
    for where in (bench.ws.root, bench.ws.local):
        assert not [f for f in os.listdir(where) if f.startswith("index.sample-120-")]
    assert os.listdir(bench.ws.local) == ["index.all-marked"]
    assert _hashed(os.path.join(repo, ".git", "index"),
                   os.path.join(repo, ".git", "HEAD")) == before


def test_preload_off_the_engine_rules_out_is_confirmed_within_the_sweeps_share(tmp_path):
    """Where the engine's part rules off out, real git confirms it in what preload's sweep
    share has left, before the trials whose stakes come first can spend the budget; the
    trial then stands on it. A share that cannot hold the confirmation runs nothing, and
    the trial is left to confirm as the last of its rank."""
    from git_tune.advisor.keys import preload
    from git_tune.advisor.measure.record import Sweep
    from git_tune.advisor.measure.sweep import Share
    key = catalogue.lookup(preload.KEY)
    facts = preload.Facts(entries=1500, git_threads=3, git_default=None, single_thread=None,
                          part_files=300, part_git_default=0.01, part_single_thread=0.04)
    record = Sweep("grid", (), (), {}, None, 0, 0.0, "deferred", dataclasses.asdict(facts))
    bench = bench_on(tmp_path, 1500, Budget(60))
    preload._confirm_in_share(bench, record, Share(30, bench.budget.end))
    confirmed = bench.trials[preload.KEY]
    assert confirmed.comparisons and confirmed.main.candidate == {preload.KEY: "false"}
    assert preload.trial(key, bench) is confirmed
    short = bench_on(tmp_path / "short", 1500, Budget(60))
    preload._confirm_in_share(short, record, Share(0.0, short.budget.end))
    assert preload.KEY not in short.trials and short.sweeps["preload"] is record
    assert preload.trial(key, short).comparisons      # the whole budget left holds it


def test_the_samples_of_a_sample_trial_are_disjoint_and_spread_over_the_whole_index():
    """Each of Git's preload threads gets its slice of the index (cache_nr / threads
    entries in a row): a sample is runs of entries in every part of it, and the next
    sample (each run of a network trial) is other entries in the same places."""
    from git_tune.advisor.measure.gitbench import SAMPLE_RUNS, sample_entries
    listed = [f"100644 {i:040x} 0\td{i // 50:04d}/f{i:06d}" for i in range(20000)]
    first, second = sample_entries(listed, 120), sample_entries(listed, 120, which=1)
    assert len(first) == len(second) == 120 and not set(first) & set(second)
    position = {r: i for i, r in enumerate(listed)}
    for sample in (first, second):
        slices = {position[r] * 20 // len(listed) for r in sample}
        assert slices == set(range(20))        # every one of 20 threads has entries
        assert len({position[r] // (len(listed) // SAMPLE_RUNS) for r in sample}) == SAMPLE_RUNS


def test_parts_and_samples_hold_the_entries_asked_for_and_none_twice():
    """A part (PART_RUNS runs) and a sample (SAMPLE_RUNS) are the same runs of entries:
    whatever n, exactly n regular files (all of them where n is more), no record twice,
    and the next samples are disjoint from the first as long as the gaps hold them."""
    from git_tune.advisor.measure.gitbench import PART_RUNS, SAMPLE_RUNS, sample_entries
    listed = [f"100644 {i:040x} 0\td{i // 7:03d}/f{i:04d}" for i in range(301)]
    listed.insert(5, "120000 " + "0" * 40 + " 0\tlink")      # not a regular file
    for runs in (PART_RUNS, SAMPLE_RUNS):
        for n in range(1, 305):
            got = sample_entries(listed, n, runs)
            assert len(got) == len(set(got)) == min(n, 301) and "link" not in "".join(got)
            length = n // min(runs, n)
            if (301 - n) // runs >= 2 * (length + 1):       # room for three
                taken = [set(sample_entries(listed, n, runs, which=w)) for w in range(3)]
                assert all(len(t) == n for t in taken)
                assert len(taken[0] | taken[1] | taken[2]) == 3 * n


def test_preload_off_the_engine_rules_out_is_confirmed_by_real_git_where_the_budget_holds_it(
        tmp_path):
    """The engine's lstat shows one thread clearly slower than Git's count: real git still
    times on against off where what the budget left holds it (the key is then decided by
    git), and keeps the engine's verdict, saying so, where it does not."""
    from git_tune.advisor.keys import preload
    from git_tune.advisor.measure.record import Sweep
    key = catalogue.lookup(preload.KEY)
    bench = bench_on(tmp_path, 1500, Budget(60))
    facts = preload.Facts(entries=1500, git_threads=3, git_default=None, single_thread=None,
                          part_files=300, part_git_default=0.01, part_single_thread=0.04)
    bench.sweeps["preload"] = Sweep("grid", (), (), {}, None, 0, 0.0, "deferred",
                                    dataclasses.asdict(facts))
    assert preload._hopeless(bench) and preload.stakes(key, bench) == 0.0
    confirmed = preload.trial(key, bench)
    assert confirmed.comparisons and confirmed.main.candidate == {preload.KEY: "false"}
    spent = bench_on(tmp_path / "spent", 1500, Budget(0.05))
    spent.sweeps["preload"] = bench.sweeps["preload"]
    kept = preload.trial(key, spent)
    assert not kept.comparisons and "could not hold real git's confirmation" in kept.why_not_run


def test_a_sweep_that_measured_nothing_leaves_the_workers_to_real_git(tmp_path):
    """Where the engine's checkout sweep measured no worker count (its one-thread pilot
    outlasted its share, as where a file costs tens of milliseconds), the key with the
    most at stake is not dropped in silence: real git still times workers against Git's
    default, from the most its route can show, and the record says why."""
    b = bench_on(tmp_path, 300, Budget(10))
    assert "checkout" not in b.sweeps        # as after a sweep that stopped
    trial = checkout_trial._trial_workers(b)
    assert trial is not None and trial.comparisons, b.notes
    assert all(c.candidate.get("checkout.workers") for c in trial.comparisons)
    assert any("measured no worker count" in n for n in b.notes), b.notes
