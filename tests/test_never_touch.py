"""git-tune never acts on the user's repository by accident (issue #29): inside hooks,
where git exports GIT_DIR and GIT_INDEX_FILE, beside concurrent `git config` writes,
with FIFOs and links at tracked paths, in linked worktrees. Real git, real hooks run by
real `git commit`, real repositories. A test says it failed on the code before its fix
only where that was run."""
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

import pytest
from click.testing import CliRunner

from git_tune import repogen
from git_tune.cli import cli

GIT_TUNE = [sys.executable, "-m", "git_tune"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """300 files in 4 directories, two commits 40 files apart."""
    root = tmp_path_factory.mktemp("tpl") / "repo"
    repogen.generate(str(root), repogen.RepoShape(depth=1, width=3, files=75),
                     second_commit_changes=40)
    return root


@pytest.fixture
def home(isolated_git, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    (isolated_git / ".gitconfig").write_text(
        "[user]\n\tname = Ada\n\temail = ada@example.org\n[commit]\n\tgpgsign = false\n")
    return isolated_git


@pytest.fixture
def repo(template, tmp_path):
    dest = tmp_path / "repo"
    shutil.copytree(template, dest, symlinks=True)
    return dest


def git(cwd, *args, env=None, check=True):
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if check:
        # A str, which pytest shows whole (a tuple's repr is cut).
        assert proc.returncode == 0, f"{args}: {proc.stderr}"
    return proc


def snapshot(*roots, skip=()):
    """Every file below the roots, byte for byte (links as links)."""
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in skip]
            for name in files:
                path = os.path.join(dirpath, name)
                if path in skip:
                    continue
                out[path] = (("link", os.readlink(path)) if os.path.islink(path)
                             else hashlib.sha256(open(path, "rb").read()).hexdigest())
    return out


def changed(before, after):
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def hook(repo_git_dir, name, body):
    hooks = os.path.join(repo_git_dir, "hooks")
    os.makedirs(hooks, exist_ok=True)
    path = os.path.join(hooks, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def tune_in_hook(*args, log):
    """A hook line running git-tune as a user's hook would; the hook never fails the
    commit, and the exit code is kept for the test."""
    cmd = " ".join(f"'{a}'" for a in [*GIT_TUNE, *args])
    return f"{cmd} >'{log}' 2>&1; echo $? >'{log}.rc'\nexit 0\n"


def rc_of(log):
    return int(open(f"{log}.rc").read())


# 1. The caller's repository variables never reach git-tune's own git runs.

def test_auto_in_a_pre_commit_hook_of_a_sparse_clone_leaves_the_commit_whole(home, template,
                                                                            tmp_path):
    clone = tmp_path / "sparse"
    git(tmp_path, "clone", "-q", "--sparse", str(template), str(clone))
    git(clone, "sparse-checkout", "set", "dir0", "dir1")
    tracked = len(git(clone, "ls-files").stdout.split())
    log = tmp_path / "hook.log"
    hook(clone / ".git", "pre-commit",
         tune_in_hook("auto", "--scope", "local", "--yes", "--budget", "3", log=log))
    (clone / "dir0" / "file0").write_text("edited\n")
    git(clone, "commit", "-q", "-am", "edit dir0/file0")
    assert rc_of(log) == 0, open(log).read()
    assert git(clone, "show", "--name-only", "--format=", "HEAD").stdout.split() == ["dir0/file0"]
    assert git(clone, "status", "--porcelain").stdout == ""
    assert len(git(clone, "ls-files").stdout.split()) == tracked
    assert git(clone, "config", "core.bare").stdout.strip() == "false"


def test_verify_in_a_pre_commit_hook_leaves_the_commit_whole(home, repo, tmp_path):
    log = tmp_path / "hook.log"
    hook(repo / ".git", "pre-commit",
         tune_in_hook("verify", "--set", "checkout.workers=2", "--runs", "5", log=log))
    (repo / "file0").write_text("edited\n")
    git(repo, "commit", "-q", "-am", "edit file0")
    assert rc_of(log) == 0, open(log).read()
    assert git(repo, "show", "--name-only", "--format=", "HEAD").stdout.split() == ["file0"]
    assert git(repo, "status", "--porcelain").stdout == ""
    assert git(repo, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/main"


def test_probe_with_a_linked_worktrees_git_dir_leaves_the_main_repository_alone(home, repo,
                                                                               tmp_path):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "HEAD~1")
    git_dir = git(wt, "rev-parse", "--absolute-git-dir").stdout.strip()
    before = snapshot(repo / ".git")
    env = dict(os.environ, GIT_DIR=git_dir)
    proc = subprocess.run([*GIT_TUNE, "probe", "--json"], cwd=wt, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["repository"]["layout"]["git_dir"] == git_dir
    assert changed(before, snapshot(repo / ".git")) == []
    assert git(repo, "status", "--porcelain").stdout == ""


def test_calibrate_and_verify_with_git_dir_exported_leave_index_and_head_alone(home, repo):
    (repo / "file1").write_text("staged\n")
    git(repo, "add", "file1")
    git(repo, "update-index", "--skip-worktree", "file2")
    before = snapshot(repo)
    env = dict(os.environ, GIT_DIR=str(repo / ".git"))
    for args in (["calibrate", "--budget", "3", "--json"],
                 ["verify", "--set", "checkout.workers=2", "--runs", "5", "--json"]):
        proc = subprocess.run([*GIT_TUNE, *args], cwd=repo, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 0, f"{args}: {proc.stderr}"
        assert changed(before, snapshot(repo)) == [], args
    assert git(repo, "diff", "--cached", "--name-only").stdout.split() == ["file1"]
    assert "S file2" in git(repo, "ls-files", "-t", "file2").stdout
    assert git(repo, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/main"


def test_probe_with_git_index_file_exported_never_rewrites_the_index(home, repo, any_git):
    before = (repo / ".git" / "index").read_bytes()
    env = dict(os.environ, GIT_INDEX_FILE=str(repo / ".git" / "index"))
    proc = subprocess.run([*GIT_TUNE, "--git", any_git, "probe", "--json"], cwd=repo, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (repo / ".git" / "index").read_bytes() == before


def test_a_dotfiles_repository_is_probed_where_its_variables_say_and_left_alone(home, tmp_path):
    work = tmp_path / "dothome"
    work.mkdir()
    (work / ".bashrc").write_text("alias ll='ls -l'\n")
    (work / ".vimrc").write_text("set nu\n")
    dot = tmp_path / "dotfiles.git"
    git(tmp_path, "init", "-q", "--bare", str(dot))
    env = dict(os.environ, GIT_DIR=str(dot), GIT_WORK_TREE=str(work))
    git(work, "add", ".bashrc", ".vimrc", env=env)
    git(work, "commit", "-qm", "dotfiles", env=env)
    before = snapshot(dot, work)
    proc = subprocess.run([*GIT_TUNE, "probe", "--json"], cwd=work, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["repository"]["tracked_files"] == 2
    assert changed(before, snapshot(dot, work)) == []
    assert git(work, "config", "core.worktree", env=env, check=False).stdout == ""


DRIVER = """
import hashlib, json, os, subprocess, sys
out, main_git, main_wt, wt = sys.argv[1:5]
commands = json.loads(sys.argv[5])

def snap():
    files = {}
    for root in (main_git, main_wt, wt):
        for d, dirs, names in os.walk(root):
            if d == main_wt:
                dirs[:] = [x for x in dirs if x != ".git"]
            for n in names:
                p = os.path.join(d, n)
                files[p] = (os.readlink(p) if os.path.islink(p)
                            else hashlib.sha256(open(p, "rb").read()).hexdigest())
    return files

# Every variable of `git rev-parse --local-env-vars`, on top of what git exported.
hostile = {
    "GIT_DIR": os.environ.get("GIT_DIR") or os.path.join(main_git, "worktrees", "wt"),
    "GIT_WORK_TREE": wt, "GIT_COMMON_DIR": main_git,
    "GIT_INDEX_FILE": os.environ.get("GIT_INDEX_FILE") or os.path.join(main_git, "index"),
    "GIT_OBJECT_DIRECTORY": os.path.join(main_git, "objects"),
    "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(main_git, "objects"),
    "GIT_CONFIG": os.path.join(main_git, "config"),
    "GIT_CONFIG_PARAMETERS": "'core.bare'='true'",
    "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.worktree", "GIT_CONFIG_VALUE_0": "/",
    "GIT_IMPLICIT_WORK_TREE": "0", "GIT_GRAFT_FILE": os.path.join(main_git, "grafts"),
    "GIT_NO_REPLACE_OBJECTS": "1", "GIT_REPLACE_REF_BASE": "refs/hostile/",
    "GIT_PREFIX": "dir0/", "GIT_SHALLOW_FILE": os.path.join(main_git, "shallow"),
}
env = dict(os.environ, **hostile)
results = []
for args in commands:
    before = snap()
    proc = subprocess.run([sys.executable, "-m", "git_tune", *args], cwd=wt, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    after = snap()
    results.append({"args": args, "rc": proc.returncode, "stderr": proc.stderr[-2000:],
                    "changed": sorted(p for p in set(before) | set(after)
                                      if before.get(p) != after.get(p))})
json.dump(results, open(out, "w"))
"""


def test_every_command_from_a_real_hook_with_every_local_variable_leaves_the_repository_alone(
        home, repo, tmp_path):
    """The property: run from a linked worktree's pre-commit hook (git exports GIT_DIR and
    GIT_INDEX_FILE) with every other repository variable exported too, no git-tune
    command changes a byte of the user's index, HEAD, refs, config or work trees."""
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    commands = [["probe"], ["calibrate", "--budget", "2"], ["recommend", "--budget", "2"],
                ["verify", "--set", "checkout.workers=2", "--runs", "5"],
                ["auto", "--budget", "2", "--yes", "--scope", "global"],
                ["set", "checkout.workers=2", "--scope", "global"], ["show"],
                ["revert", "--scope", "global"]]
    driver, out = tmp_path / "driver.py", tmp_path / "results.json"
    driver.write_text(DRIVER)
    args = [str(out), str(repo / ".git"), str(repo), str(wt), json.dumps(commands)]
    hook(repo / ".git", "pre-commit",
         " ".join(f"'{a}'" for a in [sys.executable, str(driver), *args]) + "\nexit 0\n")
    (wt / "file0").write_text("edited in the worktree\n")
    git(wt, "commit", "-q", "-am", "edit in wt")
    results = json.load(open(out))
    assert len(results) == len(commands)
    for r in results:
        assert r["rc"] == 0, r        # a command that refuses early proves nothing here
        assert "Traceback" not in r["stderr"], r
        assert r["changed"] == [], r
    assert git(wt, "show", "--name-only", "--format=", "HEAD").stdout.split() == ["file0"]
    assert git(repo, "config", "core.bare").stdout.strip() == "false"


# 2. Concurrent `git config` writes are never lost.

def test_concurrent_git_config_writes_survive_set_and_revert_cycles(home, repo):
    """1,200 `git config --local` writes beside set/revert cycles on the same file: every
    write whose git config exited 0 is there at the end. (git config gives up at once on
    a lock another holds: a refused write is tried again under a new name.)"""
    done, stop = [], threading.Event()

    def writer(k):
        i = mine = 0
        while mine < 600 and i < 20000:
            key = f"stress{k}.k{i}"
            proc = subprocess.run(["git", "config", "--local", key, "v"], cwd=repo,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if proc.returncode == 0:
                done.append(key)
                mine += 1
            i += 1
        stop.set()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    cycles = 0
    while not stop.is_set() or cycles < 3:
        for args in (["set", "checkout.workers=2", "--scope", "local"],
                     ["revert", "--scope", "local"]):
            proc = subprocess.run([*GIT_TUNE, *args], cwd=repo, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
            assert proc.returncode in (0, 7), proc.stderr   # 7: git's lock held too long
        cycles += 1
    for t in threads:
        t.join()
    present = set(git(repo, "config", "--local", "--name-only", "--list").stdout.split())
    lost = [k for k in done if k.lower() not in present]
    assert len(done) == 1200 and cycles >= 3
    assert lost == []


def test_git_tune_waits_for_gits_lock_and_never_overwrites_it(home, repo):
    lock = repo / ".git" / "config.lock"
    lock.write_text("a git config in progress\n")
    res = CliRunner().invoke(cli, ["set", "checkout.workers=2", "--scope", "local",
                                   "--repo", str(repo)])
    assert res.exit_code == 7, res.output
    assert "config.lock" in res.output and "nothing was changed" in res.output
    assert lock.read_text() == "a git config in progress\n"
    assert "include" not in (repo / ".git" / "config").read_text()


# 3. revert never writes a backup that changed since git-tune made it.

def test_revert_refuses_a_tampered_backup(home, repo):
    before = (home / ".gitconfig").read_bytes()
    res = CliRunner().invoke(cli, ["set", "checkout.workers=2", "--scope", "global"])
    assert res.exit_code == 0, res.output
    backups = [os.path.join(d, f) for d, _, fs in os.walk(home / "state" / "backups")
               for f in fs if f.endswith(".bak")]
    assert backups
    for b in backups:
        with open(b, "w") as f:
            f.write("[core]\n\tfsmonitor = echo pwned\n")
    written = (home / ".gitconfig").read_bytes()
    res = CliRunner().invoke(cli, ["revert", "--scope", "global"])
    assert res.exit_code == 5, res.output
    assert "has changed since git-tune made it" in res.output
    assert (home / ".gitconfig").read_bytes() == written != before
    assert b"pwned" not in (home / ".gitconfig").read_bytes()


# 4. A FIFO or a link at a tracked path: nothing blocks, nothing outside is opened.

def test_a_fifo_and_links_at_tracked_paths_neither_hang_nor_lead_outside(home, repo, tmp_path):
    os.unlink(repo / "dir0" / "file7")
    os.mkfifo(repo / "dir0" / "file7")
    secret = tmp_path / "outside"
    secret.write_bytes(b"s" * 65536)
    os.unlink(repo / "dir1" / "file3")
    os.symlink(secret, repo / "dir1" / "file3")
    for args in (["probe", "--json"], ["calibrate", "--budget", "2", "--json"]):
        proc = subprocess.run([*GIT_TUNE, *args, "--repo", str(repo)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=120)
        assert proc.returncode == 0, f"{args}: {proc.stderr}"
    from git_tune import engine
    names = ["dir0/file7", "dir1/file3", "../outside", "dir0/file1"]
    r = engine.cache_residency(names, base=str(repo))
    assert r.bytes == os.path.getsize(repo / "dir0" / "file1")


def test_a_fifo_for_a_packs_index_is_not_waited_on(tmp_path):
    """pack.threads reads the largest pack's .idx (its object count, a sample of its
    names): a FIFO there is no index, and opening it must not block."""
    from git_tune.advisor.keys import pack
    os.mkfifo(tmp_path / "pack-1.idx")
    assert pack._objects_in(str(tmp_path / "pack-1.pack")) is None
    assert pack._first_names(str(tmp_path / "pack-1.pack"), 10, "sha1") == []


# 5-7, 10. Results that are right where the repository or the config is unusual.

def test_verify_works_with_an_unstaged_change(home, repo):
    (repo / "file0").write_text("unstaged\n")
    res = CliRunner().invoke(cli, ["verify", "--repo", str(repo), "--set", "checkout.workers=2",
                                   "--runs", "5", "--workload", "diff", "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.output)["workloads"][0]
    assert result["fails"] == "" and result["estimate"], result


def test_a_relative_include_in_the_users_gitconfig_is_kept(home):
    (home / ".gitconfig.local").write_text("[user]\n\temail = ada@local\n")
    with open(home / ".gitconfig", "a") as f:
        f.write("[include]\n\tpath = .gitconfig.local\n")
    before = (home / ".gitconfig").read_bytes()
    res = CliRunner().invoke(cli, ["set", "checkout.workers=2", "--scope", "global"])
    assert res.exit_code == 0, res.output
    assert git(home, "config", "--global", "--includes", "user.email").stdout.strip() == "ada@local"
    assert git(home, "config", "--global", "--includes", "checkout.workers").stdout.strip() == "2"
    res = CliRunner().invoke(cli, ["revert", "--scope", "global"])
    assert res.exit_code == 0, res.output
    assert (home / ".gitconfig").read_bytes() == before


def test_local_scope_in_a_linked_worktree_is_read_by_git(home, repo, tmp_path):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "other")
    res = CliRunner().invoke(cli, ["set", "checkout.workers=3", "--scope", "local",
                                   "--repo", str(wt)])
    assert res.exit_code == 0, res.output
    assert git(wt, "config", "checkout.workers").stdout.strip() == "3"
    assert git(repo, "config", "checkout.workers").stdout.strip() == "3"


def test_a_device_as_the_global_config_is_refused(home, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    res = CliRunner().invoke(cli, ["set", "checkout.workers=2", "--scope", "global"])
    assert res.exit_code == 5, res.output
    assert "not a regular file" in res.output
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# 11. A live scratch directory is known by its lock, not by a pid from another namespace.

def test_a_live_scratch_directory_is_never_removed_whatever_its_pid_says(tmp_path):
    from git_tune.probes import scratch
    with scratch.scratch_dir([str(tmp_path)]) as mine:
        # As another pid namespace sees it: a name whose pid does not run here.
        other = tmp_path / f"{scratch.PREFIX}999999999-abcd"
        os.rename(mine, other)
        scratch.remove_dead(str(tmp_path))
        assert other.is_dir()
        os.rename(other, mine)
    dead = tmp_path / f"{scratch.PREFIX}999999999-dead"
    dead.mkdir()
    (dead / scratch.ALIVE).write_text("")
    scratch.remove_dead(str(tmp_path))
    assert not dead.exists()


@pytest.mark.parametrize("pool", [False, True])
def test_a_scratch_directory_is_removed_whole_and_nothing_a_link_in_it_names(tmp_path, monkeypatch, pool):
    """The scratch directory's removal (one at a time, or in a pool where removals are
    dear: forced here) takes every file and directory below it, deepest first, and
    never follows a symbolic link out of it: what a link names outside survives."""
    from git_tune.probes import scratch
    if pool:
        monkeypatch.setattr(scratch, "POOL_WORTH", -1.0)
    outside = tmp_path / "users"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "file").write_text("mine")
    with scratch.scratch_dir([str(tmp_path)]) as mine:
        for i in range(200):
            d = os.path.join(mine, *(f"d{i % k}" for k in (3, 5, 7)[: 1 + i % 3]))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"f{i}"), "w") as f:
                f.write("x")
        os.symlink(outside / "keep", os.path.join(mine, "d0", "link"))
        os.symlink(outside / "keep" / "file", os.path.join(mine, "file-link"))
    assert sorted(os.listdir(tmp_path)) == ["users"]
    assert (outside / "keep" / "file").read_text() == "mine"


def test_removal_where_no_thread_can_start_goes_one_at_a_time(tmp_path, monkeypatch):
    """Inside a pid limit a pool cannot start its threads: the removal goes on one at a
    time, and nothing is left (tests/test_containers.py meets it under a real limit)."""
    import concurrent.futures
    from git_tune.probes import scratch

    class NoThreads(concurrent.futures.ThreadPoolExecutor):
        def submit(self, *a, **k):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(scratch, "POOL_WORTH", -1.0)
    monkeypatch.setattr(scratch, "ThreadPoolExecutor", NoThreads)
    paths = []
    for i in range(50):
        p = tmp_path / f"d{i % 5}" / f"f{i}"
        p.parent.mkdir(exist_ok=True)
        p.write_text("x")
        paths.append(str(p))
    scratch.remove_files(paths)
    scratch.remove_tree(str(tmp_path / "d0"))
    assert sorted(os.listdir(tmp_path)) == [f"d{i}" for i in range(1, 5)]
    assert all(not os.listdir(tmp_path / f"d{i}") for i in range(1, 5))


def test_leading_directories_go_without_a_listing_and_nothing_else(tmp_path):
    """The checkout sweep's kept directories: every leading directory of its paths goes,
    deepest first; one holding something else stays (and its parents), as does what it
    holds, and the root."""
    from git_tune.probes import scratch
    paths = [f"a/b{i % 3}/c/f{i}" for i in range(9)] + ["top", "x/y"]
    for p in paths:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "a" / "b1" / "c" / "stray").write_text("left")
    scratch.remove_leading_directories(str(tmp_path), paths)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == \
        ["a", "a/b1", "a/b1/c", "a/b1/c/stray"]


def _sweep(directory, stop):
    from git_tune.probes import scratch
    while not stop.is_set():
        scratch.remove_dead(directory)


def test_a_scratch_directory_being_made_is_never_swept_by_another_run(tmp_path):
    """Runs share /tmp (git config edits its copy there): another run's sweep between
    a directory's creation and its lock must not take it. Before `.alive` was locked
    before it took its name, about 1 in 300 directories went under two sweepers."""
    import multiprocessing
    from git_tune.probes import scratch
    stop = multiprocessing.Event()
    sweepers = [multiprocessing.Process(target=_sweep, args=(str(tmp_path), stop))
                for _ in range(2)]
    for p in sweepers:
        p.start()
    lost = made = 0
    try:
        while made < 3000:
            with scratch.scratch_dir([str(tmp_path)]) as mine:
                try:
                    (open(os.path.join(mine, "config"), "w")).close()
                except FileNotFoundError:
                    lost += 1
            made += 1
    finally:
        stop.set()
        for p in sweepers:
            p.join()
    assert lost == 0, f"{lost} of {made} scratch directories removed while in use"


def _interrupted_at(n, make):
    """make() with KeyboardInterrupt (what Ctrl-C and SIGTERM raise) raised at its n-th
    line, counted in every frame it calls (tempfile's, os's, contextlib's): True where it
    was interrupted, False where it ended first."""
    seen = [0]

    def tracer(frame, event, arg):
        if event == "line":
            seen[0] += 1
            if seen[0] == n:
                raise KeyboardInterrupt
        return tracer
    sys.settrace(tracer)
    try:
        make()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
    return False


def test_interrupted_at_any_line_of_its_making_no_scratch_is_left(tmp_path):
    """A signal can land between mkdtemp's mkdir and its return, or before the lock on
    `.alive`: at every line of the making of a scratch directory, of a config file's
    temporary and of a lock, the interruption leaves no name of git-tune's behind (a
    SIGTERM right after auto's write once left one in .git)."""
    from git_tune.advisor.write import safefile
    from git_tune.probes import scratch
    # tempfile makes its name sequence once per process, under a lock an interruption
    # there would leave held (the standard library's, not ours): made before the count.
    tempfile.TemporaryDirectory(dir=tmp_path).cleanup()
    where = tmp_path / "d"
    where.mkdir()
    config = where / "config"
    config.write_bytes(b"old")
    record = tmp_path / "ledger" / "lock.json"
    opened = []

    def enter():
        cm = scratch.scratch_dir([str(where)])
        opened.append((cm, cm.__enter__()))

    def lock():
        opened.append((None, safefile._made_lock(str(where / "config.lock"), str(record))))

    for make in (enter, lambda: safefile.write_atomic(str(config), b"new"), lock):
        n = 0
        while True:
            n += 1
            interrupted = _interrupted_at(n, make)
            for cm, got in opened:        # made whole: released as its user would
                if cm is None:
                    os.close(got)
                    os.unlink(where / "config.lock")
                else:
                    cm.__exit__(None, None, None)
            opened.clear()
            assert sorted(os.listdir(where)) == ["config"], (make, n)
            assert config.read_bytes() in (b"old", b"new"), n
            config.write_bytes(b"old")
            if not interrupted:
                break
        assert n > 5, make      # lines were counted: the interruption reached the making


def test_a_signal_during_a_scratch_directorys_removal_leaves_nothing(tmp_path):
    """SIGTERM (raised as Ctrl-C is, as the CLI does) landing at any line of a scratch
    directory's removal (its files listed, removed, a pool's threads): the removal
    finishes, then the interruption is raised."""
    import signal
    from git_tune.cli import _terminate
    from git_tune.probes import scratch
    before = signal.signal(signal.SIGTERM, _terminate)
    try:
        n = 0
        while True:
            n += 1
            cm = scratch.scratch_dir([str(tmp_path)])
            mine = cm.__enter__()
            for i in range(30):
                os.makedirs(os.path.join(mine, f"d{i % 3}"), exist_ok=True)
                open(os.path.join(mine, f"d{i % 3}", f"f{i}"), "w").close()
            seen = [0]
            removing = [False]

            def tracer(frame, event, arg):
                removing[0] = removing[0] or frame.f_code is scratch.remove_tree.__code__
                if event == "line" and removing[0]:
                    seen[0] += 1
                    if seen[0] == n:
                        os.kill(os.getpid(), signal.SIGTERM)
                return tracer
            sys.settrace(tracer)
            try:
                cm.__exit__(None, None, None)
                interrupted = False
            except KeyboardInterrupt:
                interrupted = True
            finally:
                sys.settrace(None)
            assert os.listdir(tmp_path) == [], n
            if seen[0] < n:
                break
            assert interrupted, n      # what arrived is raised, not lost
    finally:
        signal.signal(signal.SIGTERM, before)
    assert n > 20


# 8. Filters a user configured never run in git-tune's scratch checkouts.

def test_calibration_runs_no_smudge_filter(home, repo, tmp_path):
    counter = tmp_path / "smudged"
    (repo / ".gitattributes").write_text("* filter=counted\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    git(home, "config", "--global", "filter.counted.smudge", f"sh -c 'echo x >>{counter}; cat'")
    git(home, "config", "--global", "filter.counted.clean", "cat")
    proc = subprocess.run([*GIT_TUNE, "calibrate", "--budget", "4", "--json", "--repo", str(repo)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not counter.exists(), f"{len(counter.read_text().split())} smudges in scratch"
    proc = subprocess.run([*GIT_TUNE, "probe", "--json", "--repo", str(repo)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    notes = json.loads(proc.stdout)["repository"]["notes"]
    assert any("filter drivers are off" in n for n in notes), notes


# 12. Keys that must not be written where their evidence cannot hold.

def test_pack_threads_is_not_trialled_on_a_partial_clone(home, repo, tmp_path):
    git(repo, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "partial"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{repo}", str(clone))
    proc = subprocess.run([*GIT_TUNE, "calibrate", "--budget", "3", "--json", "--repo", str(clone)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "a partial clone: its packs hold no blobs" in proc.stdout


# 13. Damaged state of git-tune's own never ends in a traceback; runs on one repository
# take turns.

@pytest.mark.parametrize("damage", ["[1, 2]", '{"global:x": 5, "y": [1]}', "{", '"text"'])
def test_damaged_state_and_cache_files_are_no_traceback(home, repo, damage):
    state = home / "state"
    state.mkdir(exist_ok=True)
    (state / "applied.json").write_text(damage)
    cache = home / ".cache" / "git-tune" / "calibration"
    cache.mkdir(parents=True, exist_ok=True)
    for name in ("a.json", "b.json"):
        (cache / name).write_text(damage)
    for args in (["show"], ["revert", "--scope", "global"],
                 ["set", "checkout.workers=2", "--scope", "global"], ["show"],
                 ["revert", "--scope", "global"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code in (0, 2), (args, res.output, res.exception)
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception


def test_a_second_measurement_of_one_repository_waits_for_the_first(home, repo):
    from git_tune.probes import scratch
    from git_tune.probes.repo import locate
    layout = locate(str(repo))
    with scratch.one_measurement_at_a_time(layout.common_dir):
        proc = subprocess.Popen([*GIT_TUNE, "calibrate", "--budget", "2", "--repo", str(repo)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            proc.wait(timeout=6)
            waited = False
        except subprocess.TimeoutExpired:
            waited = True
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert waited


# 14. Fleets: a host counts once.

def test_fleet_merge_counts_a_profile_given_twice_once(home, repo, tmp_path):
    out = tmp_path / "p.json"
    res = CliRunner().invoke(cli, ["profile", "export", "--repo", str(repo), "--budget", "2",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["fleet", "merge", str(out), str(out), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [c["hosts"] for c in data["classes"]] == [1]
    assert "counted once" in res.stderr


def test_revert_says_what_a_value_left_in_the_index(home, repo):
    res = CliRunner().invoke(cli, ["set", "core.untrackedCache=true", "--scope", "local",
                                   "--repo", str(repo)])
    assert res.exit_code == 0, res.output
    git(repo, "status", "--porcelain")          # git adds the extension itself
    res = CliRunner().invoke(cli, ["revert", "--scope", "local", "--repo", str(repo)])
    assert res.exit_code == 0, res.output
    assert "git update-index --no-untracked-cache" in res.output


def test_verify_on_a_partial_clone_times_what_it_can(home, repo, tmp_path):
    git(repo, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "partial"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{repo}", str(clone))
    shutil.rmtree(repo)        # its remote is gone: nothing can be fetched
    res = CliRunner().invoke(cli, ["verify", "--repo", str(clone), "--set",
                                   "checkout.workers=2", "--runs", "5", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert any("partial clone" in n for n in report["notes"]), report["notes"]


# 9. SHA-256 repositories are read as git reads them.

@pytest.mark.timed     # its claim includes what real git times in a short budget (5 s)
def test_a_sha256_repository_is_probed_and_calibrated(home, tmp_path, any_git):
    repo = tmp_path / "sha256"
    subprocess.run([any_git, "init", "-q", "--object-format=sha256", str(repo)], check=True)
    for d in ("a", "b"):
        (repo / d).mkdir()
        for i in range(60):
            (repo / d / f"f{i}").write_text(f"{d} {i}\n")
    subprocess.run([any_git, "-C", str(repo), "add", "-A"], check=True)
    # No maintenance detached by this commit: its lock comes and goes at a time of its own,
    # and the snapshots below are of what git-tune did.
    subprocess.run([any_git, "-C", str(repo), "-c", "maintenance.auto=false", "commit", "-qm",
                    "x"], check=True)
    subprocess.run([any_git, "-C", str(repo), "-c", "index.threads=2", "update-index",
                    "--index-version", "4", "--force-write-index"], check=True)
    before = snapshot(repo)

    def run(*args: str) -> str:
        proc = subprocess.run([*GIT_TUNE, "--git", any_git, *args, "--repo", str(repo)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 0, f"{args}: {proc.stderr}"
        assert "checksum mismatch" not in proc.stdout + proc.stderr
        return proc.stdout

    def timed(record: dict) -> set:
        return {k for k, t in record["trials"].items()
                if any(c["times_default"] and c["times_candidate"] for c in t["comparisons"])}

    run("probe", "--json")
    record = json.loads(run("calibrate", "--budget", "5", "--json"))
    if "index.version" not in timed(record) and record["unfinished"]:
        # The keys go in the order of their stakes; on a busy host 5 s can end before
        # this one, and the record says the budget ended. More budget reaches it.
        record = json.loads(run("calibrate", "--budget", "20", "--json"))
    # Measured, not only accepted: the engine read the SHA-256 index (the index family's
    # sweep) and real git timed keys there, index.version on the v4 copy among them.
    assert record["sweeps"].get("index") and record["sweeps"]["index"]["evaluations"]
    assert "index.version" in timed(record), (sorted(timed(record)), record["notes"])
    report = json.loads(subprocess.run([*GIT_TUNE, "probe", "--json", "--repo", str(repo)],
                                       stdout=subprocess.PIPE, text=True).stdout)
    assert report["repository"]["tracked_files"] == 120
    assert report["repository"]["index"]["version"] == 4
    assert changed(before, snapshot(repo)) == []


def fill(path: str) -> None:
    """A file at `path` that takes every byte its file system has left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_a_full_home_never_shows_a_value_that_was_not_written(home, monkeypatch):
    from testbeds.mount import available, bed
    reason = available("tmpfs")
    if reason:
        pytest.skip(reason)
    with bed("tmpfs", size_mb=1) as mnt:
        # The include file's disk fills up; the state (journal, backups) has room.
        monkeypatch.setenv("XDG_CONFIG_HOME", os.path.join(mnt, "config"))
        res = CliRunner().invoke(cli, ["set", "checkout.workers=2", "--scope", "global"])
        assert res.exit_code == 0, res.output
        fill(os.path.join(mnt, "filler"))                       # the disk fills up
        res = CliRunner().invoke(cli, ["set", "checkout.workers=4", "index.threads=2",
                                       "--scope", "global"])
        assert res.exit_code == 5, res.output
        shown = CliRunner().invoke(cli, ["show", "--json"])
        assert shown.exit_code == 0, shown.output
        settings = [a["settings"] for a in json.loads(shown.stdout)["applied"]]
        assert settings == [{"checkout.workers": "2"}], settings
        os.unlink(os.path.join(mnt, "filler"))
        assert CliRunner().invoke(cli, ["revert", "--scope", "global"]).exit_code == 0



def test_a_full_scratch_file_system_during_calibrate_is_notes_not_a_traceback(home, template):
    """The repository's file system has no room for git-tune's scratch (an index copy, a
    sample's list, a part's files): every trial and sweep that needs it is said not
    decided and why, the calibration ends (exit 0), and the repository and the storage
    are as they were, no scratch file left."""
    from testbeds.mount import available, bed
    reason = available("tmpfs")
    if reason:
        pytest.skip(reason)
    with bed("tmpfs", size_mb=16) as mnt:
        repo = os.path.join(mnt, "repo")
        shutil.copytree(template, repo, symlinks=True)
        filler = os.path.join(mnt, "filler")
        fill(filler)                                            # the disk fills up
        os.truncate(filler, os.path.getsize(filler) - 64 * 1024)   # a few KiB stay free
        before = snapshot(mnt, skip=(filler,))
        proc = subprocess.run(GIT_TUNE + ["calibrate", "--repo", repo, "--budget", "5",
                                          "--json"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        notes = json.loads(proc.stdout)["notes"]
        assert any("No space left on device" in n for n in notes), notes
        assert snapshot(mnt, skip=(filler,)) == before
