"""Scratch directories on a given file system, always removed.

A scratch directory is named after the process that made it
(`.git-tune-scratch-<pid>-XXXX`), so that a run killed with SIGKILL, which
cannot clean up after itself, is cleaned up by the next run in the same
place: a scratch directory whose process is gone is removed before a new one
is made.
"""
import contextlib
import os
import shutil
import tempfile
from typing import Iterable, Iterator, List, Optional, Tuple

PREFIX = ".git-tune-scratch-"


def _dev(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.major(st.st_dev), os.minor(st.st_dev)


def owner_alive(name: str, prefix: str) -> bool:
    """Whether the process a `<prefix><pid>-...` name was made by still runs.

    Names that carry no pid (older git-tune) count as alive: they are left alone.
    """
    pid_text = name[len(prefix):].split("-", 1)[0]
    if not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True   # another user's live process
    return True


def listdir(directory: str) -> List[str]:
    """The names in directory ([] when it cannot be listed)."""
    try:
        return os.listdir(directory)
    except OSError:
        return []


def remove_dead(directory: str, prefix: str = PREFIX) -> None:
    """Remove what processes that no longer run left in directory under `prefix`."""
    for name in listdir(directory):
        if name.startswith(prefix) and not owner_alive(name, prefix):
            path = os.path.join(directory, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


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
        remove_dead(c)
        try:
            made = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=c)
            break
        except OSError:
            continue
    try:
        yield made
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)
