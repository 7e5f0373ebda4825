"""Repack, gc, clone and blame in a memory cgroup: Git's defaults against the values
git-tune chose inside the same limit (issue #64).

For each limit (256 MiB, 512 MiB, 1 GiB, none), `git-tune recommend` (the default
workload, which weighs repack and history) runs inside a memory cgroup of that size (its
own memory counts, as in a container). Then four commands run there under Git's
defaults and under the values it chose for their keys, and each run's wall and peak
resident memory are shown side by side:
- repack: `git repack -adf` of a copy of the repository (every delta found again), where
  pack.windowMemory, pack.deltaCacheSize, pack.threads and core.deltaBaseCacheLimit
  count;
- gc: `git gc` of such a copy (the same keys, and gc.bigPackThreshold; deltas reused);
- clone: `git index-pack --stdin` of the repository's pack into an empty repository,
  the part of a clone or fetch that resolves deltas (pack.threads,
  core.deltaBaseCacheLimit, one cache per thread);
- blame: `git blame` of the largest text file (core.deltaBaseCacheLimit).
The repository (--shape): `large`, many versions of two large text files and a binary
(repogen.LargeFiles), the issue's 275 MB shape at full size; or `history`, a long history
of small text files (repogen.LongHistory: 61,200 objects in 600 commits at full size),
where the memory grows with the objects packed, not with the largest; or, with
--source, a clone of a real repository (`git clone --no-local`; git's own history:
`--source` a clone of github.com/git/git, `--limits 512 --budget 600`), its largest file
blamed. It is packed once before anything runs, as a user's is. Needs root and a memory
cgroup controller; without them only the unconfined rows are run.

    python3 bench/memory.py [--tiny] [--shape large|history | --source REPO] [--limits MIB...]
                            [--budget S] [--blame FILE]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from common import config_env, parser, report

from git_tune import repogen
from git_tune.advisor.measure import peak

MIB = 1 << 20
FULL = repogen.LargeFiles(size=32 << 20, versions=12, binary=4 << 20)
TINY = repogen.LargeFiles(size=4 << 20, versions=4, binary=2 << 20)
HISTORY_FULL = repogen.LongHistory(files=100, commits=600)
HISTORY_TINY = repogen.LongHistory()
UNLIMITED = 1 << 50
KEYS = ("pack.windowMemory", "pack.deltaCacheSize", "pack.threads", "gc.bigPackThreshold",
        "core.deltaBaseCacheLimit")
DEFAULTS = {"pack.windowMemory": "0", "pack.deltaCacheSize": "256m"}
# What pack-objects reads: it reads every object through the delta base cache.
PACKING = ("pack.windowMemory", "pack.deltaCacheSize", "pack.threads", "core.deltaBaseCacheLimit")


@dataclass(frozen=True)
class Command:
    """A command timed under each limit: its name, the keys it reads, how to run it."""
    name: str
    keys: Tuple[str, ...]
    run: Callable[[Dict[str, str], int], peak.PeakRun]


def chosen(repo: str, limit: int, budget: float):
    """The values `recommend` chose inside a cgroup of `limit`, and the reasons it gave
    for the keys it left; None where no cgroup could be made for a limit."""
    box = peak.Confinement.make(limit) if limit != UNLIMITED else None
    if limit != UNLIMITED and box is None:
        return None
    try:
        out = subprocess.run([sys.executable, "-m", "git_tune", "recommend", "--repo", repo,
                              "--budget", str(budget), "--recalibrate", "--json"],
                             preexec_fn=box.enter if box else None, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    finally:
        if box:
            box.remove()
    if out.returncode != 0:
        return {}, {"reasons": {"recommend": f"failed: {out.stderr.strip()[-300:]}"}}
    rec = json.loads(out.stdout)
    keys = {k["key"]: k for k in rec["keys"]}
    values = {k: keys[k]["value"] for k in KEYS if k in keys and keys[k]["status"] == "set"}
    return values, {"reasons": {k: keys[k]["reason"] for k in KEYS
                                if k in keys and k not in values},
                    "spent": rec.get("spent"), "notes": rec.get("notes")}


def git_peak(args: List[str], cwd: str, settings: Dict[str, str], limit: int,
             stdin_file: Optional[str] = None) -> peak.PeakRun:
    """git ARGS under `settings`, confined to `limit`: its wall and peak (peak.run)."""
    return peak.run(args, cwd, config_env(settings), limit, 3600, stdin_file=stdin_file)


def on_copy(args: List[str], source: str, scratch: str, settings: Dict[str, str],
            limit: int) -> peak.PeakRun:
    """git ARGS in a copy of `source` (its objects loose)."""
    copy = os.path.join(scratch, "copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy, symlinks=True)
    try:
        return git_peak(args, copy, {**DEFAULTS, **settings}, limit)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def index_pack(pack: str, scratch: str, settings: Dict[str, str], limit: int) -> peak.PeakRun:
    """git index-pack --stdin of `pack` into an empty repository: what a clone or a fetch
    runs on what it receives."""
    into = os.path.join(scratch, "into")
    shutil.rmtree(into, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", into], check=True)
    try:
        return git_peak(["index-pack", "--stdin"], into, settings, limit, stdin_file=pack)
    finally:
        shutil.rmtree(into, ignore_errors=True)


def blame(repo: str, path: str, settings: Dict[str, str], limit: int) -> peak.PeakRun:
    return git_peak(["blame", "--porcelain", "HEAD", "--", path], repo, settings, limit)


def pack_it(repo: str) -> str:
    """Pack `repo` as a user's is (`git repack -ad`, unconfined, Git's defaults); the
    path of its one pack."""
    subprocess.run(["git", "-C", repo, "repack", "-adq"], check=True)
    pack_dir = os.path.join(repo, ".git", "objects", "pack")
    return os.path.join(pack_dir, next(f for f in os.listdir(pack_dir) if f.endswith(".pack")))


def largest_file(repo: str) -> str:
    """The largest file at HEAD (its path)."""
    out = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "-l", "HEAD"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    sized = [(int(size), path) for line in out.splitlines()
             for meta, _, path in [line.partition("\t")]
             for size in [meta.split()[3]] if size.isdigit()]
    return max(sized)[1]


def shown(r: peak.PeakRun) -> str:
    if r.killed_at_limit or r.returncode:
        return f"killed after {r.seconds:.1f} s" if r.killed_at_limit or r.returncode == -9 \
            else f"failed ({r.returncode})"
    return f"{r.seconds:.1f} s, {r.peak / MIB:.0f} MiB"


def main():
    p = parser(__doc__)
    p.add_argument("--shape", choices=("large", "history"), default="large")
    p.add_argument("--source", help="a repository to clone and run on instead of a shape")
    p.add_argument("--blame", help="the file blamed (default: the shape's, a source's largest)")
    p.add_argument("--budget", type=float, help="recommend's budget (default 120, 10 --tiny)")
    p.add_argument("--limits", type=int, nargs="+", metavar="MIB",
                   help="the limits in MiB (0: none); default 256 512 1024 0")
    args = p.parse_args()
    history = args.shape == "history" and not args.source
    shape = (HISTORY_TINY if args.tiny else HISTORY_FULL) if history else \
        TINY if args.tiny else FULL
    limits = ([m * MIB or UNLIMITED for m in args.limits] if args.limits
              else [(96 if history else 192) * MIB] if args.tiny
              else [256 * MIB, 512 * MIB, 1024 * MIB, UNLIMITED])
    rows, data, notes = [], {}, []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        where = os.path.join(d, "repo")
        if args.source:
            subprocess.run(["git", "clone", "-q", "--no-local", args.source, where], check=True)
            repo = where
            commits = subprocess.run(["git", "-C", repo, "rev-list", "--count", "--all"],
                                     stdout=subprocess.PIPE, text=True,
                                     check=True).stdout.strip()
        else:
            repo = repogen.generate_history(where, shape) if history else \
                repogen.generate_large(where, shape)
        blamed = args.blame or (largest_file(repo) if args.source else
                                "f0" if history else "large-0.txt")
        mib = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in
                  os.walk(os.path.join(repo, ".git")) for f in fs) / MIB
        pack = pack_it(repo)
        commands = (
            Command("repack", PACKING,
                    lambda s, lim: on_copy(["repack", "-adfq"], repo, d, s, lim)),
            Command("gc", PACKING + ("gc.bigPackThreshold",),
                    lambda s, lim: on_copy(["gc", "--quiet"], repo, d, s, lim)),
            Command("clone (index-pack)", ("pack.threads", "core.deltaBaseCacheLimit"),
                    lambda s, lim: index_pack(pack, d, s, lim)),
            Command("blame", ("core.deltaBaseCacheLimit",),
                    lambda s, lim: blame(repo, blamed, s, lim)))
        for limit in limits:
            name = "none" if limit == UNLIMITED else f"{limit // MIB} MiB"
            got = chosen(repo, limit, args.budget or (10 if args.tiny else 120))
            if got is None:
                notes.append(f"{name}: no memory cgroup could be made here (root and the "
                             "memory controller are needed); rows skipped")
                continue
            values, why = got
            notes.extend(f"{name}, {k}: {reason}" for k, reason in why["reasons"].items())
            data[name] = {"values": values, **why}
            for command in commands:
                mine = {k: v for k, v in values.items() if k in command.keys}
                before = command.run({}, limit)
                after = command.run(mine, limit) if mine else None
                # The same values with no limit: what the limit itself costs them.
                free = (command.run(mine, UNLIMITED)
                        if mine and limit != UNLIMITED else None)
                ratio = (f"{before.seconds / after.seconds:.2f}x"
                         if after and not before.returncode and not after.returncode else "-")
                rows.append((name, command.name,
                             ", ".join(f"{k}={v}" for k, v in mine.items()) or "Git's defaults",
                             shown(before), shown(after) if after else "-",
                             shown(free) if free else "-", ratio))
                data[name][command.name] = {
                    "defaults": before.__dict__, "git_tune": after.__dict__ if after else None,
                    "git_tune_no_limit": free.__dict__ if free else None}
    if args.source:
        notes.append(f"repository: a clone of {os.path.basename(os.path.abspath(args.source))} "
                     f"({int(commits):,} commits, {mib:.0f} MiB in one pack), packed once more "
                     f"(repack -ad, unconfined) before anything ran; blamed: {blamed}")
    elif history:
        notes.append(f"repository: {shape.commits} commits each changing {shape.changed} words "
                     f"in every one of {shape.files} text files of {shape.size >> 10} KiB, "
                     f"{mib:.0f} MiB in one pack, packed once more (repack -ad, unconfined) "
                     "before anything ran, as a user's repository is")
    else:
        notes.append(f"repository: {shape.files} text files of {shape.size // MIB} MiB in "
                     f"{shape.versions} versions and a {shape.binary // MIB} MiB binary each "
                     f"version, {mib:.0f} MiB of loose objects, packed once (repack -ad, "
                     "unconfined) before anything ran, as a user's repository is")
    notes.append("the peak is git's largest resident set (wait4), the limit the cgroup's "
                 "(no swap)")
    notes.append("the delta base cache's curve and choice per limit: bench/basecache.py")
    name = os.path.basename(os.path.abspath(args.source)).removesuffix(".git") \
        if args.source else ""
    report(f"memory_{name}" if name else "memory_history" if history else "memory",
           "Repack, gc, clone and blame inside a memory limit: Git's defaults against "
           "git-tune's values" + (f", a clone of {name}" if name else
                                  ", a long history of small objects" if history else ""),
           ("limit", "command", "git-tune chose", "Git's defaults", "git-tune's values",
            "its values, no limit", "speed-up"),
           rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
