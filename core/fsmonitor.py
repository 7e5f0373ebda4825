"""Git's built-in fsmonitor daemon: is one running, start one, stop one, find them all.

One daemon runs per working tree (`git fsmonitor--daemon run --detach`); it
changes its directory away from the tree, so the only trace of which tree it
watches is its IPC socket, `<git dir>/fsmonitor--daemon.ipc`. Any git command
with core.fsmonitor=true starts one if none is running, and it keeps running
until stopped: git-tune stops every daemon its own measurements started, and
`revert` stops those whose repository no longer asks for one.
"""
import contextlib
import os
import shutil
from dataclasses import dataclass
from typing import Dict, List, Optional

import psutil

from . import git

IPC_NAME = "fsmonitor--daemon.ipc"
LINUX_WATCHES = "/proc/sys/fs/inotify/max_user_watches"


@dataclass(frozen=True)
class Daemon:
    pid: int
    git_dir: str


def state_dir(git_dir: str) -> str:
    """Where a daemon keeps its cookie files (made by its first start)."""
    return os.path.join(git_dir, "fsmonitor--daemon")


def running(worktree: str) -> bool:
    proc = git.run(["fsmonitor--daemon", "status"], cwd=worktree)
    return proc.returncode == 0


def start(worktree: str, env: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Start the daemon for this working tree; None, or git's reason for refusing it
    (no daemon in this git, a network file system, ...)."""
    proc = git.run(["fsmonitor--daemon", "start"], cwd=worktree, env=env)
    if proc.returncode == 0:
        return None
    return git.first_lines(proc.stderr or proc.stdout) or f"exit {proc.returncode}"


def stop(worktree: str) -> None:
    git.run(["fsmonitor--daemon", "stop"], cwd=worktree)


def all_running() -> List[Daemon]:
    """This user's daemons, each with the git directory it serves."""
    out = []
    for p in psutil.process_iter(["cmdline", "uids"]):
        try:
            cmd = p.info["cmdline"] or []
            if "fsmonitor--daemon" not in cmd or p.info["uids"].real != os.getuid():
                continue
            for c in p.net_connections(kind="unix"):
                if isinstance(c.laddr, str) and c.laddr.endswith("/" + IPC_NAME):
                    out.append(Daemon(p.pid, os.path.dirname(c.laddr)))
                    break
        except (psutil.Error, OSError):
            continue      # gone, or not ours to inspect
    return out


def wanted(git_dir: str) -> bool:
    """Whether the repository's effective config still asks for the built-in daemon."""
    proc = git.run(["--git-dir", git_dir, "config", "--type=bool", "--get", "core.fsmonitor"])
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def stop_unwanted() -> List[str]:
    """Stop every daemon of this user whose repository no longer sets core.fsmonitor;
    the git dirs whose daemon was stopped."""
    stopped = []
    for d in all_running():
        if wanted(d.git_dir):
            continue
        worktree = _worktree_of(d.git_dir)
        if worktree:
            stop(worktree)
        else:
            psutil.Process(d.pid).terminate()
        stopped.append(d.git_dir)
    return stopped


def below(top: str) -> List[Daemon]:
    """The running daemons whose git directory is `top` or below it (a submodule's,
    `<git dir>/modules/...`)."""
    root = os.path.realpath(top)
    return [d for d in all_running()
            if os.path.commonpath([root, os.path.realpath(d.git_dir)]) == root]


def submodule_state_dirs(git_dir: str) -> List[str]:
    """The daemons' cookie directories in the git directories of git_dir's submodules
    (`modules/`, nested ones included): the rest of git_dir, objects and all, is not
    walked."""
    return [os.path.join(d, name) for d, dirs, _ in os.walk(os.path.join(git_dir, "modules"))
            for name in dirs if name == "fsmonitor--daemon"]


def stop_started(before: List[Daemon], top: str, states_before: List[str]) -> List[str]:
    """Stop the daemons in `top` and below it that were not running `before`: git
    commands run with core.fsmonitor=true in their environment start one in every
    submodule they recurse into. Their cookie directories go too, where they were not
    there before (`states_before`: submodule_state_dirs(top)). The git dirs whose
    daemon was stopped."""
    old = {d.pid for d in before}
    stopped = []
    for d in below(top):
        if d.pid in old:
            continue
        proc = git.run(["--git-dir", d.git_dir, "fsmonitor--daemon", "stop"])
        if proc.returncode != 0:
            with contextlib.suppress(psutil.Error):
                psutil.Process(d.pid).terminate()
        stopped.append(d.git_dir)
    for state in set(submodule_state_dirs(top)) - set(states_before):
        shutil.rmtree(state, ignore_errors=True)
    return stopped


def _worktree_of(git_dir: str) -> Optional[str]:
    """The working tree a git dir belongs to: its parent for `.git`, the `gitdir` file's
    for a linked worktree (git rev-parse cannot say: given --git-dir, it takes the
    current directory as the tree)."""
    if os.path.basename(git_dir) == ".git":
        return os.path.dirname(git_dir)
    try:
        with open(os.path.join(git_dir, "gitdir")) as f:
            return os.path.dirname(f.read().strip())
    except OSError:
        return None


def max_user_watches() -> Optional[int]:
    """inotify watches one user may hold (the daemon needs one per directory)."""
    try:
        with open(LINUX_WATCHES) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
