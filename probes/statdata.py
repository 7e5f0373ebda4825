"""Does the index's stat data still describe the files? Where it does not, every `git
status` re-reads and hashes them ("refresh index" taking 20-100 s in containers and on
WSL's /mnt/c): git compares each entry's cached lstat fields with the file's
(match_stat_data) and hashes every file whose fields differ, until the index is written
again. A copy that kept mtimes (cp -a, a restored backup, an image) changes inodes and
ctimes once; some mounts change them on every mount or lookup (9p, virtiofs, FUSE),
and an index shared between two systems sees the other's numbers."""
import os
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Tuple

from .. import engine
from ..errors import EngineError

SAMPLE = 200            # entries compared, spread over the index
STORM_SHARE = 0.1       # of the sample changed: more than ordinary edits would do
TIME_SHARE = 0.25       # of the probe's allowance, at most


@dataclass(frozen=True)
class StatData:
    sampled: int
    changed: int                    # entries git's default checks find changed
    fields: Tuple[str, ...]         # the fields that differ in most of those
    check: Dict[str, Any]           # engine.StatCheck: every field's count
    diagnosis: Optional[str]        # what it means and what fixes it; None when all is well


def _fields(c: engine.StatCheck) -> Tuple[str, ...]:
    counts = (("inode", c.ino), ("ctime", c.ctime_sec), ("owner", c.owner),
              ("mtime", c.mtime_sec), ("size", c.size), ("device", c.dev))
    return tuple(name for name, n in counts if c.changed and n * 2 >= c.changed)


def diagnose(c: engine.StatCheck) -> Optional[str]:
    """A sentence for a sample where many entries' stat data no longer match (a rehash
    storm in the making), None otherwise."""
    if not c.sampled or c.changed <= c.sampled * STORM_SHARE:
        return None
    fields = _fields(c)
    head = (f"{c.changed} of {c.sampled} sampled entries no longer match their files' stat "
            f"data ({', '.join(fields) or 'several fields'} differ): every git status "
            "re-reads and hashes such files until the index is written again")
    if "mtime" in fields or "size" in fields:
        return head + ("; mtimes or sizes differ too, so these files were changed or "
                       "touched (a build, a checkout, a copy that did not keep times)")
    key = ("core.trustctime=false (git then ignores ctime)" if fields == ("ctime",) else
           "core.checkStat=minimal (git then compares only mtime seconds and size)")
    return head + ("; their content is unchanged (mtime and size match). Where the index "
                   "can be written, one `git status` or `git update-index --refresh` stores "
                   "the new stat data and ends it; where it comes back (a mount that "
                   f"renumbers inodes or rewrites ctimes), {key} stops the re-reads")


def check(index_file: str, worktree: str, object_format: str = "sha1",
          allowance: Optional[float] = None) -> Optional[StatData]:
    """The index against the work tree over a sample (None: not read, with no error to
    tell: the sample was cut by time, or the index cannot be read, which the probe's
    index reading says already)."""
    if not os.path.exists(index_file):
        return None
    limits = engine.Limits(timeout=max(0.2, allowance * TIME_SHARE) if allowance else 10.0)
    try:
        c = engine.index_stat_check(index_file, worktree, SAMPLE, object_format, limits)
    except EngineError:
        return None
    return StatData(c.sampled, c.changed, _fields(c), asdict(c), diagnose(c))
