"""Real cgroups for tests: a child group with a CPU quota and/or a pid limit, and a
preexec_fn that starts a command inside it. Needs root and the controllers mounted
(cgroup v1 `cpu` and `pids` hierarchies, or cgroup v2 with them enabled); callers
skip with `unavailable()`'s reason otherwise."""
import contextlib
import os
import signal
import time
import uuid
from typing import List, Optional

V1 = "/sys/fs/cgroup"


def _v2_root() -> Optional[str]:
    for root in (V1, os.path.join(V1, "unified")):
        if os.path.exists(os.path.join(root, "cgroup.subtree_control")):
            return root
    return None


def _v2_has(controller: str) -> bool:
    root = _v2_root()
    if not root:
        return False
    with open(os.path.join(root, "cgroup.subtree_control")) as f:
        return controller in f.read().split()


def unavailable(cpu: bool = False, pids: bool = False, memory: bool = False) -> str:
    """Why the test cannot make such a group here, or "" when it can."""
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for name, wanted in (("cpu", cpu), ("pids", pids), ("memory", memory)):
        if wanted and not (os.path.exists(os.path.join(V1, name, "cgroup.procs"))
                           or _v2_has(name)):
            return f"no cgroup {name} controller mounted"
    return ""


class Group:
    """One test's child groups (one per v1 hierarchy, or one v2 group)."""

    def __init__(self, cpu_quota: Optional[float] = None, pids_max: Optional[int] = None,
                 memory_max: Optional[int] = None):
        self.name = f"git-tune-test-{uuid.uuid4().hex[:8]}"
        self.dirs: List[str] = []
        settings = []
        if cpu_quota is not None:
            settings.append(("cpu", {"cpu.cfs_period_us": "100000",
                                     "cpu.cfs_quota_us": str(int(cpu_quota * 100000))},
                             {"cpu.max": f"{int(cpu_quota * 100000)} 100000"}))
        if pids_max is not None:
            settings.append(("pids", {"pids.max": str(pids_max)}, {"pids.max": str(pids_max)}))
        if memory_max is not None:
            # No swap to spill into: past the limit the kernel kills, as in a container.
            settings.append(("memory", {"memory.limit_in_bytes": str(memory_max),
                                        "memory.memsw.limit_in_bytes?": str(memory_max)},
                             {"memory.max": str(memory_max), "memory.swap.max?": "0"}))
        for controller, v1_files, v2_files in settings:
            v1 = os.path.join(V1, controller)
            if os.path.exists(os.path.join(v1, "cgroup.procs")):
                self._make(os.path.join(v1, self.name), v1_files)
            else:
                self._make(os.path.join(_v2_root(), self.name), v2_files)

    def _make(self, path: str, files: dict) -> None:
        if path not in self.dirs:
            os.mkdir(path)
            self.dirs.append(path)
        for name, value in files.items():
            optional = name.endswith("?")     # a file only some kernels have
            try:
                with open(os.path.join(path, name.rstrip("?")), "w") as f:
                    f.write(value)
            except OSError:
                if not optional:
                    raise

    def enter(self) -> None:
        """preexec_fn: move the new child into every group before it execs."""
        for d in self.dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def remove(self) -> None:
        """Kill anything left inside (a stray daemon), then remove the groups."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        pids = [int(p) for p in f.read().split()]
                except OSError:
                    break
                if not pids:
                    break
                for p in pids:
                    with contextlib.suppress(OSError):
                        os.kill(p, signal.SIGKILL)
                time.sleep(0.05)
            with contextlib.suppress(OSError):
                os.rmdir(d)


@contextlib.contextmanager
def group(cpu_quota: Optional[float] = None, pids_max: Optional[int] = None,
          memory_max: Optional[int] = None):
    g = Group(cpu_quota, pids_max, memory_max)
    try:
        yield g
    finally:
        g.remove()
