"""`git-tune revert`: the files from before git-tune's first write to a scope, exactly,
under git's own lock on the scope's config file."""
import contextlib
import os
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..keys import registry
from . import configwrite, journal, safefile, scopes
from .scopes import Scope
from ...errors import ConfigWriteError, UsageError


@dataclass(frozen=True)
class RevertResult:
    scope: Dict[str, Any]
    restored: Tuple[str, ...]        # back to their exact bytes from before git-tune
    include_removed_from: Optional[str]   # edited since: only our include.path was removed
    message: str
    stopped: Tuple[str, ...] = ()   # what the reverted values had started and revert ended
    kept_edits: Optional[str] = None  # a backup of git-tune's files as someone had edited them


def index_leftovers(undone: List[Dict[str, str]]) -> List[str]:
    """What the reverted values may have left in indexes git already wrote under them,
    each said once with the command that undoes it (each key's Tuner.index_leftover):
    revert restores config files, and git-tune never writes the user's index unasked."""
    out: List[str] = []
    for k, v in sorted({(k, str(v)) for values in undone for k, v in values.items()}):
        e = registry.find(k)
        text = e.index_leftover(v) if e else None
        if text and text not in out:
            out.append(text)
    return out


def nothing_to_revert(scope: Optional[Scope]) -> RevertResult:
    """What revert says where git-tune has written nothing: the state asked for is
    already there (exit 0, like `git config --unset` of a key never set is not)."""
    where = f" for scope {scope.name} ({scope.include_file})" if scope else ""
    return RevertResult(asdict(scope) if scope else {}, (), None,
                        f"nothing to revert: git-tune has written nothing{where}")


def _restore_files(scope: Scope, originals: Dict[str, Dict[str, Any]],
                   known: Dict[str, List[str]]) -> Tuple[List[str], Optional[str], Optional[str]]:
    """git-tune's own files back to their bytes; the scope's config file, under git's
    lock, too where it holds bytes git-tune left, else only without git-tune's include.
    (the files restored, the config file edited since or None, the backup that keeps
    hand edits of git-tune's own files or None)"""
    restored, removed_from = [], None
    config = scope.config_file
    kept = _keep_hand_edits(originals, known, skip=config)
    with contextlib.ExitStack() as stack:
        lock = stack.enter_context(safefile.git_lock(config, journal.ledger())) if config and (
            os.path.lexists(config) or config in originals) else None
        now = lock.read() if lock else None
        edited = config is not None and now is not None and journal.digest(now) not in (
            known.get(config, []) + [originals.get(config, {}).get("sha256")])
        for path, item in sorted(originals.items()):
            if path != config:
                restored += safefile.restore_one(item)
        if lock and edited and config and now is not None:     # (edited says so)
            lock.stage(configwrite.without_include(config, scope.include_file, now))
            lock.commit()
            removed_from = config
        elif lock and config in originals:
            item = originals[config]
            if item["existed"]:
                lock.stage(safefile.backed_up_bytes(item))
                lock.commit(item.get("mode", 0o644))
            else:
                lock.remove_file()
            restored.append(config)
    return restored, removed_from, kept


def _keep_hand_edits(originals: Dict[str, Dict[str, Any]], known: Dict[str, List[str]],
                     skip: Optional[str]) -> Optional[str]:
    """A file of git-tune's own (an include file) that someone edited by hand since
    git-tune wrote it: its bytes are copied into a backup before revert puts back what
    was there before git-tune; the backup's directory, or None when nothing was edited."""
    edited = [path for path in originals if path != skip and os.path.exists(path)
              and safefile.digest(path) not in known.get(path, [])
              + [originals[path].get("sha256")]]
    if not edited:
        return None
    return safefile.backup(edited, scopes.state_dir(), "hand-edited")


def revert(scope: Scope) -> RevertResult:
    """Put back the files from before git-tune's first write to this scope.

    The scope's config file is read and replaced under git's own lock on it: where it
    holds bytes git-tune left there, it gets its exact bytes from before git-tune; where
    anyone edited it since (a `git config` a second ago included), only git-tune's
    include.path is removed and everything else stays. A backup whose bytes changed
    since git-tune made it is refused before anything is restored. Links stay links:
    bytes go to their targets.
    """
    with safefile.lock(scopes.state_dir()):
        state = journal.load_state()
        entry = state.get(scope.key)
        if not entry:
            return nothing_to_revert(scope)
        undone = [configwrite.read_include(scope.include_file),
                  *configwrite.read_per_repo(scope.include_file).values()]
        originals = entry.get("originals") or journal.originals_of(entry.get("first_backup", entry.get("backup")))
        if not originals:
            raise ConfigWriteError(f"the backup from before git-tune's first write to scope "
                                   f"{scope.name} cannot be read; nothing was reverted")
        for item in originals.values():
            if item.get("existed"):
                safefile.backed_up_bytes(item)      # every backup checked before any write
        known = entry.get("known") or {f: [d] for f, d in entry.get("written", {}).items()}
        restored, removed_from, kept = _restore_files(scope, originals, known)
        del state[scope.key]
        journal.save_state(state)
        safefile.prune_backups(scopes.state_dir(), keep=journal.referenced_backups(state))
    msg = (f"restored {', '.join(restored)} to the bytes from before git-tune"
           if restored else "restored nothing: the files were as before git-tune")
    if kept:
        msg += f"; hand edits of git-tune's files were kept in {kept}"
    leftovers = index_leftovers(undone)
    if leftovers:
        msg += "; " + "; ".join(leftovers)
    if removed_from:
        msg += f"; '{removed_from}' was edited since, so only git-tune's include.path was removed"
    # A value may have started processes (a daemon per repository): its key module
    # ends the ones nothing asks for any more.
    stopped = registry.after_revert(undone)
    if stopped:
        msg += "; " + "; ".join(stopped)
    return RevertResult(asdict(scope), tuple(restored), removed_from, msg, tuple(stopped),
                        kept)


def target(scope_spec: Optional[str], repo: Optional[str]) -> Optional[Scope]:
    """The scope `git-tune revert` reverts: the one named, or the only one git-tune wrote
    (None: it wrote none); naming none where it wrote to several is a usage error."""
    from ...probes import repo as repo_probe
    if scope_spec is not None:
        return scopes.resolve(scope_spec, repo_probe.locate(repo))
    written = journal.applied()
    if not written:
        return None
    if len(written) != 1:
        raise UsageError(f"git-tune wrote to {len(written)} scopes ("
                         + ", ".join(w.scope.name for w in written) + "); say which with --scope")
    return written[0].scope
