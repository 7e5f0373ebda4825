"""Writing tuned values safely: plan, diff, backup, atomic write, include, verify, revert.

The values live in one include file owned by git-tune; the chosen scope's
config gets one include.path to it, added with `git config`. Values the
user set elsewhere are conflicts, left alone unless --override. Every
touched file is backed up first and `revert` restores the exact bytes.
"""
import dataclasses
import difflib
import hashlib
import os
import contextlib
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ... import __version__, git
from . import configtext, journal, safefile, scopes
from .scopes import Scope
from ...errors import ConfigWriteError, GitError, Locked
from ...models import catalogue
from ...probes import scratch

# The scopes this process wrote (apply committed), for what an interrupted command says.
written_this_run: List[str] = []

# Who writes a value (the journal records it per key, as its origin). One rule for all
# of them (merge): a writer that proposes a whole scope (auto, a re-tune, a fleet
# profile) replaces and removes only values measured by git-tune (AUTO, RETUNE); values
# set by hand (SET), from a profile (APPLY) or kept from an experiment stay unless the
# user asks (--override). A writer that names its keys (`touches`: set, an experiment)
# changes those keys and nothing else, on the file as it is when it writes.
AUTO, RETUNE, SET, APPLY, EXPERIMENT, AGENT = ("auto", "retune", "set", "apply",
                                               "experiment", "agent")
MEASURED = (AUTO, RETUNE)
ORIGIN_WORDS = {SET: "set by hand", APPLY: "set from a profile", EXPERIMENT: "kept from an "
                "agent experiment", AUTO: "measured", RETUNE: "re-tuned", AGENT: "the agent's"}


@dataclass(frozen=True)
class Kept:
    """A value of the scope a whole-scope writer left as it was: not measured by
    git-tune, so it is not its to replace (`proposed`: what it would have written
    instead; None: it would have removed the value)."""

    key: str
    value: str
    origin: str
    proposed: Optional[str]


@dataclass(frozen=True)
class Conflict:
    key: str
    value: str
    scope: str
    origin: str


@dataclass(frozen=True)
class Plan:
    scope: Scope
    settings: Dict[str, str]          # what the include file will hold
    current: Dict[str, str]           # what it holds now
    conflicts: Tuple[Conflict, ...]   # user values for the same keys
    left_alone: Tuple[str, ...]       # keys not written because of a conflict
    include_present: bool
    diff: str
    changes: bool
    per_repo: Dict[str, Dict[str, str]] = field(default_factory=dict)          # git dir -> values
    current_per_repo: Dict[str, Dict[str, str]] = field(default_factory=dict)
    files: Dict[str, Optional[str]] = field(default_factory=dict)   # path -> exact new text (None: removed)
    # path -> digest of the bytes the plan was made from (None: absent). Another
    # git-tune, or the user, may write between plan and apply; apply re-plans then.
    basis: Dict[str, Optional[str]] = field(default_factory=dict)
    # The values are not catalogue keys and were checked by the caller (the agent's
    # trace2 settings): written as they are.
    checked: bool = False
    writer: str = AUTO
    touches: Optional[Tuple[str, ...]] = None     # the keys a naming writer changes
    origins: Dict[str, str] = field(default_factory=dict)   # key -> who wrote its value
    kept: Tuple[Kept, ...] = ()                   # values left as they were (merge)
    removed: Dict[str, str] = field(default_factory=dict)   # values this write removes


@dataclass(frozen=True)
class Provenance:
    """What the header records and `show` checks for staleness."""

    git_version: str
    fingerprint: str
    storage_class: str
    repo: Optional[str] = None
    entries: Optional[int] = None
    reasons: Dict[str, str] = field(default_factory=dict)


def _git_config(args: List[str], cwd: Optional[str] = None,
                input: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
    return git.run(["config", *args], cwd=cwd, input=input)


def config_error(stderr: str) -> GitError:
    """git could not read the configuration (a syntax error, an include cycle)."""
    return GitError(f"git cannot read the configuration: {git.first_lines(stderr)}")


def read_include(path: str) -> Dict[str, str]:
    """The values in a git-tune include file ({} when it does not exist)."""
    if not os.path.exists(path):
        return {}
    proc = _git_config(["--file", path, "--list", "-z"])
    if proc.returncode:
        raise ConfigWriteError(f"'{path}' is not a valid git config file: {git.first_lines(proc.stderr)}")
    out = {}
    for item in filter(None, proc.stdout.split("\0")):
        k, _, v = item.partition("\n")
        if k.lower().startswith("includeif."):
            continue  # per-repository blocks: read_per_repo()
        out[catalogue.lookup(k).name if _known(k) else k] = v
    return out


def repo_file(include_file: str, git_dir: str) -> str:
    """Where one repository's own values live, beside the include file."""
    name = os.path.basename(os.path.dirname(git_dir.rstrip("/")) if git_dir.rstrip("/").endswith("/.git")
                            else git_dir.rstrip("/")) or "repo"
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
    digest = hashlib.sha256(os.fsencode(git_dir)).hexdigest()[:8]
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
            pattern = condition[len("gitdir:"):]
            literal = re.sub(r"\\(.)", r"\1", pattern)   # undo configtext's wildmatch escapes
            out[literal.rstrip("/")] = read_include(v)
    return out


def _known(key: str) -> bool:
    return any(k.lower() == key.lower() for k in catalogue.catalogue())


def find_conflicts(keys: List[str], cwd: Optional[str]) -> List[Conflict]:
    """Values the user set for these keys; git-tune's own include files are not the user's."""
    out = []
    for key in keys:
        proc = _git_config(["--show-origin", "--show-scope", "-z", "--get-all", key], cwd=cwd)
        if proc.returncode not in (0, 1):
            raise config_error(proc.stderr)
        fields = proc.stdout.split("\0")
        for i in range(0, len(fields) - 2, 3):
            scope, origin, value = fields[i], fields[i + 1], fields[i + 2]
            if scope == "command" or scopes.owned_by_git_tune(origin[len("file:"):]):
                continue
            out.append(Conflict(key, value, scope, origin))
    return out


def render(settings: Dict[str, str], prov: Provenance,
           per_repo_files: Optional[Dict[str, str]] = None) -> str:
    """The include file's exact text. Every piece of provenance is untrusted text (a
    fleet profile's fields): it only ever reaches a comment, through configtext."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    c = configtext.comment
    lines = [f"# Written by git-tune {__version__} for git {c(prov.git_version)} on {when}.",
             f"# Host {c(prov.fingerprint)}, {c(prov.storage_class)} storage"
             + (f"; repository {c(prov.repo)}" if prov.repo else "")
             + (f" ({c(str(prov.entries))} files)" if prov.repo and prov.entries is not None else "") + ".",
             "# Managed file: `git-tune revert` restores what was there before,",
             "# `git-tune show` says whether it is still current."]
    for key in sorted(settings):
        if key in prov.reasons:
            lines.append(f"# {key} = {c(settings[key])}: {c(prov.reasons[key])}")
    sections: Dict[str, List[Tuple[str, str]]] = {}
    for key in sorted(settings):
        section, _, name = key.rpartition(".")
        sections.setdefault(section, []).append((name, settings[key]))
    for section, items in sections.items():
        lines.append(f"[{section}]")
        lines += [f"\t{name} = {configtext.value(value)}" for name, value in items]
    for git_dir, path in sorted((per_repo_files or {}).items()):
        lines.append(f"[includeIf {configtext.subsection(configtext.gitdir_condition(git_dir))}]")
        lines.append(f"\tpath = {configtext.value(path)}")
    return "\n".join(lines) + "\n"


def canonical(settings: Dict[str, str]) -> Dict[str, str]:
    """Catalogue names and the canonical text of each value (what git will parse)."""
    out = {}
    for k, v in settings.items():
        key = catalogue.lookup(k)
        key.require_writable()
        out[key.name] = key.validate(v)
    return out


def _edited_copy(config_file: str, old: Optional[bytes],
                 *args: str) -> "subprocess.CompletedProcess[Any]":
    """`git config --file COPY ARGS` on a copy of the config file's bytes `old`: git edits
    the text as it would edit the file, and the file itself is replaced under git's lock."""
    # A scratch directory, not a TemporaryDirectory: a run killed here (SIGKILL) leaves
    # it behind, and the next run removes what dead runs left (probes/scratch.py).
    with scratch.scratch_dir([tempfile.gettempdir()]) as tmp:
        if tmp is None:
            raise ConfigWriteError(f"no writable temporary directory ({tempfile.gettempdir()}) "
                                   "for git config to edit a copy in; nothing was changed")
        copy = os.path.join(tmp, "config")
        with open(copy, "wb") as f:
            f.write(old or b"")
        proc = _git_config(["--file", copy, *args])
        with open(copy, "rb") as f:     # the edited copy's bytes, in place of git's output
            return subprocess.CompletedProcess(proc.args, proc.returncode, f.read(), proc.stderr)


def _with_include(config_file: str, include_file: str, old: Optional[bytes] = None) -> bytes:
    """The config file's bytes (`old`, default: what it holds now) with include.path
    added, as `git config --add` writes it."""
    old = journal.read_bytes(config_file) if old is None else old
    proc = _edited_copy(config_file, old, "--add", "include.path", include_file)
    if proc.returncode:
        raise ConfigWriteError(f"git config could not add include.path to '{config_file}': "
                               f"{git.first_lines(proc.stderr)}; nothing was changed")
    edited: bytes = proc.stdout
    return edited


def without_include(config_file: str, include_file: str, old: bytes) -> bytes:
    """The config file's bytes with git-tune's include.path removed, the rest as it is."""
    proc = _edited_copy(config_file, old, "--fixed-value", "--unset-all", "include.path",
                        include_file)
    if proc.returncode not in (0, 5):     # git before 2.30 has no --fixed-value
        proc = _edited_copy(config_file, old, "--unset-all", "include.path",
                            "^" + re.escape(include_file) + "$")
    if proc.returncode not in (0, 5):
        raise ConfigWriteError(f"git config could not remove include.path from "
                               f"'{config_file}': {git.first_lines(proc.stderr)}; "
                               "nothing was reverted")
    edited: bytes = proc.stdout
    return edited


def _diff(path: str, old: Optional[bytes], new: Optional[str]) -> str:
    def lines(data: str) -> List[str]:
        return data.splitlines(True) if data else []
    old_text = old.decode("utf-8", "backslashreplace") if old is not None else ""
    return "".join(difflib.unified_diff(lines(old_text), lines(new or ""),
                                        f"{path} (now)" if old is not None else "/dev/null",
                                        f"{path} (new)" if new is not None else "/dev/null"))


def read_reasons(path: str) -> Dict[str, str]:
    """key -> the reason line render() wrote for it in an include file ({} if none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        m = re.match(r"# ([A-Za-z0-9_.-]+) = .*?: (.*)\Z", line)
        if m and _known(m.group(1)):
            out[catalogue.lookup(m.group(1)).name] = m.group(2)
    return out


def _origins_now(scope: Scope, current: Dict[str, str]) -> Dict[str, str]:
    """Who wrote each value the scope holds: the journal's record, else (a file from an
    older git-tune) the reason render() wrote beside it."""
    recorded = (journal.load_state().get(scope.key) or {}).get("origins")
    recorded = recorded if isinstance(recorded, dict) else {}
    reasons = read_reasons(scope.include_file)
    out = {}
    for key in current:
        origin = recorded.get(key)
        if origin not in ORIGIN_WORDS:
            why = reasons.get(key, "")
            origin = (SET if "set by hand" in why else EXPERIMENT if "agent experiment" in why
                      else AGENT if scope.name == "agent" else AUTO)
        out[key] = origin
    return out


def _replaces(writer: str, origin: str) -> bool:
    """Whether a whole-scope `writer` may replace or remove a value of `origin`."""
    if writer == AGENT:
        return origin == AGENT
    if writer == APPLY:
        return origin in MEASURED + (APPLY,)
    return origin in MEASURED


def merge(current: Dict[str, str], origins: Dict[str, str], proposed: Dict[str, str], *,
          writer: str, touches: Optional[Tuple[str, ...]], override: bool
          ) -> Tuple[Dict[str, str], Dict[str, str], Tuple[Kept, ...], Dict[str, str]]:
    """The one rule between writers: (the values the scope will hold, who wrote each,
    the values kept against the proposal, the values removed). See the writers above."""
    final, out_origins, kept, removed = {}, {}, [], {}
    if touches is not None:
        final = {k: v for k, v in current.items() if k not in touches}
        out_origins = {k: origins[k] for k in final}
        for k in touches:
            if k in proposed:
                same = current.get(k) == proposed[k] and writer != SET
                final[k], out_origins[k] = proposed[k], origins[k] if same else writer
            elif k in current:
                removed[k] = current[k]
        return final, out_origins, (), removed
    for k, v in proposed.items():
        final[k], out_origins[k] = v, writer
    for k, v in current.items():
        if override or _replaces(writer, origins[k]):
            if k not in proposed:
                removed[k] = v
        elif proposed.get(k) != v:
            kept.append(Kept(k, v, origins[k], proposed.get(k)))
            final[k], out_origins[k] = v, origins[k]
        else:
            out_origins[k] = origins[k]     # the same value: it stays the user's
    return final, out_origins, tuple(kept), removed


def plan(scope: Scope, settings: Dict[str, str], prov: Provenance, *, override: bool = False,
         cwd: Optional[str] = None, per_repo: Optional[Dict[str, Dict[str, str]]] = None,
         checked: bool = False, writer: str = AUTO,
         touches: Optional[Tuple[str, ...]] = None) -> Plan:
    """What writing `settings` (and per-repository values, by git dir) would change.

    `writer` says who writes (AUTO, SET, ...); `touches`, where given, the only keys it
    changes (`settings` then holds their new values; a touched key absent from it is
    removed). merge() decides what the scope holds; the plan names what it keeps and
    removes. Values are validated and written in their canonical form. Per-repository
    values go to one file per repository, included from the git-tune include file
    through an includeIf "gitdir:..." block. The plan holds the exact new bytes of every
    file it would touch, and its diff shows exactly those.
    """
    # The basis is read before anything is derived from these files: another git-tune may
    # write them meanwhile, and a basis read after would let apply() take a plan made
    # from the older bytes for a fresh one (include.path added twice).
    for path in (scope.include_file, scope.config_file):
        if path:
            safefile.require_regular(path)
    basis = {path: journal.digest(journal.read_bytes(path)) for path in (scope.include_file, scope.config_file)
             if path}
    settings = dict(settings) if checked else canonical(settings)
    if touches is not None:
        touches = tuple(sorted({catalogue.lookup(k).name if _known(k) else k for k in touches}))
    per_repo = {d.rstrip("/"): canonical(v) for d, v in (per_repo or {}).items() if v}
    current = read_include(scope.include_file)
    current_per_repo = read_per_repo(scope.include_file)
    origins_now = _origins_now(scope, current)
    merged, origins, kept, removed = merge(current, origins_now, settings, writer=writer,
                                           touches=touches, override=override)
    conflicts = find_conflicts(sorted(merged), cwd)
    left_alone = tuple(sorted({c.key for c in conflicts
                               if touches is None or c.key in touches})) if not override else ()
    final = {k: v for k, v in merged.items() if k not in left_alone}
    origins = {k: o for k, o in origins.items() if k in final}
    include_present = scope.config_file is None or scope.include_file in scopes.include_paths(scope)
    anything = bool(final) or bool(per_repo)
    changes = final != current or per_repo != current_per_repo or (anything and not include_present)
    files: Dict[str, Optional[str]] = {}
    if changes:
        old_reasons = read_reasons(scope.include_file)
        reasons = {k: old_reasons[k] for k in final
                   if origins.get(k) == origins_now.get(k) and current.get(k) == final[k]
                   and k in old_reasons}
        reasons.update({k: r for k, r in prov.reasons.items()
                        if k in final and origins.get(k) == writer})
        files = _new_files(scope, final, per_repo, current_per_repo,
                           dataclasses.replace(prov, reasons=reasons),
                           with_include=anything and not include_present)
    now = {path: journal.read_bytes(path) for path in files}
    diff = "".join(_diff(path, now[path], text) for path, text in files.items())
    return Plan(scope, final, current, tuple(conflicts), left_alone, include_present,
                diff, changes, per_repo, current_per_repo, files,
                {path: basis[path] if path in basis else journal.digest(data)
                 for path, data in now.items()}, checked, writer, touches, origins, kept,
                {k: v for k, v in removed.items() if k not in final})


def _new_files(scope: Scope, final: Dict[str, str], per_repo: Dict[str, Dict[str, str]],
               current_per_repo: Dict[str, Dict[str, str]], prov: Provenance,
               with_include: bool) -> Dict[str, Optional[str]]:
    """path -> the exact new text of every file a write of these values touches (None:
    removed): each repository's block file, the include file, and where `with_include`
    the scope's config file with include.path added."""
    files: Dict[str, Optional[str]] = {}
    repo_files = {d: repo_file(scope.include_file, d) for d in per_repo}
    for d, path in repo_files.items():
        files[path] = render(per_repo[d], dataclasses.replace(prov, repo=d))
    for d in current_per_repo:
        if d not in per_repo:
            files[repo_file(scope.include_file, d)] = None
    files[scope.include_file] = render(final, prov, repo_files)
    if with_include and scope.config_file:
        files[scope.config_file] = _with_include(scope.config_file, scope.include_file).decode(
            "utf-8", "surrogateescape")
    return files


def _stale(p: Plan) -> bool:
    """Whether a file the plan touches changed since the plan read it."""
    return any(journal.digest(journal.read_bytes(path)) != digest for path, digest in p.basis.items())


def _lost_race(p: Plan) -> bool:
    """Whether git-tune's own files changed since the plan read them (another git-tune
    wrote the scope): a whole-scope plan made from the older values would undo its write."""
    return any(journal.digest(journal.read_bytes(path)) != digest
               for path, digest in p.basis.items() if path != p.scope.config_file)


def _validate_file(path: str, staged: str) -> None:
    """git parses the staged bytes beside the file they will become (a relative include
    in ~/.gitconfig resolves against ~, as it will once renamed)."""
    proc = _git_config(["--file", staged, "--list"])
    if proc.returncode:
        raise ConfigWriteError(f"internal error: '{path}' would not parse: "
                               f"{git.first_lines(proc.stderr)}; nothing was changed")


@dataclass(frozen=True)
class WriteResult:
    written: bool
    scope: Dict[str, Any]
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


def merge_note(p: Plan) -> str:
    """What the plan keeps against its proposal and removes, said ("" where neither)."""
    parts = []
    if p.removed:
        parts.append("removes " + ", ".join(f"{k}={v}" for k, v in sorted(p.removed.items())))
    for k in p.kept:
        instead = f"instead of {k.proposed}" if k.proposed is not None else "not removed"
        parts.append(f"keeps {k.key}={k.value} ({ORIGIN_WORDS.get(k.origin, k.origin)}; "
                     f"{instead}; --override replaces it)")
    return "; ".join(parts)


def _unchanged(p: Plan, cwd: Optional[str]) -> WriteResult:
    note = merge_note(p)
    return WriteResult(False, asdict(p.scope), p.scope.include_file, p.settings, None,
                       {k: v for k, (v, _) in effective_values(list(p.settings), cwd).items()},
                       {}, "nothing to change: these values are already applied"
                       + (f"; {note}" if note else ""))


def apply(p: Plan, prov: Provenance, cwd: Optional[str] = None) -> WriteResult:
    """Write the plan: git-tune's lock, then git's `<file>.lock` on every file it touches
    (so a concurrent `git config` either finishes first or fails, and is never
    overwritten), the user's config file re-derived from its bytes under that lock,
    every file's new bytes validated by git in place, backup, journal, then the renames
    (repository files, the include file, then the include.path switch), state."""
    scope = p.scope
    if not p.changes:
        return _unchanged(p, cwd)
    state_root = scopes.state_dir()
    with safefile.lock(state_root):
        if _stale(p):
            p = _planned_again(p, prov, cwd)
            if not p.changes:
                return _unchanged(p, cwd)
        # Repository files first, then the include file that points at them, then the
        # user's config file whose include.path switches it all on.
        order = sorted(p.files, key=lambda f: (f == scope.config_file, f == scope.include_file, f))
        with contextlib.ExitStack() as stack:
            locks = _take_locks(stack, p, order)
            p = _under_locks(p, locks)
            # Only now: a killed run's temporary file may hold the inode its ledger
            # record names, until git_lock has dropped that record.
            for d in {os.path.dirname(path) for path in p.files} | {state_root}:
                safefile.remove_stale_temps(d)
            backup_dir = safefile.backup(order, state_root, scope.name)
            state = journal.load_state()
            before = state.get(scope.key)
            state[scope.key] = journal.entry(
                state, scope, p.files, settings=p.settings, per_repo=p.per_repo,
                provenance=asdict(prov), backup_dir=backup_dir, pending=True,
                origins=p.origins)
            journal.save_state(state)
            try:
                for path in order:
                    if p.files[path] is None:
                        locks[path].remove_file()
                    else:
                        locks[path].commit()
            except OSError as e:
                cause = safefile.describe_os_error(e, "write", e.filename or scope.include_file)
                _roll_back(backup_dir, cause)
                if before:      # an earlier write stays revertable
                    state[scope.key] = before
                else:
                    del state[scope.key]
                journal.save_state(state)
                raise ConfigWriteError(f"{cause}; nothing was changed") from None
        written_this_run.append(scope.name)
        state[scope.key]["pending"] = False
        journal.save_state(state)
        safefile.prune_backups(state_root, keep=journal.referenced_backups(state))
    eff = effective_values(list(p.settings), cwd) if scope.config_file else {}
    overridden = {k: origin for k, (v, origin) in eff.items()
                  if v != p.settings[k] and origin != f"file:{scope.include_file}"}
    return WriteResult(True, asdict(scope), scope.include_file, p.settings, backup_dir,
                       {k: v for k, (v, _) in eff.items()}, overridden,
                       f"wrote {count_values(len(p.settings))} to {scope.include_file}"
                       + (f"; {merge_note(p)}" if merge_note(p) else ""))


def _planned_again(p: Plan, prov: Provenance, cwd: Optional[str]) -> Plan:
    """The plan made again from the files as they are now, where they changed since it
    was made: the planned bytes would undo the other writer's change (or add include.path
    twice). A whole-scope plan whose include file another git-tune wrote meanwhile lost
    the race: Locked, nothing written (it decided on values no longer in force)."""
    if _lost_race(p) and p.touches is None:
        raise Locked(f"another git-tune wrote {p.scope.include_file} while this one was "
                     "deciding; its values are in force and nothing was written: run "
                     "again to decide on top of them")
    proposed = {k: v for k, v in p.settings.items() if p.touches is None or k in p.touches}
    return plan(p.scope, proposed, prov, override=True, cwd=cwd, per_repo=p.per_repo,
                checked=p.checked, writer=p.writer, touches=p.touches)


def _take_locks(stack: contextlib.ExitStack, p: Plan, order: List[str]) -> Dict[str, "safefile.GitLock"]:
    """git's lock on every file the plan touches, in `order`, held until `stack` ends."""
    locks = {}
    for path in order:
        if p.files[path] is not None:
            try:
                safefile.makedirs(os.path.dirname(path))
            except OSError as e:
                raise ConfigWriteError(safefile.describe_os_error(
                    e, "create the directory of", path) + "; nothing was changed") from None
        locks[path] = stack.enter_context(safefile.git_lock(path, journal.ledger()))
    return locks


def _under_locks(p: Plan, locks: Dict[str, "safefile.GitLock"]) -> Plan:
    """The plan with every new file staged in its lock and checked by git there (where a
    relative include.path resolves as it will), the user's config file re-derived from
    the bytes it holds now: a `git config` that wrote between plan and lock is kept."""
    files = dict(p.files)
    config = p.scope.config_file
    if config in files and journal.digest(locks[config].read()) != p.basis.get(config):
        files[config] = _with_include(config, p.scope.include_file,
                                      locks[config].read()).decode("utf-8", "surrogateescape")
    for path, text in files.items():
        if text is None:
            continue
        try:
            locks[path].stage(journal.encode(text))
        except OSError as e:
            raise ConfigWriteError(safefile.describe_os_error(e, "write", locks[path].lock_path)
                                   + "; nothing was changed") from None
        _validate_file(path, locks[path].lock_path)
    return dataclasses.replace(p, files=files)


def count_values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


def _roll_back(backup_dir: str, cause: str) -> None:
    """Put back what this write changed; a failure here is reported with the first cause."""
    try:
        safefile.restore(backup_dir, only_changed=True)
    except ConfigWriteError as e:
        raise ConfigWriteError(f"{cause}; rolling back also failed: {e}. The backup is in "
                               f"'{backup_dir}'") from None


