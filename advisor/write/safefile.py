"""Atomic file replacement, backups with exact bytes, and a lock between runs."""
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Set

from ... import ownpaths
from ...errors import ConfigWriteError, Locked, UnsafeState
from ...probes import scratch


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def makedirs(directory: str, mode: int = 0o755) -> None:
    """Create directory and any missing parents with `mode` less the umask (os.makedirs
    would give the parents 0777 less the umask: world-writable under umask 000)."""
    directory = os.path.abspath(directory)
    if os.path.isdir(directory):
        return
    makedirs(os.path.dirname(directory), mode)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, mode)


TEMP_PREFIX = ".git-tune-tmp-"


def write_atomic(path: str, data: bytes, mode: Optional[int] = None) -> None:
    """Replace path with data: temporary file in the same directory, fsync, rename, fsync dir.

    Killed at any instant, path holds either the old or the new bytes. A symbolic link
    (a dotfile manager's ~/.gitconfig) stays a link: its target gets the bytes. An
    existing file keeps its mode; a new one gets `mode` (default rw-r--r--) less the umask.
    """
    path = os.path.realpath(path)
    directory = os.path.dirname(path)
    try:
        keep = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        keep = None
    final_mode = mode if mode is not None else keep if keep is not None else 0o644 & ~_umask()
    with scratch.made_here(directory, TEMP_PREFIX):    # interrupted anywhere: no temporary left
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, final_mode)
        os.replace(tmp, path)
    _fsync_dir(directory)


def read_regular(path: str, size: int, follow: bool = True,
                 dir_fd: Optional[int] = None) -> Optional[bytes]:
    """The first `size` bytes of a regular file (fewer where it is shorter); None where
    it cannot be opened or is anything else. Opened non-blocking and checked on the
    descriptor, so a FIFO put in its place (a cloned repository, a spool directory are
    untrusted) is never waited on; `follow=False` refuses a symbolic link as well.
    `dir_fd`: `path` is a name relative to that directory."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while size > 0:
            chunk = os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def require_regular(path: str) -> None:
    """ConfigWriteError unless path (through links) is a regular file or absent: a target
    such as GIT_CONFIG_GLOBAL=/dev/null (a CI idiom) is a device, and replacing it by
    rename would put a regular file where the system's /dev/null was."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ConfigWriteError(describe_os_error(e, "read", path) + "; nothing was changed") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigWriteError(f"'{path}' is not a regular file: git-tune writes only regular "
                               "config files (a GIT_CONFIG_GLOBAL or GIT_CONFIG_SYSTEM pointing "
                               "at a device?); nothing was changed")


# git's own lock protocol (lockfile.c): `<file>.lock` created with O_EXCL is the lock, the
# new bytes are written into it, and renaming it over the file is the commit. `git config`
# gives up at once on a lock it finds (exit 255, nothing lost: it said it failed); git-tune
# waits briefly with git's exponential backoff, then gives up the same way.
LOCK_SUFFIX = ".lock"
GIT_LOCK_WAIT = 2.0


class GitLock:
    """A held `<file>.lock`: read the file's bytes under it, stage new bytes, commit."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path                    # the file itself (links resolved)
        self.lock_path = path + LOCK_SUFFIX
        self._fd: Optional[int] = fd
        self.staged = False

    def read(self) -> Optional[bytes]:
        """The file's bytes now (None when absent): nobody who honours the lock can
        change them until this lock is committed or released."""
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def _held(self) -> int:
        """The lock file's descriptor; RuntimeError once the lock is committed or released."""
        if self._fd is None:
            raise RuntimeError(f"'{self.lock_path}' is no longer held")
        return self._fd

    def stage(self, data: bytes) -> None:
        """The lock file holds exactly `data` (not yet the file's)."""
        fd = self._held()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        self.staged = True

    def commit(self, mode: Optional[int] = None) -> None:
        """Rename the staged lock over the file (its mode kept, a new one `mode` or
        rw-r--r-- less the umask), fsynced as write_atomic does."""
        fd = self._held()
        try:
            keep = os.stat(self.path).st_mode & 0o7777
        except FileNotFoundError:
            keep = None
        os.fsync(fd)
        os.fchmod(fd, mode if mode is not None else keep if keep is not None
                  else 0o644 & ~_umask())
        os.replace(self.lock_path, self.path)
        os.close(fd)
        self._fd = None
        _fsync_dir(os.path.dirname(self.path))

    def remove_file(self) -> None:
        """The file goes away (it did not exist before git-tune), then the lock."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.release()

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.lock_path)


@contextlib.contextmanager
def git_lock(path: str, ledger: str, wait: float = GIT_LOCK_WAIT) -> Iterator[GitLock]:
    """Hold git's lock on a config file (through a link, on its target, as git does);
    Locked when another writer keeps it past `wait`. Released on exit unless committed.

    Called only under git-tune's own lock (`lock()`), so no other git-tune holds one of
    these: a `<file>.lock` that `ledger` (a directory of git-tune's state) records as
    git-tune's, by device and inode, was left by a git-tune that was killed, and is
    removed. Any other is git's, and is waited for, never removed."""
    target = os.path.realpath(path)
    require_regular(target)
    lock_path = target + LOCK_SUFFIX
    record = os.path.join(ledger, hashlib.sha256(os.fsencode(lock_path)).hexdigest()[:32])
    if not os.path.lexists(lock_path):
        # A record whose lock is gone names an inode that may be given to git's next
        # lock; the temporary file it may name still holds it (apply removes stale
        # temporary files only once it holds its locks).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(record)
    deadline, backoff = time.monotonic() + wait, 0.001
    while True:
        try:
            # A lock there is checked against the ledger before this attempt's record
            # takes the ledger's place.
            if os.path.lexists(lock_path):
                raise FileExistsError(lock_path)
            fd = _made_lock(lock_path, record)
            break
        except FileExistsError:
            if _left_by_dead_git_tune(lock_path, record):
                continue
            if time.monotonic() >= deadline:
                raise Locked(f"'{lock_path}' exists: another git is writing '{target}' (if "
                             "none is running, a crashed one left it: remove it); "
                             "nothing was changed") from None
            time.sleep(backoff)
            backoff = min(0.1, backoff * 2)
        except OSError as e:
            raise ConfigWriteError(describe_os_error(e, "lock", target)
                                   + "; nothing was changed") from None
    held = GitLock(target, fd)
    try:
        yield held
    finally:
        held.release()
        with contextlib.suppress(OSError):
            os.unlink(record)


def _made_lock(lock_path: str, record: str) -> int:
    """_create_lock, and where it is interrupted (Ctrl-C, SIGTERM) at any point, the lock
    it may have made removed: the ledger names it, so git's own lock is never taken."""
    try:
        return _create_lock(lock_path, record)
    except OSError:
        raise
    except BaseException:
        _left_by_dead_git_tune(lock_path, record)
        with contextlib.suppress(OSError):
            os.unlink(record)
        raise


def _create_lock(lock_path: str, record: str) -> int:
    """Create `lock_path` exclusively, its device and inode in `record` *before* it
    exists: the file is made under a temporary name, recorded, then linked into place
    (link, like O_EXCL, fails when the lock exists), so a kill at any instant leaves
    no lock of git-tune's that the ledger does not name. Where the file system has no
    hard links, O_EXCL, recorded right after."""
    ownpaths.private_dir(os.path.dirname(record))
    directory = os.path.dirname(lock_path)
    with scratch.made_here(directory, TEMP_PREFIX):    # interrupted anywhere: no temporary left
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=directory)
        try:
            st = os.fstat(fd)
            _write_record(record, lock_path, st)
            try:
                os.link(tmp, lock_path)
            except FileExistsError:
                # The record goes before the inode it names is freed: git's next lock may
                # be given that very inode number.
                os.unlink(record)
                os.close(fd)
                raise
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    os.close(fd)
                    raise
                os.close(fd)
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask())
                _write_record(record, lock_path, os.fstat(fd))
            os.fchmod(fd, 0o666 & ~_umask())
            return fd
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _write_record(record: str, lock_path: str, st: os.stat_result) -> None:
    with open(record, "w") as f:
        json.dump({"lock": lock_path, "dev": st.st_dev, "ino": st.st_ino}, f)
        f.flush()
        os.fsync(f.fileno())


def _left_by_dead_git_tune(lock_path: str, record: str) -> bool:
    """Remove lock_path if the ledger's record names this very file (same device and
    inode); True when it was removed."""
    try:
        with open(record) as f:
            mine = json.load(f)
        st = os.lstat(lock_path)
    except (OSError, ValueError):
        return False
    if (mine.get("lock"), mine.get("dev"), mine.get("ino")) != (lock_path, st.st_dev, st.st_ino):
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock_path)
    return True


def _fsync_dir(directory: str) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def remove(path: str) -> None:
    """Remove a file git-tune wrote (through a link: the link itself stays the user's)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.realpath(path))


def remove_stale_temps(directory: str, older_than: float = 3600.0) -> None:
    """Temporary files of runs that were killed (SIGKILL) before their rename: those of
    processes that no longer run, and pid-less ones (older git-tune) after an hour."""
    scratch.remove_dead(directory, TEMP_PREFIX)
    now = time.time()
    for n in scratch.listdir(directory):
        path = os.path.join(directory, n)
        if n.startswith(TEMP_PREFIX) and not n[len(TEMP_PREFIX):].split("-", 1)[0].isdigit():
            with contextlib.suppress(OSError):
                if now - os.lstat(path).st_mtime > older_than:
                    os.unlink(path)


def describe_os_error(e: OSError, action: str, path: str) -> str:
    why = {errno.EROFS: "the file system is read-only", errno.ENOSPC: "the disk is full",
           errno.EACCES: "permission denied", errno.EPERM: "permission denied",
           errno.EDQUOT: "the disk quota is exceeded"}.get(e.errno or 0, e.strerror or str(e))
    return f"cannot {action} '{path}': {why}"


@contextlib.contextmanager
def lock(directory: str, timeout: float = 60.0) -> Iterator[None]:
    """Serialise git-tune runs that write configuration."""
    try:
        ownpaths.private_dir(directory)
        fd = os.open(os.path.join(directory, "lock"),
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise ConfigWriteError(describe_os_error(e, "create the lock in", directory)
                               + "; nothing was changed") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Locked(f"another git-tune has held '{directory}/lock' for "
                                 f"{timeout:.0f} s; nothing was changed") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def backup(files: List[str], root: str, label: str) -> str:
    """Copy each file's exact bytes (or note its absence) into a new backup directory.

    Through a link the target's bytes are copied; restoring writes them back through it.
    """
    # Nanoseconds first, so names sort by time.
    dest = os.path.join(root, "backups", f"{time.time_ns():020d}-{label}-{os.getpid()}")
    try:
        ownpaths.private_dir(os.path.dirname(dest))
        os.mkdir(dest, 0o700)
        entries = []
        for i, path in enumerate(files):
            if os.path.exists(path):
                copy = os.path.join(dest, f"{i}.bak")
                shutil.copyfile(path, copy)
                entries.append({"path": path, "existed": True, "copy": copy, "sha256": digest(copy),
                                "mode": os.stat(path).st_mode & 0o7777})
            else:
                entries.append({"path": path, "existed": False})
        write_atomic(os.path.join(dest, "manifest.json"),
                     json.dumps({"label": label, "time": time.time(), "files": entries},
                                indent=1).encode(), mode=0o600)
    except OSError as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise ConfigWriteError(describe_os_error(e, "write a backup to", dest)
                               + "; nothing was changed") from None
    return dest


def digest(path: str) -> Optional[str]:
    """SHA-256 of a file's bytes (through a link), None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def restore_one(entry: Dict[str, Any], only_changed: bool = False) -> List[str]:
    """Put one backed-up file back to its exact bytes (or remove it if it was absent).

    only_changed: leave a file alone when it already holds those bytes (a rollback
    rewrites nothing it did not change).
    """
    path = entry["path"]
    try:
        if only_changed and digest(path) == (entry.get("sha256") if entry["existed"] else None):
            return []
        if entry["existed"]:
            write_atomic(path, backed_up_bytes(entry), entry.get("mode", 0o644))
        elif os.path.lexists(path):
            remove(path)
    except OSError as e:
        raise ConfigWriteError(describe_os_error(e, "restore", path)) from None
    return [path]


def backed_up_bytes(entry: Dict[str, Any]) -> bytes:
    """A backup's bytes, checked against the digest recorded when it was made: a backup
    file changed since (by anyone) is never written into a config file."""
    copy = entry.get("copy")
    if not isinstance(copy, str) or not ownpaths.under(copy, os.path.join(ownpaths.state_dir(),
                                                                           "backups")):
        raise UnsafeState(f"the backup of '{entry.get('path')}' is named at {copy!r}, outside "
                          "git-tune's backups; nothing was restored from it")
    try:
        data = ownpaths.read_file(copy)
    except OSError as e:
        raise ConfigWriteError(describe_os_error(e, "read the backup", copy)) from None
    if data is None:
        raise ConfigWriteError(f"cannot read the backup '{copy}': it is gone; nothing was "
                               "restored from it")
    if not entry.get("sha256") or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ConfigWriteError(f"the backup '{entry['copy']}' of '{entry['path']}' has changed "
                               "since git-tune made it (its SHA-256 no longer matches); "
                               "nothing was restored from it")
    return data


def restore(backup_dir: str, only_changed: bool = False) -> List[str]:
    """Put every file of a backup back to its exact bytes."""
    with open(os.path.join(backup_dir, "manifest.json")) as f:
        manifest = json.load(f)
    return [p for entry in manifest["files"] for p in restore_one(entry, only_changed)]


KEEP_BACKUPS = 10


def prune_backups(root: str, keep: Set[str], newest: int = KEEP_BACKUPS) -> None:
    """Remove backups no state entry needs, but for the newest few (a short history)."""
    dirs = sorted(os.path.join(root, "backups", n)
                  for n in scratch.listdir(os.path.join(root, "backups")))
    for d in dirs[:-newest] if newest else dirs:
        if d not in keep:
            shutil.rmtree(d, ignore_errors=True)


def backups(root: str, label: Optional[str] = None) -> List[str]:
    """Backup directories, newest last."""
    base = os.path.join(root, "backups")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for n in names:
        manifest = os.path.join(base, n, "manifest.json")
        if not os.path.exists(manifest):
            continue
        with open(manifest) as f:
            found = json.load(f)["label"]
        if label is None or found == label:
            out.append(os.path.join(base, n))
    return out
