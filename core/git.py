"""The one way git-tune starts git for its own bookkeeping.

Output is decoded with surrogateescape, so a file name that is not UTF-8 comes
back as a str that os.fsencode() turns into the same bytes (never a
UnicodeDecodeError). A missing git is GitError (exit 4), not a traceback.

Bookkeeping commands (index copies, scratch clones, reading config) run
with hooks switched off: `core.hooksPath` points at an empty directory, so a
repository's post-index-change or post-checkout hook never runs for git-tune's
own housekeeping. Timed runs keep what git itself would run (gitbench.py).
"""
import os
import signal
import subprocess
from typing import List, Optional

from git_tune.errors import GitError

# Hooks are looked up under core.hooksPath; /dev/null is no directory, so git finds none.
NO_HOOKS_SETTINGS = {"core.hooksPath": os.devnull}

def run(args: List[str], cwd: Optional[str] = None, env: Optional[dict] = None,
        timeout: Optional[float] = 60, input: Optional[str] = None,
        check: bool = False, hooks: bool = False,
        stdout: bool = True) -> subprocess.CompletedProcess:
    """git ARGS; GitError if git is missing, or (check=True) exits non-zero.
    stdout=False discards the output (a timed run must not wait on a pipe)."""
    if not hooks:
        env = with_config(NO_HOOKS_SETTINGS, env)
    try:
        # Its own process group, so that a timeout (or Ctrl-C) stops git *and* whatever
        # it started (hooks, checkout workers), which would otherwise keep the pipes open.
        proc = subprocess.Popen(["git", *args], cwd=cwd, env=env, text=True,
                                errors="surrogateescape", start_new_session=True,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise GitError("git is not installed (no 'git' on PATH)") from None
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise GitError(f"git {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None
    except BaseException:
        _kill_group(proc)    # Ctrl-C, SIGTERM: git stops with git-tune
        raise
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and proc.returncode:
        raise GitError(f"git {' '.join(args[:2])} failed: {first_lines(proc.stderr)}")
    return proc


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


def with_config(settings: dict, base: Optional[dict] = None) -> dict:
    """An environment in which git sees `settings` as command-line config
    (GIT_CONFIG_COUNT/KEY_n/VALUE_n), added to any already there."""
    env = dict(os.environ if base is None else base)
    start = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    for i, (k, v) in enumerate(sorted(settings.items()), start):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = str(v)
    env["GIT_CONFIG_COUNT"] = str(start + len(settings))
    return env


def first_lines(text: str, limit: int = 300) -> str:
    text = " ".join(text.strip().split())
    return text if len(text) <= limit else text[:limit] + "..."
