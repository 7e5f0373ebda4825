"""Rehash storms: `git status -uno` where the index's stat data never match (a mount
that rewrites ctimes or renumbers inodes at every call, as latfs's unstable_ctime and
unstable_ino do) and where they stopped matching once (a `cp -a` copy on the disk):
Git's default against the key git-tune's probe points to, paired (ABBA) in one run;
what `git-tune recommend` decided there; how many statuses the agent needed to flag it.

    python3 bench/stat_storm.py [--tiny]
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

from common import BedUnavailable, ab, median, ms, parser, report, storage

from testbeds import slow


def isolate(home: str) -> None:
    for k in list(os.environ):
        if k.startswith("GIT_") and not k.startswith("GIT_TUNE_"):
            del os.environ[k]
    os.environ.update(HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
                      XDG_STATE_HOME=os.path.join(home, ".state"),
                      XDG_CACHE_HOME=os.path.join(home, ".cache"),
                      GIT_CONFIG_GLOBAL=os.path.join(home, ".gitconfig"), GIT_CONFIG_NOSYSTEM="1")
    os.environ.pop("XDG_RUNTIME_DIR", None)
    # No detached `gc --auto` after the generator's commit: it would repack the source
    # while `cp -a` copies it.
    with open(os.environ["GIT_CONFIG_GLOBAL"], "w") as f:
        f.write("[gc]\n\tauto = 0\n")


def generate(path: str, files: int) -> str:
    from git_tune import repogen
    repogen.generate(path, repogen.RepoShape.for_files(files), limit=files)
    return path


def status(repo: str, settings: dict):
    from git_tune.advisor.measure.gitbench import config_env
    env = dict(config_env(settings))

    def run() -> float:
        t0 = time.perf_counter()
        subprocess.run(["git", "status", "-uno", "--porcelain"], cwd=repo, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0
    return run


def decided(repo: str, key: str, budget: int) -> str:
    out = subprocess.run(["git-tune", "recommend", "--repo", repo, "--budget", str(budget),
                          "--json"], capture_output=True, text=True)
    if out.returncode:
        return f"failed: {out.stderr.strip()[-80:]}"
    advice = {a["key"]: a for a in json.loads(out.stdout)["keys"]}[key]
    return advice["value"] if advice["status"] == "set" else "not set"


def flagged_after(repo: str, limit: int = 10) -> str:
    """Statuses until `agent report` flags the storm."""
    from git_tune.advisor.agent import collector, report, store, storm, switch
    subprocess.run(["git-tune", "agent", "enable", "--repo", repo], check=True,
                   stdout=subprocess.DEVNULL)
    collector.stop()
    try:
        for n in range(1, limit + 1):
            # As the user runs it: git-tune's own runs (config_env) set GIT_TRACE2_EVENT=0.
            subprocess.run(["git", "status", "-uno"], cwd=repo, check=True,
                           stdout=subprocess.DEVNULL)
            switch.collect()
            if storm.storms(report.select(store.records(), repo, None)):
                return str(n)
        return f"not within {limit}"
    finally:
        subprocess.run(["git-tune", "agent", "disable", "--forget"], stdout=subprocess.DEVNULL)


def unstable_row(name: str, latency, key: str, value: str, files: int, repeat: int, budget: int):
    with slow.latfs(latency) as mnt:
        repo = generate(os.path.join(mnt, "repo"), files)
        status(repo, {})()
        flagged = flagged_after(repo)
        choice = decided(repo, key, budget)
        default, tuned = ab(status(repo, {}), status(repo, {key: value}), repeat)
    return ((name, f"{key}={value}", ms(median(default)), ms(median(tuned)),
             f"{median(default) / median(tuned):.2f}x", choice, flagged),
            {"default": default, "tuned": tuned, "decided": choice, "flagged_after": flagged})


def copy_row(files: int, repeat: int, budget: int):
    """The first status after a `cp -a` copy (every inode and ctime new), then the
    second, under Git's default and under checkStat=minimal, each on a fresh copy."""
    with storage("disk") as mnt:
        src = generate(os.path.join(mnt, "src"), files)
        status(src, {})()
        first = {"default": [], "minimal": []}
        second = {"default": [], "minimal": []}
        for i in range(repeat):
            for arm, settings in (("default", {}), ("minimal", {"core.checkStat": "minimal"})):
                copy = os.path.join(mnt, f"copy-{arm}-{i}")
                subprocess.run(["cp", "-a", src, copy], check=True)
                first[arm].append(status(copy, settings)())
                second[arm].append(status(copy, settings)())
                shutil.rmtree(copy)
        copy = os.path.join(mnt, "copy")
        subprocess.run(["cp", "-a", src, copy], check=True)
        choice = decided(copy, "core.checkStat", budget)
    row = ("disk, cp -a copy", "core.checkStat=minimal",
           f"{ms(median(first['default']))} then {ms(median(second['default']))}",
           f"{ms(median(first['minimal']))} then {ms(median(second['minimal']))}",
           f"{median(first['default']) / median(first['minimal']):.2f}x, then "
           f"{median(second['default']) / median(second['minimal']):.2f}x", choice, "-")
    return row, {"first": first, "second": second, "decided": choice}


def main():
    args = parser(__doc__).parse_args()
    files = 300 if args.tiny else 10000
    repeat = args.repeat or (2 if args.tiny else 10)
    budget = 3 if args.tiny else 20
    home = tempfile.mkdtemp(prefix="git-tune-storm-bench-")
    isolate(home)
    rows, data, notes = [], {}, []
    try:
        for name, latency, key, value in (
                ("latfs unstable ctime", slow.UNSTABLE_CTIME, "core.trustctime", "false"),
                ("latfs unstable inode", slow.UNSTABLE_INO, "core.checkStat", "minimal")):
            try:
                row, d = unstable_row(name, latency, key, value, files, repeat, budget)
                rows.append(row)
                data[name] = d
            except BedUnavailable as e:
                notes.append(f"{name}: {e}")
        try:
            row, d = copy_row(files, repeat, budget)
            rows.append(row)
            data["disk-copy"] = d
        except BedUnavailable as e:
            notes.append(f"disk: {e}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    report("stat_storm", f"git status -uno on {files} files whose stat data do not match "
           f"(median of {repeat}, paired)",
           ("bed", "key", "Git's default", "with the key", "speedup",
            f"recommend --budget {budget} set", "agent flagged after"), rows, data, args.tiny,
           notes + ["the copy row: the first status after the copy, then the second (the "
                    "first wrote the new stat data back): one refresh ends it, so no key is "
                    "needed, and recommend, timing repeated statuses, sets none"])


if __name__ == "__main__":
    main()
