"""The agent's records on disk: one JSON line per git command, in files only the user
can read (0600, in a 0700 directory), bounded: past MAX_BYTES the file becomes the one
previous file (the older one is dropped), so the store never holds more than twice
MAX_BYTES (about 20,000 commands)."""
import json
import os
from dataclasses import asdict
from typing import Iterator, List, Optional

from ... import ownpaths, strictjson
from .events import Command, from_stored
from ..write import scopes

MAX_BYTES = 4 << 20
CURRENT, PREVIOUS = "commands.jsonl", "commands.1.jsonl"


def agent_dir() -> str:
    """git-tune's agent directory (created 0700 on first use)."""
    return ownpaths.private_dir(os.path.join(scopes.state_dir(), "agent"))


def append(records: List[Command]) -> None:
    """Add records, each a line of its own. A write cut short by a kill (the kernel may
    stop a write between pages) leaves half a line: it is ended before the next write,
    so the record written again after it is whole (the half line is skipped on reading)."""
    if not records:
        return
    path = os.path.join(agent_dir(), CURRENT)
    try:
        if os.lstat(path).st_size > MAX_BYTES:
            os.replace(path, os.path.join(agent_dir(), PREVIOUS))
    except FileNotFoundError:
        pass
    data = "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in records).encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _load(path: str) -> Iterator[Command]:
    """The file's valid records; a line that is not one (cut by a crash, from another
    version, damaged) is skipped. A file that is not the user's own is refused."""
    data = ownpaths.read_file(path, limit=4 * MAX_BYTES)
    for line in (data or b"").splitlines():
        try:
            record = from_stored(strictjson.loads(line))
        except ValueError:
            continue
        if record is not None:
            yield record


def records() -> List[Command]:
    """Every stored record, oldest first."""
    d = agent_dir()
    return [*_load(os.path.join(d, PREVIOUS)), *_load(os.path.join(d, CURRENT))]


def size() -> int:
    d = agent_dir()
    return sum(os.lstat(os.path.join(d, f)).st_size for f in (CURRENT, PREVIOUS)
               if os.path.lexists(os.path.join(d, f)))


def clear() -> None:
    for name in (CURRENT, PREVIOUS):
        try:
            os.unlink(os.path.join(agent_dir(), name))
        except FileNotFoundError:
            pass


def last_record_at() -> Optional[float]:
    """When a record was last stored (epoch seconds), None where none ever was."""
    try:
        return os.lstat(os.path.join(agent_dir(), CURRENT)).st_mtime
    except FileNotFoundError:
        return None
