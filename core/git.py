"""The one way git-tune starts git for its own bookkeeping.

Output is decoded with surrogateescape, so a file name that is not UTF-8 comes
back as a str that os.fsencode() turns into the same bytes (never a
UnicodeDecodeError). A missing git is GitError (exit 4), not a traceback.

Bookkeeping commands (index copies, scratch clones, reading config) run
with hooks switched off: `core.hooksPath` points at an empty directory, so a
repository's post-index-change or post-checkout hook never runs for git-tune's
own housekeeping. Timed runs keep what git itself would run (gitbench.py).

Every git starts from the caller's environment *less* what points git at a repository:
git exports GIT_DIR, GIT_INDEX_FILE, GIT_WORK_TREE, GIT_PREFIX... to hooks and aliases
(`git rev-parse --local-env-vars`), and dotfile setups export GIT_DIR and GIT_WORK_TREE.
Inherited, they steer git-tune's scratch clone, its throw-away repositories and its
index copies onto the user's repository (in a pre-commit hook a scratch checkout emptied
the commit being made). The user's repository is located once from those variables
(`caller_environ`, probes/repo.py `locate`), and every run against it names it
explicitly (`repo=`: GIT_DIR and GIT_WORK_TREE set from the located layout).
"""
import math
import os
import select
import signal
import subprocess
import time
from typing import IO, Any, Dict, List, Mapping, Optional, Protocol, Union

from .errors import GitError


class Located(Protocol):
    """A located repository (probes/layout.py RepoLayout), as a run against it names it."""

    @property
    def git_dir(self) -> str: ...

    @property
    def worktree(self) -> Optional[str]: ...


# Hooks are looked up under core.hooksPath; /dev/null is no directory, so git finds none.
NO_HOOKS_SETTINGS = {"core.hooksPath": os.devnull}

# environment.c's local_repo_env (what `git rev-parse --local-env-vars` prints, the same
# from 2.39 to 2.55): what git exports to hooks, naming the repository it works on.
LOCAL_REPO_ENV = ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
                  "GIT_CONFIG_COUNT", "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE",
                  "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_INDEX_FILE",
                  "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
                  "GIT_SHALLOW_FILE", "GIT_COMMON_DIR")
# Not repository-local for git, but they change what git-tune's own runs find or match:
# discovery's limits, a namespace, the index format of every index written, how
# pathspecs are read (the checkout batch's pathspec file), a push's quarantine.
STEERING_ENV = ("GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_NAMESPACE",
                "GIT_INDEX_VERSION", "GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS",
                "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_QUARANTINE_PATH",
                "GIT_INTERNAL_SUPER_PREFIX")
# What locating the user's repository honours, as git does for the caller's own commands.
LOCATING_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def _steers(name: str) -> bool:
    return (name in LOCAL_REPO_ENV or name in STEERING_ENV
            or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")))


def clean_environ() -> Dict[str, str]:
    """The caller's environment without anything that points git at a repository, and
    with git's trace2 event target off unless the caller set one: git-tune's own git runs
    are not the user's commands, and the agent (trace2.eventTarget in the global config)
    must not count them."""
    env = {k: v for k, v in os.environ.items() if not _steers(k)}
    env.setdefault("GIT_TRACE2_EVENT", "0")
    return env


def caller_environ() -> Dict[str, str]:
    """clean_environ() plus the variables that say where the caller's repository is: for
    locating it (once), never for running git against it or anything else."""
    env = clean_environ()
    env.update({k: os.environ[k] for k in LOCATING_ENV if k in os.environ})
    return env


def repo_environ(repo: Located, env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """env (default: clean_environ()) naming `repo` (a located layout: git_dir, worktree)
    explicitly, as GIT_DIR and GIT_WORK_TREE."""
    env = dict(clean_environ() if env is None else env)
    env["GIT_DIR"] = repo.git_dir
    if repo.worktree:
        env["GIT_WORK_TREE"] = repo.worktree
    else:
        env.pop("GIT_WORK_TREE", None)
    return env


def run(args: List[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = 60, input: Optional[str] = None,
        check: bool = False, hooks: bool = False,
        stdout: Union[bool, IO[str]] = True,
        repo: Optional[Located] = None) -> "subprocess.CompletedProcess[str]":
    """git ARGS; GitError if git is missing, or (check=True) exits non-zero.
    stdout=False discards the output (a timed run must not wait on a pipe); a file
    receives it (the result's stdout is then None).
    env defaults to clean_environ(); repo (a located layout) names the user's
    repository explicitly, for every run that works on it."""
    if env is None:
        env = clean_environ()
    if repo is not None:
        env = repo_environ(repo, env)
    if not hooks:
        env = with_config(NO_HOOKS_SETTINGS, env)
    # Its own process group, so that a timeout (or Ctrl-C) stops git *and* whatever
    # it started (hooks, checkout workers), which would otherwise keep the pipes open.
    proc = start(["git", *args], cwd=cwd, env=env, text=True,
                 errors="surrogateescape", start_new_session=True,
                 stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                 stdout=(stdout if not isinstance(stdout, bool) else
                         subprocess.PIPE if stdout else subprocess.DEVNULL),
                 stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise GitError(f"git {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None
    except BaseException:
        _kill_group(proc)    # Ctrl-C, SIGTERM: git stops with git-tune
        raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and done.returncode:
        raise GitError(f"git {' '.join(args[:2])} failed: {first_lines(done.stderr)}")
    return done


# How long a start refused for want of a task (EAGAIN) is retried before it fails.
START_PATIENCE_S = 2.0


class ExactWait(subprocess.Popen):  # type: ignore[type-arg]
    """Popen whose wait(timeout) returns as the child exits: through a pidfd (Linux 5.3),
    readable at the child's exit; where there is none (an older kernel, a seccomp
    filter), subprocess's own wait.

    That one polls, sleeping 1 ms, then 2, 4... in between, and communicate(timeout)
    waits that way once the pipes close. A git run exits a moment after it closes them,
    so a run of a few milliseconds took one sleep more or none, by a race a setting can
    move (a thread more changes how git exits): a bias no number of runs averages away
    (docs/planner.md, "How a run is timed")."""

    def _wait(self, timeout: Optional[float]) -> Optional[int]:
        if timeout is None or self.returncode is not None:
            return super()._wait(timeout)    # type: ignore[misc, no-any-return]
        exited = _exited_within(self.pid, timeout)
        if exited is None:
            return super()._wait(timeout)    # type: ignore[misc, no-any-return]
        if not exited:
            raise subprocess.TimeoutExpired(self.args, timeout)
        # It has exited: the blocking wait reaps it at once.
        return super()._wait(None)   # type: ignore[misc, no-any-return]


POLL_MAX_MS = 2 ** 31 - 1     # poll() takes an int of milliseconds


def _exited_within(pid: int, timeout: float) -> Optional[bool]:
    """Whether the child `pid` exits within `timeout` seconds (it is not reaped), woken
    at its exit through a pidfd; None where there is no pidfd (before Linux 5.3, under a
    seccomp filter). poll, not select: a pidfd may be above select's 1,024."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    try:
        waiting = select.poll()
        waiting.register(fd, select.POLLIN)
        return bool(waiting.poll(math.ceil(min(max(0.0, timeout) * 1000, POLL_MAX_MS))))
    finally:
        os.close(fd)


def start(argv: List[str], **popen: Any) -> "subprocess.Popen[Any]":
    """subprocess.Popen(argv, **popen), where a missing git is GitError and a fork
    refused for want of a task is retried for START_PATIENCE_S.

    Under a cgroup's pids.max every thread counts: a git that just exited, or a helper
    thread of git-tune's own still ending, holds a task for a moment, and fork() then
    fails with EAGAIN although the next try succeeds. Past the patience it is GitError,
    naming the limit."""
    pause, waited = 0.005, 0.0
    while True:
        try:
            return ExactWait(argv, **popen)
        except FileNotFoundError:
            if argv[0] != "git":
                raise
            raise GitError("git is not installed (no 'git' on PATH)") from None
        except BlockingIOError:
            if waited >= START_PATIENCE_S:
                raise GitError(f"could not start {argv[0]} for {START_PATIENCE_S:.0f} s: "
                               "no process or thread left to this process "
                               "(a cgroup's pids.max, or ulimit -u)") from None
            time.sleep(pause)
            waited += pause
            pause = min(pause * 2, 0.25)


def kill_group(pid: int) -> None:
    """SIGKILL to the process group `pid` leads (a run started in a session of its own),
    where it is still there."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: "subprocess.Popen[str]") -> None:
    kill_group(proc.pid)
    proc.communicate()


def with_config(settings: Mapping[str, object],
                base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """An environment in which git sees `settings` as command-line config
    (GIT_CONFIG_COUNT/KEY_n/VALUE_n), added to any already there."""
    env = dict(clean_environ() if base is None else base)
    start = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    for i, (k, v) in enumerate(sorted(settings.items()), start):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = str(v)
    env["GIT_CONFIG_COUNT"] = str(start + len(settings))
    return env


def first_lines(text: str, limit: int = 300) -> str:
    text = " ".join(text.strip().split())
    return text if len(text) <= limit else text[:limit] + "..."
