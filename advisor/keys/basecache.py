"""core.deltaBaseCacheLimit: the memory git keeps inflated delta bases in while it reads
objects (log -p, blame, diffs of history; each index-pack thread keeps one of its own),
decided by real git on this repository's history.

What is at stake is read from the repository before anything is timed: the bytes of the
blobs other blobs are stored as deltas against (cat-file's %(deltabase)). A cache holds
no more than those, so where they fit Git's default a larger cache has nothing to keep
and the default's memory is no more than they are.

Where they do not fit, the workload is `git log -p` of the path whose history has the
most of those bytes (what log -p and blame of a large file read), its output discarded.
Every run's peak memory is measured beside its time (peak.run), in a memory cgroup of its
own where the kernel lets one be made:
- Git's default peaks above planner.memory_allowed (or is killed there): every size whose
  run fits is safe, and speed decides among them. The largest that fits (halvings of
  the default, then a bisection) is written, unless the fastest other size whose run
  fitted is faster than it beyond noise by interleaved runs: a cache's time is not
  monotone in its size (one a little short of what the reads cycle through evicts each
  base before its reuse);
- else the cache that holds the path's bases (a power-of-two multiple of the default) is
  compared with Git's default, where it fits the allowed memory once for every thread
  index-pack would start (builtin/index-pack.c holds the limit per thread). Where real
  git was faster beyond noise and the profile weighs clones, the same size is compared
  with the default on index-pack of pack.pack_for's pack (each thread resolves deltas
  through its own cache): a size that reads history faster can index a pack slower, and
  advice.weighed keeps the default where either comparison is slower beyond noise.
  A profile that weighs clones but not reading history (ci) has the sizes timed on
  index-pack alone.
"""
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..decide import advice
from .registry import Tuner
from ..measure import gitbench, peak, planner
from ..measure.ab import OutOfBudget
from ..measure.bench import Bench
from ..measure.record import (FAILS_DEFAULT, Calibration, Comparison, Trial,
                              failed_comparison)
from ..measure.sweep import MeasurementFailed
from ...models import catalogue, stats
from ...probes.host import host_facts
from ...probes.layout import RepoLayout
from . import pack
from ...models.catalogue import Key
from .registry import Weights

KEY = "core.deltaBaseCacheLimit"
WORKLOAD = "history"
MIB = planner.MIB
SMALLEST = 1 << 20          # no candidate below 1m: the cache would hold no large base
LARGEST_STEP = 16           # a candidate is at most this many times Git's default
BISECT_STEPS = 2            # between the largest halving that fits and the one above it
# The quick pass times each size in this many rounds, every other one in reverse order:
# sizes near the curve's floor differ by less than one run's noise.
QUICK_ROUNDS = 2
TRIAL_RANK = 2
CLONE = "clone"             # index-pack: the profiles' clone workload
WHAT = {WORKLOAD: "git log -p of the path whose history has the most delta bases "
                  "(what log -p and blame of a large file read)"}


@dataclass(frozen=True)
class Bases:
    """The delta bases of the repository's blobs: their bytes, and the path whose
    history holds the most of them (with how many bytes and versions)."""
    total: int
    path: str = ""
    path_bytes: int = 0
    versions: int = 0


@dataclass(frozen=True)
class TrialFacts:
    """What the trial recorded beside its comparison."""
    base_bytes: int = 0             # every blob delta base's inflated bytes
    path: str = ""                  # the path whose history was read
    path_bytes: int = 0             # its delta bases' bytes
    limit: int = 0                  # bytes this process may use
    allowed: int = 0                # bytes a run may peak at (planner.memory_allowed)
    index_pack_threads: int = 0     # the caches index-pack would hold at once
    # Each value's first run ("default" for Git's): its peak bytes.
    peaks: Optional[Dict[str, int]] = None
    confined: str = ""              # "cgroup v1", "cgroup v2", "" (unconfined)


def delta_bases(repo: RepoLayout, beyond: int, scratch: Optional[str] = None) -> Bases:
    """The blobs' delta bases (their bytes inflated), and the path with the most of them.
    Paths are read (rev-list --objects) only where the bases exceed `beyond` bytes; git's
    listings go through `scratch` (gitbench.git_lines)."""
    size: Dict[str, int] = {}
    bases = set()
    for line in gitbench.git_lines(["cat-file", "--batch-all-objects",
                                    "--batch-check=%(objectname) %(objecttype) "
                                    "%(objectsize) %(deltabase)"], repo, scratch):
        parts = line.split()
        if len(parts) != 4 or parts[1] != "blob" or not parts[2].isdigit():
            continue
        size[parts[0]] = int(parts[2])
        if parts[3].strip("0"):
            bases.add(parts[3])
    total = sum(size.get(b, 0) for b in bases)
    if total <= beyond:
        return Bases(total)
    by_path: Dict[str, Tuple[int, int]] = {}
    for line in gitbench.git_lines(["rev-list", "--objects", "--all"], repo, scratch):
        oid, _, path = line.partition(" ")
        if path and oid in size:
            held, versions = by_path.get(path, (0, 0))
            by_path[path] = (held + (size[oid] if oid in bases else 0), versions + 1)
    if not by_path:
        return Bases(total)
    path, (held, versions) = max(by_path.items(), key=lambda kv: (kv[1][0], kv[0]))
    return Bases(total, path, held, versions)


def default_bytes() -> int:
    size = catalogue.parse_size(catalogue.lookup(KEY).default)
    assert size is not None     # the catalogue's default is a size
    return size


def log_args(path: str) -> List[str]:
    """The workload's git arguments: `git log -p` of `path`, no pager's colours and no
    diff driver or textconv of the repository's (they would time a program of its own)."""
    return ["log", "-p", "--no-color", "--no-ext-diff", "--no-textconv", "--format=%H", "--",
            path]


def runner(repo: RepoLayout, path: str, allowed: int, within: str,
           seen: Optional[Dict[str, peak.PeakRun]] = None) -> gitbench.Runner:
    """A timed run of `git log -p` of `path` (planner.memory_runner, each value's first
    run kept in `seen`)."""
    return planner.memory_runner("git log -p", log_args(path), repo, allowed, within, KEY,
                                 seen)


def larger(bases: Bases, allowed: int, index_pack_threads: int) -> Optional[int]:
    """The cache that holds the path's delta bases: the smallest power-of-two multiple
    of Git's default at least their bytes (at most LARGEST_STEP times it), where one for
    every index-pack thread fits the allowed memory; else the largest such multiple that
    fits, None where not even twice the default does."""
    default = default_bytes()
    size, fits = 2 * default, None
    while size <= LARGEST_STEP * default and size * max(1, index_pack_threads) <= allowed:
        fits = size
        if size >= bases.path_bytes:
            break
        size *= 2
    return fits


def quick_pass(bases: Bases, allowed: int, index_pack_threads: int) -> List[int]:
    """The sizes timed beside Git's default (QUICK_ROUNDS runs each), the fastest then
    compared with it:
    a quarter and a half of the default (a cache larger than the reads reuse costs its
    memory: allocations and page faults), and the cache that holds the path's bases
    where one fits (larger())."""
    default = default_bytes()
    out = [size for size in (default // 4, default // 2) if size >= SMALLEST]
    above = larger(bases, allowed, index_pack_threads)
    return out + ([above] if above else [])


def smaller(default: int) -> List[int]:
    """The sizes tried where Git's default does not fit, largest first: halvings of it
    down to SMALLEST (each run's measured peak decides)."""
    out, size = [], default // 2
    while size >= SMALLEST:
        out.append(size)
        size //= 2
    return out


def _setting(size: int) -> Dict[str, str]:
    return {KEY: catalogue.format_size(size)}


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    if not bench.memory_limit:
        return Trial.not_run(KEY, "the memory this process may use could not be read")
    default = default_bytes()
    allowed = planner.memory_allowed(bench.memory_limit)
    # Speed is at stake where the bases exceed the default; memory where what the
    # default's cache may hold is half of what a run may use or more.
    with planner.within_budget(bench):
        bases = delta_bases(bench.repo, min(default, allowed // 2), bench.ws.root)
    if not bases.path:
        return Trial.not_run(KEY, f"Git's default ({default / MIB:.0f} MiB) holds every "
                             f"delta base the repository's blobs have "
                             f"({bases.total / MIB:.1f} MiB), and they are less than half "
                             f"the {allowed / MIB:.0f} MiB a run may use: nothing at stake")
    threads = pack.git_threads(bench.online_cpus or bench.cores)
    seen: Dict[str, peak.PeakRun] = {}
    run = runner(bench.repo, bases.path, allowed, bench.memory_source, seen)

    def facts() -> Dict[str, Any]:
        confined = next((r.confined for r in seen.values() if r.confined), "")
        return asdict(TrialFacts(bases.total, bases.path, bases.path_bytes,
                                 bench.memory_limit, allowed, threads,
                                 {v: r.peak for v, r in seen.items()}, confined))
    with planner.within_budget(bench):
        error, warm = gitbench.attempt(lambda: run({}))
        first = seen.get("default")
        over = error is not None and first is not None and first.over(allowed)
        cand = _fitting(run, default) if over else None
    if error is None:
        return _faster(bench, bases, allowed, threads, run, warm, facts,
                       seen["default"])
    if not over:
        return Trial.not_run(KEY, f"git log -p of {bases.path} failed with Git's default: "
                             f"{error}")
    if cand is None:
        return Trial.not_run(KEY, f"no size down to {catalogue.format_size(smaller(default)[-1])} "
                             f"keeps git log -p of {bases.path} within the "
                             f"{allowed / MIB:.0f} MiB a run may use; Git's default stands")
    # Git's default does not fit, the candidate's run did: that decides against the
    # default, whatever the speeds (a peak is the objects', not the moment's).
    cand, among = _fastest_fitting(bench, run, seen, allowed, cand, bases.versions)
    c = failed_comparison(WORKLOAD, {}, cand, FAILS_DEFAULT, error or "",
                          (seen[cand[KEY]].seconds,), bases.versions)
    return Trial(KEY, (c,) + among, facts())


def _fitting(run: gitbench.Runner, default: int) -> Optional[Dict[str, str]]:
    """The largest size whose run fits: the largest halving of Git's default that does,
    then BISECT_STEPS steps between it and the size above it that did not (each run's
    peak decides; the budget's end stops the steps, not the answer). None where no
    halving fits."""
    def fits(size: int) -> bool:
        return gitbench.attempt(lambda: run(_setting(size)))[0] is None
    over = default
    for size in smaller(default):
        if fits(size):
            break
        over = size
    else:
        return None
    try:
        for _ in range(BISECT_STEPS):
            mid = round((size + over) / 2 / MIB) * MIB
            if mid in (size, over):
                break
            size, over = (mid, over) if fits(mid) else (size, mid)
    except gitbench.DeadlineReached:
        pass
    return _setting(size)


def _fastest_fitting(bench: Bench, run: gitbench.Runner, seen: Dict[str, peak.PeakRun],
                     allowed: int, largest: Dict[str, str], files: int
                     ) -> Tuple[Dict[str, str], Tuple[Comparison, ...]]:
    """The size to write among those whose run fitted (_fitting's runs): the largest,
    or the fastest other where its one run was faster and interleaved runs against the
    largest say so beyond noise (that comparison is returned as evidence)."""
    fitted = {v: r.seconds for v, r in seen.items()
              if v != "default" and r.returncode == 0 and not r.over(allowed)}
    others = [v for v in fitted if v != largest[KEY]]
    if not others or largest[KEY] not in fitted:
        return largest, ()
    other = min(others, key=lambda v: fitted[v])
    if fitted[other] >= fitted[largest[KEY]]:
        return largest, ()
    alt = {KEY: other}
    try:
        c = bench.ab(WORKLOAD, largest, alt, lambda: run(largest), lambda: run(alt),
                     files=files)
    except (OutOfBudget, MeasurementFailed, gitbench.DeadlineReached):
        return largest, ()
    return (alt if _faster_beyond_noise(c) else largest), (c,)


def _faster(bench: Bench, bases: Bases, allowed: int, threads: int, run: gitbench.Runner,
            warm: Optional[float], facts: Callable[[], Dict[str, Any]], default_run: peak.PeakRun
            ) -> Trial:
    """Git's default fits: where the bases exceed it, the sizes of quick_pass() in
    QUICK_ROUNDS rounds on what the profile weighs (git log -p where it weighs reading
    history, else index-pack where it weighs clones), then the fastest by its median
    against Git's default by the usual interleaved runs. A size that failed once is not
    run again."""
    fits = (f"Git's default fits: git log -p of {bases.path} "
            + planner.how_it_fit(default_run, allowed))
    if bases.total <= default_bytes():
        return Trial.not_run(KEY, f"{fits}, and its cache holds every delta base")
    workload = WORKLOAD
    files_read: Optional[int] = bases.versions      # the versions log -p reads
    if not bench.counts(WORKLOAD):
        if not bench.counts(CLONE):
            return Trial.not_run(KEY, f"the {bench.options.workload} profile weighs neither "
                                 "reading history (git log -p, blame) nor clones")
        try:
            run, warm = _index_pack(bench)
        except (OutOfBudget, MeasurementFailed, gitbench.DeadlineReached) as e:
            return Trial.not_run(KEY, f"no index-pack to time ({e or 'the budget ended'})")
        workload, files_read = CLONE, None
    worked, errors = _quick_pass_times(bench, quick_pass(bases, allowed, threads), run)
    if not worked:
        return Trial.not_run(KEY, f"no size beside Git's default ran within the "
                             f"{allowed / MIB:.0f} MiB a run may use: "
                             + "; ".join(errors.values()))
    cand = _setting(min(worked, key=lambda size: worked[size]))
    c = bench.ab(workload, {}, cand, lambda: run({}), lambda: run(cand),
                 files=files_read, warm_default=warm)
    more = on_index_pack(bench, cand) if _faster_beyond_noise(c) and workload == WORKLOAD \
        else ()
    return Trial(KEY, (c,) + more, facts())


def _quick_pass_times(bench: Bench, sizes: List[int], run: gitbench.Runner
                      ) -> Tuple[Dict[int, float], Dict[int, str]]:
    """Each size's median of QUICK_ROUNDS runs (every other round in reverse order), and
    the error of each size that failed (not run again)."""
    runs: Dict[int, List[float]] = {size: [] for size in sizes}
    errors: Dict[int, str] = {}
    with planner.within_budget(bench):
        for order in range(QUICK_ROUNDS):
            for size in sizes if order % 2 == 0 else sizes[::-1]:
                if size in errors:
                    continue
                error, t = gitbench.attempt(lambda: run(_setting(size)))
                if error is not None or t is None:
                    errors[size] = error or "no time"
                else:
                    runs[size].append(t)
    worked = {size: statistics.median(t) for size, t in runs.items() if size not in errors}
    return worked, errors


def _faster_beyond_noise(c: Comparison) -> bool:
    """Whether the candidate was faster beyond noise, neither side failing."""
    return not c.fails and c.estimate is not None and c.estimate.verdict == stats.FASTER


def _index_pack(bench: Bench) -> Tuple[gitbench.Runner, float]:
    """index-pack of pack.pack_for's pack (each of its threads resolves deltas through
    a cache of its own: what clone and fetch spend their CPU on), and its first run's
    seconds (the pack read into the cache)."""
    with planner.within_budget(bench):
        packfile, _ = pack.pack_for(bench)
        run = pack.index_pack(packfile, bench.ws.root)
        return run, run({})


def on_index_pack(bench: Bench, cand: Dict[str, str]) -> Tuple[Comparison, ...]:
    """`cand`, faster for reading history, against Git's default on index-pack
    (_index_pack) where the profile weighs clones: it may be slower there. () where it
    does not, or the budget or git does not let it run."""
    if not bench.counts(CLONE):
        return ()
    try:
        run, warm = _index_pack(bench)
        with planner.within_budget(bench):
            return (bench.ab(CLONE, {}, cand, lambda: run({}), lambda: run(cand),
                             warm_default=warm),)
    except (OutOfBudget, MeasurementFailed, gitbench.DeadlineReached):
        return ()


def decide(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    f = t.facts_as(TrialFacts)
    return advice.weighed(key, t, weights, t.main.candidate[KEY],
                          {WORKLOAD: f"git log -p of {f.path} ({f.path_bytes / MIB:.0f} "
                                     "MiB of delta bases: what log -p and blame of it read)",
                           CLONE: "git index-pack (what clone and fetch resolve deltas "
                                  "with, a cache per thread)"},
                          {"peaks": f.peaks, "allowed": f.allowed,
                           "base_bytes": f.base_bytes})


def verify_runner(key: Key, repo: RepoLayout, index_file: str, trial: Optional[Trial]
                  ) -> gitbench.Runner:
    """verify's runner for the history workload: the same runs as the trial's, on the
    user's repository, within the memory this host allows now."""
    allowed, within = planner.memory_here(host_facts())
    bases = delta_bases(repo, 0)
    if not bases.path:
        raise MeasurementFailed("no path's history has delta bases beyond Git's default")
    return runner(repo, bases.path, allowed, within)


class DeltaBaseCacheLimit(Tuner):
    rank = TRIAL_RANK

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def verify_runner(self, key: Key, repo: RepoLayout, index_file: str,
                      trial: Optional[Trial]) -> Optional[gitbench.Runner]:
        return verify_runner(key, repo, index_file, trial)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return decide(key, cal, weights)


TUNERS = {KEY: DeltaBaseCacheLimit()}
