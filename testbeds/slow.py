"""Beds with injected latency: the latfs FUSE server and an HDD-like block device.

latfs (testbeds/latfs/latfs.c) is built on first use with libfuse3. The
HDD-like bed is a real ext4 on a loop device whose backing file is an
nbdkit disk behind nbdfuse, with nbdkit's delay filter (milliseconds per
request) and noparallel filter (one request at a time, like one spindle).
"""
import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator, Optional

from testbeds.mount import BedUnavailable, IMAGE_DIR, _run, _umount

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")


@dataclass(frozen=True)
class Latency:
    """Per-operation delays in microseconds and the kernel's cache lifetimes in seconds."""

    lookup_us: int = 1000
    open_us: int = 1000
    read_us: int = 200
    write_us: int = 200
    create_us: int = 1000
    fsync_us: int = 2000
    readdir_us: int = 1000
    attr_timeout: float = 1.0
    entry_timeout: float = 1.0
    negative_timeout: float = 0.0
    unstable_ctime: int = 0      # 1: a new ctime at each call (a rehash storm)
    unstable_ino: int = 0        # 1: a new inode number at each call
    max_threads: int = 10        # the server's threads at most (libfuse's own default)

    def options(self) -> str:
        return ",".join(f"{k}={getattr(self, k)}" for k in self.__dataclass_fields__)


# Presets: NFS with lookupcache=positive (misses always go to the server),
# NFS with caching off, and a fast local-like bed.
NFS_POSITIVE = Latency()
NFS_NOCACHE = Latency(attr_timeout=0, entry_timeout=0, negative_timeout=0)
# Attributes never cached (NFS actimeo=0), entries for 1 s.
NFS_NOAC = Latency(attr_timeout=0)
LOCAL_LIKE = Latency(lookup_us=5, open_us=5, read_us=5, write_us=5, create_us=10, fsync_us=100,
                     readdir_us=5, attr_timeout=1, entry_timeout=1, negative_timeout=1)
# A fast bed whose ctimes never match git's index: every status rehashes (issue #32).
UNSTABLE_CTIME = Latency(lookup_us=0, open_us=0, read_us=0, write_us=0, create_us=0, fsync_us=0,
                         readdir_us=0, attr_timeout=0, entry_timeout=1, negative_timeout=1,
                         unstable_ctime=1)
UNSTABLE_INO = dataclasses.replace(UNSTABLE_CTIME, unstable_ctime=0, unstable_ino=1)


def build_latfs() -> str:
    """Compile latfs once (cc + pkg-config fuse3); returns the binary's path."""
    binary = os.path.join(BUILD, "latfs")
    source = os.path.join(HERE, "latfs", "latfs.c")
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(source):
        return binary
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    if flags.returncode:
        raise BedUnavailable("libfuse3-dev is not installed (pkg-config fuse3 failed)")
    os.makedirs(BUILD, exist_ok=True)
    # Built beside it and renamed into place: a second bench starting meanwhile runs the
    # old binary or the new one, never one half written ("Text file busy").
    tmp = f"{binary}.{os.getpid()}"
    try:
        _run("cc", "-std=c11", "-O2", "-Wall", "-o", tmp, source, *flags.stdout.split())
        os.replace(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return binary


def _need_root_and(*tools: str) -> None:
    if os.geteuid() != 0:
        raise BedUnavailable("FUSE and loop beds need root here")
    if not os.path.exists("/dev/fuse"):
        raise BedUnavailable("no /dev/fuse")
    for t in tools:
        if not shutil.which(t):
            raise BedUnavailable(f"{t} is not installed")


def _wait_for(path: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise BedUnavailable(f"'{path}' did not appear within {timeout:.0f} s")
        time.sleep(0.02)


@contextlib.contextmanager
def latfs(latency: Latency = NFS_POSITIVE) -> Iterator[str]:
    """Mount latfs over a fresh backing directory on the disk; yields the mount point."""
    _need_root_and("fusermount3")
    binary = build_latfs()
    work = tempfile.mkdtemp(prefix="git-tune-latfs-", dir=IMAGE_DIR)
    backing, mnt = os.path.join(work, "backing"), os.path.join(work, "mnt")
    os.mkdir(backing)
    os.mkdir(mnt)
    mounted = False
    try:
        _run(binary, backing, mnt, "-o", latency.options())
        mounted = True
        yield mnt
    finally:
        if mounted and subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL).returncode:
            subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def hdd(delay_ms: float = 4.0, size_mb: int = 512) -> Iterator[str]:
    """A real ext4 on a device that serves one request at a time, delay_ms each."""
    _need_root_and("nbdkit", "nbdfuse", "losetup", "mkfs.ext4", "fusermount3")
    work = tempfile.mkdtemp(prefix="git-tune-hdd-", dir=IMAGE_DIR)
    image, sock = os.path.join(work, "disk.img"), os.path.join(work, "nbd.sock")
    fuse_dir, mnt = os.path.join(work, "fuse"), os.path.join(work, "mnt")
    os.mkdir(fuse_dir)
    os.mkdir(mnt)
    procs = []
    loop: Optional[str] = None
    mounted = fused = False
    try:
        with open(image, "wb") as f:
            f.truncate(size_mb << 20)
        _run("mkfs.ext4", "-q", "-F", image)
        procs.append(subprocess.Popen(
            ["nbdkit", "-f", "-U", sock, "--filter=noparallel", "--filter=delay", "file", image,
             f"rdelay={delay_ms}ms", f"wdelay={delay_ms}ms", "serialize=all-requests"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for(sock)
        procs.append(subprocess.Popen(["nbdfuse", fuse_dir, "--unix", sock],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for(os.path.join(fuse_dir, "nbd"))
        fused = True
        # Direct IO: reads reach the slow device instead of the FUSE file's page cache.
        loop = subprocess.run(["losetup", "--direct-io=on", "--show", "-f",
                               os.path.join(fuse_dir, "nbd")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True).stdout.strip() or None
        if not loop:
            loop = subprocess.run(["losetup", "--show", "-f", os.path.join(fuse_dir, "nbd")],
                                  stdout=subprocess.PIPE, text=True).stdout.strip() or None
        if not loop:
            raise BedUnavailable("losetup could not attach the nbdfuse file")
        _run("mount", loop, mnt)
        mounted = True
        yield mnt
    finally:
        if mounted:
            _umount(mnt)
        if loop:
            subprocess.run(["losetup", "-d", loop], stderr=subprocess.DEVNULL)
        if fused:
            subprocess.run(["fusermount3", "-u", fuse_dir], stderr=subprocess.DEVNULL)
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
