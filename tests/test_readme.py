"""The README's commands are the CLI's: every `git-tune ...` it shows, in a code block or
inline (the commands table's synopses included), names commands and options that exist."""
import os
import re
import shlex

import click

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
    screen = re.search(r"```text\n(.*?)```", text, re.S).group(1)
    assert "git-tune auto:" in screen and "verdict" in screen
    wide = [line for line in screen.splitlines() if len(line) > 80]
    assert not wide, wide
