"""Small JSON records remembered between runs, in the user's cache directory.

Keys name what a result depends on (file system, git version, host), so a
changed host never reuses a stale answer. Writes are atomic; an unreadable
or unwritable cache is treated as empty and never fails a command.
"""
import hashlib
import json
import os
import time
from typing import Any, Dict, List, Optional

from .. import ownpaths, strictjson
from ..errors import UnsafeState


def cache_dir() -> str:
    """git-tune's cache directory, made private and checked (ownpaths.UnsafeState)."""
    return ownpaths.cache_dir()


def _kind_dir(kind: str, create: bool = True) -> str:
    return ownpaths.private_dir(os.path.join(ownpaths.cache_dir(create), kind), create)


def _path(kind: str, key: str, create: bool = True) -> str:
    """The record's file (the key hashed: a path may not be UTF-8)."""
    return os.path.join(_kind_dir(kind, create),
                        hashlib.sha256(os.fsencode(key)).hexdigest()[:24] + ".json")


def _record(path: str) -> Optional[Dict[str, Any]]:
    """A stored record as git-tune wrote it, or None: absent, damaged, or not the user's
    own regular file (a cache another user could write is no cache)."""
    try:
        data = ownpaths.read_file(path)
        record = strictjson.loads(data) if data is not None else None
    except (UnsafeState, ValueError):
        return None
    return record if isinstance(record, dict) else None


def load(kind: str, key: str, max_age: float) -> Optional[Any]:
    try:
        path = _path(kind, key, create=False)
    except UnsafeState:
        return None
    record = _record(path)
    # A damaged or foreign file is an empty cache, never a traceback.
    if (record is None or record.get("key") != key
            or not strictjson.finite(record.get("time"))
            or time.time() - record["time"] > max_age):
        return None
    return record.get("value")


def forget(kind: str, key: str) -> None:
    """Drop the record of `key` (nothing where there is none)."""
    try:
        os.unlink(_path(kind, key, create=False))
    except (OSError, UnsafeState):
        pass


def save(kind: str, key: str, value: Any) -> Optional[str]:
    try:
        path = _path(kind, key)
        ownpaths.write_file(path, json.dumps({"key": key, "time": time.time(),
                                              "value": value}).encode())
        return path
    except (OSError, UnsafeState):
        return None


def keys(kind: str) -> List[str]:
    """The keys of every record of `kind` stored (fresh or not): which repositories have
    one, without probing them. Unreadable files are skipped, as load() skips them."""
    out: List[str] = []
    try:
        with os.scandir(_kind_dir(kind, create=False)) as it:
            files = sorted(e.path for e in it if e.name.endswith(".json")
                           and not e.name.startswith("."))
    except (OSError, UnsafeState):
        return out
    for path in files:
        record = _record(path)
        if record is not None and isinstance(record.get("key"), str):
            out.append(record["key"])
    return out
