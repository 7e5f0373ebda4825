"""The repository's shape: index, tree, objects, sparse checkout, submodules, worktrees."""
import glob
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import engine, git
from ..errors import EngineError, GitError, UsageError
from . import statdata
from .gitinfo import run_git
from .layout import RepoLayout as RepoLayout     # the located repository, named here too


@dataclass(frozen=True)
class RepoFacts:
    layout: RepoLayout
    index: Optional[Dict[str, Any]]  # engine.IndexResult as a dict, plus timing
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
    stat_data: Optional[Dict[str, Any]] = None     # statdata.StatData: the index's stat data vs lstat
    # Seconds the untracked walk took; where it was given up, the seconds it had run by
    # then (a lower bound: untracked_estimate is None). What a status with untracked
    # files costs at least, before any trial has timed one.
    untracked_walk: Optional[float] = None


def partial_clone(layout: RepoLayout) -> bool:
    """Whether the repository is a partial clone as git judges it (promisor-remote.c):
    `extensions.partialClone` names a remote, or a remote has `promisor = true`. A
    `.promisor` file left beside a pack (copied from a mirror) makes none: git fetches
    nothing lazily there, and every object is in the packs."""
    if run_git(["config", "extensions.partialClone"], repo=layout).stdout.strip():
        return True
    proc = run_git(["config", "--type=bool", "--get-regexp", r"^remote\..*\.promisor$"],
                   repo=layout)
    return any(line.rsplit(" ", 1)[-1] == "true" for line in proc.stdout.splitlines())


def pack_files(layout: RepoLayout) -> List[str]:
    """The repository's pack files (shared by all its worktrees)."""
    return glob.glob(os.path.join(layout.common_dir, "objects", "pack", "*.pack"))


def locate(path: Optional[str]) -> Optional[RepoLayout]:
    """The repository containing path, or None outside any repository.

    path None: the repository the caller's own git would use here, with GIT_DIR and
    GIT_WORK_TREE honoured (inside a hook, the hook's repository; a dotfiles setup's
    GIT_DIR=~/.dotfiles GIT_WORK_TREE=~). A path given names the repository by itself:
    what the caller's environment says is ignored. Either way the layout is absolute,
    and every later git run on it names it (git.run repo=), none inherits it. The index
    is the repository's own: a GIT_INDEX_FILE a hook was given (pre-commit under
    `commit -a`) names a lock git is still writing.

    A repository git itself refuses (owned by another user and not in
    safe.directory) is refused here too, with git's own words.
    """
    env = git.caller_environ() if path is None else None
    path = os.getcwd() if path is None else os.path.abspath(path)
    if not os.path.isdir(path):
        raise UsageError(f"'{path}' is not a directory")

    def ask(*args: str) -> Optional[str]:
        proc = run_git(["rev-parse", *args], cwd=path, env=env)
        if proc.returncode:
            if "safe.directory" in proc.stderr:
                raise UsageError(f"git refuses this repository: {git.first_lines(proc.stderr)}")
            if "not a git repository" in proc.stderr:
                return None
            # A broken config (syntax error, include cycle) stops every git command.
            raise GitError(f"git cannot work here: {git.first_lines(proc.stderr)}")
        out: str = proc.stdout
        return out[:-1] if out.endswith("\n") else out

    # Every question in one git call (on slow storage each git start is a round trip
    # per file it opens), one answer a line. rev-parse has no -z: where a path holds a
    # newline the lines are more than the questions, and each is asked on its own.
    questions = (("--is-bare-repository",), ("--show-object-format",), ("--absolute-git-dir",),
                 ("--git-common-dir",), ("--git-path", "index"))
    together = ask(*(a for q in questions for a in q))
    if together is None:
        return None
    answers: List[Optional[str]] = list(together.split("\n"))
    if len(answers) != len(questions):
        answers = [ask(*q) for q in questions]
    bare, object_format, git_dir, common, index = answers
    if bare is None or git_dir is None or common is None or index is None:
        return None
    object_format = object_format or "sha1"
    # Only where there is a work tree: in a bare repository git refuses the question.
    worktree = (ask("--show-toplevel") or None) if bare != "true" else None
    return RepoLayout(worktree, git_dir, os.path.abspath(os.path.join(path, common)),
                      os.path.abspath(os.path.join(path, index)), bare == "true",
                      object_format)


GITLINK = "160000 "        # a submodule's entry in `git ls-files -s`


def tracked_sample(layout: RepoLayout, n: int = 500) -> List[str]:
    """Up to n tracked paths spread evenly over the index (relative to the worktree), of
    the files and symbolic links git writes in the work tree: a sparse checkout's
    skip-worktree entries are not there, nor, in a partial clone, are their blobs
    (`ls-files -t` tags them S); a submodule is a directory git never writes as a file
    (mode 160000), and a path in conflict is listed once a stage, with no stage 0 (the
    entry git writes)."""
    if not layout.worktree:
        return []
    proc = run_git(["ls-files", "-s", "-t", "-z"], cwd=layout.worktree, timeout=120,
                   repo=layout)
    records = (r.partition("\t") for r in in_worktree(proc.stdout))
    names = [path for meta, _, path in records
             if not meta.startswith(GITLINK) and meta.endswith(" 0")]
    step = max(1, len(names) // n)
    return names[::step][:n]


REGULAR = ("100644 ", "100755 ")     # entries git writes as regular files
DEBUG_LINES = 5                     # `ls-files --debug`'s lines after each entry


def listing_with_sizes(debug: str) -> Tuple[str, Dict[str, int]]:
    """A `git ls-files -s -t -z --debug` listing as the listing without --debug, and the
    size its index records for each regular file (0 where git has not recorded one: an
    entry never refreshed, or one smudged as racily clean). Each entry's record ends in
    NUL and its stat data follows in DEBUG_LINES lines, the size in the last."""
    chunks = debug.split("\0")
    records = [chunks[0]]
    sizes: Dict[str, int] = {}
    for chunk in chunks[1:]:
        lines = chunk.split("\n", DEBUG_LINES)
        if len(lines) <= DEBUG_LINES - 1 or not lines[DEBUG_LINES - 1].startswith("  size: "):
            break
        meta, _, path = records[-1].partition("\t")
        if meta[2:].startswith(REGULAR):
            sizes[path] = int(lines[DEBUG_LINES - 1][8:].partition("\t")[0])
        records.append(lines[DEBUG_LINES] if len(lines) > DEBUG_LINES else "")
    return "\0".join(records), sizes


def in_worktree(tagged: str) -> List[str]:
    """The entries of a `git ls-files -t -z` listing (with -s too) that git keeps in the
    work tree, without their tags: every one but the skip-worktree ones (S)."""
    return [e[2:] for e in tagged.split("\0") if len(e) > 2 and not e.startswith("S ")]


def spread_order(paths: Sequence[str], run: int) -> List[str]:
    """Evenly spread paths reordered so that every `run`-long stretch of them is spread
    over the whole tree too: a prefix of any length (from `run` on) is a fair sample."""
    stride = max(1, -(-len(paths) // run))
    return [p for k in range(stride) for p in paths[k::stride]]


UNTRACKED_WALK_MAX = 20.0   # seconds, when no allowance says less


def _untracked(layout: RepoLayout, allowance: Optional[float]
               ) -> Tuple[Optional[int], str, Optional[float]]:
    """(untracked files and directories, what that count is, the walk's seconds)."""
    if not layout.worktree:
        return None, "bare repository", None
    limit = UNTRACKED_WALK_MAX if allowance is None else max(0.5, min(allowance, UNTRACKED_WALK_MAX))
    t0 = time.monotonic()
    try:
        proc = run_git(["ls-files", "-o", "--exclude-standard", "--directory", "-z"],
                       cwd=layout.worktree, timeout=limit, repo=layout)
    except GitError:
        return (None, f"untracked walk took over {limit:g} s; not counted",
                round(time.monotonic() - t0, 4))
    return (proc.stdout.count("\0"), "untracked files and directories (git ls-files -o --directory)",
            round(time.monotonic() - t0, 4))


def _worktrees(layout: RepoLayout) -> int:
    """The work trees `git worktree list` lists: the main one, and each linked one whose
    administrative directory names its gitdir (git's get_worktrees skips the others),
    read from $GIT_COMMON_DIR/worktrees without starting git."""
    admin = os.path.join(layout.common_dir, "worktrees")
    try:
        ids = os.listdir(admin)
    except OSError:
        return 1
    return 1 + sum(1 for i in ids if os.path.isfile(os.path.join(admin, i, "gitdir")))


def _loose_objects(layout: RepoLayout) -> Optional[int]:
    """Loose objects, estimated as `git gc --auto` does (too_many_loose_objects): the
    entries of objects/17 times 256. `git count-objects -v` stats every loose object,
    a round trip each on network storage."""
    try:
        names = os.listdir(os.path.join(layout.common_dir, "objects", "17"))
    except FileNotFoundError:
        return 0
    except OSError:
        return None
    return 256 * sum(1 for n in names if len(n) == 38 and all(c in "0123456789abcdef" for c in n))


# Hooks the commands git-tune times can start (status, checkout, update-index, clone).
TIMED_HOOKS = ("post-index-change", "post-checkout", "reference-transaction", "fsmonitor-watchman")


def repository_commands(layout: RepoLayout) -> List[str]:
    """Commands this repository's own config makes git run while git-tune times git:
    git-tune runs what git would run, so it is trusted as git is trusted here."""
    # One git call for every key read (on slow storage a git start costs a round trip a
    # file it opens); git lowercases section and key names.
    found = run_git(["config", "-z", "--get-regexp",
                     r"^(core\.fsmonitor|filter\..*\.(clean|smudge|process))$"],
                    repo=layout).stdout
    items = [item.partition("\n") for item in found.split("\0") if item]
    filters = [(k, v) for k, _, v in items if k.startswith("filter.")]
    # What is not a filter driver is core.fsmonitor, whose last value wins.
    fsmonitor = next((v.strip() for k, _, v in reversed(items)
                      if not k.startswith("filter.")), "")
    out = []
    if fsmonitor and fsmonitor.lower() not in ("false", "no", "off", "0"):
        out.append(f"core.fsmonitor = {fsmonitor}")
    # hooks=True: where *git* would look (git-tune's own runs point core.hooksPath away).
    hooks_path = git.run(["rev-parse", "--git-path", "hooks"], cwd=layout.git_dir,
                         hooks=True, repo=layout).stdout.rstrip("\n")
    hooks_dir = os.path.join(layout.git_dir, hooks_path) if hooks_path else ""
    for hook in TIMED_HOOKS:
        path = os.path.join(hooks_dir, hook)
        if hooks_dir and os.path.isfile(path) and os.access(path, os.X_OK):
            out.append(f"hook {path}")
    out += [f"{k} = {v}" for k, v in filters]
    return out


def repo_facts(layout: RepoLayout, allowance: Optional[float] = None) -> RepoFacts:
    """With `allowance`, the untracked walk is given up after about that many seconds."""
    notes = []
    commands = repository_commands(layout)
    if commands:
        notes.append("timing git here runs commands this repository's config names "
                     "(git-tune runs what git would run): " + "; ".join(commands))
    if any(c.startswith("filter.") for c in commands):
        notes.append("filter drivers are off in git-tune's scratch checkouts (they may fetch "
                     "over the network): what a smudge costs a real checkout is not timed")
    index = index_error = None
    if os.path.exists(layout.index_file):
        try:
            r = engine.index_read(layout.index_file, threads=1,
                                  object_format=layout.object_format)
            index = asdict(r)
        except EngineError as e:
            index_error = e.message
            notes.append(f"the index could not be read: {e.message}")
    elif not layout.bare:
        notes.append("no index file yet")
    stat = statdata.check(layout.index_file, layout.worktree, layout.object_format,
                          allowance) if index and layout.worktree else None
    if stat and stat.diagnosis:
        notes.append(stat.diagnosis)
    packs = pack_files(layout)
    sparse = run_git(["config", "--bool", "core.sparseCheckout"], repo=layout).stdout.strip() == "true"
    submodules = 0
    if layout.worktree and os.path.exists(os.path.join(layout.worktree, ".gitmodules")):
        proc = run_git(["config", "-f", ".gitmodules", "--get-regexp", r"\.path$"], cwd=layout.worktree)
        submodules = len(proc.stdout.splitlines())
    worktrees = _worktrees(layout)
    untracked, untracked_note, walk = _untracked(layout, allowance)
    commit_graph = (os.path.exists(os.path.join(layout.common_dir, "objects", "info", "commit-graph"))
                    or os.path.isdir(os.path.join(layout.common_dir, "objects", "info", "commit-graphs")))
    return RepoFacts(
        layout=layout, index=index, index_error=index_error,
        tracked_files=index["entries"] if index else None,
        directories=index["dirs"] if index else None,
        max_depth=index["max_depth"] if index else None,
        size_histogram=tuple(index["size_histogram"]) if index else (),
        untracked_estimate=untracked, untracked_note=untracked_note,
        packs=len(packs), pack_bytes=sum(os.path.getsize(p) for p in packs),
        loose_objects=_loose_objects(layout), commit_graph=commit_graph,
        sparse_checkout=sparse, submodules=submodules, worktrees=worktrees, notes=tuple(notes),
        stat_data=asdict(stat) if stat else None, untracked_walk=walk)
