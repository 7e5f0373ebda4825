"""Fleet profiles: calibrate one host per class, apply the result everywhere in that class.

Like FFTW's wisdom: the measurement is made once, exported with what it
was measured on, and imported only where the host is of the same class.

A profile (schema "git-tune-profile/1"):

    class        storage_class, fstype, cores (bucket), memory (bucket), git (version range)
    settings     key -> value to write
    measurements key -> {workload, speedup, low, high, runs}
    provenance   host fingerprint, created, git-tune version, repository size
"""
import hashlib
import json
import statistics
import unicodedata
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ... import __version__, strictjson
from ..decide import advice
from ...errors import UsageError
from ...models import catalogue
from ...probes import storage
from ...probes.report import ProbeReport
from ..decide.recommend import Recommendation
from ..measure.record import Calibration

SCHEMA = "git-tune-profile/1"
CLASS_FIELDS = ("storage_class", "fstype", "cores", "memory", "git")
CORE_BUCKETS = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 1 << 20))
MEMORY_BUCKETS_GIB = ((0, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 1 << 20))


def core_bucket(cores: int) -> str:
    for lo, hi in CORE_BUCKETS:
        if lo <= cores <= hi:
            return str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 1 << 20 else f"{lo}+")
    return str(cores)


def memory_bucket(total_bytes: int) -> str:
    gib = total_bytes / 2 ** 30
    for lo, hi in MEMORY_BUCKETS_GIB:
        if lo <= gib < hi:
            return f"{lo}-{hi} GiB" if hi < 1 << 20 else f"{lo}+ GiB"
    return f"{gib:.0f} GiB"


def git_range(version: str) -> str:
    """Same major.minor: keys and defaults do not change within a release series."""
    v = catalogue.parse_version(version)
    return f">={v[0]}.{v[1]}.0,<{v[0]}.{v[1] + 1}.0"


RANGE_OPS = {">=": lambda v, w: v >= w, "<=": lambda v, w: v <= w, "<": lambda v, w: v < w,
             ">": lambda v, w: v > w, "=": lambda v, w: v == w}


def parse_range(spec: str) -> List[Tuple[str, catalogue.Version]]:
    """'>=2.39.0,<2.40.0' -> [('>=', (2, 39, 0)), ('<', (2, 40, 0))]; ValueError otherwise."""
    out = []
    for part in spec.split(","):
        op = part[:2] if part[:2] in (">=", "<=") else part[:1]
        if op not in RANGE_OPS:
            raise ValueError(f"no comparison in {part!r}")
        out.append((op, catalogue.parse_version(part[len(op):])))
    return out


def in_range(version: str, spec: str) -> bool:
    v = catalogue.parse_version(version)
    return all(RANGE_OPS[op](v, w) for op, w in parse_range(spec))


def host_class(report: ProbeReport) -> Dict[str, str]:
    """This host's class, from a probe report."""
    s = report.primary_storage()
    return {"storage_class": s.storage_class if s else "unknown",
            "fstype": s.fstype if s else "unknown",
            "cores": core_bucket(report.host.effective_cores),
            "memory": memory_bucket(report.host.memory_limit or report.host.memory_total),
            "git": git_range(report.git.version) if report.git.version else "none"}


# A profile is reviewed by people (in pull requests): times as UTC dates, ratios to the
# three digits a 95% interval of a few runs can carry.
RATIO_DIGITS = 3


def utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _rounded(values: Dict[str, Any]) -> Dict[str, Any]:
    return {k: round(v, RATIO_DIGITS) if isinstance(v, float) else v for k, v in values.items()}


def agent_evidence(log: Sequence[Dict[str, Any]], settings: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """What the agent's experiments on this host's real commands said of each value the
    profile sets (aggregates only: no repository, no command): the newest decision on the
    key, whether it kept the profile's value, over how many pairs of slots, and the
    candidate's speedup over the value in force (median cost of the pairs)."""
    out = {}
    for e in log:
        key = e.get("key")
        if e.get("experiment") != "decided" or key not in settings:
            continue
        a, b = e.get("approved_costs") or [], e.get("candidate_costs") or []
        if not a or not b or min(b) <= 0:
            continue
        out[key] = {"confirms": e.get("value") == settings[key], "pairs": len(b),
                    "speedup": round(statistics.median(a) / statistics.median(b), 3)}
    return out


def export(report: ProbeReport, record: Calibration, rec: Recommendation, agent_log: Sequence[Dict[str, Any]] = ()) -> Dict[str, Any]:
    """A profile from a probe report, a calibration record and its recommendation (and
    the agent's log: its experiments' aggregates, where it ran). Its class is the
    probe's, but for the storage class the calibration measured the values on."""
    # A key that belongs to one repository (a daemon per working tree) is not the fleet's.
    fleet = {k: v for k, v in rec.settings().items() if not catalogue.lookup(k).per_repository}
    measurements = {k.key: _rounded(asdict(k.gain)) for k in rec.keys
                    if k.status == advice.SET and k.gain and k.key in fleet}
    # The storage class is measured: the values' is the one their calibration ran on,
    # whatever this probe read (a stored calibration's may have read another, busier).
    cls = dict(host_class(report), storage_class=record.storage.storage_class)
    return {"schema": SCHEMA, "class": cls, "settings": fleet,
            "measurements": measurements, "workload": rec.workload,
            "agent": agent_evidence(agent_log, fleet),
            "provenance": {"fingerprint": record.fingerprint, "created": utc(time.time()),
                           "calibrated": utc(record.created), "git_tune_version": __version__,
                           "git_version": record.git_version,
                           "repository_entries": record.repository.entries,
                           "hosts": 1}}


class MalformedProfile(UsageError):
    """A profile that is not of the schema (a fleet profile is untrusted data)."""


TEXT_LIMIT = 200


def _text(value: object, where: str, optional: bool = False) -> Optional[str]:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise MalformedProfile(f"{where} must be text, not {type(value).__name__}")
    if len(value) > TEXT_LIMIT or any(unicodedata.category(c)[0] == "C" for c in value):
        raise MalformedProfile(f"{where} must be at most {TEXT_LIMIT} printable characters "
                               "(no newlines or other control characters)")
    return value


def _number(value: object, where: str, integer: bool = False) -> float:
    if not strictjson.finite(value) or (integer and not isinstance(value, int)):
        raise MalformedProfile(f"{where} must be a {'whole ' if integer else ''}number >= 0")
    return value


def _object(value: object, where: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedProfile(f"{where} must be an object, not {type(value).__name__}")
    return value


MEASUREMENT_FIELDS = {"workload": "text", "speedup": "number", "low": "number", "high": "number",
                      "runs": "integer", "hosts": "integer", "speedup_min": "number",
                      "speedup_median": "number", "speedup_max": "number"}


def _measurement(m: object, where: str) -> Dict[str, Any]:
    m = _object(m, where)
    out = {}
    for name, kind in MEASUREMENT_FIELDS.items():
        if name in m:
            out[name] = (_text(m[name], f"{where}.{name}") if kind == "text"
                         else _number(m[name], f"{where}.{name}", kind == "integer"))
    if not ({"speedup", "low", "high", "workload", "runs"} <= set(out)
            or {"hosts", "speedup_min", "speedup_median", "speedup_max"} <= set(out)):
        raise MalformedProfile(f"{where} must hold speedup, low, high, workload and runs "
                               "(one host) or hosts and speedup_min/median/max (merged)")
    return out


def _agent_evidence(v: object, where: str) -> Dict[str, Any]:
    v = _object(v, where)
    if not isinstance(v.get("confirms"), bool):
        raise MalformedProfile(f"{where}.confirms must be true or false")
    return {"confirms": v["confirms"],
            "pairs": int(_number(v.get("pairs"), f"{where}.pairs", integer=True)),
            "speedup": _number(v.get("speedup"), f"{where}.speedup")}


def parse(data: object, source: str) -> Dict[str, Any]:
    """A profile checked field by field and normalised: catalogue key names, canonical
    values, typed measurements. Anything else is MalformedProfile (exit 2) naming the field."""
    try:
        data = _object(data, "the profile")
        if data.get("schema") != SCHEMA:
            raise MalformedProfile(f"it is not a {SCHEMA} profile (schema {_shown(data.get('schema'))})")
        klass = _object(data.get("class"), "class")
        klass = {f: _text(klass.get(f), f"class.{f}") for f in CLASS_FIELDS}
        if klass["git"] != "none":
            try:
                parse_range(klass["git"])
            except ValueError:
                raise MalformedProfile(f"class.git {_shown(klass['git'])} is not a version range "
                                       "like >=2.39.0,<2.40.0") from None
        settings = {}
        for k, v in _object(data.get("settings"), "settings").items():
            key = catalogue.lookup(k)
            key.require_writable()
            if key.per_repository:
                raise MalformedProfile(f"{key.name} belongs to one repository (it starts a "
                                       "daemon there): a fleet profile cannot carry it")
            settings[key.name] = key.validate(v)
        measurements = {catalogue.lookup(k).name: _measurement(m, f"measurements.{k}")
                        for k, m in _object(data.get("measurements", {}), "measurements").items()}
        agent = {catalogue.lookup(k).name: _agent_evidence(v, f"agent.{k}")
                 for k, v in _object(data.get("agent", {}), "agent").items()}
        prov = _object(data.get("provenance", {}), "provenance")
        provenance: Dict[str, Any] = {
            "fingerprint": _text(prov.get("fingerprint"), "provenance.fingerprint", True),
            "hosts": int(_number(prov.get("hosts", 1), "provenance.hosts", True))}
        if "fingerprints" in prov:
            if not isinstance(prov["fingerprints"], list):
                raise MalformedProfile("provenance.fingerprints must be a list")
            provenance["fingerprints"] = [_text(f, "provenance.fingerprints[]")
                                          for f in prov["fingerprints"]]
        for name in ("created", "calibrated"):      # a UTC date; a number before 2026-11
            if name in prov:
                provenance[name] = (_text(prov[name], f"provenance.{name}")
                                    if isinstance(prov[name], str)
                                    else _number(prov[name], f"provenance.{name}"))
        if "repository_entries" in prov:
            provenance["repository_entries"] = _number(
                prov["repository_entries"], "provenance.repository_entries", integer=True)
        for name in ("git_tune_version", "git_version"):
            if name in prov:
                provenance[name] = _text(prov[name], f"provenance.{name}")
        return {"schema": SCHEMA, "class": klass, "settings": settings,
                "measurements": measurements, "agent": agent,
                "workload": _text(data.get("workload"), "workload", optional=True),
                "provenance": provenance}
    except UsageError as e:
        raise MalformedProfile(f"'{source}' is not a usable profile: {e}") from None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_each_once(paths: Sequence[str]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The profiles of `paths`, a file given twice (or a byte-identical copy of it: one
    host's one export) counted once; and a sentence for each such repeat. Profiles of
    distinct exports always differ in their bytes (their creation time)."""
    seen: Dict[str, str] = {}
    out, repeats = [], []
    for path in paths:
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            digest = None          # load() says what is wrong with it
        if digest in seen:
            repeats.append(f"'{path}' is the same profile as '{seen[digest]}': counted once")
            continue
        if digest:
            seen[digest] = path
        out.append(load(path))
    return out, repeats


def load(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read((1 << 20) + 1)
    except OSError as e:
        raise UsageError(f"cannot read profile '{path}': {e.strerror}") from None
    if len(raw) > 1 << 20:
        raise MalformedProfile(f"'{path}' is over 1 MiB: not a profile")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise UsageError(f"'{path}' is not JSON: {e}") from None
    return parse(data, path)


def mismatches(profile: Dict[str, Any], here: Dict[str, str]) -> List[str]:
    want = profile["class"]
    out = []
    for f in CLASS_FIELDS:
        if f == "git":
            version = here.get("git_version")
            if version is None or not in_range(version, want["git"]):
                out.append(f"git {version} is outside the profile's {want['git']}")
        elif f == "fstype" and storage.same_file_system(want["fstype"], here.get(f, "")):
            continue
        elif want.get(f) != here.get(f):
            out.append(f"{f} is {here.get(f)!r} here, {want.get(f)!r} in the profile")
    return out


def class_key(profile: Dict[str, Any]) -> Tuple[str, ...]:
    return tuple(profile["class"][f] for f in CLASS_FIELDS)


def _classes(profiles: Sequence[Dict[str, Any]]) -> Dict[Tuple[str, ...], List[Dict[str, Any]]]:
    """Profiles grouped by class. A profile whose file-system type is only its statfs
    family ("ext2/3/4": exported where the mount table did not show the path) joins the
    class of the one member type ("ext4") the other fields' profiles have, as `apply`
    would match them (storage.same_file_system); where they have none, or several
    ("fuse.sshfs" and "fuse.s3fs"), it stays a class of its own."""
    at = CLASS_FIELDS.index("fstype")
    keys = {class_key(p) for p in profiles}
    groups: Dict[Tuple[str, ...], List[Dict[str, Any]]] = defaultdict(list)
    for p in profiles:
        key = class_key(p)
        members = {k for k in keys if k[:at] + k[at + 1:] == key[:at] + key[at + 1:]
                   and k[at] != key[at] and storage.same_file_system(k[at], key[at])
                   and storage.fs_family(k[at]) != k[at]}
        if len(members) == 1:
            key = members.pop()
        groups[key].append(p)
    return groups


@dataclass(frozen=True)
class MergedClass:
    profile: Dict[str, Any]
    hosts: int
    spread: Dict[str, Dict[str, int]]       # key -> value -> hosts ("(default)" for unset)
    warnings: Tuple[str, ...]


def _disagree_beyond_noise(key: str, group: Sequence[Dict[str, Any]]) -> bool:
    """Some hosts measured a clear gain for a value that others did not take."""
    values = {p["settings"].get(key) for p in group}
    if len(values) < 2:
        return False
    clear = [p for p in group if key in p["measurements"] and p["measurements"][key]["low"] > 1]
    return bool(clear) and len(clear) < len(group)


# A host whose value the agent's experiment kept on its user's own commands counts this
# many times in the vote: real commands are the evidence a calibration stands in for.
CONFIRMED_WEIGHT = 2


def _weight(k: str, p: Dict[str, Any]) -> int:
    return CONFIRMED_WEIGHT if p.get("agent", {}).get(k, {}).get("confirms") else 1


def _weight_total(k: str, group: Sequence[Dict[str, Any]]) -> int:
    return sum(_weight(k, p) for p in group)


def _weighed_majority(k: str, group: Sequence[Dict[str, Any]]) -> Tuple[str, int]:
    """The value with the most weight, and its weight."""
    weights: Counter[str] = Counter()
    for p in group:
        weights[p["settings"].get(k, "(default)")] += _weight(k, p)
    return weights.most_common(1)[0]


def _merged_agent(settings: Dict[str, str], group: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """For each merged value, what the hosts whose agent kept that very value measured."""
    out = {}
    for k, v in settings.items():
        confirming = [p["agent"][k] for p in group if p["settings"].get(k) == v
                      and p.get("agent", {}).get(k, {}).get("confirms")]
        if confirming:
            out[k] = {"confirms": True, "pairs": sum(e["pairs"] for e in confirming),
                      "speedup": round(statistics.median(e["speedup"] for e in confirming), 3)}
    return out


def merge(profiles: Sequence[Dict[str, Any]]) -> List[MergedClass]:
    """One profile per host class (_classes): the value most hosts chose, with the spread."""
    out = []
    for key, group in sorted(_classes(profiles).items()):
        keys = sorted({k for p in group for k in p["settings"]})
        settings, spread, warnings, measurements = {}, {}, [], {}
        for k in keys:
            counts = Counter(p["settings"].get(k, "(default)") for p in group)
            spread[k] = dict(counts)
            value, n = _weighed_majority(k, group)
            if value != "(default)" and n * 2 > _weight_total(k, group):
                settings[k] = value
            gains = [p["measurements"][k]["speedup"] for p in group if k in p["measurements"]]
            if gains:
                measurements[k] = _rounded({"hosts": len(gains), "speedup_min": min(gains),
                                            "speedup_median": statistics.median(gains),
                                            "speedup_max": max(gains)})
            if _disagree_beyond_noise(k, group):
                warnings.append(f"{k}: hosts of this class disagree beyond noise ({dict(counts)}); "
                                "check what differs between them before rolling out")
            elif len(counts) > 1:
                warnings.append(f"{k}: hosts chose {dict(counts)}; the majority value is used")
        merged = {"schema": SCHEMA, "class": dict(zip(CLASS_FIELDS, key)), "settings": settings,
                  "measurements": measurements, "workload": group[0].get("workload"),
                  "agent": _merged_agent(settings, group),
                  "provenance": {"hosts": len(group), "created": utc(time.time()),
                                 "git_tune_version": __version__,
                                 "fingerprints": sorted({f for p in group
                                                         for f in [p["provenance"].get("fingerprint"),
                                                                   *p["provenance"].get("fingerprints", [])]
                                                         if f})}}
        out.append(MergedClass(merged, len(group), spread, tuple(warnings)))
    return out
