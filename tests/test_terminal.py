"""A newcomer's terminal (issue #34): auto run on a real pty, without --yes, shows the
recommendation and the diff before it asks, names who the write reaches, defaults wide
scopes to No, and ends with how to see and undo; without a terminal it never writes."""
import os
import pty
import select
import subprocess
import sys
import textwrap
import time

import pytest

from tests.test_registry import TOY_MODULE, TOY_TOML

GIT_TUNE = [sys.executable, "-m", "git_tune"]


@pytest.fixture
def toy_env(small_repo, tmp_path, isolated_git):
    """A repository and a key that auto always sets (the registry's toy key), so every
    run has something to write."""
    package = tmp_path / "plugins" / "toykeys"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "knob.py").write_text(textwrap.dedent(TOY_MODULE))
    (tmp_path / "toy.toml").write_text(TOY_TOML)
    repo = tmp_path / "r"
    subprocess.run(["cp", "-a", str(small_repo), str(repo)], check=True)
    env = dict(os.environ, GIT_TUNE_KEYS=str(tmp_path / "toy.toml"),
               PYTHONPATH=os.pathsep.join([str(tmp_path / "plugins"),
                                           os.environ.get("PYTHONPATH", "")]),
               GIT_TUNE_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="100",
               GIT_TUNE_STATE_DIR=str(isolated_git / "state"))
    return repo, env


def on_pty(args, env, answer: bytes, timeout: float = 240, columns: int = 0):
    """Run args on a pseudo-terminal (`columns` wide, where given); type `answer` once the
    first prompt shows, and Enter (the default) at any prompt after it (whether one
    follows, such as the rewrite of an index for index.version, depends on what the
    calibration decided). (all output, the output before the answer, exit code)"""
    pid, fd = pty.fork()
    if pid == 0:
        if columns:
            import fcntl
            import struct
            import termios
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        os.execvpe(args[0], args, env)
    out, before, answered, mark = b"", None, False, 0
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if not answered and b"]: " in out:
            before, answered, mark = out, True, len(out)
            os.write(fd, answer)
        elif answered and b"]: " in out[mark:]:
            mark = len(out)
            os.write(fd, b"\r")
    else:
        os.kill(pid, 9)     # a test that waits forever is a failure, said below
    _, status = os.waitpid(pid, 0)
    return out.decode(errors="replace"), (before or b"").decode(errors="replace"), \
        os.waitstatus_to_exitcode(status)


def test_auto_shows_before_it_asks_and_wide_scopes_default_to_no(toy_env):
    repo, env = toy_env
    args = [*GIT_TUNE, "auto", "--repo", str(repo), "--budget", "3", "--no-verify"]
    out, before, rc = on_pty(args + ["--scope", "global"], env, b"\r")   # Enter: the default
    assert rc == 0, out
    prompt = before.rstrip().splitlines()[-1]
    assert "every repository of this user" in prompt and "[y/N]" in prompt, prompt
    assert "toy.knob = true" in before and "risk:" in before, before   # the summary first
    assert "+++" not in before and "not written: declined" in out
    assert not (env.get("HOME") and os.path.exists(
        os.path.join(os.environ["XDG_CONFIG_HOME"], "git-tune", "global.gitconfig")))

    out, before, rc = on_pty(args + ["--scope", "local", "--explain"], env, b"y\r")
    assert rc == 0, out
    assert "this repository only" in before.splitlines()[-1] and "[Y/n]" in before
    last = out.rstrip().splitlines()[-2:]
    assert last == ["see: git-tune show", "undo: git-tune revert --scope local"], last
    assert "+++" in before and "+++" not in out[len(before):]   # the diff once, before


def test_auto_without_a_terminal_writes_nothing_unless_yes(toy_env):
    repo, env = toy_env
    args = [*GIT_TUNE, "auto", "--repo", str(repo), "--budget", "3", "--no-verify",
            "--scope", "local"]
    proc = subprocess.run(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "no terminal to ask on" in proc.stdout and "--yes" in proc.stdout
    assert not (repo / ".git" / "git-tune.gitconfig").exists()
    proc = subprocess.run(args + ["--yes"], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (repo / ".git" / "git-tune.gitconfig").exists()


def _busy_fraction(seconds: float = 1.0) -> float:
    import psutil
    return psutil.cpu_percent(interval=seconds) / 100


@pytest.mark.alone     # loads the machine itself
def test_auto_says_a_busy_hosts_result_is_unreliable(toy_env):
    """Busy loops on every core during the calibration: the result says it is not to be
    trusted, why, and what to do. Before that, on this host as it is: said only when the
    host really was busy (checked first, so a loaded CI runner does not fail the test)."""
    repo, env = toy_env
    env = {k: v for k, v in env.items() if k != "GIT_TUNE_WRITE_WHEN_BUSY"}
    args = [*GIT_TUNE, "auto", "--repo", str(repo), "--budget", "3", "--no-verify",
            "--dry-run", "--recalibrate", "--scope", "local"]
    if _busy_fraction() < 0.1:
        quiet = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        assert quiet.returncode == 0, quiet.stderr
        if _busy_fraction() < 0.1:
            assert "unreliable" not in quiet.stdout, quiet.stdout
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 1)]
    try:
        busy = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        verify = subprocess.run([*GIT_TUNE, "verify", "--repo", str(repo), "--set",
                                 "checkout.workers=2", "--workload", "status"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert busy.returncode == 0, busy.stderr
    lines = busy.stdout.splitlines()
    assert lines[2].startswith("warning: unreliable: other processes kept"), busy.stdout
    warning = " ".join(lines[2:lines.index("", 2)] if "" in lines[2:] else lines[2:4])
    assert "--recalibrate" in warning, warning
    assert "nothing written: the host was busy while measuring" in busy.stdout
    assert verify.returncode == 0, verify.stderr
    before_table = verify.stdout.split("workload ")[0]
    assert "\nwarning: unreliable:" in before_table and "git-tune verify" in before_table, \
        verify.stdout


def test_refusals_name_what_is_valid_and_what_was_meant(isolated_git):
    from click.testing import CliRunner
    from git_tune.cli import cli
    res = CliRunner().invoke(cli, ["set", "index.threads=true", "--dry-run"])
    assert res.exit_code == 2 and "(1..64 or false)" in res.output, res.output
    res = CliRunner().invoke(cli, ["set", "pack.threads=0", "--dry-run"])
    assert res.exit_code == 2 and "(1..64)" in res.output, res.output
    res = CliRunner().invoke(cli, ["set", "checkout.worker=2", "--dry-run"])
    assert res.exit_code == 2 and "did you mean checkout.workers?" in res.output, res.output
    res = CliRunner().invoke(cli, ["set", "foo.bar=2", "--dry-run"])
    assert res.exit_code == 2 and "known keys:" in res.output, res.output


@pytest.mark.parametrize("columns", [80, 100])
def test_no_output_line_is_wider_than_the_terminal(small_repo, tmp_path, isolated_git,
                                                   monkeypatch, columns):
    from click.testing import CliRunner
    from git_tune.cli import cli
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    repo = tmp_path / "r"
    subprocess.run(["cp", "-a", str(small_repo), str(repo)], check=True)
    profile = tmp_path / "p.json"
    commands = [["probe", "--repo", repo], ["calibrate", "--repo", repo, "--budget", "4"],
                ["recommend", "--repo", repo, "--budget", "4"],
                ["auto", "--repo", repo, "--budget", "4", "--dry-run"],
                ["set", "checkout.workers=2", "core.preloadIndex=true"], ["show"],
                ["verify", "--repo", repo, "--runs", "5", "--workload", "status"],
                ["profile", "export", "--repo", repo, "--budget", "4", "-o", profile],
                ["apply", profile, "--check", "--diff", "--force"],
                ["fleet", "merge", profile], ["revert"], ["revert"]]
    for args in commands:
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert res.exit_code in (0, 6), (args, res.output)
        lines = res.stdout.splitlines()
        # A diff shows the bytes written, never wrapped (a wrapped line is a line the file
        # does not hold): its lines are the terminal's to fold.
        diff = any(l.startswith("+++ ") for l in lines)
        wide = [l for l in lines if len(l) > columns
                and not (diff and l[:1] in "+- " and l[:1])]
        assert not wide, (args, wide)


def test_auto_ends_with_what_to_do_next_whatever_it_found(toy_env):
    repo, env = toy_env
    args = [*GIT_TUNE, "auto", "--repo", str(repo), "--budget", "3", "--no-verify",
            "--scope", "local"]

    def last_line(*extra):
        proc = subprocess.run(args + list(extra), env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.rstrip().splitlines()
        last = len(lines) - 1
        while last and lines[last].startswith("  "):    # a wrapped line's continuation
            last -= 1
        return " ".join(l.strip() for l in lines[last:])

    assert last_line("--dry-run").startswith("next: run it again without --dry-run")
    assert last_line().startswith("next: run it again and answer y")     # nobody to ask
    assert last_line("--yes") == "undo: git-tune revert --scope local"
    assert last_line("--yes").startswith("next: `git-tune verify --set")  # already applied


def test_every_json_output_says_its_schema_in_one_form(small_repo, tmp_path, isolated_git,
                                                      monkeypatch):
    import json
    import re
    from click.testing import CliRunner
    from git_tune.cli import cli
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    repo = tmp_path / "r"
    subprocess.run(["cp", "-a", str(small_repo), str(repo)], check=True)
    profile = tmp_path / "p.json"
    commands = {"probe": ["probe", "--repo", repo],
                "calibration": ["calibrate", "--repo", repo, "--budget", "3"],
                "recommendation": ["recommend", "--repo", repo, "--budget", "3"],
                "calibrations": ["recommend", "--repo", repo, "--repo", small_repo,
                                 "--budget", "3"],
                "auto": ["auto", "--repo", repo, "--budget", "3", "--dry-run"],
                "write": ["set", "checkout.workers=2"], "show": ["show"],
                "verify": ["verify", "--repo", repo, "--runs", "5", "--workload", "status"],
                "profile": ["profile", "export", "--repo", repo, "--budget", "3", "-o", profile],
                "apply": ["apply", profile, "--check", "--force"],
                "fleet-merge": ["fleet", "merge", profile], "revert": ["revert"]}
    for kind, args in commands.items():
        res = CliRunner().invoke(cli, [str(a) for a in args] + ["--json"])
        assert res.exit_code in (0, 6), (args, res.output)
        data = json.loads(res.stdout)
        assert re.fullmatch(r"git-tune-[a-z-]+/[0-9]+", data["schema"]), (args, data["schema"])
        assert data["schema"].split("/")[0] == f"git-tune-{kind}", (args, data["schema"])
    assert json.loads(profile.read_text())["schema"] == "git-tune-profile/1"


def test_the_demo_ends_with_how_to_tune_your_own_repository_whatever_it_found():
    from git_tune.views import next_steps
    outcomes = [{"written": {"scope": {}}, "dry_run": False, "message": "wrote 1 value"},
                {"written": None, "dry_run": True, "message": "dry run: nothing was written"},
                {"written": None, "dry_run": False, "message": "not written: declined"},
                {"written": None, "dry_run": False,
                 "message": "nothing to change: no setting beat Git's defaults here"}]
    for r in outcomes:
        steps = next_steps(r, demo=True)
        assert steps[-1].startswith("next: tune your own repository with `git-tune auto"), r
        assert all(s.startswith("next: ") for s in steps)


def test_a_busy_host_is_one_that_left_git_tune_too_few_idle_cpus():
    """What decides 'unreliable' is whether the CPUs git-tune could use were free, not how
    busy a big host was: a container given 2 of 64 CPUs beside 30 busy ones was not
    crowded; on 2 CPUs, one busy loop elsewhere is."""
    from git_tune.advisor.measure.hostload import Load
    assert Load(5, 1.0, cores=2, cpus=2).busy and Load(5, 63, cores=2, cpus=64).busy
    assert not Load(5, 0.3, cores=2, cpus=2).busy and not Load(5, 30, cores=2, cpus=64).busy
    assert Load(5, 0.3, cores=2, cpus=2).note() is None


@pytest.mark.alone     # loads the machine itself
def test_five_runs_beside_a_steady_cpu_hog_agree(toy_env):
    """A busy loop on one core, as a build on a laptop: five runs of auto (--yes) all
    write nothing and say why, the same way; the repository's config stays as it was."""
    repo, env = toy_env
    env = {k: v for k, v in env.items() if k != "GIT_TUNE_WRITE_WHEN_BUSY"}
    before = (repo / ".git" / "config").read_bytes()
    args = [*GIT_TUNE, "auto", "--repo", str(repo), "--budget", "2", "--no-verify",
            "--recalibrate", "--scope", "local", "--yes"]
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        runs = [subprocess.run(args, env=env, capture_output=True, text=True) for _ in range(5)]
    finally:
        hog.kill()
        hog.wait()
    for r in runs:
        assert r.returncode == 0, r.stderr
    said = [[line for line in r.stdout.splitlines() if line.startswith("nothing written")]
            for r in runs]
    assert all(len(s) == 1 and "the host was busy" in s[0] for s in said), said
    assert (repo / ".git" / "config").read_bytes() == before


def test_auto_fits_a_screen_at_80_columns_unless_asked_to_explain(toy_env):
    """By default auto says what it will write, the gain, the risk and the question in
    about a screen; --explain adds every key's reason, the findings and the diff."""
    repo, env = toy_env
    env = dict(env, COLUMNS="80")
    args = [*GIT_TUNE, "auto", "--repo", str(repo), "--budget", "3", "--no-verify",
            "--scope", "local", "--dry-run"]
    short = subprocess.run(args, env=env, capture_output=True, text=True)
    assert short.returncode == 0, short.stderr
    lines = short.stdout.splitlines()
    assert len(lines) <= 30 and max(map(len, lines)) <= 80, short.stdout
    assert any(line.strip().startswith("toy.knob = true") for line in lines)
    assert any(line.startswith("risk:") for line in lines) and "+++" not in short.stdout
    full = subprocess.run(args + ["--explain"], env=env, capture_output=True, text=True)
    assert full.returncode == 0 and "+++" in full.stdout and "why" in full.stdout
