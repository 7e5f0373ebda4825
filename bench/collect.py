"""Write bench/README.md: every benchmark's latest full-size table from bench/results/,
each with the commit and time it ran at and the command that reproduces it. The one
text written by hand is a table's "what it says" (bench/says/NAME.md, at most
SAYS_LINES lines under a first line `<!-- for COMMIT -->`): it is shown only under the
run of that commit, so a table run again never carries words about the run before. How
git-tune decides, and why, is in docs/.

    python3 bench/collect.py
"""
import json
import os
import re
import sys
import time

from common import RESULTS, table

ORDER = ["engine_lstat", "index_pool", "probe_speed", "status_preload", "checkout_workers", "threshold",
         "smallfile", "negative_lookups", "search_strategies", "tuner_quality", "workload_profiles",
         "fsmonitor_daemon", "calibrate_speed", "fidelity", "part_fidelity", "untracked_part", "preload_sample", "agent_overhead", "stat_storm", "two_views",
         "user_day", "user_day_untracked", "generalise", "generalise_20000", "memory", "memory_history", "memory_git", "basecache", "part_gain",
         "binary"]

HEAD = """# Benchmarks

Speed is measured here, not in the tests. Every table compares configurations side by side
in one run (interleaved where it matters) and gives ratios; the JSON behind each table is in
`bench/results/NAME.json`.

Reproduce (root is needed for the tmpfs, loop, FUSE and HDD-like beds and for dropping
caches; without it those rows are skipped with the reason):

```sh
tools/setup-system && tools/install --test && source .venv/bin/activate
bench/run                      # everything, full size (most of a day on 2 cores: name the one you need)
bench/run status_preload       # one benchmark
bench/run --tiny               # CI size: each once, to keep them from rotting (no hdd bed)
python3 bench/collect.py       # this page, from bench/results/
```

Beds (testbeds/): `tmpfs`; `disk` (a directory on the machine's own disk, here a virtio
disk that reports rotational=1 and answers like flash); `latfs-nfs` (the latfs FUSE server
over a directory on the disk, 1 ms per lookup/open/create, 0.2 ms per read/write, 2 ms per
fsync, attributes and entries cached 1 s, negative entries not cached: NFS with
lookupcache=positive; multi-threaded, so concurrent requests overlap); `latfs-noac` (the
same with attributes never cached, NFS with actimeo=0: the bed of issue #30's first
report, where a clone's whole tree took 47.5 s sequentially and 23 s with 4 workers);
`latfs-nocache` (nothing cached, NFS with actimeo=0 and lookupcache=none); `hdd` (ext4 on a loop
device with direct IO over nbdfuse over nbdkit with the delay filter, 4 ms a request, and
the noparallel filter, one request at a time).
"""


def _when_at(run: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run["time"]))
    return f"{when} at {run['commit']}"


def named(run: dict) -> bool:
    """Whether a run names the commit it ran at ("a commit before X", or none: results
    stored before runs named theirs, of code no one can check out again)."""
    return bool(re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", run.get("commit") or ""))


def _groups(data: dict) -> list:
    """[(run, beds)] in the order run: one where the table ran at one commit."""
    by_run: dict = {}
    for bed, run in (data.get("runs") or {}).items():
        by_run.setdefault((run.get("commit"), run.get("time")), (run, []))[1].append(bed)
    return sorted(by_run.values(), key=lambda g: g[0].get("time") or 0)


def _unknown_code(name: str, run: dict, beds=()) -> str:
    what = f"the rows of {', '.join(beds)}" if beds else "its figures"
    return (f"Not shown: {what} name no commit they ran at, so the code behind them is "
            f"unknown. Re-run: {_command(name, run, beds)}.")


def _command(name: str, run: dict, beds=()) -> str:
    """The command that ran it (for results from before they named theirs: the script's
    name, and the beds where the table's beds ran at several commits)."""
    if run.get("command"):
        return f"`{run['command']}`"
    beds_arg = f" --beds {' '.join(beds)}" if beds else ""
    return f"`python3 bench/{name}.py{beds_arg}`"


def tables(name: str, data: dict, md: str) -> str:
    """The benchmark's table and the commit it ran at. Where its beds ran at several
    commits, one table per commit, each naming its own (rows of one code are never
    mixed with another's in a table); the notes, under the last."""
    groups = _groups(data)
    if len(groups) <= 1:
        run = groups[0][0] if groups else data
        if not named(run):
            return f"{md.splitlines()[0]}\n\n{_unknown_code(name, data)}\n"
        return f"{md.rstrip()}\n\n_Run {_when_at(run)}: {_command(name, data)}._\n"
    title = md.splitlines()[0]
    parts = [title, ""]
    unknown = [bed for run, beds in groups if not named(run) for bed in beds]
    if unknown:
        parts += [_unknown_code(name, {}, unknown), ""]
    if len(unknown) == sum(len(beds) for _, beds in groups):
        return "\n".join(parts).rstrip() + "\n"
    for run, beds in groups:
        if not named(run):
            continue
        rows = [r for r in data["rows"] if r[0] in beds]
        parts += [f"_{', '.join(beds)}: run {_when_at(run)}: {_command(name, run, beds)}._", "",
                  table(data["headers"], rows), ""]
    # A note that names a bed not shown is of that bed's unknown code too.
    parts += [f"- {n}" for n in data.get("notes", [])
              if not any(n.startswith((f"{bed}:", f"{bed} ")) for bed in unknown)]
    return "\n".join(parts).rstrip() + "\n"


SAYS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "says")
SAYS_LINES = 10


def says(name: str, data: dict, where: str = SAYS) -> str:
    """The table's "what it says", where it was written for the commit the table ran at;
    "" where there is none, or it was written for another run (said on stderr)."""
    path = os.path.join(where, f"{name}.md")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        lines = f.read().strip().splitlines()
    m = re.fullmatch(r"<!-- for (\S+) -->", lines[0].strip()) if lines else None
    if not m or len(lines) - 1 > SAYS_LINES:
        raise SystemExit(f"{path}: a first line `<!-- for COMMIT -->`, then at most "
                         f"{SAYS_LINES} lines")
    if m.group(1) != data.get("commit"):
        print(f"{path}: written for {m.group(1)}, the table ran at {data.get('commit')}: "
              "left out until it is read again", file=sys.stderr)
        return ""
    return "**What it says.** " + "\n".join(lines[1:]).strip() + "\n"


def main():
    parts = [HEAD]
    machine = None
    for name in ORDER:
        path = os.path.join(RESULTS, f"{name}.json")
        if not os.path.exists(path):
            parts.append(f"### {name}\n\nNot run at full size yet: `bench/run {name}`.\n")
            continue
        with open(path) as f:
            data = json.load(f)
        machine = machine or data["machine"]
        with open(os.path.join(RESULTS, f"{name}.md")) as f:
            parts.append(tables(name, data, f.read()))
        said = says(name, data)
        if said:
            parts.append(said)
    if machine:
        parts.insert(1, "Machine of the latest run: " + ", ".join(f"{k} {v}" for k, v in machine.items()) + ".\n")
    with open(os.path.join(os.path.dirname(RESULTS), "README.md"), "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
