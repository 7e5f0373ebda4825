"""Scratch directories on a given file system, always removed."""
import contextlib
import os
import shutil
import tempfile
from typing import Iterable, Iterator, Optional, Tuple

PREFIX = ".git-tune-scratch-"


def _dev(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.major(st.st_dev), os.minor(st.st_dev)


@contextlib.contextmanager
def scratch_dir(candidates: Iterable[str], same_fs_as: Optional[str] = None) -> Iterator[Optional[str]]:
    """Yield a new directory in the first writable candidate on the same file
    system as `same_fs_as` (None when there is none: a read-only file
    system, no permission). The directory and everything in it is removed
    on exit, including on Ctrl-C and on errors."""
    want = _dev(same_fs_as) if same_fs_as else None
    made = None
    for c in candidates:
        if not c or not os.path.isdir(c) or (want and _dev(c) != want):
            continue
        try:
            made = tempfile.mkdtemp(prefix=PREFIX, dir=c)
            break
        except OSError:
            continue
    try:
        yield made
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)
