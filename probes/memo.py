"""Small JSON records remembered between runs, in the user's cache directory.

Keys name what a result depends on (file system, git version, host), so a
changed host never reuses a stale answer. Writes are atomic; an unreadable
or unwritable cache is treated as empty and never fails a command.
"""
import hashlib
import json
import os
import tempfile
import time
from typing import Any, List, Optional

import platformdirs


def cache_dir() -> str:
    return os.environ.get("GIT_TUNE_CACHE_DIR") or platformdirs.user_cache_dir("git-tune")


def _path(kind: str, key: str) -> str:
    digest = hashlib.sha256(os.fsencode(key)).hexdigest()[:24]   # a path may not be UTF-8
    return os.path.join(cache_dir(), kind, digest + ".json")


def load(kind: str, key: str, max_age: float) -> Optional[Any]:
    try:
        with open(_path(kind, key)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    # A damaged or foreign file is an empty cache, never a traceback.
    if (not isinstance(record, dict) or record.get("key") != key
            or not isinstance(record.get("time"), (int, float))
            or time.time() - record["time"] > max_age):
        return None
    return record.get("value")


def save(kind: str, key: str, value: Any) -> Optional[str]:
    path = _path(kind, key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "time": time.time(), "value": value}, f)
        os.replace(tmp, path)
        return path
    except OSError:
        return None


def keys(kind: str) -> List[str]:
    """The keys of every record of `kind` stored (fresh or not): which repositories have
    one, without probing them. Unreadable files are skipped, as load() skips them."""
    out = []
    try:
        with os.scandir(os.path.join(cache_dir(), kind)) as it:
            # Regular files only: a FIFO named like a record would block the open.
            files = sorted(e.path for e in it if e.name.endswith(".json")
                           and not e.name.startswith(".") and e.is_file(follow_symlinks=False))
    except OSError:
        return out
    for path in files:
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("key"), str):
            out.append(record["key"])
    return out
