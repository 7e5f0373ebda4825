"""`git-tune show`: what git-tune applied, where, and whether it is still current."""
import os
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ... import engine
from . import configwrite, journal, scopes
from ...errors import EngineError, GitTuneError
from ..keys import registry
from ...probes import fingerprint, gitinfo, repo as repo_probe
from ...models import catalogue

DEFAULT_MAX_AGE_DAYS = 90


@dataclass(frozen=True)
class Applied:
    scope: str
    include_file: str
    included_from: Optional[str]
    settings: Dict[str, str]
    per_repo: Dict[str, Dict[str, str]]   # git dir -> values, from includeIf blocks
    written: float
    stale: Tuple[str, ...]
    index_state: Dict[str, str]       # on-disk facts that config alone does not change
    todo: Tuple[str, ...]


def _host_changed(entry: journal.Applied) -> bool:
    """The host or the repository's file system differs from the calibration's."""
    if not entry.repo or not os.path.isdir(entry.repo) \
            or not fingerprint.comparable(entry.fingerprint):
        return False
    return fingerprint.here(entry.repo) != entry.fingerprint


def _index_state(entry: journal.Applied) -> Tuple[Dict[str, str], List[str]]:
    """What each written key's module finds on disk (an index not yet rewritten)."""
    state: Dict[str, str] = {}
    todo: List[str] = []
    if not entry.repo:
        return state, todo
    for key, value in entry.settings.items():
        known = registry.find(key)
        facts, to_do = known.on_disk(value, entry.repo) if known else ({}, [])
        state.update(facts)
        todo += to_do
    return state, todo


def _grew(entry: journal.Applied) -> Optional[str]:
    if not entry.repo or not entry.entries or not os.path.isdir(entry.repo):
        return None
    layout = repo_probe.locate(entry.repo)
    if not layout or not os.path.exists(layout.index_file):
        return None
    try:
        now = engine.index_read(layout.index_file, object_format=layout.object_format).entries
    except EngineError:
        return None
    if now >= 2 * entry.entries:
        return f"the repository grew from {entry.entries} to {now} files"
    return None


def _written(include_file: str) -> Dict[str, str]:
    """The values the include file holds now ({} when it is absent or unreadable)."""
    try:
        return configwrite.read_include(include_file)
    except Exception:   # a damaged include file: _stale says so
        return {}


def scope_spec(scope: scopes.Scope) -> str:
    """The scope as --scope names it."""
    return scope.name if scope.name != "file" else "file:" + scope.include_file


def applied_to(spec: str, repo: Optional[str] = None) -> Optional[journal.Applied]:
    """What git-tune wrote to the scope `spec` names (as --scope takes it), or None.
    "local" names one include file per repository: `repo`'s (a worktree of it, or the
    repository git-tune measured there), never another repository's local write."""
    found = [e for e in journal.applied() if scope_spec(e.scope) == spec]
    if spec != "local":
        return found[0] if found else None
    if repo is None:
        return None
    same = next((e for e in found if e.repo == repo), None)
    if same is not None or not found:
        return same
    try:                                 # another worktree of the same repository
        layout = repo_probe.locate(repo)
    except GitTuneError:                 # gone, or refused by git since
        return None
    include = scopes.resolve("local", layout).include_file if layout else None
    return next((e for e in found if e.scope.include_file == include), None)


def edited_outside(entry: journal.Applied) -> bool:
    """Whether the include file no longer holds what git-tune wrote there (someone edited
    it, or it cannot be read); an interrupted write is not counted as an edit."""
    try:
        actual = configwrite.read_include(entry.scope.include_file)
    except Exception:   # a damaged include file is itself the finding
        return not entry.pending
    return not entry.pending and actual != entry.settings


def stale_reasons(entry: journal.Applied, now_git: Optional[str], max_age_days: float
                  ) -> List[str]:
    """Why a write's measurement no longer holds (none: it does); now_git: the git
    version in use now (the agent passes the one the user's commands ran)."""
    scope = entry.scope
    stale = []
    if entry.pending:
        stale.append("a git-tune write here was interrupted (killed) before it finished")
    elif edited_outside(entry):
        stale.append(f"{scope.include_file} was changed outside git-tune")
    if scope.config_file and scope.include_file not in scopes.include_paths(scope):
        stale.append(f"{scope.config_file} no longer includes it")
    if now_git and now_git != entry.git_version:
        stale.append(f"git changed from {entry.git_version} to {now_git}")
    if _host_changed(entry):
        stale.append("the host or its storage changed since calibration")
    grew = _grew(entry)
    if grew:
        stale.append(grew)
    age_days = (time.time() - entry.time) / 86400
    if age_days > max_age_days:
        stale.append(f"written {age_days:.0f} days ago (older than {max_age_days:g})")
    return stale


def show(max_age_days: float = DEFAULT_MAX_AGE_DAYS) -> List[Applied]:
    out = []
    version = gitinfo.git_version()
    now_git = catalogue.format_version(version) if version else None
    for entry in journal.applied():
        scope = entry.scope
        stale = stale_reasons(entry, now_git, max_age_days)
        index_state, todo = _index_state(entry)
        if stale:
            spec = scope_spec(scope)
            todo.append(f"re-tune: git-tune auto --scope {spec}"
                        + (f" --repo {entry.repo}" if entry.repo else "")
                        + f"; or undo: git-tune revert --scope {spec}")
        per_repo = configwrite.read_per_repo(scope.include_file)
        if per_repo != entry.per_repo:
            stale.append("the per-repository files were changed outside git-tune")
        # What git reads, not what the journal meant to write: a write that failed half
        # way (a full disk) may have journalled values that never reached the file.
        out.append(Applied(scope.name, scope.include_file, scope.config_file,
                           _written(scope.include_file), per_repo, entry.time, tuple(stale),
                           index_state, tuple(todo)))
    return out
