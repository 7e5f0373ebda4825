"""The catalogue of Git keys git-tune may recommend (keys.toml), as data.

GIT_TUNE_KEYS names more catalogue files (os.pathsep-separated), read after
the bundled one: a key added there, with its module, is a key like any other.
"""
import difflib
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Dict, List, Optional, Tuple

from ..errors import UsageError

Version = Tuple[int, ...]


def parse_version(text: str) -> Version:
    """'git version 2.39.5' or '2.39.5.windows.1' -> (2, 39, 5)."""
    for word in text.split():
        parts = []
        for piece in word.split("."):
            if not piece.isdigit():
                break
            parts.append(int(piece))
        if len(parts) >= 2:
            return tuple(parts + [0] * (3 - len(parts)))[:3]
    raise ValueError(f"no version in {text!r}")


def format_version(v: Version) -> str:
    return ".".join(map(str, v))


# A size as git reads one (config.c git_parse_ulong): digits, then k, m or g (binary).
SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> Optional[int]:
    """'64m' -> 67108864; None where git would not read it as a size."""
    m = re.fullmatch(r"([0-9]{1,15})([kmg]?)", str(text).strip(), re.ASCII | re.IGNORECASE)
    return int(m[1]) * SIZE_UNITS[m[2].lower()] if m else None


def format_size(n: int) -> str:
    """The shortest text git reads as n bytes: 67108864 -> '64m'."""
    for unit in ("g", "m", "k"):
        if n and n % SIZE_UNITS[unit] == 0:
            return f"{n // SIZE_UNITS[unit]}{unit}"
    return str(n)


# A key's type: how its values are read, validated and shown.
TYPES = ("bool", "enum", "int", "bool-or-int", "size")
NUMERIC = ("int", "bool-or-int", "size")    # these have a min and a max


@dataclass(frozen=True)
class Key:
    name: str
    type: str
    default: str
    since: Version
    affects: Tuple[str, ...]
    measured_by: str
    facts: str
    min: Optional[int] = None
    max: Optional[int] = None
    values: Tuple[str, ...] = ()
    needs_index_rewrite: bool = False
    since_linux: Optional[Version] = None
    not_written_because: str = ""     # empty: git-tune may write the key
    module: str = ""                  # the module that trials and decides it (keys/registry.py)
    online_cpus: Tuple[str, ...] = () # values meaning Git's online_cpus(): never written
    per_repository: bool = False      # a wider scope gets it only in the repository's block
    changes: str = ""                 # what a value changes beyond speed; empty: nothing
    # Who may not read what git writes under a value (the index's format): such a value
    # needs its own yes, and a gain worth it (advice.FORMAT_CHANGE_MIN_SAVING).
    readers: str = ""
    starts_process: bool = False      # a value takes effect through a process git starts
    # The value that takes back what the key's other values left, where Git's default
    # keeps it (core.untrackedCache: "keep" leaves an extension git added; false removes
    # it at the next index write). Empty: unsetting the key takes everything back.
    reverts_with: str = ""
    workload: Optional["Workload"] = None   # a workload of its own (the built-in ones: none)

    @property
    def writable(self) -> bool:
        return not self.not_written_because

    @property
    def bounds(self) -> Tuple[int, int]:
        """(min, max) of a numeric key (int, bool-or-int, size): the loader requires both."""
        assert self.min is not None and self.max is not None, self.name
        return self.min, self.max

    def available(self, git_version: Version, platform: str = sys.platform) -> bool:
        since = self.since_linux if (platform.startswith("linux") and self.since_linux) else self.since
        return git_version >= since

    def validate(self, value: str) -> str:
        """The canonical text of value, or UsageError saying why it is not valid."""
        if not isinstance(value, (str, int)):   # bool is an int; lists, None, floats are not
            raise UsageError(f"{self.name}={_shown(value)} is not a valid value ({self.describe_range()})")
        text = str(value).strip().lower() if self.type in ("bool", "enum") else str(value).strip()
        if self.type == "bool":
            if text in ("true", "yes", "on", "1"):
                return "true"
            if text in ("false", "no", "off", "0"):
                return "false"
        elif self.type == "enum":
            if text in self.values:
                return text
        elif self.type == "size":
            number = parse_size(text)
            low, high = self.bounds
            if number is not None and low <= number <= high:
                return format_size(number)
        elif self.type in ("int", "bool-or-int"):
            if self.type == "bool-or-int" and text.lower() in ("true", "false"):
                return self._explicit(text.lower())
            # ASCII digits only: Python's int() also takes "1_0" and other scripts' digits,
            # which git's strtol-based parser refuses ("bad numeric config value").
            if re.fullmatch(r"[+-]?[0-9]{1,12}", text, re.ASCII):
                number, (low, high) = int(text), self.bounds
                if low <= number <= high:
                    return self._explicit(str(number))
        raise UsageError(f"{self.name}={_shown(value)} is not a valid value ({self.describe_range()})")

    def _explicit(self, canonical: str) -> str:
        """A count, never "as many as online CPUs": Git's online_cpus() ignores cgroup
        CPU quotas, so in a container such a value over-subscribes and is throttled."""
        if canonical in self.online_cpus:
            raise UsageError(f"{self.name}={canonical} means as many as Git's online_cpus(), "
                             "which ignores cgroup CPU quotas; git-tune writes a number "
                             f"({self.describe_writable()})")
        return canonical

    def require_writable(self) -> None:
        """UsageError for a key git-tune reports on but never writes."""
        if not self.writable:
            raise UsageError(f"git-tune never writes {self.name}: {self.not_written_because}")

    def describe_writable(self) -> str:
        """The values git-tune writes: the range, less those meaning online_cpus()."""
        if self.type not in ("int", "bool-or-int") or not self.online_cpus:
            return self.describe_range()
        low, high = self.bounds
        low = low + 1 if str(low) in self.online_cpus else low
        extra = " or false" if self.type == "bool-or-int" and "false" not in self.online_cpus \
            else ""
        return f"{low}..{high}{extra}"

    def describe_range(self) -> str:
        if self.type == "bool":
            return "true or false"
        if self.type == "enum":
            return " | ".join(self.values)
        low, high = self.bounds
        if self.type == "size":
            return (f"a size from {format_size(low)} to {format_size(high)}, "
                    "in bytes or with k, m or g")
        extra = " or true/false" if self.type == "bool-or-int" else ""
        return f"{low}..{high}{extra}"


def _shown(value: object) -> str:
    """A value quoted for an error message, cut short (it may be hostile or huge)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _texts() -> List[Tuple[str, str]]:
    """(where, toml text) of the bundled catalogue and every GIT_TUNE_KEYS file."""
    out = [("keys.toml", resources.files("git_tune.models").joinpath("keys.toml").read_text())]
    for path in filter(None, os.environ.get("GIT_TUNE_KEYS", "").split(os.pathsep)):
        try:
            with open(path, encoding="utf-8") as f:
                out.append((path, f.read()))
        except OSError as e:
            raise UsageError(f"GIT_TUNE_KEYS: cannot read '{path}': {e.strerror}") from None
    return out


@lru_cache(maxsize=1)
def catalogue() -> Dict[str, Key]:
    keys = {}
    for where, text in _texts():
        try:
            raw = tomllib.loads(text)
            keys.update(_keys(raw))
        except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
            raise UsageError(f"{where}: not a valid key catalogue: {e}") from None
    return keys


def _bound(k: Dict[str, Any], which: str) -> Optional[int]:
    """A key's min or max: a number, or for a size a size's text ("64g")."""
    value = k.get(which)
    if value is None or k["type"] != "size":
        return value
    number = parse_size(str(value))
    if number is None:
        raise ValueError(f"{which} = {value!r} is not a size")
    return number


def _keys(raw: Dict[str, Any]) -> Dict[str, Key]:
    keys = {}
    for name, k in raw["keys"].items():
        if k["type"] not in TYPES:
            raise ValueError(f"{name}: type {k['type']!r} is not one of {', '.join(TYPES)}")
        if k["type"] in NUMERIC and (k.get("min") is None or k.get("max") is None):
            raise ValueError(f"{name}: a key of type {k['type']} needs a min and a max")
        if k["type"] == "enum" and not k.get("values"):
            raise ValueError(f"{name}: an enum key needs its values")
        keys[name] = Key(
            name=name, type=k["type"], default=k["default"], since=parse_version(k["since"]),
            affects=tuple(k["affects"]), measured_by=k["measured_by"], facts=" ".join(k["facts"].split()),
            min=_bound(k, "min"), max=_bound(k, "max"), values=tuple(k.get("values", ())),
            needs_index_rewrite=k.get("needs_index_rewrite", False),
            since_linux=parse_version(k["since_linux"]) if "since_linux" in k else None,
            not_written_because=" ".join(k.get("not_written_because", "").split()),
            module=k.get("module", ""), online_cpus=tuple(k.get("online_cpus", ())),
            per_repository=bool(k.get("per_repository", False)),
            changes=" ".join(str(k.get("changes", "")).split()),
            readers=" ".join(str(k.get("readers", "")).split()),
            starts_process=bool(k.get("starts_process", False)),
            reverts_with=str(k.get("reverts_with", "")),
            workload=_workload(k["workload"]) if "workload" in k else None)
    return keys


@dataclass(frozen=True)
class Workload:
    """A workload a key brings with it (its toml entry's [workload] table): its name as
    trials and verify say it, the command as reports name it, and its weight in each
    workload profile (models/workloads.toml's profiles weigh the built-in ones)."""
    name: str
    command: str
    weights: Tuple[Tuple[str, float], ...]


def _workload(w: Dict[str, Any]) -> Workload:
    weights = w.get("weights", {})
    if not isinstance(weights, dict) or not all(
            isinstance(v, (int, float)) and 0 <= v <= 1 for v in weights.values()):
        raise ValueError(f"workload {w.get('name')!r}: weights must be numbers from 0 to 1")
    return Workload(str(w["name"]), str(w["command"]),
                    tuple(sorted((str(p), float(v)) for p, v in weights.items())))


def lookup(name: str) -> Key:
    """The catalogue entry for a key (case-insensitive section and name, as Git)."""
    for key_name, key in catalogue().items():
        if key_name.lower() == name.lower():
            return key
    near = difflib.get_close_matches(name.lower(), [k.lower() for k in catalogue()], n=1,
                                     cutoff=0.75)
    if near:
        match = next(k for k in catalogue() if k.lower() == near[0])
        raise UsageError(f"{_shown(name)} is not a key git-tune knows; did you mean {match}?")
    raise UsageError(f"{_shown(name)} is not a key git-tune knows; known keys: "
                     + ", ".join(sorted(catalogue())))


def understood(git_version: Version, platform: str = sys.platform) -> Dict[str, Key]:
    """The keys this git reads (an older git silently ignores newer keys)."""
    return {n: k for n, k in catalogue().items() if k.available(git_version, platform)}


def parse_assignment(text: str) -> Tuple[str, str]:
    """'checkout.workers=8' -> ('checkout.workers', '8'), validated against the catalogue."""
    k, sep, v = text.partition("=")
    if not sep:
        raise UsageError(f"expected KEY=VALUE, not {text!r}")
    key = lookup(k.strip())
    key.require_writable()
    return key.name, key.validate(v)
