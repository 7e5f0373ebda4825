"""index.skipHash (2.40+): write the index without its SHA-1 trailer (zeros instead).

Every command that writes the index (add, commit, a status that refreshed entries)
hashes the whole file; skipping it is what `feature.manyFiles` does since 2.40. Real
git decides: `git update-index --force-write-index` on an index copy with the key
against without. That the git in use honours the key is read from what it wrote
(a zero trailer), not from its version. Such an index is unreadable to tools built on
libgit2 and is reported corrupt by `git fsck` before 2.40: the reason says so.
"""
from dataclasses import asdict, dataclass
from typing import Optional

from ..decide import advice
from ..measure import gitbench
from ..measure.bench import Bench
from ..measure.gitbench import IndexShape
from ..measure.record import Calibration, Trial
from ...probes import gitinfo
from . import registry
from ...models.catalogue import Key
from .registry import Weights

KEY = "index.skipHash"
COMPAT = ("; libgit2-based tools (prompt and editor integrations) cannot read such an "
          "index, and git before 2.40 reports it corrupt")


@dataclass(frozen=True)
class TrialFacts:
    entries: Optional[int] = None     # the index's entries, each written by the trial


def index_shape(key: Key, value: str) -> IndexShape:
    return IndexShape(settings=((KEY, value),)) if value in ("true", "false") else IndexShape()


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    ws, wt = bench.ws, bench.repo
    ignored = (f"git {bench.git_facts.version} wrote a hashed index with it set, so it does "
               "not honour the key")
    if bench.git_facts.skip_hash is False:     # the probe saw it: no copy to make
        return Trial.not_run(KEY, ignored)
    on = ws.index_copy("skiphash-on", index_shape(key, "true"))
    if not gitinfo.zero_trailer(on):           # the probe could not tell (no scratch)
        return Trial.not_run(KEY, ignored)
    off, cand = {KEY: "false"}, {KEY: "true"}
    w_off = gitbench.index_write(wt, ws.index_copy("skiphash-off", index_shape(key, "false")))
    w_on = gitbench.index_write(wt, on)
    return Trial(KEY, (bench.ab("write", off, cand, lambda: w_off(off), lambda: w_on(cand)),),
                 asdict(TrialFacts(len(bench.names))))


def decide(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    return advice.weighed(key, t, weights, "true",
                          {"write": "writing the index (git update-index --force-write-index)"},
                          asdict(t.facts_as(TrialFacts)), suffix=COMPAT)


class SkipHash(registry.Tuner):
    """index.skipHash: the index written without its trailing hash."""

    def index_leftover(self, key: Key, value: str) -> Optional[str]:
        return ("indexes written meanwhile end in a zero trailer until git next writes them "
                "(`git update-index --force-write-index`)" if value.lower() == "true" else None)

    def index_shape(self, key: Key, value: str) -> IndexShape:
        return index_shape(key, value)

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return decide(key, cal, weights)


TUNERS = {KEY: SkipHash()}
