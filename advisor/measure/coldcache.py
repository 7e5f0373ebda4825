"""Making a cache cold, honestly: drop everything as root, or evict file data only."""
import os
from typing import Iterable, Tuple


def drop_caches() -> Tuple[bool, str]:
    """Drop page cache, dentries and inodes (root only). Returns (done, why not)."""
    if os.geteuid() != 0:
        return False, "not root: only file data can be evicted (posix_fadvise); metadata stays hot"
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True, ""
    except OSError as e:
        return False, f"cannot write /proc/sys/vm/drop_caches: {e.strerror}"


def evict(paths: Iterable[str]) -> int:
    """posix_fadvise(DONTNEED) each file's data; returns how many were evicted."""
    done = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            done += 1
        finally:
            os.close(fd)
    return done


def make_cold(paths: Iterable[str]) -> str:
    """Cold as this process may make it; returns what was done, for the report."""
    dropped, why = drop_caches()
    if dropped:
        return "dropped page cache, dentries and inodes"
    evict(paths)
    return f"evicted file data only ({why})"
