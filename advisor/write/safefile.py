"""Atomic file replacement, backups with exact bytes, and a lock between runs."""
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from typing import Iterator, List, Optional

from git_tune.errors import ConfigWriteError, Locked
from git_tune.probes import scratch


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
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, final_mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
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
           errno.EDQUOT: "the disk quota is exceeded"}.get(e.errno, e.strerror or str(e))
    return f"cannot {action} '{path}': {why}"


@contextlib.contextmanager
def lock(directory: str, timeout: float = 60.0) -> Iterator[None]:
    """Serialise git-tune runs that write configuration."""
    try:
        makedirs(directory, 0o700)
        fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
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
        makedirs(os.path.dirname(dest), 0o700)
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


def restore_one(entry: dict, only_changed: bool = False) -> List[str]:
    """Put one backed-up file back to its exact bytes (or remove it if it was absent).

    only_changed: leave a file alone when it already holds those bytes (a rollback
    rewrites nothing it did not change).
    """
    path = entry["path"]
    try:
        if only_changed and digest(path) == (entry.get("sha256") if entry["existed"] else None):
            return []
        if entry["existed"]:
            with open(entry["copy"], "rb") as f:
                write_atomic(path, f.read(), entry.get("mode", 0o644))
        elif os.path.lexists(path):
            remove(path)
    except OSError as e:
        raise ConfigWriteError(describe_os_error(e, "restore", path)) from None
    return [path]


def restore(backup_dir: str, only_changed: bool = False) -> List[str]:
    """Put every file of a backup back to its exact bytes."""
    with open(os.path.join(backup_dir, "manifest.json")) as f:
        manifest = json.load(f)
    return [p for entry in manifest["files"] for p in restore_one(entry, only_changed)]


KEEP_BACKUPS = 10


def prune_backups(root: str, keep: set, newest: int = KEEP_BACKUPS) -> None:
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
