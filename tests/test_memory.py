"""Issue #64: git's pack memory sized by measurement, inside the memory git-tune may use.

Real git on a generated repository that needs memory to pack (repogen.LargeFiles), real
memory cgroups (tests/cgroups.py; skipped without root or the controller), the real CLI.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from git_tune import repogen
from git_tune.advisor.keys import basecache, bigpack, packmem
from git_tune.advisor.measure import (ab, budget as budget_plan, calibrate, gitbench, peak,
                                      planner, record)
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.record import Options
from git_tune.errors import UsageError
from git_tune.models import catalogue, stats
from git_tune.probes import repo as repo_probe
from tests import cgroups

# Its claims are measurements under a budget: run beside at most one other such test (tools/test).
pytestmark = pytest.mark.timed

GIT_TUNE = [sys.executable, "-m", "git_tune"]
MIB = 1 << 20
# Two 4 MiB text files in four versions and a 2 MiB binary in each: Git's defaults peak
# near 100 MiB packing them, a 16m window near 40 MiB (measured; the test checks it).
SHAPE = repogen.LargeFiles(size=4 << 20, versions=4, binary=2 << 20)


@pytest.fixture(scope="module")
def large_repo(tmp_path_factory):
    return str(repogen.generate_large(str(tmp_path_factory.mktemp("mem") / "repo"), SHAPE))


@pytest.mark.parametrize("text,canonical", [("64m", "64m"), ("64M", "64m"), ("1g", "1g"),
                                            ("2048k", "2m"), ("1048576", "1m"),
                                            (" 96m ", "96m")])
def test_sizes_are_written_as_git_reads_them(text, canonical):
    key = catalogue.lookup("pack.windowMemory")
    assert key.validate(text) == canonical
    # git reads the canonical text as the same number of bytes.
    read = subprocess.run(["git", "-c", f"pack.windowMemory={canonical}", "config",
                           "--type=int", "pack.windowMemory"], stdout=subprocess.PIPE,
                          text=True, check=True).stdout.strip()
    assert int(read) == catalogue.parse_size(text)


@pytest.mark.parametrize("bad", ["64x", "-1m", "1.5m", "", "64 m", "m", "0", "100g",
                                 "1" * 40, ["64m"], None])
def test_a_size_git_would_not_read_or_out_of_range_is_refused(bad):
    with pytest.raises(UsageError, match="pack.windowMemory"):
        catalogue.lookup("pack.windowMemory").validate(bad)


def test_a_runs_peak_is_measured_and_a_run_stopped_at_its_timeout(large_repo):
    names = os.path.join(large_repo, ".git", "gt-objects")
    with open(names, "w") as f:
        f.write(subprocess.run(["git", "-C", large_repo, "rev-parse", "HEAD:large-0.txt"],
                               stdout=subprocess.PIPE, text=True, check=True).stdout)
    try:
        r = peak.run(["pack-objects", "--stdout", "-q"], large_repo,
                     gitbench.config_env({}), 1 << 40, 60, names)
    finally:
        os.unlink(names)
    # The blob is 4 MiB, read whole: git's resident set holds it at least.
    assert r.returncode == 0 and not r.timed_out and r.peak >= 4 * MIB, r
    slow = peak.run(["-c", "alias.wait=!sleep 30", "wait"], large_repo,
                    gitbench.config_env({}), 1 << 40, 0.5)
    assert slow.timed_out and slow.seconds < 10, slow


def test_a_runs_peak_is_gits_not_git_tunes(tmp_path):
    """A child's ru_maxrss starts from the memory of the process it was forked from: git
    started by git-tune itself would seem to peak at git-tune's size. Here the test
    holds 256 MiB; `git version` peaks at a few MiB, and is measured so."""
    held = bytearray(256 * MIB)
    held[::4096] = b"\1" * len(held[::4096])       # resident, not only reserved
    r = peak.run(["version"], str(tmp_path), gitbench.config_env({}), 1 << 40, 60)
    assert r.returncode == 0 and 0 < r.peak < 64 * MIB, r
    del held


# Run inside a memory cgroup: hold HELD MiB, then a git whose child takes HOG MiB,
# allowed ALLOWED MiB; print how it ended.
_INSIDE = """
import json, sys
from git_tune.advisor.measure import gitbench, peak, planner
held, hog, allowed = (int(a) << 20 for a in sys.argv[1:4])
mine = b"x" * held
r = peak.run(["-c", f"alias.hog=!python3 -c 'b = b\\"x\\" * {hog}'", "hog"], ".",
             gitbench.config_env({}), allowed, 60)
said = planner.how_it_did_not_fit(r, allowed) if r.over(allowed) else planner.how_it_fit(r, allowed)
print(json.dumps({"limit": r.limit, "killed": r.killed_at_limit, "rc": r.returncode,
                  "said": said}))
"""


@pytest.mark.parametrize("hog_mib, killed", [(120, True), (24, False)])
def test_a_run_is_confined_to_what_the_container_has_left_beside_git_tune(tmp_path, hog_mib,
                                                                         killed):
    """git-tune's own memory counts against its container's limit: a run allowed half of
    a 256 MiB limit, while the process that starts it holds 160 MiB, gets what is left
    (about 96 MiB). A git that needs more is killed in its own group, not git-tune in
    the container's; one that needs less ends whole."""
    why = cgroups.unavailable(memory=True)
    if why:
        pytest.skip(why)
    with cgroups.group(memory_max=256 * MIB) as g:
        out = subprocess.run([sys.executable, "-c", _INSIDE, "160", str(hog_mib), "128"],
                             cwd=tmp_path, preexec_fn=g.enter, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=120)
    assert out.returncode == 0, out.stderr       # the container's process lived
    r = json.loads(out.stdout)
    assert 0 < r["limit"] <= 96 * MIB, r
    assert r["killed"] is killed, r
    if killed:
        assert "what the container had left beside git-tune's own memory" in r["said"], r
    else:
        assert r["rc"] == 0 and r["said"].startswith("peaked at"), r


# Where no cgroup can be made: hold HELD MiB, then a git whose child grows to HOG MiB a
# MiB each 5 ms (MARKER in its command line), allowed ALLOWED MiB; then `git version`.
_UNCONFINED = """
import json, sys
from git_tune.advisor.measure import gitbench, peak, planner
held, hog, allowed = (int(a) << 20 for a in sys.argv[1:4])
mine = b"x" * held
grow = ("import time; b = []\\n"
        f"while len(b) < {hog >> 20}: b.append(b'x' * (1 << 20)); time.sleep(0.005)")
r = peak.run(["-c", f"alias.hog=!python3 -c \\"{grow}\\" {sys.argv[4]}", "hog"], ".",
             gitbench.config_env({}), allowed, 60)
small = peak.run(["version"], ".", gitbench.config_env({}), allowed, 60)
print(json.dumps({"confined": r.confined, "stopped": r.stopped_at_limit, "over": r.over(allowed),
                  "peak": r.peak, "limit": r.limit, "seconds": r.seconds,
                  "said": planner.how_it_did_not_fit(r, allowed),
                  "small_stopped": small.stopped_at_limit, "small_rc": small.returncode}))
"""


def _without_a_cgroup_of_its_own(tmp_path, held: int, hog: int, allowed: int,
                                  preexec_fn=None) -> dict:
    """Run _UNCONFINED where this process cannot make a memory cgroup: as root in a mount
    namespace whose cgroup file systems are read-only (as Docker mounts them); without
    root, as it is."""
    marker = f"gt-hog-{os.getpid()}-{id(tmp_path)}"
    argv = [sys.executable, "-c", _UNCONFINED, str(held), str(hog), str(allowed), marker]
    if os.geteuid() == 0:
        if not shutil.which("unshare"):
            pytest.skip("no unshare(1) to make the cgroup file systems read-only")
        ro = "; ".join(f"mount -o remount,bind,ro {d} 2>/dev/null"
                       for d in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory",
                                 "/sys/fs/cgroup/unified"))
        argv = ["unshare", "--mount", "sh", "-c", f'{ro}; exec "$@"', "sh", *argv]
    out = subprocess.run(argv, cwd=tmp_path, preexec_fn=preexec_fn, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    left = subprocess.run(["pgrep", "-f", marker], stdout=subprocess.PIPE, text=True).stdout
    assert not left, f"the stopped run left processes: {left}"
    assert out.returncode == 0, out.stderr       # the process that ran it lived
    r = json.loads(out.stdout)
    if r["confined"]:
        pytest.skip(f"this process could make a memory cgroup ({r['confined']})")
    return r


def test_a_run_no_cgroup_confines_is_stopped_past_what_it_may_use(tmp_path):
    """Where no cgroup can be made, git and what it starts are read as they run and
    stopped once together they hold more than a run may use: killed, and judged over,
    long before the hog would have finished growing; a run that fits is not stopped."""
    r = _without_a_cgroup_of_its_own(tmp_path, 0, 2048, 64)
    assert r["stopped"] and r["over"] and r["peak"] >= 64 * MIB, r
    assert r["seconds"] < 9, r           # growing to 2 GiB takes 10 s at least
    assert r["said"].startswith("was stopped at") and "without a cgroup of its own" in r["said"], r
    assert not r["small_stopped"] and r["small_rc"] == 0, r


def test_a_run_no_cgroup_confines_is_stopped_before_the_container_runs_out(tmp_path):
    """The run shares git-tune's container group: it is stopped at what that group has
    left beside git-tune (less what a poll can miss), below what it is allowed, so the
    kernel kills neither git-tune nor the run. Without the stop, the 600 MiB run beside
    160 MiB held would pass the 448 MiB limit."""
    why = cgroups.unavailable(memory=True)
    if why:
        pytest.skip(why)
    with cgroups.group(memory_max=448 * MIB) as g:
        r = _without_a_cgroup_of_its_own(tmp_path, 160, 600, 1024, g.enter)
    assert r["stopped"] and r["limit"] < 448 * MIB - 160 * MIB, r
    assert "the container had left beside git-tune's own memory" in r["said"], r


def _bench(tmp_path, repo: str, memory_limit: int, workload: str = "mixed") -> Bench:
    report = calibrate.probe_repository(repo, 10)
    layout = report.repository.layout
    budget = budget_plan.Budget(60)
    b = Bench(gitbench.Workspace(layout, str(tmp_path / "ws")),
              repo_probe.tracked_sample(layout, n=10 ** 9), 2, "local-ssd", report.git,
              Options(budget=60, workload=workload), budget, online_cpus=2,
              memory_limit=memory_limit,
              memory_source="a test's limit")
    os.makedirs(b.ws.root, exist_ok=True)
    return b


def test_a_limit_no_value_fits_keeps_gits_defaults_and_says_why(tmp_path, large_repo):
    """Bad input: a limit below what any value fits (git itself needs more than 4 MiB)."""
    bench = _bench(tmp_path, large_repo, 8 * MIB)
    t = packmem.trial(catalogue.lookup("pack.windowMemory"), bench)
    assert not t.comparisons and "no value from 1m up" in t.why_not_run, t


def test_no_memory_to_read_keeps_gits_defaults_and_says_why(tmp_path, large_repo):
    """Bad input: no limit and no available memory could be read (the host's fallback
    reads 0): no pack or base cache value is run or written, and the reason says so."""
    bench = _bench(tmp_path, large_repo, 0)
    for t in (packmem.trial(catalogue.lookup("pack.windowMemory"), bench),
              basecache.trial(catalogue.lookup(basecache.KEY), bench)):
        assert not t.comparisons and "could not be read" in t.why_not_run, t


def test_small_objects_and_no_objects_leave_gits_defaults_with_the_reason(tmp_path):
    """Bad input: a repository with no objects; and one whose packing fits the memory
    under Git's defaults (memory not at stake: nothing written, whatever a smaller
    window would gain by finding fewer deltas)."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("a\n")
    empty = packmem.trial(catalogue.lookup("pack.windowMemory"), _bench(tmp_path, str(repo),
                                                                        1 << 30))
    assert "no objects to pack" in empty.why_not_run, empty
    subprocess.run(["git", "-C", str(repo), "add", "a"], check=True)
    small = packmem.trial(catalogue.lookup("pack.windowMemory"),
                          _bench(tmp_path / "again", str(repo), 1 << 30))
    assert "Git's defaults fit" in small.why_not_run, small


def test_in_a_memory_cgroup_defaults_are_killed_and_the_values_written_fit(large_repo,
                                                                          tmp_path,
                                                                          isolated_git):
    why = cgroups.unavailable(memory=True)
    if why:
        pytest.skip(why)
    repo = str(tmp_path / "repo")
    subprocess.run(["cp", "-a", large_repo, repo], check=True)
    limit = 192 * MIB
    with cgroups.group(memory_max=limit) as g:
        probe = subprocess.run(GIT_TUNE + ["probe", "--repo", repo, "--json"],
                               preexec_fn=g.enter, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=600)
        assert probe.returncode == 0, probe.stderr
        host = json.loads(probe.stdout)["host"]
        assert host["memory_limit"] == limit
        assert any("memory limit of 192 MiB" in n for n in host["notes"]), host["notes"]
        auto = subprocess.run(GIT_TUNE + ["auto", "--repo", repo, "--workload", "ci", "--yes",
                                          "--json", "--budget", "60", "--scope", "local"],
                              preexec_fn=g.enter, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=600)
        again = subprocess.run(GIT_TUNE + ["probe", "--repo", repo, "--json"],
                               preexec_fn=g.enter, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=600)
    assert auto.returncode == 0, auto.stderr
    # probe shows the largest peak the calibration measured: none before it, one after.
    assert json.loads(probe.stdout)["measured_peak"] is None
    peak_seen = json.loads(again.stdout)["measured_peak"]
    assert peak_seen["peak"] > 0 and peak_seen["limit"] == limit, peak_seen
    assert peak_seen["workload"] == "ci" and peak_seen["key"] in (
        basecache.KEY, packmem.WINDOW, bigpack.KEY), peak_seen
    keys = {k["key"]: k for k in json.loads(auto.stdout)["recommendation"]["keys"]}
    window, cache = keys["pack.windowMemory"], keys["pack.deltaCacheSize"]
    assert window["status"] == "set" and cache["status"] == "set", window
    assert "Git's default" in window["reason"], window
    written = subprocess.run(["git", "-C", repo, "config", "pack.windowMemory"],
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    assert written == window["value"]

    allowed = int(limit * planner.MEMORY_SHARE)
    defaults = ["-c", "pack.windowMemory=0", "-c", "pack.deltaCacheSize=256m"]
    with cgroups.group(memory_max=allowed) as g:
        def repack(*config):
            fresh = str(tmp_path / f"copy{len(config)}")
            subprocess.run(["cp", "-a", large_repo, fresh], check=True)
            return subprocess.run(["git", "-C", fresh, *config, "repack", "-adfq"],
                                  preexec_fn=g.enter, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, timeout=300)
        killed = repack(*defaults)
        fits = repack("-c", f"pack.windowMemory={window['value']}",
                      "-c", f"pack.deltaCacheSize={cache['value']}")
    assert killed.returncode != 0, "Git's defaults fit the allowed memory: no test"
    assert fits.returncode == 0, fits.stderr


def test_where_no_window_fits_every_thread_fewer_threads_are_written(tmp_path, large_repo):
    """Each pack-objects thread holds a window of its own: a limit between the smallest
    window's peak on 2 threads and on 1 (both measured first) fits only with one thread.
    The trial's candidate carries pack.threads=1, and recommend writes it for
    pack.threads whatever index-pack's comparison said (a value without which git is
    killed comes first)."""
    from git_tune.advisor.decide import recommend
    bench = _bench(tmp_path, large_repo, 1 << 40)
    objects = packmem.sample(bench.repo, bench.ws.root, 2)
    peaks = {}
    for threads in ("2", "1"):
        seen = {}
        packmem.runner(bench.repo, objects, 1 << 40, "a test's limit", seen)(
            {**packmem._settings(MIB), "pack.threads": threads})
        peaks[threads] = seen["1m"].peak
    assert peaks["2"] > peaks["1"] + 4 * MIB, peaks      # the shape the test needs
    allowed = (peaks["2"] + peaks["1"]) // 2
    bench = _bench(tmp_path / "b", large_repo, int(allowed / planner.MEMORY_SHARE) + 1)
    t = packmem.trial(catalogue.lookup(packmem.WINDOW), bench)
    assert t.comparisons and t.main.candidate.get("pack.threads") == "1", t
    assert any(k.endswith(", 1 thread") for k in t.facts["peaks"]), t.facts
    from types import SimpleNamespace
    cal = SimpleNamespace(trials={packmem.WINDOW: t})     # what needed_by_another reads
    got = recommend.needed_by_another(catalogue.lookup("pack.threads"), cal, {"repack": 1.0})
    assert got is not None and got.status == "set" and got.value == "1", got
    assert recommend.needed_by_another(catalogue.lookup("pack.threads"), cal,
                                       {"status": 1.0}) is None    # repack not weighed


def test_the_largest_sizes_tried_are_ones_git_reads(large_repo):
    """A host with memory to spare: the ladder starts high, and the delta cache is an
    int in git (2g is out of range), so it stops below that."""
    top = packmem.ladder(1 << 40, 2)[0]
    settings = packmem._settings(top)
    assert catalogue.parse_size(settings["pack.windowMemory"]) == top
    config = [a for k, v in settings.items() for a in ("-c", f"{k}={v}")]
    proc = subprocess.run(["git", *config, "pack-objects", "--stdout", "-q"], cwd=large_repo,
                          input=b"", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.returncode == 0 and b"out of range" not in proc.stderr, proc.stderr


def test_windows_below_the_smallest_object_pack_alike_and_the_ladder_tries_one(large_repo,
                                                                              tmp_path):
    """Below the sample's smallest object a window holds the object being deltified and
    one other, whatever its size: real git packs the same bytes at two such sizes, so
    the ladder takes one of them, then 1m (for the delta cache), and none between."""
    layout = calibrate.probe_repository(large_repo, 10).repository.layout
    objects = packmem.sample(layout, str(tmp_path), 1)
    assert objects.smallest >= 2 * MIB, objects

    def packed(window: str) -> bytes:
        with open(objects.names_file, "rb") as names:
            return subprocess.run(["git", "-c", f"pack.windowMemory={window}",
                                   "-c", "pack.threads=1", "pack-objects", "--no-reuse-delta",
                                   "--delta-base-offset", "--stdout", "-q"], cwd=large_repo,
                                  stdin=names, stdout=subprocess.PIPE, check=True).stdout
    assert packed("512k") == packed(f"{objects.smallest * 3 // 4 // 1024}k")
    assert packed("512k") != packed("0")      # unlimited: the window holds all ten

    sizes = packmem.ladder(1 << 40, 1, objects.smallest)
    below = [s for s in sizes if s < objects.smallest]
    assert below[0] * 2 >= objects.smallest and below[1:] in ([], [packmem.SMALLEST]), sizes
    # Objects of 32 MiB: 16m, then 1m; with no floor known, every halving.
    assert packmem.ladder(1 << 40, 1, 32 * MIB)[-3:] == [32 * MIB, 16 * MIB, MIB]
    assert packmem.ladder(1 << 40, 2, 32 * MIB, least_cache=False)[-2:] == [32 * MIB, 16 * MIB]
    assert packmem.ladder(1 << 40, 1)[-6:] == [32 * MIB, 16 * MIB, 8 * MIB, 4 * MIB, 2 * MIB, MIB]


# core.deltaBaseCacheLimit: decided on git log -p of the path with the most delta bases.

@pytest.fixture(scope="module")
def history_repo(tmp_path_factory):
    """Two 256 KiB text files in 12 versions, repacked: each version a delta of another
    (about 6 MiB of delta bases, far below Git's 96m default)."""
    repo = str(tmp_path_factory.mktemp("history") / "repo")
    repogen.generate_large(repo, repogen.LargeFiles(size=256 << 10, versions=12,
                                                    binary=16 << 10))
    subprocess.run(["git", "-C", repo, "repack", "-adq"], check=True)
    return repo


def test_the_delta_bases_are_read_from_the_repository(tmp_path, history_repo, large_repo):
    layout = calibrate.probe_repository(history_repo, 10).repository.layout
    bases = basecache.delta_bases(layout, 0)
    assert 0 < bases.total < 96 * MIB and bases.path.startswith("large-"), bases
    assert bases.versions == 12 and 0 < bases.path_bytes <= bases.total
    # Loose objects (nothing repacked yet) are stored whole: no delta bases.
    loose = calibrate.probe_repository(large_repo, 10).repository.layout
    assert basecache.delta_bases(loose, 0).total == 0


def test_the_delta_base_cache_is_left_where_nothing_is_at_stake(tmp_path, history_repo):
    """Bases within Git's default and far below the memory a run may use: no git run,
    and the reason says both."""
    t = basecache.trial(catalogue.lookup(basecache.KEY), _bench(tmp_path, history_repo, 1 << 30))
    assert not t.comparisons and "holds every delta base" in t.why_not_run, t
    assert "nothing at stake" in t.why_not_run


def test_a_delta_base_cache_under_a_limit_no_value_fits_keeps_the_default(tmp_path,
                                                                          history_repo):
    """Bad input: a limit below what git log -p needs whatever the cache (1 MiB a run:
    less than git needs to start): every halving of the default is run and none is
    written. (In a cgroup of 4 MiB git log -p ends whole at 1536k, its resident peak
    8 MiB: the pages of its binary and the pack it maps are dropped, not counted.)"""
    t = basecache.trial(catalogue.lookup(basecache.KEY), _bench(tmp_path, history_repo, 2 * MIB))
    assert not t.comparisons and "no size down to 1536k keeps" in t.why_not_run, t


def test_a_delta_base_cache_is_compared_with_real_git_where_bases_exceed_the_default(
        tmp_path, history_repo, monkeypatch):
    """Where the bases exceed the default (here a default of 1 MiB stands for a history
    larger than 96 MiB), the quick pass's fastest size (here only the cache that holds
    the path's bases: a quarter and a half of 1 MiB are below 1m) is timed against it on
    git log -p, each run's peak recorded, and decided by the comparison."""
    monkeypatch.setattr(basecache, "default_bytes", lambda: MIB)
    bench = _bench(tmp_path, history_repo, 1 << 30)
    t = basecache.trial(catalogue.lookup(basecache.KEY), bench)
    assert t.comparisons and not t.why_not_run, t
    size = catalogue.parse_size(t.main.candidate[basecache.KEY])
    assert size >= 2 * MIB and (size >= t.facts["path_bytes"] or size == 16 * MIB), t.facts
    assert set(t.facts["peaks"]) >= {"default", t.main.candidate[basecache.KEY]}
    # Decided by the comparison: its minimum runs, or fewer where the candidate was
    # clearly slower after ab.EARLY_RUNS pairs (dropped there, by design).
    assert t.main.estimate is not None
    assert (len(t.main.times_default) >= stats.CLEAR_RUNS
            or t.main.stopped == ab.STOPPED_SLOWER
            and len(t.main.times_default) >= ab.EARLY_RUNS), t.main
    # Faster there, the same size is timed on index-pack too (mixed weighs clones).
    faster = not t.main.fails and t.main.estimate.verdict == stats.FASTER
    assert [c.workload for c in t.comparisons] == (["history", "clone"] if faster
                                                   else ["history"]), t.comparisons
    assert all(c.candidate == t.main.candidate for c in t.comparisons)


def test_a_delta_base_cache_is_timed_on_index_pack_where_the_profile_weighs_clones(
        tmp_path, history_repo):
    """A size faster for git log -p is timed against Git's default on index-pack too,
    where the profile weighs clones (mixed, ci), on the sample pack pack.threads times
    (made once a calibration); where it does not (interactive), nothing more is run."""
    cand = {basecache.KEY: "2m"}
    bench = _bench(tmp_path / "mixed", history_repo, 1 << 30)
    (c,) = basecache.on_index_pack(bench, cand)
    assert c.workload == "clone" and c.candidate == cand and not c.fails, c
    assert c.times_default and c.times_candidate, c
    made = dict(bench.made)
    assert list(made) == ["index-pack's pack"] and os.path.exists(made["index-pack's pack"][0])
    # The second key to ask gets the same pack, not another.
    assert basecache.pack.pack_for(bench) == made["index-pack's pack"]
    interactive = _bench(tmp_path / "interactive", history_repo, 1 << 30, "interactive")
    assert basecache.on_index_pack(interactive, cand) == () and not interactive.made


def test_under_a_profile_that_weighs_clones_only_the_cache_is_timed_on_index_pack(
        tmp_path, history_repo, monkeypatch):
    """ci weighs clones, not reading history: the sizes are timed on index-pack."""
    monkeypatch.setattr(basecache, "default_bytes", lambda: MIB)
    bench = _bench(tmp_path, history_repo, 1 << 30, "ci")
    t = basecache.trial(catalogue.lookup(basecache.KEY), bench)
    assert [c.workload for c in t.comparisons] == ["clone"], t
    assert catalogue.parse_size(t.main.candidate[basecache.KEY]) >= 2 * MIB, t.main


def test_the_larger_cache_holds_the_bases_and_fits_every_index_pack_thread():
    bases = basecache.Bases(1 << 30, "p", 300 * MIB, 3)
    assert basecache.larger(bases, 2 << 30, 2) == 384 * MIB     # the first that holds them
    assert basecache.larger(bases, 500 * MIB, 2) == 192 * MIB   # the largest that fits
    assert basecache.larger(bases, 300 * MIB, 2) is None        # not even twice the default
    assert basecache.larger(basecache.Bases(1 << 30, "p", 100 * MIB, 3), 2 << 30, 4) == 192 * MIB
    assert basecache.smaller(96 * MIB)[0] == 48 * MIB and basecache.smaller(96 * MIB)[-1] == 3 * MIB // 2
    # The quick pass: a quarter and a half of the default, and the larger cache that fits.
    assert basecache.quick_pass(bases, 2 << 30, 2) == [24 * MIB, 48 * MIB, 384 * MIB]
    assert basecache.quick_pass(bases, 300 * MIB, 2) == [24 * MIB, 48 * MIB]


def test_among_sizes_that_fit_the_largest_is_written_unless_another_is_faster(tmp_path,
                                                                              history_repo):
    """Where Git's default does not fit, every size whose run fitted is safe and speed
    decides: the largest stands without a run more where no other fitted or none ran
    faster; a faster one is compared with it by interleaved real-git runs, and only a
    verdict of faster sets it."""
    def fitted(seconds, peak_mib, rc=0):
        return peak.PeakRun(seconds, peak_mib * MIB, rc, False, False, "", "")
    largest = {basecache.KEY: "2m"}

    def no_run(settings, trace_file=None):
        raise AssertionError("no run expected")
    seen = {"default": fitted(0.5, 900), "4m": fitted(0.5, 900), "2m": fitted(1.0, 60),
            "1m": fitted(1.5, 50), "1536k": fitted(0.1, 50, rc=1)}
    # 4m peaked over, 1536k failed, 1m was slower: the largest that fits stands.
    assert basecache._fastest_fitting(None, no_run, seen, 100 * MIB, largest, 12) == \
        (largest, ())
    assert basecache._fastest_fitting(None, no_run, {"2m": seen["2m"]}, 100 * MIB, largest,
                                      12) == (largest, ())

    bench = _bench(tmp_path, history_repo, 1 << 30)
    layout = bench.repo
    bases = basecache.delta_bases(layout, 0)
    run = basecache.runner(layout, bases.path, 1 << 30, "a test's limit")
    seen["1m"] = fitted(0.1, 50)              # its one run was the fastest
    chosen, among = basecache._fastest_fitting(bench, run, seen, 1 << 30, largest, 12)
    (c,) = among
    assert c.default == largest and c.candidate == {basecache.KEY: "1m"}
    assert len(c.times_default) >= 3 and c.estimate is not None
    assert chosen == (c.candidate if c.estimate.verdict == "faster" else largest)


@pytest.fixture(scope="module")
def long_history(tmp_path_factory):
    """12,600 small objects in 300 commits: packing them under Git's defaults peaks near
    110 MiB here (the delta base cache fills), its 22 largest objects near 10 MiB."""
    return repogen.generate_history(str(tmp_path_factory.mktemp("long") / "repo"),
                                    repogen.LongHistory())


def test_a_history_whose_packing_does_not_fit_is_found_and_the_value_fits_every_part(
        tmp_path, long_history):
    """The largest objects fit the allowed memory under Git's defaults; the history does
    not. The trial says on which part of it Git's defaults failed, and writes a value
    (the delta base cache bounded with the window and the delta cache) that every part
    it ran on fitted, the whole history included."""
    allowed = 48 * MIB
    bench = _bench(tmp_path, long_history, int(allowed / planner.MEMORY_SHARE))
    t = packmem.trial(catalogue.lookup(packmem.WINDOW), bench)
    assert t.comparisons, t.why_not_run
    c = t.main
    assert c.fails == record.FAILS_DEFAULT and " on " in c.error, c
    assert t.facts["ended"]["default"] == "fits", t.facts      # the largest objects
    assert packmem.BASES in c.candidate, c.candidate
    name = packmem._seen_as(c.candidate)
    runs = {part: ended for run, ended in t.facts["history"].items()
            for part in [run.partition(" on ")[2]] if run.startswith(name + " on ")}
    assert runs and set(runs.values()) == {"fits"}, t.facts["history"]
    assert any(part.startswith("every object") for part in runs), runs
    killed_on = c.error.rpartition(" on ")[2]
    assert t.facts["history"][f"default on {killed_on}"] != "fits", t.facts["history"]
    assert killed_on in runs, (killed_on, runs)


def test_verify_packs_the_part_of_the_history_where_gits_defaults_were_killed(
        tmp_path, long_history):
    """In a memory cgroup where Git's defaults fit the largest objects but are killed on
    the history, auto writes a value, and its verify packs that part of the history:
    Git's defaults fail there and the value fits, so the write stands. (On the largest
    objects both sides fit, and a speed there is not what the value was written for.)"""
    why = cgroups.unavailable(memory=True)
    if why:
        pytest.skip(why)
    repo = str(tmp_path / "repo")
    subprocess.run(["cp", "-a", long_history, repo], check=True)
    with cgroups.group(memory_max=160 * MIB) as g:
        auto = subprocess.run(GIT_TUNE + ["auto", "--repo", repo, "--workload", "ci", "--yes",
                                          "--json", "--budget", "60", "--scope", "local"],
                              preexec_fn=g.enter, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=600)
    assert auto.returncode == 0, auto.stderr
    out = json.loads(auto.stdout)
    window = next(k for k in out["recommendation"]["keys"] if k["key"] == packmem.WINDOW)
    assert window["status"] == "set", window["reason"]
    assert window["evidence"]["ended"]["default"] == "fits", window["evidence"]
    assert " on the objects of the oldest " in window["reason"] or \
        " on every object " in window["reason"], window["reason"]
    repack = next(w for w in out["verify"]["workloads"] if w["name"] == packmem.WORKLOAD)
    assert repack["fails"] == "before", repack
    assert len(repack["times_after"]) >= stats.MIN_RUNS, repack
    written = subprocess.run(["git", "-C", repo, "config", packmem.WINDOW],
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    assert written == window["value"], out["message"]


@pytest.mark.parametrize("allowed_mib", [60, 150, 200, 260, 330, 400, 820, 824, 1000])
def test_the_search_finds_the_first_fitting_value_in_few_runs(allowed_mib):
    """Where the standing value does not fit, the search finds what trying every later
    value in turn would (_first_fitting), running a level's two largest, its least, and
    a bisection between: three runs at most where its least does not fit. The peaks
    are a model in which the delta base cache fills the memory and the windows barely
    do (a long history of small objects: git.git measured so), not git's."""
    allowed = allowed_mib * MIB
    values = packmem.candidates(512 * MIB, 4, 0, 96 * MIB)

    def peak_of(v):
        threads = int(v.get(packmem.THREADS, "4"))
        bases = catalogue.parse_size(v.get(packmem.BASES, "96m"))
        window = catalogue.parse_size(v.get(packmem.WINDOW, "256m"))
        return 50 * MIB + threads * (2 * bases + window // 16)

    ran = []
    make = _modelled(peak_of, allowed, ran)

    search = packmem._Search(values)
    fits = search.fit(make, "a part")
    levels = search._levels_after(-1)
    assert [v for level in levels for v in (values[i] for i in level)] == values
    first = _first_fitting(values, levels, lambda v: peak_of(v) <= allowed)
    assert fits == (first is not None) and search.value == first, (search.value, first)
    if first is not None:
        assert search.fitted is not None and search.fitted.peak == peak_of(first)
    # Runs: each level before the one decided, its two largest and its least; the
    # level decided, bisected too; the level after it where that is its bounded twin
    # and was searched with nothing fitting, its three.
    if first == {}:             # Git's defaults
        most = 1
    elif first is None:
        most = 1 + sum(min(3, len(level)) for level in levels)
    else:
        k = next(i for i, level in enumerate(levels) if values.index(first) in level)
        most = (1 + sum(min(3, len(level)) for level in levels[:k])
                + min(len(levels[k]), 3 + len(levels[k]).bit_length())
                + (min(3, len(levels[k + 1])) if k + 1 < len(levels) else 0))
    assert len(ran) <= most <= 1 + len(values), (len(ran), most, len(values))
    if first and first is values[levels[k].start] and k and len(levels[k - 1]) >= 3 \
            and search._bounded_twin(levels[k - 1], levels[k]):
        # The twin's largest runs before the level's least, and stands where it fits.
        assert len(ran) == 1 + sum(min(3, len(level)) for level in levels[:k]), ran


def test_where_the_budget_holds_no_two_more_runs_the_least_runs_next():
    """On a history part where what is left holds no two more runs as long as the
    longest there (the planner's holds_runs, here saying no), the level's least runs
    right after the value standing is killed, so a budget ending then leaves it; the
    sizes above it are bisected after, and the largest that fits stands."""
    allowed = 821 * MIB         # 8m windows on four threads fit, 16m do not
    values = packmem.candidates(512 * MIB, 4, 0, 96 * MIB)

    def peak_of(v):
        window = catalogue.parse_size(v.get(packmem.WINDOW, "256m"))
        return 50 * MIB + int(v.get(packmem.THREADS, "4")) * (192 * MIB + window // 16)

    ran = []
    make = _modelled(peak_of, allowed, ran)

    asked = []
    search = packmem._Search(values, lambda seconds: asked.append(seconds) or False)
    assert search.fit(make, "a part")
    first = search._levels_after(-1)[0]
    assert ran[0] == {} and ran[1] == values[first.stop - 1], ran[:2]
    assert asked == [1.0], asked
    fitting = [values[i] for i in first if peak_of(values[i]) <= allowed]
    assert len(fitting) < len(first) and search.value == fitting[0], search.value
    assert len(ran) <= 2 + len(first).bit_length(), ran


def _modelled(peak_of, allowed, ran):
    """The search's runner factory where a value's peak is peak_of's model, not git's
    run: each value run is appended to `ran`, one whose peak passes `allowed` fails."""
    def make(runs):
        def run(v):
            ran.append(v)
            r = peak.PeakRun(1.0, peak_of(v), 0, False, False, "", "")
            runs[v.get(packmem.WINDOW, "default")] = r
            if r.over(allowed):
                raise planner.OverMemory("over")
            return r.seconds
        return run
    return make


def _first_fitting(values, levels, fits):
    """What the search must find, by trying every value: Git's defaults, else the
    first level with a value that fits, its largest; but where that level's two largest
    do not fit and the next level is it with the delta base cache bounded, that level's
    largest that fits, where one does."""
    if fits({}):
        return {}
    for i, level in enumerate(levels):
        mine = [values[j] for j in level]
        fitting = [v for v in mine if fits(v)]
        if not fitting:
            continue
        nxt = [values[j] for j in levels[i + 1]] if i + 1 < len(levels) else []
        twin = (nxt and packmem.BASES not in mine[0] and packmem.BASES in nxt[0]
                and mine[0].get(packmem.THREADS) == nxt[0].get(packmem.THREADS))
        if twin and len(mine) >= 3 and not fits(mine[0]) and not fits(mine[1]):
            return next((v for v in nxt if fits(v)), fitting[0])
        return fitting[0]
    return None


# gc.bigPackThreshold: decided on the pack-objects run of gc's all-in-one repack.

@pytest.fixture(scope="module")
def many_objects(tmp_path_factory):
    """200,000 small blobs in one pack, and one more commit in a second pack: gc's
    all-in-one repack holds an entry for every object (near 60 MiB resident here),
    keeping the large pack leaves it almost nothing to pack (measured; the test checks
    it)."""
    repo = tmp_path_factory.mktemp("many") / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    n = 200_000
    stream = [b"blob\nmark :%d\ndata %d\n%d\n\n" % (i + 1, len(b"%d" % i) + 1, i)
              for i in range(n)]
    stream.append(b"commit refs/heads/main\ncommitter a <a@b> 0 +0000\ndata 2\nm\n")
    stream += [b"M 100644 :%d d%d/f%d\n" % (i + 1, i % 500, i) for i in range(n)]
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(stream) + b"\n",
                   check=True)
    subprocess.run(["git", "-C", str(repo), "repack", "-adq"], check=True)
    (repo / "one").write_text("one more\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
    subprocess.run(["git", "-C", str(repo), "add", "one"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "one"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "repack", "-dq"], check=True)
    return str(repo)


def test_the_threshold_keeps_the_largest_packs_as_git_gc_does(tmp_path, many_objects):
    """The value written is one git reads (whole KiB), keeps the large pack and not the
    small one, and real `git gc` under it leaves the large pack as it was, where without
    it gc rewrites every pack into one."""
    layout = calibrate.probe_repository(many_objects, 10).repository.layout
    found = bigpack.packs(layout)
    assert len(found) == 2 and found[0].size > 100 * found[1].size, found
    value = bigpack.threshold(found[:1])
    assert catalogue.lookup(bigpack.KEY).validate(value) == value
    assert bigpack.kept_by(value, found) == found[:1]

    def gc(*config):
        copy = tmp_path / f"copy{len(config)}"
        subprocess.run(["cp", "-a", many_objects, str(copy)], check=True)
        subprocess.run(["git", "-C", str(copy), *config, "gc", "--quiet"], check=True)
        return sorted(os.listdir(copy / ".git" / "objects" / "pack"))
    assert found[0].name in gc("-c", f"{bigpack.KEY}={value}")
    assert found[0].name not in gc()


def test_gc_threshold_is_set_only_where_gcs_repack_does_not_fit(tmp_path, many_objects):
    """Git's default fitting the memory a run may use: nothing set, the peak said. Then a
    limit between the all-in-one repack's measured peak and the peak of the repack that
    keeps the large pack: the default is over (or killed), the threshold that keeps it
    fits and is chosen, whatever its speed. No packs: Git's default, said why."""
    key = catalogue.lookup(bigpack.KEY)
    roomy = bigpack.TUNERS[bigpack.KEY].trial(key, _bench(tmp_path / "a", many_objects, 1 << 32))
    assert "Git's default fits" in roomy.why_not_run and not roomy.comparisons, roomy

    layout = calibrate.probe_repository(many_objects, 10).repository.layout
    found = bigpack.packs(layout)
    every = bigpack.runner(layout, found, 1 << 40, "a test's limit", seen := {})
    every({})
    every({bigpack.KEY: bigpack.threshold(found[:1])})
    whole, kept = seen["default"].peak, seen[bigpack.threshold(found[:1])].peak
    assert whole > kept + 16 * MIB, (whole, kept)    # the shape the test needs
    allowed = kept + (whole - kept) // 4
    bench = _bench(tmp_path / "b", many_objects, int(allowed / planner.MEMORY_SHARE) + 1)
    t = bigpack.TUNERS[bigpack.KEY].trial(key, bench)
    assert t.comparisons and not t.why_not_run, t
    assert t.main.candidate == {bigpack.KEY: bigpack.threshold(found[:1])}
    assert t.facts["ended"]["default"] in ("over", "killed"), t.facts

    repo = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    none = bigpack.TUNERS[bigpack.KEY].trial(key, _bench(tmp_path / "c", str(repo), 1 << 30))
    assert "no packs" in none.why_not_run, none


def test_a_reason_that_says_a_run_fit_never_quotes_a_peak_above_the_allowance():
    """Confined, a run whose resident set passed the allowance (the pack files git maps,
    which the kernel drops rather than kill git) fitted by ending whole: the reason says
    so, not "peaked at 527 MiB of the 256 MiB"."""
    def run(peak_mib, confined):
        return peak.PeakRun(1.0, peak_mib * MIB, 0, False, False, confined, "")
    allowed = 256 * MIB
    assert planner.how_it_fit(run(58, "cgroup v1"), allowed) == \
        "peaked at 58 MiB of the 256 MiB a run may use"
    mapped = planner.how_it_fit(run(527, "cgroup v2"), allowed)
    assert mapped.startswith("ended whole confined to the 256 MiB a run may use")
    assert "527 MiB" in mapped and not run(527, "cgroup v2").over(allowed)
