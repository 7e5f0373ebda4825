"""`git-tune agent enable / disable / status`: git's trace2 events routed to the spool.

The routing is four trace2 keys in git-tune's own include file for the agent
(scopes.resolve("agent"), included from the global config: git reads trace2.* from
the system and global config only, before it knows the repository), written and
reverted through the same safe path as tuned values: `disable` puts the global
config back byte for byte. Which repositories' commands are kept is the agent's
own state (`watch`), applied when the events are read.
"""
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import (collector, drift, experiment, retune, service, spool,
               store, storm)
from ..write import configwrite, journal, revert, safefile, scopes
from ... import ownpaths, strictjson
from ...errors import GitTuneError, UnsafeState, UsageError
from ...models import catalogue
from ...probes import gitinfo, repo as repo_probe

STATE = "agent.json"
# What a re-tune on the agent's own may take: the default calibration budget.
RETUNE_BUDGET = 20.0


@dataclass(frozen=True)
class AgentState:
    enabled: bool
    watch_all: bool
    watch: Tuple[str, ...]          # work trees whose commands are kept
    spool: str = ""                 # where git writes the events (trace2.eventTarget)


def tuned_keys() -> List[str]:
    """The keys whose values in force each record carries (trace2.configParams)."""
    return sorted(catalogue.catalogue())


def trace2_settings(spool_dir: str) -> Dict[str, Any]:
    # Lower case, as `git config --list` names them: the plan compares with what is there.
    # Nesting 3: dir.c's counts of a status's untracked walk sit there (the untracked
    # cache's directories read again, keys/untracked.py: stopped_paying).
    return {"trace2.eventtarget": spool_dir,
            "trace2.eventbrief": "true",
            "trace2.eventnesting": "3",
            "trace2.maxfiles": str(spool.max_files(spool_dir)),
            "trace2.configparams": ",".join(tuned_keys())}


def load() -> AgentState:
    """The agent's state. A state file that is not a valid one (damaged, from another
    version, not the user's) is moved aside and named in `agent status` (`damaged`):
    the agent goes on with what the routing says, watching no repository until it is
    enabled again."""
    path = os.path.join(store.agent_dir(), STATE)
    try:
        data = ownpaths.read_file(path, limit=1 << 20)
        state = _parse(strictjson.loads(data)) if data is not None else None
    except (UnsafeState, ValueError) as e:
        _set_aside(path, str(e))
        state = None
    if state is not None:
        return state
    spool_now = routed_spool()          # a state lost or refused: the routing says
    return AgentState(bool(spool_now), False, (), spool_now or "")


def _parse(raw: object) -> AgentState:
    """agent.json's record; ValueError where it is not one (a spool path that is not
    one of git-tune's places included)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("enabled"), bool) \
            or not isinstance(raw.get("watch_all"), bool) or not isinstance(raw.get("watch"), list) \
            or not all(isinstance(w, str) and os.path.isabs(w) for w in raw["watch"]) \
            or not isinstance(raw.get("spool", ""), str):
        raise ValueError("not an agent state record")
    where = raw.get("spool", "")
    if where and not spool.is_own_place(where):
        raise ValueError(f"its spool '{where[:200]}' is not a place of git-tune's")
    return AgentState(raw["enabled"], raw["watch_all"], tuple(raw["watch"]), where)


DAMAGED = "agent.json.damaged"


def _set_aside(path: str, why: str) -> None:
    """Move a bad state file out of the way (once: the newest damage is kept), noted."""
    try:
        os.replace(path, os.path.join(store.agent_dir(), DAMAGED))
    except OSError:
        pass
    retune.append_log({"time": time.time(), "note": f"agent state refused and moved aside "
                       f"to {DAMAGED}: {why[:200]}; run `git-tune agent enable` again"})


def damaged() -> Optional[str]:
    """The refused state file, where there is one (agent status names it)."""
    path = os.path.join(store.agent_dir(), DAMAGED)
    return path if os.path.lexists(path) else None


def routed_spool() -> Optional[str]:
    """The spool git-tune's agent include routes git's events to, where it is one of
    git-tune's places (None otherwise)."""
    inc = scopes.resolve("agent").include_file
    try:
        where = configwrite.read_include(inc).get("trace2.eventtarget") if os.path.exists(inc) else None
    except GitTuneError:
        return None
    return where if where and spool.is_own_place(where) else None


def _save(state: AgentState) -> None:
    ownpaths.write_file(os.path.join(store.agent_dir(), STATE), json.dumps(asdict(state)).encode())


def watched(state: AgentState) -> Optional[Tuple[str, ...]]:
    """What ingest keeps: None for every repository."""
    return None if state.watch_all else state.watch


def routed() -> bool:
    """Whether git-tune's include for the agent routes git's events (revert removes it)."""
    inc = scopes.resolve("agent").include_file
    return os.path.exists(inc) and bool(configwrite.read_include(inc).get("trace2.eventtarget"))


def collect(state: Optional[AgentState] = None) -> Optional[spool.Ingested]:
    """Read the spool into records now (what the collector does every second); None
    where the agent is not enabled."""
    state = state or load()
    if not state.enabled or not state.spool:
        return None
    return spool.ingest(state.spool, watched(state), tuned_keys())


def _refuse_foreign_target() -> None:
    """The user's own trace2 event target wins: git has one event target, and it is theirs."""
    for c in configwrite.find_conflicts(["trace2.eventTarget"], cwd=None):
        raise UsageError(f"trace2.eventTarget is set to '{c.value}' in {c.origin} (yours): git "
                         "sends its events there, and git-tune's agent leaves that alone; "
                         "unset it to enable the agent")


def enable(repo: Optional[str], watch_all: bool) -> Dict[str, Any]:
    """Route git's events to the spool, watch the repository (or every one), start the
    collector. Serialised: two at once leave one collector and both repositories."""
    version = gitinfo.require_git()
    watched = None
    if not watch_all:
        layout = repo_probe.locate(repo)
        if layout is None or not layout.worktree:
            raise UsageError("agent enable needs a repository with a work tree (--repo or "
                             "run inside one), or --all")
        watched = os.path.realpath(layout.worktree)
    _refuse_foreign_target()
    with safefile.lock(store.agent_dir()):
        before = load()
        watch = set(before.watch) if before.enabled else set()
        if watched:
            watch.add(watched)
        where = before.spool if before.enabled and before.spool else spool.spool_dir()
        state = AgentState(True, watch_all or (before.enabled and before.watch_all),
                           tuple(sorted(watch)), spool.ensure(where))
        target = scopes.resolve("agent")
        prov = configwrite.Provenance(catalogue.format_version(version), "agent", "agent", None,
                                      None, {"trace2.eventtarget": "git-tune agent: each git "
                                             "command's events, read and reduced by its "
                                             "collector"})
        plan = configwrite.plan(target, trace2_settings(where), prov, cwd=None, checked=True,
                                writer=configwrite.AGENT)
        written = asdict(configwrite.apply(plan, prov)) \
            if plan.changes else None
        _save(state)
        unit = service.install(collector.environ()) if service.available() else None
        started = collector.start()     # where the unit started it already: the same one
    return {"state": asdict(state), "written": written, "collector": asdict(started),
            "service": asdict(unit) if unit else None,
            "env_overrides": _env_overrides(), "spool_in_memory": spool.in_memory(where),
            "spool_max_files": spool.max_files(where), "git_version":
                catalogue.format_version(version)}


def _env_overrides() -> List[str]:
    """Variables of this environment under which git sends its events elsewhere."""
    return [v for v in ("GIT_TRACE2_EVENT",) if os.environ.get(v)]


def disable(forget: bool) -> Dict[str, Any]:
    """Stop the collector, end any experiment (the user's values kept), take the routing
    out of the global config whatever state the agent is in, drop the raw events (and
    with `forget` the records too). Each step runs even where one before it failed; the
    failures are said."""
    problems: List[str] = []
    removed_unit = service.remove()
    stopped = collector.stop() or removed_unit
    try:
        experiment.stop()
    except GitTuneError as e:
        problems.append(f"the experiment could not be ended cleanly: {e}")
    target = scopes.resolve("agent")
    where = load().spool or routed_spool() or ""
    reverted = revert.revert(target)
    unrouted = _unroute(target)
    spool.clear(where)
    if forget:
        store.clear()
    _save(AgentState(False, False, ()))
    out = asdict(reverted)
    if unrouted:
        out["message"] += "; " + unrouted
    if problems:
        out["message"] += "; " + "; ".join(problems)
    return {"reverted": out, "collector_stopped": stopped, "forgot": forget}


def _unroute(target: scopes.Scope) -> Optional[str]:
    """The routing taken out where revert had no record of it (a state lost or damaged,
    a revert of the agent scope done by hand): git-tune's include.path removed from the
    global config under git's lock, the agent's include file removed. What was done, or
    None where nothing was left."""
    done = []
    if target.config_file and target.include_file in scopes.include_paths(target):
        with safefile.git_lock(target.config_file, journal.ledger()) as lock:
            now = lock.read()
            if now is not None:
                lock.stage(configwrite.without_include(target.config_file, target.include_file,
                                                       now))
                lock.commit()
                done.append(f"git-tune's include.path removed from '{target.config_file}'")
    if os.path.lexists(target.include_file):
        safefile.remove(target.include_file)
        done.append(f"'{target.include_file}' removed")
    return "; ".join(done) or None


def status() -> Dict[str, Any]:
    state = load()
    got = collect(state)
    records = store.records()
    return {"state": asdict(state), "routed": routed(),
            "collector": asdict(collector.running()),
            "ingested_now": asdict(got) if got else None,
            "spool": state.spool, "spool_files": spool.pending(state.spool) if state.spool else 0,
            "records": len(records),
            "storms": [asdict(s) for s in storm.storms(records)],
            "drift": drift.summary(drift.detect(records)),
            "retuned": retune.log()[-5:],
            "experiment": experiment.status(),
            "store_bytes": store.size(), "env_overrides": _env_overrides(),
            "damaged": damaged(), "last_record_at": store.last_record_at(),
            "spool_in_memory": spool.in_memory(state.spool) if state.spool else None,
            "spool_full_times": len(spool.discards()),
            "spool_foreign": got.foreign if got else 0}


# Open questions of the stored calibrations are looked for at most this often (each look
# probes the repositories git-tune wrote for, and the others seen with one stored).
PROPOSE_EVERY = 3600.0
_looked = {"at": 0.0}


def tend(budget: float = RETUNE_BUDGET, now: Optional[float] = None) -> List[Dict[str, Any]]:
    """What the collector does every minute: step the running experiment; else, when the
    host is idle, re-tune every write that has drifted (git upgraded, host or repository
    changed) within the budget, through the same safe write path; else, at most every
    PROPOSE_EVERY, start an experiment on what a calibration left open. Each logged."""
    now = time.time() if now is None else now
    records = store.records()
    try:
        stepped = experiment.step(records)  # an experiment runs on the user's commands
    except GitTuneError as e:
        # Its switch could not be written (a read-only or vanished repository): the
        # experiment ends, and the collector goes on.
        why = f"the experiment could not go on: {e}"
        experiment.abandon(why)
        return [{"stopped": why}]
    if stepped is not None or experiment.load() is not None:
        return [stepped] if stepped else []
    if not drift.idle(records, now, len(os.sched_getaffinity(0))):
        return []
    try:
        retuned = retune.retune_drifting(records, budget=budget)
        if retuned or now - _looked["at"] < PROPOSE_EVERY:
            return retuned
        _looked["at"] = now
        proposed = experiment.propose(records)
        return [proposed] if proposed else []
    except GitTuneError as e:       # the next quiet moment tries again; the log says why
        return [{"retuned": False, "why": str(e)}]


def retune_now(budget: float) -> Dict[str, Any]:
    """`agent retune`: what has drifted, and each drifting write re-tuned now."""
    collect()
    records = store.records()
    drifting = drift.detect(records)
    return {"drift": drift.summary(drifting),
            "retuned": [retune.retune(d, budget=budget) for d in drifting]}
