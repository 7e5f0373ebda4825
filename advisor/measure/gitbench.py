"""Timing real git under candidate settings, without touching the user's files.

Candidate settings reach git only through GIT_CONFIG_COUNT/KEY_n/VALUE_n;
nothing is written to any config file. Work that writes goes to a scratch
workspace on the repository's file system: copies of the index
(GIT_INDEX_FILE), and a --shared clone for checkout timings.
"""
import contextlib
import contextvars
import dataclasses
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import (IO, Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple,
                    TypeAlias, Union)

from ... import git
from ...errors import GitError
from . import budget as budget_plan, settle as write_back
from .sweep import MeasurementFailed
from ...probes import repo as repo_probe
from ...probes.layout import RepoLayout
from ...probes.scratch import remove_files

Settings = Dict[str, str]


class Runner(Protocol):
    """A timed git run under `settings`, its trace2 events to `trace_file` where named:
    its seconds."""
    def __call__(self, settings: Settings, trace_file: Optional[str] = None) -> float: ...


class NotTimed(Exception):
    """verify cannot time a workload here; the message says why (verify's note)."""

# At most this much of a command line goes to the batch checkout's next status's paths.
PATHSPEC_ARG_BYTES = 64 * 1024
WHOLE_STATUS = ("status", "--porcelain", "-uno")


_required: contextvars.ContextVar[Settings] = contextvars.ContextVar("required", default={})


@contextlib.contextmanager
def required(settings: Settings) -> Iterator[None]:
    """Within this block every git run also sees `settings` (a candidate's own win): what
    git needs to run here at all, such as core.preloadIndex=false under a pid limit
    that Git's default exceeds, so later trials are not failures of an earlier key."""
    token = _required.set(dict(settings))
    try:
        yield
    finally:
        _required.reset(token)


def config_env(settings: Settings, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment that makes git see `settings` (over what is required) as
    command-line config."""
    return git.with_config({**_required.get(), **settings}, base)


class DeadlineReached(MeasurementFailed):
    """A timed git run was stopped at the deadline (`deadline()`), not by a failure."""


_deadline: contextvars.ContextVar[Optional[float]] = contextvars.ContextVar("deadline",
                                                                            default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Within this block every git run is killed `seconds` from now at the latest (its
    scratch files with it): a single run on slow storage cannot overrun the budget."""
    token = _deadline.set(budget_plan.now() + max(0.0, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


# A git run's time limit where no deadline() says otherwise.
RUN_TIMEOUT = 600


def time_left() -> float:
    """Seconds a git run may take from now: to the deadline, else RUN_TIMEOUT.
    DeadlineReached where the deadline has passed."""
    end = _deadline.get()
    if end is None:
        return RUN_TIMEOUT
    left = end - budget_plan.now()
    if left <= 0:
        raise DeadlineReached("the deadline came before the run")
    return left


def run_git(args: List[str], cwd: str, env: Dict[str, str], timeout: Optional[float] = None,
            hooks: bool = True, input: Optional[str] = None,
            output: Union[bool, IO[str]] = False, repo: Optional[RepoLayout] = None,
            ok: Tuple[int, ...] = (0,)) -> "subprocess.CompletedProcess[str]":
    """A git run that is part of a measurement (hooks=True: what git would run, runs) or
    git-tune's own bookkeeping (hooks=False: the repository's hooks are not run; only
    bookkeeping reads its output). Any failure is MeasurementFailed; a run stopped at
    the deadline, DeadlineReached. repo: the user's repository, named explicitly (a run
    in its work tree on an index copy); ok: the exit codes that are not a failure.
    timeout: at most that long, deadline or not; without one, until the deadline, or
    RUN_TIMEOUT where there is none (a benchmark's whole-tree write of 100,000 files on
    NFS-like storage outlasts RUN_TIMEOUT, and says how long it may take by a deadline)."""
    end = _deadline.get()
    left = None if end is None else max(0.001, end - budget_plan.now())
    cap = timeout if timeout is not None else (RUN_TIMEOUT if left is None else left)
    limit = cap if left is None else min(cap, left)
    try:
        proc = git.run(args, cwd=cwd, env=env, timeout=limit, hooks=hooks, input=input,
                       stdout=output, repo=repo)
    except GitError as e:
        if end is not None and limit == left and budget_plan.now() >= end:
            raise DeadlineReached(str(e)) from None
        raise MeasurementFailed(str(e)) from None
    if proc.returncode not in ok:
        raise MeasurementFailed(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[:300]}")
    return proc


def git_lines(args: List[str], repo: RepoLayout, scratch: Optional[str] = None
              ) -> Iterator[str]:
    """The lines of bookkeeping `git ARGS` in `repo` (run_git with hooks=False, Git's
    defaults), read one by one from an anonymous file in `scratch` (the system's
    temporary directory where None), never held whole: git-tune's own memory counts
    against a container's limit with git's, and a listing of every object in a large
    history runs to tens of MiB."""
    with tempfile.TemporaryFile("w+", dir=scratch, errors="surrogateescape") as out:
        run_git(args, repo.top, config_env({}), hooks=False, output=out, repo=repo)
        out.seek(0)
        for line in out:
            yield line.rstrip("\n")


_after_run: contextvars.ContextVar[Optional[Callable[[], None]]] = contextvars.ContextVar(
    "after_run", default=None)


@contextlib.contextmanager
def after_each_run(hook: Callable[[], None]) -> Iterator[None]:
    """Within this block `hook` is called after every timed git run (a progress bar
    that moves with the runs, not only between keys)."""
    token = _after_run.set(hook)
    try:
        yield
    finally:
        _after_run.reset(token)


def attempt(run: Callable[[], float]) -> Tuple[Optional[str], Optional[float]]:
    """(None, the run's own seconds) when the git run worked, else (git's error, None)
    (the deadline is not a failure)."""
    try:
        return None, run()
    except DeadlineReached:
        raise
    except MeasurementFailed as e:
        return str(e), None


def timed_git(args: List[str], cwd: str, settings: Settings,
              extra_env: Optional[Dict[str, str]] = None,
              trace_file: Optional[str] = None, repo: Optional[RepoLayout] = None,
              ok: Tuple[int, ...] = (0,)) -> float:
    env = config_env(settings)
    if extra_env:
        env.update(extra_env)
    if trace_file:
        env["GIT_TRACE2_EVENT"] = trace_file
        env["GIT_TRACE2_EVENT_NESTING"] = "10"
    t0 = time.perf_counter()
    run_git(args, cwd, env, repo=repo, ok=ok)
    took = time.perf_counter() - t0
    ran()
    return took


def ran() -> None:
    """A timed git run has ended: after_each_run's hook (the budget's tick, a progress
    bar) is called. Runners that start git themselves call it too."""
    hook = _after_run.get()
    if hook:
        hook()


def trace_phases(trace_file: str) -> Dict[str, float]:
    """Seconds per trace2 region (category/label, summed), counts of child processes, and
    git's own counts (`data` events, summed: data/CATEGORY/KEY)."""
    phases: Dict[str, float] = {}
    try:
        with open(trace_file, encoding="utf-8", errors="surrogateescape") as f:   # raw paths
            lines = f.readlines()
    except OSError:
        return phases
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "region_leave" and "t_rel" in ev:
            key = f"{ev.get('category')}/{ev.get('label')}"
            phases[key] = phases.get(key, 0.0) + float(ev["t_rel"])
        elif ev.get("event") == "child_start":
            argv = ev.get("argv") or []
            key = "children/" + (" ".join(argv[:2]) if argv else "?")
            phases[key] = phases.get(key, 0) + 1
        elif ev.get("event") == "data":
            # git's counts (index read/cache_nr, refresh/sum_scan...), given as strings
            try:
                value = int(ev.get("value"))
            except (TypeError, ValueError):
                continue
            key = f"data/{ev.get('category')}/{ev.get('key')}"
            phases[key] = phases.get(key, 0) + value
    return phases


@dataclass(frozen=True)
class IndexShape:
    """How an index copy is written: `git update-index` options and the config in force
    (each key module says what its value needs, keys/registry.py index_shape)."""

    args: Tuple[str, ...] = ()
    settings: Tuple[Tuple[str, str], ...] = ()

    def __add__(self, other: "IndexShape") -> "IndexShape":
        return IndexShape(self.args + other.args, tuple(sorted(self.settings + other.settings)))


@dataclass
class Workspace:
    """Scratch copies of what timed git runs may write, on the repository's file system
    (`root`); index copies git only reads may go to `local` (a scratch directory on the
    host's own storage, where there is one)."""

    layout: RepoLayout
    root: str
    local: Optional[str] = None
    _clone: Optional[str] = None
    _copies: Dict[Tuple[str, "IndexShape", Optional[str]], str] = field(default_factory=dict)
    _parts: Dict[int, "Part"] = field(default_factory=dict)
    _samples: Dict[int, "Sample"] = field(default_factory=dict)
    _listed: Optional[List[str]] = None      # the user's index's records, listed once
    _sizes: Dict[str, int] = field(default_factory=dict)  # and its regular files' sizes
    _per_directory: Optional[float] = None   # files_a_directory of them, once
    _all_marked: Optional["Sample"] = None   # fresh samples' index, every entry marked
    _frame: Optional[List[str]] = None       # fresh_frame, once chosen
    fresh_seconds: Optional[float] = None    # what the last fresh sample took to make
    _part_git: Optional[Dict[str, bytes]] = None   # an empty part's git directory's files

    def index_copy(self, name: str, shape: Optional["IndexShape"] = None,
                   part: Optional["Part"] = None) -> str:
        """A copy of the user's index (of the part's, with `part`), rewritten by `git
        update-index` with the shape's options and config (made once per name, shape
        and part: sweeps and A/B runs share them)."""
        shape = shape or IndexShape()
        key = (name, shape, part.worktree if part else None)
        if key in self._copies:
            return self._copies[key]
        if part:
            source, where, repo = part.index_file, part.worktree, None
            path = os.path.join(part.git_dir, f"index.{name}")
        else:
            source, where, repo = self.layout.index_file, self.layout.top, self.layout
            path = os.path.join(self.root, f"index.{name}")
        _copy_index(source, path)
        run_git(["update-index", "--force-write-index", *shape.args], where,
                dict(config_env(dict(shape.settings)), GIT_INDEX_FILE=path), hooks=False,
                repo=repo)
        self._copies[key] = path
        return path

    def listed(self) -> List[str]:
        """The user's index's `git ls-files -s` records, listed once per calibration with
        the sizes it records (recorded_sizes): git-tune never writes the user's index, so
        the listing holds for every part and sample, and a sample's sizes need no lstat
        on the storage. Skip-worktree entries are left out: in a partial clone their
        blobs are not there to write (repo_probe.in_worktree)."""
        if self._listed is None:
            out = run_git(["ls-files", "-s", "-t", "-z", "--debug"], self.layout.top,
                          config_env({}), hooks=False, output=True, repo=self.layout).stdout
            out, self._sizes = repo_probe.listing_with_sizes(out)
            self._listed = repo_probe.in_worktree(out)
        return self._listed

    def recorded_sizes(self) -> Dict[str, int]:
        """The sizes the user's index records for its regular files (listed()), by path;
        0 where it records none."""
        self.listed()
        return self._sizes

    def part(self, n: int) -> "Part":
        """A part repository of n entries (made once per n; its files are absent until
        a workload writes them). The user's index is listed once (`ls-files -s`, no
        lstat): the one step whose cost grows with the repository, in memory."""
        if n in self._parts:
            return self._parts[n]
        if self._per_directory is None:
            self._per_directory = files_a_directory(self.listed())
        records = sample_entries(self.listed(), n, part_runs(n, self._per_directory))
        dest = os.path.join(self.root, f"part-{len(records)}")
        for made in self._parts.values():
            if made.worktree == dest:   # n beyond the regular files: the part of them all
                self._parts[n] = made
                return made
        # Where there is a local scratch (the repository on network storage), the part's
        # git directory is there and its work tree names it in a `.git` file: git's start
        # and the index it reads and writes are common mode, the same in both arms of a
        # comparison, and on storage where a lookup is a round trip they cost each run
        # more than its files do. Only the files written and their directories, what the
        # keys change, stay on the user's storage.
        git_dir = (os.path.join(self.local, f"part-{len(records)}.git") if self.local
                   else os.path.join(dest, ".git"))
        try:
            if self._part_git is None:
                template = os.path.join(self.local or self.root, "part-template")
                _part_repo(self.layout, template)
                self._part_git = _files_below(os.path.join(template, ".git"))
            # The first part's git directory, written again: `git init` probes the file
            # system (links, case, the executable bit) at every part. Each file is made relative to its
            # directory, so no path is looked up from the root again.
            _write_below(git_dir, self._part_git)
            if self.local:
                os.makedirs(dest)
                with open(os.path.join(dest, ".git"), "wb") as f:
                    f.write(b"gitdir: " + os.fsencode(git_dir) + b"\n")
            _part_index(dest, records)
            _part_directories(dest, records)
        except DeadlineReached:
            _remove_part(dest, git_dir)
            raise                   # the budget's end, not a part that cannot be made
        except (MeasurementFailed, OSError) as e:
            _remove_part(dest, git_dir)
            raise MeasurementFailed(f"cannot make a part repository: {e}") from None
        part = Part(dest, tuple(r.split("\t", 1)[1] for r in records), len(self.listed()),
                    git_dir)
        self._parts[n] = part
        return part

    def sample(self, n: int) -> "Sample":
        """A copy of the user's index in which every entry but a sample of n regular files
        (sample_entries) is marked skip-worktree, its stat data refreshed once, as the
        status before a timed one would have written them (git diff-files writes no
        index: a racily clean entry would be read again on every run). Made once per n."""
        if n not in self._samples:
            self._samples[n] = self._sample_index(sample_entries(self.listed(), n),
                                                  f"index.sample-{n}", refresh=True)
        return self._samples[n]

    def fresh_frame(self) -> Optional[List[str]]:
        """The records fresh samples are drawn from and their index holds, where the
        regular files are more than PRELOAD_FULL_ENTRIES: that many of them
        (sample_entries); None where the whole index is their frame (chosen once).
        Git's preload starts as many threads for an index of that size as for any
        larger one, and each thread's slice holds the sample's entries as the whole
        index's would; what grows with the repository is the index read and written
        around the lstats, on both sides alike."""
        if self._frame is None:
            plain = _plain(self.listed())
            # [] where there is no frame: the whole index is the samples' own.
            self._frame = sample_entries(plain, PRELOAD_FULL_ENTRIES) \
                if len(plain) > PRELOAD_FULL_ENTRIES else []
        return self._frame or None

    def fresh_sample(self, n: int, which: int) -> "Sample":
        """The which-th of disjoint samples of n entries of fresh_frame (sample_entries),
        its stat data as the user's index has them: nothing meets its files before a
        timed run does. Made from a copy of the frame in which every entry is marked
        (made once), its sample's marks cleared. The caller removes its index file."""
        frame = self.fresh_frame()
        records = sample_entries(frame or self.listed(), n, which=which)
        if self._all_marked is None:
            self._all_marked = self._sample_index((), "index.all-marked", refresh=False,
                                                  where=self.local, frame=frame)
        path = os.path.join(self.local or self.root, f"index.sample-{n}-{which}")
        started = budget_plan.now()
        _copy_index(self._all_marked.index_file, path)
        run_git(["update-index", "-z", "--no-skip-worktree", "--stdin"], self.layout.top,
                dict(config_env(SAMPLE_CONFIG), GIT_INDEX_FILE=path), hooks=False,
                repo=self.layout, input="".join(r.split("\t", 1)[1] + "\0" for r in records))
        self.fresh_seconds = budget_plan.now() - started
        return Sample(path, tuple(r.split("\t", 1)[1] for r in records),
                      self._all_marked.entries)

    def _sample_index(self, records: Sequence[str], name: str, refresh: bool,
                      where: Optional[str] = None,
                      frame: Optional[Sequence[str]] = None) -> "Sample":
        """The user's index copied to `name` in scratch (`where`, else root), every entry
        but `records` marked skip-worktree by `git update-index` (no file of the work tree
        is written; only the records' are looked at, by the refresh). With `frame`, the
        copy holds the frame's records only (the rest removed from it, not from the
        work tree)."""
        path = os.path.join(where or self.root, name)
        keep = {r.split("\t", 1)[1] for r in records}
        # An unmerged path has no stage-0 entry to mark (update-index dies on it); no
        # preload thread lstat-s it either way. (Made once per sample size, and once for
        # fresh samples' all-marked copy: fresh_sample only clears its own marks.)
        held = self.listed() if frame is None else frame
        others = [r.split("\t", 1)[1] for r in held
                  if r.split("\t", 1)[0].endswith(" 0") and r.split("\t", 1)[1] not in keep]
        _copy_index(self.layout.index_file, path)
        env = dict(config_env(SAMPLE_CONFIG), GIT_INDEX_FILE=path)
        if frame is not None:
            framed = {r.split("\t", 1)[1] for r in frame}
            gone = dict.fromkeys(r.split("\t", 1)[1] for r in self.listed()
                                 if r.split("\t", 1)[1] not in framed)
            # Last first: git moves every entry after a removed one down (read-cache.c,
            # remove_index_entry_at); at 100,000 entries 0.35 s in index order, 0.085 s so.
            run_git(["update-index", "-z", "--force-remove", "--stdin"], self.layout.top,
                    env, hooks=False, repo=self.layout,
                    input="".join(p + "\0" for p in reversed(list(gone))))
        run_git(["update-index", "-z", "--skip-worktree", "--stdin"], self.layout.top,
                env, hooks=False, repo=self.layout, input="".join(p + "\0" for p in others))
        if refresh:
            run_git(["update-index", "-q", "--refresh"], self.layout.top, env,
                    hooks=False, repo=self.layout, ok=(0, 1))
        return Sample(path, tuple(r.split("\t", 1)[1] for r in records), len(held))

    @property
    def parts(self) -> Tuple["Part", ...]:
        """The part repositories made so far."""
        return tuple({p.worktree: p for p in self._parts.values()}.values())

    def clone(self) -> str:
        """A --shared, no-checkout clone whose index is a copy of the user's (HEAD and what
        is staged) but whose files are absent. The copy keeps the index's cache-tree,
        without which every status there walks HEAD's trees again; `git read-tree HEAD`,
        which reads every tree, is left for an index git cannot use as a copy (a split index's
        shared part stays behind) or whose entries a checkout cannot simply write
        (unmerged). A sparse checkout's skip-worktree entries stay skipped, as in the
        user's checkouts."""
        if self._clone:
            return self._clone
        dest = os.path.join(self.root, "clone")
        env = config_env({})
        try:
            run_git(["clone", "-q", "--shared", "--no-checkout", clone_source(self.layout), dest],
                    self.root, env, hooks=False)
            without_filters(dest)
            index = os.path.join(dest, ".git", "index")
            _copy_index(self.layout.index_file, index)
            if not _only_plain_entries(dest, env):
                os.unlink(index)
                run_git(["read-tree", "HEAD"], dest, env, hooks=False)
        except MeasurementFailed:
            shutil.rmtree(dest, ignore_errors=True)   # stopped half way: the next try starts clean
            raise
        self._clone = dest
        return dest


def _remove_part(worktree: str, git_dir: str) -> None:
    """A part stopped half way removed, its git directory wherever it is."""
    shutil.rmtree(worktree, ignore_errors=True)
    shutil.rmtree(git_dir, ignore_errors=True)


def _copy_index(source: str, path: str) -> None:
    try:
        shutil.copyfile(source, path)
    except OSError as e:     # a full or read-only file system: no copy, no timing
        raise MeasurementFailed(f"cannot copy the index into scratch: "
                                f"{e.strerror or e}") from None


# In git-tune's scratch clones no file goes through a filter driver: a user's or a
# repository's `filter.<name>.smudge/process` (Git LFS fetching objects over the network
# on every calibration, any command at all) runs where the user checks out, not where
# git-tune times a checkout. info/attributes outranks every .gitattributes. What the
# checkout writes is then the blob as stored (an LFS pointer, not the object).
NO_FILTERS = "* -filter\n"


def git_dir_of(worktree: str) -> str:
    """The git directory of a scratch work tree: its `.git`, or the one a `.git` file
    there names (a part whose git directory is local, Workspace.part)."""
    dot_git = os.path.join(worktree, ".git")
    try:
        with open(dot_git, "rb") as f:
            named = f.read().strip()
    except (IsADirectoryError, FileNotFoundError):
        return dot_git
    return os.fsdecode(named[len(b"gitdir: "):]) if named.startswith(b"gitdir: ") else dot_git


def _unlock_scratch(git_dir: str) -> None:
    """The index lock a run stopped at its deadline was killed holding, removed: in a
    scratch clone's or part's git directory, git-tune's own, which only its runs write."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(git_dir, "index.lock"))


@dataclass(frozen=True)
class FilesWritten:
    """Every file of a part present, the part's index's stat data with them, since `at`
    (time.time() once the write had ended: the racy wait counts from it); writing them
    with Git's defaults takes `seconds`."""
    at: float
    seconds: float
    settled: bool = False   # the index's stat data refreshed since (Part.settle_index)
    # The index's mtime as the write left it, on the file system's clock (git writes the
    # index after the files: no file is newer). None: not read.
    index_mtime: Optional[float] = None

    @classmethod
    def now(cls, index_file: str, seconds: float) -> "FilesWritten":
        """A write that has just ended, with its index's mtime."""
        at = time.time()
        try:
            mtime: Optional[float] = os.stat(index_file).st_mtime
        except OSError:
            mtime = None
        return cls(at, seconds, index_mtime=mtime)

    def ready_at(self) -> float:
        """When (time.time()) an index written is a later second than every file, on the
        file system's clock: what is left of the index's second when the write ended
        (git's racy check is to the second: is_racy_stat without USE_NSEC), else
        RACY_SECONDS after it. The clocks' offset is taken as the index's mtime less
        `at`, which is at most the real one (the index was written before `at`): the
        wait is never short, and no longer than the racy second needs."""
        if self.index_mtime is None:
            return self.at + RACY_SECONDS
        return self.at + min(RACY_SECONDS, 1 - self.index_mtime % 1 + CLOCK_TICK)


@dataclass(eq=False)
class Part:
    """A scratch repository holding a part of the user's tree: its index holds
    `paths` (runs of consecutive entries of the user's index, spread over all of it),
    its objects are the user's (alternates). What git does there (write the files, a
    whole status, refresh the index) is proportional to the part, whatever the size of
    the repository it stands for."""

    worktree: str
    paths: Tuple[str, ...]
    entries: int            # the user's index's entries, of which these are a part
    git_dir: str            # worktree/.git, or a local one its `.git` file names
    # The last write that left every file there (write_files, or a workload's run that
    # wrote them all: PartWrite); None while some may be missing.
    files: Optional[FilesWritten] = field(default=None, repr=False)

    @property
    def index_file(self) -> str:
        return os.path.join(self.git_dir, "index")

    @property
    def top(self) -> str:
        """Where git runs for the part, as RepoLayout.top is for the user's repository."""
        return self.worktree

    def write_files(self) -> FilesWritten:
        """Every file of the part written (again, whatever a checkout trial left), the
        index's stat data with them."""
        _unlock_scratch(self.git_dir)
        started = budget_plan.now()
        run_git(["checkout-index", "--all", "--force", "--quiet", "-u"], self.worktree,
                config_env({}), hooks=False)
        self.files = FilesWritten.now(self.index_file, budget_plan.now() - started)
        return self.files

    def present_files(self) -> FilesWritten:
        """The part's files as the last workload there left them, where it wrote them all
        and its write with Git's defaults is known (a checkout trial's runs on this very
        part), else written now. Files already written have been ageing since, so the
        racy wait after them is shorter or none."""
        if self.files is None:
            return self.write_files()
        return self.files

    def settle_index(self) -> None:
        """The index's stat data refreshed once an index written is a later second than
        the part's files (present_files, FilesWritten.ready_at): no entry is then racily
        clean, and a status there does what one does in a work tree checked out a while
        ago (lstat every entry, read its directories), not a re-read of every file.
        Once per write."""
        files = self.present_files()
        if files.settled:
            return
        wait = files.ready_at() - time.time()
        end = _deadline.get()
        if end is not None and budget_plan.now() + max(0.0, wait) > end:
            raise DeadlineReached("the deadline comes before the part's files are a second old")
        if wait > 0:
            time.sleep(wait)
        run_git(["update-index", "-q", "--refresh"], self.worktree, config_env({}),
                hooks=False)
        self.files = dataclasses.replace(files, settled=True)

    def written(self) -> None:
        """Every file of the part written now, then settle_index."""
        self.write_files()
        self.settle_index()


# Git's preload starts its most threads (MAX_PARALLEL, 20) for an index of this many
# entries (THREAD_COST, 500 a thread: preload-index.c), and the same for any larger one.
PRELOAD_FULL_ENTRIES = 20 * 500

# What a sample index is written and read with: its own file, whole (a split index's
# shared part is not written beside the user's), and its skip-worktree marks kept (with
# sparse checkout on, git would clear them from every file present, lstat-ing them all).
SAMPLE_CONFIG = {"core.splitIndex": "false", "core.sparseCheckout": "false"}
# A sample is this many runs of consecutive entries: two in each of the 20 slices
# preload-index.c gives its threads at most, and directories met as the whole tree's are.
SAMPLE_RUNS = 40


@dataclass(frozen=True)
class Sample:
    """An index copy in which only `paths` (of the user's `entries`) are not marked
    skip-worktree. Git reads it whole and starts the preload threads the whole index's
    size calls for (preload-index.c: cache_nr / 500, at most 20), but they lstat the
    sample alone, and so does the compare after them: a command that reads the index
    with preload (`git diff-files`) does the lstat work of a status on the sample's
    entries, in the user's work tree, which it only reads."""

    index_file: str
    paths: Tuple[str, ...]
    entries: int


def files_diff(repo: RepoLayout, sample: Sample) -> Runner:
    """A timed runner of `git diff-files` on the sample (its entries' stat data against
    the work tree, after the index is read with preload as status reads it); what the
    sample copy needs is in its settings (SAMPLE_CONFIG)."""
    run = on_copy(["diff-files", "--name-only"], repo, sample.index_file)
    def diff(settings: Settings, trace_file: Optional[str] = None) -> float:
        return run({**SAMPLE_CONFIG, **settings}, trace_file)
    return diff


def fresh_files_diff(ws: Workspace, n: int) -> Runner:
    """files_diff, each run on a sample of n entries of its own (Workspace.fresh_sample,
    made before the timer starts and removed after): every run meets its entries as a
    whole status meets them, not from the cache the run before it filled. Behind an
    attribute cache that expires by time (NFS acregmin, FUSE attr_timeout) a sample
    timed over and over is served from the cache, while a whole status outlasts it."""
    made = itertools.count()

    def run(settings: Settings, trace_file: Optional[str] = None) -> float:
        sample = ws.fresh_sample(n, next(made))
        try:
            return files_diff(ws.layout, sample)(settings, trace_file)
        finally:
            os.unlink(sample.index_file)
    return run


# A part's files are this many seconds old before its index is refreshed (Part.written),
# where the index's mtime is not known (FilesWritten.ready_at): git's racy check is to
# the second, and file times come from a coarse clock (ktime_get_coarse: a tick late,
# CLOCK_TICK at most).
RACY_SECONDS = 1.05
CLOCK_TICK = 0.02

# Runs of consecutive entries keep a part's directory locality like the whole tree's:
# git's checkout checks each new directory's leading directories and reads its
# .gitattributes once, then each file in it costs a lookup of its own. Files spread one
# by one each sit in a directory of their own and each pays a directory's lookups,
# which a part's files would then pay more often than the tree's. So a part has at most
# PART_RUNS runs, and no more than make each hold the tree's files a directory (part_runs).
PART_RUNS = 16


def _plain(listed: Sequence[str]) -> List[str]:
    """The regular files' records (stage 0) of a `git ls-files -s -z` listing."""
    return [r for r in listed if r[:6] in ("100644", "100755")
            and r.split("\t", 1)[0].endswith(" 0")]


def files_a_directory(listed: Sequence[str]) -> float:
    """The regular files (stage 0) a directory of the listed tree holds, on average."""
    paths = [r.split("\t", 1)[1] for r in _plain(listed)]
    return len(paths) / max(1, len({os.path.dirname(p) for p in paths}))


def part_runs(n: int, per_directory: float) -> int:
    """The runs of consecutive entries a part of n entries is made of: PART_RUNS, or
    fewer where that many would give a run fewer entries than the tree's
    `per_directory` files a directory (files_a_directory)."""
    return max(1, min(PART_RUNS, round(n / per_directory)))


def sample_entries(listed: Sequence[str], n: int, runs: Optional[int] = None,
                   which: int = 0) -> List[str]:
    """n of the records `listed` (regular files, stage 0) as `runs` (SAMPLE_RUNS) runs of
    consecutive entries, the entries between them spread evenly (each run starts where
    an even spread of `runs` points would put it), each `which` run-lengths further on:
    the which-th of disjoint samples, until they wrap round. No record twice, whatever n.
    Parts (PART_RUNS) and samples are both made of these."""
    plain = _plain(listed)
    if n >= len(plain):
        return plain
    runs = max(1, min(runs or SAMPLE_RUNS, n))
    length, extra = divmod(n, runs)
    gap = len(plain) - n
    # A shift of at most the narrowest gap keeps every run short of the next one's start.
    turns = 1 + (gap // runs) // (length + 1)
    shift = (which % turns) * (length + 1)
    out: List[str] = []
    before = 0          # entries in the runs before this one
    for k in range(runs):
        size = length + (k < extra)
        at = before + gap * k // runs + shift
        out += plain[at:at + size]
        before += size
    return out


def _part_repo(layout: RepoLayout, dest: str) -> None:
    """git init (no templates) with the user's objects as alternates, filter drivers off
    (without_filters), and an empty index: the git directory every part is a copy of.
    HEAD stays unborn: a commit of the part needs its trees written as loose objects,
    which on slow storage costs more than a timed run; what a trial times there (the files written, the next status's refresh of
    every entry) does not read HEAD's trees (the index's cache-tree answers the diff
    against HEAD in a real work tree, an unborn HEAD in the part)."""
    env = config_env({})
    run_git(["init", "-q", "--template=", f"--object-format={layout.object_format}", dest],
            os.path.dirname(dest), env, hooks=False)
    info = os.path.join(dest, ".git", "objects", "info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "alternates"), "wb") as f:
        f.write(os.fsencode(os.path.join(layout.common_dir, "objects")) + b"\n")
    without_filters(dest)


def _files_below(top: str) -> Dict[str, bytes]:
    """Every regular file below top, by its path relative to top (directories as
    their path with a trailing slash, empty ones included)."""
    out: Dict[str, bytes] = {}
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, top)
        if rel != ".":
            out[rel + "/"] = b""
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.normpath(os.path.join(rel, f))] = fh.read()
    return out


@contextlib.contextmanager
def _directories_below(top: str) -> Iterator[Callable[[str], int]]:
    """A function giving the descriptor of a directory below `top` (a path relative to
    it, "" for top itself), each directory on the way made where missing and opened
    relative to its parent's descriptor, without following a symlink. Only the
    directories on the path last asked for stay open, so the descriptors held never
    exceed its depth. Where the storage caches no entries, a path named from `top`
    would be looked up again a component at a time for every directory below it."""
    root = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    path: List[Tuple[str, int]] = []      # the directories open now, outermost first

    def opened(rel: str) -> int:
        parts = rel.split("/") if rel else []
        keep = 0
        while keep < min(len(path), len(parts)) and path[keep][0] == parts[keep]:
            keep += 1
        while len(path) > keep:
            os.close(path.pop()[1])
        for name in parts[keep:]:
            at = path[-1][1] if path else root
            try:
                os.mkdir(name, dir_fd=at)
            except FileExistsError:
                pass
            path.append((name, os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                       dir_fd=at)))
        return path[-1][1] if path else root

    try:
        yield opened
    finally:
        for _, fd in path:
            os.close(fd)
        os.close(root)


def _write_below(top: str, files: Dict[str, bytes]) -> None:
    """Make top and the files of _files_below() beneath it, each created relative to
    its directory's descriptor (_directories_below)."""
    os.makedirs(top)
    with _directories_below(top) as opened:
        for rel, data in files.items():
            if rel.endswith("/"):
                opened(rel.rstrip("/"))
                continue
            parent, name = os.path.split(rel)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666,
                         dir_fd=opened(parent))
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


def _part_directories(dest: str, records: Sequence[str]) -> None:
    """Every directory the part's files go in, made once: each run removes the files and
    leaves the directories (as a user's checkouts after the clone's find them), so the
    first run, a pilot that prices the others, finds them too and prices what they
    pay, not the directories' making. They are made in sorted order, each relative to
    its parent (_directories_below)."""
    with _directories_below(dest) as opened:
        for d in sorted({os.path.dirname(r.split("\t", 1)[1]) for r in records} - {""}):
            opened(d)


def _part_index(dest: str, records: Sequence[str]) -> None:
    """The records (`git ls-files -s -z` lines of the user's index) as the part's index."""
    run_git(["update-index", "-z", "--index-info"], dest, config_env({}), hooks=False,
            input="".join(r + "\0" for r in records))


def without_filters(clone: str) -> None:
    """Switch filter drivers off in the scratch clone `clone` (a work tree)."""
    info = os.path.join(clone, ".git", "info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "attributes"), "w") as f:
        f.write(NO_FILTERS)


def clone_source(layout: RepoLayout) -> str:
    """What `git clone` is given to clone the user's repository: its work tree where git
    finds the repository from there (HEAD of a linked worktree is that worktree's), else
    the git directory (a work tree set apart by GIT_WORK_TREE, as dotfile setups do)."""
    if layout.worktree and os.path.exists(os.path.join(layout.worktree, ".git")):
        return layout.worktree
    return layout.git_dir


def _only_plain_entries(worktree: str, env: Dict[str, str]) -> bool:
    """Whether git reads the index there and every entry is an ordinary cached file or a
    sparse checkout's skip-worktree one (`git ls-files -t` tags them "H" and "S"): the
    timed writes name only the first (repo_probe.in_worktree), and `checkout-index
    --all` passes the second by, as the user's checkouts do. `read-tree HEAD` instead
    would make every entry one to write, whose blobs a partial clone does not have."""
    try:
        listed = run_git(["ls-files", "-t", "-z"], worktree, env, hooks=False, output=True)
    except DeadlineReached:
        raise
    except MeasurementFailed:
        return False
    return all(e[:2] in ("H ", "S ") for e in listed.stdout.split("\0") if e)


class CheckoutWorkload:
    """Restore K missing files with `git checkout -- <paths>` (seed 001's threshold study),
    then the next `git status -uno` of those paths, timed together: files written within
    the index's last second are racily clean, so that status re-reads their contents, and
    workers that finish sooner can leave it more to re-read. The rest of the tree costs
    the next status the same on both sides of an A/B, so its pathspec is the batch
    (status refreshes only what its pathspec names)."""

    def __init__(self, clone: str, paths: Sequence[str], scratch: str,
                 git_dir: Optional[str] = None) -> None:
        self.clone = clone
        self.git_dir = git_dir or git_dir_of(clone)
        self.paths = list(paths)
        self.list_file = os.path.join(scratch, f"pathspec.{len(self.paths)}")
        with open(self.list_file, "wb") as f:
            # The bytes git listed: a name that is not UTF-8 round-trips (surrogateescape).
            f.write(b"\0".join(os.fsencode(p) for p in self.paths))

    def _remove(self) -> None:
        _unlock_scratch(self.git_dir)
        remove_files([os.path.join(self.clone, p) for p in self.paths])

    def _next_status(self) -> List[str]:
        # `git status` has no --pathspec-from-file; a batch too long for one command
        # line is followed by the whole status (the same on both sides, only diluted).
        if sum(len(p) + 1 for p in self.paths) > PATHSPEC_ARG_BYTES:
            return list(WHOLE_STATUS)
        return [*WHOLE_STATUS, "--", *self.paths]

    def _write(self) -> List[str]:
        return ["checkout", f"--pathspec-from-file={self.list_file}", "--pathspec-file-nul"]

    last_status: Optional[float] = None    # the last run's next status, seconds
    # The last run's seconds on the budget's clock, its untimed removal included: what a
    # run costs the budget, which a ladder is sized by.
    last_wall: Optional[float] = None

    def _written(self, settings: Settings, trace_file: Optional[str],
                 settle: Optional[Callable[[], object]]) -> float:
        """The files removed (untimed), `settle` called, then the timed write's seconds."""
        self._remove()
        if settle:
            settle()
        return timed_git(self._write(), self.clone, settings, trace_file=trace_file)

    def run(self, settings: Settings, trace_file: Optional[str] = None,
            settle: Optional[Callable[[], object]] = None) -> float:
        """The files removed, then written and the next status, timed. `settle`: called,
        untimed, in between (a benchmark's sync: on a slow disk, a sync before the removal
        left the removal's own write-back to the timed write)."""
        started = budget_plan.now()
        write = self._written(settings, trace_file, settle)
        self.last_status = timed_git(self._next_status(), self.clone, settings,
                                     {"GIT_LITERAL_PATHSPECS": "1"})
        self.last_wall = budget_plan.now() - started
        return write + self.last_status


class TreeWrite(CheckoutWorkload):
    """What a clone or a CI checkout lives with: the files written in one burst, then the
    next whole `git status -uno`."""

    def _next_status(self) -> List[str]:
        return list(WHOLE_STATUS)


class WholeTreeWrite(TreeWrite):
    """Every file of the index written, with no pathspec: git matches each entry against
    every pathspec item, which for the whole tree is entries squared. `-u` keeps the index's stat data current, as a clone's checkout does, so the next
    status re-reads only what was written racily."""

    def _write(self) -> List[str]:
        return ["checkout-index", "--all", "--quiet", "-u"]

    def make_directories(self) -> None:
        """Every directory of the tree made, untimed, by git writing one file of each
        (`checkout-index --stdin`: no pathspec, and git's own checks of the paths). A
        fresh clone's first write makes every directory; the runs after it find them
        (the removal between runs leaves them), so a first run taken as a pilot would
        price the runs too high."""
        one_per_directory = {os.path.dirname(p): p for p in self.paths}
        one_per_directory.pop("", None)
        if one_per_directory:
            run_git(["checkout-index", "--force", "--quiet", "-z", "--stdin"], self.clone,
                    config_env({}), hooks=False,
                    input="".join(p + "\0" for p in one_per_directory.values()))


class PartWrite(WholeTreeWrite):
    """Every file of a part written and the write-back that left behind, timed together;
    then, where `with_status`, the part's whole status, run and kept apart (last_status).

    The write is what worker counts change. The status after it is common mode but for
    one thing: files written within the index's last second are racily clean and read
    again, and a faster write leaves more of them. That is a fixed cost of a burst, not
    a cost a file, so a trial weighs it once against the write's gain (checkout.chosen)
    instead of adding the part's status, a share of which grows with the part and not
    with the tree, to every run.

    The write-back is timed with the write: a part stands for a burst many times its
    size, whose write-back grows with it while the cache that absorbs it does not, so a
    part left to the cache would hide what slow storage charges the tree (docs/planner.md,
    "Figures behind gitbench")."""

    last_write_back: Optional[float] = None    # the last run's write-back, seconds
    with_status: bool = True                   # run the part's status after the write

    def __init__(self, clone: str, paths: Sequence[str], scratch: str,
                 part: Optional[Part] = None) -> None:
        # A part knows its git directory: its `.git` file is not read again on the storage.
        super().__init__(clone, paths, scratch, part.git_dir if part else None)
        self.part = part    # told of each run's write (Part.files), where given

    def run(self, settings: Settings, trace_file: Optional[str] = None,
            settle: Optional[Callable[[], object]] = None) -> float:
        before = self.part.files if self.part else None
        if self.part:
            self.part.files = None      # removed first: missing until the run has ended
        started = budget_plan.now()
        write = self._written(settings, trace_file, settle)
        self.last_write_back = written_back(self.clone)
        self.last_status = (timed_git(self._next_status(), self.clone, settings)
                            if self.with_status else None)
        self.last_wall = budget_plan.now() - started
        if self.part:
            # A write with Git's defaults prices writing them again; a parallel one does
            # not, and the last such price stands (None: the part has none yet).
            wrote = write if not settings else (before.seconds if before else None)
            self.part.files = (None if wrote is None else
                               FilesWritten.now(self.part.index_file, wrote))
        return write + self.last_write_back


def written_back(path: str) -> float:
    """The seconds path's file system takes to write back what waits to be written
    (settle.wait), DeadlineReached where it has not by the deadline (the flush itself
    goes on, never interrupted)."""
    end = _deadline.get()
    left = RUN_TIMEOUT if end is None else end - budget_plan.now()
    if left <= 0:
        raise DeadlineReached(f"{path}: the deadline came before the write-back")
    settled = write_back.wait(path, left)
    if settled.seconds is None:         # still flushing
        raise DeadlineReached(f"{path}: still writing back at the deadline")
    return settled.seconds


# Where a command is timed: the user's work tree (named explicitly), or a part's.
Where: TypeAlias = Union[RepoLayout, Part]


def on_copy(args: List[str], repo: Where, index_file: str,
            ok: Tuple[int, ...] = (0,)) -> Runner:
    """A timed runner of `git ARGS` in the user's work tree (named explicitly) or in a
    part's on an index copy: what the command writes goes to the copy, never to the
    user's index."""
    layout = repo if isinstance(repo, RepoLayout) else None
    def run(settings: Settings, trace_file: Optional[str] = None) -> float:
        return timed_git(args, repo.top, settings, {"GIT_INDEX_FILE": index_file},
                         trace_file, repo=layout, ok=ok)
    return run


def status(repo: Where, index_file: str, untracked: bool) -> Runner:
    return on_copy(["status", "--porcelain"] + ([] if untracked else ["-uno"]), repo, index_file)


def index_write(repo: Where, index_file: str) -> Runner:
    """What every command that writes the index pays (add, commit, a status that
    refreshed entries): the whole index written again, trailer and all."""
    return on_copy(["update-index", "--force-write-index"], repo, index_file)


def index_load(repo: Where, index_file: str) -> Runner:
    return on_copy(["ls-files"], repo, index_file)


# The runners of the workloads timed on an index copy, for the user's repository and an
# index file (models/workloads.toml names them and their commands). Trials and `verify`
# share them.
ON_INDEX: Dict[str, Callable[[Where, str], Runner]] = {
    "status": lambda repo, index: status(repo, index, untracked=False),
    "untracked": lambda repo, index: status(repo, index, untracked=True),
    "index": index_load,
    "write": index_write,
    # Exit 1 is git's answer "the work tree differs" (an unstaged change, a merge or
    # rebase in progress), not a failure.
    "diff": lambda repo, index: on_copy(["diff", "--quiet", "--exit-code"], repo, index,
                                        ok=(0, 1)),
}
