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
from typing import List, Optional, Tuple

from git_tune.advisor.agent import collector, drift, experiment, retune, spool, store, storm
from git_tune.advisor.write import configwrite, revert, scopes
from git_tune.errors import GitTuneError, UsageError
from git_tune.models import catalogue
from git_tune.probes import gitinfo, repo as repo_probe

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


def trace2_settings(spool_dir: str) -> dict:
    # Lower case, as `git config --list` names them: the plan compares with what is there.
    # Nesting 3: dir.c's counts of a status's untracked walk sit there (the untracked
    # cache's directories read again, drift.untracked_cache_idle).
    return {"trace2.eventtarget": spool_dir,
            "trace2.eventbrief": "true",
            "trace2.eventnesting": "3",
            "trace2.maxfiles": str(spool.MAX_FILES),
            "trace2.configparams": ",".join(tuned_keys())}


def load() -> AgentState:
    try:
        with open(os.path.join(store.agent_dir(), STATE)) as f:
            raw = json.load(f)
        return AgentState(bool(raw["enabled"]), bool(raw["watch_all"]),
                          tuple(str(w) for w in raw["watch"]), str(raw.get("spool", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return AgentState(False, False, ())


def _save(state: AgentState) -> None:
    path = os.path.join(store.agent_dir(), STATE)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(state), f)
    os.replace(tmp, path)


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


def enable(repo: Optional[str], watch_all: bool) -> dict:
    version = gitinfo.require_git()
    if not watch_all:
        layout = repo_probe.locate(repo)
        if layout is None or not layout.worktree:
            raise UsageError("agent enable needs a repository with a work tree (--repo or "
                             "run inside one), or --all")
    _refuse_foreign_target()
    before = load()
    watch = set(before.watch) if before.enabled else set()
    if not watch_all:
        watch.add(os.path.realpath(layout.worktree))
    where = before.spool if before.enabled and before.spool else spool.spool_dir()
    state = AgentState(True, watch_all or (before.enabled and before.watch_all),
                       tuple(sorted(watch)), spool.ensure(where))
    target = scopes.resolve("agent")
    prov = configwrite.Provenance(catalogue.format_version(version), "agent", "agent", None, None,
                                  {"trace2.eventtarget": "git-tune agent: each git command's "
                                   "events, read and reduced by its collector"})
    plan = configwrite.plan(target, trace2_settings(where), prov, cwd=None, checked=True)
    written = asdict(configwrite.apply(plan, prov)) if plan.changes else None
    _save(state)
    started = collector.start()
    return {"state": asdict(state), "written": written, "collector": asdict(started),
            "env_overrides": _env_overrides()}


def _env_overrides() -> List[str]:
    """Variables of this environment under which git sends its events elsewhere."""
    return [v for v in ("GIT_TRACE2_EVENT",) if os.environ.get(v)]


def disable(forget: bool) -> dict:
    """Stop the collector, put the global config back as it was, drop the raw events
    (and with `forget` the records too)."""
    stopped = collector.stop()
    experiment.stop()               # the values as they were before it, byte for byte
    reverted = revert.revert(scopes.resolve("agent"))
    spool.clear(load().spool)
    if forget:
        store.clear()
    _save(AgentState(False, False, ()))
    return {"reverted": asdict(reverted), "collector_stopped": stopped, "forgot": forget}


def status() -> dict:
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
            "store_bytes": store.size(), "env_overrides": _env_overrides()}


# Open questions of the stored calibrations are looked for at most this often (each look
# probes the repositories git-tune wrote for, and the others seen with one stored).
PROPOSE_EVERY = 3600.0
_looked = {"at": 0.0}


def tend(budget: float = RETUNE_BUDGET, now: Optional[float] = None) -> list:
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


def retune_now(budget: float) -> dict:
    """`agent retune`: what has drifted, and each drifting write re-tuned now."""
    collect()
    records = store.records()
    drifting = drift.detect(records)
    return {"drift": drift.summary(drifting),
            "retuned": [retune.retune(d, budget=budget) for d in drifting]}
