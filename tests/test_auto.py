"""Writing config safely with the real git, in a throw-away HOME."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from git_tune.cli import cli
from testbeds.mount import available, bed
from tests.test_terminal import toy_env  # noqa: F401  (a fixture)

GIT_TUNE = [sys.executable, "-m", "git_tune"]


def invoke(*args):
    res = CliRunner().invoke(cli, list(args))
    return res


def gt(*args, **kw):
    return subprocess.run(GIT_TUNE + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


@pytest.fixture
def home(isolated_git, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    cfg = isolated_git / ".gitconfig"
    cfg.write_text("# my own settings\n[user]\n\tname = Ada\n[alias]\n\tst = status -sb\n")
    return isolated_git


def include_file(home):
    return home / ".config" / "git-tune" / "global.gitconfig"


def git_get(key, cwd=None):
    p = subprocess.run(["git", "config", "--get", key], cwd=cwd, stdout=subprocess.PIPE, text=True)
    return p.stdout.strip() or None


def test_write_rerun_revert_restores_exact_bytes(home):
    before = (home / ".gitconfig").read_bytes()
    res = invoke("set", "checkout.workers=4", "core.preloadIndex=false")
    assert res.exit_code == 0, res.output
    assert git_get("checkout.workers") == "4" and git_get("core.preloadindex") == "false"
    text = include_file(home).read_text()
    assert text.startswith("# Written by git-tune") and "[checkout]\n\tworkers = 4" in text
    assert git_get("include.path") == str(include_file(home))
    mtime = include_file(home).stat().st_mtime_ns
    res = invoke("set", "checkout.workers=4")
    assert res.exit_code == 0 and "nothing to change" in res.output
    assert include_file(home).stat().st_mtime_ns == mtime
    res = invoke("revert", "--scope", "global")
    assert res.exit_code == 0, res.output
    assert (home / ".gitconfig").read_bytes() == before
    assert not include_file(home).exists()
    assert git_get("checkout.workers") is None


def test_revert_keeps_later_user_edits(home):
    assert invoke("set", "checkout.workers=4").exit_code == 0
    subprocess.run(["git", "config", "--global", "alias.co", "checkout"], check=True)
    res = invoke("revert", "--scope", "global")
    assert res.exit_code == 0 and "edited since" in res.output
    assert git_get("alias.co") == "checkout" and git_get("checkout.workers") is None
    assert git_get("include.path") is None


def test_conflicts_are_left_alone_unless_override(home):
    subprocess.run(["git", "config", "--global", "checkout.workers", "3"], check=True)
    res = invoke("set", "checkout.workers=8", "index.threads=4")
    assert res.exit_code == 0
    assert "conflict: checkout.workers=3 set in global config" in res.output
    assert git_get("checkout.workers") == "3" and git_get("index.threads") == "4"
    assert "workers" not in include_file(home).read_text()
    res = invoke("set", "checkout.workers=8", "--override")
    assert res.exit_code == 0 and "written anyway" in res.output
    assert git_get("checkout.workers") == "8"  # our include comes after the user's value


def test_unknown_keys_and_values_are_refused(home):
    res = invoke("set", "core.bogus=1")
    assert res.exit_code == 2 and "not a key git-tune knows" in res.output
    res = invoke("set", "checkout.workers=0")
    assert res.exit_code == 2 and "1..64" in res.output
    from git_tune.probes.gitinfo import git_version
    if git_version() < (2, 40, 0):
        res = invoke("set", "index.skipHash=true")
        assert res.exit_code == 2 and "does not read index.skipHash" in res.output
    assert not include_file(home).exists()


def _snapshot(*paths):
    return {str(p): (p.read_bytes() if p.exists() else None) for p in paths}


def test_read_only_scope_fails_cleanly(home, monkeypatch):
    reason = available("tmpfs")
    if reason:
        pytest.skip(reason)
    with bed("tmpfs", size_mb=4) as mnt:
        cfg_dir = os.path.join(mnt, "config")
        os.makedirs(cfg_dir)
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        try:
            monkeypatch.setenv("XDG_CONFIG_HOME", cfg_dir)
            before = _snapshot(home / ".gitconfig")
            res = invoke("set", "checkout.workers=4")
            assert res.exit_code == 5, res.output
            assert "read-only" in res.output and "nothing was changed" in res.output
            assert _snapshot(home / ".gitconfig") == before
            assert git_get("checkout.workers") is None
        finally:
            subprocess.run(["mount", "-o", "remount,rw", mnt], check=True)


def test_full_disk_fails_cleanly(home, monkeypatch):
    reason = available("tmpfs")
    if reason:
        pytest.skip(reason)
    with bed("tmpfs", size_mb=1) as mnt:
        monkeypatch.setenv("XDG_CONFIG_HOME", mnt)
        monkeypatch.setenv("GIT_TUNE_STATE_DIR", os.path.join(mnt, "state"))
        with open(os.path.join(mnt, "filler"), "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        before = _snapshot(home / ".gitconfig")
        res = invoke("set", "checkout.workers=4")
        assert res.exit_code == 5, res.output
        assert "disk is full" in res.output and "nothing was changed" in res.output
        assert _snapshot(home / ".gitconfig") == before
        assert git_get("checkout.workers") is None


def test_killed_at_any_instant_config_stays_valid(home):
    rng = random.Random(4)
    values = {None, "4", "6"}
    for i in range(30):
        proc = subprocess.Popen(GIT_TUNE + ["set", f"checkout.workers={4 + 2 * (i % 2)}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        listing = subprocess.run(["git", "config", "--list"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert listing.returncode == 0, listing.stderr
        assert git_get("checkout.workers") in values
        assert git_get("user.name") == "Ada"
    # A later run still works on whatever the kills left.
    assert gt("set", "checkout.workers=8").returncode == 0
    assert git_get("checkout.workers") == "8"


def test_concurrent_runs_are_serialised(home):
    procs = [subprocess.Popen(GIT_TUNE + ["set", f"index.threads={n}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in (2, 3, 4, 5)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert git_get("index.threads") in {"2", "3", "4", "5"}
    assert git_get("include.path") == str(include_file(home))
    paths = subprocess.run(["git", "config", "--get-all", "include.path"], stdout=subprocess.PIPE,
                           text=True).stdout.split()
    assert len(paths) == 1  # never added twice
    backups = os.listdir(home / "state" / "backups")
    assert len(backups) == 4


@pytest.fixture
def repo(small_repo, tmp_path):
    r = tmp_path / "r"
    shutil.copytree(small_repo, r)
    return r


def test_auto_local_is_idempotent_and_revertable(home, repo, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(home / "cache"))
    config_before = (repo / ".git" / "config").read_bytes()
    args = ["auto", "--repo", str(repo), "--scope", "local", "--budget", "3", "--strategy",
            "grid", "--yes", "--json"]
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    first = json.loads(res.stdout)
    settings = first["plan"]["settings"]
    if first.get("taken_back"):
        # Its verify (5 runs a side) read a value slower: taken back, the config as it
        # was, and the calibration that chose it dropped, so the next run measures again.
        assert (repo / ".git" / "config").read_bytes() == config_before
        assert not json.loads(invoke(*args[:-2], "--dry-run", "--json").stdout)[
            "calibration_reused"]
        return
    if settings:
        assert first["written"]["written"] is True
        inc = repo / ".git" / "git-tune.gitconfig"
        assert git_get("include.path", cwd=repo) == str(inc)
        for k, v in settings.items():
            assert git_get(k, cwd=repo) == v
        assert first["verify"]["workloads"]
    else:  # nothing beat Git's defaults here: then nothing may be written either
        assert first["written"] is None and first["message"].startswith("nothing to change")
        assert not (repo / ".git" / "git-tune.gitconfig").exists()
    res = invoke(*args)
    assert res.exit_code == 0
    second = json.loads(res.stdout)
    assert second["calibration_reused"] and not second["plan"]["changes"]
    assert second["message"].startswith("nothing to change")
    if settings:
        res = invoke("revert", "--scope", "local", "--repo", str(repo))
        assert res.exit_code == 0, res.output
    assert (repo / ".git" / "config").read_bytes() == config_before


def test_auto_dry_run_writes_nothing(home, repo, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(home / "cache"))
    config_before = (repo / ".git" / "config").read_bytes()
    index_before = (repo / ".git" / "index").read_bytes()
    res = invoke("auto", "--repo", str(repo), "--scope", "local", "--budget", "2",
                 "--strategy", "grid", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["written"] is None
    assert (repo / ".git" / "config").read_bytes() == config_before
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert not (repo / ".git" / "git-tune.gitconfig").exists()
    assert not (home / "state").exists() and not (home / "cache").exists()


def test_auto_asks_git_where_the_repository_is_once(home, repo, monkeypatch, tmp_path):
    """Issue #31: the probe, the calibration, the write and verify share one located
    layout: `git rev-parse --show-toplevel` (one of locate's questions) runs once per
    `auto` in the user's repository, whatever the command goes on to do there."""
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(home / "cache"))
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    res = invoke("auto", "--repo", str(repo), "--scope", "local", "--budget", "3",
                 "--strategy", "grid", "--yes", "--json")
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    assert res.exit_code == 0, res.output
    asked = [e for e in map(json.loads, trace.read_text().splitlines())
             if e.get("event") == "start" and e.get("argv", [])[1:3] == ["rev-parse",
                                                                        "--show-toplevel"]]
    assert len(asked) == 1, asked
    invoke("revert", "--scope", "local", "--repo", str(repo))


def test_verify_times_every_workload_with_trace_phases(home, repo, monkeypatch):
    from git_tune.advisor.measure import verify
    # The whole tree is timed whatever a run of it takes on this host: how long a run may
    # take is verify's policy (the test after this one), not this test's claim.
    monkeypatch.setattr(verify, "TREE_RUN_SECONDS", 600.0)
    res = invoke("verify", "--repo", str(repo), "--set", "checkout.workers=4",
                 "--set", "checkout.thresholdForParallelism=1", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    names = [w["name"] for w in data["workloads"]]
    assert names == ["status", "untracked", "diff", "index", "write", "switch", "clone"]
    switch, tree = data["workloads"][-2:]
    # One run is the switch there and back: two checkouts, each starting 4 workers.
    assert switch["phases_after"].get("children/git checkout--worker") == 8
    assert "children/git checkout--worker" not in switch["phases_before"]
    # The clone row writes the whole tree, which is what the workers' trial timed (on the
    # tree or a part of it): one checkout-index of every file, 4 workers after.
    assert tree["phases_after"].get("children/git checkout--worker") == 4
    assert "children/git checkout--worker" not in tree["phases_before"]
    assert "clone: the whole tree, 999 files, written then git status" in data["notes"]
    # 999 entries: preload-index.c starts no threads below 1,000, so refresh does the lstat.
    phases = data["workloads"][0]["phases_before"]
    assert "index/refresh" in phases and "index/preload" not in phases
    for w in data["workloads"]:
        assert len(w["times_before"]) == 5 and w["estimate"]["verdict"] in (
            "faster", "no change", "slower")
    res = invoke("verify", "--repo", str(repo), "--set", "checkout.workers=4", "--runs", "3")
    assert res.exit_code == 2


def test_verify_leaves_out_a_whole_tree_that_takes_too_long_and_says_so(home, repo,
                                                                        monkeypatch):
    """verify is not bounded by a budget: the whole tree is timed only where one run of
    it is short, and where it is not, the note says so and the other rows stand."""
    from git_tune.advisor.measure import verify
    monkeypatch.setattr(verify, "TREE_RUN_SECONDS", 0.0)
    res = invoke("verify", "--repo", str(repo), "--set", "checkout.workers=4",
                 "--workload", "switch", "--workload", "clone", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [w["name"] for w in data["workloads"]] == ["switch"]
    assert ("clone not timed: one run of the whole tree written then git status takes over "
            "0 s; calibration's comparison stands") in data["notes"]


def test_verify_switches_there_and_back_in_every_run(home, repo, monkeypatch, tmp_path):
    """Every run of either side does the same work: the switch to the other commit and
    back, each then the status that pays for its files. One switch a run gave the sides
    alternating directions, and an odd count of runs made the verdict compare the
    directions (on the demo repository 32 ms one way, 43 ms the other)."""
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    res = invoke("verify", "--repo", str(repo), "--workload", "switch",
                 "--set", "checkout.workers=2", "--json")
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    assert res.exit_code == 0, res.output
    switch = json.loads(res.stdout)["workloads"][0]
    runs = len(switch["times_before"]) + len(switch["times_after"])
    starts = [e["argv"][1:] for e in map(json.loads, trace.read_text().splitlines())
              if e.get("event") == "start" and e["argv"][1:2] in (["checkout"], ["status"])]
    # The scratch clone's own first checkout, then the warm-up pair and the timed runs
    # (the traced runs write to files of their own), each the same four commands.
    first, rest = starts[0], starts[1:]
    there, back = rest[0][-1], first[-1]
    assert there != back and len(rest) == 4 * (runs + 2)
    for i in range(0, len(rest), 4):
        assert [a[0] for a in rest[i:i + 4]] == ["checkout", "status", "checkout", "status"]
        assert (rest[i][-1], rest[i + 2][-1]) == (there, back)


def test_auto_says_a_workload_verified_slower(home, repo):
    """Where auto's verification shows a workload slower beyond noise under the values
    it has just written, the output says which (auto has taken them back: no undo line)."""
    from git_tune.views import auto_view, slower_after_write
    res = invoke("verify", "--repo", str(repo), "--workload", "switch", "--workload", "status",
                 "--set", "checkout.workers=2", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    slower = [w["command"] for w in report["workloads"] if w["estimate"]["verdict"] == "slower"]
    said = slower_after_write(report)
    assert bool(said) == bool(slower) and all(c in said[0] for c in slower)
    switch = report["workloads"][0]
    switch["estimate"].update(verdict="slower", ratio=1.25, low=1.1, high=1.4)
    (line,) = slower_after_write(report)
    assert line.startswith("slower with the values written: git checkout")
    assert "0.80x (0.71-0.91)" in line
    written = {"scope": {"name": "local"}, "message": "wrote 1 value", "backup": None,
               "overridden": {}}
    shown = auto_view({"recommendation": None, "calibration_reused": False,
                       "plan": {"changes": ["checkout.workers"], "left_alone": []},
                       "written": written, "verify": report, "message": "taken back: ...",
                       "taken_back": [line]}, preview_shown=True).splitlines()
    assert line in shown and "undo: git-tune revert --scope local" not in shown


def test_every_write_ends_with_how_to_see_and_undo_it(home):
    res = invoke("set", "checkout.workers=4")
    assert res.exit_code == 0, res.output
    lines = res.output.rstrip("\n").splitlines()
    assert "wrote 1 value to" in res.output
    assert lines[-2:] == ["see: git-tune show", "undo: git-tune revert --scope global"]


def test_revert_with_nothing_written_is_not_an_error(home):
    for args in (["revert"], ["revert", "--scope", "global"]):
        res = invoke(*args)
        assert res.exit_code == 0, res.output
        assert "nothing to revert" in res.output
    res = invoke("revert", "--json")
    assert json.loads(res.stdout)["message"].startswith("nothing to revert")


def test_revert_names_the_files_and_keeps_hand_edits_of_its_own(home):
    assert invoke("set", "checkout.workers=4").exit_code == 0
    inc = include_file(home)
    with open(inc, "a") as f:
        f.write("[user]\n\tsignature = mine\n")        # edited by hand
    res = invoke("revert", "--scope", "global", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert str(home / ".gitconfig") in out["message"] and str(inc) in out["message"]
    kept = out["kept_edits"]
    assert kept and "hand edits" in out["message"]
    copies = [os.path.join(kept, f) for f in os.listdir(kept) if f.endswith(".bak")]
    assert any("signature = mine" in open(c).read() for c in copies)
    assert not inc.exists()


LOSER_MODULE = '''
"""A key whose value git cannot run under (core.abbrev must be a number): auto is made
to write it, and its own verify, real git, shows every command failing."""
from git_tune.advisor.decide import advice
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.record import Trial

KEY = "core.abbrev"
TRIAL_RANK = 0


def trial(key, bench):
    st = gitbench.status(bench.repo, bench.ws.index_copy("plain"), untracked=False)
    return Trial(KEY, (bench.ab("status", {}, {}, lambda: st({}), lambda: st({})),))


def decide(key, cal, weights):
    return advice.KeyAdvice(key.name, advice.SET, "x", key.default, None, "forced to lose")


def verify_workloads(key):
    return ("index",)
'''

LOSER_TOML = '''
[keys."core.abbrev"]
module = "toykeys.loser"
type = "enum"
values = ["x", "auto"]
default = "auto"
since = "1.0.0"
affects = ["every command that reads or writes the index"]
measured_by = "git"
facts = "A value git refuses: every command dies."
'''


def test_a_write_its_own_verify_reads_slower_is_taken_back(small_repo, tmp_path):
    """auto's verify is the fresh confirmation of what it wrote: a value under which real
    git is slower (here: fails) is taken back at once, through the same safe write, and
    the output says so; the repository's config is as before."""
    from tests.test_registry import _git_tune, _plugin_key
    repo, env, config_before = _plugin_key(tmp_path, small_repo, "loser", LOSER_MODULE,
                                           LOSER_TOML)
    env["GIT_TUNE_STATE_DIR"] = str(tmp_path / "state")
    proc = _git_tune("auto", "--repo", str(repo), "--scope", "local", "--budget", "3",
                     "--yes", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "taken back" in proc.stdout and "core.abbrev" in proc.stdout, proc.stdout
    assert "undo:" not in proc.stdout
    assert (repo / ".git" / "config").read_bytes() == config_before
    assert not (repo / ".git" / "git-tune.gitconfig").exists()
    assert subprocess.run(["git", "-C", str(repo), "status"], capture_output=True,
                          env=env).returncode == 0


def test_sigterm_during_verify_after_a_write_leaves_a_whole_config_and_an_exact_revert(
        toy_env, isolated_git):
    """SIGTERM (a CI job cancelled, a hook's timeout) while auto's verification runs, after
    its write: it stops as Ctrl-C does, says the write happened and how to undo it, leaves
    git's config whole and no scratch file, and `revert` then gives back the bytes the
    user had."""
    from git_tune.probes.scratch import PREFIX
    repo, env = toy_env
    config = isolated_git / ".gitconfig"
    config.write_text("# my own settings\n[user]\n\tname = Ada\n")
    before = config.read_bytes()
    proc = subprocess.Popen(GIT_TUNE + ["auto", "--yes", "--repo", str(repo), "--scope",
                                        "global", "--budget", "5", "--runs", "100"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = b""
    while b"verifying with real git" not in err:      # said after the write, before timing
        line = proc.stderr.readline()
        assert line, (err + proc.stderr.read()).decode(errors="replace")
        err += line
    proc.send_signal(signal.SIGTERM)
    out, rest = proc.communicate(timeout=60)
    err = (err + rest).decode(errors="replace")
    assert proc.returncode == 130, err
    assert "interrupted after writing to scope global" in err, err
    assert "git-tune revert --scope global" in err, err
    # git reads the config whole, the value written in it.
    got = subprocess.run(["git", "-C", str(repo), "config", "--get", "toy.knob"], env=env,
                         capture_output=True, text=True)
    assert (got.returncode, got.stdout.strip()) == (0, "true"), got
    for d in (repo, isolated_git / "state", env["GIT_TUNE_CACHE_DIR"]):
        for root, names, files in os.walk(d):
            assert not any(n.startswith(PREFIX) for n in names + files), root
    undo = subprocess.run(GIT_TUNE + ["revert", "--scope", "global"], env=env,
                          capture_output=True, text=True)
    assert undo.returncode == 0, undo.stderr
    assert config.read_bytes() == before
