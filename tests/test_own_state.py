"""git-tune's own files are untrusted input (issue #61): what its state names is never
deleted or followed outside its own directories, its directories are private whatever
the umask, another user's directories and files are refused, and damaged state never
ends a command or the collector in a traceback. Real git, real files; "another user"
is uid 65534 (nobody), which only root can give a file to."""
import json
import os
import random
import signal
import stat
import subprocess
import time
import traceback

import psutil
import pytest
from click.testing import CliRunner

from git_tune import ownpaths, repogen, strictjson
from git_tune.advisor.agent import collector, events, experiment, retune, spool, store, switch
from git_tune.cli import cli as cli_main
from git_tune.errors import UnsafeState
from git_tune.views import agent_status_view

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to "
                             "another user (uid 65534)")


def invoke(*args):
    return CliRunner().invoke(cli_main, [str(a) for a in args])


def _traceback_of(res) -> str:
    return "".join(traceback.format_exception(*res.exc_info)) if res.exc_info else ""


def no_traceback(res, *codes):
    assert res.exit_code in codes, (res.exit_code, res.output, _traceback_of(res))
    assert res.exit_code == 0 or isinstance(res.exception, SystemExit), _traceback_of(res)
    assert "Traceback" not in res.output


def event_name(i: int) -> str:
    return f"20261128T101010.{i:06d}Z-H0123abcd-P{i:08x}"


def snapshot(root):
    """Every entry under root: (kind, bytes or link target, mtime)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            s = os.lstat(p)
            body = (os.readlink(p) if stat.S_ISLNK(s.st_mode) else
                    open(p, "rb").read() if stat.S_ISREG(s.st_mode) else None)
            out[p] = (stat.S_IFMT(s.st_mode), body, s.st_mtime_ns, s.st_mode & 0o7777)
    return out


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "r"
    repogen.generate(str(root), repogen.RepoShape(depth=1, width=3, files=20))
    return root


@pytest.fixture
def enabled(repo):
    """The agent enabled on `repo`, its collector stopped (stepped here), disabled after."""
    no_traceback(invoke("agent", "enable", "--repo", repo), 0)
    collector.stop()
    yield repo
    collector.stop()
    invoke("agent", "disable")


@pytest.fixture
def victim(tmp_path):
    """A directory of the user's that no git-tune command may touch: old files (past the
    spool's STALE age), one named like git's event files holding an atexit event, a link."""
    d = tmp_path / "victim"
    d.mkdir()
    (d / ".bashrc").write_text("export PATH=$PATH\n")
    (d / "notes.txt").write_text("mine\n")
    (d / event_name(1)).write_text('{"event":"atexit","sid":"x","t_abs":1,"code":0}\n')
    os.symlink("/etc/hostname", d / "a-link")
    old = time.time() - 3600
    for n in (".bashrc", "notes.txt", event_name(1)):
        os.utime(d / n, (old, old))
    return d


# 1. Delete only what git-tune made, where it made it.

def test_a_spool_the_state_names_elsewhere_deletes_nothing_there(enabled, victim):
    before = snapshot(victim)
    state = os.path.join(store.agent_dir(), switch.STATE)
    raw = json.load(open(state))
    raw["spool"] = str(victim)
    open(state, "w").write(json.dumps(raw))
    for args in (("agent", "status"), ("agent", "report"), ("agent", "log")):
        no_traceback(invoke(*args), 0)
    assert snapshot(victim) == before
    assert switch.damaged() and switch.load().spool != str(victim)
    assert "moved aside" in invoke("agent", "status").output


def test_a_spool_path_that_became_a_link_is_never_followed(enabled, victim):
    d = switch.load().spool
    os.rmdir(d)
    os.symlink(victim, d)
    before = snapshot(victim)
    subprocess.run(["git", "-C", str(enabled), "status", "-uno"], check=True,
                   capture_output=True)
    no_traceback(invoke("agent", "status"), 0)
    after = snapshot(victim)            # git itself wrote its events through the link
    assert {p: after[p] for p in before} == before
    assert not os.path.islink(d) and os.path.isdir(d)


def test_the_spool_removed_while_the_routing_stays(enabled):
    """git appends every command's events to one file at the spool's path once its
    directory is gone: the next agent command removes it and makes the directory anew."""
    d = switch.load().spool
    os.rmdir(d)
    for _ in range(3):
        subprocess.run(["git", "-C", str(enabled), "status"], check=True, capture_output=True)
    assert os.path.isfile(d)
    for args in (("agent", "status"), ("agent", "report")):
        no_traceback(invoke(*args), 0)
    assert os.path.isdir(d) and stat.S_IMODE(os.lstat(d).st_mode) == 0o700
    subprocess.run(["git", "-C", str(enabled), "status"], check=True, capture_output=True)
    assert spool.pending(d) == 1
    no_traceback(invoke("agent", "disable"), 0)


# 2. Private whatever the umask.

def test_every_directory_git_tune_makes_is_0700_under_umask_000(repo, tmp_path, isolated_git):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    try:
        proc = subprocess.run(["git-tune", "agent", "enable", "--repo", str(repo)], env=env,
                              preexec_fn=lambda: os.umask(0), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        subprocess.run(["git", "-C", str(repo), "status"], env=env, check=True,
                       capture_output=True)
        proc = subprocess.run(["git-tune", "agent", "status"], env=env,
                              preexec_fn=lambda: os.umask(0), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        made = [isolated_git / ".local", runtime / "git-tune"]
        dirs = [os.path.join(d, n) for top in made for d, ns, _ in os.walk(top) for n in ns]
        dirs += [str(p) for p in made]
        assert len(dirs) >= 5 and {p: oct(stat.S_IMODE(os.lstat(p).st_mode)) for p in dirs} \
            == {p: "0o700" for p in dirs}
        files = [os.path.join(d, n) for top in made for d, _, fs in os.walk(top) for n in fs]
        assert files and not [p for p in files if os.lstat(p).st_mode & 0o077]
    finally:
        subprocess.run(["git-tune", "agent", "disable"], env=env, capture_output=True)


def test_a_parent_others_may_write_is_named(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(shared / "git-tune"))
    res = invoke("agent", "status")
    no_traceback(res, 9)
    assert str(shared) in res.output and "not sticky" in res.output
    assert not (shared / "git-tune").exists()
    os.chmod(shared, 0o1777)                # /tmp's kind: git-tune's own directory is checked
    no_traceback(invoke("agent", "status"), 0)
    assert stat.S_IMODE(os.lstat(shared / "git-tune").st_mode) == 0o700


# 3. Another user's directories and files are refused.

@as_root
def test_a_directory_another_user_made_is_refused(repo, isolated_git):
    agent = isolated_git / ".local" / "state" / "git-tune" / "agent"
    agent.mkdir(parents=True)
    (agent / "spool").mkdir()
    os.chmod(agent / "spool", 0o777)
    os.chown(agent / "spool", NOBODY, NOBODY)
    gitconfig = isolated_git / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = me\n")
    res = invoke("agent", "enable", "--repo", repo)
    no_traceback(res, 9)
    assert str(agent / "spool") in res.output and "uid 65534" in res.output
    assert gitconfig.read_text() == "[user]\n\tname = me\n"
    assert not collector.running().running


@as_root
def test_revert_refuses_a_state_file_another_user_owns(isolated_git):
    gitconfig = isolated_git / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = me\n")
    no_traceback(invoke("set", "checkout.workers=2", "--scope", "global"), 0)
    written = gitconfig.read_bytes()
    applied = isolated_git / ".local" / "state" / "git-tune" / "applied.json"
    os.chown(applied, NOBODY, NOBODY)
    res = invoke("revert", "--scope", "global")
    no_traceback(res, 9)
    assert str(applied) in res.output and gitconfig.read_bytes() == written
    os.chown(applied, 0, 0)
    no_traceback(invoke("revert", "--scope", "global"), 0)
    assert gitconfig.read_text() == "[user]\n\tname = me\n"


def test_revert_refuses_a_backup_outside_git_tunes_own(isolated_git, tmp_path):
    gitconfig = isolated_git / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = me\n")
    no_traceback(invoke("set", "checkout.workers=2", "--scope", "global"), 0)
    written = gitconfig.read_bytes()
    applied = isolated_git / ".local" / "state" / "git-tune" / "applied.json"
    planted = tmp_path / "planted.bak"
    planted.write_text("[core]\n\tfsmonitor = /tmp/evil\n")
    state = json.loads(applied.read_text())
    for entry in state.values():
        for item in entry["originals"].values():
            if item.get("copy"):
                item["copy"] = str(planted)
    applied.write_text(json.dumps(state))
    res = invoke("revert", "--scope", "global")
    no_traceback(res, 9)
    assert "outside git-tune's backups" in res.output and gitconfig.read_bytes() == written


def test_a_planted_link_at_the_pid_file_is_replaced_not_followed(enabled, victim):
    bashrc = (victim / ".bashrc").read_bytes()
    pid = os.path.join(store.agent_dir(), collector.PID_FILE)
    if os.path.lexists(pid):
        os.unlink(pid)
    os.symlink(victim / ".bashrc", pid)
    assert not collector.running().running
    assert collector.start().running
    assert (victim / ".bashrc").read_bytes() == bashrc and not os.path.islink(pid)


def test_a_collector_that_exited_unreaped_is_not_running(enabled):
    """A collector whose parent has not reaped it (a container's init may reap late, or
    never) has exited: it is not running, stop() does not wait for it, and start()
    starts another."""
    child = subprocess.Popen(["true"])       # this process's child: a zombie until waited
    try:
        proc = psutil.Process(child.pid)
        while proc.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        ownpaths.write_file(os.path.join(store.agent_dir(), collector.PID_FILE),
                            f"{child.pid} {proc.create_time()}\n".encode())
        assert not collector.running().running
        assert collector.stop() is False
        assert collector.start().running
        assert collector.stop() is True and not collector.running().running
    finally:
        child.wait()


# 4. Damaged inputs: no traceback, the collector alive after them. Each kind is written at
# once (a store's and a log's lines stay in the file, so every later read meets them all).

DAMAGED_EVENTS = [
    '{"event":"cmd_name","sid":"S","name":"status"}\n{"event":"exit","sid":"S","t_abs":0.1,"code":0,"value":1e400}\n',
    "[" * 200000 + "\n",
    '{"event":"data","sid":"S","category":"index","key":"read/cache_nr","value":1e400}\n',
    '{"event":"cmd_name","sid":"S","name":"status"}\n{"event":"atexit","sid":"S","t_abs":1e308,"code":0}\n',
]
DAMAGED_STORE = ["{}", '{"sid":5}', "[]", "null", '{"sid":"s","command":"status","options":"x"}',
                 json.dumps({"sid": "s", "command": "status", "options": [], "repo": None,
                             "git_version": "", "elapsed": "1", "code": 0, "caller": None}),
                 json.dumps({"sid": "s", "command": "status", "options": [], "repo": 5,
                             "git_version": "", "elapsed": 1.0, "code": 0, "caller": None}),
                 json.dumps({"sid": "s", "command": "status", "options": [], "repo": "/r",
                             "git_version": "", "elapsed": 1e308, "code": 0, "caller": None,
                             "counts": {"entries": "many"}})]
DAMAGED_LOG = ["5", "[]", "null", '{"time":"soon","experiment":"started"}',
               '{"time":1,"reasons":5}', '{"time":1e400}']


def _append(path, lines):
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


def _alive_after(write):
    write()
    time.sleep(2.5 * collector.POLL)
    assert collector.running().running
    for args in (("agent", "status"), ("agent", "report"), ("agent", "log")):
        no_traceback(invoke(*args), 0)


def test_the_collector_survives_every_damaged_input(enabled):
    collector.start()
    d = switch.load().spool
    paths = [os.path.join(d, event_name(100 + i)) for i in range(len(DAMAGED_EVENTS))]

    def write_old():                    # past STALE: read as a killed git's, and removed
        for path, text in zip(paths, DAMAGED_EVENTS):
            open(path, "w").write(text)
            os.utime(path, (time.time() - 2 * spool.STALE,) * 2)
    _alive_after(write_old)
    assert [p for p in paths if os.path.exists(p)] == []
    _alive_after(lambda: _append(os.path.join(store.agent_dir(), store.CURRENT), DAMAGED_STORE))
    _alive_after(lambda: _append(retune.log_path(), DAMAGED_LOG))
    assert all(r.elapsed is None or r.elapsed < 1e6 for r in store.records())
    report = json.loads(invoke("agent", "report", "--json").output)
    assert all(lat["p90"] < 1e6 for lat in report["latencies"])


def test_killed_commands_in_a_slot_do_not_end_the_collector(enabled):
    """Six checkouts whose git was killed: no exit event, no duration."""
    no_traceback(invoke("set", "checkout.workers=2", "--scope", "global"), 0)
    experiment.start("global", "checkout.workers", "4", str(enabled))
    now = time.time() + 1
    killed = [events.Command(f"k{i}", "checkout", (), str(enabled), "2.47", None, None, None,
                             {}, {}, {"checkout.workers": "2"}, now + i) for i in range(6)]
    assert experiment.step(killed) is None
    assert experiment.load().slots == ()


def test_a_damaged_experiment_ends_with_the_value_from_before_it(enabled):
    repo = enabled
    no_traceback(invoke("set", "checkout.workers=2", "--scope", "global"), 0)
    subprocess.run(["git", "-C", str(repo), "branch", "other"], check=True)
    experiment.start("global", "checkout.workers", "4", str(repo))
    exp = experiment.load()
    experiment._save(experiment._write(exp, experiment.CANDIDATE))     # the candidate's slot
    value = lambda: subprocess.run(["git", "-C", str(repo), "config", "checkout.workers"],
                                   capture_output=True, text=True).stdout.strip()
    assert value() == "4"
    path = experiment._path()
    open(path, "w").write(open(path).read()[:40])           # truncated
    assert experiment.load() is None
    assert experiment.step([]) == {"stopped": "damaged state"}
    assert value() == "2" and os.path.exists(path + ".damaged")
    assert "damaged" in invoke("agent", "log").output
    with open(path, "w") as f:                               # the `since` a string
        f.write(json.dumps({**json.loads(json.dumps(experiment.Experiment(
            "global", str(repo), "checkout.workers", "2", "4", ("checkout",), "approved",
            0.0).__dict__)), "since": "soon"}))
    no_traceback(invoke("agent", "status"), 0)


# 5. Writers take turns.

def test_two_enables_at_once_leave_one_collector(repo, tmp_path):
    other = tmp_path / "o"
    repogen.generate(str(other), repogen.RepoShape(depth=1, width=2, files=5))
    try:
        procs = [subprocess.Popen(["git-tune", "agent", "enable", "--repo", str(r)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for r in (repo, other)]
        assert [p.wait(120) for p in procs] == [0, 0]
        time.sleep(1)
        agent = store.agent_dir()
        runs = [p for p in _collectors() if p.environ().get("HOME") == os.environ["HOME"]]
        assert len(runs) == 1, runs
        assert set(switch.load().watch) == {os.path.realpath(repo), os.path.realpath(other)}
        assert agent
    finally:
        collector.stop()
        invoke("agent", "disable")


def _collectors():
    import psutil
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd[-3:] == ["git_tune", "agent", "run"] or cmd[-2:] == ["agent", "run"]:
            try:
                p.environ()
                out.append(p)
            except psutil.Error:
                pass
    return out


def test_a_collector_killed_mid_ingest_loses_nothing(enabled):
    """100 kills at random instants of an ingest of many files: every file is either
    still in the spool or its record is stored (at most one stored twice a kill)."""
    d = switch.load().spool
    total = 1500
    template = ('{"event":"version","sid":"%s","exe":"2.47.3"}\n'
                '{"event":"def_repo","sid":"%s","repo":1,"worktree":"%s"}\n'
                '{"event":"cmd_name","sid":"%s","name":"status"}\n'
                '{"event":"atexit","sid":"%s","t_abs":0.01,"code":0}\n')
    for i in range(total):
        sid = event_name(i)
        with open(os.path.join(d, sid), "w") as f:
            f.write(template % (sid, sid, enabled, sid, sid))
    state = switch.load()
    rng = random.Random(61)
    for _ in range(100):
        pid = os.fork()
        if pid == 0:            # the collector's step, in a process of its own
            try:
                spool.ingest(state.spool, switch.watched(state), switch.tuned_keys())
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0, 0.02))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        left = {n for n in os.listdir(d) if spool.EVENT_NAME.match(n)}
        stored = {r.sid for r in store.records()}
        assert len(left | stored) == total, (len(left), len(stored))
    spool.ingest(state.spool, switch.watched(state), switch.tuned_keys())
    records = store.records()
    assert {r.sid for r in records} == {event_name(i) for i in range(total)}
    assert len(records) <= total + 100


def _event_file(spool_dir, sid, worktree):
    """A finished `git status`'s event file in the spool, as git writes it."""
    with open(os.path.join(spool_dir, sid), "w") as f:
        f.write('{"event":"version","sid":"%s","exe":"2.47.3"}\n'
                '{"event":"def_repo","sid":"%s","repo":1,"worktree":"%s"}\n'
                '{"event":"cmd_name","sid":"%s","name":"status"}\n'
                '{"event":"atexit","sid":"%s","t_abs":0.01,"code":0}\n'
                % (sid, sid, worktree, sid, sid))


def test_a_record_cut_by_a_kill_does_not_take_the_next_one_with_it(enabled):
    """A kill can stop the store's write between two pages, leaving half a line; the
    record written again after it (its spool file was not removed) is stored whole.
    Before the store ended a cut line first, the two made one line no reader could parse,
    and the record was lost (1 of 1500 under 100 kills, loaded machine)."""
    d = switch.load().spool
    sid = event_name(7)
    _event_file(d, sid, enabled)
    state = switch.load()
    spool.ingest(state.spool, switch.watched(state), switch.tuned_keys())
    stored = os.path.join(store.agent_dir(), store.CURRENT)
    whole = open(stored, "rb").read()
    with open(stored, "wb") as f:          # as the killed write left it: half its line
        f.write(whole[:len(whole) // 2])
    _event_file(d, sid, enabled)
    spool.ingest(state.spool, switch.watched(state), switch.tuned_keys())
    assert [r.sid for r in store.records()] == [sid]


def test_strict_json_refuses_what_would_end_a_reader():
    for text in ("NaN", "[Infinity]", '{"a":1e400}', "[" * 100000, "1" * 40, "[" * 40 + "]" * 40):
        with pytest.raises(ValueError):
            strictjson.loads(text)
    assert strictjson.loads('{"a":[1,2.5,"x"]}') == {"a": [1, 2.5, "x"]}


def test_a_state_file_that_is_a_link_or_another_users_is_refused(tmp_path):
    target = tmp_path / "t"
    target.write_text("{}")
    link = tmp_path / "own" / "f"
    ownpaths.private_dir(str(link.parent))
    os.symlink(target, link)
    with pytest.raises(UnsafeState, match="symbolic link"):
        ownpaths.read_file(str(link))
    ownpaths.write_file(str(link), b"new")          # the link is replaced, not followed
    assert target.read_text() == "{}" and link.read_bytes() == b"new"
    assert agent_status_view                         # imported: the view takes any status
