"""What makes two calibrations comparable: host, CPUs, memory, the repository's file system.

Only cheap facts (no timing), so a stored calibration and an applied value can
be matched to the host without measuring the storage again. A fingerprint of
git-tune before 0.2 (16 hex digits, which included the measured storage class)
is recognised by its form and never compared.
"""
import hashlib
import os
import platform
import socket
from typing import TYPE_CHECKING, Optional

from .. import engine
from . import host, mounts
from .storage import fstype_of

if TYPE_CHECKING:
    from .report import ProbeReport

PREFIX = "h2-"


def of(cores: int, memory_total: int, fstype: str, source: Optional[str]) -> str:
    parts = [socket.gethostname(), platform.machine(), str(cores), str(memory_total >> 30),
             fstype, source or ""]
    return PREFIX + hashlib.sha256(os.fsencode("|".join(parts))).hexdigest()[:16]


def of_report(report: "ProbeReport") -> str:
    s = report.primary_storage()
    return of(report.host.effective_cores, report.host.memory_total, s.fstype if s else "",
              s.source if s else None)


def here(path: str, root: str = "/") -> str:
    """The fingerprint for a repository at path, from the mount table and the host alone."""
    h = host.host_facts(root)
    info = engine.fs_info(path)
    mount = mounts.find_mount(path, mounts.read_mounts(root), info.dev)
    return of(h.effective_cores, h.memory_total, fstype_of(mount, info.magic),
              mount.source if mount else None)


def comparable(stored: str) -> bool:
    return stored.startswith(PREFIX)
