"""Workload profiles decide (issue #15): `ci` against `interactive`, each on its own work.

On each bed git-tune calibrates twice, `--workload ci` and `--workload interactive`,
then real git times every workload the two profiles weigh under three settings:
Git's defaults, ci's choice and interactive's choice, interleaved round by round so
drift hits all three alike. Each setting has its own copy of the index, written by git
under that setting (as `verify` does), so what one writes into the index (the untracked
cache, an index version) never reaches another. The workloads are the commands a user runs:

    status      git status -uno (hot)
    status-cold git status -uno after dropping the caches (root; the ci profile's status)
    untracked   git status with untracked files
    checkout    400 files removed, then git checkout -f and the next git status -uno
                (a branch switch's write, and what its burst of writes costs the next command)
    clone       git clone of the repository, then the next git status -uno in it
    index       git ls-files
    write       git update-index --force-write-index (what add, commit pay for the index)

Per profile, its objective is the weighted geometric mean over its own workloads
(models/workloads.toml) of the time ratio against Git's defaults; the claim checked is
that each profile's choice is at least as fast as the other's on the profile's own
workloads (the "own vs other" column).

    python3 bench/workload_profiles.py [--tiny] [--beds disk latfs-nfs] [--budget S]

A run over some beds keeps the other beds' rows of the last run in bench/results.
"""
import os
import shutil
import time
from typing import Callable, Dict, List, Tuple

from common import (BedUnavailable, bed_latency, median, parser, remove, repo_on, report, storage,
                    timed, tracked)

from git_tune.advisor.decide.recommend import recommend
from git_tune.advisor.keys import registry
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure import calibrate
from git_tune.advisor.measure.record import Options
from git_tune.advisor.measure.sweep import MeasurementFailed
from git_tune.models import stats, workloads
from git_tune.probes import repo as probes_repo

PROFILES = ("ci", "interactive")
CHEAP_REPEAT, CHEAP_SECONDS = 5, 0.5
BEDS = ("disk", "latfs-nfs")


class Workloads:
    def __init__(self, repo: str, scratch: str, k: int, configs: Dict[str, Dict[str, str]]):
        self.repo, self.scratch, self.configs = repo, scratch, configs
        names = tracked(repo)
        self.pick = names[:: max(1, len(names) // k)][:k]
        self.cold = os.geteuid() == 0
        self.layout = probes_repo.locate(repo)
        ws = gitbench.Workspace(self.layout, scratch)
        self.index = {c: ws.index_copy(c, registry.index_shape(v)) for c, v in configs.items()}
        self.runners: Dict[Tuple[str, str], Callable[[Dict[str, str]], float]] = {}
        # The profiles' own workloads: git's command and how timed() runs it.
        self.own: Dict[str, Tuple[List[str], dict]] = {
            "status": (["status", "-uno", "--porcelain"], {}),
            "status-cold": (["status", "-uno", "--porcelain"], {"cold": True}),
            "untracked": (["status", "--porcelain"], {}),
            "checkout": (["checkout", "-q", "-f"], {"setup": self._remove}),
            "index": (["ls-files"], {}),
            "write": (["update-index", "--force-write-index"], {}),
        }

    def _remove(self):
        remove(self.repo, self.pick)

    def _clone(self, config: str) -> float:
        dest = os.path.join(self.scratch, f"clone-{config}")
        shutil.rmtree(dest, ignore_errors=True)
        settings = self.configs[config]
        t = timed(["git", "clone", "-q", self.repo, dest], self.scratch, settings)
        t += timed(["git", "status", "-uno", "--porcelain"], dest, settings)
        shutil.rmtree(dest)
        return t

    def run(self, name: str, config: str) -> float:
        if name == "clone":
            return self._clone(config)
        if name == "checkout":
            return self._timed("checkout", config) + self._timed("status", config)
        return self._timed(name, config)

    def _timed(self, name: str, config: str) -> float:
        """The workload as the profiles' table names it; a key's own workload (repack,
        history, gc) as the key times it (registry.workload_runner: verify's runner)."""
        if name not in self.own:
            return self.keys_runner(name, config)(self.configs[config])
        cmd, extra = self.own[name]
        return timed(["git", *cmd], self.repo, self.configs[config],
                     extra_env={"GIT_INDEX_FILE": self.index[config]}, **extra)

    def keys_runner(self, name: str, config: str):
        """The runner of a key's own workload on `config`'s index copy (made once);
        MeasurementFailed where the key cannot time it on this repository."""
        if (name, config) not in self.runners:
            found = registry.workload_runner(name, self.layout, self.index[config])
            if found is None:
                raise SystemExit(f"workload {name!r}: no runner in the workload table")
            self.runners[name, config] = found[1]
        return self.runners[name, config]

    def untimeable(self, name: str) -> str:
        """Why a key's own workload cannot be timed here ("" where it can): its key
        could not be trialled or verified on this repository either."""
        if name == "clone" or name in self.own:
            return ""
        try:
            for config in self.configs:
                self.keys_runner(name, config)
        except MeasurementFailed as e:
            return str(e)
        return ""

    def settle(self) -> None:
        """After the checkouts rewrote files, bring every setting's index up to date
        (untimed), so the next workload does not pay for another setting's writes."""
        for config, settings in self.configs.items():
            timed(["git", "status", "-uno", "--porcelain"], self.repo, settings,
                  extra_env={"GIT_INDEX_FILE": self.index[config]})


def own_workloads(profile: str, cold_possible: bool):
    """(timed workload, its weight) for the profile: ci's status is timed cold."""
    out = {}
    for w, x in workloads.counted(profile).items():
        cold = workloads.cold(profile) and w == "status" and cold_possible
        out["status-cold" if cold else w] = x
    return out


def objective(times, config: str, own) -> float:
    """Weighted geometric mean, over the profile's own workloads, of the median time
    ratio of `config` against Git's defaults (below 1 is faster)."""
    return workloads.weighted_geomean((x, median(times[config, w]) / median(times["defaults", w]))
                                      for w, x in own.items())


def run_bed(kind: str, mnt: str, files: int, budget: float, rounds: int, tiny: bool):
    repo = repo_on(kind, mnt, files, changed=50)
    scratch = os.path.join(mnt, "scratch")
    os.makedirs(scratch, exist_ok=True)
    chosen, notes = {}, []
    for profile in PROFILES:
        t0 = time.monotonic()
        record = calibrate.calibrate(calibrate.probe_repository(repo, budget),
                               Options(budget=budget, workload=profile), store=False)
        chosen[profile] = recommend(record, profile).settings()
        notes.append(f"{kind}: {profile} calibrated in {time.monotonic() - t0:.0f} s "
                     f"(--budget {budget:g}): {chosen[profile] or 'Git defaults'}")
    configs = {"defaults": {}, **chosen}
    w = Workloads(repo, scratch, min(400, files // 5), configs)
    owns = {p: own_workloads(p, w.cold) for p in PROFILES}
    names = sorted({n for own in owns.values() for n in own})
    for n in list(names):
        why = w.untimeable(n)
        if why:
            notes.append(f"{kind}: {n} not timed: {why}")
            names.remove(n)
            owns = {p: {k: v for k, v in own.items() if k != n} for p, own in owns.items()}
    times = {(c, n): [] for c in configs for n in names}
    warm = {n: 0.0 for n in names}
    for c in configs:                                        # warm-up
        for n in names:
            warm[n] = max(warm[n], w.run(n, c))
        w.settle()
    # The disk's noise is of the order of a cheap workload's time: those are repeated
    # within each round (up to CHEAP_REPEAT times, about CHEAP_SECONDS a round), so that
    # every verdict rests on enough runs; an expensive one (a clone) runs once a round.
    reps = {n: max(1, min(CHEAP_REPEAT, int(CHEAP_SECONDS / max(t, 1e-3))))
            for n, t in warm.items()}
    for r in range(rounds):
        for n in names:
            for i in range(reps[n]):
                # Each configuration takes each place in turn, so none always follows
                # the previous workload's cache disturbance.
                k = (r * reps[n] + i) % len(configs)
                for c in list(configs)[k:] + list(configs)[:k]:
                    times[c, n].append(w.run(n, c))
                    if n == "checkout":
                        w.settle()
    rows = []
    for n in names:
        base = times["defaults", n]
        cells = [f"{median(base) * 1e3:.0f} ms"]
        for p in PROFILES:
            est = stats.compare(base, times[p, n])
            cells.append(f"{1 / est.ratio:.2f}x ({est.verdict})")
        weights = ", ".join(f"{p} {owns[p].get(n, 0):g}" for p in PROFILES)
        rows.append((kind, n, weights, *cells))
    summary = []
    for p in PROFILES:
        other = next(q for q in PROFILES if q != p)
        mine, theirs = objective(times, p, owns[p]), objective(times, other, owns[p])
        runs = min(len(times[c, n]) for c in configs for n in owns[p])
        if chosen[p] == chosen[other]:
            verdict = "same choice"
        elif runs < stats.MIN_RUNS:
            # With fewer runs no verdict but "no change" is possible: "yes" would be vacuous.
            verdict = f"undecided ({runs} runs, {stats.MIN_RUNS} needed)"
        else:
            # At least as fast: on none of its own workloads is the profile's choice
            # slower than the other's beyond noise (the guard the tuner itself applies).
            slower = [n for n in owns[p]
                      if stats.compare(times[other, n], times[p, n]).verdict == stats.SLOWER]
            verdict = "yes" if not slower else "NO (slower on " + ", ".join(slower) + ")"
        summary.append((kind, p, f"{1 / mine:.2f}x", f"{1 / theirs:.2f}x",
                        f"{theirs / mine:.2f}x", verdict))
    data = {"chosen": chosen, "times": {f"{c}|{n}": v for (c, n), v in times.items()},
            "own": owns}
    return rows, summary, data, notes


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", choices=BEDS, default=list(BEDS))
    p.add_argument("--budget", type=float, help="calibration budget, s (default 20; 2 tiny)")
    args = p.parse_args()
    files = 300 if args.tiny else 3000
    budget = args.budget or (2 if args.tiny else 20)
    rounds = args.repeat or (2 if args.tiny else 7)
    beds = ["disk"] if args.tiny else args.beds
    rows, summary, data, notes = [], [], {}, []
    for kind in beds:
        try:
            with storage(kind, bed_latency(args.tiny), size_mb=2048) as mnt:
                r, s, data[kind], n = run_bed(kind, mnt, files, budget, rounds, args.tiny)
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
            continue
        rows += r
        summary += s
        notes += n
    report("workload_profiles", f"Workload profiles on {files} files: each workload's speedup "
           "over Git's defaults under ci's and interactive's choice",
           ("bed", "workload", "weight (ci, interactive)", "git defaults", "ci's choice",
            "interactive's choice"), rows, data, args.tiny,
           notes + [f"{b}: own vs other, {p}: own {mine}, other's {theirs}, own/other {ratio}, "
                    f"own at least as fast: {ok}" for b, p, mine, theirs, ratio, ok in summary]
           + [f"{rounds} interleaved rounds after a warm-up (a workload under "
              f"{CHEAP_SECONDS / 2:g} s runs {CHEAP_SECONDS:g} s worth, at most {CHEAP_REPEAT} "
              "times, per round); speedup = defaults median / "
              "choice median, verdict from a 95% bootstrap interval (2% noise band); "
              "own vs other: each profile's objective under its own choice and the other's"],
           beds=beds)


if __name__ == "__main__":
    main()
