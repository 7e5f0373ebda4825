"""git-tune's record of what it wrote: the state file (one entry a scope, saved before
any file changes), the backups each entry still needs, and the digests by which a file
git-tune left is told from one someone edited since."""
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Set

from ... import __version__, ownpaths, strictjson
from . import safefile, scopes
from .scopes import Scope
from ...errors import ConfigWriteError


STATE_FILE = "applied.json"


def ledger() -> str:
    """Where git-tune records the `<file>.lock` it holds (safefile.git_lock)."""
    return os.path.join(scopes.state_dir(), "held-locks")


def state_path() -> str:
    return os.path.join(scopes.state_dir(), STATE_FILE)


def load_state() -> Dict[str, Dict[str, Any]]:
    """The state file's entries. One that is not the user's own regular file is refused
    (UnsafeState): its backups would be written into the user's config files."""
    data = ownpaths.read_file(os.path.join(ownpaths.state_dir(create=False), STATE_FILE))
    try:
        state = strictjson.loads(data) if data is not None else {}
    except ValueError:
        return {}
    # git-tune's own file, but a damaged one must not end a command in a traceback:
    # an entry that is no record of a write is not one.
    if not isinstance(state, dict):
        return {}
    return {k: e for k, e in state.items() if isinstance(e, dict) and isinstance(e.get("scope"), dict)}


@dataclass(frozen=True)
class Applied:
    """One scope git-tune wrote, as the state file records it (read-only view)."""

    scope: Scope
    settings: Dict[str, str]
    per_repo: Dict[str, Dict[str, str]]
    git_version: str
    fingerprint: str
    repo: Optional[str]
    entries: Optional[int]
    time: float
    pending: bool


def applied() -> List[Applied]:
    """Every scope git-tune has written, oldest key first; entries it cannot read are
    skipped (the state file is git-tune's own, but may come from an older version)."""
    out = []
    for _, e in sorted(load_state().items()):
        try:
            out.append(Applied(Scope(**e["scope"]), dict(e["settings"]), e.get("per_repo", {}),
                               e.get("git_version", ""), e.get("fingerprint", ""),
                               e.get("repo"), e.get("entries"), float(e.get("time", 0)),
                               bool(e.get("pending"))))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def save_state(state: Dict[str, Dict[str, Any]]) -> None:
    try:
        ownpaths.write_file(state_path(), json.dumps(state, indent=1, sort_keys=True).encode())
    except OSError as e:
        raise ConfigWriteError(safefile.describe_os_error(e, "record state in", state_path()))


def read_bytes(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigWriteError(safefile.describe_os_error(e, "read", path)) from None


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def digest(data: Optional[bytes]) -> Optional[str]:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def entry(state: Dict[str, Dict[str, Any]], scope: Scope, files: Dict[str, Optional[str]], *,
          settings: Dict[str, str], per_repo: Dict[str, Dict[str, str]], provenance: Dict[str, Any],
          backup_dir: str, pending: bool, origins: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The state entry for this write. It is saved *before* any file changes (pending), so a
    run killed half way still leaves revert the backup from before git-tune's first write,
    and every digest git-tune may have left in each file (`known`): a file holding one of
    them was not edited by the user since."""
    prev = state.get(scope.key) or {}
    known = {path: list(digests) for path, digests in prev.get("known", {}).items()}
    with open(os.path.join(backup_dir, "manifest.json")) as f:
        manifest = json.load(f)
    backed_up = {item["path"]: item.get("sha256") for item in manifest["files"]}
    # What each file was before git-tune first touched it: revert's target.
    originals = dict(prev.get("originals") or originals_of(prev.get("first_backup")))
    for item in manifest["files"]:
        originals.setdefault(item["path"], item)
    for path, text in files.items():
        for d in (originals[path].get("sha256"), backed_up.get(path),
                  digest(encode(text)) if text is not None else None):
            if d and d not in known.setdefault(path, []):
                known[path].append(d)
    return {"scope": asdict(scope), "settings": settings, "per_repo": per_repo,
            "backup": backup_dir, "first_backup": prev.get("first_backup", prev.get("backup", backup_dir)),
            "originals": originals, "known": known, "pending": pending, "time": time.time(),
            "origins": dict(origins or {}),
            "git_tune_version": __version__, **provenance}


def restamp(scope: Scope, provenance: Dict[str, Any]) -> None:
    """Record that the scope's values were measured again with `provenance` (git
    version, host, repository) and stand as they are: no file changes."""
    with safefile.lock(scopes.state_dir()):
        state = load_state()
        if scope.key in state:
            state[scope.key] = {**state[scope.key], **provenance, "time": time.time()}
            save_state(state)


def referenced_backups(state: Dict[str, Dict[str, Any]]) -> Set[str]:
    """Backup directories some state entry still needs (for revert, or as its latest)."""
    keep = {e.get(k) for e in state.values() for k in ("backup", "first_backup")}
    keep |= {os.path.dirname(item["copy"]) for e in state.values()
             for item in (e.get("originals") or {}).values() if item.get("copy")}
    return {k for k in keep if k}


def originals_of(backup_dir: Optional[str]) -> Dict[str, Dict[str, Any]]:
    if not backup_dir:
        return {}
    try:
        with open(os.path.join(backup_dir, "manifest.json")) as f:
            return {item["path"]: item for item in json.load(f)["files"]}
    except (OSError, ValueError, KeyError):
        return {}
