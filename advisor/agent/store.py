"""The agent's records on disk: one JSON line per git command, in files only the user
can read (0600, in a 0700 directory), bounded: past MAX_BYTES the file becomes the one
previous file (the older one is dropped), so the store never holds more than twice
MAX_BYTES (about 20,000 commands)."""
import json
import os
from dataclasses import asdict
from typing import Iterator, List

from git_tune.advisor.agent.events import Command
from git_tune.advisor.write import scopes

MAX_BYTES = 4 << 20
CURRENT, PREVIOUS = "commands.jsonl", "commands.1.jsonl"


def agent_dir() -> str:
    """git-tune's agent directory (created 0700 on first use)."""
    path = os.path.join(scopes.state_dir(), "agent")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def append(records: List[Command]) -> None:
    """Add records, in one write (a reader never sees half a line of them)."""
    if not records:
        return
    path = os.path.join(agent_dir(), CURRENT)
    try:
        if os.path.getsize(path) > MAX_BYTES:
            os.replace(path, os.path.join(agent_dir(), PREVIOUS))
    except FileNotFoundError:
        pass
    data = "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in records).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _load(path: str) -> Iterator[Command]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    raw = json.loads(line)
                    yield Command(**{**raw, "options": tuple(raw["options"])})
                except (ValueError, TypeError):
                    continue            # a line cut by a crash, or from another version
    except FileNotFoundError:
        return


def records() -> List[Command]:
    """Every stored record, oldest first."""
    d = agent_dir()
    return [*_load(os.path.join(d, PREVIOUS)), *_load(os.path.join(d, CURRENT))]


def size() -> int:
    d = agent_dir()
    return sum(os.path.getsize(os.path.join(d, f)) for f in (CURRENT, PREVIOUS)
               if os.path.exists(os.path.join(d, f)))


def clear() -> None:
    for name in (CURRENT, PREVIOUS):
        try:
            os.unlink(os.path.join(agent_dir(), name))
        except FileNotFoundError:
            pass
