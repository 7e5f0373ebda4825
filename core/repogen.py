"""Generate real Git repositories shaped like Git's t/perf/repos/many-files.sh.

Every directory at depth 0..depth holds `files` files and `width`
subdirectories, so (4, 10, 9) gives 99,999 files, (5, 10, 9) 999,999 and
(6, 8, 7) 2,097,151, the shapes Git's perf suite uses. File sizes follow a
seeded log-normal distribution like a source tree's (median about 2 KiB).
"""
import math
import os
import random
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .errors import GitError
from .git import run as run_git


@dataclass(frozen=True)
class RepoShape:
    depth: int = 2
    width: int = 10
    files: int = 9
    median_size: int = 2048
    sigma: float = 1.2
    max_size: int = 256 * 1024
    seed: int = 1

    @property
    def file_count(self) -> int:
        dirs: int = sum(self.width ** d for d in range(self.depth + 1))
        return dirs * self.files

    @classmethod
    def for_files(cls, n: int, **kw: Any) -> "RepoShape":
        """The smallest width-10, 9-per-directory shape holding at least n files."""
        depth = 0
        while cls(depth=depth, **kw).file_count < n:
            depth += 1
        return cls(depth=depth, **kw)


def paths(shape: RepoShape, limit: Optional[int] = None) -> Iterator[str]:
    """Relative file paths of the shape, depth first, at most `limit`."""
    count = 0

    def walk(prefix: str, depth: int) -> Iterator[str]:
        nonlocal count
        for f in range(shape.files):
            if limit is not None and count >= limit:
                return
            count += 1
            yield f"{prefix}file{f}"
        if depth:
            for d in range(shape.width):
                yield from walk(f"{prefix}dir{d}/", depth - 1)

    yield from walk("", shape.depth)


def sizes(shape: RepoShape, n: int) -> List[int]:
    rng = random.Random(shape.seed)
    mu = math.log(shape.median_size)
    return [min(shape.max_size, int(rng.lognormvariate(mu, shape.sigma))) for _ in range(n)]


def git(repo: "str | os.PathLike[str]", *args: str, env: Optional[Dict[str, str]] = None,
        check: bool = True, capture: bool = True,
        input: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
    """git -C repo ARGS through the one runner (no timeout: a large repository's first
    commit takes as long as it takes), `input` on its standard input."""
    proc = run_git(["-C", str(repo), *args], env=env, timeout=None, stdout=capture,
                   input=input)
    if check and proc.returncode:
        raise GitError(f"git {' '.join(args)} failed in '{repo}': {proc.stderr.strip()}")
    return proc


# The commit's automatic maintenance (gc --auto past 6,700 loose objects) runs before the
# commit returns, not detached: a background gc would go on into a benchmark's timings
# and past the removal of the repository (leaving .git/objects/info behind).
_IDENTITY = ["-c", "user.name=git-tune", "-c", "user.email=git-tune@localhost",
             "-c", "commit.gpgsign=false", "-c", "gc.autoDetach=false",
             "-c", "maintenance.autoDetach=false"]


def write_tree(root: str, shape: RepoShape, limit: Optional[int] = None) -> Tuple[int, int]:
    """Write the shape's files under root; returns (files, bytes)."""
    listing = list(paths(shape, limit))
    lens = sizes(shape, len(listing))
    rng = random.Random(shape.seed + 1)
    total = 0
    made = set()
    for rel, size in zip(listing, lens):
        d = os.path.dirname(rel)
        if d and d not in made:
            os.makedirs(os.path.join(root, d), exist_ok=True)
            made.add(d)
        # Printable, line-structured, distinct per file so nothing deduplicates.
        head = f"{rel} {rng.getrandbits(64):016x}\n".encode()
        body = (head * (size // len(head) + 1))[:size]
        with open(os.path.join(root, rel), "wb") as f:
            f.write(body)
        total += size
    return len(listing), total


def generate(root: str, shape: RepoShape, limit: Optional[int] = None,
             second_commit_changes: int = 0) -> str:
    """Create a repository at root with one commit of the shape's files.

    With second_commit_changes=K a second commit rewrites K files, so
    switching between HEAD~1 and HEAD checks out exactly K files.
    """
    os.makedirs(root, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write_tree(root, shape, limit)
    git(root, "add", "-A")
    git(root, *_IDENTITY, "commit", "-q", "-m", "git-tune demo tree")
    if second_commit_changes:
        listing = list(paths(shape, limit))
        step = max(1, len(listing) // second_commit_changes)
        for rel in listing[::step][:second_commit_changes]:
            with open(os.path.join(root, rel), "ab") as f:
                f.write(b"changed\n")
        git(root, "add", "-A")
        git(root, *_IDENTITY, "commit", "-q", "-m", "git-tune demo change")
    return root


def two_views(root: str, files: int) -> Tuple[str, str, str]:
    """A generated repository of `files` files at root/a and a copy of its work tree
    without `.git` at root/b: two views of one git directory, whose statuses each find
    the index's stat data written by the other (an IDE's copy, a container's bind
    mount). (view a, view b, the git directory.)"""
    import shutil
    a, b = os.path.join(root, "a"), os.path.join(root, "b")
    generate(a, RepoShape.for_files(files), limit=files)
    shutil.copytree(a, b, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return a, b, os.path.join(a, ".git")


@dataclass(frozen=True)
class LargeFiles:
    """A repository that needs memory to pack: `versions` commits of `files` large text
    files, each commit rewriting `changed` of their lines (git stores the versions as
    deltas of one another), beside a binary file of random bytes rewritten each commit
    (no delta: stored whole)."""
    files: int = 2
    size: int = 16 << 20
    versions: int = 6
    changed: float = 0.02
    binary: int = 4 << 20
    seed: int = 1


def generate_large(root: str, shape: LargeFiles) -> str:
    """Create the LargeFiles repository at root (its objects loose, as commits leave them)."""
    os.makedirs(root, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    rng = random.Random(shape.seed)
    width = 40      # bytes a line: 8-byte line number, 31 hex digits, newline

    def line(i: int) -> bytes:
        return b"%08d %031x\n" % (i, rng.getrandbits(124))
    count = max(1, shape.size // width)
    texts = [[line(i) for i in range(count)] for _ in range(shape.files)]
    for v in range(shape.versions):
        for f, lines in enumerate(texts):
            if v:
                for i in rng.sample(range(count), max(1, int(count * shape.changed))):
                    lines[i] = line(i)
            with open(os.path.join(root, f"large-{f}.txt"), "wb") as out:
                out.write(b"".join(lines))
        if shape.binary:
            with open(os.path.join(root, "large.bin"), "wb") as out:
                out.write(rng.randbytes(shape.binary))
        git(root, "add", "-A")
        git(root, *_IDENTITY, "-c", "gc.auto=0", "commit", "-q", "-m", f"version {v}")
    return root


@dataclass(frozen=True)
class LongHistory:
    """A repository whose packing memory grows with its history, not its largest object:
    `commits` commits each changing a few words in every one of `files` small text files
    (many small objects, each version a delta of another)."""
    files: int = 40
    commits: int = 300
    size: int = 8 << 10
    changed: int = 8            # words rewritten in each file by each commit
    seed: int = 7


def generate_history(root: str, shape: LongHistory) -> str:
    """Create the LongHistory repository at root (by fast-import), its objects in one
    pack whose deltas were found as `git repack -adf` finds them."""
    os.makedirs(root, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    rng = random.Random(shape.seed)
    words = ["%010x" % rng.getrandbits(40) for _ in range(4096)]
    texts = [[rng.choice(words) for _ in range(shape.size // 11)] for _ in range(shape.files)]
    stream = []
    for c in range(shape.commits):
        stream.append(f"commit refs/heads/main\ncommitter a <a@b> {c * 60} +0000\ndata 2\nc\n")
        for f, text in enumerate(texts):
            for _ in range(shape.changed):
                text[rng.randrange(len(text))] = rng.choice(words)
            body = " ".join(text) + "\n"      # ASCII: its length is its bytes
            stream.append(f"M 100644 inline f{f}\ndata {len(body)}\n{body}\n")
    git(root, "fast-import", "--quiet", input="".join(stream))
    git(root, "-c", "gc.auto=0", "repack", "-adfq")
    git(root, "reset", "-q", "--hard")
    return root
