"""core.untrackedCache: remember untracked directories by their mtime.

It only works where directory mtimes change with their entries (git's own
`update-index --test-untracked-cache`, run by the probe). Real git decides:
`git status` with untracked files on an index copy with the cache against one
without. The cache is an index extension, so every command pays for it, reading
the index and writing it, while only a status with untracked files gains: where the
workload profile weighs them, `git status -uno`, `git ls-files` and an index write
are timed on the same two copies, and the profile weighs the lot (on the hot disk,
3,000 files, status -uno and ls-files were 5-6% slower with the cache in 10
interleaved rounds of bench/tuner_quality.py's mix). Where a whole status with untracked
files does not fit the budget left, all of that is timed on a part of the work tree
sized to it (_trial_on_part).
"""
import dataclasses
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Tuple

from ..decide import advice
from . import preload
from ..measure import gitbench, planner
from ..measure.ab import STOPPED_SLOWER, OutOfBudget, least_seconds
from ..measure.bench import Bench
from ..measure.gitbench import IndexShape
from ..measure.record import Calibration, Comparison, Trial
from ..measure.sweep import MeasurementFailed
from ...models import stats
from ...models.storage import NETWORK
from . import registry
from ...models.catalogue import Key
from .registry import Weights

if TYPE_CHECKING:   # the agent's records, read by the drift check
    from ..agent.events import Command

KEY = "core.untrackedCache"
PART_PILOT = 48      # entries of the part that prices a status where the tree's does not fit
PART_STEP = 8        # each larger part tried holds this many times the entries of the last
# The whole tree's pilot is not run on network storage where the lstat pass of every
# entry (preload.lstat_pass) is this many times a run's limit or more: a margin for what
# an attribute cache still held.
PILOT_SKIP = 2


@dataclass(frozen=True)
class TrialFacts:
    fs_test: Optional[bool] = None    # git's mtime test on this file system (None: not run)
    # Where the whole repository's status did not fit: the entries of the part it was
    # timed on, and the repository's (None: the whole work tree was timed).
    part: Optional[int] = None
    entries: Optional[int] = None
    # The workloads where the cache's cost is still to be timed after its gain (None:
    # every one the profile weighs was timed, no gain called for them, or one slower
    # already keeps Git's default).
    costs_not_timed: Optional[Tuple[str, ...]] = None


def index_shape(key: Key, value: str) -> IndexShape:
    if value == "true":
        return IndexShape(args=("--untracked-cache", "--force-untracked-cache"))
    if value == "false":
        return IndexShape(args=("--no-untracked-cache",))
    return IndexShape()


def price(key: Key, bench: Bench) -> Optional[float]:
    """A status with untracked files lstats every entry before it reads a directory; where
    the whole tree's does not fit, a part is timed, whose files must be a second old
    first (gitbench.Part.written): the lesser of the two. (The probe's untracked walk is
    no price: it may have run colder than the trial's runs will; _pilot times one where
    it says the trial may not fit.)"""
    whole = preload.status_price(bench)
    return None if whole is None else min(whole, gitbench.RACY_SECONDS)


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    works = bench.git_facts.untracked_cache_works
    if works is False:
        return Trial.not_run(KEY, "the untracked cache fails git's mtime test on this file "
                             "system (git update-index --test-untracked-cache)")
    if _lstats_past_reach(bench):
        return _trial_on_part(key, bench, works)
    try:
        off = bench.ws.index_copy("uc-off", index_shape(key, "false"))
        warm = _pilot(bench, off)
    except _WholeTooSlow:
        return _trial_on_part(key, bench, works)
    copies = (off, bench.ws.index_copy("uc-on", index_shape(key, "true")))
    try:
        return _compare(bench, bench.repo, copies, warm, TrialFacts(works))
    except OutOfBudget as whole:
        # The probe's walk said the whole tree fits, and its A/B's warm-up found its runs
        # longer than what is left (the walk reads no index and lstats no entry): a part,
        # where one still fits.
        try:
            return _trial_on_part(key, bench, works)
        except OutOfBudget:
            raise whole from None


def _compare(bench: Bench, where: gitbench.Where, copies: Tuple[str, ...], warm: Optional[float],
             facts: TrialFacts) -> Trial:
    """The gain on a status with untracked files; only a gain needs its costs weighed:
    without one Git's default stands anyway. The costs are timed once every key has had
    its trial (bench.sharpen), one workload a step: until then the trial stands on its
    gain, and the advice names the costs not timed: the costs never take the trials
    after this one, and a cost's A/B that does not fit never drops the gain's runs."""
    gain = _ab(bench, "untracked", copies, warm, where)
    costs = (tuple(w for w in COSTS if bench.counts(w))
             if gain.estimate is not None and gain.estimate.verdict == stats.FASTER else ())
    trial = Trial(KEY, (gain,), asdict(dataclasses.replace(facts, costs_not_timed=costs or None)))
    if costs:
        bench.sharpen[KEY] = _costs_later(bench, where, copies, trial)
    return trial


def _costs_later(bench: Bench, where: gitbench.Where, copies: Tuple[str, ...], first: Trial
                 ) -> Callable[[], Optional[Trial]]:
    """The step that times the next cost not timed (None: none left, or the part's files
    were written again since its index copies were made, by a checkout trial's runs
    there: their stat data no longer match, and every status would read the files)."""
    latest = [first]
    files = where.files if isinstance(where, gitbench.Part) else None

    def step() -> Optional[Trial]:
        t = latest[0]
        facts = t.facts_as(TrialFacts)
        if not facts.costs_not_timed or (isinstance(where, gitbench.Part)
                                         and where.files is not files):
            return None
        workload, rest = facts.costs_not_timed[0], tuple(facts.costs_not_timed[1:])
        c = _ab(bench, workload, copies, where=where)
        if c.fails or c.stopped == STOPPED_SLOWER or (
                c.estimate is not None and c.estimate.verdict == stats.SLOWER):
            rest = ()       # Git's default stands whatever the others show (advice.weighed)
        latest[0] = Trial(KEY, t.comparisons + (c,),
                          asdict(dataclasses.replace(facts, costs_not_timed=rest or None)))
        return latest[0]
    return step


# Where the extension costs: workloads timed on an index copy (gitbench.ON_INDEX).
COSTS = ("status", "index", "write")
WHAT = {"untracked": "git status with untracked files", "status": "git status -uno",
        "index": "reading the index (git ls-files)",
        "write": "writing the index (git update-index --force-write-index)"}


def _ab(bench: Bench, workload: str, copies: Tuple[str, ...], warm: Optional[float] = None,
        where: Optional[gitbench.Where] = None) -> Comparison:
    """`workload` on the index copy without the cache against the one with it, in the
    user's work tree or a part's (`where`); `warm`: a run without it just timed, the
    warm-up's."""
    off, on = {KEY: "false"}, {KEY: "true"}
    make = gitbench.ON_INDEX[workload]
    run_off, run_on = (make(where or bench.repo, index) for index in copies)
    return bench.ab(workload, off, on, lambda: run_off(off), lambda: run_on(on),
                    warm_default=warm)


def _lstats_past_reach(bench: Bench) -> bool:
    """Whether, on network storage, a status's lstat of every entry (preload.lstat_pass)
    alone is PILOT_SKIP times the longest run the whole tree's trial could fit: its
    pilot (_pilot) could only be stopped. On network storage only: there the probe's lstats went to
    the server, as a status's do once the attribute cache has let them go; a local inode
    cache keeps what the probe met cold, and a status there may be many times quicker."""
    if bench.storage_class != NETWORK:
        return False
    most = _run_limit(bench)
    if most is None:
        return False
    lstats = preload.lstat_pass(bench)
    return lstats is not None and lstats > PILOT_SKIP * most


def _run_limit(bench: Bench) -> Optional[float]:
    """Where the probe's untracked walk prices the whole tree's trial above the budget
    left, the longest run that trial could fit (ab.longest_run); None where the walk
    says it fits."""
    return planner.run_limit(bench, bench.untracked_walk)


class _WholeTooSlow(Exception):
    """A status of the whole work tree is too slow for the trial to fit the budget left."""


def _pilot(bench: Bench, index: str) -> Optional[float]:
    """Where the probe's untracked walk prices the trial above the budget left, one status
    with untracked files without the cache, stopped where a run is too slow for the
    trial's full runs to fit (ab.full_seconds: whether its warm-up will show a gain clear
    enough for fewer is not known before it): its seconds, the A/B's warm-up, or
    _WholeTooSlow. Priced by the full runs, not the quickest verdict's, so a whole status
    that passes its pilot does not leave the key undecided where a part would have fit.
    The probe's walk may have run colder than the trial's will, so it does not decide
    alone. None where the probe's walk says the trial fits."""
    most = _run_limit(bench)
    if most is None:
        return None
    run = gitbench.status(bench.repo, index, untracked=True)
    try:
        seconds = planner.bounded_run(lambda: run({KEY: "false"}), most)
    except MeasurementFailed:
        return None     # the A/B sees and reports git's failure
    if seconds is None:
        raise _WholeTooSlow()       # slower than `most`, as the probe's walk says
    return seconds


def _trial_on_part(key: Key, bench: Bench, works: Optional[bool]) -> Trial:
    """The cache timed on a part of the work tree (gitbench.Part: runs of consecutive
    entries spread over the index, so whole directories as the tree has them), as large
    as the planner's share affords (planner.grown_part). What the cache saves
    (a directory's read, for a stat of it) and what it costs (its extension, read and
    written with the index) both grow with the directories, so the part's verdict stands
    for the tree's; the user's untracked files are not in the part."""
    entries = len(bench.ws.listed())
    sized = planner.grown_part(bench, entries, PART_PILOT, PART_STEP,
                               lambda n: _priced_part(key, bench, n))
    part = sized.part
    copies = tuple(bench.ws.index_copy(f"uc-{v}", index_shape(key, v), part)
                   for v in ("false", "true"))
    bench.notes.append(f"{KEY}: timed on a part of {len(part.paths)} of the "
                       f"{entries} entries (a whole status with untracked files does not "
                       "fit the budget left)")
    return _compare(bench, part, copies, sized.warm,
                    TrialFacts(works, len(part.paths), entries))


def _priced_part(key: Key, bench: Bench, n: int) -> planner.PricedPart:
    """A part of n entries with its files written (or as a checkout trial's runs there
    left them: Part.present_files), priced by one status with untracked files there."""
    part = bench.ws.part(n)
    left_there = part.files is not None
    files = part.present_files()
    if left_there:
        # Files a checkout trial's runs left have been ageing since: what is left of the
        # wait is short, and is the one the A/B needs anyway. Settled first, its status
        # is priced as its runs will run, not racily clean, and is the A/B's first run
        # of Git's default.
        part.settle_index()
    status = gitbench.status(part, part.index_file, untracked=True)({KEY: "false"})
    return planner.PricedPart(part, files.ready_at(), files.seconds, least_seconds(status),
                       status if left_there else None)


def open_question(key: Key, cal: Calibration, weights: Weights) -> Optional[Tuple[str, str]]:
    """Left undecided by the budget (on slow storage and large repositories a status with
    untracked files does not fit it 5+5 times): the cache against Git's default, on the
    user's own commands. Only the user starts that (the key adds an index extension:
    experiment.start refuses it without their yes)."""
    if KEY in cal.unfinished and KEY not in cal.trials:
        return "true", "the budget left it undecided"
    return None


def decide(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    facts = t.facts_as(TrialFacts)
    where = (f"; timed on a part of {facts.part} of the {facts.entries} entries (the ratio "
             "is the part's)" if facts.part else "")
    if facts.costs_not_timed:
        where += ("; its cost on " + ", ".join(WHAT[w] for w in facts.costs_not_timed)
                  + " not timed: the budget ended first")
    # The part's facts only where there was one: a whole tree's evidence leaves them out.
    evidence = {k: v for k, v in asdict(facts).items()
                if v is not None or k not in ("part", "entries", "costs_not_timed")}
    return advice.weighed(key, t, weights, "true", WHAT, evidence,
                          suffix=where + "; bypassed by `git status -uall`")


# The cache has stopped working where each of the last IDLE_WINDOW statuses that showed
# untracked files, with the cache on, read again at least IDLE_SHARE of the directories
# it visited, or ran without it (git reports no `opendir` then). One status re-reads
# everything after a checkout or a .gitignore edit; a run of them means the directories'
# mtimes change under every status (a tool touching them, a file system that sets them
# on access), or git stopped using the cache, and the setting only costs.
IDLE_WINDOW = 5
IDLE_SHARE = 0.9


def stopped_paying(records: Sequence["Command"], repo: Optional[str]) -> Optional[str]:
    """Why the cache does nothing in `repo` any more, from the user's statuses that ran
    with it on (None: it works, or there are too few to say)."""
    walks = [c for c in records
             if c.repo == repo and c.command == "status" and "-uno" not in c.options
             and c.counts.get("dirs_visited", 0) > 1 and c.code == 0
             and {k.lower(): v for k, v in c.values.items()}.get(KEY.lower()) == "true"]
    last = walks[-IDLE_WINDOW:]
    if len(last) < IDLE_WINDOW:
        return None
    unused = sum(1 for c in last if "dirs_opened" not in c.counts)
    reread = sum(1 for c in last if "dirs_opened" in c.counts
                 and c.counts["dirs_opened"] >= IDLE_SHARE * c.counts["dirs_visited"])
    if unused + reread < len(last):
        return None
    if unused == len(last):
        return (f"the untracked cache stopped working: git did not use it in the last "
                f"{len(last)} statuses with untracked files")
    return (f"the untracked cache stopped working: the last {len(last)} statuses with "
            "untracked files read every directory again (their mtimes change between "
            "statuses)")


class UntrackedCache(registry.Tuner):
    """core.untrackedCache: status with untracked files, on the tree or on a part of it."""

    def index_shape(self, key: Key, value: str) -> IndexShape:
        return index_shape(key, value)

    def price(self, key: Key, bench: Bench) -> Optional[float]:
        return price(key, bench)

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def open_question(self, key: Key, cal: Calibration, weights: Weights
                     ) -> Optional[Tuple[str, str]]:
        return open_question(key, cal, weights)

    def index_leftover(self, key: Key, value: str) -> Optional[str]:
        return ("indexes written meanwhile keep their untracked-cache extension (`git "
                "update-index --no-untracked-cache` removes it)"
                if value.lower() == "true" else None)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return decide(key, cal, weights)

    def stopped_paying(self, key: Key, value: str, records: Sequence["Command"],
                       repo: Optional[str]) -> Optional[str]:
        return stopped_paying(records, repo) if value.lower() == "true" else None


TUNERS = {KEY: UntrackedCache()}
