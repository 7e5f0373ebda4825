"""The README's commands are the CLI's: every `git-tune ...` it shows, in a code block or
inline (the commands table's synopses included), names commands and options that exist;
every line of its sh and yaml blocks runs as shown; its screen is today's output."""
import glob
import os
import re
import shlex
import subprocess
import sys

import click

from git_tune import repogen
from git_tune.cli import cli

README = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")
OPTION = re.compile(r"^\[?(--?[a-zA-Z][a-zA-Z-]*)")


def _commands(text):
    """Each git-tune command line the README shows: its words after `git-tune`."""
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in block.splitlines():
            m = re.search(r"(?:^|[\s/])git-tune (.*)", line)
            if m and not line.lstrip().startswith("#"):
                yield m.group(1).split(" #")[0].split("||")[0].strip()
    yield from re.findall(r"`git-tune ([^`]*)`", text)


def _options(command: click.Command):
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}


def _unknown(words):
    """The words naming a command or option the CLI does not have."""
    command, path, bad = cli, ["git-tune"], []
    for word in words:
        name = OPTION.match(word)
        if name:
            if name.group(1) not in _options(command):
                bad.append(f"{' '.join(path)} {name.group(1)}")
        elif isinstance(command, click.Group) and re.fullmatch(r"[a-z][a-z-]*", word):
            sub = command.commands.get(word)
            if sub is None:
                return bad + [f"{' '.join(path)} {word}"]
            command, path = sub, path + [word]
    return bad


def test_every_command_the_readme_shows_exists_with_its_options():
    text = open(README, encoding="utf-8").read()
    shown = list(_commands(text))
    assert len(shown) >= 20, shown          # the table's synopses and the examples
    bad = [b for c in shown for b in _unknown(shlex.split(c))]
    assert not bad, bad


def test_a_stale_option_in_the_readme_would_be_found():
    assert _unknown(shlex.split("auto --repo P --no-such-option")) == [
        "git-tune auto --no-such-option"]
    assert _unknown(shlex.split("agent enabel --repo P")) == ["git-tune agent enabel"]
    assert _unknown(shlex.split("calibrate [--budget S] [--plot F] [--json]")) == []


def test_the_readme_is_short_and_its_screen_fits_80_columns():
    """The README is for users (at most 320 lines; how it decides lives in docs/), and the
    screen it shows is what a terminal of 80 columns shows."""
    text = open(README, encoding="utf-8").read()
    assert len(text.splitlines()) <= 320
    screen = _blocks(text, "text")[0]
    assert "git-tune auto:" in screen and "verdict" in screen
    wide = [line for line in screen.splitlines() if len(line) > 80]
    assert not wide, wide


# What the README's examples name that a test host does not have, and what stands for it
# (the demo repository for "a large repository of yours", the profiles a run made).
def _stand_ins(demo: str, merged: str) -> dict:
    return {"~/src/big": demo, "host*.json": "host1.json host2.json",
            "profiles/local-ssd-ext4-2-16-32_GiB-*.json": merged,
            "profiles/....json": merged, "ci/ci-runner.json": "ci-runner.json"}


def _blocks(text: str, kind: str):
    return re.findall(rf"```{kind}\n(.*?)```", text, re.S)


def _command_lines(text: str):
    """Every line of the README's sh and yaml blocks that runs git-tune, as a shell runs
    it (a yaml step's `- run: ` or `- ` dropped, a trailing comment kept for `_allowed`),
    but the first block's, whose git-tune part is the demo run on a pty."""
    for block in _blocks(text, "sh") + _blocks(text, "yaml"):
        for line in block.splitlines():
            line = re.sub(r"^\s*-\s+(run:\s+)?", "", line).strip()
            if "git-tune " in line and not line.startswith(("#", "tools/")):
                yield line


def _allowed(line: str):
    """The exit codes a line's own comment names ("# exit 0 or 6"), else 0 alone."""
    said = re.search(r"#\s*exit ([0-9 or,]+)", line)
    return {int(c) for c in re.findall(r"[0-9]+", said.group(1))} if said else {0}


def _without_escapes(text: str) -> str:
    """A terminal's output without its escape sequences (cursor shown and hidden)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def _screen_shape(text: str):
    """The screen's lines as a terminal last showed them (a progress bar's redraws after
    a carriage return, escape sequences out), each reduced to its kind: paths, numbers
    and the words after a line's first two masked, so that what was measured and where
    the run's files were do not count, and what the output says does."""
    out = []
    for line in _without_escapes(text).split("\n"):
        line = line.rstrip("\r").split("\r")[-1].rstrip()
        if not line or line.startswith(" "):
            continue            # a continuation or a value's own line: what was measured
        line = re.sub(r"(?<![\w.`])(/|~/)[^\s:,`]*", "P", line)
        line = re.sub(r"[0-9][0-9,.]*", "N", line)
        line = re.sub(r"-{3,}", "---", line)       # a table's rule, as wide as its column
        out.append(" ".join(line.split()[:2]))
    return out


# The README screen's lines that depend on what this run measured: which values it
# writes, what they gain and risk, the verify table's rows.
OUTCOME = ("expected:", "risk:", "note:", "git ", "--force-write-index", "-uno,")


def _in_order(wanted, seen):
    """The wanted lines not found in `seen` in their order (a line missing does not hide
    the ones after it)."""
    missing, at = [], 0
    for w in wanted:
        if w in seen[at:]:
            at = seen.index(w, at) + 1
        else:
            missing.append(w)
    return missing


def test_every_command_the_readme_shows_runs(tmp_path, isolated_git):
    """The README's commands, run as a reader would, in its order: the first command's
    git-tune part on a real pty of 80 columns (its screen against the README's), then
    every git-tune line of its sh and yaml blocks, with the demo repository for the
    reader's own and this run's profiles for the fleet's (_stand_ins). Each exits with
    the code the README gives it (but `verify` where the demo applied nothing: it
    refuses, exit 2, and says why); no line of the screen, the progress bar's redraws
    included, is wider than 80, and the bar is redrawn on one line of its own; `revert`
    takes the demo's write back."""
    from tests.test_terminal import on_pty

    text = open(README, encoding="utf-8").read()
    first = _blocks(text, "sh")[0].splitlines()
    install = next(line for line in first if "--demo" in line)
    assert install.startswith("tools/install && .venv/bin/git-tune "), install
    assert "\ntools/test\n" in "\n" + "\n".join(first) + "\n"
    ci = open(os.path.join(os.path.dirname(README), ".ci", "run"), encoding="utf-8").read()
    assert ci.rstrip().endswith("exec tools/test"), ci

    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ["PATH"])
    env.pop("COLUMNS", None)
    words = shlex.split(install.split(".venv/bin/git-tune ", 1)[1])
    screen, _, rc = on_pty([sys.executable, "-m", "git_tune", *words], env, b"", columns=80)
    assert rc == 0, screen[-3000:]
    shown = [seg for line in _without_escapes(screen).split("\n") for seg in line.split("\r")]
    assert max(map(len, shown)) <= 80, max(shown, key=len)
    bar = [line for line in screen.split("\n") if "calibrating" in line and "%" in line]
    assert len(bar) == 1 and "git-tune:" not in bar[0], bar    # in place, alone
    readme = _blocks(text, "text")[0]
    wanted = [k for k in _screen_shape(readme) if not k.startswith(OUTCOME)]
    # Nothing to change, or a host too busy to trust (the suite loads it): nothing
    # written, so nothing verified.
    said = " ".join(_without_escapes(screen).split())
    if "nothing to change" in said or "nothing written: the host was busy" in said:
        wanted = wanted[:wanted.index("git-tune: verifying")] + ["next: tune"]
    missing = _in_order(wanted, _screen_shape(screen))
    assert not missing, (missing, bar[0][-200:], screen[-2000:])

    demo = os.path.join(os.environ["XDG_CACHE_HOME"], "git-tune", "demo-repo")
    assert os.path.isdir(os.path.join(demo, ".git")), demo
    # The CI job's `--repo .` is the job's checkout: a repository of its own, of a few
    # files (what the command does, not what it measures, is the claim here).
    job = tmp_path / "job"
    repogen.generate(str(job), repogen.RepoShape(depth=1, width=3, files=10))
    ran = []
    work = tmp_path / "work"
    work.mkdir()
    for line in _command_lines(text):
        merged = (glob.glob(str(work / "profiles" / "*.json")) or ["-"])[0]
        command = line.split(" #")[0].strip()
        for name, value in _stand_ins(demo, merged).items():
            command = command.replace(name, value)
        if "ssd-2core.json" in command:      # the hosts' profiles fleet merge reads
            command += " && cp ssd-2core.json host1.json && cp ssd-2core.json host2.json"
        where = job if "--repo ." in command or "ci-runner.json" in command else work
        applied = subprocess.run(["git", "-C", demo, "config", "--local", "--get-all",
                                  "include.path"], capture_output=True).returncode == 0
        proc = subprocess.run(["bash", "-c", command], cwd=where, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if line.startswith("git-tune verify") and not applied:
            # The demo found nothing to write on this run (a busy host can leave every
            # comparison within noise): verify then refuses, naming what to run instead.
            assert proc.returncode == 2 and "applied nothing to verify" in proc.stderr, (
                line, proc.returncode, proc.stderr)
        else:
            assert proc.returncode in _allowed(line), (line, proc.returncode, proc.stdout,
                                                      proc.stderr)
        ran.append(line)
        if line.startswith("git-tune revert --scope local"):
            # The demo's write undone: no include left, and the include file gone.
            left = subprocess.run(["git", "-C", demo, "config", "--local", "--get-all",
                                   "include.path"], capture_output=True, text=True)
            assert left.returncode == 1, (line, left.stdout)
            assert not os.path.exists(os.path.join(demo, ".git", "git-tune.gitconfig"))
    assert len(ran) >= 10, ran
