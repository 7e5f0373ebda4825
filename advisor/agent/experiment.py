"""Online comparison of two values on the user's own commands.

Where a calibration left a key undecided, or decided it on a part of the tree, the
user's own commands are free evidence: on the real tree, the real cache, the real mix.
An experiment alternates two values of one key, the one in force ("approved") and a
candidate, in slots of SLOT_COMMANDS commands of the classes the key affects
(catalogue `affects`), by rewriting git-tune's include file through the same locked,
journaled write as `auto` (git reads it whole or not at all: it is renamed into place).
Each slot's cost is the median seconds per index entry of its commands (a status of
a grown tree is not a slower one); adjacent slots are paired, so drift across the day
cancels, and the pairs are compared with calibration's statistics (models/stats.py).

Bounds (bpftune's): a key whose value changes anything but speed (catalogue `changes`)
is experimented on only with the user's yes, never by the agent on its own, and never
one whose values reach an index only through `git update-index`; where Git's default
keeps what the candidate left (catalogue `reverts_with`), the "Git's default" arm is
the value that takes it back, or its slots would run with the candidate's leftovers
(core.untrackedCache: "keep" keeps the extension, false removes it). A candidate under
which a command fails ends at once; a candidate clearly slower
after EARLY_RUNS pairs is abandoned; values edited by hand end the experiment and are
left alone; `agent disable` (or `experiment stop`) puts the include file and git-tune's
record back byte for byte. Every start, switch and decision is logged (agent log).
"""
import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ContextManager, Dict, List, Optional, Sequence, Set, Tuple

from ... import git, ownpaths, strictjson
from . import retune, store
from .events import Command
from ..keys import registry
from ..measure import calibrate
from ..measure import ab
from ..measure.record import FAILS_CANDIDATE, Comparison, comparison
from ..write import configwrite, journal, revert, safefile, scopes, show
from ...errors import GitError, GitTuneError, UnsafeState, UsageError
from ...models import catalogue, stats, workloads
from ...probes import gitinfo, repo as repo_probe
from ...probes.layout import RepoLayout

STATE = "experiment.json"
# Commands of the affected classes per slot. Even: a user switching back and forth
# between two branches gives every slot as many switches one way as the other, where
# an odd count gives alternate slots, and so each arm, the majority of one direction
# (a slot's cost is its median: one direction's time, and the two directions of a
# switch can differ in cost whatever the value).
SLOT_COMMANDS = 6
MAX_PAIRS = 20              # then the approved value stays: no gain shown
# Pairs whose 95% interval lies within this of 1 settle it sooner: the value in force
# stays, since no gain worth a change is left to find (two counts the user's commands
# cannot tell apart).
EQUIVALENT = 0.05
APPROVED, CANDIDATE = "approved", "candidate"


@dataclass(frozen=True)
class Slot:
    arm: str
    cost: float             # median seconds per index entry of its commands
    commands: int
    # Per command name, the median seconds per index entry: a pair of slots is compared
    # on the classes both hold (a status against a status), not on one pooled median.
    costs: Dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    scope: str
    repo: str
    key: str
    approved: Optional[str]            # None: Git's default (the key not written)
    candidate: str
    classes: Tuple[str, ...]           # command names it watches; () for every command
    arm: str
    since: float                       # commands that ended after this count for the slot
    slots: Tuple[Slot, ...] = ()
    include_bytes: Optional[str] = None   # the include file before the experiment (latin-1)
    entry: Optional[Dict[str, Any]] = None          # git-tune's state entry before the experiment
    # Where the approved value is Git's default and Git's default keeps what the
    # candidate leaves: the value its slots run with instead (catalogue reverts_with).
    reverts_with: Optional[str] = None
    # The include file's SHA-256 as the experiment last left it (None: absent): any
    # other digest means another writer (the user, a git-tune command) wrote the scope.
    wrote: Optional[str] = None
    # The approved value is in force from a wider scope git-tune wrote (its global
    # include): in this scope the approved arm leaves the key unset.
    inherited: bool = False
    # The pairs there were when the candidate first won: it is kept only if it wins the
    # next pair too (a winner re-tested before it is final). None: not yet won.
    confirming: Optional[int] = None

    def value(self, arm: Optional[str] = None) -> Optional[str]:
        """The value in force in the repository during the arm's slots."""
        if (arm or self.arm) == CANDIDATE:
            return self.candidate
        return self.approved if self.approved is not None else self.reverts_with

    def written(self, arm: Optional[str] = None) -> Optional[str]:
        """The value the arm writes into the experiment's scope (None: the key unset)."""
        if (arm or self.arm) == APPROVED and self.inherited:
            return None
        return self.value(arm)


def _path() -> str:
    return os.path.join(store.agent_dir(), STATE)


def load() -> Optional[Experiment]:
    """The running experiment, None where there is none or its state is damaged (step
    and stop end a damaged one: _damaged)."""
    return _read()[0]


def _read() -> Tuple[Optional[Experiment], bool]:
    """(the experiment, whether its state file is there but is no valid record)."""
    try:
        data = ownpaths.read_file(_path(), limit=1 << 20)
    except UnsafeState:
        return None, True
    if data is None:
        return None, False
    try:
        return _parse(strictjson.loads(data)), False
    except (ValueError, TypeError, KeyError):
        return None, True


def _text(v: object, none: bool = False) -> bool:
    return isinstance(v, str) or (none and v is None)


def _parse(raw: object) -> Experiment:
    """experiment.json's record; ValueError where any field is not of its type."""
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    slots = raw.get("slots", [])
    if not (all(_text(raw.get(k)) for k in ("scope", "repo", "key", "candidate", "arm"))
            and raw["arm"] in (APPROVED, CANDIDATE)
            and all(_text(raw.get(k), none=True) for k in ("approved", "reverts_with",
                                                             "include_bytes", "wrote"))
            and isinstance(raw.get("classes"), list) and all(_text(c) for c in raw["classes"])
            and strictjson.finite(raw.get("since"))
            and (raw.get("entry") is None or isinstance(raw["entry"], dict))
            and isinstance(slots, list)
            and all(isinstance(x, dict) and x.get("arm") in (APPROVED, CANDIDATE)
                    and strictjson.finite(x.get("cost")) and strictjson.finite(x.get("commands"))
                    and isinstance(x.get("costs", {}), dict)
                    and all(_text(k) and strictjson.finite(v)
                            for k, v in x.get("costs", {}).items())
                    for x in slots)
            and (raw.get("confirming") is None or strictjson.finite(raw["confirming"]))):
        raise ValueError("not an experiment record")
    return Experiment(raw["scope"], raw["repo"], raw["key"], raw["approved"], raw["candidate"],
                      tuple(raw["classes"]), raw["arm"], float(raw["since"]),
                      tuple(Slot(x["arm"], float(x["cost"]), int(x["commands"]),
                                 {k: float(v) for k, v in x.get("costs", {}).items()})
                            for x in slots),
                      raw.get("include_bytes"), raw.get("entry"), raw.get("reverts_with"),
                      raw.get("wrote"), raw.get("inherited") is True,
                      None if raw.get("confirming") is None else int(raw["confirming"]))


def _save(exp: Optional[Experiment]) -> None:
    if exp is None:
        try:
            os.unlink(_path())
        except FileNotFoundError:
            pass
        return
    ownpaths.write_file(_path(), json.dumps(asdict(exp)).encode())


def _include_digest(exp: Experiment) -> Optional[str]:
    """The SHA-256 of the experiment's include file now (None: absent)."""
    target = _target(exp)
    return journal.digest(journal.read_bytes(target.include_file)) if target else None


def _target(exp: Experiment) -> Optional[scopes.Scope]:
    entry = show.applied_to(exp.scope, exp.repo)
    if entry is not None:
        return entry.scope
    try:
        return scopes.resolve(exp.scope, repo_probe.locate(exp.repo))
    except (GitTuneError, OSError):
        return None


def classes_of(key: catalogue.Key) -> Tuple[str, ...]:
    """The command names whose durations the key changes (its `affects`); () where it
    affects every command that reads or writes the index."""
    if any(a.startswith("every ") for a in key.affects):
        return ()
    return tuple(sorted({a.split()[0] for a in key.affects}))


def _write(exp: Experiment, arm: str) -> Experiment:
    """The key at the arm's value in the scope, through configwrite (that key only: the
    scope's other values stay as they are); the experiment with the digest it left."""
    entry = show.applied_to(exp.scope, exp.repo)
    value = exp.written(arm)
    version = entry.git_version if entry else catalogue.format_version(gitinfo.require_git())
    prov = configwrite.Provenance(version, entry.fingerprint if entry else "agent",
                                  "agent experiment", exp.repo, entry.entries if entry else None,
                                  {exp.key: f"agent experiment: the {arm} value"})
    target = entry.scope if entry else scopes.resolve(exp.scope, repo_probe.locate(exp.repo))
    plan = configwrite.plan(target, {} if value is None else {exp.key: value}, prov,
                            cwd=exp.repo, per_repo=entry.per_repo if entry else None,
                            writer=configwrite.EXPERIMENT, touches=(exp.key,))
    configwrite.apply(plan, prov, cwd=exp.repo)
    return replace(exp, wrote=journal.digest(journal.read_bytes(target.include_file)))


def _one_at_a_time() -> ContextManager[None]:
    """The collector's step, `experiment --stop` and `agent disable` take turns: a stop
    while a step switches arms must not leave the switched value behind."""
    return safefile.lock(store.agent_dir())


def stop() -> bool:
    """End the running experiment with the value in force before it (_restore). Whether
    one was running (a damaged one included)."""
    with _one_at_a_time():
        exp, damaged = _read()
        if damaged:
            _end_damaged()
            return True
        if exp is not None:
            _log(exp, "stopped", "stopped by the user; " + _restore(exp) + _leftovers(exp))
        return exp is not None


def abandon(why: str) -> None:
    """End the running experiment where a step could not go on (its switch could not be
    written: a vanished or read-only repository): the value from before it where it can
    be put back, and its state gone either way, or every minute would fail again."""
    with _one_at_a_time():
        exp = load()
        if exp is None:
            return
        try:
            why += "; " + _restore(exp)
        except GitTuneError as e:
            _save(None)
            why = f"{why}; the value could not be put back either: {e}"
        _log(exp, "stopped", why)


def _end_damaged() -> None:
    """A state file that is no experiment record (damaged, truncated): moved aside, and
    the experiment its log says was running ended with the value from before it, where
    its key still holds the candidate (never the candidate left in force)."""
    try:
        os.replace(_path(), _path() + ".damaged")
    except OSError:
        _save(None)
    started = None
    for e in retune.log():
        if e.get("experiment") == "started":
            started = e
        elif e.get("experiment") in ("stopped", "decided") and started is not None \
                and (e.get("scope"), e.get("repo"), e.get("key")) == \
                (started.get("scope"), started.get("repo"), started.get("key")):
            started = None
    if started is None or not all(isinstance(started.get(k), str)
                                  for k in ("scope", "repo", "key", "candidate")):
        return
    exp = Experiment(started["scope"], started["repo"], started["key"], started.get("approved"),
                     started["candidate"], (), CANDIDATE, 0.0,
                     inherited=started.get("inherited") is True)
    try:
        done = _put_back(exp)
    except (GitTuneError, OSError) as e:
        done = f"the value could not be put back: {e}"
    _log(exp, "stopped", f"its state file was damaged (moved aside to {STATE}.damaged); "
         + done)


def start(scope: str, key_name: str, candidate: str, repo: Optional[str] = None,
          yes: bool = False) -> Experiment:
    """An experiment on `scope` (where git-tune wrote, or will write: `repo` names the
    repository whose commands count where git-tune has written nothing there yet).
    `yes`: the user agreed to a key that changes more than speed (catalogue `changes`)."""
    with _one_at_a_time():
        return _start(scope, key_name, candidate, repo, yes)


def _start(scope: str, key_name: str, candidate: str, repo: Optional[str],
           yes: bool = False) -> Experiment:
    key = catalogue.lookup(key_name)
    if key.needs_index_rewrite or key.starts_process:
        raise UsageError(f"{key.name} changes {key.changes or 'more than speed'}, and its "
                         "values take effect only through " +
                         ("`git update-index`" if key.needs_index_rewrite else
                          "a process started per repository") +
                         ": the agent does not experiment on it")
    if key.per_repository and scope != "local":
        raise UsageError(f"{key.name} belongs to one repository: experiment on it with "
                         "--scope local")
    if key.changes and not yes:
        raise UsageError(f"{key.name} changes {key.changes}: the agent experiments on it "
                         "only with your yes (--yes), and never on its own")
    candidate = key.validate(candidate)
    if load() is not None:
        raise UsageError("an experiment is running already (`git-tune agent experiment --stop` ends it)")
    layout = repo_probe.locate(repo) if repo or scope == "local" else None
    where = layout.worktree if layout else None
    entry = show.applied_to(scope, where)
    repo = where or (entry.repo if entry else None)      # the one named wins
    if not repo:
        raise UsageError(f"name the repository whose commands count (--repo): scope {scope} "
                         "was not measured on one")
    approved, inherited = _approved(scope, layout, entry, key.name)
    if candidate == (approved if approved is not None else key.default):
        raise UsageError(f"{key.name}={candidate} is the value in force already")
    if layout is None or layout.worktree != repo:
        layout = repo_probe.locate(repo)    # the repository git-tune measured there
    if layout is None:
        raise UsageError(f"{repo} is no longer a git repository")
    elsewhere = set_elsewhere(layout, key.name, approved)
    if elsewhere:
        raise UsageError(f"{key.name} is {elsewhere} in {repo}: a value set there is "
                         "left alone (and the experiment's values would not be in force)")
    slower = measured_slower(repo, key.name, candidate)
    if slower:
        raise UsageError(f"calibration found {key.name}={candidate} slower beyond noise "
                         f"({slower}): the agent tries no value known to cost the user")
    original = None
    if entry is not None:
        with open(entry.scope.include_file, "rb") as f:
            original = f.read().decode("latin-1")
    exp = Experiment(scope, repo, key.name, approved, candidate, classes_of(key),
                     APPROVED, time.time(), include_bytes=original,
                     entry=journal.load_state().get(entry.scope.key) if entry else None,
                     reverts_with=key.reverts_with if approved is None and key.reverts_with
                     else None, inherited=inherited)
    exp = replace(exp, wrote=_include_digest(exp))
    _save(exp)
    if exp.reverts_with is not None:
        # The first slot runs with it too (no command sees the key unset meanwhile).
        exp = _write(exp, APPROVED)
        _save(exp)
    _log(exp, "started", f"{key.name}: {shown(exp, APPROVED)} against {candidate}"
         + (f"; with the user's yes: it changes {key.changes}" if key.changes else ""),
         approved=approved, inherited=inherited)
    return exp


def _approved(scope: str, layout: Optional[RepoLayout], entry: Optional[journal.Applied],
              key: str) -> Tuple[Optional[str], bool]:
    """(the value in force the candidate is compared with, whether it comes from a wider
    scope): the scope's own value; in a local scope without one, a value git-tune wrote
    in a wider scope (the local experiment runs against it and leaves it where it is);
    else None, Git's default."""
    approved = entry.settings.get(key) if entry else None
    if approved is None and scope == "local" and layout is not None:
        approved = _from_wider_scope(layout, key)
        return approved, approved is not None
    return approved, False


def _from_wider_scope(layout: Optional[RepoLayout], key: str) -> Optional[str]:
    """The value git reads for `key` in the repository where it comes from an include
    file git-tune wrote for a wider scope (global, system), else None."""
    proc = git.run(["config", "--show-origin", "--get", key], repo=layout)
    if proc.returncode != 0:
        return None
    origin, _, value = proc.stdout.rstrip("\n").partition("\t")
    path = origin[len("file:"):] if origin.startswith("file:") else ""
    local = scopes.resolve("local", layout).include_file
    return value if path and path != local and scopes.owned_by_git_tune(path) else None


def shown(exp: Experiment, arm: str) -> str:
    """The arm's value as the log says it."""
    value = exp.value(arm)
    if arm == APPROVED and exp.approved is None:
        return f"Git default ({value} in its slots)" if value is not None else "Git default"
    return value if value is not None else "Git default"


def set_elsewhere(layout: Optional[RepoLayout], key: str, approved: Optional[str]) -> Optional[str]:
    """Where the located repository's git reads `key` from, with its value, when that is
    not the experiment's scope's value (`approved`; None: the key unset anywhere): a
    value the user set, or a later config file's, would be the one in force in both arms."""
    proc = git.run(["config", "--show-origin", "--get", key], repo=layout)
    if proc.returncode not in (0, 1):
        where = f"{layout.worktree}'s " if layout else "the"
        raise UsageError(f"git cannot read {where} config: "
                         f"{git.first_lines(proc.stderr)}")
    origin, _, value = proc.stdout.rstrip("\n").partition("\t")
    if (value if proc.returncode == 0 else None) == approved:
        return None
    return f"{value} from {origin}" if proc.returncode == 0 else "unset (Git's default)"


def measured_slower(repo: str, key: str, value: str) -> Optional[str]:
    """The workload on which this repository's stored calibration found the value slower
    than Git's default beyond noise, or None (also where nothing is stored)."""
    record = calibrate.load_fresh(calibrate.probe_repository(repo))
    trial = record.trials.get(key) if record else None
    for c in trial.comparisons if trial else ():
        if c.candidate.get(key) == value and (c.fails == FAILS_CANDIDATE or (
                c.estimate is not None and c.estimate.verdict == stats.SLOWER)):
            return c.workload
    return None


def _log(exp: Experiment, event: str, what: str, **more: object) -> None:
    retune.append_log({"time": time.time(), "experiment": event, "scope": exp.scope,
                       "repo": exp.repo, "key": exp.key, "candidate": exp.candidate,
                       "what": what, **more})


def propose(records: Sequence[Command]) -> Optional[Dict[str, Any]]:
    """An experiment the agent starts on its own, on what a calibration left open
    (registry.open_questions: a worker count set on the engine's ranking beyond what real
    git timed on a part, one a part showed faster within its noise, a key the budget
    left undecided), in a repository whose commands it sees: within the bounds of one
    the user starts (start() refuses keys that change more than speed, values in force,
    values calibration found slower, keys set elsewhere), each question asked once (the
    log), never on values edited by hand. Always in the repository's own local scope:
    the evidence is that repository's commands, so no other repository's change (a
    value git-tune wrote globally stays in force there as the approved arm)."""
    seen = {c.repo for c in records if c.repo}
    asked = {(e.get("scope"), e.get("repo"), e.get("key"), e.get("candidate"))
             for e in retune.log() if e.get("experiment") == "started"}
    for spec, repo in _where_to_ask(seen):
        try:
            record = calibrate.load_fresh(calibrate.probe_repository(repo))
        except (GitTuneError, OSError):
            continue        # a repository moved or damaged since: the others are asked
        if record is None:
            continue
        questions = registry.open_questions(record, workloads.weights(record.options.workload))
        for name, (value, why) in questions.items():
            if (spec, repo, name, value) in asked:
                continue
            try:
                exp = start(spec, name, value, repo)
            except (UsageError, GitError):
                continue
            _log(exp, "proposed", why)
            return {"started": name, "candidate": value, "why": why, "scope": spec,
                    "repo": repo}
    return None


def _where_to_ask(seen: Set[str]) -> List[Tuple[str, str]]:
    """(scope, repository) pairs whose stored calibrations may hold questions: each
    write of git-tune's measured on a repository whose commands the agent sees (not
    edited by hand), then each seen repository with none of its own but a calibration
    stored (calibrate.stored_git_dirs: no probe of a repository git-tune never measured)."""
    out, mine = [], set()
    for entry in journal.applied():
        if entry.repo and entry.repo in seen and not show.edited_outside(entry):
            out.append(("local", entry.repo))       # evidence of one repository: its own
        mine.add(entry.repo)
    stored = calibrate.stored_git_dirs()
    for repo in sorted(seen - mine):
        try:
            layout = repo_probe.locate(repo)
        except (GitTuneError, OSError):
            continue
        if layout and layout.git_dir in stored:
            out.append(("local", repo))
    return out


def _in_slot(exp: Experiment, records: Sequence[Command]) -> List[Command]:
    """The commands of the current slot: in the repository, of the key's classes, ended
    since the slot began, run with the arm's value in force."""
    want = exp.value()
    return [c for c in records
            if c.repo == exp.repo and c.ended > exp.since
            and (not exp.classes or c.command in exp.classes)
            and {k.lower(): v for k, v in c.values.items()}.get(exp.key.lower()) == want]


def _watched(exp: Experiment, records: Sequence[Command]) -> List[Command]:
    """The slot's commands timed to the end (a git killed before its exit has no
    duration)."""
    return [c for c in _in_slot(exp, records) if c.elapsed]


def _failed(exp: Experiment, records: Sequence[Command]) -> Optional[Command]:
    """A command of the slot's that exited non-zero (killed ones included)."""
    return next((c for c in _in_slot(exp, records) if c.code not in (0, None)), None)


def _cost(commands: Sequence[Command]) -> float:
    return statistics.median(c.elapsed / max(1, c.counts.get("entries", 1))
                             for c in commands if c.elapsed)


def _slot(arm: str, commands: Sequence[Command]) -> Slot:
    by_class: Dict[str, List[Command]] = {}
    for c in commands:
        by_class.setdefault(c.command, []).append(c)
    return Slot(arm, _cost(commands), len(commands),
                {name: _cost(group) for name, group in sorted(by_class.items())})


def _like_with_like(x: Slot, y: Slot) -> Tuple[float, float]:
    """Two slots' costs on the command classes both hold: the geometric mean of each
    class's median (a slot of statuses and one of switches are not compared as one
    pooled number); the pooled medians where they share none."""
    shared = sorted(set(x.costs) & set(y.costs))
    if not shared or any(x.costs[c] <= 0 or y.costs[c] <= 0 for c in shared):
        return x.cost, y.cost
    def mean(s: Slot) -> float:
        return math.exp(sum(math.log(s.costs[c]) for c in shared) / len(shared))
    return mean(x), mean(y)


def pairs(exp: Experiment) -> Tuple[List[float], List[float]]:
    """(approved, candidate) costs of adjacent slot pairs, like with like."""
    a, b = [], []
    for first, second in zip(exp.slots[::2], exp.slots[1::2]):
        x, y = (first, second) if first.arm == APPROVED else (second, first)
        ca, cb = _like_with_like(x, y)
        a.append(ca)
        b.append(cb)
    return a, b


def comparison_of(exp: Experiment) -> Comparison:
    """The pairs so far as calibration's comparison record: the value in force as the
    "default" side, the candidate as the other, the commands it watches as the workload."""
    a, b = pairs(exp)
    return comparison(",".join(exp.classes) or "git", {exp.key: exp.approved or ""},
                      {exp.key: exp.candidate}, a, b, stopped=ab.stopped(a, b), paired=True)


def _verdict(exp: Experiment) -> Optional[Tuple[str, str]]:
    """(the arm kept, why) once the pairs decide, else None: calibration's rule for
    stopping early (ab.stopped), then its statistics on MIN_RUNS pairs or more."""
    a, b = pairs(exp)
    why = ab.stopped(a, b)
    if why == ab.STOPPED_SLOWER:
        return APPROVED, f"the candidate was clearly slower in {len(b)} pairs of slots"
    if why == ab.STOPPED_FASTER:
        return CANDIDATE, f"clearly faster in {len(b)} pairs of slots"
    if len(b) < stats.MIN_RUNS:
        return None
    est = comparison_of(exp).estimate
    assert est is not None      # MIN_RUNS pairs, each with both arms' slots
    if est.verdict == stats.FASTER:
        return CANDIDATE, f"faster beyond noise: {1 / est.ratio:.2f}x over {len(b)} pairs"
    if est.verdict == stats.SLOWER:
        return APPROVED, f"slower beyond noise: {1 / est.ratio:.2f}x over {len(b)} pairs"
    if 1 - EQUIVALENT <= est.low and est.high <= 1 + EQUIVALENT:
        return APPROVED, (f"the same within {EQUIVALENT:.0%}: {1 / est.ratio:.2f}x "
                          f"({1 / est.high:.2f}-{1 / est.low:.2f}) over {len(b)} pairs")
    if len(b) >= MAX_PAIRS:
        return APPROVED, f"no difference beyond noise in {len(b)} pairs"
    return None


def _finish(exp: Experiment, keep: str, why: str) -> Dict[str, Any]:
    if keep == APPROVED:
        done = _restore(exp)
    else:
        if exp.arm != CANDIDATE:
            exp = _write(exp, CANDIDATE)
        _save(None)
        done = ""
    a, b = pairs(exp)
    value = exp.candidate if keep == CANDIDATE else exp.approved
    _log(exp, "decided", f"kept {exp.key}={value or 'Git default'}: {why}"
         + (f"; {done}" if done else "") + (_leftovers(exp) if keep == APPROVED else ""),
         kept=keep, value=value, approved_costs=a, candidate_costs=b,
         **({"comparison": asdict(comparison_of(exp))} if min(len(a), len(b)) >= 2 else {}))
    return {"decided": keep, "why": why, "value": value}


def _leftovers(exp: Experiment) -> str:
    """What the candidate's slots may have left in the repository's index once the key is
    Git's default again (Tuner.index_leftover), said with the command that removes it:
    git-tune does not write the user's index."""
    if exp.reverts_with is None:
        return ""
    return "".join(f"; {text}" for text in revert.index_leftovers([{exp.key: exp.candidate}]))


def _restore(exp: Experiment) -> str:
    """End the experiment with the value in force before it; what was done. Where nobody
    else wrote the scope since the experiment's last write, the include file and
    git-tune's record go back as they were before it, byte for byte (where git-tune had
    written nothing there, its writes are reverted). Where someone did, their bytes
    stay: only the experiment's key is put back, and only if it still holds the value
    the experiment left (_put_back)."""
    if _include_digest(exp) != exp.wrote:
        done = _put_back(exp)
        _save(None)
        return done
    entry = show.applied_to(exp.scope, exp.repo)
    if exp.entry is None:
        if entry is not None:
            revert.revert(entry.scope)
        _save(None)
        return "the values are as before it"
    with safefile.lock(scopes.state_dir()):
        if exp.include_bytes is not None and entry is not None:
            safefile.write_atomic(entry.scope.include_file, exp.include_bytes.encode("latin-1"),
                                  mode=0o644)
            state = journal.load_state()
            state[entry.scope.key] = exp.entry
            journal.save_state(state)
    _save(None)
    return "the values are as before it"


def _put_back(exp: Experiment) -> str:
    """The experiment's key back to the value from before it, in a scope someone else
    wrote since: only where it still holds a value the experiment left (the candidate,
    or the approved arm's stand-in), and not in a file edited by hand. What was done."""
    entry = show.applied_to(exp.scope, exp.repo)
    if entry is None:
        return "the scope was reverted meanwhile: nothing to put back"
    now = configwrite.read_include(entry.scope.include_file).get(exp.key)
    if now == (None if exp.inherited else exp.approved):
        return f"{exp.key} is {now or 'Git default'} already, as before it"
    if now not in {exp.candidate, exp.written(APPROVED)}:
        return (f"{exp.key} was set to {now or 'Git default'} meanwhile: that value is "
                "left alone")
    if show.edited_outside(entry):
        return (f"the include file was edited by hand: left alone ({exp.key} is {now} "
                "there; `git-tune set` or `git-tune revert` changes it)")
    version = entry.git_version or catalogue.format_version(gitinfo.require_git())
    prov = configwrite.Provenance(version, entry.fingerprint, "agent experiment", exp.repo,
                                  entry.entries, {})
    back = None if exp.inherited else exp.approved
    plan = configwrite.plan(entry.scope, {} if back is None else {exp.key: back}, prov,
                            cwd=exp.repo,
                            per_repo=entry.per_repo, writer=configwrite.EXPERIMENT,
                            touches=(exp.key,))
    if not plan.settings and not plan.per_repo and exp.entry is None:
        revert.revert(entry.scope)          # nothing of anyone's left there: all reverted
    else:
        configwrite.apply(plan, prov, cwd=exp.repo)
    return f"{exp.key} put back to {exp.approved or 'Git default'}; the other values kept"


def step(records: Sequence[Command]) -> Optional[Dict[str, Any]]:
    """One look at the user's commands: end the experiment where its state is damaged,
    its scope was written by someone else, or the key was set elsewhere; end the arm on
    a failure; close a full slot and switch arms; decide where the pairs do. What
    happened, or None."""
    with _one_at_a_time():
        return _step(records)


def _step(records: Sequence[Command]) -> Optional[Dict[str, Any]]:
    exp, damaged = _read()
    if damaged:
        _end_damaged()
        return {"stopped": "damaged state"}
    if exp is None:
        return None
    if _include_digest(exp) != exp.wrote:
        done = _put_back(exp)
        _save(None)
        _log(exp, "stopped", f"the scope was written by someone else: the experiment "
             f"ended; {done}")
        return {"stopped": "written by someone else"}
    layout = repo_probe.locate(exp.repo) if os.path.isdir(exp.repo) else None
    elsewhere = set_elsewhere(layout, exp.key, exp.value()) if layout else None
    if elsewhere:
        done = _restore(exp)
        _log(exp, "stopped", f"{exp.key} is {elsewhere} now: the experiment ended "
             f"(your value is the one in force); {done}")
        return {"stopped": "set elsewhere"}
    failed = _failed(exp, records)
    if failed is not None and exp.arm == CANDIDATE:
        return _finish(exp, APPROVED, f"git {failed.command} exited {failed.code} under "
                                      "the candidate")
    mine = _watched(exp, records)
    if len(mine) < SLOT_COMMANDS:
        return None
    exp = replace(exp, slots=exp.slots + (_slot(exp.arm, mine),))
    a, b = pairs(exp)
    if exp.confirming is not None and len(b) > exp.confirming:
        # The re-test: the winner kept only where it won this next pair as well.
        if b[-1] < a[-1]:
            return _finish(exp, CANDIDATE, f"faster, and again in one more pair of slots "
                                           f"({len(b)} pairs)")
        return _finish(exp, APPROVED, "faster at first, but not in the one more pair of slots "
                                      f"it was re-tested on ({len(b)} pairs)")
    verdict = _verdict(exp) if exp.confirming is None else None
    if verdict is not None and verdict[0] == CANDIDATE:
        exp = replace(exp, confirming=len(b))
        _log(exp, "re-testing", f"{exp.key}={exp.candidate} {verdict[1]}; re-tested for one "
             "more pair of slots before it is final")
    elif verdict is not None:
        return _finish(exp, *verdict)
    other = CANDIDATE if exp.arm == APPROVED else APPROVED
    exp = _write(exp, other)
    exp = replace(exp, arm=other, since=max(c.ended for c in mine))
    _save(exp)
    _log(exp, "switched", f"{exp.key}={exp.value() or 'Git default'} for the next slot")
    return {"switched": other}


def status() -> Optional[Dict[str, Any]]:
    exp = load()
    if exp is None:
        return None
    a, b = pairs(exp)
    out = {k: v for k, v in asdict(exp).items() if k not in ("include_bytes", "entry")}
    return {**out, "pairs": len(b)}
