"""A user's day with the agent (issue #33): does an experiment on the user's own commands
settle checkout.workers, how many of their commands does it take, and is what it keeps
good on the whole tree?

On a bed, a generated repository with a second commit (branch switches write those
files) and a local remote (pulls). git-tune calibrates it at the default budget and
writes what it recommends (isolated HOME: never this machine's config), the agent is
enabled, and an experiment starts: the value in force against the candidate the agent
proposes on its own where the calibration left the count open (experiment.propose: a count
set on the engine's ranking beyond what real git timed on a part, or one the budget left
undecided), else a candidate of the bench's (the calibration's count doubled, or the
engine's pick where it wrote none); the table says which. Then a scripted
day: at a prompt's rate, `git status`; between them, branch switches, a commit now and
then, a pull every tenth round. After each round the agent reads the events and steps
the experiment, as its collector does. Reported: the switches (the commands the key
affects) and all commands until the decision, the value kept, and that value's whole
tree written plus the next status against the best count of a grid (timed here, or with
--reuse-grid the grid calibrate_speed stored at the same size, whose best count is timed
again here beside the kept one). A second day
injects a deliberately slower candidate (1 worker where more were written) and reports
after how many commands it was abandoned and what it cost the user meanwhile.

With --key core.untrackedCache, the day's experiment is on the untracked cache instead,
started with the user's yes where the calibration left it at Git's default (the key
adds an index extension: the agent never starts that on its own); its "Git's default"
slots run with false (Git's "keep" would keep the candidate's extension). Reported:
the commands until the decision, the value kept, and the prompt's status under it
against the better of the two, timed side by side after the day.

    python3 bench/user_day.py [--tiny] [--beds latfs-nfs] [--sizes 20000]
                              [--reuse-grid] [--max-rounds 400] [--statuses 3]
                              [--key core.untrackedCache]
"""
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Optional

from common import (RESULTS, BedUnavailable, bed_latency, parser, report, repo_on, storage,
                    tracked)
from stat_storm import isolate

from git_tune.errors import UsageError


def sh(*cmd, cwd=None, check=True):
    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=check)


def tune(repo: str, budget: float) -> dict:
    """git-tune auto at the default budget, written without asking (isolated HOME)."""
    out = sh("git-tune", "auto", "--repo", repo, "--budget", str(budget), "--yes",
             "--no-verify", "--json")
    return json.loads(out.stdout)


def candidate_for(auto: dict, repo: str) -> str:
    """The calibration's count doubled, else halved, else 8 or 16 where it wrote none:
    the first the calibration did not find slower (the agent would refuse that one)."""
    from git_tune.advisor.agent import experiment
    written = auto["plan"]["settings"].get("checkout.workers")
    w = int(written) if written else None
    tries = [min(64, 2 * w), w // 2, 4 * w] if w else [8, 16, 4]
    for c in dict.fromkeys(str(t) for t in tries if t and t >= 2 and t != w):
        if not experiment.measured_slower(repo, "checkout.workers", c):
            return c
    return str(tries[0])


class Day:
    """The scripted user: rounds of statuses and a branch switch, a commit now and then,
    a pull every tenth round; the agent stepped after each round."""

    def __init__(self, repo: str, statuses: int = 3):
        self.repo, self.statuses, self.rounds = repo, statuses, 0
        self.commands = self.switches = 0
        self.on_other = False

    def round(self) -> None:
        for _ in range(self.statuses):
            sh("git", "status", "--porcelain", cwd=self.repo)
            self.commands += 1
        sh("git", "switch", "-q", "main" if self.on_other else "other", cwd=self.repo)
        self.on_other = not self.on_other
        self.commands += 1
        self.switches += 1
        if self.rounds % 7 == 3 and not self.on_other:
            with open(os.path.join(self.repo, "NOTES"), "a") as f:
                f.write(f"round {self.rounds}\n")
            sh("git", "add", "NOTES", cwd=self.repo)
            sh("git", "commit", "-qm", f"notes {self.rounds}", cwd=self.repo)
            self.commands += 2
        if self.rounds % 10 == 9 and not self.on_other:
            sh("git", "pull", "-q", "--no-rebase", "--no-edit", "origin", "main",
               cwd=self.repo, check=False)
            self.commands += 1
        self.rounds += 1


def agent_proposal(repo: str, statuses: int) -> Optional[str]:
    """One round of the day, then what the agent proposes on its own from the stored
    calibration (experiment.propose: a count set beyond what real git timed, or one the
    budget left undecided): the experiment's candidate, started; None where it asks
    nothing about checkout.workers."""
    from git_tune.advisor.agent import experiment, store, switch
    Day(repo, statuses).round()
    switch.collect()
    proposed = experiment.propose(store.records())
    if proposed and proposed["started"] != "checkout.workers":
        experiment.stop()
        return None
    return proposed["candidate"] if proposed else None


def run_day(repo: str, candidate: str, max_rounds: int, statuses: int = 3,
            started: bool = False) -> dict:
    """The day until the experiment decides (started: the agent started it already)."""
    from git_tune.advisor.agent import experiment, store, switch
    exp = (experiment.load() if started
           else experiment.start("global", "checkout.workers", candidate, repo))
    day, t0 = Day(repo, statuses), time.monotonic()
    decision = None
    while decision is None and day.rounds < max_rounds:
        day.round()
        switch.collect()
        stepped = experiment.step(store.records())
        if stepped and ("decided" in stepped or "stopped" in stepped):
            decision = stepped
    still = experiment.load()
    a, b = experiment.pairs(still or _last_pairs(exp))
    experiment.stop()
    entries = len(tracked(repo))
    # What the candidate's slots cost the user beyond the value in force's, per switch.
    extra = [(y - x) * entries for x, y in zip(a, b)]
    return {"approved": exp.approved, "candidate": exp.candidate, "decision": decision,
            "proposed_by": "agent" if started else "bench",
            "switches": day.switches, "commands": day.commands, "rounds": day.rounds,
            "minutes": (time.monotonic() - t0) / 60, "pairs": len(b),
            "extra_seconds": sum(e * experiment.SLOT_COMMANDS for e in extra),
            "approved_costs": a, "candidate_costs": b}


def _last_pairs(exp):
    """The pairs the log kept when the experiment ended (load() is None by then)."""
    from git_tune.advisor.agent import experiment, retune
    ended = [e for e in retune.log() if e.get("experiment") == "decided"]
    if not ended:
        return exp
    slots = []
    for x, y in zip(ended[-1]["approved_costs"], ended[-1]["candidate_costs"]):
        slots += [experiment.Slot("approved", x, 0), experiment.Slot("candidate", y, 0)]
    return experiment.Experiment(exp.scope, exp.repo, exp.key, exp.approved, exp.candidate,
                                 exp.classes, exp.arm, exp.since, tuple(slots))


def whole_tree(repo: str, scratch: str, kind: str, files: int, reuse: bool, kept: int,
               tiny: bool) -> dict:
    """The kept count's whole tree written plus the next status, against a grid of
    worker counts timed here, or with --reuse-grid against the stored grid's best timed
    again beside it (calibrate_speed.Quality)."""
    from calibrate_speed import Quality, stored_grid
    stored = stored_grid(kind, files) if reuse else None
    return Quality(repo, scratch, 1 if tiny else 2, stored=stored).of(
        {"checkout.workers": str(kept)})


@contextlib.contextmanager
def day_bed(kind: str, files: int, args):
    """The bed, its repository (a second commit on `other`, main one commit behind, a
    local remote), calibrated by `auto` at the default budget and written (isolated
    HOME), the agent enabled and its collector stopped (stepped by the bench):
    (mount, repository, auto's JSON); the agent disabled and HOME removed after."""
    with storage(kind, bed_latency(args.tiny), size_mb=4096) as mnt:
        home = tempfile.mkdtemp(prefix="git-tune-day-")
        isolate(home)
        os.environ.update(GIT_AUTHOR_NAME="day", GIT_AUTHOR_EMAIL="day@example.org",
                          GIT_COMMITTER_NAME="day", GIT_COMMITTER_EMAIL="day@example.org")
        repo = repo_on(kind, mnt, files, changed=max(20, files // 100), name="repo")
        sh("git", "branch", "other", "main", cwd=repo)
        sh("git", "reset", "-q", "--hard", "HEAD~1", cwd=repo)   # main one commit behind
        sh("git", "clone", "-q", "--bare", repo, os.path.join(mnt, "remote.git"))
        sh("git", "remote", "add", "origin", os.path.join(mnt, "remote.git"), cwd=repo)
        auto = tune(repo, 2 if args.tiny else 20)
        sh("git-tune", "agent", "enable", "--repo", repo)
        from git_tune.advisor.agent import collector
        collector.stop()
        try:
            yield mnt, repo, auto
        finally:
            sh("git-tune", "agent", "disable", check=False)
            shutil.rmtree(home, ignore_errors=True)


def bed_rows(kind: str, files: int, args) -> list:
    rows = []
    with day_bed(kind, files, args) as (mnt, repo, auto):
        approved = auto["plan"]["settings"].get("checkout.workers")
        proposed = agent_proposal(repo, args.statuses)
        settle = run_day(repo, proposed or candidate_for(auto, repo), args.max_rounds,
                         args.statuses, started=proposed is not None)
        # What git reads after the day (Git's default is one worker): the decision, or
        # the value in force where the day ended undecided or was decided otherwise.
        kept_value = sh("git", "config", "--get", "checkout.workers", cwd=repo,
                        check=False).stdout.strip() or "1"
        # The slower candidate against the value in force after the first day: none
        # where that is one worker already.
        slower = (run_day(repo, "1", args.max_rounds, args.statuses)
                  if kept_value != "1" else None)
        sh("git-tune", "agent", "disable")      # the whole tree timed without the agent
        q = whole_tree(repo, os.path.join(mnt, "quality"), kind, files, args.reuse_grid,
                       int(kept_value), args.tiny)
        rows.append((kind, files, f"{approved or 'default'} vs {settle['candidate']} "
                     f"(proposed by the {settle['proposed_by']})",
                     _decision(settle), settle["switches"], settle["commands"],
                     f"{settle['minutes']:.1f}", kept_value,
                     f"{q['vs_grid_best']:.2f} (best {q['grid_best']})",
                     _slower_cell(slower)))
        return rows, {"settle": settle, "slower": slower, "quality": q, "auto_settings":
                      auto["plan"]["settings"]}


def untracked_rows(kind: str, files: int, args) -> list:
    """The untracked cache's day: where the calibration left core.untrackedCache at Git's
    default (its trial does not fit the budget at this size), the user starts the
    experiment with their yes (the key adds an index extension: the agent never starts
    it on its own); its "Git's default" slots run with false, which removes the extension.
    Every command counts (the extension is read with the index). Then the statuses of
    the user's prompt, timed under the value kept and under the other, in turn."""
    from git_tune.advisor.agent import experiment
    with day_bed(kind, files, args) as (mnt, repo, auto):
        written = auto["plan"]["settings"].get(UNTRACKED)
        if written:
            return [(kind, files, f"- (auto wrote {UNTRACKED}={written})", "-", "-", "-",
                     "-", written, "-")], {"auto_settings": auto["plan"]["settings"]}
        try:
            experiment.start("global", UNTRACKED, "true", repo, yes=True)
        except UsageError as e:     # calibration found it slower: never tried
            return [(kind, files, f"- (refused: {e})", "-", "-", "-", "Git default", "-",
                     "-")], {"auto_settings": auto["plan"]["settings"]}
        day = dict(run_day(repo, "true", args.max_rounds, args.statuses, started=True),
                   proposed_by="the user (--yes)")
        sh("git-tune", "agent", "disable")
        kept = "true" if (day["decision"] or {}).get("decided") == "candidate" else None
        timed = statuses_under(repo, ("false", "true"), 2 if args.tiny else 5)
        best = min(timed, key=lambda v: statistics.median(timed[v]))
        mine = statistics.median(timed[kept or "false"]) / statistics.median(timed[best])
        row = (kind, files, "Git default (false in its slots) vs true, started with the "
               "user's yes", _decision(day), day["commands"], f"{day['minutes']:.1f}",
               kept or "Git default",
               f"{mine:.2f} (best: {best}; status {_secs(statistics.median(timed['false']))} "
               f"without, {_secs(statistics.median(timed['true']))} with)",
               f"{day['pairs']} pairs")
        return [row], {"day": day, "statuses": timed, "auto_settings": auto["plan"]["settings"]}


UNTRACKED = "core.untrackedCache"


def _secs(t: float) -> str:
    return f"{t:.2f} s" if t >= 1 else f"{t * 1e3:.0f} ms"


def statuses_under(repo: str, values, rounds: int) -> dict:
    """`git status` (untracked files shown, as at a prompt) under each value in turn,
    `rounds` times: each turn's first status, which adds or removes the extension, is
    its warm-up and not counted; the next is. Seconds by value."""
    out = {v: [] for v in values}
    for r in range(rounds):
        for v in (values if r % 2 == 0 else values[::-1]):
            cmd = ["git", "-c", f"{UNTRACKED}={v}", "status", "--porcelain"]
            sh(*cmd, cwd=repo)
            t0 = time.monotonic()
            sh(*cmd, cwd=repo)
            out[v].append(time.monotonic() - t0)
    return out


def _decision(r: dict) -> str:
    d = r["decision"]
    if not d:
        return f"undecided after {r['pairs']} pairs"
    return f"{d.get('decided', d.get('stopped'))}: {d.get('why', '')}"


def _slower_cell(r) -> str:
    if r is None:
        return "- (no count written to slow down)"
    return (f"{_decision(r)}; after {r['switches']} switches ({r['commands']} commands), "
            f"extra {r['extra_seconds']:.1f} s")


def main():
    p = parser(__doc__)
    p.add_argument("--beds", nargs="+", default=["latfs-nfs"])
    p.add_argument("--sizes", nargs="+", type=int)
    p.add_argument("--reuse-grid", action="store_true")
    p.add_argument("--max-rounds", type=int, default=400)
    p.add_argument("--statuses", type=int, default=3,
                   help="git status runs per round, at the prompt (each round: one switch)")
    p.add_argument("--key", choices=("checkout.workers", UNTRACKED), default="checkout.workers",
                   help="the key the day's experiment is on (--tiny: both)")
    args = p.parse_args()
    sizes = args.sizes or ([300] if args.tiny else [20000])
    beds = ["disk"] if args.tiny else args.beds
    if args.tiny:
        args.max_rounds = min(args.max_rounds, 60)
    for key in ("checkout.workers", UNTRACKED) if args.tiny else (args.key,):
        one_key(key, beds, sizes, args)


def one_key(key: str, beds, sizes, args) -> None:
    from git_tune.advisor.agent import experiment
    rows, data, notes = [], {}, []
    for kind in beds:
        data[kind] = {}
        for files in sizes:
            try:
                got, d = (untracked_rows if key == UNTRACKED else bed_rows)(kind, files, args)
            except BedUnavailable as e:
                notes.append(f"{kind}: {e}")
                continue
            rows += got
            data[kind][str(files)] = d
    if key == UNTRACKED:
        report("user_day_untracked", "A user's day with the agent: an experiment on "
               f"{UNTRACKED}, started with the user's yes",
               ("bed", "files", "in force vs candidate", "decision", "commands", "minutes",
                "kept", "kept: status / the better value's", "pairs"),
               rows, data, args.tiny,
               notes + [f"slots of {experiment.SLOT_COMMANDS} commands (every command: the "
                        "extension is read with the index); a pair is a slot of each value, "
                        "adjacent",
                        "status: `git status --porcelain` at the prompt, each value's "
                        "second in a row (the first adds or removes the extension)"],
               beds=beds)
        return
    report("user_day", "A user's day with the agent: an experiment on checkout.workers",
           ("bed", "files", "in force vs candidate", "decision", "switches", "commands",
            "minutes", "kept", "kept: whole tree + status / grid best",
            "deliberately slower candidate (1 worker)"),
           rows, data, args.tiny,
           notes + [f"slots of {experiment.SLOT_COMMANDS} switches; a pair is a slot of each "
                    "value, adjacent",
                    "commands: every git command of the scripted day (statuses, switches, "
                    "commits, pulls); switches: the ones the key affects"],
           beds=beds)


if __name__ == "__main__":
    main()
