"""Reading /proc and /sys below a root, so tests can use a fake tree."""
import os
from typing import List, Optional


class SysRoot:
    """Paths under a root directory ('/' on a real host)."""

    def __init__(self, root: str = "/") -> None:
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *(p.lstrip("/") for p in parts))

    def read(self, *parts: str) -> Optional[str]:
        """The stripped text of a file, or None when it does not exist or cannot be read."""
        try:
            with open(self.path(*parts)) as f:
                return f.read().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def exists(self, *parts: str) -> bool:
        return os.path.exists(self.path(*parts))

    def listdir(self, *parts: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(*parts)))
        except OSError:
            return []


def read_int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
