"""gc.bigPackThreshold: the packs `git gc` keeps as they are instead of repacking them,
decided by real git on this repository within the memory this process may use.

Without it, `git gc` repacks every object into one pack, and `gc --auto` (too many
packs) does so unless its estimate of the repack's memory exceeds half the host's RAM
(builtin/gc.c total_ram(): sysinfo, not the cgroup's limit). In a container the repack
is then killed by the kernel. With it, packs of at least that size are kept and only
the rest is repacked.

Real git decides, on the pack-objects run of that all-in-one repack (every reachable
object, deltas reused as repack reuses them, its output discarded): each run's peak
memory is measured beside its time (peak.run), in a memory cgroup of its own where the
kernel lets one be made. Where Git's default (repack everything) fits
planner.memory_allowed, nothing is set. Where it does not, the threshold keeps the
largest packs, one more at a time from the largest (as many as gc keeps at most), until
the repack of the rest fits; the first that fits is written, whatever its speed. Where
none does, Git's default stands, said so.
"""
import os
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

from ..decide import advice
from . import packmem
from .registry import Tuner
from ..measure import gitbench, peak, planner
from ..measure.bench import Bench
from ..measure.record import FAILS_DEFAULT, Calibration, Trial, failed_comparison
from ...models import catalogue
from ...probes import repo as repo_probe
from ...probes.host import host_facts
from ...probes.layout import RepoLayout
from ...models.catalogue import Key
from .registry import Weights

KEY = "gc.bigPackThreshold"
WORKLOAD = "gc"
AUTO_PACK_LIMIT = 50        # gc.autoPackLimit's default (builtin/gc.c)
TRIAL_RANK = 3              # after pack.windowMemory: its runs read the same packs
MIB = planner.MIB
# The pack-objects run of repack -A -d (builtin/repack.c) without its output: what
# `git gc` spends its memory on.
GC_PACK_OBJECTS = ["pack-objects", "--all", "--reflog", "--indexed-objects", "--local",
                   "--honor-pack-keep", "--keep-true-parents", "--non-empty",
                   "--delta-base-offset", "--stdout", "-q"]
WHAT = {WORKLOAD: "git pack-objects of every object, deltas reused (what git gc's "
                  "all-in-one repack runs)"}


@dataclass(frozen=True)
class Pack:
    name: str          # its file name, as --keep-pack takes it
    size: int


@dataclass(frozen=True)
class TrialFacts:
    """What the trial recorded beside its comparison."""
    limit: int = 0                  # bytes this process may use
    allowed: int = 0                # bytes a run may peak at (planner.memory_allowed)
    packs: int = 0                  # local packs gc would consider
    pack_bytes: int = 0
    # Each threshold's run ("default": Git's, every pack repacked): its peak bytes, and
    # how it ended ("fits", "over" the allowed peak, "killed" there by the kernel).
    peaks: Optional[Dict[str, int]] = None
    ended: Optional[Dict[str, str]] = None
    confined: str = ""


def packs(repo: RepoLayout) -> List[Pack]:
    """The local packs `git gc` weighs, largest first: each with its index, neither a
    cruft pack (it has its own expiry) nor one a .keep file already keeps."""
    out = []
    for path in repo_probe.pack_files(repo):
        stem = path[:-len(".pack")]
        if not os.path.exists(stem + ".idx") or os.path.exists(stem + ".mtimes") \
                or os.path.exists(stem + ".keep"):
            continue
        try:
            out.append(Pack(os.path.basename(path), os.stat(path).st_size))
        except OSError:
            continue
    return sorted(out, key=lambda p: (-p.size, p.name))


def threshold(kept: List[Pack]) -> str:
    """The value that keeps at least `kept` (the largest packs): the smallest's size,
    rounded down to whole KiB, as git reads it."""
    smallest = min(p.size for p in kept)
    return catalogue.format_size(max(1024, smallest - smallest % 1024))


def kept_by(value: str, all_packs: List[Pack]) -> List[Pack]:
    """The packs gc keeps under `value`: every one of at least that size."""
    limit = catalogue.parse_size(value) or 0
    return [p for p in all_packs if p.size >= limit]


def runner(repo: RepoLayout, all_packs: List[Pack], allowed: int, within: str,
           seen: Optional[Dict[str, peak.PeakRun]] = None) -> gitbench.Runner:
    """A timed run of gc's pack-objects, keeping the packs settings[KEY] keeps (every
    pack repacked where it is unset), its peak measured (planner.memory_runner)."""
    def run(settings: Dict[str, str], trace_file: Optional[str] = None) -> float:
        value = settings.get(KEY)
        keep = [f"--keep-pack={p.name}" for p in kept_by(value, all_packs)] if value else []
        return planner.memory_runner("git gc's pack-objects", GC_PACK_OBJECTS + keep, repo,
                                     allowed, within, KEY, seen)(settings, trace_file)
    return run


def _auto_pack_limit(repo: RepoLayout) -> int:
    limit = packmem.config_int(repo, "gc.autoPackLimit")
    return AUTO_PACK_LIMIT if limit is None else limit


def _fitting(run: gitbench.Runner, found: List[Pack], most: int) -> Optional[str]:
    """The threshold keeping the fewest largest packs whose repack of the rest fits."""
    tried = set()
    for n in range(1, most + 1):
        value = threshold(found[:n])
        if value in tried:
            continue          # packs of one size: the value keeps them all already
        tried.add(value)
        if gitbench.attempt(lambda: run({KEY: value}))[0] is None:
            return value
    return None


def _facts(bench: Bench, found: List[Pack], allowed: int,
           seen: Dict[str, peak.PeakRun]) -> TrialFacts:
    def ended(r: peak.PeakRun) -> str:
        return "killed" if r.killed_at_limit else "over" if r.over(allowed) else "fits"
    confined = next((r.confined for r in seen.values() if r.confined), "")
    return TrialFacts(bench.memory_limit, allowed, len(found), sum(p.size for p in found),
                      {v: r.peak for v, r in seen.items()},
                      {v: ended(r) for v, r in seen.items()}, confined)


class BigPackThreshold(Tuner):
    rank = TRIAL_RANK

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        if not bench.memory_limit:
            return Trial.not_run(KEY, "the memory this process may use could not be read")
        if repo_probe.partial_clone(bench.repo):
            # Its gc repacks the promisor packs apart, and a walk of every object would
            # fetch the missing ones.
            return Trial.not_run(KEY, "a partial clone: git gc repacks its promisor packs "
                                 "apart; Git's default stands")
        allowed = planner.memory_allowed(bench.memory_limit)
        found = packs(bench.repo)
        if not found:
            return Trial.not_run(KEY, "the repository has no packs for git gc to keep")
        seen: Dict[str, peak.PeakRun] = {}
        run = runner(bench.repo, found, allowed, bench.memory_source, seen)
        with planner.within_budget(bench):
            try:
                run({})
                return Trial.not_run(KEY, "Git's default fits: git gc's repack of every pack "
                                     + planner.how_it_fit(seen["default"], allowed))
            except planner.OverMemory as e:
                error = str(e)
            # gc ignores a threshold that keeps autoPackLimit packs or more.
            most = min(len(found), max(0, _auto_pack_limit(bench.repo) - 1))
            cand = _fitting(run, found, most)
        if cand is None:
            return Trial.not_run(KEY, f"keeping up to the {most} largest packs, git gc's repack "
                                 f"of the rest does not fit the {allowed / MIB:.0f} MiB a run "
                                 "may use; Git's default stands")
        fitted = seen[cand]
        c = failed_comparison(WORKLOAD, {}, {KEY: cand}, FAILS_DEFAULT, error, (fitted.seconds,),
                              len(found))
        return Trial(KEY, (c,), asdict(_facts(bench, found, allowed, seen)))

    def verify_runner(self, key: Key, repo: RepoLayout, index_file: str,
                      trial: Optional[Trial]) -> Optional[gitbench.Runner]:
        """verify's runner for the gc workload: the trial's runs on the user's repository,
        within the memory this host allows now."""
        allowed, within = planner.memory_here(host_facts())
        return runner(repo, packs(repo), allowed, within)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        t = advice.trial_of(key, cal)
        if t is None:
            return advice.unmeasured(key)
        f = t.facts_as(TrialFacts)
        return advice.weighed(key, t, weights, t.main.candidate[KEY], WHAT,
                              {"peaks": f.peaks, "ended": f.ended, "allowed": f.allowed,
                               "limit": f.limit})


TUNERS = {KEY: BigPackThreshold()}
