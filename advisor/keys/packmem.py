"""pack.windowMemory and pack.deltaCacheSize: the memory `git pack-objects` may hold while
it finds deltas (repack, gc), decided together by real git on this repository.

Git sizes neither from the memory it may use: the window is unlimited per thread and the
delta cache 256 MiB, so a window of large blobs holds ten of them per thread, and a
container's repack is killed by the kernel. Real git decides, on pack-objects with
deltas found again as `repack -f` does, its output discarded, every run's peak memory
measured beside its time (peak.run), in a memory cgroup of its own where the kernel
lets one be made. Two samples, because two things fill that memory:
- the repository's largest objects, enough to fill every thread's window: what a
  window holds does not grow with the rest of the repository;
- the history, in parts that double from its oldest commits' objects to every
  object: the caches fill, and each object's bookkeeping grows, with the objects
  packed. More objects never need less memory, so a part that does not fit shows that
  the whole would not.

A run that peaks above planner.memory_allowed (or is killed there) fails. Values come
in levels (candidates): sizes from the largest whose windows and cache the allowed
memory holds, halved; the same with the delta base cache bounded by the size; then
both with fewer threads. A value stands while every run of it fits; where one does
not, the largest later value that fits that sample is found in a few runs
(_Search.fit). Where Git's default fails and a value does not, that value is written
whatever its speed. Where Git's defaults fit, nothing is timed further: a smaller
window is faster only by finding fewer deltas (a larger pack), which these runs do
not weigh.
"""
import heapq
import os
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..decide import advice
from . import basecache
from .registry import Tuner
from ..measure import gitbench, peak, planner
from ..measure.ab import OutOfBudget
from ..measure.bench import Bench
from ..measure.record import (FAILS_DEFAULT, Calibration, Trial,
                              failed_comparison)
from ..measure.sweep import MeasurementFailed
from ...models import catalogue
from ...probes import repo as repo_probe
from ...probes.host import host_facts
from ...probes.layout import RepoLayout
from ...models.catalogue import Key
from .registry import Weights

WINDOW, CACHE, THREADS = "pack.windowMemory", "pack.deltaCacheSize", "pack.threads"
BASES = "core.deltaBaseCacheLimit"     # pack-objects reads each object through it
WORKLOAD = "repack"
DEFAULT_WINDOW = 10         # pack.window's default (builtin/pack-objects.c)
WINDOWS_FILLED = 1          # the sample fills each thread's window this many times
SMALLEST = 1 << 20          # no candidate below 1m: the window would hold one object
MIB = planner.MIB
TRIAL_RANK = 2
HISTORY_HALVINGS = 5        # the history's first part: its oldest 1/2**5 of commits
# verify times the value on a history part where one run took at most this many seconds
# in the calibration: the value's runs there (a warm-up, the runs a side) then take a
# minute at most. A policy on how long verify may take, not a figure of any host's.
VERIFY_RUN_SECONDS = 6.0
# pack-objects finding every delta again, as repack -f does, its pack discarded.
PACK_OBJECTS = ["pack-objects", "--no-reuse-delta", "--delta-base-offset", "--stdout", "-q"]


@dataclass(frozen=True)
class TrialFacts:
    """What the trial recorded beside its comparison."""
    limit: int = 0                  # bytes this process may use
    limit_source: str = ""
    allowed: int = 0                # bytes a run may peak at (planner.memory_allowed)
    objects: int = 0                # in the sample
    sample_bytes: int = 0
    threads: int = 0
    # Each value's first run ("default" for Git's): its peak bytes, and how it ended
    # ("fits", "over" the allowed peak, "killed" there by the kernel).
    peaks: Optional[Dict[str, int]] = None
    ended: Optional[Dict[str, str]] = None
    confined: str = ""              # "cgroup v1", "cgroup v2", "" (unconfined)
    # The history's parts run, by the value run ("default" for Git's) and the commits of
    # the part: how each ended, as above.
    history: Optional[Dict[str, str]] = None
    history_commits: int = 0
    # The commits of the history's part Git's defaults failed on (0: they did not fail
    # on one); verify packs that part again.
    default_failed_part: int = 0


@dataclass(frozen=True)
class HistoryPart:
    """The objects reachable from the oldest `commits` of the history's `of` (reverse
    topological order), named for pack-objects --revs by the commit in `tip_file`; every
    object, as repack -a packs them, where tip_file is empty."""
    commits: int
    of: int
    tip_file: str = ""

    @property
    def whole(self) -> bool:
        return not self.tip_file

    def named(self) -> str:
        if self.whole:
            return f"every object ({self.of:,} commit{'s' * (self.of != 1)})"
        return f"the objects of the oldest {self.commits:,} of {self.of:,} commits"


@dataclass(frozen=True)
class Sample:
    """The objects pack-objects is timed on: a file of their names, one a line."""
    names_file: str
    objects: int
    size: int
    smallest: int = 0               # bytes of the smallest of them


def config_int(repo: RepoLayout, name: str) -> Optional[int]:
    """The integer git reads for `name` in the repository; None where unset or not one."""
    proc = gitbench.run_git(["config", "--type=int", "--get", name], repo.top,
                            gitbench.config_env({}), hooks=False, output=True,
                            repo=repo, ok=(0, 1))
    text = proc.stdout.strip()
    return int(text) if proc.returncode == 0 and text.lstrip("-").isdigit() else None


def threads(repo: RepoLayout, online_cpus: Optional[int]) -> int:
    """The threads pack-objects finds deltas with here: pack.threads where set, else
    git's online CPUs (it reads no CPU quota)."""
    set_here = config_int(repo, "pack.threads")
    return max(1, set_here or online_cpus or os.cpu_count() or 1)


def sample(repo: RepoLayout, root: str, n_threads: int) -> Sample:
    """The largest objects, enough to fill each thread's window WINDOWS_FILLED times
    (pack-objects orders objects by type, name and size, largest first, and splits them
    between its threads), named in a file under `root`. MeasurementFailed where the
    repository has no objects."""
    window = config_int(repo, "pack.window") or DEFAULT_WINDOW
    want = WINDOWS_FILLED * (window + 1) * n_threads
    lines = gitbench.git_lines(["cat-file", "--batch-all-objects",
                                "--batch-check=%(objectsize) %(objectname)"], repo, root)
    # The largest `want` kept as the lines go by, not a list of every object.
    fields = (line.partition(" ") for line in lines)
    chosen = heapq.nlargest(want, ((int(size), name) for size, _, name in fields
                                   if size.isdigit() and name))
    if not chosen:
        raise MeasurementFailed("the repository has no objects to pack")
    path = os.path.join(root, "packmem-objects")
    with open(path, "w") as f:
        f.writelines(f"{name}\n" for _, name in chosen)
    return Sample(path, len(chosen), sum(s for s, _ in chosen), chosen[-1][0])


def runner(repo: RepoLayout, objects: Sample, allowed: int, within: str,
           seen: Optional[Dict[str, peak.PeakRun]] = None) -> gitbench.Runner:
    """A timed run of pack-objects on the sample (planner.memory_runner, each value's
    first run kept in `seen` by its pack.windowMemory)."""
    return planner.memory_runner("git pack-objects", PACK_OBJECTS, repo, allowed, within,
                                 WINDOW, seen, objects.names_file)


def history_parts(repo: RepoLayout, root: str) -> List[HistoryPart]:
    """The history's parts, smallest first: the oldest 1/2**HISTORY_HALVINGS of its
    commits, doubled up to the whole (parts of the same size once), each tip named in a
    file under `root`."""
    commits = _oldest_first(repo, root)
    parts: List[HistoryPart] = []
    for halvings in range(HISTORY_HALVINGS, 0, -1):
        k = len(commits) >> halvings
        if k >= 1 and not (parts and parts[-1].commits == k):
            parts.append(_part(commits, k, root))
    return parts + [HistoryPart(len(commits), len(commits))]


def history_part(repo: RepoLayout, root: str, commits: int) -> HistoryPart:
    """The objects of the history's oldest `commits` commits, as history_parts names them;
    every object where the history has no more commits than that."""
    oldest = _oldest_first(repo, root)
    if commits >= len(oldest):
        return HistoryPart(len(oldest), len(oldest))
    return _part(oldest, commits, root)


def _oldest_first(repo: RepoLayout, root: str) -> List[str]:
    """Every commit, oldest first (reverse topological order)."""
    return [c for c in gitbench.git_lines(["rev-list", "--all", "--reverse", "--topo-order"],
                                          repo, root) if c]


def _part(oldest: List[str], k: int, root: str) -> HistoryPart:
    """The part of the oldest `k` commits of `oldest`, its tip named in a file under root."""
    path = os.path.join(root, f"packmem-tip-{k}")
    with open(path, "w") as f:
        f.write(oldest[k - 1] + "\n")
    return HistoryPart(k, len(oldest), path)


def history_runner(repo: RepoLayout, part: HistoryPart, allowed: int, within: str,
                   partial: bool, seen: Dict[str, peak.PeakRun]) -> gitbench.Runner:
    """A timed run of pack-objects over the part's objects (planner.memory_runner);
    `partial`: the repository is a partial clone (probes.repo.partial_clone)."""
    args = PACK_OBJECTS + (["--all", "--reflog", "--indexed-objects"] if part.whole
                           else ["--revs"])
    if partial:
        # Objects the promisor remote holds are not packed, nor fetched to be.
        args.append("--exclude-promisor-objects")
    return planner.memory_runner("git pack-objects", args, repo, allowed, within, WINDOW,
                                 seen, part.tip_file or None)


def ladder(allowed: int, n_threads: int, smallest_object: int = 0,
           least_cache: bool = True) -> List[int]:
    """The sizes tried, largest first: from the largest power of two whose window on
    every thread and whose delta cache fit the allowed memory together, halved down to
    SMALLEST (each run's measured peak decides; this only orders the tries).

    A window below the sample's smallest object holds the object being deltified and
    one other, whatever its size (pack-objects evicts down to that, find_deltas): below
    that, halving changes only the delta cache. So the ladder takes one size below
    `smallest_object`, then SMALLEST where `least_cache` (the cache's least: where
    fewer threads remain to try, they save a window each, far more), and no size
    between."""
    size = SMALLEST
    while (n_threads + 1) * (2 * size) * 2 <= allowed:
        size *= 2
    out = []
    while size >= SMALLEST:
        out.append(size)
        if size < smallest_object:
            if size > SMALLEST and least_cache:
                out.append(SMALLEST)
            break
        size //= 2
    return out


def candidates(allowed: int, n_threads: int, smallest_object: int,
               bases: int) -> List[Dict[str, str]]:
    """The values tried, in levels each needing less memory than the one before, each
    level's sizes the ladder's, largest first: on n_threads, then the same with the delta
    base cache no larger than the size where that is below `bases` (the cache's size
    here: pack-objects reads every object through it, and on a history of many small
    objects it, not the window, fills the memory), then both on half as many threads
    (each holds a window of its own), down to one."""
    out = []
    fewer = n_threads
    while True:
        sizes = ladder(allowed, fewer, smallest_object, least_cache=fewer == 1)
        for bounded in (False, True):
            for size in sizes:
                settings = _settings(size)
                if bounded:
                    if size >= bases:
                        continue
                    settings[BASES] = catalogue.format_size(size)
                if fewer != n_threads:
                    settings[THREADS] = str(fewer)
                out.append(settings)
        if fewer == 1:
            return out
        fewer //= 2


def _settings(size: int) -> Dict[str, str]:
    """Both keys at `size`; the cache no larger than git reads (an int: below 2g)."""
    most = catalogue.lookup(CACHE).max
    cache = size if most is None else min(size, most)
    return {WINDOW: catalogue.format_size(size), CACHE: catalogue.format_size(cache)}


class _Search:
    """Git's defaults, then the candidates in turn, on one sample after another: the
    value standing runs on each sample, and where it does not fit, the largest candidate
    after it that does is found (fit). Git's default's first failure, and every run,
    are kept."""

    def __init__(self, values: List[Dict[str, str]],
                 holds_two: Callable[[float], bool] = lambda seconds: True) -> None:
        self.values = values
        # Whether what is left holds two more runs of so many seconds (the planner's).
        self.holds_two = holds_two
        self.at = -1                # the value standing: -1 Git's defaults, len(values) none
        self.default_error = ""
        # The standing value's last run, which fitted (None where it has not yet: a
        # value stands only while every run of it fitted).
        self.fitted: Optional[peak.PeakRun] = None
        self.seen: Dict[str, peak.PeakRun] = {}          # each value's first run
        self.history: Dict[str, peak.PeakRun] = {}       # each history part's runs
        # Every run by value and part, and whether it fitted: no value runs twice on one.
        self.ran: Dict[Tuple[int, str], Tuple[peak.PeakRun, bool]] = {}

    @property
    def value(self) -> Optional[Dict[str, str]]:
        """The value standing ({}: Git's defaults), None where none fits."""
        return {} if self.at < 0 else self.values[self.at] if self.at < len(self.values) \
            else None

    def fit(self, make: Callable[[Dict[str, peak.PeakRun]], gitbench.Runner],
            part: str = "") -> bool:
        """Whether a value fits the sample `make` runs (a runner factory taking the dict
        a value's first run is kept in); `part` names the history's part it packs, ""
        for the largest objects. Where the value standing does not fit, the largest
        value after it that does, level by level (_largest_fitting). On the largest
        objects the levels bounding the delta base cache are passed over: there the
        windows hold the memory, and the few bases of a few objects do not (a run
        killed on large objects can take as long as one that fits)."""
        if self.value is None:
            return False
        if self._fits(self.at, make, part):
            return True
        self.fitted = None
        levels = self._levels_after(self.at)
        for i, level in enumerate(levels):
            if not part and BASES in self.values[level.start]:
                continue
            twin = levels[i + 1] if part and i + 1 < len(levels) and \
                self._bounded_twin(level, levels[i + 1]) else None
            if self._largest_fitting(level, make, part, twin):
                return True
        self.at = len(self.values)
        return False

    def _bounded_twin(self, level: range, after: range) -> bool:
        """Whether `after` is `level` with the delta base cache bounded (same threads)."""
        a, b = self.values[level.start], self.values[after.start]
        return BASES not in a and BASES in b and a.get(THREADS) == b.get(THREADS)

    def _levels_after(self, at: int) -> List[range]:
        """The values after `at`, in runs of one level each (the same threads and the
        same bound on the delta base cache, sizes largest first)."""
        def level(v: Dict[str, str]) -> Tuple[Optional[str], bool]:
            return (v.get(THREADS), BASES in v)
        out: List[range] = []
        start = at + 1
        for i in range(start + 1, len(self.values) + 1):
            if i == len(self.values) or level(self.values[i]) != level(self.values[start]):
                out.append(range(start, i))
                start = i
        return out

    def _largest_fitting(self, level: range,
                         make: Callable[[Dict[str, peak.PeakRun]], gitbench.Runner],
                         part: str, twin: Optional[range] = None) -> bool:
        """Whether a value of `level` fits; the largest that does becomes the value
        standing. Its two largest in turn, then its least, then a bisection between.
        Within a level a smaller size never needs more memory, so where the least does
        not fit none does, and a level whose sizes do not hold the memory (the windows,
        where the delta base cache fills it) is left after three runs. Two first,
        because a run that does not fit is killed early, one that fits runs whole, and
        the largest that fits is most often one halving down. A value stands as soon as
        one of its runs fits (every smaller part fits it too), so a budget that ends
        here leaves the best found so far.

        Where its two largest do not fit, the windows may not be what fills the memory
        (on a history part the delta base cache can be): `twin`, the same sizes with the
        cache bounded, is tried at its largest before this level's least, and where that
        fits it stands, one run instead of the least's and the twin's search after it.
        Where it does not, the least runs (the smallest window is the value most likely
        to fit, so a budget ending in the search leaves one), and where that fits, the
        twin is searched whole before the bisection here: a value of it that fits
        stands (windows larger than this level's least).

        On a history part, where what is left of the budget does not hold two more runs
        as long as the longest run there so far (one more that may not fit, and the
        least's), the least runs next, and the sizes above it are bisected after it: a
        budget that ends then leaves the least standing, not nothing."""
        lo, hi = level.start, level.stop - 1
        for at in dict.fromkeys((lo, min(lo + 1, hi))):
            if hi - at >= 2 and part and not self._holds_two_on(part):
                return self._least_then_larger(at, hi, make, part)
            if self._fits(at, make, part):
                self.at = at
                return True
        if hi - lo < 2:
            return False
        if twin is not None and self._fits(twin.start, make, part):
            self.at = twin.start
            return True
        if not self._fits(hi, make, part):
            return False
        self.at = hi
        if twin is not None and self._largest_fitting(twin, make, part):
            return True
        self.at = hi
        self._bisect(lo + 2, hi, make, part)    # those above lo + 2 did not fit
        return True

    def _holds_two_on(self, part: str) -> bool:
        """Whether what is left holds two more runs at the price of the longest run on
        `part` so far (there is one: fit runs the value standing there first)."""
        return self.holds_two(max(r.seconds for (_, p), (r, _) in self.ran.items()
                                  if p == part))

    def _least_then_larger(self, lo: int, hi: int,
                           make: Callable[[Dict[str, peak.PeakRun]], gitbench.Runner],
                           part: str) -> bool:
        """values[hi], the least of values[lo..hi], then where it fits a bisection of
        the sizes above it (none of them run yet)."""
        if not self._fits(hi, make, part):
            return False
        self.at = hi
        self._bisect(lo, hi, make, part)
        return True

    def _bisect(self, lo: int, hi: int,
                make: Callable[[Dict[str, peak.PeakRun]], gitbench.Runner], part: str) -> None:
        """The largest of values[lo..hi] that fits becomes the value standing: values[hi]
        fitted, none of values[lo..hi) is known to."""
        while lo < hi:
            mid = (lo + hi) // 2
            if self._fits(mid, make, part):
                self.at = hi = mid
            else:
                lo = mid + 1

    def _fits(self, at: int, make: Callable[[Dict[str, peak.PeakRun]], gitbench.Runner],
              part: str) -> bool:
        if (at, part) in self.ran:  # a level's twin, searched before the level after it
            r, fitted = self.ran[at, part]
            if fitted:
                self.fitted = r
            return fitted
        value = {} if at < 0 else self.values[at]
        runs: Dict[str, peak.PeakRun] = {}
        try:
            make(runs)(value)
            fitted = True
        except planner.OverMemory as e:
            fitted = False
            if at < 0:
                self.default_error = f"{e} on {part}" if part else str(e)
        name = _seen_as(value)
        r = runs[value.get(WINDOW, "default")]
        self.seen.setdefault(name, r)
        if part:
            self.history[f"{name} on {part}"] = r
        if fitted:
            self.fitted = r
        self.ran[at, part] = (r, fitted)
        return fitted


@dataclass(frozen=True)
class _HistoryRun:
    """How far the history's parts were run: the largest part fitted (None where none),
    the history's commits, the commits of the part Git's defaults failed on (0: none),
    and what the reasons add where the whole was not reached (why not, and what would)."""
    reached: Optional[HistoryPart]
    commits: int
    default_failed_part: int
    unpacked: str
    larger: str


def _history(bench: Bench, search: _Search, allowed: int, within: str) -> _HistoryRun:
    """The history's parts run in what the budget leaves (a part cut there decides
    nothing), smallest first, while a value fits."""
    reached, commits, failed_part = None, 0, 0
    unpacked = "; the budget ended before every object of the history was packed"
    larger = "; a larger --budget would decide it"
    try:
        with planner.capped(bench, planner.share_of_left(bench, "history")):
            parts = history_parts(bench.repo, bench.ws.root)
            commits = parts[-1].of
            partial = repo_probe.partial_clone(bench.repo)
            for part in parts:
                failed_before = bool(search.default_error)
                fitted = search.fit(lambda seen: history_runner(bench.repo, part, allowed,
                                                                within, partial, seen),
                                    part.named())
                if search.default_error and not failed_before:
                    failed_part = part.commits
                if not fitted:
                    break
                reached = part
    except (gitbench.DeadlineReached, OutOfBudget):
        pass
    except MeasurementFailed as e:
        unpacked, larger = f"; git could not pack the history here ({e})", ""
    return _HistoryRun(reached, commits, failed_part, unpacked, larger)


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    if not bench.memory_limit:
        return Trial.not_run(WINDOW, "the memory this process may use could not be read")
    allowed = planner.memory_allowed(bench.memory_limit)
    n_threads = threads(bench.repo, bench.online_cpus)
    try:
        with planner.within_budget(bench):
            objects = sample(bench.repo, bench.ws.root, n_threads)
    except MeasurementFailed as e:
        return Trial.not_run(WINDOW, f"nothing to pack ({e})")
    bases = config_int(bench.repo, BASES) or basecache.default_bytes()
    search = _Search(candidates(allowed, n_threads, objects.smallest, bases),
                     lambda seconds: planner.holds_runs(seconds, 2))
    within = bench.memory_source
    with planner.within_budget(bench):
        search.fit(lambda seen: runner(bench.repo, objects, allowed, within, seen))
    h = _history(bench, search, allowed, within)
    facts = asdict(_facts(bench, objects, allowed, n_threads, search, h))
    reached, unpacked, larger = h.reached, h.unpacked, h.larger
    if search.value is None:
        return Trial.not_run(WINDOW, f"no value from {catalogue.format_size(SMALLEST)} up "
                             f"keeps pack-objects within the {allowed / MIB:.0f} MiB a run "
                             "may use, down to one thread; Git's defaults stand", **facts)
    rest = "" if reached and reached.whole else unpacked
    if not search.default_error:
        # Memory is not at stake. A smaller window would be faster only by finding
        # fewer deltas: a larger pack, which fetches, clones and the disk live with
        # and these runs do not weigh.
        over = (f"; of {reached.named()}, " + planner.how_it_fit(search.fitted, allowed)
                if reached and search.fitted else "")
        return Trial.not_run(WINDOW, "Git's defaults fit: pack-objects of the largest "
                             "objects " + planner.how_it_fit(search.seen["default"], allowed)
                             + over + rest, **facts)
    if search.fitted is None:
        return Trial.not_run(WINDOW, f"Git's defaults do not fit ({search.default_error}), "
                             f"and no value was found that does{unpacked}{larger}", **facts)
    # Git's defaults do not fit, the value's runs did: that decides, whatever the speeds
    # (no more runs are owed: a peak is the objects', not the moment's). Where the budget
    # ended before the whole history, the reason says how far the value was tried.
    tried = "" if reached and reached.whole else \
        (f"; the value fitted {reached.named()}" if reached else "") + unpacked + larger
    c = failed_comparison(WORKLOAD, {}, search.value, FAILS_DEFAULT,
                          search.default_error + tried, (search.fitted.seconds,),
                          objects.objects)
    return Trial(WINDOW, (c,), facts)


def _seen_as(cand: Dict[str, str]) -> str:
    """The name a value's runs are kept under ("default" for Git's): its window, and
    its delta base cache and threads where it sets them."""
    if not cand:
        return "default"
    name = cand[WINDOW]
    if BASES in cand:
        name += f", delta bases {cand[BASES]}"
    if THREADS in cand:
        n = int(cand[THREADS])
        name += f", {n} thread{'s' * (n > 1)}"
    return name


def _facts(bench: Bench, objects: Sample, allowed: int, n_threads: int, search: "_Search",
           h: _HistoryRun) -> TrialFacts:
    def ended(r: peak.PeakRun) -> str:
        return "killed" if r.killed_at_limit else "over" if r.over(allowed) else "fits"
    confined = next((r.confined for r in search.seen.values() if r.confined), "")
    return TrialFacts(bench.memory_limit, bench.memory_source, allowed, objects.objects,
                      objects.size, n_threads, {v: r.peak for v, r in search.seen.items()},
                      {v: ended(r) for v, r in search.seen.items()}, confined,
                      {v: ended(r) for v, r in search.history.items()}, h.commits,
                      h.default_failed_part)


def _decide(key: Key, cal: Calibration, weights: Weights, value_of: Callable[[Dict[str, str]], str]
           ) -> advice.KeyAdvice:
    t = cal.trials.get(WINDOW)
    if t is None:
        return advice.unmeasured(key)
    if t.why_not_run:
        return advice.not_set(key, "not set: " + t.why_not_run, dict(t.facts))
    f = t.facts_as(TrialFacts)
    own = catalogue.lookup(WINDOW).workload      # both keys' reasons name its command
    what = {WORKLOAD: own.command} if own else {}
    return advice.weighed(key, t, weights, value_of(t.main.candidate), what,
                          {"peaks": f.peaks, "ended": f.ended,
                           "allowed": f.allowed, "limit": f.limit})


def verify_runner(key: Key, repo: RepoLayout, index_file: str, trial: Optional[Trial]
                  ) -> gitbench.Runner:
    """verify's runner for the repack workload: the trial's runs on the user's repository,
    within the memory this host allows now. Where the trial found Git's defaults failing
    on a part of the history, that part (the same oldest commits): on the largest
    objects both sides can fit, and a speed there is not what the value was written for.
    NotTimed where one run of the value there took more than VERIFY_RUN_SECONDS."""
    host = host_facts()
    allowed, within = planner.memory_here(host)
    root = os.path.dirname(index_file)
    failed_part = trial.facts_as(TrialFacts).default_failed_part \
        if trial is not None and trial.comparisons else 0
    if trial is None or not failed_part:
        return runner(repo, sample(repo, root, threads(repo, host.logical_cpus)), allowed,
                      within)
    took = max(trial.main.times_candidate, default=0.0)
    if took > VERIFY_RUN_SECONDS:
        raise gitbench.NotTimed(f"one run of the value on the history's part Git's defaults "
                                f"failed on took {took:.0f} s in the calibration; its "
                                "comparison stands")
    part = history_part(repo, root, failed_part)
    return history_runner(repo, part, allowed, within, repo_probe.partial_clone(repo), {})


class WindowMemory(Tuner):
    rank = TRIAL_RANK

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def verify_runner(self, key: Key, repo: RepoLayout, index_file: str,
                      trial: Optional[Trial]) -> Optional[gitbench.Runner]:
        return verify_runner(key, repo, index_file, trial)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return _decide(key, cal, weights, lambda cand: cand[WINDOW])


class DeltaCacheSize(Tuner):
    """Decided by pack.windowMemory's trial: the same runs set both."""

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return _decide(key, cal, weights, lambda cand: cand[CACHE])


TUNERS = {WINDOW: WindowMemory(), CACHE: DeltaCacheSize()}
