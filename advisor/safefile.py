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

from git_tune.errors import ConfigWriteError, GitTuneError


class Locked(GitTuneError):
    """Another git-tune is writing configuration."""

    exit_code = 7


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace path with data: temporary file in the same directory, fsync, rename, fsync dir.

    Killed at any instant, path holds either the old or the new bytes.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
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


TEMP_PREFIX = ".git-tune-tmp-"


def remove_stale_temps(directory: str, older_than: float = 60.0) -> None:
    """Temporary files of a run that was killed (SIGKILL) before its rename."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    now = time.time()
    for n in names:
        if n.startswith(TEMP_PREFIX):
            path = os.path.join(directory, n)
            with contextlib.suppress(OSError):
                if now - os.stat(path).st_mtime > older_than:
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
        os.makedirs(directory, exist_ok=True)
        fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
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
    """Copy each file's exact bytes (or note its absence) into a new backup directory."""
    # Nanoseconds first, so names sort by time.
    dest = os.path.join(root, "backups", f"{time.time_ns():020d}-{label}-{os.getpid()}")
    try:
        os.makedirs(dest)
        entries = []
        for i, path in enumerate(files):
            if os.path.exists(path):
                copy = os.path.join(dest, f"{i}.bak")
                shutil.copy2(path, copy)
                with open(copy, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                entries.append({"path": path, "existed": True, "copy": copy, "sha256": digest,
                                "mode": os.stat(path).st_mode & 0o7777})
            else:
                entries.append({"path": path, "existed": False})
        write_atomic(os.path.join(dest, "manifest.json"),
                     json.dumps({"label": label, "time": time.time(), "files": entries},
                                indent=1).encode())
    except OSError as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise ConfigWriteError(describe_os_error(e, "write a backup to", dest)
                               + "; nothing was changed") from None
    return dest


def restore_one(entry: dict) -> List[str]:
    """Put one backed-up file back to its exact bytes (or remove it if it was absent)."""
    path = entry["path"]
    try:
        if entry["existed"]:
            with open(entry["copy"], "rb") as f:
                write_atomic(path, f.read(), entry.get("mode", 0o644))
        elif os.path.exists(path):
            os.unlink(path)
    except OSError as e:
        raise ConfigWriteError(describe_os_error(e, "restore", path)) from None
    return [path]


def restore(backup_dir: str) -> List[str]:
    """Put every file of a backup back to its exact bytes."""
    with open(os.path.join(backup_dir, "manifest.json")) as f:
        manifest = json.load(f)
    return [p for entry in manifest["files"] for p in restore_one(entry)]


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
