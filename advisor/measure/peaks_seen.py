"""The largest peak memory git reached in this repository's stored calibrations: what
`probe` shows beside the memory limit, so a user sees how near a measured command came
to it without calibrating again."""
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

from . import calibrate
from ...errors import UsageError
from ...models import catalogue, workloads
from ...probes.report import ProbeReport


@dataclass(frozen=True)
class PeakSeen:
    """One git run's peak: the largest any stored calibration of the repository
    measured (each key's trial records each value's first run)."""
    peak: int           # bytes: git's largest resident set (peak.run)
    key: str            # the key whose trial ran it
    value: str          # the value it ran with ("default": Git's own)
    command: str        # what ran, as reports name it
    limit: int          # bytes the calibration could use (0: not known)
    workload: str       # the profile the calibration was for

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def largest(report: ProbeReport) -> Optional[PeakSeen]:
    """The largest peak over the stored, fresh calibrations of `report`'s host, git,
    repository and memory limit (any workload profile); None where there is none or
    none measured a peak."""
    best: Optional[PeakSeen] = None
    for profile in sorted(workloads.profiles()):
        record = calibrate.load_fresh(report, profile)
        if record is None:
            continue
        for key, trial in sorted(record.trials.items()):
            peaks = trial.facts.get("peaks")
            if not isinstance(peaks, dict):
                continue
            for value, peak in sorted(peaks.items()):
                if isinstance(peak, int) and (best is None or peak > best.peak):
                    best = PeakSeen(peak, key, str(value), _command(key),
                                    _int(trial.facts.get("limit")), profile)
    return best


def _command(key: str) -> str:
    try:
        w = catalogue.lookup(key).workload
    except UsageError:      # a key this git-tune no longer knows: its name says enough
        return key
    return w.command if w else key


def _int(v: Any) -> int:
    return v if isinstance(v, int) else 0
