"""Page-cache state of a repository: is Git about to read from memory or from the device?

Residency comes from mincore() through the engine, which reads nothing;
metadata hotness from timing lstat() of tracked files against the same
call on files the probe just created. Run it before anything else reads
the repository, or it measures itself.
"""
import glob
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from .. import engine
from ..models import storage as storage_model
from .repo import spread_order


@dataclass(frozen=True)
class Residency:
    files: int
    bytes: int
    pages: int
    resident_pages: int
    fraction: float


@dataclass(frozen=True)
class CacheFacts:
    method: str
    index: Residency
    packs: Residency
    tracked_sample: Residency
    data_fraction: Optional[float]
    metadata_lstat_p50: Optional[float]
    hot_lstat_p50: Optional[float]
    metadata_ratio: Optional[float]
    state: str
    notes: Tuple[str, ...]


def residency(paths: Sequence[str], base: Optional[str] = None) -> Residency:
    r = engine.cache_residency(paths, base)
    return Residency(len(paths), r.bytes, r.pages, r.resident, round(r.fraction, 4))


def object_files(common_dir: str) -> List[str]:
    pack_dir = os.path.join(common_dir, "objects", "pack")
    return sorted(glob.glob(os.path.join(pack_dir, "*.pack")) + glob.glob(os.path.join(pack_dir, "*.idx")))


@dataclass(frozen=True)
class DataResidency:
    """Taken before any git command reads the index."""

    index: Residency
    packs: Residency


def data_residency(index_file: str, common_dir: str) -> DataResidency:
    return DataResidency(residency([index_file] if os.path.exists(index_file) else []),
                         residency(object_files(common_dir)))


PILOT_FILES = 25
# Opening a file for mincore() costs about three metadata operations (lookup, open,
# release on FUSE and NFS), on top of the lstat.
COST_IN_LSTATS = 4


def _metadata_p50(worktree: str, sample: Sequence[str],
                  allowance: Optional[float]) -> Tuple[float, int]:
    """lstat latency of the tracked sample, before anything opens those files (an open
    caches their metadata), and how many of the sample the allowance affords."""
    pilot = engine.preload(sample[:PILOT_FILES], base=worktree, threads=1,
                           record_latency=True)
    n = len(sample)
    if allowance is not None:
        per = pilot.wall / max(1, pilot.entries) * COST_IN_LSTATS
        n = max(PILOT_FILES, min(n, int(allowance / max(per, 1e-9))))
    if n <= PILOT_FILES:
        return pilot.latency.p50, PILOT_FILES
    r = engine.preload(sample[PILOT_FILES:n], base=worktree, threads=1, record_latency=True)
    return r.latency.p50, n


def cache_facts(data: DataResidency, worktree: Optional[str], sample: Sequence[str],
                hot_lstat_p50: Optional[float], allowance: Optional[float] = None) -> CacheFacts:
    """With `allowance`, the sample is cut to what about that many seconds afford."""
    notes = []
    meta_p50 = ratio = None
    if worktree and sample:
        sample = spread_order(sample, PILOT_FILES)
        meta_p50, n = _metadata_p50(worktree, sample, allowance)
        if n < len(sample):
            sample = sample[:n]
            notes.append(f"{n} tracked files sampled to keep within the time allowed")
        if hot_lstat_p50:
            ratio = round(meta_p50 / hot_lstat_p50, 2)
        else:
            notes.append("no hot lstat figure from this file system to compare with")
    # Beneath the work tree, no link followed: a hostile repository's tracked paths
    # (a link to /dev/..., a FIFO) never make the probe open anything else or wait.
    files = residency(list(sample), base=worktree) if worktree else residency([])
    pages = data.index.pages + data.packs.pages + files.pages
    resident = data.index.resident_pages + data.packs.resident_pages + files.resident_pages
    fraction = resident / pages if pages else None
    return CacheFacts("mincore", data.index, data.packs, files,
                      round(fraction, 4) if fraction is not None else None,
                      meta_p50, hot_lstat_p50, ratio,
                      storage_model.cache_state(fraction, ratio), tuple(notes))
