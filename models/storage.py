"""Class a file system from its type, its flags and what was measured on it."""
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Dict, Mapping, Optional, Tuple

MEMORY, LOCAL_SSD, LOCAL_HDD, NETWORK, UNKNOWN = "memory", "local-ssd", "local-hdd", "network", "unknown"
CLASSES = (MEMORY, LOCAL_SSD, LOCAL_HDD, NETWORK, UNKNOWN)


@lru_cache(maxsize=1)
def rules() -> Dict[str, Any]:
    return tomllib.loads(resources.files("git_tune.models").joinpath("storage_classes.toml").read_text())


@dataclass(frozen=True)
class Classification:
    storage_class: str
    evidence: Tuple[str, ...]
    notes: Tuple[str, ...]


def _ms(latencies: Mapping[str, Mapping[str, Any]], op: str) -> Optional[float]:
    lat = latencies.get(op)
    if not lat or not lat.get("count"):
        return None
    return float(lat["p50"]) * 1e3


def classify(fstype: str, latencies: Mapping[str, Mapping[str, Any]], rotational: Optional[bool]) -> Classification:
    """latencies: op name -> {"count", "p50", ...} in seconds (engine.Latency as a dict)."""
    r = rules()
    t = r["thresholds"]
    base = fstype.split(".", 1)[0]
    fsync, cold, miss = _ms(latencies, "fsync"), _ms(latencies, "cold_read"), _ms(latencies, "lstat_miss")
    evidence = [f"file system {fstype}"]
    notes = []
    for name, value in (("fsync", fsync), ("cold 4 KiB read", cold), ("negative lookup", miss)):
        if value is not None:
            evidence.append(f"{name} p50 {value:.3f} ms")
    if rotational is not None:
        evidence.append(f"block device flag rotational={int(rotational)}")

    if base in r["memory_fstypes"]:
        return Classification(MEMORY, tuple(evidence), ())
    if base in r["network_fstypes"]:
        return Classification(NETWORK, tuple(evidence), ())
    if fsync is None and cold is None:
        notes.append("could not write a scratch file here, so the device was not measured; "
                     "the rotational flag alone is not trusted")
        return Classification(UNKNOWN, tuple(evidence), tuple(notes))

    # A read one seek away is the direct test of a spindle; fsync also waits for
    # whatever write-back is queued, so it decides only when reads were not measured.
    seeks = cold >= t["hdd_cold_read_ms"] if cold is not None else fsync >= t["hdd_fsync_ms"]
    if seeks:
        cls = LOCAL_HDD
    elif fsync is not None and fsync < t["memory_fsync_ms"] and (cold is None or cold < t["memory_fsync_ms"]):
        cls = MEMORY
        notes.append(f"a {fstype} block device that flushes in {fsync:.3f} ms is backed by memory")
    else:
        cls = LOCAL_SSD
    if cls != LOCAL_HDD and fsync is not None and fsync >= t["hdd_fsync_ms"]:
        notes.append(f"fsync takes {fsync:.1f} ms but reads answer like flash: a busy device or "
                     "a deep write-back queue, not seeks")
    if miss is not None and miss >= t["network_miss_ms"]:
        notes.append(f"negative lookups take {miss:.3f} ms, as slow as a network file system")
    if rotational is True and cls in (LOCAL_SSD, MEMORY):
        notes.append("the device says rotational=1 but answers like flash; the measurement wins")
    if rotational is False and cls == LOCAL_HDD:
        notes.append("the device says rotational=0 but seeks like a spinning disk; the measurement wins")
    return Classification(cls, tuple(evidence), tuple(notes))


def cache_state(data_fraction: Optional[float], metadata_ratio: Optional[float]) -> str:
    """hot / warm / cold from page-cache residency and lstat slowness vs hot."""
    r = rules()
    votes = []
    if data_fraction is not None:
        votes.append("hot" if data_fraction >= r["data"]["hot_fraction"] else
                     "cold" if data_fraction < r["data"]["cold_fraction"] else "warm")
    if metadata_ratio is not None:
        votes.append("hot" if metadata_ratio <= r["metadata"]["hot_ratio"] else
                     "cold" if metadata_ratio > r["metadata"]["cold_ratio"] else "warm")
    if not votes:
        return UNKNOWN
    if all(v == "hot" for v in votes):
        return "hot"
    if "cold" in votes:
        return "cold"
    return "warm"
