"""git-tune's own directories and files: made private, checked before use, never followed.

Every directory git-tune keeps something in (state, agent, spool, backups, cache,
runtime) is made here, 0700 whatever the umask, and checked with lstat each time it is
named:

    - a directory, not a symbolic link;
    - owned by the user;
    - not writable by group or others.

Missing parents are made 0700 too (the XDG base directory rule); parents that exist
are never chmod-ed, only checked: each must be owned by the user or by root, and one
that others may write must be sticky (/tmp), or another user could put a directory of
their own in the place of git-tune's. Whatever fails a check is refused with
UnsafeState, which names the path and how to fix it; nothing is read from it or
written to it.

Files are read and written relative to a checked directory: read with O_NOFOLLOW and
checked on the descriptor (a regular file the user owns), written through a temporary
file made O_EXCL|O_NOFOLLOW in the same directory and renamed into place.
"""
import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from typing import Iterator, List, Optional

import platformdirs

from .errors import UnsafeState

PRIVATE = 0o700
FILE_MODE = 0o600


def _why(st: os.stat_result, path: str) -> Optional[str]:
    """What is wrong with `path` (lstat `st`) as one of git-tune's own directories."""
    if stat.S_ISLNK(st.st_mode):
        return f"'{path}' is a symbolic link, not git-tune's own directory"
    if not stat.S_ISDIR(st.st_mode):
        return f"'{path}' is not a directory"
    if st.st_uid != os.geteuid():
        return f"'{path}' belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"'{path}' can be written by other users (mode {st.st_mode & 0o7777:04o})"
    return None


def _check_parent(path: str) -> None:
    """An existing parent of one of git-tune's directories: owned by the user or root,
    and sticky where others may write it."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UnsafeState(f"cannot examine '{path}': {e.strerror}") from None
    if st.st_uid not in (0, os.geteuid()):
        raise UnsafeState(f"'{path}' belongs to uid {st.st_uid}: another user could replace "
                          "git-tune's directories in it; point GIT_TUNE_STATE_DIR, "
                          "XDG_STATE_HOME or XDG_CACHE_HOME at a directory of your own")
    others_write = st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getegid())
    if others_write and not st.st_mode & stat.S_ISVTX:
        raise UnsafeState(f"'{path}' can be written by other users and is not sticky (mode "
                          f"{st.st_mode & 0o7777:04o}): another user could replace git-tune's "
                          f"directories in it; chmod o-w,g-w '{path}', or point "
                          "GIT_TUNE_STATE_DIR, XDG_STATE_HOME or XDG_CACHE_HOME elsewhere")


def private_dir(path: str, create: bool = True) -> str:
    """`path` as one of git-tune's own directories: made 0700 with its missing parents,
    or checked where it exists (UnsafeState where it fails). Returns the absolute path;
    with `create` false, a missing directory is left missing (a reader finds nothing)."""
    path = os.path.abspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UnsafeState(f"cannot examine '{path}': {e.strerror}") from None
    if st is None and not create:
        return path
    parent = os.path.dirname(path)
    if st is None and parent != path and not os.path.lexists(parent):
        private_dir(parent)
    elif parent != path:
        _check_parent(parent)
    if st is None:
        try:
            os.mkdir(path, PRIVATE)
        except FileExistsError:
            pass                # made this instant by another git-tune: checked below
        except OSError as e:
            raise UnsafeState(f"cannot create '{path}': {e.strerror}") from None
        st = os.lstat(path)
    why = _why(st, path)
    if why:
        raise UnsafeState(f"{why}; git-tune refuses to use it. Remove it (after checking "
                          "what is in it) and git-tune makes it anew, private to you")
    if st.st_mode & 0o777 != PRIVATE:
        os.chmod(path, PRIVATE)     # git-tune's own: readable by nobody else either
    return path


def open_dir(path: str) -> int:
    """A descriptor of one of git-tune's existing directories, opened without following
    a link and checked on the descriptor (the name cannot be swapped after the check)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeState(f"'{path}' is not git-tune's own directory (a link or a "
                              "file); git-tune refuses to use it") from None
        raise UnsafeState(f"cannot open '{path}': {e.strerror}") from None
    why = _why(os.fstat(fd), path)
    if why:
        os.close(fd)
        raise UnsafeState(f"{why}; git-tune refuses to use it")
    return fd


def read_file(path: str, limit: int = 16 << 20) -> Optional[bytes]:
    """The bytes of one of git-tune's own files (None where it does not exist). A link,
    anything but a regular file, or a file another user owns is refused (UnsafeState);
    a file larger than `limit` is too (it is no file git-tune wrote)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeState(f"'{path}' is a symbolic link, not git-tune's own file; "
                              "git-tune refuses to read it") from None
        raise UnsafeState(f"cannot read '{path}': {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise UnsafeState(f"'{path}' is not a regular file of yours; git-tune refuses "
                              "to read it (remove it, after checking it)")
        if st.st_size > limit:
            raise UnsafeState(f"'{path}' is {st.st_size} bytes, larger than any file "
                              "git-tune writes; git-tune refuses to read it")
        chunks: List[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def write_file(path: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace one of git-tune's own files: a temporary file made O_EXCL|O_NOFOLLOW in
    its (checked) directory, fsynced, renamed over the name. Killed at any instant, the
    name holds the old bytes or the new ones."""
    directory = private_dir(os.path.dirname(os.path.abspath(path)))
    fd, tmp = tempfile.mkstemp(prefix=".git-tune-tmp-%d-" % os.getpid(), dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def try_lock(path: str) -> Optional[int]:
    """An exclusive flock on one of git-tune's own lock files (made 0600, never through a
    link), or None where another process holds it. Held until the descriptor is closed
    or the process ends, however."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def dir_fd(path: str) -> Iterator[int]:
    fd = open_dir(path)
    try:
        yield fd
    finally:
        os.close(fd)


def under(path: str, root: str) -> bool:
    """Whether `path`, links resolved, lies inside `root` (links resolved)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real != base and os.path.commonpath([real, base]) == base


# The roots. Each is checked (and made) when named.

def state_dir(create: bool = True) -> str:
    """Where git-tune records what it wrote, its backups and the agent's state."""
    return private_dir(os.environ.get("GIT_TUNE_STATE_DIR")
                       or platformdirs.user_state_dir("git-tune"), create)


def cache_dir(create: bool = True) -> str:
    """Where git-tune keeps what it measured (calibrations, probes) and the demo."""
    return private_dir(os.environ.get("GIT_TUNE_CACHE_DIR")
                       or platformdirs.user_cache_dir("git-tune"), create)


def runtime_dir() -> Optional[str]:
    """$XDG_RUNTIME_DIR where it is the user's own (owned by the user, 0700: memory,
    gone at logout), else None."""
    path = os.environ.get("XDG_RUNTIME_DIR")
    if not path or not os.path.isabs(path):
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if _why(st, path) or st.st_mode & 0o077:
        return None
    return path
