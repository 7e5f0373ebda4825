"""The one A/B runner: real git, interleaved (ABBA), Git's default against a candidate, into
the one comparison record (record.Comparison).

Calibration runs it under its budget (the minimum runs priced by a warm-up pair, a
candidate dropped once clearly slower, more runs for a comparison still within noise);
`verify` runs it unbounded, every run to the end; the agent's online comparison of the
user's own commands stops by the same rule (stopped) and keeps the same record.

A pair's two runs are taken side by side, so the estimate is over the pairs' ratios
(stats.compare_paired), in calibration and verify alike: drift that slows both runs of
a pair (a neighbour's burst, a cache filling, a clock stepping down) cancels, and two
comparisons of the same values read the same cost where the machine wandered
differently in each.
"""
import contextlib
import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, ContextManager, Dict, List, Optional, Sequence, Tuple

from . import gitbench
from .budget import EXTEND, Budget, now
from .record import (FAILS_CANDIDATE, FAILS_DEFAULT, Comparison,
                     comparison, failed_comparison)
from .sweep import MeasurementFailed
from ...models import stats

# A candidate whose every run is stats.CLEARLY slower than every run of Git's default,
# after EARLY_RUNS pairs, is dropped: no number of further runs would make it faster.
# One clearly faster after stats.CLEAR_RUNS pairs has its verdict: a large gain is
# certain before MIN_RUNS.
EARLY_RUNS = 2
STOPPED_SLOWER, STOPPED_FASTER, STOPPED_BUDGET = "clearly slower", "clearly faster", "budget"

Run = Callable[[], float]
Settings = Dict[str, str]


class OutOfBudget(Exception):
    """A trial's minimum runs do not fit in the budget left: seconds_short says by how
    much (at least), None when the budget had ended before the trial could start."""

    def __init__(self, seconds_short: Optional[float]) -> None:
        super().__init__("budget spent" if seconds_short is None else f"{seconds_short:.1f} s short")
        self.seconds_short = seconds_short


@dataclass(frozen=True)
class Runs:
    """How a comparison runs. budget None: no budget (verify), each git run under git's
    usual limit and every pair run; stop_early: a candidate clearly slower is dropped and
    one clearly faster decided before `runs` pairs; extensions: more rounds of `runs`
    pairs for a comparison still within noise, while they fit budget.EXTEND of what is
    left (a noisy disk needs 10-15 runs a side to tell a 20% gain, bench/tuner_quality.py)
    times extend_share: the share of it one trial may take where others wait for it.
    More runs on a comparison within noise are worth less than a trial not yet run."""

    runs: int
    seed: int = 0
    budget: Optional[Budget] = None
    stop_early: bool = True
    extensions: int = 2
    extend_share: float = 1.0
    # The fewest pairs after the warm-up the caller expects a verdict in: CLEAR_RUNS (a
    # clear gain), or EARLY_RUNS where what it measured before predicts the candidate
    # clearly slower (real git confirming the engine: keys/preload.py).
    fewest: int = stats.CLEAR_RUNS

    def left(self) -> float:
        return math.inf if self.budget is None else self.budget.left()

    def within(self, seconds: float) -> ContextManager[None]:
        """Every git run inside killed `seconds` from now at the latest (none: no budget)."""
        return contextlib.nullcontext() if math.isinf(seconds) else gitbench.deadline(seconds)


def stopped(times_default: Sequence[float], times_candidate: Sequence[float],
            slower: bool = True) -> str:
    """Why the pairs so far end a comparison early: the candidate clearly slower after
    EARLY_RUNS pairs (with `slower`), clearly faster after stats.CLEAR_RUNS; else ""."""
    if slower and stats.clearly_apart(times_candidate, times_default, EARLY_RUNS):
        return STOPPED_SLOWER
    if stats.clearly_apart(times_default, times_candidate):
        return STOPPED_FASTER
    return ""


def least_seconds(run: float) -> float:
    """What a comparison whose runs take at least `run` seconds needs at least to set its
    candidate: its warm-up pair and the CLEAR_RUNS pairs of the quickest gain (a
    candidate dropped as clearly slower needs EARLY_RUNS: full_seconds). run() says
    the same from its warm-up (a pair past 1 / (Runs.fewest + 1) of what is left does
    not fit); this says it before anything is spent (registry.Tuner.price)."""
    return full_seconds(run, stats.CLEAR_RUNS)


def full_seconds(run: float, runs: int) -> float:
    """What a comparison whose runs take `run` seconds needs where its warm-up shows no
    gain beyond stats.APART (run() then asks for `runs` pairs to fit, not CLEAR_RUNS):
    its warm-up pair and `runs` pairs."""
    return 2 * (runs + 1) * run


def longest_run(seconds: float, runs: int) -> float:
    """The longest a run may take for a comparison of `runs` pairs and its warm-up pair
    to fit in `seconds`: full_seconds the other way round."""
    return seconds / full_seconds(1.0, runs)


class _SideFailed(MeasurementFailed):
    """Git failed on one side of a comparison after its warm-up had worked."""

    def __init__(self, side: str, error: str) -> None:
        super().__init__(error)
        self.side, self.error = side, error


def _side(run: Run, side: str) -> Run:
    """The run, with a failure named by its side (the deadline is not a failure)."""
    def tagged() -> float:
        try:
            return run()
        except gitbench.DeadlineReached:
            raise
        except MeasurementFailed as e:
            raise _SideFailed(side, str(e)) from None
    return tagged


def run(workload: str, default: Dict[str, str], candidate: Dict[str, str],
        run_default: Run, run_candidate: Run, how: Runs, *, files: Optional[int] = None,
        warm_default: Optional[float] = None, warm_does_more: bool = False) -> Comparison:
    """Real git, interleaved (ABBA): Git's default against the candidate.

    Keeping Git's default needs no proof, changing it does, so under a budget the runs
    are asymmetric: a candidate clearly slower after EARLY_RUNS pairs is dropped there,
    and a comparison the budget cannot finish keeps fewer than the minimum runs a side
    (whose verdict is never "faster"). A warm-up pair prices the runs first: when the
    minimum does not fit in what is left, OutOfBudget says how many seconds it needed.
    Git failing on both sides is MeasurementFailed; on one side, the record says which.

    `warm_default`: Git's default has just run this very workload (a pilot), in that
    many seconds: it stands for the warm-up's default side, whose run would only
    repeat it. `warm_does_more`: the warm-up's runs do work the timed runs do not (a
    part's status after its first runs), so the pairs are priced by what the warm-up
    timed, not by its wall."""
    w = _warm_up(run_default, run_candidate, warm_default, how, warm_does_more)
    if w.error_default and w.error_candidate:
        raise MeasurementFailed(f"git failed with Git's default and with {candidate}: "
                                f"{w.error_default}")
    if w.error_default or w.error_candidate:
        return _one_side_fails(workload, default, candidate, run_default, run_candidate,
                               w.error_default, w.error_candidate, files, how)
    assert w.default is not None and w.candidate is not None     # neither side failed
    pair = w.wall
    minimum = _fewest_pairs(w.default, w.candidate, how)
    if pair * minimum > how.left():
        raise OutOfBudget(pair * minimum - how.left())
    try:
        return _timed(workload, default, candidate, _side(run_default, FAILS_DEFAULT),
                      _side(run_candidate, FAILS_CANDIDATE), files, how, pair)
    except _SideFailed as e:
        # It worked in its warm-up and failed later (a pid limit that threads exceed
        # only when enough of them overlap): failing sometimes is failing.
        error = f"{e.error} (worked in its warm-up: it fails only sometimes)"
        return _one_side_fails(workload, default, candidate, run_default, run_candidate,
                               error if e.side == FAILS_DEFAULT else None,
                               error if e.side == FAILS_CANDIDATE else None, files, how)


def _fewest_pairs(default: float, candidate: float, how: Runs) -> int:
    """The pairs after the warm-up that must fit for the comparison to start. A warm-up
    already apart by stats.APART may end in fewer than `how.runs`: a gain in CLEAR_RUNS
    pairs, a candidate clearly slower in EARLY_RUNS (it is then dropped and Git's
    default kept: real git's confirmation of what the engine ruled out, keys/preload.py,
    is priced so). Whether they do end it is the runs' business, not the warm-up's (one
    pair is noisier than the median of three)."""
    if how.stop_early and default > candidate * stats.APART:
        return stats.CLEAR_RUNS
    if how.stop_early and candidate > default * stats.APART:
        return EARLY_RUNS
    return how.runs


@dataclass(frozen=True)
class WarmUp:
    """The warm-up pair: git's error on each side (None: it worked), the seconds each
    side's run measured itself (what the runs compare), and the pair's wall seconds,
    what it cost the budget (a run's own set-up, such as removing the files a checkout
    writes, is outside its measured time, and pricing by it would make a gain look
    smaller)."""
    error_default: Optional[str]
    error_candidate: Optional[str]
    default: Optional[float]
    candidate: Optional[float]
    wall: float


def _warm_up(run_default: Run, run_candidate: Run, warm_default: Optional[float],
             how: Runs, by_timed: bool = False) -> WarmUp:
    """The warm-up pair (`warm_default`: the default side's seconds, already run);
    `by_timed`: its wall is what the runs timed (run's warm_does_more)."""
    left = how.left()
    if left <= 0:
        raise OutOfBudget(None)
    t0 = now()
    try:
        # The fewest pairs a verdict needs come after the warm-up, each priced at it:
        # a warm-up past a quarter of what is left (CLEAR_RUNS pairs; a third where
        # the caller expects the candidate dropped in EARLY_RUNS: how.fewest) already
        # says "does not fit", without running on to say it.
        with how.within(left / (how.fewest + 1)):
            error_default, default = ((None, warm_default) if warm_default is not None
                                      else gitbench.attempt(run_default))
            t1 = now()
            error_candidate, candidate = gitbench.attempt(run_candidate)
    except gitbench.DeadlineReached:
        # At least that per pair, for the warm-up and the minimum runs.
        raise OutOfBudget((now() - t0) * (how.runs + 1) - left) from None
    wall = (t1 - t0 if warm_default is None else warm_default) + now() - t1
    if by_timed and default is not None and candidate is not None:
        wall = default + candidate
    return WarmUp(error_default, error_candidate, default, candidate, wall)


def resume(c: Comparison, run_default: Run, run_candidate: Run, how: Runs) -> Comparison:
    """More runs for comparison c, later in the same calibration (what the budget left
    once every key had its trial): a warm-up pair first, untimed (other trials have run
    on the storage since), then `how.runs` pairs added to c's and their extensions, as
    run() times them. Where the budget ends before a pair is added, c as it was
    (OutOfBudget where not even the warm-up fitted)."""
    w = _warm_up(run_default, run_candidate, None, how)
    if w.error_default or w.error_candidate or w.wall > how.left():
        # Failing now, where it worked before: c's runs stand (verify times it again).
        # Or not one more pair fits.
        return c
    ta, tb = list(c.times_default), list(c.times_candidate)
    try:
        more = _timed(c.workload, c.default, c.candidate, _side(run_default, FAILS_DEFAULT),
                      _side(run_candidate, FAILS_CANDIDATE), c.files, how, w.wall, ta, tb)
    except _SideFailed:
        return c
    # A budget's end among the added pairs does not make c's own full runs cut short.
    return more if more.stopped != STOPPED_BUDGET else dataclasses.replace(
        more, stopped=c.stopped, budget_needed=c.budget_needed)


def _timed(workload: str, default: Settings, candidate: Settings, run_default: Run,
           run_candidate: Run, files: Optional[int],
           how: Runs, pair: float, ta: Optional[List[float]] = None,
           tb: Optional[List[float]] = None) -> Comparison:
    """The interleaved runs after a warm-up pair that worked on both sides (after the
    runs `ta` and `tb` hold already, where resumed)."""
    ta = [] if ta is None else ta
    tb = [] if tb is None else tb
    why, needed = _pairs(run_default, run_candidate, ta, tb, how, pair)
    if not ta:    # the budget's end came during the first pair
        raise OutOfBudget(pair * how.runs)
    c = comparison(workload, default, candidate, ta, tb, how.seed, files, why,
                   paired=True, budget_needed=needed)
    for _ in range(how.extensions):
        est = c.estimate
        assert est is not None          # both sides ran: a comparison has its estimate
        # Priced at the pairs so far (the warm-up's can be a cold outlier).
        pair = (sum(ta) + sum(tb)) / len(ta)
        if why or est.verdict != stats.NO_CHANGE or abs(est.ratio - 1) <= stats.MIN_EFFECT \
                or pair * how.runs > how.left() * EXTEND * how.extend_share:
            break
        why, needed = _pairs(run_default, run_candidate, ta, tb, how, pair, slower=False)
        c = comparison(workload, default, candidate, ta, tb, how.seed, files, why,
                       paired=True, budget_needed=needed)
    return c


def _one_side_fails(workload: str, default: Settings, candidate: Settings, run_default: Run,
                    run_candidate: Run, error_default: Optional[str],
                    error_candidate: Optional[str], files: Optional[int], how: Runs
                    ) -> Comparison:
    """Git failed on one side only (a pid limit Git's preload threads exceed, workers
    that cannot start): the failing side is tried once more, so one unlucky moment
    does not decide, and the working side runs the minimum times, so that it is
    known to work every time. A side that works only sometimes is a failure too."""
    failing = run_default if error_default else run_candidate
    working = run_candidate if error_default else run_default
    fails = FAILS_DEFAULT if error_default else FAILS_CANDIDATE
    error = error_default or error_candidate or ""
    times: List[float] = []
    try:
        with how.within(how.left()):
            if gitbench.attempt(failing)[0] is None:
                error += " (then worked once: it fails only sometimes)"
            for _ in range(how.runs):
                times.append(working())
    except gitbench.DeadlineReached:
        if not times:
            raise OutOfBudget(None) from None
    return failed_comparison(workload, default, candidate, fails, error, times, files)


def _pairs(a: Run, b: Run, ta: List[float], tb: List[float], how: Runs, pair: float,
           slower: bool = True) -> Tuple[str, Optional[float]]:
    """`how.runs` more ABBA pairs into ta and tb; why they stopped early, or "", and
    where the budget stopped them, the --budget that would have held the pairs a verdict
    still needed (_budget_needed). A pair the budget's end interrupts (its git killed)
    is dropped whole, and no pair starts once the pairs any verdict still needs cannot
    fit (_verdict_out_of_reach). `pair`: the warm-up's price of a pair, until one is
    timed here."""
    started = now()
    for i in range(how.runs):
        price = (now() - started) / i if i else pair
        if i and _verdict_out_of_reach(ta, tb, how, price):
            return STOPPED_BUDGET, _budget_needed(ta, tb, how, price)
        try:
            with how.within(how.left()):
                if i % 2 == 0:
                    t_a, t_b = a(), b()
                else:
                    t_b, t_a = b(), a()
        except gitbench.DeadlineReached:
            return STOPPED_BUDGET, _budget_needed(ta, tb, how, price)
        ta.append(t_a)
        tb.append(t_b)
        why = stopped(ta, tb, slower) if how.stop_early else ""
        if why:
            return why, None
        if i + 1 < how.runs and how.left() <= 0:
            return STOPPED_BUDGET, _budget_needed(ta, tb, how, (now() - started) / (i + 1))
    return "", None


def _still_needed(ta: List[float], tb: List[float]) -> int:
    """The pairs a verdict still needs after ta and tb: stats.CLEAR_RUNS in all where
    every run so far is stats.APART from the other side's (EARLY_RUNS where the
    candidate's are the slower), else stats.MIN_RUNS."""
    if not ta or not tb:
        return stats.CLEAR_RUNS
    slower = min(tb) > max(ta) * stats.APART      # the candidate, every run so far
    apart = slower or min(ta) > max(tb) * stats.APART
    done = len(ta)
    fewest = EARLY_RUNS if slower else stats.CLEAR_RUNS
    return max(0, (fewest if apart and done < fewest else stats.MIN_RUNS) - done)


def _verdict_out_of_reach(ta: List[float], tb: List[float], how: Runs, pair: float) -> bool:
    """Whether the pairs a verdict still needs (_still_needed), at `pair` seconds each,
    pass what is left. Under a budget, the pairs it cannot reach would only take what
    the keys after it could decide with."""
    if not how.stop_early or math.isinf(how.left()):
        return False
    need = _still_needed(ta, tb)
    return need > 0 and need * pair > how.left()


def _budget_needed(ta: List[float], tb: List[float], how: Runs, pair: float
                   ) -> Optional[float]:
    """The --budget whose end would have come after the pairs a verdict still needs, at
    `pair` seconds each: the seconds used so far (the probe's included) and those pairs.
    A grace the key had is left out, as for a trial that could not start
    (calibrate._trial): the figure is a budget that holds the runs without it."""
    if how.budget is None:
        return None
    return round(how.budget.used() + max(1, _still_needed(ta, tb)) * pair, 1)


def interleaved(a: Run, b: Run, runs: int, warmup: int = 1) -> Tuple[List[float], List[float]]:
    """Bare ABBA pairs (A then B, B then A, ...), warm-ups first, no budget and no
    verdict: what the benchmarks time raw with (bench/common.py)."""
    for _ in range(warmup):
        a()
        b()
    ta: List[float] = []
    tb: List[float] = []
    for i in range(runs):
        if i % 2 == 0:
            ta.append(a())
            tb.append(b())
        else:
            tb.append(b())
            ta.append(a())
    return ta, tb
