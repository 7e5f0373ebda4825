"""Hostile and broken input: profiles are untrusted data, every write is exactly
reversible, and no input ends in a traceback. Real git, real files, throw-away HOME."""
import contextlib
import json
import os
import random
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import traceback

import pytest
from click.testing import CliRunner

from git_tune import engine
from git_tune.advisor.write import configwrite, scopes
from git_tune.advisor.fleet import profiles
from git_tune import repogen
from git_tune.cli import cli
from git_tune.errors import EngineError, Locked
from git_tune.models import catalogue
from git_tune.probes.scratch import PREFIX
from git_tune.probes import repo as repo_probe
from git_tune.probes.report import probe
from tests import cgroups
from tests.conftest import git_version_of

GIT_TUNE = [sys.executable, "-m", "git_tune"]
USER_CONFIG = "# my own settings\n[user]\n\tname = Ada\n[alias]\n\tst = status -sb\n"


@pytest.fixture
def home(isolated_git, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    (isolated_git / ".gitconfig").write_text(USER_CONFIG)
    return isolated_git


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _traceback_of(res) -> str:
    return "".join(traceback.format_exception(*res.exc_info)) if res.exc_info else ""


def no_traceback(res, *codes):
    """The command ended with one of the expected exit codes and a sentence, not a bug."""
    assert res.exit_code in codes, (res.exit_code, res.output, _traceback_of(res))
    assert res.exit_code == 0 or isinstance(res.exception, SystemExit), _traceback_of(res)
    assert "Traceback" not in res.output


def config_list(cwd=None):
    proc = subprocess.run(["git", "config", "--list"], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def git_get(key, cwd=None):
    p = subprocess.run(["git", "config", "--get", key], cwd=cwd, stdout=subprocess.PIPE, text=True)
    return p.stdout.strip() or None


def snapshot(root):
    """Every file below root (links as links), byte for byte; git-tune's state excluded."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("state", ".cache")]
        for name in files:
            path = os.path.join(dirpath, name)
            out[path] = ("link", os.readlink(path)) if os.path.islink(path) else open(path, "rb").read()
    return out


def profile_for(repo, settings, measurements=None, **overrides):
    data = {"schema": profiles.SCHEMA, "class": profiles.host_class(probe(str(repo))),
            "settings": settings, "measurements": measurements or {}, "workload": "mixed",
            "provenance": {"fingerprint": "test", "created": 0, "hosts": 1}}
    data.update(overrides)
    return data


# 1. A profile cannot inject config.

INJECTION = "checkout\n[core]\n\tfsmonitor = touch /tmp/git-tune-pwned\n#"


@pytest.mark.parametrize("where", ["workload", "fingerprint"])
def test_profile_text_with_newlines_is_refused(home, small_repo, tmp_path, where):
    m = {"speedup": 1.4, "low": 1.2, "high": 1.6, "runs": 5, "workload": "checkout"}
    data = profile_for(small_repo, {"checkout.workers": "4"}, {"checkout.workers": m})
    if where == "workload":
        m["workload"] = INJECTION
    else:
        data["provenance"]["fingerprint"] = INJECTION
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    before = snapshot(home)
    res = invoke("apply", path, "--repo", small_repo)
    no_traceback(res, 2)
    assert "control characters" in res.output
    assert snapshot(home) == before


def test_profile_file_name_reaches_only_a_comment(home, small_repo, tmp_path, monkeypatch):
    # A name may hold anything but '/' and NUL: it is rendered, escaped, into a comment.
    # On a narrow terminal, where people's text is wrapped and the diff is not.
    monkeypatch.setenv("COLUMNS", "60")
    path = tmp_path / "p\n[core]\n\tfsmonitor = touch pwned\n.json"
    path.write_text(json.dumps(profile_for(small_repo, {"checkout.workers": "4"})))
    # --force: apply re-probes the storage, and a loaded machine's disk can be classed
    # differently from the probe the profile was made from; the rendering is the test.
    diff = invoke("apply", path, "--repo", small_repo, "--check", "--diff", "--force")
    no_traceback(diff, 6)
    res = invoke("apply", path, "--repo", small_repo, "--force")
    no_traceback(res, 0)
    include = home / ".config" / "git-tune" / "global.gitconfig"
    listed = subprocess.run(["git", "config", "--file", include, "--list"], stdout=subprocess.PIPE,
                            text=True, check=True).stdout.split()
    assert listed == ["checkout.workers=4"]
    assert git_get("core.fsmonitor", cwd=small_repo) is None
    # The diff showed exactly the bytes that were written (but the time in the header).
    added = [l[1:] for l in diff.output.splitlines() if l.startswith("+") and not l.startswith("+++")]
    written = include.read_text().splitlines() + (home / ".gitconfig").read_text().splitlines()
    strip_time = lambda lines: [l for l in lines if not l.startswith("# Written by")]
    assert set(strip_time(added)) <= set(strip_time(written))
    assert all(l in added for l in strip_time(include.read_text().splitlines()))


def test_hostile_provenance_stays_in_comments():
    hostile = configwrite.Provenance("2.39\n[core]\nfsmonitor=x", "fp\r\n[a]b=c", "ssd\u2028[x]",
                                     "/r\n[alias]\nst=!sh", 5, {"checkout.workers": "x\n[pack]\nthreads=1"})
    text = configwrite.render({"checkout.workers": "4"}, hostile)
    proc = subprocess.run(["git", "config", "--file", "-", "--list"], input=text,
                          stdout=subprocess.PIPE, text=True, check=True)
    assert proc.stdout.split() == ["checkout.workers=4"]


@pytest.mark.parametrize("shape", [
    [], "x", {"schema": profiles.SCHEMA}, {"schema": profiles.SCHEMA, "class": []},
    {"schema": profiles.SCHEMA, "class": {}, "settings": {}},
    {"schema": profiles.SCHEMA, "class": {f: "x" for f in profiles.CLASS_FIELDS}, "settings": []},
    {"schema": profiles.SCHEMA, "class": {f: 1 for f in profiles.CLASS_FIELDS}, "settings": {}},
    {"schema": profiles.SCHEMA, "class": dict({f: "x" for f in profiles.CLASS_FIELDS}, git="2.39"),
     "settings": {}},
    {"schema": profiles.SCHEMA, "class": dict({f: "x" for f in profiles.CLASS_FIELDS}, git=">=2.39.0"),
     "settings": {"checkout.workers": [4]}},
    {"schema": profiles.SCHEMA, "class": dict({f: "x" for f in profiles.CLASS_FIELDS}, git=">=2.39.0"),
     "settings": {"checkout.workers": "4"}, "measurements": {"checkout.workers": {"speedup": "fast"}}},
    {"schema": profiles.SCHEMA, "class": dict({f: "x" for f in profiles.CLASS_FIELDS}, git=">=2.39.0"),
     "settings": {"feature.manyFiles": "true"}},
    {"schema": profiles.SCHEMA, "class": dict({f: "x" for f in profiles.CLASS_FIELDS}, git=">=2.39.0"),
     "settings": {"core.fsmonitor": "true"}},
    {"schema": profiles.SCHEMA, "class": dict({f: "x" for f in profiles.CLASS_FIELDS}, git=">=2.39.0"),
     "settings": {}, "provenance": {"hosts": float("nan")}},
], ids=lambda s: json.dumps(s)[:40])
def test_malformed_profiles_are_clear_errors(home, small_repo, tmp_path, shape):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(shape))
    for args in (["apply", path, "--repo", small_repo], ["fleet", "merge", path]):
        no_traceback(invoke(*args), 2)


# 2. Values: validated, written canonically, and accepted by git itself.

def test_values_python_accepts_but_git_does_not_are_refused_or_canonical(home):
    for bad in ("1_0", "\uff14", "４", "4.0", "0x4", "", "99999999999999999999"):
        no_traceback(invoke("set", f"checkout.workers={bad}"), 2)
    for messy, canonical in (("+4", "4"), (" 4", "4"), ("04", "4")):
        no_traceback(invoke("set", f"checkout.workers={messy}"), 0)
        assert git_get("checkout.workers") == canonical
    assert "workers = 4\n" in (home / ".config" / "git-tune" / "global.gitconfig").read_text()


def test_keys_git_tune_never_writes_are_refused(home, small_repo, tmp_path):
    res = invoke("set", "feature.manyFiles=true")
    no_traceback(res, 2)
    assert "never writes" in res.output
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile_for(small_repo, {"feature.manyFiles": "true"})))
    no_traceback(invoke("apply", path, "--repo", small_repo), 2)


def test_a_profile_cannot_carry_a_per_repository_key(home, small_repo, tmp_path):
    """core.fsmonitor starts a daemon in every repository that reads it: a fleet profile
    carrying it is refused, and nothing is written."""
    before = snapshot(home)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile_for(small_repo, {"core.fsmonitor": "true"})))
    res = invoke("apply", path, "--repo", small_repo, "--force")
    no_traceback(res, 2)
    assert "belongs to one repository" in res.output
    assert snapshot(home) == before


def parsing_command(key, repo, tmp_path):
    """A git command that really parses `key` (git status does not parse them all), with
    what it needs; run with the value in force, it fails on a value git cannot parse."""
    victim = sorted(p for p in os.listdir(repo) if os.path.isfile(os.path.join(repo, p)))[0]
    if key.startswith("checkout."):
        os.unlink(os.path.join(repo, victim))          # parallel-checkout.c reads both keys
        return ["checkout", "--", victim], {}
    if key == "index.version":                          # read when a new index is written
        return ["read-tree", "HEAD"], {"GIT_INDEX_FILE": str(tmp_path / "new-index")}
    if key == "index.skipHash":
        return ["update-index", "--force-write-index"], {}
    if key == "index.threads":
        return ["ls-files"], {}
    if key in ("pack.threads", "pack.windowMemory", "pack.deltaCacheSize"):  # pack-objects
        return ["repack", "-a", "-d", "-q"], {}
    if key.startswith("gc."):                           # gc_config reads every gc key
        return ["gc", "--quiet"], {}
    return ["status", "--porcelain"], {}


def values_to_try(key):
    if key.type == "bool":
        return ["true", "false", "yes", "0"]
    if key.type == "enum":
        return list(key.values)
    if key.type == "size":
        return [catalogue.format_size(key.min), catalogue.format_size(key.max), "64M"]
    out = [str(key.min), str(key.max), f"+{key.max}", f" {key.min}"]
    out += ["true", "false"] if key.type == "bool-or-int" else []
    # "As many as online CPUs" is refused (test_online_cpus_values_are_never_written).
    return [v for v in out if v.strip().lstrip("+").lower() not in key.online_cpus]


@pytest.mark.parametrize("name", sorted(k.name for k in catalogue.catalogue().values()
                                        if k.writable and k.online_cpus))
def test_online_cpus_values_are_never_written(home, small_repo, tmp_path, name):
    """Git's online_cpus() ignores cgroup quotas: a value meaning "all of them" is refused
    by `set` and in a profile, with the file untouched."""
    key = catalogue.lookup(name)
    config = small_repo / ".git" / "config"
    before = config.read_bytes()
    for value in key.online_cpus:
        res = invoke("set", f"{name}={value}", "--scope", "local", "--repo", small_repo)
        no_traceback(res, 2)
        assert "online_cpus" in res.output and "quota" in res.output
        assert config.read_bytes() == before
        path = tmp_path / "p.json"
        path.write_text(json.dumps(profile_for(small_repo, {name: value})))
        res = invoke("apply", str(path), "--scope", "local", "--repo", small_repo, "--force")
        no_traceback(res, 2)
        assert "online_cpus" in res.output
        assert config.read_bytes() == before


@pytest.mark.parametrize("name", sorted(k.name for k in catalogue.catalogue().values() if k.writable))
def test_every_writable_value_is_accepted_by_git(home, few_files_repo, tmp_path, name, any_git):
    with contextlib.ExitStack() as stack:
        _accepted_by_git(home, few_files_repo, tmp_path, name, any_git, stack)


def _accepted_by_git(home, source, tmp_path, name, any_git, stack):
    key = catalogue.lookup(name)
    if not key.available(git_version_of(any_git)):
        pytest.skip(f"{any_git} does not read {name}")
    repo = tmp_path / "r"
    shutil.copytree(source, repo)
    if name == "core.fsmonitor":   # git status would start a daemon: never leave it running
        request_stop = lambda: subprocess.run([any_git, "fsmonitor--daemon", "stop"], cwd=repo,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(request_stop)
    for value in values_to_try(key):
        res = invoke("--git", any_git, "set", f"{name}={value}", "--scope", "local", "--repo", repo)
        no_traceback(res, 0)
        args, env = parsing_command(name, repo, tmp_path)
        proc = subprocess.run([any_git, *args], cwd=repo, env=dict(os.environ, **env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 0 and "bad" not in proc.stderr, (name, value, proc.stderr)
    # The command really parses the key: a value git cannot parse makes it fail.
    if key.type != "enum" or name == "index.version":
        args, env = parsing_command(name, repo, tmp_path)
        bad = subprocess.run([any_git, "-c", f"{name}=1_0", *args], cwd=repo,
                             env=dict(os.environ, **env), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert bad.returncode != 0 or "1_0" in bad.stderr, (name, bad.stderr)


# 3. revert is exact after a kill at any point of the first write.

@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed (tools/setup-system)")
@pytest.mark.parametrize("command,syscall", [("set", "rename"), ("set", "fsync"), ("set", "write"),
                                             ("apply", "rename")])
def test_kill_at_every_point_of_the_first_write_then_revert_is_exact(home, small_repo, tmp_path,
                                                                     command, syscall):
    """strace kills the process at its Nth `syscall` (counted per process: git-tune's own
    and git's), for every N until a run gets through; after each kill, a later write and
    revert must give back the files byte for byte."""
    pristine = snapshot(home)
    if command == "set":
        args = ["set", "checkout.workers=4"]
    else:
        profile = tmp_path / "p.json"
        profile.write_text(json.dumps(profile_for(small_repo, {"checkout.workers": "4"})))
        # --force: the class check re-probes the storage, whose class a loaded 2-core
        # machine can flip (ssd/hdd by fsync time); this test is about the write path.
        args = ["apply", str(profile), "--repo", str(small_repo), "--force"]
    kills = 0
    for n in range(1, 40):
        proc = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscall}",
                               "-e", f"inject={syscall}:signal=KILL:when={n}", *GIT_TUNE, *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode == 0:
            break
        kills += 1
        assert proc.returncode in (5, -signal.SIGKILL, 128 + signal.SIGKILL), proc.stderr
        config_list()
        no_traceback(invoke("set", "checkout.workers=6", "index.threads=2"), 0)
        assert git_get("checkout.workers") == "6"
        no_traceback(invoke("revert", "--scope", "global"), 0)
        assert snapshot(home) == pristine, f"not exact after a kill at {syscall} {n}"
        assert git_get("checkout.workers") is None
    else:
        pytest.fail(f"{command} never got through 40 {syscall} calls")
    assert kills >= 3, f"only {kills} {syscall} points"


# 4. Links stay links.

@pytest.mark.parametrize("scope", ["global", "file"])
def test_symlinked_config_files_stay_links(home, tmp_path, scope):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    if scope == "global":
        (dotfiles / "gitconfig").write_text(USER_CONFIG)
        (home / ".gitconfig").unlink()
        os.symlink(dotfiles / "gitconfig", home / ".gitconfig")
        link, target, spec = home / ".gitconfig", dotfiles / "gitconfig", "global"
    else:
        (dotfiles / "tuned.gitconfig").write_text("[core]\n\tpreloadIndex = true\n")
        os.symlink(dotfiles / "tuned.gitconfig", home / "tuned.gitconfig")
        link, target, spec = home / "tuned.gitconfig", dotfiles / "tuned.gitconfig", f"file:{home}/tuned.gitconfig"
    before = target.read_bytes()
    no_traceback(invoke("set", "checkout.workers=4", "--scope", spec), 0)
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert target.read_bytes() != before
    no_traceback(invoke("revert", "--scope", spec), 0)
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert target.read_bytes() == before


# 5. No traceback, whatever the repository.

def make_repo(path, files=30, commit=True):
    repogen.generate(str(path), repogen.RepoShape(depth=1, width=3, files=files // 3),
                     second_commit_changes=0)
    if not commit:
        shutil.rmtree(path / ".git")
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    return path


def test_odd_repositories_give_results_or_clear_errors(home, tmp_path):
    odd_name = make_repo(tmp_path / "odd")
    (odd_name / os.fsdecode(b"caf\xe9-latin1.txt")).write_bytes(b"x\n")
    repogen.git(odd_name, "add", "-A")
    repogen.git(odd_name, *repogen._IDENTITY, "commit", "-qm", "latin-1 name")
    newline = make_repo(tmp_path / "new\nline")
    unborn = make_repo(tmp_path / "unborn", commit=False)
    for repo in (odd_name, newline, unborn):
        no_traceback(invoke("probe", "--repo", repo, "--json"), 0)
        no_traceback(invoke("calibrate", "--repo", repo, "--budget", "2", "--json"), 0, 2)
        no_traceback(invoke("verify", "--repo", repo, "--set", "checkout.workers=2",
                            "--workload", "status"), 0, 2)


def test_submodules_and_conflicts_are_not_files_a_trial_writes(home, tmp_path):
    """A submodule's entry (an uninitialised one is an empty directory) and a path in
    conflict (three stages, no blob git would write) are in the index but are not files
    git writes: verify's whole tree and calibrate's parts leave them out."""
    repo = make_repo(tmp_path / "with-submodule")

    def git(*args, stdin=None):
        return subprocess.run(["git", "-C", str(repo), *args], input=stdin, check=True,
                              stdout=subprocess.PIPE, text=True).stdout
    head = git("rev-parse", "HEAD").strip()
    (repo / "mod").mkdir()
    git("update-index", "--add", "--cacheinfo", f"160000,{head},mod")
    git(*repogen._IDENTITY, "commit", "-qm", "a submodule")
    blob = git("hash-object", "-w", "--stdin", stdin="theirs\n").strip()
    path = git("ls-files").split()[0]
    git("update-index", "--index-info", stdin=f"0 {'0' * 40}\t{path}\n" + "".join(
        f"100644 {blob} {stage}\t{path}\n" for stage in (1, 2, 3)))
    listed = repo_probe.tracked_sample(repo_probe.locate(str(repo)), n=10 ** 9)
    assert "mod" not in listed and path not in listed and listed
    index = (repo / ".git" / "index").read_bytes()
    no_traceback(invoke("verify", "--repo", repo, "--set", "checkout.workers=2"), 0, 2)
    no_traceback(invoke("calibrate", "--repo", repo, "--budget", "4", "--json"), 0, 2)
    assert (repo / ".git" / "index").read_bytes() == index


def test_a_tree_of_submodules_only_has_no_clone_row(home, tmp_path):
    repo = tmp_path / "submodules-only"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "mod").mkdir()
    subprocess.run(["git", "-C", str(repo), "update-index", "--add", "--cacheinfo",
                    f"160000,{'1' * 40},mod"], check=True)
    subprocess.run(["git", "-C", str(repo), *repogen._IDENTITY, "commit", "-qm", "s"],
                   check=True)
    res = invoke("verify", "--repo", repo, "--set", "checkout.workers=2")
    no_traceback(res, 0, 2)
    assert "clone not timed: the tree has no file git writes" in res.output


def test_paths_that_are_not_utf8_reach_git_as_they_are(home, tmp_path):
    """A repository in a directory whose name is not UTF-8, holding a file whose name is
    not either (git keeps bytes): the timed checkout's pathspec file, a part's alternates,
    the cache key, the host fingerprint and verify's trace2 files carry the bytes, and
    set, verify and revert work there (each crashed before)."""
    from git_tune.advisor.measure import gitbench
    from git_tune.probes.repo import locate
    repo = make_repo(tmp_path / os.fsdecode(b"we\xffird"), files=150)
    odd = os.fsdecode(b"caf\xe9.txt")
    (repo / odd).write_bytes(b"x\n")
    repogen.git(repo, "add", "-A")
    repogen.git(repo, *repogen._IDENTITY, "commit", "-qm", "latin-1 name")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ws = gitbench.Workspace(locate(str(repo)), str(scratch))
    clone = ws.clone()
    gitbench.CheckoutWorkload(clone, [odd], str(scratch)).run({})
    assert os.path.exists(os.path.join(clone, odd))
    part = ws.part(40)
    gitbench.WholeTreeWrite(part.worktree, part.paths, str(scratch)).run({})
    no_traceback(invoke("recommend", "--repo", repo, "--budget", "3"), 0)
    before = (repo / ".git" / "config").read_bytes()
    no_traceback(invoke("set", "checkout.workers=2", "--scope", "local", "--repo", repo), 0)
    no_traceback(invoke("verify", "--repo", repo, "--runs", "5", "--workload", "status"), 0)
    no_traceback(invoke("revert", "--scope", "local", "--repo", repo), 0)
    assert (repo / ".git" / "config").read_bytes() == before


@pytest.mark.parametrize("budget", ["nan", "inf", "-1", "1e-9", "abc", "1e300"])
def test_impossible_budgets_are_usage_errors(small_repo, budget):
    for cmd in ("calibrate", "auto", "recommend"):
        res = invoke(cmd, "--repo", small_repo, "--budget", budget)
        no_traceback(res, 2)


def corrupt_copies(small_repo, tmp_path):
    data = (small_repo / ".git" / "index").read_bytes()
    rng = random.Random(7)
    yield "truncated", data[:500]
    yield "bad signature", b"XXXX" + data[4:]
    yield "bad version", data[:4] + b"\0\0\0\x09" + data[8:]
    flipped = bytearray(data)
    for _ in range(8):
        flipped[rng.randrange(12, len(data) - 20)] ^= 0xFF
    yield "bit flips", bytes(flipped)
    yield "empty", b""


def test_corrupt_indexes_probe_exits_0_and_the_rest_say_why(home, small_repo, tmp_path):
    for name, data in corrupt_copies(small_repo, tmp_path):
        repo = tmp_path / name.replace(" ", "-")
        shutil.copytree(small_repo, repo)
        (repo / ".git" / "index").write_bytes(data)
        res = invoke("probe", "--repo", repo)
        no_traceback(res, 0)
        # git does not check the index checksum on reads: where it can read the entries,
        # timing it is fine; where it cannot, the command says why.
        no_traceback(invoke("calibrate", "--repo", repo, "--budget", "2"), 0, 2, 4)
        no_traceback(invoke("verify", "--repo", repo, "--set", "checkout.workers=2",
                            "--workload", "status"), 0, 2, 4)
        assert (repo / ".git" / "index").read_bytes() == data  # never "repaired" behind the user


# 6. Exit codes that say what happened.

def test_git_missing_is_exit_4(home, small_repo, monkeypatch, tmp_path):
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    monkeypatch.setenv("PATH", str(bare_path))
    for args in (["probe", "--repo", small_repo], ["set", "checkout.workers=4"],
                 ["calibrate", "--repo", small_repo, "--budget", "2"]):
        res = invoke(*args)
        assert res.exit_code in (0, 4) if args[0] == "probe" else res.exit_code == 4, res.output
        if res.exit_code == 4:
            assert "git is not installed" in res.output


@pytest.mark.parametrize("broken", ["[core\n\tpreloadIndex = true\n", "[include]\n\tpath = ~/.gitconfig\n"])
def test_a_broken_gitconfig_is_git_failing_not_git_missing(home, small_repo, broken):
    (home / ".gitconfig").write_text(broken)
    before = snapshot(home)
    for args in (["set", "checkout.workers=4"], ["calibrate", "--repo", small_repo, "--budget", "2"]):
        res = invoke(*args)
        no_traceback(res, 4)
        assert "not installed" not in res.output
    assert snapshot(home) == before


def test_a_failed_write_rolls_back_only_what_it_changed_and_keeps_the_cause(home, monkeypatch):
    no_traceback(invoke("set", "checkout.workers=4"), 0)
    include = home / ".config" / "git-tune" / "global.gitconfig"
    before = snapshot(home)
    stamp = (home / ".gitconfig").stat().st_mtime_ns
    # The include file cannot be replaced now: root ignores directory permissions, but
    # not the immutable attribute.
    immutable = os.geteuid() == 0 and subprocess.run(
        ["chattr", "+i", str(include)], stderr=subprocess.DEVNULL).returncode == 0
    if not immutable:
        os.chmod(include.parent, 0o500)
        if os.access(include.parent, os.W_OK):
            pytest.skip("cannot make the include file unwritable here")
    try:
        res = invoke("set", "checkout.workers=6")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(include)], check=True)
        else:
            os.chmod(include.parent, 0o755)
    no_traceback(res, 5)
    assert "permission denied" in res.output or "not permitted" in res.output
    assert snapshot(home) == before
    assert (home / ".gitconfig").stat().st_mtime_ns == stamp   # not rewritten by the rollback
    no_traceback(invoke("revert", "--scope", "global"), 0)     # the first write stays revertable
    assert (home / ".gitconfig").read_text() == USER_CONFIG


def set_plan(scope, settings, prov):
    """A plan as `git-tune set` makes it: these keys only."""
    return configwrite.plan(scope, settings, prov, writer=configwrite.SET,
                            touches=tuple(settings))


def test_a_write_between_plan_and_apply_is_kept(home):
    """Another writer (the user, or a second git-tune set) changes the config after the
    plan was shown: apply makes the plan again from the file as it is now, so neither
    their change is undone nor include.path added twice."""
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.39.5", "manual", "manual")
    first = set_plan(scope, {"checkout.workers": "4"}, prov)
    second = set_plan(scope, {"checkout.workers": "6"}, prov)
    assert first.files.keys() == second.files.keys() >= {str(home / ".gitconfig")}
    configwrite.apply(first, prov)
    with open(home / ".gitconfig", "a") as f:
        f.write("[color]\n\tui = never\n")
    configwrite.apply(second, prov)
    assert git_get("color.ui") == "never" and git_get("checkout.workers") == "6"
    paths = subprocess.run(["git", "config", "--get-all", "include.path"], stdout=subprocess.PIPE,
                           text=True).stdout.split()
    assert paths == [str(scope.include_file)]
    no_traceback(invoke("revert", "--scope", "global"), 0)
    assert (home / ".gitconfig").read_text() == USER_CONFIG + "[color]\n\tui = never\n"


def test_a_write_during_the_plan_is_kept(home, monkeypatch):
    """The same race inside plan(): another git-tune writes after the plan has read the
    config's include.path values and before it takes its basis. The basis is read first,
    so apply still sees the plan as stale and include.path is never added twice (this
    added it twice under four concurrent `set` runs)."""
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.39.5", "manual", "manual")
    other = set_plan(scope, {"index.threads": "2"}, prov)
    with_include = configwrite._with_include

    def another_writer_meanwhile(config_file, include_file):
        monkeypatch.setattr(configwrite, "_with_include", with_include)
        configwrite.apply(other, prov)
        return with_include(config_file, include_file)
    monkeypatch.setattr(configwrite, "_with_include", another_writer_meanwhile)
    mine = set_plan(scope, {"checkout.workers": "6"}, prov)
    configwrite.apply(mine, prov)
    paths = subprocess.run(["git", "config", "--get-all", "include.path"], stdout=subprocess.PIPE,
                           text=True).stdout.split()
    assert paths == [str(scope.include_file)]
    assert git_get("checkout.workers") == "6" and git_get("index.threads") == "2"


def test_a_whole_scope_write_that_lost_the_race_says_so(home):
    """Two `auto --yes` on one scope: the one that applies second was planned from the
    values before the first wrote. It writes nothing and says it lost the race, so the
    values it would report are never silently not in force."""
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.39.5", "fp", "ssd")
    first = configwrite.plan(scope, {"checkout.workers": "4", "index.threads": "2"}, prov)
    second = configwrite.plan(scope, {"checkout.workers": "8"}, prov)
    configwrite.apply(first, prov)
    written = (home / ".config" / "git-tune" / "global.gitconfig").read_bytes()
    with pytest.raises(Locked, match="another git-tune wrote"):
        configwrite.apply(second, prov)
    assert (home / ".config" / "git-tune" / "global.gitconfig").read_bytes() == written
    assert git_get("checkout.workers") == "4" and git_get("index.threads") == "2"


# 7. includeIf conditions and paths with quotes, backslashes and glob characters.

def test_per_repository_blocks_match_only_their_repository(home, tmp_path):
    parent = tmp_path / 'we"ird\\na*me'
    a, b = parent / "a", parent / "ab"
    for r in (a, b):
        r.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(r)], check=True)
    scope = scopes.resolve("global")
    prov = configwrite.Provenance("2.39.5", "test", "local-ssd")
    plan = configwrite.plan(scope, {}, prov, per_repo={str(a / ".git"): {"index.threads": "4"}})
    configwrite.apply(plan, prov)
    config_list()
    assert git_get("index.threads", cwd=a) == "4"
    assert git_get("index.threads", cwd=b) is None
    assert configwrite.read_per_repo(scope.include_file) == {str(a / ".git"): {"index.threads": "4"}}
    from git_tune.advisor.write.revert import revert
    revert(scope)


# 8. Smaller: modes, own includes, backups, scratch, the engine's extensions.

def test_files_and_directories_follow_the_umask(home):
    old = os.umask(0o077)
    try:
        no_traceback(invoke("set", "checkout.workers=4"), 0)
    finally:
        os.umask(old)
    include = home / ".config" / "git-tune" / "global.gitconfig"
    assert stat.S_IMODE(include.stat().st_mode) == 0o600
    assert stat.S_IMODE(include.parent.stat().st_mode) == 0o700
    for path in (home / "state" / "applied.json",):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    no_traceback(invoke("revert", "--scope", "global"), 0)
    old = os.umask(0)
    try:
        no_traceback(invoke("set", "checkout.workers=4"), 0)
    finally:
        os.umask(old)
    assert not stat.S_IMODE(include.stat().st_mode) & 0o022
    assert not stat.S_IMODE(include.parent.stat().st_mode) & 0o022


def test_git_tunes_own_global_values_are_no_conflict_for_local(home, small_repo, tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(small_repo, repo)
    no_traceback(invoke("set", "checkout.workers=4"), 0)
    res = invoke("set", "checkout.workers=6", "--scope", "local", "--repo", repo, "--json")
    no_traceback(res, 0)
    assert json.loads(res.stdout)["plan"]["conflicts"] == []
    assert git_get("checkout.workers", cwd=repo) == "6"


def test_backups_are_pruned(home):
    for i in range(25):
        no_traceback(invoke("set", f"checkout.workers={2 + i % 5}"), 0)
    backups = os.listdir(home / "state" / "backups")
    assert len(backups) <= 11
    no_traceback(invoke("revert", "--scope", "global"), 0)
    assert (home / ".gitconfig").read_text() == USER_CONFIG


def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_scratch_of_dead_processes_is_removed(home, small_repo, tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(small_repo, repo)
    stale = repo / ".git" / f"{PREFIX}{dead_pid()}-abcd"
    (stale / "clone").mkdir(parents=True)
    alive = repo / ".git" / f"{PREFIX}{os.getppid()}-live"
    alive.mkdir()
    outside = tmp_path / "plain"
    outside.mkdir()
    no_traceback(invoke("probe", "--repo", repo), 0)
    assert not stale.exists() and alive.exists()
    res = invoke("probe", "--repo", outside)
    no_traceback(res, 0)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(PREFIX)]


def test_kill_leaves_scratch_that_the_next_run_removes(home, small_repo, tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(small_repo, repo)
    proc = subprocess.Popen(GIT_TUNE + ["calibrate", "--repo", str(repo), "--budget", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if any(n.startswith(PREFIX) for n in os.listdir(repo / ".git")):
            break
        proc.wait(timeout=0.05) if proc.poll() is not None else None
        import time
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    no_traceback(invoke("probe", "--repo", repo), 0)
    assert not [n for n in os.listdir(repo / ".git") if n.startswith(PREFIX)]


def with_extension(index: bytes, signature: bytes, payload: bytes = b"") -> bytes:
    import hashlib
    body = index[:-20] + signature + len(payload).to_bytes(4, "big") + payload
    return body + hashlib.sha1(body).digest()


def git_reads(tmp_path, data):
    """(git's exit status, entries git ls-files listed) for an index file's bytes."""
    path = tmp_path / "index.probe"
    path.write_bytes(data)
    proc = subprocess.run(["git", "ls-files", "--stage", "-z"], cwd=tmp_path,
                          env=dict(os.environ, GIT_INDEX_FILE=str(path)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc.returncode, proc.stdout.count(b"\0")


def test_engine_refuses_unknown_required_extensions_as_git_does(small_repo, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    index = (small_repo / ".git" / "index").read_bytes()
    for signature, git_ok in ((b"ZZZZ", True), (b"abcd", False), (b"link", None)):
        data = with_extension(index, signature)
        ok = git_reads(tmp_path, data)[0] == 0
        if git_ok is not None:
            assert ok == git_ok
        try:
            engine.index_parse(data)
            engine_ok = True
        except EngineError:
            engine_ok = False
        if git_ok is not None:
            assert engine_ok == ok, signature


def test_engine_reads_what_git_reads_on_mutated_indexes(small_repo, tmp_path):
    """Differential: mutate a real index (checksum recomputed, so the parser is what
    decides); where git reads it the engine reads the same number of entries, and where
    git refuses it so does the engine. Two kinds of disagreement are allowed and counted:
    git crashing (SIGSEGV on some damaged extensions: the engine must not crash, and does
    not), and git reading entries past the end of its entry area, which it does without
    a bounds check while the engine refuses ("runs past the end", "truncated")."""
    import hashlib
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    original = (small_repo / ".git" / "index").read_bytes()
    rng = random.Random(11)
    unexplained, crashes, unbounded = [], 0, 0
    for trial in range(150):
        data = bytearray(original[:-20])
        for _ in range(rng.choice((1, 2, 4))):
            data[rng.randrange(8, len(data))] = rng.randrange(256)
        data = bytes(data) + hashlib.sha1(bytes(data)).digest()
        status, git_entries = git_reads(tmp_path, data)
        try:
            engine_entries, reason = engine.index_parse(data).entries, None
        except EngineError as e:
            engine_entries, reason = None, e.message
        if status < 0:
            crashes += 1
        elif status == 0 and reason and ("past the end" in reason or "truncated" in reason):
            unbounded += 1
        elif (status == 0) != (reason is None) or (status == 0 and engine_entries != git_entries):
            unexplained.append((trial, status, git_entries, engine_entries, reason))
    assert not unexplained, unexplained[:5]
    assert crashes + unbounded < 30, (crashes, unbounded)


def test_engine_agrees_with_git_on_the_fuzz_corpus(tmp_path):
    """Every seed of the index fuzzer (real git indexes of every version, and every crash the
    fuzzer found): the engine reads what git reads, entry for entry, and refuses what git
    refuses (git does not check the checksum on reads; the engine is asked not to either)."""
    seeds = os.path.join(os.path.dirname(__file__), "..", "engine", "fuzz", "seeds")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    compared = 0
    for name in sorted(os.listdir(seeds)):
        data = open(os.path.join(seeds, name), "rb").read()
        status, git_entries = git_reads(tmp_path, data)
        try:
            engine_entries, reason = engine.index_parse(data, verify_checksum=False).entries, None
        except EngineError as e:
            engine_entries, reason = None, e.message
        if status < 0 or (status == 0 and reason and ("past the end" in reason or "truncated" in reason)):
            continue   # git crashed, or read past its entries unchecked (see above)
        assert (status == 0) == (reason is None), (name, status, reason)
        if status == 0:
            assert engine_entries == git_entries, name
        compared += 1
    assert compared >= 5


def test_the_agents_look_for_stored_calibrations_skips_what_is_not_a_record(tmp_path,
                                                                            monkeypatch):
    """memo.keys (which repositories have a calibration stored, read hourly by the agent)
    reads regular files only: a FIFO named like a record would block its open, a
    directory or a damaged file is no record."""
    from git_tune.probes import memo
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path))
    memo.save("calibration", "host|2.47.3|/r/.git|10|mixed", {"schema": 1})
    kind = tmp_path / "calibration"
    os.mkfifo(kind / "fifo.json")
    (kind / "damaged.json").write_text("{\"key\": ")
    (kind / "dir.json").mkdir()
    assert memo.keys("calibration") == ["host|2.47.3|/r/.git|10|mixed"]
    assert memo.keys("nothing-stored") == []
    # The git directory is read from between the key's fields, a "|" in its path too.
    from git_tune.advisor.measure import calibrate as cal
    memo.save("calibration", "host|2.47.3|/a|b/.git|10|ci", {"schema": 1})
    assert cal.stored_git_dirs() == {"/r/.git", "/a|b/.git"}


@pytest.mark.parametrize("entry, why", [
    ('type = "int"\ndefault = "1"', "needs a min and a max"),
    ('type = "size"\ndefault = "1m"\nmin = "1k"', "needs a min and a max"),
    ('type = "string"\ndefault = "x"', "is not one of"),
    ('type = "enum"\ndefault = "a"', "needs its values"),
])
def test_a_key_catalogue_the_code_cannot_use_is_a_clear_error(tmp_path, entry, why):
    """A plug-in's GIT_TUNE_KEYS entry is refused where it loads, with the reason, not
    later with a traceback where a value is checked against a bound it lacks."""
    toml = tmp_path / "keys.toml"
    toml.write_text('[keys."toy.knob"]\n' + entry + '\nsince = "2.0"\naffects = ["status"]\n'
                    'measured_by = "nothing"\nfacts = "a test key"\n')
    proc = subprocess.run(["git-tune", "set", "toy.knob=2", "--scope", f"file:{tmp_path}/config"],
                          capture_output=True, text=True,
                          env=dict(os.environ, GIT_TUNE_KEYS=str(toml)))
    assert proc.returncode == 2, proc.stderr
    assert "not a valid key catalogue" in proc.stderr and why in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "config").exists()


# Run in a group of three tasks, two of them sleeps the test holds: git must wait for one.
# It says when it is ready and starts its clock when the test says the sleeps hold the
# group, not when it starts: a loaded host's interpreter start can outlast a short sleep.
PID_LIMIT_SCRIPT = """
import subprocess, sys, time
from git_tune import git
from git_tune.errors import GitError
print("ready", flush=True)
sys.stdin.readline()
started = time.monotonic()
try:
    proc = git.start(["git", "--version"], stdout=subprocess.DEVNULL)
    proc.wait()
    print("ran", proc.returncode, round(time.monotonic() - started, 2))
except GitError as e:
    print("refused", e)
"""


@pytest.mark.parametrize("hold", [0.5, 30])
def test_a_pid_limit_reached_for_a_moment_delays_git_and_one_that_stays_is_named(hold):
    why = cgroups.unavailable(pids=True)
    if why:
        pytest.skip(why)
    with cgroups.group(pids_max=3) as g:
        script = subprocess.Popen([sys.executable, "-c", PID_LIMIT_SCRIPT], preexec_fn=g.enter,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        held: list[subprocess.Popen] = []
        reapers: list[threading.Thread] = []
        try:
            # Bounded as the run was: an interpreter that never says so fails, not hangs.
            assert select.select([script.stdout], [], [], 60)[0], "the script never started"
            assert script.stdout.readline() == "ready\n"
            held = [subprocess.Popen(["sleep", str(hold)], preexec_fn=g.enter) for _ in range(2)]
            # Reaped as they end: a zombie holds its task until its parent waits for it.
            reapers = [threading.Thread(target=p.wait) for p in held]
            for r in reapers:
                r.start()
            out, err = script.communicate("go\n", timeout=60)
        finally:
            script.kill()
            script.wait()
            for p in held:
                p.kill()
            for r in reapers:
                r.join()
    assert script.returncode == 0, err
    said = out.split()
    if hold < 1:
        # Refused while both sleeps held the group, started once one ended.
        assert said[:2] == ["ran", "0"] and float(said[2]) >= 0.2, out
    else:
        assert said[0] == "refused" and "pids.max" in out, out


_HOLDS_A_RUN = """
import sys
from git_tune.advisor.measure import gitbench, peak
peak.run(["-c", "alias.hold=!echo $$ > held.pid; exec sleep 120", "hold"], ".",
         gitbench.config_env({}), 1 << 40, 300)
"""


def test_a_measured_run_ends_when_git_tune_is_killed_outright(tmp_path):
    """Killed outright (SIGKILL, the OOM killer, a runner's kill -9), git-tune cannot
    stop the git it measures; that git and what it started end with it, rather than run
    on with nobody to wait for them."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDS_A_RUN], cwd=tmp_path)
    held = tmp_path / "held.pid"
    pid = None
    try:
        for _ in range(300):
            if held.exists() and held.read_text().strip():
                pid = int(held.read_text())
                break
            time.sleep(0.05)
        assert pid, "the run did not start"
        proc.kill()
        proc.wait()
        for _ in range(200):
            if not _alive(pid):
                break
            time.sleep(0.05)
        assert not _alive(pid), "the measured run outlived git-tune"
    finally:
        proc.kill()
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie, ended and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


_SIGCHLD_IGNORED = """
import json, signal, sys
from git_tune.advisor.measure import gitbench, peak
from git_tune.cli import main
failing = peak.run(["-c", "alias.fail=!exit 3", "fail"], ".", gitbench.config_env({}),
                   1 << 30, 60)
try:
    main(["--version"])
except SystemExit:
    pass
print(json.dumps({"rc": failing.returncode, "peak": failing.peak,
                  "reset": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL}))
"""


def test_an_ignored_sigchld_from_a_hook_does_not_hide_gits_exit(tmp_path):
    """A hook or service manager may start git-tune with SIGCHLD ignored, and children
    inherit that: the kernel then reaps each git before its wait, and its exit status
    is lost. A measured run still reports git's own exit and peak, and the command
    line puts SIGCHLD back to its default for every git it runs."""
    out = subprocess.run([sys.executable, "-c", _SIGCHLD_IGNORED], cwd=tmp_path,
                         preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout.splitlines()[-1])
    assert said["rc"] == 3 and said["peak"] > 0 and said["reset"], said
