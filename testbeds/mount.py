"""tmpfs, loop-mounted ext2/ext4/xfs images and the machine's own disk."""
import contextlib
import os
import shutil
import subprocess
import tempfile
from typing import Iterator

KINDS = ("tmpfs", "ext2", "ext4", "xfs", "disk")
MKFS = {"ext2": ["mkfs.ext2", "-q", "-F"], "ext4": ["mkfs.ext4", "-q", "-F"],
        "xfs": ["mkfs.xfs", "-q", "-f"]}
# Images live on the real disk, not in /tmp, which may itself be tmpfs.
IMAGE_DIR = os.environ.get("GIT_TUNE_BED_DIR", "/var/tmp")


class BedUnavailable(Exception):
    """This bed cannot be made here; the message says why."""


def _run(*cmd: str) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise BedUnavailable(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def available(kind: str) -> str:
    """'' when the bed can be made, else the reason it cannot."""
    if kind == "disk":
        return ""
    if os.geteuid() != 0:
        return f"the {kind} bed needs root to mount"
    if kind in MKFS and not shutil.which(MKFS[kind][0]):
        return f"{MKFS[kind][0]} is not installed"
    return ""


def _umount(path: str) -> None:
    if subprocess.run(["umount", path], stderr=subprocess.DEVNULL).returncode:
        subprocess.run(["umount", "-l", path], stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def bed(kind: str, size_mb: int = 256, read_only: bool = False) -> Iterator[str]:
    """Mount a fresh file system of `kind` and yield its mount point."""
    reason = available(kind)
    if reason:
        raise BedUnavailable(reason)
    if kind == "disk":
        path = tempfile.mkdtemp(prefix="git-tune-bed-", dir=IMAGE_DIR)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
        return
    mnt = tempfile.mkdtemp(prefix=f"git-tune-{kind}-")
    image = None
    mounted = False
    try:
        if kind == "tmpfs":
            _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", mnt)
        elif kind in MKFS:
            if kind == "xfs":
                size_mb = max(size_mb, 320)  # mkfs.xfs refuses below 300 MB
            fd, image = tempfile.mkstemp(prefix=f"git-tune-{kind}-", suffix=".img", dir=IMAGE_DIR)
            os.ftruncate(fd, size_mb << 20)
            os.close(fd)
            _run(*MKFS[kind], image)
            _run("mount", "-o", "loop", image, mnt)
        else:
            raise BedUnavailable(f"unknown bed kind {kind!r}")
        mounted = True
        if read_only:
            _run("mount", "-o", "remount,ro", mnt)
        yield mnt
    finally:
        if mounted:
            _umount(mnt)
        if image:
            os.unlink(image)
        os.rmdir(mnt)


def remount(path: str, read_only: bool) -> None:
    _run("mount", "-o", f"remount,{'ro' if read_only else 'rw'}", path)
