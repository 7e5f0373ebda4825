"""git repack -adf in a memory cgroup: Git's defaults against the values git-tune chose
inside the same limit (issue #64).

For each limit (256 MiB, 512 MiB, 1 GiB, none), `git-tune recommend --workload ci` runs
inside a memory cgroup of that size (its own memory counts, as in a container), then a
copy of the repository is repacked there under Git's defaults and under the values it
chose, and each run's wall and peak resident memory are shown side by side. The
repository: many versions of two large text files and a binary (repogen.LargeFiles),
the issue's 275 MB shape at full size. Needs root and a memory cgroup controller;
without them only the unconfined row is run.

    python3 bench/memory.py [--tiny]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from common import report, parser

from git_tune import repogen
from git_tune.advisor.measure import peak

MIB = 1 << 20
FULL = repogen.LargeFiles(size=32 << 20, versions=12, binary=4 << 20)
TINY = repogen.LargeFiles(size=4 << 20, versions=4, binary=2 << 20)
UNLIMITED = 1 << 50
KEYS = ("pack.windowMemory", "pack.deltaCacheSize")
DEFAULTS = {"pack.windowMemory": "0", "pack.deltaCacheSize": "256m"}


def chosen(repo: str, limit: int, budget: float):
    """The values `recommend --workload ci` chose inside a cgroup of `limit`, and the
    reason it gave; None where no cgroup could be made for a limit."""
    box = peak.Confinement.make(limit) if limit != UNLIMITED else None
    if limit != UNLIMITED and box is None:
        return None
    try:
        out = subprocess.run([sys.executable, "-m", "git_tune", "recommend", "--repo", repo,
                              "--workload", "ci", "--budget", str(budget), "--recalibrate", "--json"],
                             preexec_fn=box.enter if box else None, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    finally:
        if box:
            box.remove()
    if out.returncode != 0:
        return {}, {"reason": f"recommend failed: {out.stderr.strip()[-300:]}"}
    rec = json.loads(out.stdout)
    keys = {k["key"]: k for k in rec["keys"]}
    values = {k: keys[k]["value"] for k in KEYS if keys[k]["status"] == "set"}
    return values, {"reason": keys[KEYS[0]]["reason"], "spent": rec.get("spent"),
                    "notes": rec.get("notes")}


def repack(source: str, scratch: str, settings: dict, limit: int) -> peak.PeakRun:
    copy = os.path.join(scratch, "copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy, symlinks=True)
    config = [a for k, v in settings.items() for a in ("-c", f"{k}={v}")]
    try:
        return peak.run([*config, "repack", "-adfq"], copy, dict(os.environ), limit, 3600)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def shown(r: peak.PeakRun) -> str:
    if r.killed_at_limit or r.returncode:
        return f"killed after {r.seconds:.1f} s" if r.killed_at_limit or r.returncode == -9 \
            else f"failed ({r.returncode})"
    return f"{r.seconds:.1f} s, {r.peak / MIB:.0f} MiB"


def main():
    args = parser(__doc__).parse_args()
    shape = TINY if args.tiny else FULL
    limits = ([192 * MIB] if args.tiny
              else [256 * MIB, 512 * MIB, 1024 * MIB, UNLIMITED])
    rows, data, notes = [], {}, []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        repo = repogen.generate_large(os.path.join(d, "repo"), shape)
        mib = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in
                  os.walk(os.path.join(repo, ".git")) for f in fs) / MIB
        for limit in limits:
            name = "none" if limit == UNLIMITED else f"{limit // MIB} MiB"
            got = chosen(repo, limit, 10 if args.tiny else 120)
            if got is None:
                notes.append(f"{name}: no memory cgroup could be made here (root and the "
                             "memory controller are needed); row skipped")
                continue
            values, reason = got
            if not values:
                notes.append(f"{name}: {reason['reason']}")
            before = repack(repo, d, DEFAULTS, limit)
            after = repack(repo, d, {**DEFAULTS, **values}, limit) if values else None
            # The same values with no limit: what the limit itself costs them.
            free = (repack(repo, d, {**DEFAULTS, **values}, UNLIMITED)
                    if values and limit != UNLIMITED else None)
            ratio = (f"{before.seconds / after.seconds:.2f}x"
                     if after and not before.returncode and not after.returncode else "-")
            rows.append((name, ", ".join(f"{k}={v}" for k, v in values.items()) or
                         "Git's defaults", shown(before), shown(after) if after else "-",
                         shown(free) if free else "-", ratio))
            data[name] = {"values": values, **reason,
                          "defaults": before.__dict__, "git_tune": after.__dict__ if after else None,
                          "git_tune_no_limit": free.__dict__ if free else None}
    notes.append(f"repository: {shape.files} text files of {shape.size // MIB} MiB in "
                 f"{shape.versions} versions and a {shape.binary // MIB} MiB binary each "
                 f"version, {mib:.0f} MiB of loose objects; the peak is git's largest "
                 "resident set (wait4), the limit the cgroup's (no swap)")
    notes.append("not measured here: clone (index-pack) and blame; the delta base cache's "
                 "curve and choice per limit: bench/basecache.py")
    report("memory", "git repack -adf inside a memory limit: Git's defaults against "
           "git-tune's values", ("limit", "git-tune chose", "Git's defaults",
                                 "git-tune's values", "its values, no limit", "speed-up"), rows, data, args.tiny, notes)


if __name__ == "__main__":
    main()
