"""The installed git: where, which version, which tuning keys it reads, and their values."""
import os
import shutil
import tempfile
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .. import git
from ..errors import GitError
from ..models import catalogue
from . import memo
from .layout import RepoLayout
from .scratch import scratch_dir


@dataclass(frozen=True)
class ConfigValue:
    key: str
    value: str
    scope: str       # system | global | local | worktree | command
    origin: str      # file:/path or command line


@dataclass(frozen=True)
class GitFacts:
    binary: Optional[str]
    version: Optional[str]
    keys_understood: Dict[str, str]      # key -> first version
    keys_not_understood: Dict[str, str]  # key -> version that would be needed
    values: Dict[str, List[Dict[str, str]]]     # key -> every setting, last wins
    untracked_cache_works: Optional[bool]
    untracked_cache_detail: str
    fsmonitor_daemon: Optional[bool]
    fsmonitor_detail: str
    notes: Tuple[str, ...]
    skip_hash: Optional[bool] = None     # writes a zero index trailer with index.skipHash
    skip_hash_detail: str = "not tested"


def run_git(args: List[str], cwd: Optional[str] = None, timeout: float = 30,
            env: Optional[Dict[str, str]] = None,
            repo: Optional[RepoLayout] = None) -> "subprocess.CompletedProcess[str]":
    """git for the probes: hooks off, GitError when git is missing (git.run)."""
    return git.run(args, cwd=cwd, timeout=timeout, env=env, repo=repo)


def _version_or_problem() -> Tuple[Optional[catalogue.Version], str]:
    if not shutil.which("git"):
        return None, "git is not installed (no 'git' on PATH)"
    try:
        proc = run_git(["--version"])
    except GitError as e:
        return None, str(e)
    if proc.returncode:
        # git --version reads the configuration: a syntax error stops even that.
        return None, f"git cannot run: {git.first_lines(proc.stderr)}"
    try:
        return catalogue.parse_version(proc.stdout), ""
    except ValueError:
        return None, f"git answered --version with {git.first_lines(proc.stdout)!r}"


def git_version() -> Optional[catalogue.Version]:
    return _version_or_problem()[0]


def require_git() -> catalogue.Version:
    """The installed git's version, or GitError (exit 4) saying why there is none."""
    version, problem = _version_or_problem()
    if version is None:
        raise GitError(problem)
    return version


def config_values(layout: Optional[RepoLayout]) -> Dict[str, List[ConfigValue]]:
    """Every config entry whose key is in the catalogue, with scope and origin (layout:
    the located repository, or None outside any)."""
    proc = run_git(["config", "--list", "--show-origin", "--show-scope", "-z"], repo=layout)
    wanted = {k.lower(): k for k in catalogue.catalogue()}
    out: Dict[str, List[ConfigValue]] = {}
    fields = proc.stdout.split("\0")
    for i in range(0, len(fields) - 2, 3):
        scope, origin, kv = fields[i], fields[i + 1], fields[i + 2]
        key, _, value = kv.partition("\n")
        name = wanted.get(key.lower())
        if name:
            out.setdefault(name, []).append(ConfigValue(name, value, scope, origin))
    return out


UNTRACKED_CACHE_MAX_AGE = 30 * 86400


def _fs_key(scratch: str, version: str) -> str:
    st = os.stat(scratch)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)} git {version}"


def untracked_cache_verdict(scratch: Optional[str], version: str,
                            run_test: bool) -> Tuple[Optional[bool], str]:
    """Git's own test, remembered per file system and git version because it
    sleeps for seconds: a quick probe reuses a verdict or reports none."""
    if not scratch:
        return None, "not tested: no writable scratch directory on this file system"
    key = _fs_key(scratch, version)
    remembered = memo.load("untracked-cache", key, UNTRACKED_CACHE_MAX_AGE)
    if remembered and not run_test:
        return remembered["works"], remembered["detail"] + " (remembered)"
    if not run_test:
        return None, ("not tested in a quick probe: git's test sleeps for seconds; "
                      "`git-tune probe --thorough` runs it once and remembers the verdict")
    works, detail = test_untracked_cache(scratch)
    if works is not None:
        memo.save("untracked-cache", key, {"works": works, "detail": detail})
    return works, detail


def test_untracked_cache(scratch: str) -> Tuple[Optional[bool], str]:
    """Run git's own mtime test in a throw-away repository on the same file system."""
    repo = os.path.join(scratch, "ut")
    init = run_git(["init", "-q", repo])
    if init.returncode:
        return None, f"not tested: git init failed: {init.stderr.strip()}"
    proc = run_git(["update-index", "--test-untracked-cache"], cwd=repo, timeout=60)
    detail = " ".join((proc.stdout + proc.stderr).split()) or "no output"
    return proc.returncode == 0, detail


def fsmonitor_daemon(repo: Optional[str],
                     layout: Optional[RepoLayout] = None) -> Tuple[Optional[bool], str]:
    """Whether this git has the daemon, asked in the directory repo (of the located
    repository `layout`, named explicitly when given)."""
    proc = run_git(["fsmonitor--daemon", "status"], cwd=repo or None, repo=layout)
    text = " ".join((proc.stdout + proc.stderr).split())
    if "not supported" in text or "is not a git command" in text:
        return False, text
    if not repo:
        return None, "not checked outside a repository"
    return True, text or "available"


HASH_BYTES = 20     # the SHA-1 trailer; a SHA-256 index ends in 32, the last 20 of them too


def zero_trailer(index_file: str) -> bool:
    """Whether the index ends in zeros instead of its hash (written with index.skipHash)."""
    with open(index_file, "rb") as f:
        f.seek(-HASH_BYTES, os.SEEK_END)
        return f.read() == bytes(HASH_BYTES)


def skip_hash(scratch: Optional[str]) -> Tuple[Optional[bool], str]:
    """Whether this git honours index.skipHash, from what it writes: an index in a
    throw-away repository, whose trailer is zeros when the hash was skipped. The
    repository goes in the system's temporary directory where it can: what git writes
    is git's, not the file system's, and a `git init` on network storage without
    attribute caching costs a round trip a file."""
    with scratch_dir([tempfile.gettempdir()]) as tmp:    # removed even if killed: next run
        if tmp:
            return _skip_hash_in(tmp)
    # No temporary directory to be had: the scratch, where there is one.
    if not scratch:
        return None, "not tested: no writable scratch directory"
    return _skip_hash_in(scratch)


def _skip_hash_in(directory: str) -> Tuple[Optional[bool], str]:
    repo = os.path.join(directory, "skiphash")
    if run_git(["init", "-q", repo]).returncode:
        return None, "not tested: git init failed"
    proc = run_git(["-c", "index.skipHash=true", "update-index", "--force-write-index"], cwd=repo)
    index = os.path.join(repo, ".git", "index")
    if proc.returncode or not os.path.exists(index):
        return None, f"not tested: {git.first_lines(proc.stderr) or 'no index written'}"
    if zero_trailer(index):
        return True, "honoured (an index written with it ends in a zero trailer)"
    return False, "ignored (an index written with it still ends in its hash)"


def git_facts(layout: Optional[RepoLayout], scratch: Optional[str],
              thorough: bool = False) -> GitFacts:
    """git's facts, for the located repository `layout` (None outside any)."""
    notes = []
    repo = layout.top if layout else None
    binary = shutil.which("git")
    version = git_version()
    if not binary or not version:
        return GitFacts(binary, None, {}, {}, {}, None, "git not found", None, "git not found",
                        ("git is not on PATH: nothing about git could be probed",))
    understood = catalogue.understood(version)
    not_understood = {n: catalogue.format_version(k.since_linux if (k.since_linux and sys.platform.startswith("linux")) else k.since)
                      for n, k in catalogue.catalogue().items() if n not in understood}
    values = {k: [v.__dict__ for v in vs] for k, vs in config_values(layout).items()}
    for key, settings in values.items():
        if key not in understood:
            notes.append(f"{key} is set ({settings[-1]['origin']}) but git "
                         f"{catalogue.format_version(version)} ignores it")
    ut, ut_detail = untracked_cache_verdict(scratch, catalogue.format_version(version), thorough)
    fsm, fsm_detail = fsmonitor_daemon(repo, layout)
    sh, sh_detail = skip_hash(scratch)
    return GitFacts(binary, catalogue.format_version(version),
                    {n: catalogue.format_version(k.since) for n, k in understood.items()},
                    not_understood, values, ut, ut_detail, fsm, fsm_detail, tuple(notes),
                    sh, sh_detail)
