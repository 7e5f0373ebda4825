"""core.preloadIndex: lstat the index entries in threads before `git status` compares them.

The engine sweep gives the lstat curve (threads, split mode) on this storage;
Git has no key for the thread count (preload-index.c starts entries/500, at
most 20), so that is a finding. Real git decides the key itself: status
-uno with preload on (Git's default) against off.
"""
import dataclasses
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ... import engine
from ...output import counted
from ...errors import EngineError
from ..decide import advice
from ..measure import coldcache, gitbench, planner, search
from ..measure.ab import (EARLY_RUNS, STOPPED_BUDGET, OutOfBudget,
                          full_seconds, least_seconds)
from ..measure.bench import Bench
from ..measure.sweep import (MeasurementFailed, PointKey, Share, SweepResult,
                             engine_measure, run as run_sweep)
from ..measure.record import Calibration, Sweep, Trial
from ..measure.search import Dim, Point
from ...models import stats
from ...models.storage import NETWORK
from . import registry
from ...models.catalogue import Key
from .registry import Weights

# _part's (files, Git's count's seconds, one thread's, the files one thread did where it
# was stopped), each None where the part was not timed.
PartTimes = Tuple[Optional[int], Optional[float], Optional[float], Optional[int]]

KEY = "core.preloadIndex"
MAX_PRELOAD_PATHS = 200000
PART_FILES = 300       # the part one thread and Git's count are compared on first
PART_DONE = 30         # files one thread must have lstat-ed for its time to count
THREADS, SPLIT = "engine.preload.threads", "engine.preload.split"


def git_threads(entries: int) -> int:
    """How many threads preload-index.c starts: entries/500, at most 20, none below 2."""
    t = min(entries // 500, 20)
    return t if t >= 2 else 1


@dataclass(frozen=True)
class TrialFacts:
    cold: Optional[str] = None    # how the status was made cold, where the profile's is
    # Timed on a sample index (trial): its entries lstat-ed, of the index's (None: whole).
    sample_entries: Optional[int] = None
    entries: Optional[int] = None


@dataclass(frozen=True)
class Facts:
    entries: int
    git_threads: int
    git_default: Optional[float]     # seconds, the engine at Git's own thread count
    single_thread: Optional[float]   # None: the sweep's share of the budget had run out
    # The same two on an evenly spread part, measured first so that the comparison
    # exists however slow a whole pass is (None: older records, or the part failed).
    part_files: Optional[int] = None
    part_git_default: Optional[float] = None
    part_single_thread: Optional[float] = None
    # Where one thread was stopped at stats.CLEARLY times Git's count: the part's files it
    # had lstat-ed by then (part_single_thread is then a lower bound for the part).
    part_single_done: Optional[int] = None

    def lstat_seconds(self) -> Optional[float]:
        """The engine's lstat of every entry at Git's thread count (what the next whole
        status pays before it reads any file), or scaled from the part; None unmeasured."""
        if self.git_default:
            return self.git_default
        if self.part_git_default and self.part_files:
            return self.part_git_default * self.entries / self.part_files
        return None

    def off_slower(self) -> Optional[float]:
        """How many times longer one thread (preload off) took than Git's threads."""
        if self.single_thread and self.git_default:
            return self.single_thread / self.git_default
        if self.part_single_thread and self.part_git_default:
            return self.part_single_thread / self.part_git_default
        return None


def whole_lstat(bench: Bench) -> Optional[float]:
    """The engine's lstat of every entry at Git's thread count (Facts.lstat_seconds): what
    every whole status pays at least. None before this family's sweep."""
    s = bench.sweeps.get("preload")
    return s.facts_as(Facts).lstat_seconds() if s else None


def status_price(bench: Bench) -> Optional[float]:
    """What a trial of whole statuses needs at least (registry.Tuner.price)."""
    lstat = whole_lstat(bench)
    return least_seconds(lstat) if lstat else None


def lstat_pass(bench: Bench) -> Optional[float]:
    """A status's lstat of every entry at Git's thread count: the engine's (whole_lstat),
    else, before this family's sweep, the probe's lstat latency spread over Git's
    threads (the probe met its files for the first time). None: neither is known."""
    if "preload" in bench.sweeps:
        return whole_lstat(bench)
    lstat = bench.latency.get("lstat_hit")
    return len(bench.names) * lstat / git_threads(len(bench.names)) if lstat else None


def stakes(key: Key, bench: Bench) -> Optional[float]:
    """What turning preload off could save a status at most: its lstat pass at Git's
    thread count (nothing where the sweep shows off cannot win). Before the sweep, that
    pass by the probe's lstat latency."""
    if "preload" in bench.sweeps and _hopeless(bench):
        return 0.0
    return lstat_pass(bench)


def price(key: Key, bench: Bench) -> Optional[float]:
    # Where the sweep already shows off cannot win, the trial confirms it only with what
    # the budget has left (trial), or keeps the engine's measurement: it needs no price.
    if _hopeless(bench):
        return None
    n = _sample_size(bench)
    return status_price(bench) if n is None else least_seconds(_sample_run(bench, n))


def sweep(bench: Bench) -> Optional[Sweep]:
    """Engine lstat of every tracked file: threads and split mode (findings, no Git key).

    First one thread against Git's count on a part (_part), which is all the trial
    needs when it rules preload off out. Where it does not, the same two on the whole
    tree (_whole). The search over threads is a finding only either way, and waits
    until every trial has had the budget (bench.later): a finding never takes what a
    decision needs."""
    if not bench.names:
        return None
    names = bench.names
    listing = names[:MAX_PRELOAD_PATHS]
    dims = _dims(len(names))
    share = planner.sweep_share(bench, "preload")
    part = _part(bench, listing, share) if not bench.options.cold else (None,) * 4
    facts = Facts(len(listing), git_threads(len(names)), None, None, *part)
    if _off_cannot_win(facts) is None:
        if bench.options.cold:
            # Each pass made cold first: the search's own way of timing, in its share.
            return _search(bench, part, share)
        facts = dataclasses.replace(facts, **_whole(bench, listing, share))
    # After the trials, the search has its share of what they left, no more.
    bench.later.append(("preload", lambda b: _search(b, part, planner.later_share(b, "preload"))))
    record = Sweep.of(SweepResult.nothing(bench.options.strategy, share.elapsed(),
                                          "deferred"), dims, asdict(facts))
    _confirm_in_share(bench, record, share)
    return record


def _confirm_in_share(bench: Bench, record: Sweep, share: Share) -> None:
    """Where the part has ruled off out, real git's confirmation in what the sweep's share
    has left, where that holds its price: the key is then decided by git whatever the
    trials after it spend (its stakes are none, so its trial comes last, where the
    budget may have nothing left). A confirmation the share cannot finish is dropped, and the
    trial tries again as the last of its rank."""
    bench.sweeps["preload"] = record        # what _hopeless and the sample's size read
    if git_threads(len(bench.names)) < 2 or not _hopeless(bench) or bench.cold:
        return      # no threads: on and off are the same work, nothing to confirm
    n = _sample_size(bench)
    confirmed = planner.in_share(bench, share, lambda left: _confirmation_price(bench, n, left),
                                 lambda inside: _compare(inside, n))
    if confirmed is not None and confirmed.main.stopped != STOPPED_BUDGET:
        bench.trials[KEY] = confirmed
        bench.notes.append(f"{KEY}: real git confirmed the engine's ruling within the "
                           "preload sweep's share of the budget")


def _dims(entries: int) -> List[Dim]:
    return [Dim(THREADS, 1, 20, default=git_threads(entries)),
            Dim(SPLIT, categories=(engine.SPLIT_SLICES, engine.SPLIT_STREAMS),
                default=engine.SPLIT_SLICES)]


def _lstat_pass(bench: Bench, paths: Sequence[str], threads: int, limits: engine.Limits,
                split: str = engine.SPLIT_SLICES, partial: bool = False
                ) -> engine.PreloadResult:
    """One engine lstat of `paths` (relative to the work tree) with `threads` threads,
    one I/O stream, batches of 500 (engine.preload)."""
    return engine.preload(paths, base=bench.worktree, threads=threads, split=split,
                          io_streams=1, batch=500, limits=limits, partial=partial)


def _lstat(bench: Bench, share: Share) -> Callable[[Point, Sequence[str]], float]:
    def lstat_once(point: Point, paths: Sequence[str]) -> float:
        return _lstat_pass(bench, paths, point[THREADS], share.limits(),
                           split=point[SPLIT]).wall
    return lstat_once


def _search(bench: Bench, part: PartTimes, share: Share) -> Sweep:
    """The search over threads and split mode, and the whole tree at one thread and at
    Git's count, in the share.

    Behind a network file system's attribute cache (NFS acregmin, FUSE
    attr_timeout) a pass is hot or cold depending on how long ago the last one
    ran, which makes the measured surface timing noise. There each measured pass follows an unmeasured one, so all are
    hot, unless --cold makes them all cold."""
    opts, names = bench.options, bench.names
    listing = names[:MAX_PRELOAD_PATHS]
    network = bench.storage_class == NETWORK
    dims = _dims(len(names))
    cold_note = None
    lstat_once = _lstat(bench, share)

    def lstat_all(point: Point, paths: Sequence[str] = listing) -> float:
        nonlocal cold_note
        if opts.cold:
            cold_note = coldcache.make_cold([])
        elif network:
            lstat_once(point, paths)
        return lstat_once(point, paths)

    strategy = search.make(opts.strategy, dims, opts.seed)
    try:
        r = run_sweep(strategy, engine_measure(lstat_all), share.left(), max_evals=60)
    except MeasurementFailed as e:
        if part[0] is None:
            raise
        # No whole-tree pass fitted the share (3,000 files through 1 ms lookups): the
        # part's comparison is what it was measured first for, and must not go with it.
        bench.notes.append(f"preload sweep: no whole-tree pass fitted its share ({e}); "
                           f"one thread against Git's count stands on {part[0]} files")
        r = SweepResult.nothing(strategy.name, share.seconds - share.left())
    if cold_note:
        bench.notes.append(f"preload sweep cold: {cold_note}")
    elif network:
        bench.notes.append("preload sweep hot: on network storage each measured pass followed "
                           "an unmeasured one (attribute cache); --cold measures cold")
    at = _reference_points(bench, r.by_point(), lstat_all, share)
    facts = Facts(len(listing), git_threads(len(names)), at["git_default"], at["single_thread"],
                  *part)
    return Sweep.of(r, dims, asdict(facts))


def _whole(bench: Bench, listing: Sequence[str], share: Share) -> Dict[str, Any]:
    """Git's thread count, then one thread, each lstat-ing the whole tree once, in the
    share (on network storage each after an unmeasured pass, as the search times them:
    _search). One thread still going at stats.CLEARLY times Git's count stops there:
    off cannot win whatever the rest would show. A pass the share stops is not
    counted: {} where Git's count did not fit, and the part's comparison stands."""
    git_n = git_threads(len(bench.names))
    network = bench.storage_class == NETWORK

    def once(threads: int, timeout: float) -> engine.PreloadResult:
        limits = engine.Limits(timeout=max(0.001, min(timeout, share.left())))
        return _lstat_pass(bench, listing, threads, limits, partial=True)

    def lstat(threads: int, timeout: float) -> engine.PreloadResult:
        if network:
            once(threads, timeout)
        return once(threads, timeout)
    try:
        at_git = lstat(git_n, share.left())
        if at_git.done < len(listing):
            return {}
        clearly = at_git.wall * stats.CLEARLY
        one = lstat(1, min(clearly, share.left()))
    except EngineError as e:    # threads a pid limit refuses: the part's comparison stands
        bench.notes.append(f"preload sweep: the whole tree failed: {e.message}")
        return {}
    if one.done < len(listing) and one.wall < clearly:
        return {"git_default": at_git.wall}     # the share ended first: one thread untimed
    return {"git_default": at_git.wall, "single_thread": max(one.wall, clearly)
            if one.done < len(listing) else one.wall}


def _reference_points(bench: Bench, groups: Dict[PointKey, List[float]],
                      lstat_all: Callable[[Point], float], share: Share
                      ) -> Dict[str, Optional[float]]:
    """Git's thread count and one thread on the whole tree, where the search did not
    measure them: once each, in the share's time only (one pass of a large tree on NFS
    can take longer than the whole share)."""
    at: Dict[str, Optional[float]] = {}
    for label, threads in (("git_default", git_threads(len(bench.names))), ("single_thread", 1)):
        key = tuple(sorted({THREADS: threads, SPLIT: engine.SPLIT_SLICES}.items()))
        if key not in groups and share.left():
            try:
                groups[key] = [lstat_all(dict(key))]
            except EngineError as e:    # threads a pid limit refuses: the point stays unmeasured
                bench.notes.append(f"preload sweep: {counted(threads, 'thread')} failed: {e.message}")
        at[label] = sorted(groups[key])[len(groups[key]) // 2] if key in groups else None
    return at


def _part(bench: Bench, listing: Sequence[str], share: Share) -> PartTimes:
    """One thread against Git's count on two disjoint parts of PART_FILES spread over the
    tree, each lstat-ed once as git meets it (no pass before: on NFS and FUSE a second
    pass is served from the attribute cache, and one thread would look faster than it
    is). Git's
    count runs first, so the directories it looked up favour one thread; and each of
    Git's threads gets fewer entries than on the whole tree, so its start costs weigh
    more: the ratio errs towards one thread, never towards a wrong "off is hopeless".
    One thread stopped by the share's end counts by the files it did (at least
    PART_DONE of them), scaled to the part, so a slow lstat cannot outlast the share.
    One thread still going at stats.CLEARLY times Git's count stops there: off cannot
    win, and the time is what it had taken (a lower bound).
    Returns (files, Git's count, one thread) in seconds, and the files one thread had
    done where it was stopped at CLEARLY times Git's count (else None)."""
    step = max(1, len(listing) // (2 * PART_FILES))
    git_n = git_threads(len(bench.names))
    parts = {git_n: listing[::step][0:2 * PART_FILES:2],
             1: listing[::step][1:2 * PART_FILES:2]}
    if git_n == 1 or not parts[1]:
        return None, None, None, None

    def lstat(threads: int, limits: engine.Limits, partial: bool) -> engine.PreloadResult:
        return _lstat_pass(bench, parts[threads], threads, limits, partial=partial)
    try:
        at_git = lstat(git_n, share.limits(), False)
        # One thread still going at CLEARLY times Git's count has decided the comparison
        # (its whole part takes longer still): it stops there.
        clearly = at_git.wall * stats.CLEARLY
        one = lstat(1, engine.Limits(timeout=max(0.001, min(clearly, share.left()))), True)
    except EngineError as e:
        bench.notes.append(f"preload sweep: a part failed: {e.message}")
        return None, None, None, None
    files = len(parts[1])
    if one.done < files and one.wall >= clearly:
        bench.notes.append(f"preload sweep: one thread stopped after {one.done} of the part's "
                           f"{files} files, at {stats.CLEARLY:g} times the time Git's "
                           f"{git_n} threads took for all of theirs")
        return files, at_git.wall, max(one.wall, clearly), one.done
    if one.done < files:
        if one.done < PART_DONE:
            bench.notes.append("preload sweep: a part failed: one thread lstat-ed "
                               f"{one.done} of {files} files in the share")
            return None, None, None, None
        bench.notes.append(f"preload sweep: one thread lstat-ed {one.done} of the part's "
                           f"{files} files before its share ended; its time is scaled to "
                           "the part")
    return files, at_git.wall, one.wall * files / one.done, None


def _hopeless(bench: Bench) -> Optional[str]:
    """Why turning preload off cannot make status faster here, from the sweep
    (_off_cannot_win). Everything else status does is the same work on both sides, so
    real git is not spent on it."""
    s = bench.sweeps.get("preload")
    if s is None or bench.pid_limit is not None:
        return None    # under a pid limit Git's threads may fail where the engine's did not
    return _off_cannot_win(s.facts_as(Facts))


def _no_preload_threads(entries: int) -> str:
    return (f"Git starts no preload threads for {entries} entries (preload-index.c "
            "needs 1,000): on and off are the same work")


def _off_cannot_win(f: Facts) -> Optional[str]:
    """Git starts no threads for this index, or the engine's lstat pass at one thread
    (what status does with preload off) is clearly slower than at Git's thread count."""
    if f.git_threads < 2:
        return _no_preload_threads(f.entries)
    slower = f.off_slower()
    if slower is None or slower < stats.CLEARLY:
        return None
    files = f.entries if f.single_thread and f.git_default else f.part_files
    return (f"the engine's lstat of {files} files took {slower:.1f}x longer on one thread "
            f"(preload off) than on Git's {f.git_threads}: off cannot be faster")


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    """Preload on against off, in real git: `git status -uno` on the whole tree where a
    serial lstat of it fits SAMPLE_SHARE of the budget, else `git diff-files` on a sample
    index (_sample_size). Where the engine has shown off cannot win (_hopeless), real git
    confirms it in what the sweep's share left (_confirm_in_share), else as the last
    trials of its rank run (its stakes are none), unless what the budget has left cannot
    hold the comparison: the engine's measurement then stands."""
    if git_threads(len(bench.names)) < 2:
        return Trial.not_run(KEY, _no_preload_threads(len(bench.names)))
    if KEY in bench.trials:
        return bench.trials[KEY]        # confirmed within the sweep's share
    hopeless = _hopeless(bench)
    n = _sample_size(bench)
    if not hopeless:
        return _compare(bench, n)
    unconfirmed = Trial.not_run(KEY, hopeless + " (what the budget left could not hold "
                                "real git's confirmation)")
    try:
        if not planner.price_fits(bench, lambda left: _confirmation_price(bench, n, left)):
            return unconfirmed
        return _compare(bench, n)
    except (OutOfBudget, gitbench.DeadlineReached):
        return unconfirmed      # the engine's measurement stands, as where it was not tried


def _compare(bench: Bench, n: Optional[int]) -> Trial:
    """The A/B on the whole tree (n None) or on a sample of n entries; from a cold cache
    where the profile starts cold (preload's threads overlap the lstat misses, which a
    hot cache does not have)."""
    fresh = n is not None and bench.storage_class == NETWORK
    if n is None:
        index = bench.ws.index_copy("plain")
        st, target = gitbench.status(bench.repo, index, untracked=False), None
    elif fresh:
        index, st = None, gitbench.fresh_files_diff(bench.ws, n)
        held = bench.ws.fresh_frame() or bench.ws.listed()
        target = (len(gitbench.sample_entries(held, n)), len(held))
    else:
        sample = bench.ws.sample(n)
        st, target = gitbench.files_diff(bench.repo, sample), (len(sample.paths), sample.entries)
        index = sample.index_file
    on, off = {KEY: "true"}, {KEY: "false"}
    how = []   # what making the cache cold did (root drops it; otherwise file data only)

    def run(settings: Dict[str, str]) -> float:
        if bench.cold:
            how.append(coldcache.make_cold([index] if index else []))
        return st(settings)
    c = bench.ab("status", on, off, lambda: run(on), lambda: run(off),
                 slower_expected=_hopeless(bench) is not None)
    facts = TrialFacts(how[-1] if how else None, *(target or (None, None)))
    if c.stopped == STOPPED_BUDGET:
        # Cut short by the sweep's share or the budget: more runs at the budget's end,
        # until a verdict or nothing more fits.
        latest = [c]

        def resumed() -> Optional[Trial]:
            if latest[0].stopped != STOPPED_BUDGET:
                return None
            more = bench.resume(latest[0], lambda: run(on), lambda: run(off))
            if more is latest[0]:
                return None
            latest[0] = more
            return Trial(KEY, (more,), asdict(facts))
        bench.sharpen[KEY] = resumed
    if how:
        bench.notes.append(f"{KEY} timed cold: {how[-1]}")
    if target:
        whole = len(bench.ws.listed())
        of = (f"its {target[1]} entries" if target[1] >= whole else
              f"the {target[1]} entries of a copy that holds that many of its {whole}: "
              "Git starts as many threads for that many as for more")
        bench.notes.append(f"{KEY} timed on a sample: git diff-files reads the index with "
                           f"preload as status does, lstat-ing {target[0]} of {of} (the "
                           "rest skip-worktree) with the threads Git starts for the whole "
                           "index" + (
                               "; each run on entries of its own (network storage: the "
                               "attribute cache would serve a sample met again)"
                               if fresh else ""))
    return Trial(KEY, (c,), asdict(facts))


# The sample's size: a serial lstat of it (preload off) takes about this share of the
# budget; a comparison that drops off as clearly slower (3 pairs) then takes about 1.5%
# of it...
SAMPLE_SHARE = 0.005
# ... and each of Git's preload threads has at least this many of its entries.
SAMPLE_PER_THREAD = 5


def _serial_lstat(bench: Bench) -> Optional[float]:
    """Seconds one thread's lstat of an entry takes here: the engine's, as git meets the
    entries (the preload sweep's part, or its whole tree), else the probe's lstat."""
    s = bench.sweeps.get("preload")
    f = s.facts_as(Facts) if s else None
    if f and f.part_single_thread and f.part_files:
        done = f.part_files if f.part_single_done is None else max(1, f.part_single_done)
        return f.part_single_thread / done
    if f and f.single_thread:
        return f.single_thread / f.entries
    return bench.latency.get("lstat_hit")


def _sample_size(bench: Bench) -> Optional[int]:
    """How many entries the trial lstats: None for all of them (a whole status), where
    one thread's lstat of them all fits SAMPLE_SHARE of the budget or nothing measured
    says what an lstat costs; else a sample whose serial pass does, with
    SAMPLE_PER_THREAD entries for each thread Git starts at least. The sample leaves out
    the rest of status's work (the diff against HEAD, the index written), which is the
    same with preload on and off."""
    per_entry = _serial_lstat(bench)
    entries = len(bench.ws.listed()) if bench.workspace else len(bench.names)
    if not per_entry:
        return None
    n = max(int(bench.options.budget * SAMPLE_SHARE / per_entry),
            SAMPLE_PER_THREAD * git_threads(len(bench.names)))
    return None if n >= entries else n


def _confirmation_price(bench: Bench, n: Optional[int], left: float) -> float:
    """What real git's comparison needs at least where the engine has shown off clearly
    slower: its warm-up pair and the pairs after which ab drops a clearly slower
    candidate (ab.EARLY_RUNS), each run with the making of its own sample where it has
    one (_fresh_sample_seconds); past `left` without it, that much."""
    runs = full_seconds(_sample_run(bench, n), EARLY_RUNS)
    if runs > left:
        return runs     # too dear already: no sample is made to price the rest
    return full_seconds(_sample_run(bench, n) + _fresh_sample_seconds(bench, n), EARLY_RUNS)


def _fresh_sample_seconds(bench: Bench, n: Optional[int]) -> float:
    """Seconds the making of a run's own sample index takes, as the last one made took
    (one is made where none has been: on network storage each run has one,
    gitbench.fresh_files_diff); 0 elsewhere."""
    if n is None or bench.storage_class != NETWORK:
        return 0.0
    if bench.ws.fresh_seconds is None:
        os.unlink(bench.ws.fresh_sample(n, 0).index_file)
    assert bench.ws.fresh_seconds is not None       # fresh_sample times what it makes
    return bench.ws.fresh_seconds


def _sample_run(bench: Bench, n: Optional[int]) -> float:
    """What a pair's run takes at least on average: half one thread's lstat of the
    entries timed (a pair is one run of each side; the side with preload on is at least
    as fast)."""
    per_entry = _serial_lstat(bench) or 0.0
    return per_entry * (n if n is not None else len(bench.names)) / 2


def decide(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    s = cal.sweeps.get("preload")
    ev: Dict[str, Any] = {k: None for k in ("best", "best_value", "git_default", "single_thread",
                                            "git_threads")}
    if s:
        f = s.facts_as(Facts)
        ev.update(best=s.best, best_value=s.best_value, git_default=f.git_default,
                  single_thread=f.single_thread, git_threads=f.git_threads)
    tf = t.facts_as(TrialFacts)
    what = ("git status -uno with preload off" if not tf.sample_entries else
            f"git diff-files with preload off, lstat-ing a sample of {tf.sample_entries} of "
            f"the index's {tf.entries} entries (what status does before its diff)")
    chosen = advice.weighed(key, t, weights, "false", {"status": what}, ev)
    ruled_out = s and not t.main.fails and _off_cannot_win(s.facts_as(Facts))
    if chosen.status == advice.SET and ruled_out:
        # Real git's runs meet the same entries again, from the attribute and inode
        # caches; the engine's part met them the first time, as a status does once the
        # caches have let them go, and the two can disagree. Off is set only where both
        # agree.
        return advice.not_set(key, f"not set: {chosen.reason}; but {ruled_out} "
                                   "on entries met the first time", ev)
    return chosen


def findings(cal: Calibration) -> List[str]:
    s = cal.sweeps.get("preload")
    if not s or s.best_value is None:
        return []
    f = s.facts_as(Facts)

    def took(t: Optional[float]) -> str:
        return "not timed" if t is None else f"{t * 1e3:.1f} ms"
    return [f"lstat of {f.entries} files: fastest with {counted(s.best[THREADS], 'thread')} "
            f"({s.best[SPLIT]}, {s.best_value * 1e3:.1f} ms); Git starts "
            f"{counted(f.git_threads, 'thread')} ({took(f.git_default)}), one thread: "
            f"{took(f.single_thread)}. Git has no key for the thread count."]


class PreloadIndex(registry.Tuner):
    """core.preloadIndex: the engine's lstat pass, then real git's status on a part or a sample."""

    def stakes(self, key: Key, bench: Bench) -> Optional[float]:
        return stakes(key, bench)

    def price(self, key: Key, bench: Bench) -> Optional[float]:
        return price(key, bench)

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return decide(key, cal, weights)


TUNERS = {KEY: PreloadIndex()}
