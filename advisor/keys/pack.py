"""pack.threads: the threads `git index-pack` resolves deltas with, the CPU a clone or a
fetch spends once the pack has arrived.

Git's own choice (unset, or 0) follows online_cpus(), which ignores a CPU quota; since
2.29 index-pack caps it (fewer than 4 CPUs: all; then 3, half, at most 20). Real git
decides: index-pack of the repository's largest pack where it is small, else of a
sample pack made once in the scratch directory (a few thousand of its objects with the
delta chains they are stored on: its cost does not grow with the repository),
with each count from 1 to the cores, then Git's choice against the fastest. 0 is never
written.
"""
import glob
import os
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

from ... import git
from ..decide import advice
from ..measure import gitbench, planner
from ..measure.bench import Bench
from ..measure.record import Calibration, Trial
from ..measure.sweep import MeasurementFailed
from ..write import safefile
from ...probes import repo as repo_probe
from . import registry
from ...models.catalogue import Key
from .registry import Weights

KEY = "pack.threads"
MAX_COUNT = 8      # index-pack's delta resolution stops scaling well before this on a client
# Last: a client spends little of its day in index-pack, and the memory keys before it
# may decide it (pack-objects fitting the memory only with fewer threads:
# recommend.needed_by_another).
TRIAL_RANK = 4


@dataclass(frozen=True)
class TrialFacts:
    """What the trial recorded: the pack's size and each thread count's quick pass."""
    pack_bytes: int = 0
    seconds_by_count: Optional[Dict[str, float]] = None
    pack: Optional[str] = None      # which pack: the repository's own or a sample


# A pack of more objects than this is timed on a sample of it: SAMPLE_OBJECTS of its
# objects, with the delta bases they are stored on (a chain is followed no further once
# the sample holds 5x that). Its cost does not grow with the repository: on the disk at
# 100,000 files, index-pack of the repository's own pack (111,113 objects) took 1.26 s
# a run, and the trial's dozen runs did not fit a 20 s budget after the other keys'; a
# real clone's pack (gigabytes) fits no budget at all.
SAMPLE_OBJECTS = 4000
MAX_SAMPLE = 5 * SAMPLE_OBJECTS
# pack.depth's default: no stored delta chain is longer.
MAX_CHAIN = 50
IDX_V2 = b"\377tOc"
HASH_BYTES = {"sha1": 20, "sha256": 32}


def pack_for(bench: Bench) -> Tuple[str, str]:
    """The pack index-pack is timed on and what it is: the repository's largest pack
    where it holds no more objects than a sample, else a sample pack made in the
    scratch directory, once per calibration (planner.made_once). OutOfBudget where
    making one outlasts its share of the budget, MeasurementFailed where git packs
    nothing."""
    return planner.made_once(bench, "index-pack's pack", lambda: _pack_for(bench))


def _pack_for(bench: Bench) -> Tuple[str, str]:
    packs = repo_probe.pack_files(bench.ws.layout)
    largest = max(packs, key=os.path.getsize) if packs else None
    total = _objects_in(largest) if largest else None
    if largest and total is not None and total <= SAMPLE_OBJECTS:
        return largest, "the repository's largest pack"
    limit = planner.part_of_left(bench, "pack")
    if largest and total is not None:
        first = _first_names(largest, SAMPLE_OBJECTS, bench.ws.layout.object_format)
        what = f"{len(first)} of the {total} objects of the repository's largest pack"
    else:
        # Loose objects only: the index's blobs, evenly spread over the tree; pack-objects
        # finds deltas among them, as a first repack would.
        records = gitbench.sample_entries(bench.ws.listed(), SAMPLE_OBJECTS, gitbench.PART_RUNS)
        first = [r.split("\t", 1)[0].split()[1] for r in records]
        what = f"{len(first)} of the index's {len(bench.ws.listed())} blobs"
    if not first:
        raise MeasurementFailed("the repository has no objects to pack")
    with planner.within(limit):         # the budget, not git, ends it
        path, bases = _sample_pack(bench, first)
    return path, f"a sample pack: {what}, and the {bases} delta bases they are stored on"


def _idx_bytes(pack: str, size: int) -> bytes:
    """The first `size` bytes of a pack's .idx; none where it is not a regular file (a
    cloned repository is untrusted: a FIFO there must not hang the calibration)."""
    return safefile.read_regular(pack[:-len(".pack")] + ".idx", size) or b""


def _objects_in(pack: str) -> Optional[int]:
    """The objects a pack holds, from its .idx's fan-out table (its last entry counts
    them all; gitformat-pack: version 2 after an 8-byte header, version 1 at the start).
    None where the .idx cannot be read."""
    head = _idx_bytes(pack, 8 + 256 * 4)
    at = 8 + 255 * 4 if head[:4] == IDX_V2 else 255 * 4
    return int.from_bytes(head[at:at + 4], "big") if len(head) >= at + 4 else None


def _first_names(pack: str, n: int, object_format: str) -> List[str]:
    """The first n object names of a pack's .idx, one read. The table is in hash order,
    and a hash says nothing of the object, so they are a uniform sample of the pack:
    commits, trees and blobs, deltas and bases, in the pack's own mix. (Version 2 names
    follow the fan-out; version 1 interleaves each with a 4-byte offset.)"""
    width = HASH_BYTES.get(object_format, 20)
    data = _idx_bytes(pack, 8 + 256 * 4 + n * (4 + width))
    start, stride = (8 + 256 * 4, width) if data[:4] == IDX_V2 else (256 * 4 + 4, 4 + width)
    table = data[start:start + n * stride]
    return [table[i:i + width].hex() for i in range(0, len(table) - width + 1, stride)]


def _sample_pack(bench: Bench, first: List[str]) -> Tuple[str, int]:
    """The objects `first`, with every delta base they are stored on, packed into the
    scratch directory; and how many bases were added. index-pack's threads resolve
    deltas, so the sample keeps the repository's: each chain is followed to its end
    (`git cat-file --batch-check` %(deltabase)) while the sample holds fewer than
    MAX_SAMPLE objects, and pack-objects reuses a stored delta whose base it packs too."""
    env = gitbench.config_env({})
    names, wanted = dict.fromkeys(first), list(first)
    for _ in range(MAX_CHAIN):
        if not wanted or len(names) >= MAX_SAMPLE:
            break
        out = gitbench.run_git(["cat-file", "--batch-check=%(objectname) %(deltabase)"],
                               bench.worktree, env, hooks=False,
                               input="".join(f"{o}\n" for o in wanted), output=True,
                               repo=bench.repo).stdout
        wanted = []
        for line in out.splitlines():
            base = line.partition(" ")[2]
            if base.strip("0") and base != "missing" and base not in names:
                names[base] = None
                wanted.append(base)
    # pack-objects writes its temporary pack into the object directory before moving it
    # to the prefix, and a deadline may stop it in between: an object directory of its
    # own in scratch (the user's objects as an alternate) keeps the user's repository
    # free of a tmp_pack_* left behind.
    objects = os.path.join(bench.ws.root, "sample-objects")
    os.makedirs(os.path.join(objects, "pack"), exist_ok=True)
    own = dict(env, GIT_OBJECT_DIRECTORY=objects, GIT_ALTERNATE_OBJECT_DIRECTORIES=os.path.join(
        bench.ws.layout.common_dir, "objects"))
    prefix = os.path.join(bench.ws.root, "sample")
    proc = gitbench.run_git(["pack-objects", "-q", prefix], bench.worktree, own, hooks=False,
                            input="".join(f"{o}\n" for o in names), output=True,
                            repo=bench.repo)
    made = glob.glob(prefix + "-*.pack")
    if not made:
        raise MeasurementFailed("git pack-objects: "
                                + (git.first_lines(proc.stderr) or "nothing written"))
    return made[0], len(names) - len(first)


def index_pack(pack: str, root: str) -> gitbench.Runner:
    out = os.path.join(root, "index-pack.idx")

    def run(settings: Dict[str, str], trace_file: Optional[str] = None) -> float:
        for leftover in (out, out[:-4] + ".rev"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        return gitbench.timed_git(["index-pack", "-o", out, pack], root, settings,
                                  trace_file=trace_file)
    return run


def trial(key: Key, bench: Bench) -> Optional[Trial]:
    if repo_probe.partial_clone(bench.repo):
        # Its packs lack the blobs a full clone indexes, and what it fetches later comes
        # a few objects at a time: no pack here stands for the work the key changes.
        return Trial.not_run(KEY, "a partial clone: its packs hold no blobs, so no pack "
                             "here stands for what clone and fetch index")
    counts = range(1, min(bench.cores, MAX_COUNT) + 1)
    if len(counts) < 2:
        return Trial.not_run(KEY, "one CPU to use, so there is no thread count to choose")
    try:
        pack, what = pack_for(bench)
    except MeasurementFailed as e:
        return Trial.not_run(KEY, f"no pack to time ({e})")
    run = index_pack(pack, bench.ws.root)
    once = run({})                                        # warms the pack into the cache
    # One quick pass over the counts picks the candidate (two runs each where a quarter
    # of the budget left holds them); the A/B against Git's own choice is what decides.
    passes = 2 if planner.fits(bench, 2 * len(counts) * once, 1 / 4) else 1
    times = {n: min(run({KEY: str(n)}) for _ in range(passes)) for n in counts}
    ranked = sorted(times, key=lambda n: times[n])
    facts = asdict(TrialFacts(os.path.getsize(pack),
                              {str(n): round(t, 4) for n, t in times.items()}, what))
    if bench.online_cpus and ranked[0] == git_threads(bench.online_cpus):
        # The fastest is Git's own choice: timing it against itself would decide nothing
        # (its one chance in forty of "faster" would write a value that changes nothing),
        # so the A/B is against the next fastest count, and keeps Git's unless that wins.
        ranked = ranked[1:]
    cand = {KEY: str(ranked[0])}
    c = bench.ab("clone", {}, cand, lambda: run({}), lambda: run(cand))
    return Trial(KEY, (c,), facts)


def git_threads(online_cpus: int) -> int:
    """The threads index-pack starts with pack.threads unset (builtin/index-pack.c since
    2.29): every CPU below 4, then 3, then half, at most 20."""
    if online_cpus < 4:
        return online_cpus
    if online_cpus < 6:
        return 3
    return min(online_cpus // 2, 20)


def decide(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    if t is None:
        return advice.unmeasured(key)
    threads = t.main.candidate[KEY]
    f = t.facts_as(TrialFacts)
    mib = f.pack_bytes / 2 ** 20
    return advice.weighed(key, t, weights, threads,
                          {"clone": f"git index-pack of {f.pack or 'a pack'}, "
                                    f"{mib:.1f} MiB (what clone and fetch spend their CPU "
                                    "on)"},
                          {"seconds_by_count": f.seconds_by_count})


class Threads(registry.Tuner):
    """pack.threads: timed on a sample pack whose deltas the runs keep; decided from it."""

    rank = TRIAL_RANK

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return trial(key, bench)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> Optional[advice.KeyAdvice]:
        return decide(key, cal, weights)

    def verify_workloads(self, key: Key) -> Tuple[str, ...]:
        # What the threads change in a clone is its index-pack, not the tree it writes.
        return tuple(w for w in super().verify_workloads(key) if w != "clone")


TUNERS = {KEY: Threads()}
