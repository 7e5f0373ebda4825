"""`git-tune agent report`: what the user's own git commands cost, per repository and
command, under each set of git-tune's values in force (so before and after each
write), where the time went, and the rehash storms."""
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import storm
from .events import Command
from ...models import stats

RESAMPLES = 2000


@dataclass(frozen=True)
class Latency:
    repo: str
    command: str
    values: Dict[str, str]          # git-tune's keys in force ({}: Git's defaults)
    first_seen: str                 # the sid of the first such command (its start time)
    runs: int
    median: float
    median_low: float               # 95% bootstrap interval of the median
    median_high: float
    p90: float
    entries: Optional[int]          # median index size
    rehashed: int                   # entries re-read and hashed, summed
    regions: Dict[str, float]       # share of the elapsed time in each region
    callers: Dict[str, int]         # the parent process git named (bash, code, ...) -> runs


@dataclass(frozen=True)
class Change:
    """One command's time under a later set of values against under the first one seen
    (before git-tune wrote, where the agent was on before): the user's own runs, not
    paired, normalized by nothing but the command class, so read with the interval."""
    repo: str
    command: str
    before: Dict[str, str]
    after: Dict[str, str]
    runs_before: int
    runs_after: int
    speedup: float                  # before / after median
    low: float                      # 95% bootstrap interval of the speedup
    high: float
    verdict: str                    # faster | no change | slower (stats' verdict)


def _interval(x: np.ndarray, seed: int = 0) -> Tuple[float, float]:
    if len(x) < 2:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(x, size=(RESAMPLES, len(x))), axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(low), float(high)


def _latency(repo: str, command: str, values: Dict[str, str], group: Sequence[Command]) -> Latency:
    x = np.array([c.elapsed for c in group], dtype=float)
    low, high = _interval(x)
    total = float(x.sum()) or 1.0
    names = sorted({r for c in group for r in c.regions})
    entries = [c.counts["entries"] for c in group if "entries" in c.counts]
    callers: Dict[str, int] = {}
    for c in group:
        callers[c.caller or "?"] = callers.get(c.caller or "?", 0) + 1
    return Latency(repo, command, values, min(c.sid for c in group), len(x),
                   float(np.median(x)), low, high, float(np.percentile(x, 90)),
                   int(np.median(entries)) if entries else None,
                   sum(c.counts.get("rehashed", 0) for c in group),
                   {r: sum(c.regions.get(r, 0.0) for c in group) / total for r in names},
                   callers)


def _groups(records: Sequence[Command]) -> Dict[Tuple[str, str, Tuple[Tuple[str, str], ...]], List[Command]]:
    """(repo, command, values in force) -> its commands that ended."""
    groups: Dict[Tuple[str, str, Tuple[Tuple[str, str], ...]], List[Command]] = {}
    for c in records:
        if c.elapsed is None or not c.repo:
            continue
        key = (c.repo, c.command, tuple(sorted(c.values.items())))
        groups.setdefault(key, []).append(c)
    return groups


def latencies(records: Sequence[Command]) -> List[Latency]:
    out = [_latency(repo, cmd, dict(values), g)
           for (repo, cmd, values), g in _groups(records).items()]
    return sorted(out, key=lambda l: (l.repo, l.command, l.first_seen))


def changes(records: Sequence[Command]) -> List[Change]:
    """Per repository and command: each later set of values against the first seen."""
    by_command: Dict[Tuple[str, str], List[Tuple[str, Tuple[Tuple[str, str], ...], List[Command]]]] = {}
    for (repo, cmd, values), g in _groups(records).items():
        by_command.setdefault((repo, cmd), []).append((min(c.sid for c in g), values, g))
    out = []
    for (repo, cmd), sets in sorted(by_command.items()):
        sets.sort()
        _, first, before = sets[0]
        for _, values, after in sets[1:]:
            est = stats.compare([c.elapsed for c in before if c.elapsed is not None],
                                [c.elapsed for c in after if c.elapsed is not None])
            out.append(Change(repo, cmd, dict(first), dict(values), len(before), len(after),
                              est.speedup, 1 / est.high, 1 / est.low, est.verdict))
    return out


def select(records: Sequence[Command], repo: Optional[str], since: Optional[float]) -> List[Command]:
    """Records of one work tree (None: all), ended within the last `since` seconds."""
    import os
    real = os.path.realpath(repo) if repo else None
    after = time.time() - since if since else 0.0
    return [c for c in records if c.ended >= after
            and (real is None or (c.repo and os.path.realpath(c.repo) == real))]


def report(records: Sequence[Command]) -> Dict[str, Any]:
    return {"commands": len(records),
            "latencies": [asdict(l) for l in latencies(records)],
            "changes": [asdict(c) for c in changes(records)],
            "storms": [asdict(s) for s in storm.storms(records)]}
