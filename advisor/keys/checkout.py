"""checkout.workers: how many processes `git checkout` writes files with.

The engine's sweep (checkout_sweep) gives this storage's curve; real git decides
(checkout_trial): Git's one worker against the engine's pick, on the whole tree where
it fits, on a part of it where not. The decision is the profile's objective over the
counts real git timed, extended by the engine's ranking beyond what a part could time.
"""
import dataclasses
import statistics
from typing import Dict, List, Optional, Tuple

from ..decide import advice
from . import registry
from .checkout_sweep import (KNEE, WORKERS, _engine_medians,
                             _engine_pick, _facts, _saved, _stakes)
from .checkout_trial import (CLONE, PART_FILES_PER_WORKER, WorkersFacts, _part_top,
                             _trial_workers)
# The family's engine sweep (registry.sweepers finds it here) and the threshold's key
# name, which other modules read from the workers' module.
from .checkout_sweep import THRESHOLD, sweep  # noqa: F401
from ..measure import planner
from ..measure.bench import Bench
from ..measure.record import Calibration, Comparison, Measured, Sweep, Trial
from ...models import stats
from ...models.catalogue import Key
from .registry import Weights


def by_count(trial: Trial) -> Dict[int, Trial]:
    """The workers trial split by the worker count each comparison timed."""
    counts: Dict[int, List[Comparison]] = {}
    for c in trial.comparisons:
        counts.setdefault(int(c.candidate[WORKERS]), []).append(c)
    return {w: Trial(WORKERS, tuple(cs), trial.facts) for w, cs in counts.items()}


def _advice_for(key: Key, w: int, t: Trial, cal: Measured, weights: Weights
                ) -> advice.KeyAdvice:
    s = cal.sweeps.get("checkout")
    f = _facts(s)
    ev = {"best": s.best if s else None, "curve": f.model_samples, "model": f.model}
    part = t.facts_as(WorkersFacts).part
    what = {c.workload: _timed(c, w, t) for c in t.comparisons}
    # A part's gain stands for the tree's, unmeasured: say so (bench/part_fidelity.py).
    extrapolated = ("; timed on a part of the tree only: the whole tree's own gain was not "
                    "timed, and a part's files, whose runs change directory more often, "
                    "gain less" if part else "")
    return advice.weighed(key, t, weights, str(w), what, ev, suffix=extrapolated)


def _timed(c: Comparison, w: int, t: Trial) -> str:
    """What real git timed in comparison c of the workers trial t, at w workers."""
    f = t.facts_as(WorkersFacts)
    if f.part:
        return (f"writing {c.files} of the tree's {f.entries} files (a part), {w} workers "
                "(its next git status weighed apart)")
    if c.workload == CLONE:
        return f"writing {c.files} files then git status, {w} workers"
    then = ", then git status of them" if f.next_status else ""
    return f"checkout of {c.files} files with {w} workers{then}"


def chosen(key: Key, cal: Measured, weights: Weights) -> Tuple[Optional[int], advice.KeyAdvice]:
    """The worker count the profile's objective prefers among those real git timed: of
    the counts set on their own evidence (advice.weighed), the one with the lower weighted
    time ratio; the fewer workers when none is set; none when real git timed none. The
    threshold is trialled and decided at this count."""
    t = advice.trial_of(key, cal)
    if t is None or not t.comparisons:
        return None, advice.unmeasured(key)
    facts = t.facts_as(WorkersFacts)
    verdicts = [(w, _unless_racy(key, w, g, facts, _advice_for(key, w, g, cal, weights)),
                 advice.weighted_ratio(g.comparisons, weights))
                for w, g in sorted(by_count(t).items())]
    kept = [v for v in verdicts if v[1].status == advice.SET] or verdicts[:1]
    w, a, ratio = min(kept, key=lambda v: v[2])
    others = [f"{o} workers {1 / r:.2f}x" for o, _, r in verdicts if o != w]
    if others and a.status == advice.SET:
        a = dataclasses.replace(a, reason=f"{a.reason} (weighted, against "
                                          + ", ".join(others) + ")")
    if a.status == advice.SET and facts.part:
        return _beyond_the_part(w, a, by_count(t)[w].main, facts, facts.part,
                                cal.sweeps.get("checkout"))
    return w, a


def _unless_racy(key: Key, w: int, t: Trial, facts: WorkersFacts, a: advice.KeyAdvice
                 ) -> advice.KeyAdvice:
    """a, or where a part set `w` and the next status pays more than the write saves
    the tree (_racy_reread), Git's default with that reason."""
    costly = (_racy_reread(w, t.main, facts, facts.part)
              if a.status == advice.SET and facts.part else None)
    return advice.not_set(key, costly, a.evidence) if costly else a


def _racy_reread(w: int, c: Comparison, facts: WorkersFacts, part: int) -> Optional[str]:
    """Why `w` workers are not set where the next status's racy re-read would cost the
    tree more than the write saves it; None where it does not.

    A part's runs time the write alone. After a burst of writes, the files written
    within the index's last second are racily clean and the next status reads them
    again; a faster write leaves more of them. That is a cost of the burst's last second,
    not of every file: the part's status after `w` workers, over the one after a
    sequential write, scaled by how many more files that second holds in the tree than
    in the part (the part's write at `w` took under a second: 1 / its seconds), is set
    against the write's gain a file times the tree's files."""
    timed = _reread(w, c, facts)
    if timed is None or not c.times_default:
        return None     # one side failed: the side that works is set whatever its speed
    write, extra = timed
    saved = ((statistics.median(c.times_default) - write) * facts.entries / part
             if facts.entries else 0.0)
    if extra <= 0 or extra < saved:
        return None
    return (f"{w} workers wrote a part of {facts.part} files faster, but the next git "
            f"status re-read what the burst left racily clean: about {extra:.2f} s more, "
            f"against {saved:.2f} s the write saves the tree's {facts.entries} files")


def _reread(w: int, c: Comparison, facts: WorkersFacts) -> Optional[Tuple[float, float]]:
    """(the part's write at `w` workers, the next status's extra seconds after it scaled
    to the tree's last second: _racy_reread); None where the record has no statuses'
    seconds or a side failed."""
    seconds = facts.status_seconds or {}
    if str(w) not in seconds or "1" not in seconds or c.fails or not c.times_candidate:
        return None
    write = statistics.median(c.times_candidate)
    return write, (seconds[str(w)] - seconds["1"]) * max(1.0, 1.0 / max(write, 1e-3))


def _beyond_the_part(w: int, a: advice.KeyAdvice, c: Comparison, facts: WorkersFacts,
                     part: int, s: Optional[Sweep]) -> Tuple[int, advice.KeyAdvice]:
    """Where a part capped the counts real git timed (PART_FILES_PER_WORKER files a
    worker) below the engine's pick, and real git showed the capped count faster beyond
    noise (`c`, its comparison), the engine's ranking chooses the count among those it
    timed above it, up to one worker per PART_FILES_PER_WORKER of the tree's files (the
    rule that capped the part, read at the tree's size). Only where the engine's own writes hid
    more latency than its threads had cores (one thread against its pick faster by more
    than the cores): there the writes wait on the storage, not the CPU, a worker
    process's start costs little beside them, and the engine ranks worker counts as git
    does (bench/fidelity.py). Where it does not, the speedup never passes the cores and
    real git's count stands.

    The engine times writes only, not the next status, which re-reads what a burst of
    writes left racily clean, so more workers can write faster and still lose the
    sequence: where that re-read would cost the tree more than the faster write saves it
    (_held_by_the_status), real git's count stands. A count chosen so is an open question
    the agent's experiment settles on the user's own branch switches (_open_question)."""
    f = _facts(s)
    top = _part_top(part)
    medians = _engine_medians(s) if s else {}
    below = [c for c in medians if c <= w]
    if s is None or w < top or 1 not in medians or not below or not f.cores:
        return w, a
    most = max(w, (facts.entries or 0) // PART_FILES_PER_WORKER)
    reach = {k: t for k, t in medians.items() if w < k <= most and t > 0}
    if not reach:
        return w, a
    fastest = min(reach.values())
    pick, near = min(k for k, t in reach.items() if t <= fastest * (1 + KNEE)), max(below)
    hidden, ahead = medians[1] / medians[pick], medians[near] / medians[pick]
    if hidden <= f.cores or ahead <= 1 + KNEE:
        return w, a
    held = _held_by_the_status(w, pick, ahead, c, facts, part)
    if held is not None:
        return w, dataclasses.replace(a, reason=f"{a.reason}; not more than {w}: {held}")
    reason = (f"{a.reason}; {pick} set, not {w}: a part of {part} files times at most "
              f"{top} workers, and the engine's writes on this storage, {hidden:.1f}x faster "
              f"with {pick} threads than one (more than its {f.cores} cores: they wait on the "
              f"storage, where the engine ranks worker counts as git does), put {pick} "
              f"{ahead:.2f}x ahead of {near}: extrapolated beyond the counts real git timed")
    return pick, dataclasses.replace(a, value=str(pick), reason=reason, evidence={
        **a.evidence, "extrapolated_from": w})


def _held_by_the_status(w: int, pick: int, ahead: float, c: Comparison,
                        facts: WorkersFacts, part: int) -> Optional[str]:
    """Why `pick` workers, whose writes the engine puts `ahead` times faster than `w`'s,
    are not set beyond the `w` real git timed; None where they are.

    The next status re-reads what the burst's last second left racily clean
    (_racy_reread): after `w` workers, the part's status over the one after a sequential
    write, scaled to the tree's last second. A burst `ahead` times faster leaves `ahead`
    times as many files in that second, so `pick` adds that extra times (ahead - 1),
    against the tree's write at `w` (the part's, a file times the tree's files) made
    `ahead` times faster. A record without the statuses' seconds is read by their ratio
    alone (_status_paid)."""
    timed = _reread(w, c, facts)
    if timed is None or not facts.entries:
        slowdown = _status_paid(str(w), facts)
        return None if slowdown is None else (
            f"the part's next status took {slowdown:.2f}x as long after its parallel write "
            "as after a sequential one, beyond the statuses' noise, which the engine's "
            "writes do not show")
    write, reread = timed
    extra = reread * (ahead - 1)
    saved = write * facts.entries / part * (1 - 1 / ahead)
    if extra <= 0 or extra < saved:
        return None
    return (f"{pick} workers would write faster still, but the next git status would "
            f"re-read about {extra:.2f} s more of what the burst left racily clean, "
            f"against {saved:.2f} s the faster write saves the tree's {facts.entries} files")


def _status_paid(w: str, facts: WorkersFacts) -> Optional[float]:
    """The part's next status after `w` workers against after a sequential write, where
    it took more than KNEE longer, beyond the noise of its runs; else None (by medians
    alone where the record kept no verdict)."""
    slowdown = (facts.status_slowdown or {}).get(w)
    if slowdown is None or slowdown <= 1 + KNEE:
        return None
    if facts.status_verdict is not None and facts.status_verdict.get(w) != stats.SLOWER:
        return None
    return slowdown


def _open_question(key: Key, cal: Calibration, weights: Weights) -> Optional[Tuple[str, str]]:
    """What the user's own branch switches can settle (the agent's experiment): a count
    the engine's ranking chose above what real git timed on a part, against the count
    real git confirmed there; a count a part showed faster but within its noise, where
    the engine's writes waited on the storage (_within_noise_on_a_part); or, where the
    budget ended before real git timed any count, the engine's pick against the value in
    force (only where the engine measured a gain)."""
    s = cal.sweeps.get("checkout")
    t = advice.trial_of(key, cal)
    if t is not None and t.comparisons:
        _, a = chosen(key, cal, weights)
        confirmed = a.evidence.get("extrapolated_from")
        if a.status == advice.SET and confirmed:
            return str(confirmed), (f"{a.value} workers were set on the engine's ranking, "
                                    f"beyond the {confirmed} real git timed on a part of the "
                                    "tree: your branch switches compare the two")
        return None if a.status == advice.SET else _within_noise_on_a_part(t, s)
    if s is None or WORKERS not in cal.unfinished or not _saved(s):
        return None
    pick = _engine_pick(s)
    return str(pick), (f"the budget ended before real git timed {WORKERS}; the engine's "
                       f"writes were fastest from {pick} threads: your branch switches "
                       "compare that with the value in force")


def _within_noise_on_a_part(t: Trial, s: Optional[Sweep]) -> Optional[Tuple[str, str]]:
    """A part's runs are few and short, and on a busy host a real gain can stay within
    their noise. Where the part's count was faster by its median, not slower beyond
    noise, and the engine's writes hid more latency than its cores (the storage's wait,
    where it ranks counts as git does), the user's switches on the whole tree ask again."""
    facts, c = t.facts_as(WorkersFacts), t.main
    w, est = c.candidate.get(WORKERS), c.estimate
    if not facts.part or s is None or w is None or est is None or not planner.within_noise(c):
        return None
    # One thread's time over the pick's: _saved is 0 where either is unmeasured.
    hidden, cores = 1 / (1 - _saved(s)), _facts(s).cores
    if not cores or hidden <= cores:
        return None
    pick = _engine_pick(s)
    return str(w), (f"real git timed {w} workers on a part of {facts.part} files: "
                    f"{est.speedup:.2f}x, within the noise of its runs; the engine's "
                    f"writes were {hidden:.1f}x faster with {pick} threads than one (more "
                    f"than its {cores} cores): your branch switches compare {w} with the "
                    "value in force")


def _decide_workers(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    return chosen(key, cal, weights)[1]


def findings(cal: Calibration) -> List[str]:
    f = _facts(cal.sweeps.get("checkout"))
    m = f.model
    if not m:
        return []
    return [f"writing files: {m['per_item'] * 1e6:.0f} µs each, about {m['parallelism']} "
            f"served in parallel by this storage and CPUs (engine, {f.files} files)."]


class Workers(registry.Tuner):
    """checkout.workers: timed on the whole tree written where it fits the budget, on a
    part of it where not (_trial_workers); at stake, every file of the tree written."""

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return _trial_workers(bench)

    def stakes(self, key: Key, bench: Bench) -> Optional[float]:
        return _stakes(bench, len(bench.names))

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
        return _decide_workers(key, cal, weights)

    def open_question(self, key: Key, cal: Calibration, weights: Weights
                     ) -> Optional[Tuple[str, str]]:
        return _open_question(key, cal, weights)


TUNERS = {WORKERS: Workers()}
