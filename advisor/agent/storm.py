"""Rehash storms in the user's own commands: git's refresh compared (hashed) most of
the index's entries (trace2 `index` data `refresh/sum_scan` near `read/cache_nr`),
command after command. Ordinary edits make a few entries differ once; after a
command that wrote the index back they match again. A run of STORM_RUN such
commands in a row is a storm:
- the index was written in between and the entries still differ: the file system
  reports different stat data each time (ctime or inode numbers rewritten by the
  mount: containers, 9p, virtiofs, WSL's /mnt/c), which a key fixes;
- the index was never written (every command read-only: --no-optional-locks from an
  editor or a prompt, a read-only index): one refresh that writes it ends it.
"""
import os
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from .events import Command

STORM_SHARE = 0.5     # of the entries, rehashed by one command
STORM_RUN = 3         # commands in a row
MIN_ENTRIES = 20      # fewer entries cost nothing worth a flag


@dataclass(frozen=True)
class Storm:
    repo: str
    commands: int               # in the run so far
    entries: int
    rehashed: int               # median per command
    seconds: float              # median elapsed of those commands
    refresh_seconds: float      # median time in git's refresh region
    index_written: bool         # some command of the run wrote the index
    cause: str                  # "unstable stat data" | "index not written back"
    fix: str


def _storming(c: Command) -> Optional[bool]:
    """True/False for a command that refreshed the index, None for one that did not."""
    entries, rehashed = c.counts.get("entries"), c.counts.get("rehashed")
    if entries is None or rehashed is None:
        return None
    return entries >= MIN_ENTRIES and rehashed >= STORM_SHARE * entries


def _storm(repo: str, run: Sequence[Command]) -> Storm:
    written = any("index_write" in c.regions for c in run)
    def med(xs: Sequence[float]) -> float:
        return float(np.median(xs)) if xs else 0.0
    if written:
        cause = "unstable stat data"
        fix = ("the index was written back between them and git still re-read the tree: "
               "the stat data this work tree shows keep changing (a mount that rewrites "
               "them, or a second view of it: another OS's git, a container) and "
               "core.checkStat=minimal (or core.trustctime=false for ctime alone) stops "
               "the re-reads; try it on your own commands: " + experiment_command(repo))
    else:
        cause = "index not written back"
        fix = ("these commands never write the index back (read-only: an editor's or a "
               "prompt's --no-optional-locks, or an index git may not replace); one "
               "`git update-index --refresh` (or a plain `git status`) stores the new "
               "stat data and ends it")
    return Storm(repo, len(run), int(run[-1].counts.get("entries", 0)),
                 int(med([c.counts.get("rehashed", 0) for c in run])),
                 med([c.elapsed or 0.0 for c in run]),
                 med([c.regions.get("refresh", 0.0) for c in run]), written, cause, fix)


def experiment_command(repo: str) -> str:
    """What to type to settle a storm of unstable stat data on the user's own commands
    (the key changes what git notices: only with their yes)."""
    return f"git-tune agent experiment core.checkStat=minimal --yes --repo {shlex.quote(repo)}"


def recurring(repo: Optional[str]) -> Optional[Storm]:
    """The storm of unstable stat data the agent has recorded in the work tree `repo`
    (its latest run of commands, each re-reading most entries though the index was
    written back between them), None where there is none, the agent records nothing,
    or the repository has no work tree (None).
    Never makes the agent's directory."""
    from ... import ownpaths
    from . import store
    from ...errors import UnsafeState
    if repo is None:
        return None
    try:
        if not os.path.isdir(os.path.join(ownpaths.state_dir(create=False), "agent")):
            return None
        records = store.records()
    except (UnsafeState, OSError):
        return None
    real = os.path.realpath(repo)
    mine = [c for c in records if c.repo and os.path.realpath(c.repo) == real]
    return next((s for s in storms(mine) if s.index_written), None)


def storms(records: Sequence[Command]) -> List[Storm]:
    """The storm each repository is in now (its latest run of refreshing commands),
    if that run is STORM_RUN long or longer."""
    runs: Dict[str, List[Command]] = {}
    for c in sorted(records, key=lambda c: c.sid):     # a sid begins with its UTC start time
        state = _storming(c)
        if state is None or not c.repo:
            continue
        runs[c.repo] = runs.get(c.repo, []) + [c] if state else []
    return [_storm(repo, run) for repo, run in sorted(runs.items()) if len(run) >= STORM_RUN]
