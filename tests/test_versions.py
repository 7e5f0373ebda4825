"""The git versions people run (issue #14): what the catalogue says about each key holds
for every git the tests have (the system's and those tools/build-git built), read from
git's behaviour; the keys newer git brings are measured, and the daemon is never left
running."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from git_tune import engine, fsmonitor, repogen
from git_tune.advisor.keys import fsmonitor as fsmonitor_key
from git_tune.models import catalogue
from git_tune.probes import gitinfo
from tests.conftest import BUILT_GITS, git_version_of

GIT_TUNE = [sys.executable, "-m", "git_tune"]


def on_path(monkeypatch, binary):
    """Make this git the one every `git` call (git-tune's and the probes') starts."""
    monkeypatch.setenv("PATH", os.path.dirname(binary) + os.pathsep + os.environ["PATH"])


def has_daemon(binary) -> bool:
    proc = subprocess.run([binary, "fsmonitor--daemon", "status"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return "not supported" not in proc.stdout and "not a git command" not in proc.stdout


DAEMON_GITS = [g for g in BUILT_GITS if has_daemon(g)]
needs_daemon = pytest.mark.skipif(not DAEMON_GITS or not sys.platform.startswith("linux"),
                                  reason="no built git with the Linux fsmonitor daemon "
                                         "(tools/build-git 2.55.0)")


def copy_of(repo, dest):
    subprocess.run(["git", "clone", "-q", str(repo), str(dest)], check=True)
    return dest


def trace_children(binary, args, cwd, trace):
    env = dict(os.environ, GIT_TRACE2_EVENT=str(trace))
    subprocess.run([binary, *args], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    events = [json.loads(line) for line in open(trace)]
    os.unlink(trace)
    return [e for e in events if e.get("event") == "child_start"]


# 1. The catalogue's facts, per git.

def test_skip_hash_and_the_daemon_are_where_the_catalogue_says(any_git, tmp_path, small_repo,
                                                               monkeypatch):
    version = git_version_of(any_git)
    on_path(monkeypatch, any_git)
    cat = catalogue.catalogue()
    honoured, detail = gitinfo.skip_hash(str(tmp_path))
    assert honoured == cat["index.skipHash"].available(version), detail
    daemon, detail = gitinfo.fsmonitor_daemon(str(small_repo))
    assert daemon == cat["core.fsmonitor"].available(version), detail


def test_index_threads_unset_writes_no_offset_table(any_git, tmp_path, small_repo, monkeypatch):
    """The trap: documented as true, but unset means one thread; an explicit count
    makes git write the offset table threaded loading needs."""
    repo = copy_of(small_repo, tmp_path / "r")
    index = repo / ".git" / "index"
    for value, blocks in ((None, 0), ("4", 4)):
        cfg = ["-c", f"index.threads={value}"] if value else []
        subprocess.run([any_git, *cfg, "update-index", "--force-write-index"], cwd=repo,
                       check=True)
        assert engine.index_read(str(index)).ieot_blocks == blocks, value


def test_checkout_workers_below_one_means_every_online_cpu(any_git, tmp_path, small_repo):
    repo = copy_of(small_repo, tmp_path / "r")
    names = subprocess.run([any_git, "ls-files"], cwd=repo, stdout=subprocess.PIPE,
                           text=True, check=True).stdout.split()

    def workers(value):
        for n in names[:300]:
            os.unlink(repo / n)
        children = trace_children(any_git, ["-c", f"checkout.workers={value}", "-c",
                                            "checkout.thresholdForParallelism=0",
                                            "checkout", "-q", "-f"], repo, tmp_path / "t")
        return sum("checkout--worker" in " ".join(c.get("argv", [])) for c in children)

    assert workers(0) == os.cpu_count()
    assert workers(-1) == os.cpu_count()
    assert workers(1) == 0          # one worker: sequential, no worker processes


# 2. The keys newer git brings: measured, and the daemon never left behind.

@pytest.fixture(scope="module")
def big_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("versions") / "repo"
    repogen.generate(str(root), repogen.RepoShape.for_files(3000), limit=3000)
    return root


def daemons_for(repo):
    return [d for d in fsmonitor.all_running() if d.git_dir == str(repo / ".git")]


@pytest.mark.timed
@needs_daemon
def test_newer_keys_are_measured_and_no_daemon_is_left(big_repo):
    git = DAEMON_GITS[-1]
    proc = subprocess.run(GIT_TUNE + ["--git", git, "recommend", "--repo", str(big_repo),
                                      "--budget", "24", "--json", "--recalibrate"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    keys = {k["key"]: k for k in json.loads(proc.stdout)["keys"]}
    fsm = keys["core.fsmonitor"]
    assert fsm["status"] != "not offered"
    # Measured with the daemon (or its absence explained), never assumed.
    assert fsm["gain"] is not None or "budget" in fsm["reason"], fsm
    if fsm["gain"]:
        # The reason quotes the workload that decided: the hot status, or the untracked
        # status when the daemon made that one slower beyond noise (the guard).
        commands = tuple(what for what, _ in fsmonitor_key.WORKLOADS.values())
        assert fsm["reason"].startswith(commands), fsm
    skip = keys["index.skipHash"]
    assert skip["gain"] is not None or "budget" in skip["reason"], skip
    if skip["status"] == "set":
        assert "libgit2" in skip["reason"]
    assert not daemons_for(big_repo)
    assert not (big_repo / ".git" / "fsmonitor--daemon").exists()


@needs_daemon
def test_fsmonitor_is_refused_on_network_storage(tmp_path, monkeypatch, latfs_bed):
    from git_tune.advisor.decide.recommend import recommend
    from git_tune.advisor.measure import calibrate
    from git_tune.advisor.measure.record import Options
    on_path(monkeypatch, DAEMON_GITS[-1])
    backing = os.path.join(os.path.dirname(latfs_bed), "backing", "repo")
    repogen.generate(backing, repogen.RepoShape.for_files(300), limit=300)
    record = calibrate.calibrate(calibrate.probe_repository(os.path.join(latfs_bed, "repo")),
                                 Options(budget=3), store=False)
    advice = {a.key: a for a in recommend(record, "mixed").keys}["core.fsmonitor"]
    assert advice.value is None
    # Refused by its storage class before git's own check: the daemon misses other
    # hosts' writes.
    assert "network or shared storage" in advice.reason, advice.reason
    assert not fsmonitor.all_running()


@needs_daemon
@pytest.mark.parametrize("fstype", ["9p", "virtiofs", "ceph", "lustre", "gpfs", "beegfs"])
def test_fsmonitor_is_refused_on_shared_storage_git_itself_treats_as_local(
        fstype, small_repo, tmp_path, monkeypatch):
    """git's own check refuses the daemon only on NFS, SMB, AFS, Coda and FUSE
    (is_remote_fs, compat/fsmonitor/fsm-path-utils-linux.c); on these types, shared
    between hosts or between a VM and its host, git runs it and misses the other side's
    writes. The probe classes each as network storage, and the trial is refused for
    that before git is asked: git itself accepts the daemon on this local repository."""
    from git_tune.advisor.measure import budget as budget_plan, calibrate
    from git_tune.advisor.measure.record import Options
    from git_tune.models import storage as storage_model
    git = DAEMON_GITS[-1]
    on_path(monkeypatch, git)
    repo = copy_of(small_repo, tmp_path / "r")
    started = subprocess.run([git, "fsmonitor--daemon", "start"], cwd=repo,
                             capture_output=True, text=True)
    subprocess.run([git, "fsmonitor--daemon", "stop"], cwd=repo, capture_output=True)
    assert started.returncode == 0, started.stderr          # git runs it here
    cls = storage_model.classify(fstype, {}, None).storage_class
    assert cls == storage_model.NETWORK
    report = calibrate.probe_repository(str(repo))
    bench = calibrate.bench_for(report, Options(budget=5), budget_plan.Budget(5), None)
    bench = dataclasses.replace(bench, storage_class=cls)
    t = fsmonitor_key.trial(catalogue.lookup("core.fsmonitor"), bench)
    assert t is not None and t.why_not_run.startswith(
        "the work tree is on network or shared storage"), t
    assert not daemons_for(repo)


@needs_daemon
def test_the_trial_stops_the_daemons_its_status_starts_in_submodules(small_repo, tmp_path,
                                                                     monkeypatch):
    """git status recurses into submodules with the trial's core.fsmonitor=true in its
    environment, and each submodule's git starts a daemon of its own: the trial stops
    those too, and removes their cookie directories."""
    from git_tune.advisor.measure import budget as budget_plan, calibrate, gitbench
    from git_tune.advisor.measure.record import Options
    git = DAEMON_GITS[-1]
    on_path(monkeypatch, git)
    repo = copy_of(small_repo, tmp_path / "super")
    subprocess.run([git, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
                    str(small_repo), "mod"], cwd=repo, check=True, capture_output=True)
    report = calibrate.probe_repository(str(repo))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ws = gitbench.Workspace(report.repository.layout, str(scratch))
    bench = calibrate.bench_for(report, Options(budget=10), budget_plan.Budget(10), ws)
    t = fsmonitor_key.trial(catalogue.lookup("core.fsmonitor"), bench)
    assert t is not None and t.comparisons, t
    modules = repo / ".git" / "modules"
    assert not fsmonitor.below(str(repo / ".git"))
    assert not [d for d, dirs, _ in os.walk(modules) if "fsmonitor--daemon" in dirs]


@needs_daemon
def test_revert_stops_the_daemons_git_tune_caused(big_repo, tmp_path, isolated_git):
    git = DAEMON_GITS[-1]
    mine = copy_of(big_repo, tmp_path / "mine")       # the user's own daemon stays
    subprocess.run([git, "config", "core.fsmonitor", "true"], cwd=mine, check=True)
    ours = copy_of(big_repo, tmp_path / "ours")
    try:
        set_ = subprocess.run(GIT_TUNE + ["--git", git, "set", "core.fsmonitor=true"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert set_.returncode == 0, set_.stderr
        for repo in (mine, ours):
            subprocess.run([git, "status", "-s"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        assert daemons_for(ours) and daemons_for(mine)
        rev = subprocess.run(GIT_TUNE + ["--git", git, "revert", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert rev.returncode == 0, rev.stderr
        assert json.loads(rev.stdout)["stopped"] == [f"stopped the fsmonitor daemon of {ours}/.git"]
        assert not daemons_for(ours) and daemons_for(mine)
    finally:
        for repo in (mine, ours):
            subprocess.run([git, "fsmonitor--daemon", "stop"], cwd=repo,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_per_repository_key_goes_into_the_repository_block(tmp_path, small_repo, isolated_git):
    from git_tune.advisor import auto
    from git_tune.advisor.write import configwrite, scopes
    a, b = copy_of(small_repo, tmp_path / "a"), copy_of(small_repo, tmp_path / "b")
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.55.0", "test", "local-ssd")
    for repo in (a, b):
        settings, blocks = auto._split_per_repository(
            {"core.fsmonitor": "true", "checkout.workers": "4"}, scope, str(repo / ".git"))
        assert settings == {"checkout.workers": "4"}
        configwrite.apply(configwrite.plan(scope, settings, prov, per_repo=blocks), prov)

    def get(repo, key):
        return subprocess.run(["git", "config", "--get", key], cwd=repo, stdout=subprocess.PIPE,
                              text=True).stdout.strip()
    for repo in (a, b):                         # the second write kept the first's block
        assert get(repo, "core.fsmonitor") == "true" and get(repo, "checkout.workers") == "4"
    assert get(tmp_path, "core.fsmonitor") == ""          # nowhere else
