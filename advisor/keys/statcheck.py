"""core.trustctime and core.checkStat: stop the rehash storms of unstable stat data.

git compares each index entry's cached lstat fields with the file's and re-reads and
hashes every file whose fields differ (statinfo.c match_stat_data). Where a mount
rewrites ctimes or renumbers inodes (containers, 9p, virtiofs, WSL's /mnt/c), the
fields never match again and every `git status` hashes the whole tree. The probe
compares a sample of the index with lstat (probes/statdata.py) and names the fields;
only where they differ with mtime and size intact is a key a candidate:
core.trustctime=false for ctime alone, core.checkStat=minimal for inode, device or
owner. Real git decides: `git status -uno` on two copies of the user's index, each
refreshed and written back by every run as a user's status is. Git's own count decides
first: where a status right after one that wrote the index back re-reads (nearly)
nothing, one refresh ended the mismatch (a copy that kept mtimes) and no key is needed;
where the re-reads come back, the A/B times what the key saves.
"""
import contextlib
import os
from dataclasses import asdict, dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..agent import storm as storm_mod
from ..decide import advice
from . import registry
from ..measure import gitbench
from ..measure.bench import Bench
from ..measure.record import Calibration, Trial
from ...models.catalogue import Key
from .registry import Weights

WHAT = {"status": "git status -uno (index refreshed and written back each run)"}


def _fields(bench: Bench) -> Optional[Tuple[str, ...]]:
    """The mismatching fields the probe found, where content did not change; None if the
    sample matched (or was changed files, or was not taken)."""
    sd = bench.stat_data
    if not sd or not sd.get("diagnosis"):
        return None
    fields = tuple(sd.get("fields") or ())
    if not fields or "mtime" in fields or "size" in fields:
        return None
    return fields


# Entries re-read by a status right after one that wrote the index back, as a share of
# the index, at or below which the mismatch is not the file system's: racily clean
# stragglers, files changed meanwhile. No key saves anything there.
SETTLED_SHARE = 0.01


@dataclass(frozen=True)
class TrialFacts:
    fields: Optional[List[str]] = None    # the stat fields that never matched (probe's sample)
    candidate: Optional[str] = None
    entries: Optional[int] = None         # in the index (trace2 index read/cache_nr)
    reread: Optional[int] = None          # re-read and hashed after a write-back (refresh/sum_scan)


def _reread_after_write_back(run_default: gitbench.Runner, default: Dict[str, str], root: str
                             ) -> Tuple[Optional[int], int, float]:
    """Git's own count of the entries a `git status -uno` re-reads and hashes (trace2
    index refresh/sum_scan: stat data that did not match) right after a status that
    refreshed the index copy and wrote it back, as a user's status does. Where the file
    system keeps reporting new stat data, that is most of the index again; where the
    mismatch was once, it is none. Returns the index's entries (None where git reported
    no counts), the entries re-read, and the counted run's seconds (the A/B's warm-up
    default side: the same run)."""
    run_default(default)
    trace = os.path.join(root, "trace-stat-reread.json")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(trace)        # git appends to a trace file
    try:
        seconds = run_default(default, trace_file=trace)
        counts = gitbench.trace_phases(trace)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(trace)
    entries = counts.get("data/index/read/cache_nr")
    return (None if entries is None else int(entries),
            int(counts.get("data/index/refresh/sum_scan", 0)), seconds)


class StatKey(registry.Tuner):
    """A key that makes git tolerate some stat fields' mismatch: trialled with `value`
    where the probe found those fields, and only the narrowest key that tolerates them all
    is (trustctime for ctime alone, checkStat where more differs)."""

    # First: where the probe found a storm, every status re-reads a tenth of the tree or
    # more, and one status on two index copies settles it; where it found none, the trial
    # costs nothing (no git run).
    rank = 0

    def __init__(self, value: str, tolerates: FrozenSet[str]) -> None:
        self.value, self.tolerates = value, tolerates

    def narrowest(self, fields: Tuple[str, ...]) -> bool:
        covering = [t.tolerates for t in TUNERS.values() if set(fields) <= t.tolerates]
        return bool(covering) and self.tolerates == min(covering, key=len)

    def stakes(self, key: Key, bench: Bench) -> Optional[float]:
        # Unknown (None) keeps the key in its place where the probe found a storm;
        # nothing is at stake where the stat data matches.
        fields = _fields(bench)
        if fields and self.narrowest(fields) or storm_mod.recurring(bench.repo.worktree):
            return None
        return 0.0

    def trial(self, key: Key, bench: Bench) -> Trial:
        fields = _fields(bench)
        seen = self._seen_by_the_agent(key, bench)
        if not fields:
            return seen or Trial.not_run(key.name, "the index's stat data match the files "
                                         "(probe's sample): git re-reads nothing for this "
                                         "key to save")
        if not self.narrowest(fields):
            return Trial.not_run(key.name, f"the fields that differ ({', '.join(fields)}) "
                                 "are for the other stat-data key", fields=list(fields))
        default, candidate = {key.name: key.default}, {key.name: self.value}
        run = gitbench.ON_INDEX["status"]
        copies = (bench.ws.index_copy("stat-default"), bench.ws.index_copy("stat-candidate"))
        run_default, run_candidate = (run(bench.repo, index) for index in copies)
        entries, reread, warm = _reread_after_write_back(run_default, default, bench.ws.root)
        facts = TrialFacts(list(fields), self.value, entries, reread)
        if entries is not None and reread <= SETTLED_SHARE * entries:
            # Counted, not timed: a timing of two statuses that do the same work would
            # decide on noise. Unless the user's own commands show the re-reads coming
            # back: this view settled, another one unsettles it again.
            return seen or Trial.not_run(key.name, f"after one `git status` wrote the index back, "
                                 f"git re-read {reread} of {entries} entries: the mismatch "
                                 "was once (a copy, a restore), and that refresh ended it",
                                 **asdict(facts))
        c = bench.ab("status", default, candidate, lambda: run_default(default),
                     lambda: run_candidate(candidate), warm_default=warm)
        return Trial(key.name, (c,), asdict(facts))

    def _seen_by_the_agent(self, key: Key, bench: Bench) -> Optional[Trial]:
        """Where the agent recorded the user's own commands in this work tree re-reading
        most of it again and again though the index was written back between them, the
        one refresh a trial can make here proves nothing (a second view of the tree, with
        other stat data, unsettles it again): the evidence, and exactly what to type to
        settle it on those commands. None where the agent saw no such storm."""
        worktree = bench.repo.worktree
        storm = storm_mod.recurring(worktree)
        if storm is None or worktree is None:
            return None
        if self.tolerates != TUNERS["core.checkStat"].tolerates:
            return Trial.not_run(key.name, "the agent's evidence of recurring re-reads points "
                                 "at core.checkStat (which stat fields differ between the "
                                 "views is not known)")
        return Trial.not_run(key.name, f"the agent saw {storm.commands} commands in a row "
                             f"re-read ~{storm.rehashed} of {storm.entries} entries though "
                             "the index was written back between them: this work tree is "
                             "also used through a view with other stat data, which one "
                             "refresh here cannot show; try it on your own commands: "
                             + storm_mod.experiment_command(worktree),
                             agent_commands=storm.commands, entries=storm.entries,
                             reread=storm.rehashed)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
        t = advice.trial_of(key, cal)
        if t is None:
            return advice.unmeasured(key)
        f = t.facts_as(TrialFacts)
        counted = ("" if f.entries is None else
                   f" (git re-read {f.reread} of {f.entries} entries right after a write-back)")
        return advice.weighed(key, t, weights, self.value, WHAT,
                              {"fields": f.fields, "entries": f.entries, "reread": f.reread},
                              suffix=f"; the index's {', '.join(f.fields or [])} "
                              "never matched the files" + counted)


TUNERS = {"core.trustctime": StatKey("false", frozenset({"ctime"})),
          "core.checkStat": StatKey("minimal", frozenset({"ctime", "inode", "device", "owner"}))}
