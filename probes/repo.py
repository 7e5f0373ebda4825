"""The repository's shape: index, tree, objects, sparse checkout, submodules, worktrees."""
import glob
import os
import subprocess
from dataclasses import asdict, dataclass
from typing import List, Optional, Tuple

from git_tune import engine
from git_tune.errors import EngineError, GitError, UsageError
from git_tune.probes.gitinfo import run_git


@dataclass(frozen=True)
class RepoLayout:
    """Where things are: worktree and git directories can live on different file systems."""

    worktree: Optional[str]
    git_dir: str
    common_dir: str
    index_file: str
    bare: bool


@dataclass(frozen=True)
class RepoFacts:
    layout: dict
    index: Optional[dict]            # engine.IndexResult as a dict, plus timing
    index_error: Optional[str]
    tracked_files: Optional[int]
    directories: Optional[int]
    max_depth: Optional[int]
    size_histogram: Tuple[int, ...]
    untracked_estimate: Optional[int]
    untracked_note: str
    packs: int
    pack_bytes: int
    loose_objects: Optional[int]
    commit_graph: bool
    sparse_checkout: bool
    submodules: int
    worktrees: int
    notes: Tuple[str, ...]


def _rev_parse(path: str, *args: str) -> List[str]:
    proc = run_git(["rev-parse", *args], cwd=path)
    if proc.returncode:
        raise GitError(proc.stderr.strip() or f"git rev-parse failed in '{path}'")
    return proc.stdout.splitlines()


def locate(path: str) -> Optional[RepoLayout]:
    """The repository containing path, or None outside any repository."""
    if not os.path.isdir(path):
        raise UsageError(f"'{path}' is not a directory")
    try:
        bare, git_dir, common, index = _rev_parse(
            path, "--is-bare-repository", "--absolute-git-dir", "--git-common-dir",
            "--git-path", "index")
    except GitError:
        return None
    except FileNotFoundError:
        return None
    worktree = None
    if bare != "true":
        top = run_git(["rev-parse", "--show-toplevel"], cwd=path)
        worktree = top.stdout.strip() or None
    return RepoLayout(worktree, git_dir, os.path.abspath(os.path.join(path, common)),
                      os.path.abspath(os.path.join(path, index)), bare == "true")


def tracked_sample(layout: RepoLayout, n: int = 500) -> List[str]:
    """Up to n tracked paths spread evenly over the index (relative to the worktree)."""
    if not layout.worktree:
        return []
    proc = run_git(["ls-files", "-z"], cwd=layout.worktree, timeout=120)
    names = [p for p in proc.stdout.split("\0") if p]
    step = max(1, len(names) // n)
    return names[::step][:n]


def _untracked(layout: RepoLayout) -> Tuple[Optional[int], str]:
    if not layout.worktree:
        return None, "bare repository"
    try:
        proc = run_git(["ls-files", "-o", "--exclude-standard", "--directory", "-z"],
                       cwd=layout.worktree, timeout=20)
    except subprocess.TimeoutExpired:
        return None, "untracked walk took over 20 s; not counted"
    return proc.stdout.count("\0"), "untracked files and directories (git ls-files -o --directory)"


def _count_objects(layout: RepoLayout) -> Optional[int]:
    proc = run_git(["count-objects", "-v"], cwd=layout.git_dir)
    for line in proc.stdout.splitlines():
        if line.startswith("count:"):
            return int(line.split(":")[1])
    return None


def repo_facts(layout: RepoLayout) -> RepoFacts:
    notes = []
    index = index_error = None
    if os.path.exists(layout.index_file):
        try:
            r = engine.index_read(layout.index_file, threads=1)
            index = asdict(r)
        except EngineError as e:
            index_error = e.message
            notes.append(f"the index could not be read: {e.message}")
    elif not layout.bare:
        notes.append("no index file yet")
    packs = glob.glob(os.path.join(layout.common_dir, "objects", "pack", "*.pack"))
    sparse = run_git(["config", "--bool", "core.sparseCheckout"], cwd=layout.git_dir).stdout.strip() == "true"
    submodules = 0
    if layout.worktree and os.path.exists(os.path.join(layout.worktree, ".gitmodules")):
        proc = run_git(["config", "-f", ".gitmodules", "--get-regexp", r"\.path$"], cwd=layout.worktree)
        submodules = len(proc.stdout.splitlines())
    wt = run_git(["worktree", "list", "--porcelain"], cwd=layout.git_dir)
    worktrees = sum(1 for l in wt.stdout.splitlines() if l.startswith("worktree "))
    untracked, untracked_note = _untracked(layout)
    commit_graph = (os.path.exists(os.path.join(layout.common_dir, "objects", "info", "commit-graph"))
                    or os.path.isdir(os.path.join(layout.common_dir, "objects", "info", "commit-graphs")))
    return RepoFacts(
        layout=asdict(layout), index=index, index_error=index_error,
        tracked_files=index["entries"] if index else None,
        directories=index["dirs"] if index else None,
        max_depth=index["max_depth"] if index else None,
        size_histogram=tuple(index["size_histogram"]) if index else (),
        untracked_estimate=untracked, untracked_note=untracked_note,
        packs=len(packs), pack_bytes=sum(os.path.getsize(p) for p in packs),
        loose_objects=_count_objects(layout), commit_graph=commit_graph,
        sparse_checkout=sparse, submodules=submodules, worktrees=worktrees, notes=tuple(notes))
