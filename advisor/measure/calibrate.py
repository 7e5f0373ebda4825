"""`git-tune calibrate`: each key module's engine sweep, then its real-git trial, in a budget.

Everything runs in a scratch directory on the repository's file system
(never inside the working tree), removed afterwards even on Ctrl-C. The
engine sweeps give the curves (how time falls with workers or threads on
this storage); real git, timed interleaved against Git's defaults, decides
whether a setting is really faster. Which sweeps and trials run is the key
registry's business (advisor/keys/): nothing here names a Git key.
"""
import contextlib
import dataclasses
import errno
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, Mapping, Optional, Sequence, Set

from ... import __version__
from ..keys import registry
from . import budget as budget_plan, gitbench, hostload, planner, search, settle
from .ab import OutOfBudget
from .bench import Bench
from .budget import Budget, Progress
from .record import (FAILS_DEFAULT, METHOD, Calibration, Host, Options,
                     RecordUnreadable, Repository, SCHEMA_VERSION,
                     Storage, Sweep, Trial)
from .sweep import MeasurementFailed
from ...errors import EngineError, GitError, UsageError
from ...models import workloads
from ...probes import fingerprint, gitinfo, memo, repo as repo_probe
from ...probes.report import ProbeReport, probe
from ...probes.storage import StorageReport
from ...probes.scratch import one_measurement_at_a_time, scratch_dir
from ...models.storage import NETWORK

RESULT_MAX_AGE = 7 * 86400


def probe_repository(repo: Optional[str], budget: Optional[float] = None) -> ProbeReport:
    """The one probe of a command: git must run, and git's own refusal of the repository
    (safe.directory, a broken config) is the error, in git's words. With the calibration
    budget, the probe's timed parts take about budget_plan.PROBE of it (it counts against it),
    after the repository's file system has written back earlier writes (settle's share of
    the budget, counted too, as timings["settle"]): during a write-back the probe's own
    fsyncs wait on it. Where it is still writing back, the probe writes nothing there, and calibrate times
    nothing unless its own wait sees the flush end."""
    gitinfo.require_git()
    path = os.path.abspath(repo or os.getcwd())
    layout = repo_probe.locate(repo)
    if not budget or budget <= 0:
        return probe(repo, located=layout)
    settled = settle.wait(layout.top if layout else path,
                          budget * budget_plan.SETTLE)
    report = probe(repo, allowance=budget * budget_plan.PROBE, flushing=settled.flushing,
                   located=layout)
    return dataclasses.replace(report, timings={"settle": settled.waited, **report.timings})


@dataclass(frozen=True)
class Subject:
    """What a calibration needs of the probe's report, checked once (subject()): a
    repository with a work tree and a readable index, on storage the probe measured."""
    facts: repo_probe.RepoFacts
    layout: repo_probe.RepoLayout
    worktree: str
    storage: StorageReport
    index_version: int
    git_version: str


def subject(report: ProbeReport) -> Subject:
    """The report's repository as a calibration needs it, or UsageError saying why not."""
    facts = report.repository
    if facts is None:
        raise UsageError(f"'{report.path}' is not inside a git repository")
    layout = facts.layout
    if not layout.worktree:
        raise UsageError("calibration needs a working tree; this repository is bare")
    if facts.index_error or not facts.index:
        raise UsageError("the repository's index cannot be read: "
                         f"{facts.index_error or 'no index'}; "
                         "run `git status` to recreate it before calibrating")
    storage = report.primary_storage()
    if storage is None:
        raise UsageError(f"the storage of '{layout.worktree}' could not be probed")
    if report.git.version is None:
        gitinfo.require_git()               # GitError (exit 4) saying why there is none
        raise GitError("git's version could not be read")
    return Subject(facts, layout, layout.worktree, storage, facts.index["version"],
                   report.git.version)


def cache_key(report: ProbeReport, workload: str = "mixed") -> str:
    """One stored calibration per host, git, repository and workload profile (a profile
    decides which workloads are measured), and cgroup memory limit (a value sized inside
    one limit is not evidence inside another: packmem)."""
    rep = report.repository
    limit = report.host.memory_limit
    return (f"{fingerprint.of_report(report)}|{report.git.version}|"
            f"{rep.layout.git_dir if rep else None}|{rep.tracked_files if rep else None}|"
            f"{workload}" + (f" in {limit} bytes" if limit else ""))


def stored_git_dirs() -> Set[str]:
    """The git directories of every calibration stored, fresh or not (cache_key's third
    field; a path may hold "|", the fields around it do not): which repositories have
    one, without probing any."""
    out = set()
    for key in memo.keys("calibration"):
        fields = key.split("|", 2)
        if len(fields) == 3 and fields[2].count("|") >= 2:
            out.add(fields[2].rsplit("|", 2)[0])
    return out


def _measure(bench: Bench, understood: Mapping[str, str]) -> None:
    """Every key's trial (registry.trial_order, stakes first: next_trial), each family's
    engine sweep just before its first, and last the sweeps a family left for after the
    trials (findings no trial needs). A family later in the order then never spends the
    budget before an earlier one's trials. A key whose candidate is what lets git run here at all (Git's default
    failed, the candidate worked) is required by every later trial, so theirs are not
    the same failure."""
    # Every sweeping family has its keys in trial_order(): each sweep is reached there.
    sweeps = dict(registry.sweepers())
    not_reached = set()     # families whose sweep the budget's end left out
    order = registry.trial_order()
    pending = list(order)
    while pending:
        entry = next_trial(pending, order, bench)
        if entry.family in sweeps:
            # Its family's sweep first: then its keys' stakes are known, and the next key
            # is chosen again.
            if not _sweep(bench, entry.family, sweeps.pop(entry.family)):
                not_reached.add(entry.family)
            continue
        pending.remove(entry)
        bench.pending = [e for e in pending if e.has_trial and e.key.name in understood]
        if entry.key.name in understood:
            bench.trials_after = len(bench.pending)
            _trial(bench, entry, entry.family in not_reached)
    _sharpen(bench, order)
    for family, later in bench.later:
        # Findings only (no trial needs them): what the trials left, if anything.
        _sweep(bench, family, later, f"{family} sweep (findings, after the trials)")


def _trial(bench: Bench, entry: registry.Entry, sweep_not_reached: bool) -> None:
    """One key's trial into bench.trials, or into bench.unfinished with the seconds it
    was short (None: the budget had ended), or a note where git could not be timed."""
    if sweep_not_reached and entry.has_trial:
        # Not reached, whatever its trial would make of a missing sweep.
        bench.unfinished[entry.key.name] = None
        return
    price, left = entry.price(bench), bench.budget.left()
    if price is not None and price > left:
        # Priced out before a second is spent: the trials after it get that second.
        bench.unfinished[entry.key.name] = round(price - left, 1)
        return
    grace = planner.owed_grace(bench, entry.stakes(bench))
    try:
        with bench.budget.extended(grace), _bounded(bench, entry):
            bench.graced = bench.graced or grace > 0
            trial = entry.trial(bench)
    except gitbench.DeadlineReached:
        bench.unfinished[entry.key.name] = None
        return
    except OutOfBudget as e:
        # Git's default stands; the recommendation names the budget that would decide
        # (the grace taken back: a budget that holds the runs without it).
        bench.unfinished[entry.key.name] = (None if e.seconds_short is None
                                            else round(e.seconds_short + grace, 1))
        return
    except MeasurementFailed as e:
        bench.notes.append(f"{entry.key.name} not decided: {e}")
        return
    except OSError as e:
        if e.errno not in FULL:
            raise
        bench.notes.append(f"{entry.key.name} not decided: {_full(e)}")
        return
    past = bench.budget.used() - bench.budget.total
    if grace and trial is not None and past > 0:
        bench.notes.append(f"{entry.key.name}: its comparison ended {past:.1f} s past the "
                           f"{bench.budget.total:g} s budget, in the grace the key with the "
                           f"most at stake has ({grace:.1f} s at most)")
    if trial is not None:
        bench.trials[entry.key.name] = trial
        if trial.comparisons and trial.main.fails == FAILS_DEFAULT:
            bench.required.update(trial.main.candidate)
        bench.budget.tick("validate")


# A scratch file git-tune writes itself (an index copy, a sample's list) on storage that
# is full: the trial or sweep is not decided, and the rest go on (git's own writes there
# fail as git, MeasurementFailed; the engine's, EngineError).
FULL = (errno.ENOSPC, errno.EDQUOT)


def _full(e: OSError) -> str:
    where = f" writing {e.filename}" if e.filename else ""
    return f"the storage is full ({e.strerror}{where})"


@contextlib.contextmanager
def _bounded(bench: Bench, entry: registry.Entry) -> Iterator[None]:
    """Where a key's git runs happen: every one of them (its scratch clones and index
    copies too) with what git needs to run here, ended with the budget, and each run's
    time counted to the key's family."""
    with gitbench.required(bench.required), gitbench.deadline(bench.budget.left()), \
            gitbench.after_each_run(lambda: bench.budget.tick(entry.family)):
        yield


def _sharpen(bench: Bench, order: Sequence[registry.Entry]) -> None:
    """What the budget left once every key had its trial goes back to the trials that
    left something for it (Bench.sharpen: a worker count not timed, a gain within
    noise), the highest stakes first, one step at a time: more budget never decides
    less, and a run that ends early spends its rest where the gains are."""
    entries = {e.key.name: e for e in order}
    bench.trials_after = 0
    bench.pending = []
    while bench.sharpen and bench.budget.left() > 0:
        name = max(bench.sharpen, key=lambda k: entries[k].stakes(bench) or 0.0)
        step, entry = bench.sharpen[name], entries[name]
        try:
            with _bounded(bench, entry):
                trial = step()
        except (gitbench.DeadlineReached, OutOfBudget):
            trial = None        # the trial as it stood is the key's
        except MeasurementFailed as e:
            bench.notes.append(f"{name}: its further runs stopped: {e}")
            trial = None
        if trial is None:
            del bench.sharpen[name]
        else:
            bench.trials[name] = trial
        bench.budget.tick(entry.family)


# A key whose stakes are below this share of the highest known among the keys of its
# rank waits until the others have run: stakes decide the order, and keys of comparable
# stakes (within this factor) keep catalogue order, which puts the cheaper of two
# comparable trials and a key's prerequisites first.
LOW_STAKES = 0.25


def next_trial(pending: Sequence[registry.Entry], order: Sequence[registry.Entry],
               bench: Bench) -> registry.Entry:
    """Stakes first: among the pending keys of the lowest rank, in order, the first whose
    stakes are not far below the highest known of that rank, trialled or not
    (LOW_STAKES); a key whose stakes are not known yet (its family's sweep has not run)
    keeps its place. Where every key left has low stakes, the one with the most."""
    rank = min(e.rank for e in pending)
    group = [e for e in pending if e.rank == rank]
    stakes = {e.key.name: e.stakes(bench) for e in order if e.rank == rank}
    top = max((v for v in stakes.values() if v is not None), default=0.0)
    for e in group:
        v = stakes[e.key.name]
        if v is None or v >= top * LOW_STAKES:
            return e
    return max(group, key=lambda e: stakes[e.key.name] or 0.0)


def bench_for(report: ProbeReport, opts: Options, budget: Budget,
              ws: Optional[gitbench.Workspace], s: Optional[Subject] = None) -> Bench:
    """What the sweeps and trials are given, from the probe's report (and its subject,
    where the caller has it): the repository's tracked files, the host, the storage's
    class and latencies, `ws` (None: nothing is timed)."""
    s = s or subject(report)
    return Bench(ws, repo_probe.tracked_sample(s.layout, n=10 ** 9), report.host.effective_cores,
                 s.storage.storage_class, report.git, opts, budget,
                 pid_limit=report.host.cgroup.pids_max, stat_data=s.facts.stat_data,
                 online_cpus=report.host.logical_cpus,
                 latency={op: d["p50"] for op, d in s.storage.latency.items() if d.get("p50")},
                 untracked_walk=s.facts.untracked_walk,
                 memory_limit=report.host.memory_limit or report.host.memory_available,
                 memory_source="the cgroup's memory limit" if report.host.memory_limit
                 else "the host's available memory")


def _bench_run(report: ProbeReport, opts: Options, budget: Budget, s: Subject) -> Bench:
    """The sweeps and trials, in a scratch directory on the repository's file system, once
    that file system has written back earlier writes (settle's share of the budget). Where
    it has not, nothing is timed, not even a scratch directory made: what would be is
    the flush."""
    # With the budget already spent (a probe run without one) there is nothing to wait
    # for: what costs no git (fsmonitor refused on network storage) is still said.
    done = settle.wait(s.worktree, budget.left() * budget_plan.SETTLE) if budget.left() else None
    budget.tick("settle")
    before = report.timings.get("settle", 0.0)     # the probe's own wait
    flushed = 0.0 if done is None else done.seconds
    if done is not None and flushed is None:       # still writing back
        bench = bench_for(report, opts, budget, None, s)
        _nothing_timed(bench, before + done.waited)
        return bench
    layout = s.layout
    with one_measurement_at_a_time(layout.common_dir), \
            scratch_dir([layout.git_dir, os.path.dirname(s.worktree)],
                        same_fs_as=s.worktree) as scratch, \
            _local_scratch(s) as local:
        if scratch is None:
            raise UsageError("no writable directory on the repository's file system outside "
                             "the working tree (read-only?): nothing can be calibrated")
        bench = bench_for(report, opts, budget, gitbench.Workspace(layout, scratch, local), s)
        waited = before + (flushed or 0.0)
        if waited > opts.budget * budget_plan.PROBE:
            bench.notes.append(f"waited {waited:.1f} s for the file system to write back "
                               "earlier writes before timing anything")
        _measure(bench, report.git.keys_understood)
    return bench


@contextlib.contextmanager
def _local_scratch(s: Subject) -> Iterator[Optional[str]]:
    """Where the repository is on network storage and the host's temporary directory on
    another file system: a scratch directory there, for index copies git only reads
    (gitbench.Workspace.local), removed with the calibration; else None."""
    tmp = tempfile.gettempdir()
    try:
        apart = os.stat(tmp).st_dev != os.stat(s.worktree).st_dev
    except OSError:
        apart = False
    if s.storage.storage_class != NETWORK or not apart:
        yield None
        return
    with scratch_dir([tmp]) as local:
        yield local


def _nothing_timed(bench: Bench, waited: float) -> None:
    bench.flushing = True
    bench.notes.append(
        f"nothing timed: after {waited:.1f} s the file system was still writing back "
        "earlier writes (a fresh clone or a build on slow storage?), and every file git "
        "creates or removes meanwhile waits for that flush; Git's defaults stand. Run "
        "again once `sync` returns, or with a --budget twice the flush")
    for entry in registry.trial_order():
        if entry.has_trial and entry.key.name in bench.git_facts.keys_understood:
            bench.unfinished[entry.key.name] = None


def _sweep(bench: Bench, family: str, sweep: Callable[[Bench], Optional[Sweep]],
           what: str = "") -> bool:
    """The family's engine sweep, into bench.sweeps; False where the budget had ended."""
    what = what or f"{family} sweep"
    if not bench.budget.left():
        # No trial can start either: a sweep now would only overrun the budget.
        bench.notes.append(f"{what} not run: the budget had ended")
        return False
    try:
        result = sweep(bench)
    except (EngineError, MeasurementFailed) as e:
        bench.notes.append(f"{what} stopped: {e}")
        result = None
    except OSError as e:
        if e.errno not in FULL:
            raise
        bench.notes.append(f"{what} stopped: {_full(e)}")
        result = None
    if result is not None:
        bench.sweeps[family] = result
    bench.budget.tick(family)
    return True


def _limits_note(report: ProbeReport) -> str:
    """Every run happened inside the caller's cgroup: say so, since the values hold for
    work under the same limits (a CI job's), not for the host outside them."""
    cg = report.host.cgroup
    limits = [f"a CPU quota of {cg.cpu_quota:g} CPUs" if cg.cpu_quota is not None else "",
              f"a pid limit of {cg.pids_max}" if cg.pids_max is not None else ""]
    limits = [x for x in limits if x]
    if not limits:
        return ""
    return (f"measured inside this process's cgroup (v{cg.version}) with " + " and ".join(limits)
            + f"; Git's online_cpus() sees {report.host.logical_cpus} CPUs there. The values "
            "hold for work under the same limits")


def calibrate(report: ProbeReport, opts: Options = Options(),
              progress: Optional[Progress] = None, store: bool = True) -> Calibration:
    """Measure this host and repository (stored in the user's cache unless store=False)."""
    if opts.strategy not in search.STRATEGIES:
        raise UsageError(f"unknown strategy '{opts.strategy}'; choose from "
                         + ", ".join(search.STRATEGIES))
    if opts.budget <= 0:
        raise UsageError("--budget must be positive")
    workloads.weights(opts.workload)     # an unknown profile is the user's error
    # The probe that came before is part of what the user waits for: it counts.
    budget = Budget(opts.budget, progress, spent=sum(report.timings.values()))
    s = subject(report)
    watch = hostload.Watch(report.host.effective_cores)
    bench = _bench_run(report, opts, budget, s)
    # The scratch directory's removal (on slow storage, seconds) is a line of its own:
    # every second of the wall belongs to one.
    budget.tick("cleanup")
    load = watch.load()
    busy = load.note()
    if busy:
        bench.notes.insert(0, busy)
    if bench.unfinished and not bench.flushing:
        bench.notes.append("the budget ended before real git could decide "
                           + ", ".join(k if s is None else f"{k} ({s:.0f} s short)"
                                       for k, s in bench.unfinished.items())
                           + "; Git's defaults stand for them")
    limits = _limits_note(report)
    if limits:
        bench.notes.append(limits)
    if budget.used() > opts.budget * 1.5:
        bench.notes.append(f"took {budget.used():.1f} s for a {opts.budget:g} s budget: the "
                           "probe and the engine's first measurements on this storage alone "
                           "take longer")
    record = Calibration(
        SCHEMA_VERSION, __version__, time.time(), fingerprint.of_report(report), opts,
        Host(report.host.effective_cores, report.host.logical_cpus,
             report.host.cgroup.cpu_quota, report.host.cgroup.pids_max, load.others_cpus),
        Storage(s.storage.fstype, s.storage.storage_class, tuple(s.storage.evidence),
                tuple(s.storage.notes)),
        s.git_version,
        Repository(s.worktree, s.layout.git_dir, s.facts.tracked_files, s.index_version),
        report.cache.state if report.cache else None, bench.sweeps, bench.trials,
        tuple(bench.notes), round(budget.used(), 3), unfinished=dict(bench.unfinished),
        spent=_spent(report, budget, budget.used()), method=METHOD)
    if store:
        stored = memo.save("calibration", cache_key(report, opts.workload), record.to_json())
        record = dataclasses.replace(record, stored_at=stored)
    budget.tick("done")
    return record


def _spent(report: ProbeReport, budget: Budget, wall: float) -> Dict[str, float]:
    """Where the budget went: the probe's parts, then every phase of the calibration
    (Budget.went), in the order they came, to the hundredth of a second; what came
    after the last phase (the record being made) is "records", so the lines add up to
    `wall`, the seconds the record states."""
    names = {"settle": "write-back wait", "validate": "records", "done": "records"}
    went: Dict[str, float] = {}
    for phase, v in [(k if k == "settle" else f"probe {k}", v)
                     for k, v in report.timings.items()] + list(budget.went.items()):
        name = names.get(phase, phase)
        went[name] = went.get(name, 0.0) + v
    went["records"] = went.get("records", 0.0) + max(0.0, wall - sum(went.values()))
    return {k: round(v, 2) for k, v in went.items() if round(v, 2)}


def forget(report: ProbeReport, workload: str = "mixed") -> None:
    """Drop the stored calibration: its decisions were contradicted (auto's verify read
    a value it chose slower), so the next run measures again instead of reusing them."""
    memo.forget("calibration", cache_key(report, workload))


def stored_trials(report: ProbeReport) -> Dict[str, Trial]:
    """Each key's trial that ran real git in this repository's stored, fresh calibrations
    (any workload profile, the first in name order that has one): where a key decided,
    for verify to time it there. {} where none is stored."""
    out: Dict[str, Trial] = {}
    for profile in sorted(workloads.profiles()):
        record = load_fresh(report, profile)
        for key, trial in sorted(record.trials.items()) if record else ():
            if trial.comparisons:
                out.setdefault(key, trial)
    return out


def load_fresh(report: ProbeReport, workload: str = "mixed",
               budget: Optional[float] = None) -> Optional[Calibration]:
    """A stored calibration for this host, repository, git and workload profile, if fresh,
    readable and timed as this git-tune times (record.METHOD). With `budget`: not one that
    left keys undecided on a smaller budget than this (the user asked for more evidence:
    a calibration on `budget` buys it)."""
    if report.repository is None:
        return None
    data = memo.load("calibration", cache_key(report, workload), RESULT_MAX_AGE)
    if data is None:
        return None
    try:
        record = Calibration.from_json(data)
    except RecordUnreadable:
        return None
    if budget is not None and record.unfinished and record.options.budget < budget:
        return None
    if record.method < METHOD:
        return None             # timed as this git-tune no longer times
    return record
