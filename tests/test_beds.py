"""The storage test beds themselves: they must behave like the storage they stand for."""
import os
import subprocess

import pytest

from git_tune.advisor.measure.record import Options

from git_tune import engine
from git_tune import repogen
from testbeds import BedUnavailable, Latency, latfs
from testbeds.mount import available, bed

# Its claims are measurements under a budget: run beside at most one other such test (tools/test).
pytestmark = pytest.mark.timed

FAST_NFS = Latency(lookup_us=1000, open_us=500, read_us=100, write_us=100, create_us=500,
                   fsync_us=500, readdir_us=500, attr_timeout=0, entry_timeout=0, negative_timeout=0)


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def _skip_unless(reason_fn):
    try:
        return reason_fn()
    except BedUnavailable as e:
        pytest.skip(str(e))


def test_latfs_injects_latency_and_serves_in_parallel():
    try:
        cm = latfs(FAST_NFS)
        mnt = cm.__enter__()
    except BedUnavailable as e:
        pytest.skip(str(e))
    try:
        paths = [f"d{i % 10}/f{i}" for i in range(200)]
        engine.checkout(mnt, paths, [10] * 200, keep=True)
        lat = engine.latency(os.path.join(mnt, "d0"), samples=20, fsync_samples=2)
        assert lat["lstat_miss"].p50 >= 0.001  # every miss goes to the server
        one = engine.preload(paths, base=mnt, threads=1).wall
        eight = engine.preload(paths, base=mnt, threads=8).wall
        # 1 ms sleeps served concurrently: far more than the 2 cores could give.
        assert one / eight > 2.5, (one, eight)
        info = open("/proc/self/mountinfo").read()
        assert f" {mnt} " in info and "fuse.latfs" in info
    finally:
        cm.__exit__(None, None, None)
    assert not mounted(mnt) and not os.path.exists(mnt)


def test_latfs_negative_cache_is_configurable():
    for negative_timeout, expect_cached in ((0, False), (60, True)):
        try:
            cm = latfs(Latency(lookup_us=2000, negative_timeout=negative_timeout))
            mnt = cm.__enter__()
        except BedUnavailable as e:
            pytest.skip(str(e))
        try:
            missing = [f"nope-{i}" for i in range(50)]
            engine.preload(missing, base=mnt)
            second = engine.preload(missing, base=mnt).wall
            assert (second < 0.02) == expect_cached, second  # 50 x 2 ms = 0.1 s uncached
        finally:
            cm.__exit__(None, None, None)


def test_beds_unmount_and_clean_up_on_failure():
    reason = available("tmpfs")
    if reason:
        pytest.skip(reason)
    seen = {}
    with pytest.raises(RuntimeError):
        with bed("tmpfs", size_mb=8) as mnt:
            seen["tmpfs"] = mnt
            raise RuntimeError("boom")
    assert not mounted(seen["tmpfs"]) and not os.path.exists(seen["tmpfs"])
    with pytest.raises(RuntimeError):
        try:
            with latfs() as mnt:
                seen["latfs"] = mnt
                raise RuntimeError("boom")
        except BedUnavailable as e:
            pytest.skip(str(e))
    assert not mounted(seen["latfs"]) and not os.path.exists(os.path.dirname(seen["latfs"]))


def test_hdd_bed_serialises_slow_requests(hdd_bed):
    mnt = hdd_bed      # the fixture checks that it is unmounted afterwards
    info = engine.fs_info(mnt)
    lat = engine.latency(mnt, samples=10, fsync_samples=3, cold_samples=4)
    assert lat["fsync"].p50 >= 0.004  # at least one delayed request
    assert lat["cold_read"].p50 >= 0.003  # direct IO: reads reach the slow device
    assert not info.read_only
    with open("/proc/self/mountinfo") as f:
        assert any(f" {mnt} " in line and " ext4 " in line for line in f)


@pytest.mark.parametrize("shape,count", [((4, 10, 9), 99_999), ((5, 10, 9), 999_999), ((6, 8, 7), 2_097_151),
                                         ((2, 10, 9), 999)])
def test_many_files_shapes(shape, count):
    s = repogen.RepoShape(*shape)
    assert s.file_count == count
    if count < 10_000:
        listed = list(repogen.paths(s))
        assert len(listed) == len(set(listed)) == count
        assert max(p.count("/") for p in listed) == shape[0]


def test_generated_repository_is_real_and_deterministic(tmp_path):
    shape = repogen.RepoShape(depth=1, width=5, files=4, seed=7)
    a = repogen.generate(str(tmp_path / "a"), shape, second_commit_changes=6)
    b = repogen.generate(str(tmp_path / "b"), shape, second_commit_changes=6)
    tree = lambda r: subprocess.run(["git", "-C", r, "rev-parse", "HEAD^{tree}"], stdout=subprocess.PIPE,
                                    text=True, check=True).stdout
    assert tree(a) == tree(b)
    changed = subprocess.run(["git", "-C", a, "diff", "--name-only", "HEAD~1", "HEAD"],
                             stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    assert len(changed) == 6
    sizes = repogen.sizes(repogen.RepoShape(seed=3), 2000)
    assert 1000 < sorted(sizes)[1000] < 4000  # median near 2 KiB
    assert max(sizes) <= 256 * 1024


def test_calibration_on_network_storage_measures_preload_hot(tmp_path, monkeypatch, latfs_bed):
    # latfs with NFS-like attribute caching: the probe classes it network, and every
    # preload measurement follows a warming pass (see preload._search).
    from git_tune.advisor.keys import preload
    from git_tune.advisor.measure import calibrate, gitbench
    from git_tune.advisor.measure.bench import Bench, Budget
    from git_tune.probes import repo as repo_probe
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path / "cache"))
    mnt = latfs_bed
    backing = os.path.join(os.path.dirname(mnt), "backing", "repo")
    repogen.generate(backing, repogen.RepoShape.for_files(300), limit=300)
    report = calibrate.probe_repository(os.path.join(mnt, "repo"), 6)
    record = calibrate.calibrate(report, Options(budget=6), store=False)
    assert record.storage.storage_class == "network"
    assert record.sweeps["checkout"].dims[0].high == 32
    # Below 1,000 entries Git starts no preload threads: the thread search is a finding
    # only, left until after the trials (where a 6 s budget on this bed leaves nothing).
    layout = report.repository.layout
    bench = Bench(gitbench.Workspace(layout, str(tmp_path)),
                  repo_probe.tracked_sample(layout, n=10 ** 9), 2, "network", report.git,
                  Options(budget=6), Budget(6))
    assert preload.sweep(bench).stopped == "deferred" and not bench.notes
    [(family, later)] = bench.later
    full = later(bench)
    assert family == "preload" and full.best_value is not None
    assert any(n.startswith("preload sweep hot") for n in bench.notes), bench.notes
    first = full.evaluations[0].point
    assert first == {"engine.preload.threads": 1, "engine.preload.split": "slices"}


@pytest.mark.alone     # the write-back it waits for is the host's: another test's writes are in it
def test_calibration_times_nothing_while_the_disk_is_still_writing_back(hdd_bed, tmp_path,
                                                                        monkeypatch):
    """On the one-spindle bed, right after a burst of writes (here 20,000 small files, as a
    fresh clone leaves them), every file created or removed waits for their write-back:
    the calibration times nothing, says why, and still ends within its budget. Once the
    file system has written them, the same calibration times git."""
    import time
    from git_tune.advisor.decide.recommend import recommend
    from git_tune.advisor.measure import calibrate, settle
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path / "cache"))
    mnt = hdd_bed
    try:
        repo = os.path.join(mnt, "repo")
        repogen.generate(repo, repogen.RepoShape.for_files(300), limit=300)
        assert not settle.wait(mnt, 120).flushing
        for d in range(200):
            os.mkdir(os.path.join(mnt, f"burst{d}"))
            for f in range(100):
                with open(os.path.join(mnt, f"burst{d}", str(f)), "w") as out:
                    out.write("x" * 4000)
        t0 = time.monotonic()
        report = calibrate.probe_repository(repo, 2)
        # The probe waited first (its fsyncs would wait on the flush), and wrote nothing.
        assert report.timings["settle"] > 0
        assert report.primary_storage().measured != "scratch"
        assert any("still writing back" in n for n in report.primary_storage().notes)
        record = calibrate.calibrate(report, Options(budget=2), store=False)
        assert time.monotonic() - t0 <= 2 * 1.25
        assert not record.trials and not record.sweeps
        assert any(n.startswith("nothing timed: ") for n in record.notes), record.notes
        assert not recommend(record).settings()
        settled = settle.wait(mnt, 300)
        assert settled.seconds is not None
        report = calibrate.probe_repository(repo, 4)
        assert report.primary_storage().measured == "scratch"
        record = calibrate.calibrate(report, Options(budget=4), store=False)
        assert record.trials and not any(n.startswith("nothing timed") for n in record.notes)
        assert not any(n.startswith("waited ") for n in record.notes), record.notes
    finally:
        settle.wait(mnt, 300)     # the bed unmounts once the flush is done
