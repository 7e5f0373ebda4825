"""When the answer has changed: what the user's own commands say about the
values git-tune wrote, and whether now is a quiet moment to measure again.

A write is drifting where the git the user's commands run is not the git it was
measured with (an upgrade: new keys, new behaviour), or where `git-tune show`'s other
checks say so (the host or its storage changed, the repository grew several-fold, the
include file was edited, the write is old). `show` says the same, but only to whoever
runs it; the agent sees every command, so it notices on its own.
"""
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .events import Command
from ..keys import registry
from ..write import journal, show
from ...models import catalogue

# A quiet moment: no git command for this long, and the host's load below its cores.
IDLE_SECONDS = 120.0
MAX_AGE_DAYS = show.DEFAULT_MAX_AGE_DAYS
AGENT_SCOPE = "agent"


@dataclass(frozen=True)
class Drift:
    """One write of git-tune's whose measurement no longer holds, and why."""
    scope: str                     # the scope's spec, as `--scope` takes it
    repo: Optional[str]            # the repository it was measured on
    measured_with: str             # the git version of the measurement
    running: Optional[str]         # the git version the user's commands run now
    reasons: Tuple[str, ...]
    edited: bool                   # someone changed git-tune's values by hand: left alone


def _version(text: str) -> Optional[str]:
    try:
        return catalogue.format_version(catalogue.parse_version(text))
    except Exception:       # a version string git-tune cannot read is no evidence
        return None


def running_git(records: Sequence[Command], repo: Optional[str]) -> Optional[str]:
    """The git version of the newest command in `repo` (any repository for None)."""
    for c in reversed(records):
        if c.git_version and (repo is None or c.repo == repo):
            return _version(c.git_version)
    return None


def detect(records: Sequence[Command], entries: Optional[List[journal.Applied]] = None
           ) -> List[Drift]:
    """Every write whose measurement the user's commands (or show's checks) say is
    stale. The git version is the one the user's commands ran, not the one on
    git-tune's PATH."""
    out = []
    for entry in journal.applied() if entries is None else entries:
        if entry.scope.name == AGENT_SCOPE:
            continue        # the agent's own routing of events: no value measured there
        running = running_git(records, entry.repo) or running_git(records, None)
        reasons = show.stale_reasons(entry, running, MAX_AGE_DAYS)
        for key, value in sorted(entry.settings.items()):
            e = registry.find(key)
            stopped = e.stopped_paying(value, records, entry.repo) if e else None
            if stopped:
                reasons.append(stopped)
        if reasons:
            out.append(Drift(show.scope_spec(entry.scope), entry.repo, entry.git_version,
                             running, tuple(reasons), show.edited_outside(entry)))
    return out


def idle(records: Sequence[Command], now: float, cores: int,
         load: Optional[float] = None) -> bool:
    """No git command for IDLE_SECONDS, and the host's load (1-minute average) below its
    cores: measuring now takes nobody's CPU and meets no command of theirs."""
    last = max((c.ended for c in records), default=0.0)
    if now - last < IDLE_SECONDS:
        return False
    load = os.getloadavg()[0] if load is None else load
    return load < cores


def summary(drifts: Sequence[Drift]) -> List[Dict[str, object]]:
    return [{"scope": d.scope, "repo": d.repo, "measured_with": d.measured_with,
             "running": d.running, "reasons": list(d.reasons)} for d in drifts]
