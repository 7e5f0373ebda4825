"""pack.windowMemory and pack.deltaCacheSize: the memory `git pack-objects` may hold while
it finds deltas (repack, gc), decided together by real git on this repository.

Git sizes neither from the memory it may use: the window is unlimited per thread and the
delta cache 256 MiB, so a window of large blobs holds ten of them per thread, and a
container's repack is killed by the kernel. Real git decides, on pack-objects over the
repository's largest objects (enough to fill every thread's window: what peaks does
not grow with the rest of the repository), deltas found again as `repack -f` does,
its output discarded. Every run's peak memory is measured beside its time (peak.run),
and in a memory cgroup of its own where the kernel lets one be made.

A run that peaks above planner.memory_allowed (or is killed there) fails. The candidate
is the largest size, halved from what the allowed memory holds for each thread's window
and the cache, whose run fits. Where Git's default fails and the candidate does not,
the candidate is written whatever its speed. Where Git's defaults fit, nothing is timed
further: a smaller window is faster only by finding fewer deltas (a larger pack), which
these runs do not weigh.
"""
import os
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional

from ..decide import advice
from .registry import Tuner
from ..measure import gitbench, peak, planner
from ..measure.bench import Bench
from ..measure.record import (FAILS_DEFAULT, Calibration, Trial,
                              failed_comparison)
from ..measure.sweep import MeasurementFailed
from ...models import catalogue
from ...probes.host import host_facts
from ...probes.layout import RepoLayout
from ...models.catalogue import Key
from .registry import Weights

WINDOW, CACHE, THREADS = "pack.windowMemory", "pack.deltaCacheSize", "pack.threads"
WORKLOAD = "repack"
DEFAULT_WINDOW = 10         # pack.window's default (builtin/pack-objects.c)
WINDOWS_FILLED = 1          # the sample fills each thread's window this many times
SMALLEST = 1 << 20          # no candidate below 1m: the window would hold one object
MIB = planner.MIB
TRIAL_RANK = 2
WHAT = {WORKLOAD: "git pack-objects of the largest objects, deltas found again "
                  "(what git repack -adf and gc spend memory on)"}


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
    out = gitbench.run_git(["cat-file", "--batch-all-objects",
                            "--batch-check=%(objectsize) %(objectname)"],
                           repo.top, gitbench.config_env({}), hooks=False,
                           output=True, repo=repo).stdout
    sized = []
    for line in out.splitlines():
        size, _, name = line.partition(" ")
        if size.isdigit() and name:
            sized.append((int(size), name))
    if not sized:
        raise MeasurementFailed("the repository has no objects to pack")
    sized.sort(reverse=True)
    chosen = sized[:want]
    path = os.path.join(root, "packmem-objects")
    with open(path, "w") as f:
        f.writelines(f"{name}\n" for _, name in chosen)
    return Sample(path, len(chosen), sum(s for s, _ in chosen), chosen[-1][0])


def runner(repo: RepoLayout, objects: Sample, allowed: int, within: str,
           seen: Optional[Dict[str, peak.PeakRun]] = None) -> gitbench.Runner:
    """A timed run of pack-objects on the sample (planner.memory_runner, each value's
    first run kept in `seen` by its pack.windowMemory)."""
    args = ["pack-objects", "--no-reuse-delta", "--delta-base-offset", "--stdout", "-q"]
    return planner.memory_runner("git pack-objects", args, repo, allowed, within, WINDOW,
                                 seen, objects.names_file)


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


def _settings(size: int) -> Dict[str, str]:
    """Both keys at `size`; the cache no larger than git reads (an int: below 2g)."""
    most = catalogue.lookup(CACHE).max
    cache = size if most is None else min(size, most)
    return {WINDOW: catalogue.format_size(size), CACHE: catalogue.format_size(cache)}


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
    seen: Dict[str, peak.PeakRun] = {}
    run = runner(bench.repo, objects, allowed, bench.memory_source, seen)
    with planner.within_budget(bench):
        try:
            run({})
            error = None
        except planner.OverMemory as e:
            error = str(e)
        if error is None:
            # Memory is not at stake. A smaller window would be faster only by finding
            # fewer deltas: a larger pack, which fetches, clones and the disk live with
            # and these runs do not weigh.
            return Trial.not_run(WINDOW, "Git's defaults fit: pack-objects "
                                 + planner.how_it_fit(seen["default"], allowed))
        cand = _fitting(run, allowed, n_threads, objects.smallest)
        # Each thread holds a window of its own: where no size fits, fewer threads.
        fewer = n_threads
        while cand is None and fewer > 1:
            fewer //= 2
            seen_fewer: Dict[str, peak.PeakRun] = {}
            cand = _fitting(runner(bench.repo, objects, allowed, bench.memory_source,
                                   seen_fewer), allowed, fewer, objects.smallest,
                            threads=fewer)
            seen.update({_seen_as({WINDOW: v, THREADS: str(fewer)}): r
                         for v, r in seen_fewer.items()})
    if cand is None:
        return Trial.not_run(WINDOW, f"no value from {catalogue.format_size(SMALLEST)} up "
                             f"keeps pack-objects within the {allowed / MIB:.0f} MiB a run "
                             "may use, down to one thread; Git's defaults stand")
    # Git's defaults do not fit, the candidate's run did: that decides, whatever the
    # speeds (no more runs are owed: a peak is the objects', not the moment's).
    fitted = seen[_seen_as(cand)]
    c = failed_comparison(WORKLOAD, {}, cand, FAILS_DEFAULT, error, (fitted.seconds,),
                          objects.objects)
    return Trial(WINDOW, (c,), asdict(_facts(bench, objects, allowed, n_threads, seen)))


def _fitting(run: Callable[[Dict[str, str]], float], allowed: int, n_threads: int,
             smallest_object: int, threads: Optional[int] = None
             ) -> Optional[Dict[str, str]]:
    """The settings of the largest size on the ladder for n_threads whose run fits (with
    pack.threads=`threads` where given); None where none does."""
    for size in ladder(allowed, n_threads, smallest_object, least_cache=n_threads == 1):
        settings = _settings(size)
        if threads is not None:
            settings[THREADS] = str(threads)
        if gitbench.attempt(lambda: run(settings))[0] is None:
            return settings
    return None


def _seen_as(cand: Dict[str, str]) -> str:
    """The name `seen` keeps the candidate's first run under."""
    if THREADS not in cand:
        return cand[WINDOW]
    n = int(cand[THREADS])
    return f"{cand[WINDOW]}, {n} thread{'s' * (n > 1)}"


def _facts(bench: Bench, objects: Sample, allowed: int, n_threads: int,
           seen: Dict[str, peak.PeakRun]) -> TrialFacts:
    def ended(r: peak.PeakRun) -> str:
        return "killed" if r.killed_at_limit else "over" if r.over(allowed) else "fits"
    confined = next((r.confined for r in seen.values() if r.confined), "")
    return TrialFacts(bench.memory_limit, bench.memory_source, allowed, objects.objects,
                      objects.size, n_threads, {v: r.peak for v, r in seen.items()},
                      {v: ended(r) for v, r in seen.items()}, confined)


def _decide(key: Key, cal: Calibration, weights: Weights, value_of: Callable[[Dict[str, str]], str]
           ) -> advice.KeyAdvice:
    t = cal.trials.get(WINDOW)
    if t is None:
        return advice.unmeasured(key)
    if t.why_not_run:
        return advice.not_set(key, "not set: " + t.why_not_run, dict(t.facts))
    f = t.facts_as(TrialFacts)
    return advice.weighed(key, t, weights, value_of(t.main.candidate), WHAT,
                          {"peaks": f.peaks, "ended": f.ended,
                           "allowed": f.allowed, "limit": f.limit})


def verify_runner(key: Key, repo: RepoLayout, index_file: str) -> gitbench.Runner:
    """verify's runner for the repack workload: the same runs as the trial's, on the
    user's repository, within the memory this host allows now."""
    host = host_facts()
    allowed, within = planner.memory_here(host)
    objects = sample(repo, os.path.dirname(index_file), threads(repo, host.logical_cpus))
    return runner(repo, objects, allowed, within)


class WindowMemory(Tuner):
    rank = TRIAL_RANK

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def verify_runner(self, key: Key, repo: RepoLayout, index_file: str
                      ) -> Optional[gitbench.Runner]:
        return verify_runner(key, repo, index_file)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return _decide(key, cal, weights, lambda cand: cand[WINDOW])


class DeltaCacheSize(Tuner):
    """Decided by pack.windowMemory's trial: the same runs set both."""

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return _decide(key, cal, weights, lambda cand: cand[CACHE])


TUNERS = {WINDOW: WindowMemory(), CACHE: DeltaCacheSize()}
