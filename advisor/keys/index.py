"""index.threads, index.version (and feature.manyFiles, which bundles them): the index file.

The engine loads a copy of the real index, rewritten by git with an offset
table (IEOT), with 1..N threads and both allocators; real git decides each
key on `git ls-files` (index load) against a copy written the way Git's
default would write it.
"""
import os
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from ... import engine, git
from ...output import counted
from ..decide import advice
from . import registry
from ..measure import gitbench, planner, search
from ..measure.bench import Bench
from ..measure.gitbench import IndexShape
from ..measure.record import Calibration, Sweep, Trial
from ..measure.search import Dim
from ..measure.sweep import Share, SweepResult, engine_measure, run as run_sweep
from ...errors import EngineError
from ...models.catalogue import Key
from .registry import Weights

THREADS, VERSION, MANY_FILES = "index.threads", "index.version", "feature.manyFiles"
ALLOC = "engine.index.alloc"


@dataclass(frozen=True)
class Facts:
    ieot_blocks: int
    entries: int
    bytes_v2: int
    bytes_v4: int
    parse_v2: float
    parse_v4: Optional[float]   # a finding: measured with the search, after the trials


def _version_shape(value: str) -> IndexShape:
    return IndexShape(args=("--index-version", value))


def _threads_shape(value: str) -> IndexShape:
    """An index written with an offset table of that many blocks (git writes one where
    index.threads allows more than one thread)."""
    return IndexShape(settings=((THREADS, value),)) if value.isdigit() else IndexShape()


def sweep(bench: Bench) -> Optional[Sweep]:
    """Engine load of the real index rewritten with an offset table: threads and allocator.
    The index copies it and the trials load (git update-index on every entry) are made
    first, in its share, so the search cannot push them past it. Before the trials only
    what they need is measured (_quick: each thread count once, with Git's allocator);
    the search over both dimensions is a finding, which waits until every trial has had
    the budget (bench.later): at stake is one load of the index, milliseconds
    (docs/planner.md, "Figures behind the index sweep's rules")."""
    opts, ws = bench.options, bench.ws
    share = planner.sweep_share(bench, "index")
    blocks = max(4, 2 * bench.cores)
    ieot = ws.index_copy("ieot", _threads_shape(str(blocks)))
    v2, v4 = (ws.index_copy(f"v{v}", _version_shape(str(v))) for v in (2, 4))
    fmt = bench.repo.object_format     # the copies are the user's index, in its format
    blocks_read = []

    def read(path: str, **how: Any) -> engine.IndexResult:
        # As git reads an index: without hashing all of it (read-cache.c's verify_hdr
        # checks the checksum only for fsck). Hashed, a load took 65 ms at 100,000
        # entries, its parse 1-5 ms: 0.8 s of the sweep's 1 s share went to hashing.
        return engine.index_read(path, object_format=fmt, verify_checksum=False, **how)

    def load(point: search.Point) -> float:
        r = read(ieot, threads=point[THREADS], alloc=point[ALLOC])
        blocks_read.append(r.ieot_blocks)
        return r.parse + r.free

    def parse(path: str) -> float:
        # The best of two loads: the parses are stakes and a finding, not a verdict.
        return min(read(path).parse for _ in range(2))

    quick, quick_dims = _quick(blocks, engine_measure(load), share)
    # The v4 parse is a finding only (the advice's evidence is the v4 copy's size), so it
    # waits with the search: two loads the trials may need more.
    facts = Facts(blocks_read[-1] if blocks_read else read(ieot).ieot_blocks,
                  len(bench.names), os.path.getsize(v2), os.path.getsize(v4),
                  parse(v2), None)
    dims = [Dim(THREADS, 1, blocks, default=1), _alloc_dim(engine.ALLOC_MALLOC)]

    def search_later(b: Bench) -> Sweep:
        r = run_sweep(search.make(opts.strategy, dims, opts.seed), engine_measure(load),
                      planner.later_seconds(b, "index"), max_evals=40)
        # Not where the search took what was left.
        found = replace(facts, parse_v4=parse(v4)) if planner.has_budget(b) else facts
        return Sweep.of(r, dims, asdict(found))
    bench.later.append(("index", search_later))
    return Sweep.of(quick, quick_dims, asdict(facts))


def _alloc_dim(*others: str) -> Dim:
    """The allocator: Git's (a memory pool) and `others`."""
    return Dim(ALLOC, categories=(engine.ALLOC_POOL,) + others, default=engine.ALLOC_POOL)


def _quick_counts(blocks: int) -> Tuple[int, ...]:
    return tuple(sorted({1, blocks} | {2 ** i for i in range(1, blocks.bit_length())
                                       if 2 ** i < blocks}))


def _quick(blocks: int, measure: Callable[[search.Point], float], share: Share
          ) -> Tuple[SweepResult, List[Dim]]:
    """Each thread count the offset table's blocks allow (1, powers of two, `blocks`)
    with Git's allocator, in a seeded order after Git's own (one thread), and the
    quickest measured again (sweep.run's repeats): what index.threads' trial takes its
    candidate from. (the result, its dimensions)"""
    counts = _quick_counts(blocks)
    dims = [Dim(THREADS, categories=counts, default=1), _alloc_dim()]
    return run_sweep(search.make("grid", dims), measure, share.left(),
                     max_evals=len(counts) + 1 + len(counts) // 3), dims


def git_value(loaders: int) -> str:
    """The index.threads value with which git loads the entries on `loaders` threads, as
    the engine does with that many (read-cache.c do_read_index and
    load_cache_entries_threaded): of a value's threads one loads the extensions, and the
    rest share the offset table's blocks, as many as the value, DIV_ROUND_UP(blocks,
    rest) each, so a value v >= 3 loads on ceil(v / 2) of them and 2 on one. The least
    value for n >= 2 loaders is 2n - 1; for one, 2 (only the extensions beside it)."""
    return str(2 * loaders - 1) if loaders >= 2 else "2"


def loaders(value: int) -> int:
    """The threads git loads the entries on with index.threads=value (git_value's inverse)."""
    return (value + 1) // 2 if value >= 3 else 1


def _trial_threads(bench: Bench) -> Optional[Trial]:
    s = bench.sweeps.get("index")
    if s is None or s.facts_as(Facts).ieot_blocks <= 1:
        return None
    threads = git_value(s.best[THREADS])
    load = gitbench.index_load(bench.repo, bench.ws.index_copy("threads", _threads_shape(threads)))
    cand = {THREADS: threads}
    return Trial(THREADS, (bench.ab("index", {}, cand, lambda: load({}), lambda: load(cand)),))


def _trial_version(bench: Bench) -> Optional[Trial]:
    if bench.sweeps.get("index") is None:
        return None
    l2, l4 = (gitbench.index_load(bench.repo, bench.ws.index_copy(f"v{v}", _version_shape(str(v))))
              for v in (2, 4))
    return Trial(VERSION, (bench.ab("index", {VERSION: "2"}, {VERSION: "4"},
                                    lambda: l2({}), lambda: l4({})),))


def _stakes(bench: Bench) -> Optional[float]:
    """What a key that changes how the index is loaded can save a command at most: the
    engine's parse of the whole index (milliseconds below 100,000 entries)."""
    s = bench.sweeps.get("index")
    return s.facts_as(Facts).parse_v2 if s else None


def _decide_threads(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    s = cal.sweeps.get("index")
    if t is None:
        return advice.not_set(key, f"not set: {cal.repository.entries or 0} entries; Git "
                                   "loads at most one thread per 10,000")
    threads = t.main.candidate[THREADS]
    busy = loaders(int(threads)) + 1      # the loaders and the extensions' thread
    quota = cal.host.cpu_quota
    # Loading is CPU-bound: beyond a CPU quota only a measurement that beats it counts,
    # and that is what validated() asks; the reason says the count is above the quota.
    above = (f"; its {counted(busy, 'loading thread')} are above the {quota:g}-CPU quota "
             "it was measured under"
             if quota is not None and busy > quota else "")
    ev: Dict[str, Any] = {"best": s.best if s else None}
    if quota is not None:
        ev["cpu_quota"] = quota
    return advice.weighed(key, t, weights, threads,
                          {"index": "reading the index (git ls-files)"}, ev, suffix=above)


def _decide_version(key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
    t = advice.trial_of(key, cal)
    s = cal.sweeps.get("index")
    if t is not None:
        f = s.facts_as(Facts) if s else None
        ev = {"bytes_v2": f.bytes_v2 if f else None, "bytes_v4": f.bytes_v4 if f else None}
        smaller = f"; v4 is {1 - f.bytes_v4 / f.bytes_v2:.0%} smaller" if f and f.bytes_v2 else ""
        # The size is part of the reason whatever the verdict.
        return advice.weighed(key, t, weights, "4", {"index": "reading a version 4 index"}, ev,
                              suffix=smaller)
    return advice.unmeasured(key)


def findings(cal: Calibration) -> List[str]:
    s = cal.sweeps.get("index")
    if not s or s.best_value is None:
        return []
    return [f"index load: fastest with {counted(s.best[THREADS], 'thread')} and {s.best[ALLOC]} "
            f"allocation ({s.best_value * 1e3:.2f} ms, engine)."]


def _rewrite_version(value: str, repo: str) -> str:
    """index.version reaches an existing index only through `git update-index`."""
    proc = git.run(["update-index", "--index-version", value], cwd=repo)
    if proc.returncode:
        return f"could not rewrite the index: {git.first_lines(proc.stderr)}"
    return f"rewrote {repo}'s index as version {value}"


def _version_on_disk(value: str, repo: str) -> Tuple[Dict[str, str], List[str]]:
    """The version the index file has now: the key alone does not change it."""
    from ...probes import repo as repo_probe
    if not os.path.isdir(repo):
        return {}, []
    layout = repo_probe.locate(repo)
    if not layout or not os.path.exists(layout.index_file):
        return {}, []
    try:
        now = engine.index_read(layout.index_file, object_format=layout.object_format).version
    except EngineError as e:
        return {"index": f"unreadable: {e.message}"}, []
    todo = []
    if str(now) != value:
        todo.append(f"the index of {repo} is still version {now}: run `git -C {repo} "
                    f"update-index --index-version {value}` for {VERSION}={value} "
                    "to take effect")
    return {f"{VERSION} on disk": str(now)}, todo


class Threads(registry.Tuner):
    """index.threads: git ls-files on an index copy with an offset table, at the engine's
    best thread count; at stake, one parse of the index."""

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return _trial_threads(bench)

    def stakes(self, key: Key, bench: Bench) -> Optional[float]:
        return _stakes(bench)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
        return _decide_threads(key, cal, weights)

    def index_shape(self, key: Key, value: str) -> IndexShape:
        return _threads_shape(value)


class Version(registry.Tuner):
    """index.version: git ls-files on a version 2 copy against a version 4 copy; the key
    reaches an existing index only through `git update-index`."""

    def trial(self, key: Key, bench: Bench) -> Optional[Trial]:
        return _trial_version(bench)

    def stakes(self, key: Key, bench: Bench) -> Optional[float]:
        return _stakes(bench)

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
        return _decide_version(key, cal, weights)

    def index_shape(self, key: Key, value: str) -> IndexShape:
        return _version_shape(value)

    def rewrite_index(self, key: Key, value: str, repo: str) -> Optional[str]:
        return _rewrite_version(value, repo)

    def on_disk(self, key: Key, value: str, repo: str) -> Tuple[Dict[str, str], List[str]]:
        return _version_on_disk(value, repo)

    def index_leftover(self, key: Key, value: str) -> Optional[str]:
        return ("indexes rewritten as version 4 stay so (`git update-index --index-version 2` "
                "in each repository)" if value == "4" else None)


class ManyFiles(registry.Tuner):
    """feature.manyFiles: never trialled, it bundles keys git-tune decides one by one."""

    def decide(self, key: Key, cal: Calibration, weights: Weights) -> advice.KeyAdvice:
        return advice.not_set(key, "not set: it bundles index.version and core.untrackedCache, "
                                   "which git-tune sets one by one where measured")


TUNERS = {THREADS: Threads(), VERSION: Version(), MANY_FILES: ManyFiles()}
