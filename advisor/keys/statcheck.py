"""core.trustctime and core.checkStat: stop the rehash storms of unstable stat data.

git compares each index entry's cached lstat fields with the file's and re-reads and
hashes every file whose fields differ (statinfo.c match_stat_data). Where a mount
rewrites ctimes or renumbers inodes (containers, 9p, virtiofs, WSL's /mnt/c), the
fields never match again and every `git status` hashes the whole tree. The probe
compares a sample of the index with lstat (probes/statdata.py) and names the fields;
only where they differ with mtime and size intact is a key a candidate:
core.trustctime=false for ctime alone, core.checkStat=minimal for inode, device or
owner. Real git decides: `git status -uno` on two copies of the user's index, each
refreshed and written back by every run as a user's status is, so a mismatch that one
refresh ends (a copy that kept mtimes) shows no gain, and one that comes back does.
"""
from dataclasses import asdict, dataclass
from typing import FrozenSet, List, Optional

from git_tune.advisor.decide import advice
from git_tune.advisor.keys import registry
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.bench import Bench
from git_tune.advisor.measure.record import Calibration, Trial

WHAT = {"status": "git status -uno (index refreshed and written back each run)"}


def _fields(bench: Bench) -> Optional[tuple]:
    """The mismatching fields the probe found, where content did not change; None if the
    sample matched (or was changed files, or was not taken)."""
    sd = bench.stat_data
    if not sd or not sd.get("diagnosis"):
        return None
    fields = tuple(sd.get("fields") or ())
    if not fields or "mtime" in fields or "size" in fields:
        return None
    return fields


@dataclass(frozen=True)
class TrialFacts:
    fields: Optional[List[str]] = None    # the stat fields that never matched (probe's sample)
    candidate: Optional[str] = None


class StatKey(registry.Tuner):
    """A key that makes git tolerate some stat fields' mismatch: trialled with `value`
    where the probe found those fields, and only the narrowest key that tolerates them all
    is (trustctime for ctime alone, checkStat where more differs)."""

    # First: where the probe found a storm, every status re-reads a tenth of the tree or
    # more, and one status on two index copies settles it; where it found none, the trial
    # costs nothing (no git run).
    rank = 0

    def __init__(self, value: str, tolerates: FrozenSet[str]):
        self.value, self.tolerates = value, tolerates

    def narrowest(self, fields: tuple) -> bool:
        covering = [t.tolerates for t in TUNERS.values() if set(fields) <= t.tolerates]
        return bool(covering) and self.tolerates == min(covering, key=len)

    def stakes(self, key, bench: Bench) -> Optional[float]:
        # Unknown (None) keeps the key in its place where the probe found a storm;
        # nothing is at stake where the stat data matches.
        fields = _fields(bench)
        return None if fields and self.narrowest(fields) else 0.0

    def trial(self, key, bench: Bench) -> Trial:
        fields = _fields(bench)
        if not fields:
            return Trial.not_run(key.name, "the index's stat data match the files (probe's "
                                 "sample): git re-reads nothing for this key to save")
        if not self.narrowest(fields):
            return Trial.not_run(key.name, f"the fields that differ ({', '.join(fields)}) "
                                 "are for the other stat-data key", fields=list(fields))
        default, candidate = {key.name: key.default}, {key.name: self.value}
        run = gitbench.ON_INDEX["status"]
        copies = (bench.ws.index_copy("stat-default"), bench.ws.index_copy("stat-candidate"))
        run_default, run_candidate = (run(bench.repo, index) for index in copies)
        c = bench.ab("status", default, candidate, lambda: run_default(default),
                     lambda: run_candidate(candidate))
        return Trial(key.name, (c,), asdict(TrialFacts(list(fields), self.value)))

    def decide(self, key, cal: Calibration, weights) -> advice.KeyAdvice:
        t = advice.trial_of(key, cal)
        if t is None:
            return advice.unmeasured(key)
        f = t.facts_as(TrialFacts)
        return advice.weighed(key, t, weights, self.value, WHAT,
                              {"fields": f.fields},
                              suffix=f"; the index's {', '.join(f.fields or [])} "
                              "never matched the files")


TUNERS = {"core.trustctime": StatKey("false", frozenset({"ctime"})),
          "core.checkStat": StatKey("minimal", frozenset({"ctime", "inode", "device", "owner"}))}
