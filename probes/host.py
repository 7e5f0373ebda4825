"""CPUs, memory and load: what this process may really use.

Effective cores are the CPUs in this process's affinity mask, further
bounded by a cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us /
cpu.cfs_period_us), which Git's own online_cpus() ignores.
"""
import math
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import psutil

from .sysfs import SysRoot, read_int


@dataclass(frozen=True)
class CgroupLimits:
    version: Optional[int]         # 1, 2 or None (no cgroup found)
    path: Optional[str]
    cpu_quota: Optional[float]     # CPUs, e.g. 1.5; None = unlimited
    memory_limit: Optional[int]    # bytes; None = unlimited
    pids_max: Optional[int] = None       # the tightest pids.max up the tree; None = unlimited
    pids_headroom: Optional[int] = None  # tasks this group may still start (threads count)


@dataclass(frozen=True)
class HostFacts:
    logical_cpus: int
    physical_cores: Optional[int]
    affinity_cpus: int
    cgroup: CgroupLimits
    effective_cores: int
    memory_total: int
    memory_available: int
    memory_limit: Optional[int]
    load_average: Tuple[float, float, float]
    notes: Tuple[str, ...]


def _cgroup_paths(sys: SysRoot) -> List[Tuple[str, str, str]]:
    """(hierarchy id, controllers, path) lines of /proc/self/cgroup."""
    text = sys.read("proc/self/cgroup") or ""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


def _levels(cg_path: str) -> Iterator[str]:
    """The process's cgroup, then each parent up to the root."""
    path = cg_path
    while True:
        yield path.lstrip("/")
        if path in ("/", ""):
            return
        path = os.path.dirname(path.rstrip("/")) or "/"


def _walk_up(sys: SysRoot, base: str, cg_path: str, filename: str) -> List[str]:
    """Values of filename from the process's cgroup up to the root (the tightest wins)."""
    texts = (sys.read(base, level, filename) for level in _levels(cg_path))
    return [t for t in texts if t is not None]


def _positive(text: Optional[str]) -> Optional[int]:
    """A limit's number, or None where the file holds no number above zero (what no
    kernel writes there reads as no limit, not as a limit of nothing)."""
    value = read_int(text)
    return value if value is not None and value > 0 else None


def _v2_limits(sys: SysRoot, path: str) -> Tuple[Optional[float], Optional[int]]:
    quotas, memories = [], []
    for text in _walk_up(sys, "sys/fs/cgroup", path, "cpu.max"):
        quota_text, _, period_text = text.partition(" ")
        quota, period = _positive(quota_text), _positive(period_text)
        if quota and period:
            quotas.append(quota / period)
    for text in _walk_up(sys, "sys/fs/cgroup", path, "memory.max"):
        if memory := _positive(text):
            memories.append(memory)
    return (min(quotas) if quotas else None), (min(memories) if memories else None)


def _v1_mount(sys: SysRoot, controller: str) -> Optional[str]:
    for candidate in (controller, f"{controller},cpuacct", "cpu,cpuacct", f"cpuacct,{controller}"):
        if sys.exists("sys/fs/cgroup", candidate):
            return f"sys/fs/cgroup/{candidate}"
    return None


def _v1_limits(sys: SysRoot, lines: List[Tuple[str, str, str]]) -> Tuple[Optional[float], Optional[int]]:
    quota_cpus, memory = None, None
    for _, controllers, path in lines:
        names = controllers.split(",")
        if "cpu" in names and (base := _v1_mount(sys, "cpu")):
            quotas = []
            for q_text, p_text in zip(_walk_up(sys, base, path, "cpu.cfs_quota_us"),
                                      _walk_up(sys, base, path, "cpu.cfs_period_us")):
                q, p = _positive(q_text), _positive(p_text)
                if q and p:
                    quotas.append(q / p)
            quota_cpus = min(quotas) if quotas else None
        if "memory" in names and sys.exists("sys/fs/cgroup/memory"):
            read = [_positive(t) for t in _walk_up(sys, "sys/fs/cgroup/memory", path,
                                                   "memory.limit_in_bytes")]
            # v1 reports "no limit" as a huge page-aligned number.
            limits = [v for v in read if v is not None and v < (1 << 60)]
            memory = min(limits) if limits else None
    return quota_cpus, memory


def _pids(sys: SysRoot, base: str, path: str) -> Tuple[Optional[int], Optional[int]]:
    """The tightest pids.max from the process's group up, and the fewest tasks any of
    those groups may still start (every thread git starts counts, not only processes)."""
    limits, headroom = [], []
    for level in _levels(path):
        limit = read_int(sys.read(base, level, "pids.max"))     # "max" reads as None
        if limit is not None and limit >= 0:                    # 0: no task may start
            limits.append(limit)
            current = read_int(sys.read(base, level, "pids.current"))
            if current is not None:
                headroom.append(max(0, limit - current))
    return (min(limits) if limits else None), (min(headroom) if headroom else None)


def cgroup_limits(sys: SysRoot) -> CgroupLimits:
    lines = _cgroup_paths(sys)
    unified = [p for h, c, p in lines if h == "0" and c == ""]
    v1 = [l for l in lines if l[1]]
    if v1 and any("cpu" in l[1].split(",") or "memory" in l[1].split(",") for l in v1):
        cpu, mem = _v1_limits(sys, v1)
        path = next((p for _, c, p in v1 if "cpu" in c.split(",")), v1[0][2])
        pids_path = next((p for _, c, p in v1 if "pids" in c.split(",")), None)
        pids = (_pids(sys, "sys/fs/cgroup/pids", pids_path)
                if pids_path and sys.exists("sys/fs/cgroup/pids") else (None, None))
        return CgroupLimits(1, path, cpu, mem, *pids)
    if unified and sys.exists("sys/fs/cgroup/cgroup.controllers"):
        cpu, mem = _v2_limits(sys, unified[0])
        return CgroupLimits(2, unified[0], cpu, mem, *_pids(sys, "sys/fs/cgroup", unified[0]))
    return CgroupLimits(None, None, None, None)


def host_facts(root: str = "/") -> HostFacts:
    sys = SysRoot(root)
    notes = []
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False)
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = logical
    limits = cgroup_limits(sys)
    effective = affinity
    if limits.cpu_quota is not None:
        effective = max(1, min(affinity, math.ceil(limits.cpu_quota)))
        notes.append(f"cgroup v{limits.version} CPU quota of {limits.cpu_quota:g} CPUs: "
                     f"Git's online_cpus() still sees {logical}")
    if limits.pids_max is not None:
        notes.append(f"cgroup v{limits.version} pid limit of {limits.pids_max} "
                     f"({limits.pids_headroom} more may start): every thread and process git "
                     "starts counts against it (preload's lstat threads, checkout workers)")
    if affinity < logical:
        notes.append(f"CPU affinity allows {affinity} of {logical} CPUs")
    vm = psutil.virtual_memory()
    memory_limit = limits.memory_limit if limits.memory_limit and limits.memory_limit < vm.total else None
    if memory_limit:
        notes.append(f"cgroup v{limits.version} memory limit of {memory_limit / 2 ** 20:.0f} MiB: "
                     "git sizes its pack memory from the host, not from it (pack.windowMemory "
                     "and pack.deltaCacheSize are sized within it)")
    try:
        one, five, fifteen = os.getloadavg()
        load = (round(one, 2), round(five, 2), round(fifteen, 2))
    except OSError:
        load = (0.0, 0.0, 0.0)
        notes.append("load average unavailable")
    return HostFacts(logical, physical, affinity, limits, effective, vm.total,
                     min(vm.available, memory_limit) if memory_limit else vm.available,
                     memory_limit, load, tuple(notes))
