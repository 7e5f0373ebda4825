"""Where git-tune's include file lives for each scope, and which config file includes it.

    global      ~/.config/git-tune/global.gitconfig, included from the global config
    system      /etc/git-tune/system.gitconfig, included from the system config
    agent       ~/.config/git-tune/agent.gitconfig, included from the global config: the
                agent's trace2 settings (advisor/agent/switch.py)
    local       <common git dir>/git-tune.gitconfig, included from the repository's config
                (it travels and disappears with the repository); in a linked worktree
                the main repository's config, the only one git reads for every worktree
    file:PATH   PATH only; including it is left to the user

git-tune never edits a user's config file by hand: the include directive is
added and removed with `git config` itself.
"""
import os
from dataclasses import dataclass
from typing import List, Optional

from ... import git, ownpaths
from ...errors import GitError, UsageError
from ...probes.layout import RepoLayout

SYSTEM_DIR = "/etc/git-tune"


@dataclass(frozen=True)
class Scope:
    name: str                    # global | system | local | file
    include_file: str
    config_file: Optional[str]   # the file that gets include.path (None for file:)
    git_flag: Optional[str]      # --global / --system / --local

    @property
    def key(self) -> str:
        return f"{self.name}:{self.include_file}"


def state_dir() -> str:
    """git-tune's state directory, made private and checked (ownpaths)."""
    return ownpaths.state_dir()


def _global_config_file() -> str:
    explicit = os.environ.get("GIT_CONFIG_GLOBAL")
    if explicit:
        return explicit
    xdg = os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "git", "config")
    home = os.path.expanduser("~/.gitconfig")
    return xdg if (os.path.exists(xdg) and not os.path.exists(home)) else home


def _system_config_file() -> str:
    explicit = os.environ.get("GIT_CONFIG_SYSTEM")
    if explicit:
        return explicit
    proc = git.run(["config", "--system", "--show-origin", "--list"])
    for line in proc.stdout.splitlines():
        if line.startswith("file:"):
            return line[5:].split("\t", 1)[0]
    return "/etc/gitconfig"


def resolve(spec: str, layout: Optional[RepoLayout] = None) -> Scope:
    """The scope `spec` names; local needs the located repository (`layout`): its common
    git directory, since git never reads `.git/worktrees/W/config` (a linked worktree's)."""
    if spec == "global":
        inc = os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"),
                           "git-tune", "global.gitconfig")
        return Scope("global", inc, _global_config_file(), "--global")
    if spec == "agent":
        # The agent's trace2 settings: a file of their own beside the global one, so that
        # `agent disable` (or `revert --scope agent`) undoes them and nothing else. git
        # reads trace2.* from the system and global config only.
        inc = os.path.join(os.path.dirname(resolve("global").include_file), "agent.gitconfig")
        return Scope("agent", inc, _global_config_file(), "--global")
    if spec == "system":
        if os.environ.get("GIT_CONFIG_NOSYSTEM"):
            raise UsageError("GIT_CONFIG_NOSYSTEM is set: git reads no system config to include from")
        return Scope("system", os.path.join(SYSTEM_DIR, "system.gitconfig"), _system_config_file(),
                     "--system")
    if spec == "local":
        if not layout:
            raise UsageError("--scope local needs a repository (--repo or run inside one)")
        return Scope("local", os.path.join(layout.common_dir, "git-tune.gitconfig"),
                     os.path.join(layout.common_dir, "config"), "--local")
    if spec.startswith("file:") and len(spec) > 5:
        return Scope("file", os.path.abspath(os.path.expanduser(spec[5:])), None, None)
    raise UsageError(f"unknown scope '{spec}': use global, system, local or file:PATH")


def owned_by_git_tune(path: str) -> bool:
    """Whether a config file is one git-tune writes (an include file of any scope, or a
    per-repository file beside one): its values are git-tune's, never a user's conflict."""
    if not path:
        return False
    global_dir = os.path.dirname(resolve("global").include_file)
    parent = os.path.dirname(path)
    return (os.path.basename(path) == "git-tune.gitconfig"
            or parent in (global_dir, SYSTEM_DIR)
            or (os.path.basename(parent) == "repos" and os.path.dirname(parent) in (global_dir, SYSTEM_DIR)))


def include_paths(scope: Scope) -> List[str]:
    """The include.path values already in the scope's config file."""
    if not scope.config_file:
        return []
    proc = git.run(["config", "--file", scope.config_file, "-z", "--get-all", "include.path"])
    if proc.returncode not in (0, 1):
        raise GitError(f"git cannot read '{scope.config_file}': {git.first_lines(proc.stderr)}")
    return [os.path.expanduser(p) for p in proc.stdout.split("\0") if p]
