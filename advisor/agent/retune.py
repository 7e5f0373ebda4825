"""Measure again and re-apply, on the agent's own, where a write has drifted.

The bounds are bpftune's: the agent re-decides only keys whose values change nothing but
speed (catalogue `changes` empty: checkout.workers, the threshold, preload, index
threads, pack threads). A key whose value changes an on-disk format or what git notices
keeps the value the user said yes to, and a new recommendation for it is only named
(`asks`), for `git-tune auto` to ask about. Values someone edited by hand are left
alone from then on. Everything goes through the same locked, journaled write as `auto`,
and every re-tune is logged with its reasons and its evidence (`git-tune agent log`).
"""
import json
import os
import time
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ... import ownpaths, strictjson
from . import drift as drift_mod, store
from .events import Command
from ..decide.recommend import recommend
from ..measure import calibrate
from ..measure.record import Options
from ..write import configwrite, journal, show
from ...errors import UnsafeState
from ...models import catalogue

LOG = "retune.jsonl"
LOG_MAX_BYTES = 1 << 20
# The same drift (scope, git running, reasons) is re-tuned at most once this often: a
# re-tune that cannot end it (git-tune's git is not the user's) is not repeated all day.
RETRY_SECONDS = 86400.0


def log_path() -> str:
    return os.path.join(store.agent_dir(), LOG)


# Fields of a log entry the readers format, with the type each must have.
_LOG_TEXT = ("scope", "repo", "key", "candidate", "what", "why", "experiment", "note",
             "running", "value", "kept", "stopped", "approved", "inherited")


def valid_entry(e: object) -> bool:
    """Whether a log line's value is an entry the readers can show: an object with a
    finite time, text where text is read, a list of texts as reasons."""
    return (isinstance(e, dict) and strictjson.finite(e.get("time", 0.0))
            and all(e.get(k) is None or isinstance(e[k], (str, bool)) for k in _LOG_TEXT)
            and all(isinstance(e.get(k, []), list) and all(isinstance(r, str) for r in e.get(k, []))
                    for k in ("reasons", "asks"))
            and (not e.get("retuned") or (isinstance(e.get("scope"), str) and all(
                isinstance(e.get(k), dict) and all(isinstance(v, str) for v in e[k].values())
                for k in ("before", "after")))))


def log() -> List[Dict[str, Any]]:
    """Every re-tune and experiment event, oldest first; a line that is not a valid
    entry (cut by a crash, damaged) is skipped."""
    try:
        data = ownpaths.read_file(log_path(), limit=4 * LOG_MAX_BYTES)
    except UnsafeState:
        return []
    out = []
    for line in (data or b"").splitlines():
        try:
            e = strictjson.loads(line)
        except ValueError:
            continue
        if valid_entry(e):
            out.append(e)
    return out


def append_log(entry: Dict[str, Any]) -> None:
    """One line more in the agent's log (re-tunes and experiments), kept under
    LOG_MAX_BYTES."""
    path = log_path()
    kept = log()[-200:] if os.path.lexists(path) and os.lstat(path).st_size > LOG_MAX_BYTES \
        else None
    if kept is not None:
        ownpaths.write_file(path, "".join(json.dumps(e) + "\n" for e in kept).encode())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")


def _attempted(d: drift_mod.Drift, now: float) -> bool:
    return any(e.get("scope") == d.scope and e.get("running") == d.running
               and e.get("reasons") == list(d.reasons) and now - e.get("time", 0) < RETRY_SECONDS
               for e in log())


def unattended(recommended: Dict[str, str], approved: Dict[str, str]
               ) -> Tuple[Dict[str, str], List[str]]:
    """What the agent may write on its own: the recommendation for keys that change only
    speed, the approved value for the others; and the keys whose new recommendation
    differs from what the user approved (asked about by `auto`, never written here)."""
    settings, asks = {}, []
    for name in sorted(set(recommended) | set(approved)):
        if catalogue.lookup(name).changes:
            if name in approved:
                settings[name] = approved[name]
            if recommended.get(name) != approved.get(name):
                asks.append(name)
        elif name in recommended:
            settings[name] = recommended[name]
    return settings, asks


def retune(d: drift_mod.Drift, *, budget: float) -> Dict[str, Any]:
    """Calibrate the drifting write's repository again and re-apply what the bounds
    allow; the log entry it made."""
    entry = show.applied_to(d.scope, d.repo)
    base = {"time": time.time(), "scope": d.scope, "repo": d.repo, "running": d.running,
            "reasons": list(d.reasons)}
    if entry is None or d.edited or not entry.repo or not os.path.isdir(entry.repo):
        why = ("the values were edited by hand: the agent leaves them alone" if d.edited
               else "no repository to measure on")
        out = {**base, "retuned": False, "why": why}
        append_log(out)
        return out
    record = calibrate.calibrate(calibrate.probe_repository(entry.repo, budget), Options(budget=budget))
    rec = recommend(record)
    settings, asks = unattended(rec.settings(), entry.settings)
    prov = configwrite.Provenance(record.git_version, record.fingerprint,
                                  record.storage.storage_class, record.repository.path,
                                  record.repository.entries, rec.reasons())
    plan = configwrite.plan(entry.scope, settings, prov, cwd=entry.repo, per_repo=entry.per_repo,
                            writer=configwrite.RETUNE)
    result = configwrite.apply(plan, prov, cwd=entry.repo)
    if not result.written:
        # Nothing to change (the values stand, or are the user's to change): measured
        # with this git, host and repository all the same, so the drift has ended.
        journal.restamp(entry.scope, asdict(prov))
    out = {**base, "retuned": True, "measured_with": record.git_version,
           "before": entry.settings, "after": plan.settings, "asks": asks,
           "written": result.written, "message": result.message,
           "evidence": {k.key: asdict(k.gain) if k.gain else None for k in rec.keys
                        if k.key in settings or k.key in entry.settings},
           "calibration": record.stored_at}
    if record.git_version != d.running and d.running:
        out["note"] = (f"measured with git {record.git_version}, but your commands run git "
                       f"{d.running}: run `git-tune --git PATH agent retune` with that git")
    append_log(out)
    return out


def retune_drifting(records: Sequence[Command], *, budget: float, now: Optional[float] = None) -> List[Dict[str, Any]]:
    """Every drifting write not re-tuned for the same reasons lately, each re-tuned."""
    now = time.time() if now is None else now
    return [retune(d, budget=budget) for d in drift_mod.detect(records)
            if not _attempted(d, now)]
