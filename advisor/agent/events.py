"""One git command's trace2 events, reduced to what the agent keeps.

git writes a command's events (Documentation/technical/api-trace2.txt, the event
target) as JSON lines: `start` with the whole argv, `def_repo` with the work tree,
`cmd_name`, `def_param` for the config keys trace2.configParams names, regions with
their durations, `data` such as the index refresh's counts, and `exit`/`atexit`.

What is kept is built from a list of what may be kept, never by removing what must
not: the command's name, its option *names* (a long option's name before any `=`,
a short option only as a lone `-x`), the repository's work tree, the durations of the
regions below, a few counts, the values in force of the keys git-tune tunes. Argument
values (messages, URLs and their tokens, paths, `-c` values), error texts and region
messages (which hold paths) never reach a record.
"""
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Optional, Sequence, Tuple

from ... import strictjson

# Regions whose time the report shows: (category, label) -> name in the record.
REGIONS = {
    ("index", "do_read_index"): "index_read",
    ("index", "do_write_index"): "index_write",
    ("index", "preload"): "preload",
    ("index", "refresh"): "refresh",
    ("status", "worktrees"): "status_worktree",
    ("status", "index"): "status_index",
    ("status", "untracked"): "untracked",
    ("unpack_trees", "unpack_trees"): "unpack_trees",   # a checkout's files are written here
    ("fsm_hook", "query"): "fsmonitor",
}
# Counts git reports as `data` events: (category, key) -> name in the record.
COUNTS = {
    ("index", "read/cache_nr"): "entries",
    ("index", "refresh/sum_lstat"): "lstat",
    ("index", "refresh/sum_scan"): "rehashed",
    ("index", "read/version"): "index_version",
    # dir.c's traversal statistics (nesting 3: switch.trace2_settings asks for it). git
    # reports `opendir` only where the untracked cache is in use: the directories it
    # had to read again, against every directory the status visited.
    ("read_directory", "directories-visited"): "dirs_visited",
    ("read_directory", "opendir"): "dirs_opened",
}
LONG_OPTION = re.compile(r"--([a-z][a-z0-9-]{0,39})(=.*)?\Z", re.DOTALL)
SHORT_OPTION = re.compile(r"-[a-zA-Z]\Z")
# `-uno`, `-unormal`, `-uall`: status's untracked modes, whose work differs by orders.
STATUS_MODES = {"-uno", "-unormal", "-uall", "-u"}


@dataclass(frozen=True)
class Command:
    sid: str
    command: str                       # cmd_name: status, checkout, clone, ...
    options: Tuple[str, ...]           # option names only, sorted
    repo: Optional[str]                # the work tree (def_repo), None outside one
    git_version: str
    elapsed: Optional[float]           # seconds, from start to exit
    code: Optional[int]                # exit code; None if the process never ended
    caller: Optional[str]              # the parent process git names (cmd_ancestry)
    regions: Dict[str, float] = field(default_factory=dict)    # name -> seconds, summed
    counts: Dict[str, int] = field(default_factory=dict)       # name -> value, summed
    values: Dict[str, str] = field(default_factory=dict)       # tuned key -> value in force
    ended: float = 0.0                 # when the record was made (epoch seconds)


def option_names(argv: Sequence[str], command: str) -> Tuple[str, ...]:
    """The option names of the command's own arguments (after its name in argv: git's
    `-C <path>` and `-c <key=value>` come before), values dropped (see the module's
    docstring)."""
    argv = [t for t in argv if isinstance(t, str)]
    at = argv.index(command) + 1 if command in argv else 1
    out = set()
    for token in argv[at:]:
        m = LONG_OPTION.match(token)
        if m:
            out.add("--" + m.group(1))
        elif SHORT_OPTION.match(token) or token in STATUS_MODES:
            out.add(token)
    return tuple(sorted(out))


# No git command git-tune times runs for a week: a longer duration is damage.
MAX_SECONDS = 7 * 86400.0
# Counts (index entries, lstat calls) past this are damage too.
MAX_COUNT = 1 << 40


def _seconds(value: object) -> Optional[float]:
    """A duration git wrote, or None for anything else (NaN, a string, a negative, one
    longer than MAX_SECONDS)."""
    return float(value) if strictjson.finite(value, 0.0, MAX_SECONDS) else None


def _number(value: object) -> Optional[int]:
    """A count git wrote (an integer, or its decimal text), or None."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_COUNT:
        return None
    return value


def reduce(lines: Iterable[str], tuned: Iterable[str], ended: float = 0.0) -> Optional[Command]:
    """The record of one process's event lines; None for a nested git (a child of another
    git command, counted in its parent's time) or lines with no command in them.
    Unparseable lines are skipped: the file may have been cut by a crash."""
    tuned = {k.lower() for k in tuned}
    sid = name = repo = version = caller = None
    argv, elapsed, code = (), None, None
    regions: Dict[str, float] = {}
    counts: Dict[str, int] = {}
    values: Dict[str, str] = {}
    for line in lines:
        try:
            ev = strictjson.loads(line, max_depth=8)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        try:
            kind = ev.get("event")
            sid = sid or (ev.get("sid") if isinstance(ev.get("sid"), str) else None)
            if kind == "version":
                version = str(ev.get("exe", ""))[:40]
            elif kind == "start":
                argv = ev.get("argv") or ()
            elif kind == "cmd_name":
                name = str(ev.get("name", ""))[:40]
            elif kind == "def_repo" and ev.get("repo") == 1 and isinstance(ev.get("worktree"), str):
                repo = ev["worktree"]
            elif kind == "cmd_ancestry" and isinstance(ev.get("ancestry"), list) and ev["ancestry"]:
                caller = str(ev["ancestry"][0])[:40]
            elif kind == "def_param" and str(ev.get("param", "")).lower() in tuned:
                values[str(ev["param"])] = str(ev.get("value", ""))[:40]
            elif kind == "region_leave" and ev.get("thread") == "main":
                region = REGIONS.get((str(ev.get("category")), str(ev.get("label"))))
                if region and _seconds(ev.get("t_rel")) is not None:
                    regions[region] = regions.get(region, 0.0) + float(ev["t_rel"])
            elif kind == "data":
                count = COUNTS.get((str(ev.get("category")), str(ev.get("key"))))
                n = _number(ev.get("value"))
                if count and n is not None:
                    counts[count] = n if count in ("entries", "index_version") \
                        else counts.get(count, 0) + n
            elif kind in ("exit", "atexit"):
                if _seconds(ev.get("t_abs")) is not None:
                    elapsed = float(ev["t_abs"]) if kind == "exit" or elapsed is None else elapsed
                code = _number(ev.get("code"))
        except (TypeError, ValueError, AttributeError):
            continue            # a field of an unexpected type: that event says nothing
    if not sid or not name or "/" in sid:
        return None
    return Command(sid, name, option_names(argv if isinstance(argv, list) else [], name), repo, version or "",
                   elapsed, code, caller, regions, counts, values, ended)


def _text(value: object, limit: int = 4096) -> bool:
    return isinstance(value, str) and len(value) <= limit


def from_stored(raw: object) -> Optional[Command]:
    """A record as the store holds it (one JSON object), or None where any field is not
    of the type and range a record of reduce()'s has: a line from another version, one
    cut by a crash, or anyone's damage."""
    if not isinstance(raw, dict):
        return None
    try:
        regions, counts, values = raw.get("regions", {}), raw.get("counts", {}), raw.get("values", {})
        options = raw["options"]
        ok = (_text(raw["sid"], 200) and _text(raw["command"], 40)
              and isinstance(options, list) and all(_text(o, 64) for o in options)
              and (raw["repo"] is None or _text(raw["repo"]))
              and _text(raw["git_version"], 40)
              and (raw["elapsed"] is None or _seconds(raw["elapsed"]) is not None)
              and (raw["code"] is None or _number(raw["code"]) is not None)
              and (raw["caller"] is None or _text(raw["caller"], 40))
              and isinstance(regions, dict) and all(
                  _text(k, 40) and _seconds(v) is not None for k, v in regions.items())
              and isinstance(counts, dict) and all(
                  _text(k, 40) and _number(v) is not None for k, v in counts.items())
              and isinstance(values, dict) and all(
                  _text(k, 80) and _text(v, 40) for k, v in values.items())
              and strictjson.finite(raw.get("ended", 0.0)))
    except (KeyError, TypeError):
        return None
    if not ok:
        return None
    return Command(raw["sid"], raw["command"], tuple(options), raw["repo"], raw["git_version"],
                   None if raw["elapsed"] is None else float(raw["elapsed"]),
                   None if raw["code"] is None else int(raw["code"]), raw["caller"],
                   {k: float(v) for k, v in regions.items()},
                   {k: int(v) for k, v in counts.items()}, dict(values),
                   float(raw.get("ended", 0.0)))
