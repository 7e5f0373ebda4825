"""`git-tune probe`: everything git-tune knows about this host and repository, as one record.

The JSON form is versioned (SCHEMA_VERSION) and documented in README.md;
fleet scripts and the other commands consume it.
"""
import contextlib
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .. import __version__
from ..errors import GitError, UsageError
from . import cache, gitinfo, host, mounts, repo, storage
from .scratch import scratch_dir
from .storage import StorageReport

SCHEMA_VERSION = 1
# How an allowance is shared: the storage latencies, the cache sample, the untracked walk.
STORAGE_SHARE, CACHE_SHARE, REPOSITORY_SHARE = 0.4, 0.3, 0.3
FLUSHING = "the file system was still writing back earlier writes"


@dataclass(frozen=True)
class ProbeReport:
    schema: int
    git_tune_version: str
    path: Optional[str]
    host: host.HostFacts
    repository: Optional[repo.RepoFacts]
    storage: Dict[str, StorageReport]   # "worktree" and "git_dir" (one when shared)
    same_file_system: Optional[bool]
    cache: Optional[cache.CacheFacts]
    git: gitinfo.GitFacts
    timings: Dict[str, float]
    notes: List[str]

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def primary_storage(self) -> Optional[StorageReport]:
        return self.storage.get("worktree") or self.storage.get("git_dir")

    @property
    def layout(self) -> Optional[repo.RepoLayout]:
        return self.repository.layout if self.repository else None


def _part(allowance: Optional[float], share: float) -> Optional[float]:
    return None if allowance is None else allowance * share


def _dev(path: str) -> int:
    st = os.stat(path)
    return st.st_dev


def _scratch_candidates(target: str, layout: Optional[repo.RepoLayout]) -> List[str]:
    """Where a scratch directory may go for measuring target's file system: the git
    directory first, never the working tree itself. Outside a repository the directory
    itself comes before its parent, which the user did not name."""
    if layout:
        first = [layout.git_dir, os.path.dirname(os.path.abspath(target))]
    else:
        first = [target]
    return first + [tempfile.gettempdir(), os.path.expanduser("~")]


class _Clock:
    def __init__(self) -> None:
        self.timings: Dict[str, float] = {}

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - t0, 4)


def _targets(path: str, layout: Optional[repo.RepoLayout]) -> Dict[str, str]:
    """The directories whose storage is probed: the worktree and the git dir, or path."""
    if not layout:
        return {"worktree": path}
    targets = {"worktree": layout.worktree} if layout.worktree else {}
    targets["git_dir"] = layout.git_dir
    return targets


def _storage_and_git(targets: Dict[str, str], same_fs: Optional[bool],
                     layout: Optional[repo.RepoLayout], sample: Optional[Sequence[str]],
                     thorough: bool, root: str, clock: _Clock, allowance: Optional[float],
                     flushing: bool = False) -> Tuple[Dict[str, StorageReport], gitinfo.GitFacts]:
    """Each file system's report (measured once when the worktree and git dir share it),
    and git's facts, with scratch directories on those file systems; none where the file
    system is still writing back earlier writes (`flushing`: every write and fsync there
    waits for that flush, and only lookups are timed)."""
    mount_table = mounts.read_mounts(root)
    storage_reports: Dict[str, StorageReport] = {}
    with contextlib.ExitStack() as stack:
        scratches: Dict[str, Optional[str]] = {}
        for role, target in targets.items():
            if flushing:
                scratches[role] = None
                continue
            if same_fs and role == "git_dir":
                scratches[role] = scratches["worktree"]
                continue
            scratches[role] = stack.enter_context(
                scratch_dir(_scratch_candidates(target, layout), same_fs_as=target))
        with clock.section("storage"):
            for role, target in targets.items():
                if same_fs and role == "git_dir":
                    storage_reports[role] = storage_reports["worktree"]
                    continue
                files = sample if (role == "worktree" and sample) else []
                storage_reports[role] = storage.probe_storage(
                    target, scratches[role], files, thorough, root, mount_table,
                    _part(allowance, STORAGE_SHARE / len(scratches)),
                    unwritten=FLUSHING if flushing else None)
        with clock.section("git"):
            git_facts = gitinfo.git_facts(layout, scratches.get("worktree"), thorough)
    return storage_reports, git_facts


_UNLOCATED = object()


def _locate(path: Optional[str], located: object, notes: List[str]) -> Optional[repo.RepoLayout]:
    """The repository at path (`located` where the caller found it already); a repository
    git refuses is a note: the probe reports what it can (exit 0)."""
    if located is not _UNLOCATED:
        assert located is None or isinstance(located, repo.RepoLayout)
        return located
    try:
        return repo.locate(path)
    except (OSError, UsageError, GitError) as e:
        notes.append(str(e))
        return None


def probe(path: Optional[str] = None, thorough: bool = False, root: str = "/",
          allowance: Optional[float] = None, flushing: bool = False,
          located: object = _UNLOCATED) -> ProbeReport:
    """Probe the host and the repository at path (default: the current directory's, if any).

    With `allowance` (seconds; calibrate gives a share of its budget), the timed parts
    size their samples to it: on slow storage the probe measures less, not for longer.
    `flushing`: the file system is still writing back earlier writes (settle.wait said
    so): nothing is written there, and only lookups are timed. `located`: the repository
    at path as repo.locate found it already (a RepoLayout, or None for none), so one
    command asks git once."""
    explicit = path is not None
    path = os.path.abspath(path or os.getcwd())
    if explicit and not os.path.exists(path):
        raise UsageError(f"--repo '{path}' does not exist")
    if explicit and not os.path.isdir(path):
        raise UsageError(f"--repo '{path}' is not a directory")
    clock = _Clock()
    notes: List[str] = []

    with clock.section("host"):
        host_facts = host.host_facts(root)
    with clock.section("locate"):
        layout = _locate(path if explicit else None, located, notes)
    if layout is None:
        notes.append(f"'{path}' is not inside a git repository: host and storage only")

    data = sample = None
    if layout:
        with clock.section("cache_residency"):
            data = cache.data_residency(layout.index_file, layout.common_dir)
        with clock.section("sample"):
            sample = repo.tracked_sample(layout)

    targets = _targets(path, layout)
    same_fs = None
    if len(targets) == 2:
        same_fs = _dev(targets["worktree"]) == _dev(targets["git_dir"])
    storage_reports, git_facts = _storage_and_git(targets, same_fs, layout, sample, thorough,
                                                  root, clock, allowance, flushing)
    if same_fs is False:
        notes.append("the working tree and the git directory are on different file systems")

    cache_facts = repo_facts = None
    if layout and data is not None:
        hot = storage_reports.get("worktree", storage_reports["git_dir"]).latency.get("lstat_hit")
        with clock.section("cache"):
            cache_facts = cache.cache_facts(data, layout.worktree, sample or [],
                                            hot["p50"] if hot else None,
                                            _part(allowance, CACHE_SHARE))
        with clock.section("repository"):
            repo_facts = repo.repo_facts(layout, _part(allowance, REPOSITORY_SHARE))
    return ProbeReport(SCHEMA_VERSION, __version__, path, host_facts, repo_facts,
                       storage_reports, same_fs, cache_facts, git_facts, clock.timings, notes)
