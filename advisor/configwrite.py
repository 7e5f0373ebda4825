"""Writing tuned values safely: plan, diff, backup, atomic write, include, verify, revert.

The values live in one include file owned by git-tune; the chosen scope's
config gets one include.path to it, added with `git config`. Values the
user set elsewhere are conflicts, left alone unless --override. Every
touched file is backed up first and `revert` restores the exact bytes.
"""
import dataclasses
import difflib
import hashlib
import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

from git_tune import __version__
from git_tune.advisor import safefile, scopes
from git_tune.advisor.scopes import Scope
from git_tune.errors import ConfigWriteError, GitError, UsageError
from git_tune.models import catalogue

STATE_FILE = "applied.json"


@dataclass(frozen=True)
class Conflict:
    key: str
    value: str
    scope: str
    origin: str


@dataclass(frozen=True)
class Plan:
    scope: dict
    settings: Dict[str, str]          # what the include file will hold
    current: Dict[str, str]           # what it holds now
    conflicts: Tuple[Conflict, ...]   # user values for the same keys
    left_alone: Tuple[str, ...]       # keys not written because of a conflict
    include_present: bool
    diff: str
    changes: bool
    per_repo: Dict[str, Dict[str, str]] = field(default_factory=dict)          # git dir -> values
    current_per_repo: Dict[str, Dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Provenance:
    """What the header records and `show` checks for staleness."""

    git_version: str
    fingerprint: str
    storage_class: str
    repo: Optional[str] = None
    entries: Optional[int] = None
    reasons: Dict[str, str] = field(default_factory=dict)


def _git_config(args: List[str], cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "config", *args], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def read_include(path: str) -> Dict[str, str]:
    """The values in a git-tune include file ({} when it does not exist)."""
    if not os.path.exists(path):
        return {}
    proc = _git_config(["--file", path, "--list", "-z"])
    if proc.returncode:
        raise ConfigWriteError(f"'{path}' is not a valid git config file: {proc.stderr.strip()}")
    out = {}
    for item in filter(None, proc.stdout.split("\0")):
        k, _, v = item.partition("\n")
        if k.lower().startswith("includeif."):
            continue  # per-repository blocks: read_per_repo()
        out[catalogue.lookup(k).name if _known(k) else k] = v
    return out


def _gitdir_condition(git_dir: str) -> str:
    # The git dir itself, no trailing slash: "gitdir:/r/.git/" becomes
    # "/r/.git/**", which does not match "/r/.git" (checked with git 2.39).
    return f"gitdir:{git_dir.rstrip('/')}"


def repo_file(include_file: str, git_dir: str) -> str:
    """Where one repository's own values live, beside the include file."""
    name = os.path.basename(os.path.dirname(git_dir.rstrip("/")) if git_dir.rstrip("/").endswith("/.git")
                            else git_dir.rstrip("/")) or "repo"
    digest = hashlib.sha256(git_dir.encode()).hexdigest()[:8]
    return os.path.join(os.path.dirname(include_file), "repos", f"{name}-{digest}.gitconfig")


def read_per_repo(path: str) -> Dict[str, Dict[str, str]]:
    """git dir -> values, from the includeIf "gitdir:..." blocks of a git-tune include file."""
    if not os.path.exists(path):
        return {}
    proc = _git_config(["--file", path, "-z", "--get-regexp", r"^includeif\..*\.path$"])
    out = {}
    for item in filter(None, proc.stdout.split("\0")):
        k, _, v = item.partition("\n")
        condition = k[len("includeif."):-len(".path")]
        if condition.startswith("gitdir:"):
            out[condition[len("gitdir:"):].rstrip("/")] = read_include(v)
    return out


def _known(key: str) -> bool:
    return any(k.lower() == key.lower() for k in catalogue.catalogue())


def find_conflicts(keys: List[str], include_file: str, cwd: Optional[str]) -> List[Conflict]:
    out = []
    for key in keys:
        proc = _git_config(["--show-origin", "--show-scope", "-z", "--get-all", key], cwd=cwd)
        fields = proc.stdout.split("\0")
        for i in range(0, len(fields) - 2, 3):
            scope, origin, value = fields[i], fields[i + 1], fields[i + 2]
            if scope == "command" or origin == f"file:{include_file}":
                continue
            out.append(Conflict(key, value, scope, origin))
    return out


def render(settings: Dict[str, str], prov: Provenance,
           per_repo_files: Optional[Dict[str, str]] = None) -> str:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    lines = [f"# Written by git-tune {__version__} for git {prov.git_version} on {when}.",
             f"# Host {prov.fingerprint}, {prov.storage_class} storage"
             + (f"; repository {prov.repo} ({prov.entries} files)" if prov.repo else "") + ".",
             "# Managed file: `git-tune revert` restores what was there before,",
             "# `git-tune show` says whether it is still current."]
    for key in sorted(settings):
        if key in prov.reasons:
            lines.append(f"# {key} = {settings[key]}: {prov.reasons[key]}")
    sections: Dict[str, List[Tuple[str, str]]] = {}
    for key in sorted(settings):
        section, _, name = key.rpartition(".")
        sections.setdefault(section, []).append((name, settings[key]))
    for section, items in sections.items():
        lines.append(f"[{section}]")
        lines += [f"\t{name} = {value}" for name, value in items]
    for git_dir, path in sorted((per_repo_files or {}).items()):
        lines.append(f'[includeIf "{_gitdir_condition(git_dir)}"]')
        lines.append(f"\tpath = {path}")
    return "\n".join(lines) + "\n"



def plan(scope: Scope, settings: Dict[str, str], override: bool = False,
         cwd: Optional[str] = None, per_repo: Optional[Dict[str, Dict[str, str]]] = None) -> Plan:
    """What writing `settings` (and per-repository values, by git dir) would change.

    Per-repository values go to one file per repository, included from the
    git-tune include file through an includeIf "gitdir:..." block.
    """
    per_repo = {d.rstrip("/"): v for d, v in (per_repo or {}).items() if v}
    for k, v in list(settings.items()) + [kv for vals in per_repo.values() for kv in vals.items()]:
        catalogue.lookup(k).validate(v)
    current = read_include(scope.include_file)
    current_per_repo = read_per_repo(scope.include_file)
    conflicts = find_conflicts(sorted(settings), scope.include_file, cwd)
    left_alone = tuple(sorted({c.key for c in conflicts})) if not override else ()
    final = {k: v for k, v in settings.items() if k not in left_alone}
    include_present = scope.config_file is None or scope.include_file in scopes.include_paths(scope)
    anything = bool(final) or bool(per_repo)
    changes = final != current or per_repo != current_per_repo or (anything and not include_present)

    def lines(values, repos):
        out = [f"{k} = {v}\n" for k, v in sorted(values.items())]
        for d, vals in sorted(repos.items()):
            out += [f"[{_gitdir_condition(d)}] {k} = {v}\n" for k, v in sorted(vals.items())]
        return "".join(out)
    new_values, old_values = lines(final, per_repo), lines(current, current_per_repo)
    diff = "".join(difflib.unified_diff(old_values.splitlines(True), new_values.splitlines(True),
                                        f"{scope.include_file} (now)", f"{scope.include_file} (new)"))
    if anything and not include_present:
        diff += f"+ include.path = {scope.include_file}   (in {scope.config_file})\n"
    return Plan(asdict(scope), final, current, tuple(conflicts), left_alone, include_present,
                diff, changes, per_repo, current_per_repo)


def _state_path() -> str:
    return os.path.join(scopes.state_dir(), STATE_FILE)


def load_state() -> Dict[str, dict]:
    try:
        with open(_state_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save_state(state: Dict[str, dict]) -> None:
    try:
        safefile.write_atomic(_state_path(), json.dumps(state, indent=1, sort_keys=True).encode())
    except OSError as e:
        raise ConfigWriteError(safefile.describe_os_error(e, "record state in", _state_path()))


def _validate_text(text: str) -> None:
    proc = subprocess.run(["git", "config", "--file", "-", "--list"], input=text,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise ConfigWriteError(f"internal error: the include file would not parse: {proc.stderr}")


@dataclass(frozen=True)
class WriteResult:
    written: bool
    scope: dict
    include_file: str
    settings: Dict[str, str]
    backup: Optional[str]
    effective: Dict[str, Optional[str]]     # what git reads now, per key
    overridden: Dict[str, str]              # key -> origin that still wins over ours
    message: str


def effective_values(keys: List[str], cwd: Optional[str]) -> Dict[str, Tuple[Optional[str], str]]:
    out = {}
    for key in keys:
        proc = _git_config(["--show-origin", "-z", "--get", key], cwd=cwd)
        origin, _, value = proc.stdout.partition("\0")
        out[key] = (value.rstrip("\0") if proc.returncode == 0 else None, origin)
    return out


def apply(p: Plan, prov: Provenance, cwd: Optional[str] = None) -> WriteResult:
    """Write the plan: lock, backup, atomic include file, include.path, verify."""
    scope = Scope(**p.scope)
    if not p.changes:
        return WriteResult(False, p.scope, scope.include_file, p.settings, None,
                           {k: v for k, (v, _) in effective_values(list(p.settings), cwd).items()},
                           {}, "nothing to change: these values are already applied")
    state_root = scopes.state_dir()
    with safefile.lock(state_root):
        repo_files = {d: repo_file(scope.include_file, d) for d in p.per_repo}
        stale_files = [repo_file(scope.include_file, d) for d in p.current_per_repo
                       if d not in p.per_repo]
        touched = ([scope.include_file] + ([scope.config_file] if scope.config_file else [])
                   + sorted(set(repo_files.values()) | set(stale_files)))
        for d in {os.path.dirname(scope.include_file), state_root}:
            safefile.remove_stale_temps(d)
        backup_dir = safefile.backup(touched, state_root, scope.name)
        text = render(p.settings, prov, repo_files)
        _validate_text(text)
        try:
            os.makedirs(os.path.dirname(scope.include_file), exist_ok=True)
            # Repository files first: the include file that points at them is the switch.
            for d, path in repo_files.items():
                os.makedirs(os.path.dirname(path), exist_ok=True)
                safefile.write_atomic(path, render(p.per_repo[d], dataclasses.replace(prov, repo=d)).encode())
            safefile.write_atomic(scope.include_file, text.encode())
            for path in stale_files:
                if os.path.exists(path):
                    os.unlink(path)
        except OSError as e:
            safefile.restore(backup_dir)
            raise ConfigWriteError(safefile.describe_os_error(e, "write", scope.include_file)
                                   + "; nothing was changed") from None
        try:
            scopes.add_include(scope)
        except GitError as e:
            safefile.restore(backup_dir)
            raise ConfigWriteError(f"{e}; the previous files were restored, nothing was changed") from None
        state = load_state()
        prev = state.get(scope.key)
        state[scope.key] = {"scope": p.scope, "settings": p.settings, "per_repo": p.per_repo,
                            "backup": backup_dir,
                            "first_backup": prev.get("first_backup", prev["backup"]) if prev else backup_dir,
                            "written": {f: _sha256(f) for f in touched},
                            "time": time.time(), "git_tune_version": __version__, **asdict(prov)}
        _save_state(state)
    eff = effective_values(list(p.settings), cwd) if scope.config_file else {}
    overridden = {k: origin for k, (v, origin) in eff.items()
                  if v != p.settings[k] and origin != f"file:{scope.include_file}"}
    return WriteResult(True, p.scope, scope.include_file, p.settings, backup_dir,
                       {k: v for k, (v, _) in eff.items()}, overridden,
                       f"wrote {len(p.settings)} values to {scope.include_file}")


def _sha256(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class RevertResult:
    scope: dict
    restored: Tuple[str, ...]        # back to their exact bytes from before git-tune
    include_removed_from: Optional[str]   # edited since: only our include.path was removed
    message: str


def revert(scope: Scope) -> RevertResult:
    """Put back the files from before git-tune's first write to this scope.

    A file the user edited since git-tune wrote it is not overwritten: from
    a config file only git-tune's include.path is removed, with git config.
    """
    with safefile.lock(scopes.state_dir()):
        state = load_state()
        entry = state.get(scope.key)
        if not entry:
            raise UsageError(f"git-tune has written nothing for scope {scope.name} "
                             f"({scope.include_file}); nothing to revert")
        backup_dir = entry.get("first_backup", entry["backup"])
        with open(os.path.join(backup_dir, "manifest.json")) as f:
            manifest = json.load(f)
        edited = [f for f, digest in entry.get("written", {}).items()
                  if f == scope.config_file and _sha256(f) != digest]
        restored = []
        for item in manifest["files"]:
            if item["path"] in edited:
                continue
            restored += safefile.restore_one(item)
        removed_from = None
        if edited:
            proc = _git_config(["--file", scope.config_file, "--fixed-value", "--unset-all",
                                "include.path", scope.include_file])
            if proc.returncode not in (0, 5):
                proc = _git_config(["--file", scope.config_file, "--unset-all", "include.path",
                                    "^" + re.escape(scope.include_file) + "$"])
            removed_from = scope.config_file
        del state[scope.key]
        _save_state(state)
    msg = f"restored {len(restored)} file(s) to their bytes from before git-tune"
    if removed_from:
        msg += f"; '{removed_from}' was edited since, so only git-tune's include.path was removed"
    return RevertResult(asdict(scope), tuple(restored), removed_from, msg)
