"""Online comparison of two values on the user's own commands (issue #33).

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
import os
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import List, Optional, Sequence, Tuple

from git_tune import git
from git_tune.advisor.agent import retune, store
from git_tune.advisor.agent.events import Command
from git_tune.advisor.keys import registry
from git_tune.advisor.measure import calibrate as cal
from git_tune.advisor.measure import ab
from git_tune.advisor.measure.record import FAILS_CANDIDATE, Comparison, comparison
from git_tune.advisor.write import configwrite, journal, revert, safefile, scopes, show
from git_tune.errors import GitError, GitTuneError, UsageError
from git_tune.models import catalogue, stats, workloads
from git_tune.probes import gitinfo, repo as repo_probe

STATE = "experiment.json"
# Commands of the affected classes per slot. Even: a user switching back and forth
# between two branches gives every slot as many switches one way as the other, where
# an odd count gives alternate slots, and so each arm, the majority of one direction
# (a slot's cost is its median: one direction's time; verify's switch showed 32 ms one
# way and 43 ms the other on the demo repository, whatever the value).
SLOT_COMMANDS = 6
MAX_PAIRS = 20              # then the approved value stays: no gain shown
# Pairs whose 95% interval lies within this of 1 settle it sooner: the value in force
# stays, since no gain worth a change is left to find (two counts the user's commands
# cannot tell apart, on the NFS-like bed 0.93-1.00 against 0.94-0.99 ms an entry).
EQUIVALENT = 0.05
APPROVED, CANDIDATE = "approved", "candidate"


@dataclass(frozen=True)
class Slot:
    arm: str
    cost: float             # median seconds per index entry of its commands
    commands: int


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
    entry: Optional[dict] = None          # git-tune's state entry before the experiment
    # Where the approved value is Git's default and Git's default keeps what the
    # candidate leaves: the value its slots run with instead (catalogue reverts_with).
    reverts_with: Optional[str] = None

    def value(self, arm: Optional[str] = None) -> Optional[str]:
        if (arm or self.arm) == CANDIDATE:
            return self.candidate
        return self.approved if self.approved is not None else self.reverts_with


def _path() -> str:
    return os.path.join(store.agent_dir(), STATE)


def load() -> Optional[Experiment]:
    try:
        with open(_path()) as f:
            data = json.load(f)
        data["slots"] = tuple(Slot(**s) for s in data.get("slots", ()))
        data["classes"] = tuple(data["classes"])
        return Experiment(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _save(exp: Optional[Experiment]) -> None:
    if exp is None:
        try:
            os.unlink(_path())
        except FileNotFoundError:
            pass
        return
    safefile.write_atomic(_path(), json.dumps(asdict(exp)).encode(), mode=0o600)


def classes_of(key: catalogue.Key) -> Tuple[str, ...]:
    """The command names whose durations the key changes (its `affects`); () where it
    affects every command that reads or writes the index."""
    if any(a.startswith("every ") for a in key.affects):
        return ()
    return tuple(sorted({a.split()[0] for a in key.affects}))


def _write(exp: Experiment, arm: str) -> None:
    """The scope's values with the key at the arm's value, through configwrite."""
    entry = show.applied_to(exp.scope, exp.repo)
    settings = dict(entry.settings) if entry else {}
    value = exp.value(arm)
    if value is None:
        settings.pop(exp.key, None)
    else:
        settings[exp.key] = value
    version = entry.git_version if entry else catalogue.format_version(gitinfo.require_git())
    prov = configwrite.Provenance(version, entry.fingerprint if entry else "agent",
                                  "agent experiment", exp.repo, entry.entries if entry else None,
                                  {exp.key: f"agent experiment: the {arm} value"})
    target = entry.scope if entry else scopes.resolve(exp.scope, repo_probe.locate(exp.repo))
    plan = configwrite.plan(target, settings, prov, cwd=exp.repo,
                            per_repo=entry.per_repo if entry else None)
    configwrite.apply(plan, prov, cwd=exp.repo)


def _one_at_a_time():
    """The collector's step, `experiment --stop` and `agent disable` take turns: a stop
    while a step switches arms must not leave the switched value behind."""
    return safefile.lock(store.agent_dir())


def stop() -> bool:
    """End the running experiment: the values as before it, byte for byte. Whether one
    was running."""
    with _one_at_a_time():
        exp = load()
        if exp is not None:
            _restore(exp)
            _log(exp, "stopped", "stopped by the user; the values are as before it"
                 + _leftovers(exp))
        return exp is not None


def abandon(why: str) -> None:
    """End the running experiment where a step could not go on (its switch could not be
    written: a vanished or read-only repository): the values as before it where they can
    be put back, and its state gone either way, or every minute would fail again."""
    with _one_at_a_time():
        exp = load()
        if exp is None:
            return
        try:
            _restore(exp)
        except GitTuneError as e:
            _save(None)
            why = f"{why}; the values could not be put back either: {e}"
        _log(exp, "stopped", why)


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
    if key.needs_index_rewrite or key.per_repository:
        raise UsageError(f"{key.name} changes {key.changes or 'more than speed'}, and its "
                         "values take effect only through " +
                         ("`git update-index`" if key.needs_index_rewrite else
                          "a process started per repository") +
                         ": the agent does not experiment on it")
    if key.changes and not yes:
        raise UsageError(f"{key.name} changes {key.changes}: the agent experiments on it "
                         "only with your yes (--yes), and never on its own")
    candidate = key.validate(candidate)
    if load() is not None:
        raise UsageError("an experiment is running already (git-tune agent experiment stop)")
    layout = repo_probe.locate(repo) if repo or scope == "local" else None
    where = layout.worktree if layout else None
    entry = show.applied_to(scope, where)
    repo = entry.repo if entry and entry.repo else where
    if not repo:
        raise UsageError(f"name the repository whose commands count (--repo): scope {scope} "
                         "was not measured on one")
    approved = entry.settings.get(key.name) if entry else None
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
                     else None)
    _save(exp)
    if exp.reverts_with is not None:
        # The first slot runs with it too (no command sees the key unset meanwhile).
        _write(exp, APPROVED)
    _log(exp, "started", f"{key.name}: {shown(exp, APPROVED)} against {candidate}"
         + (f"; with the user's yes: it changes {key.changes}" if key.changes else ""))
    return exp


def shown(exp: Experiment, arm: str) -> str:
    """The arm's value as the log says it."""
    value = exp.value(arm)
    if arm == APPROVED and exp.approved is None:
        return f"Git default ({value} in its slots)" if value is not None else "Git default"
    return value


def set_elsewhere(layout, key: str, approved: Optional[str]) -> Optional[str]:
    """Where the located repository's git reads `key` from, with its value, when that is
    not the experiment's scope's value (`approved`; None: the key unset anywhere): a
    value the user set, or a later config file's, would be the one in force in both arms."""
    proc = git.run(["config", "--show-origin", "--get", key], repo=layout)
    if proc.returncode not in (0, 1):
        raise UsageError(f"git cannot read {layout.worktree}'s config: "
                         f"{git.first_lines(proc.stderr)}")
    origin, _, value = proc.stdout.rstrip("\n").partition("\t")
    if (value if proc.returncode == 0 else None) == approved:
        return None
    return f"{value} from {origin}" if proc.returncode == 0 else "unset (Git's default)"


def measured_slower(repo: str, key: str, value: str) -> Optional[str]:
    """The workload on which this repository's stored calibration found the value slower
    than Git's default beyond noise, or None (also where nothing is stored)."""
    record = cal.load_fresh(cal.probe_repository(repo))
    trial = record.trials.get(key) if record else None
    for c in trial.comparisons if trial else ():
        if c.candidate.get(key) == value and (c.fails == FAILS_CANDIDATE or (
                c.estimate is not None and c.estimate.verdict == stats.SLOWER)):
            return c.workload
    return None


def _log(exp: Experiment, event: str, what: str, **more) -> None:
    retune.append_log({"time": time.time(), "experiment": event, "scope": exp.scope,
                       "repo": exp.repo, "key": exp.key, "candidate": exp.candidate,
                       "what": what, **more})


def propose(records: Sequence[Command]) -> Optional[dict]:
    """An experiment the agent starts on its own, on what a calibration left open
    (registry.open_questions: a worker count set on the engine's ranking beyond what real
    git timed on a part, one a part showed faster within its noise, a key the budget
    left undecided), in a repository whose commands it sees: within the bounds of one
    the user starts (start() refuses keys that change more than speed, values in force,
    values calibration found slower, keys set elsewhere), each question asked once (the
    log), never on values edited by hand. Where git-tune wrote the values measured on
    the repository, there; where a calibration of it wrote nothing (Git's defaults kept:
    at 100,000 files on the NFS-like bed a part's 6 workers within noise kept 1), in the
    repository's own local scope, so that no other repository's commands change."""
    seen = {c.repo for c in records if c.repo}
    asked = {(e.get("scope"), e.get("repo"), e.get("key"), e.get("candidate"))
             for e in retune.log() if e.get("experiment") == "started"}
    for spec, repo in _where_to_ask(seen):
        try:
            record = cal.load_fresh(cal.probe_repository(repo))
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


def _where_to_ask(seen) -> List[Tuple[str, str]]:
    """(scope, repository) pairs whose stored calibrations may hold questions: each
    write of git-tune's measured on a repository whose commands the agent sees (not
    edited by hand), then each seen repository with none of its own but a calibration
    stored (cal.stored_git_dirs: no probe of a repository git-tune never measured)."""
    out, mine = [], set()
    for entry in journal.applied():
        if entry.repo and entry.repo in seen and not show.edited_outside(entry):
            out.append((show.scope_spec(entry.scope), entry.repo))
        mine.add(entry.repo)
    stored = cal.stored_git_dirs()
    for repo in sorted(seen - mine):
        try:
            layout = repo_probe.locate(repo)
        except (GitTuneError, OSError):
            continue
        if layout and layout.git_dir in stored:
            out.append(("local", repo))
    return out


def _watched(exp: Experiment, records: Sequence[Command]) -> List[Command]:
    """The slot's commands: in the repository, of the key's classes, ended since the
    slot began, run with the arm's value in force."""
    want = exp.value()
    out = []
    for c in records:
        if c.repo != exp.repo or c.ended <= exp.since:
            continue
        if exp.classes and c.command not in exp.classes:
            continue
        if {k.lower(): v for k, v in c.values.items()}.get(exp.key.lower()) == want:
            out.append(c)
    return out


def _cost(commands: Sequence[Command]) -> float:
    return statistics.median(c.elapsed / max(1, c.counts.get("entries", 1))
                             for c in commands if c.elapsed)


def pairs(exp: Experiment) -> Tuple[List[float], List[float]]:
    """(approved, candidate) costs of adjacent slot pairs."""
    a, b = [], []
    for first, second in zip(exp.slots[::2], exp.slots[1::2]):
        x, y = (first, second) if first.arm == APPROVED else (second, first)
        a.append(x.cost)
        b.append(y.cost)
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


def _finish(exp: Experiment, keep: str, why: str) -> dict:
    if keep == APPROVED:
        _restore(exp)
    else:
        if exp.arm != CANDIDATE:
            _write(exp, CANDIDATE)
        _save(None)
    a, b = pairs(exp)
    value = exp.candidate if keep == CANDIDATE else exp.approved
    _log(exp, "decided", f"kept {exp.key}={value or 'Git default'}: {why}"
         + (_leftovers(exp) if keep == APPROVED else ""),
         kept=keep, value=value, approved_costs=a, candidate_costs=b,
         **({"comparison": asdict(comparison_of(exp))} if min(len(a), len(b)) >= 2 else {}))
    return {"decided": keep, "why": why, "value": value}


def _leftovers(exp: Experiment) -> str:
    """What the candidate's slots may have left in the repository's index once the key is
    Git's default again (revert.INDEX_LEFTOVERS), said with the command that removes it:
    git-tune does not write the user's index."""
    if exp.reverts_with is None:
        return ""
    return "".join(f"; {text}" for text in revert.index_leftovers([{exp.key: exp.candidate}]))


def _restore(exp: Experiment) -> None:
    """The include file and git-tune's record as they were before the experiment, byte
    for byte, under git-tune's state lock; where git-tune had written nothing there
    before it, its writes reverted (revert gives back the files' bytes from before)."""
    entry = show.applied_to(exp.scope, exp.repo)
    if exp.entry is None:
        if entry is not None:
            revert.revert(entry.scope)
        _save(None)
        return
    with safefile.lock(scopes.state_dir()):
        if exp.include_bytes is not None:
            safefile.write_atomic(entry.scope.include_file, exp.include_bytes.encode("latin-1"),
                                  mode=0o644)
        if exp.entry is not None:
            state = journal.load_state()
            state[entry.scope.key] = exp.entry
            journal.save_state(state)
    _save(None)


def step(records: Sequence[Command]) -> Optional[dict]:
    """One look at the user's commands: end the arm on a failure, close a full slot and
    switch arms, decide where the pairs do. What happened, or None."""
    with _one_at_a_time():
        return _step(records)


def _step(records: Sequence[Command]) -> Optional[dict]:
    exp = load()
    if exp is None:
        return None
    entry = show.applied_to(exp.scope, exp.repo)
    if entry is not None and show.edited_outside(entry):
        _save(None)
        _log(exp, "stopped", "the values were edited by hand: left alone")
        return {"stopped": "edited by hand"}
    mine = _watched(exp, records)
    failed = next((c for c in mine if c.code not in (0, None)), None)
    if failed is not None and exp.arm == CANDIDATE:
        return _finish(exp, APPROVED, f"git {failed.command} exited {failed.code} under "
                                      "the candidate")
    if len(mine) < SLOT_COMMANDS:
        return None
    exp = replace(exp, slots=exp.slots + (Slot(exp.arm, _cost(mine), len(mine)),))
    verdict = _verdict(exp)
    if verdict is not None:
        return _finish(exp, *verdict)
    other = CANDIDATE if exp.arm == APPROVED else APPROVED
    _write(exp, other)
    exp = replace(exp, arm=other, since=max(c.ended for c in mine))
    _save(exp)
    _log(exp, "switched", f"{exp.key}={exp.value() or 'Git default'} for the next slot")
    return {"switched": other}


def status() -> Optional[dict]:
    exp = load()
    if exp is None:
        return None
    a, b = pairs(exp)
    out = {k: v for k, v in asdict(exp).items() if k not in ("include_bytes", "entry")}
    return {**out, "pairs": len(b)}
