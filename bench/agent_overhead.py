"""What the agent costs git: a hot `git status -uno` with the agent's trace2 routing
against the same config without it, paired (ABBA) in one run, on tmpfs, the disk and
latfs. The spool in the user's runtime directory (tmpfs, as /run/user/UID) with the
collector running, and with it stopped (events wait in the spool); the spool in
git-tune's state directory on the disk (where there is no runtime directory); and, as
the floor no collector can go below, git's own event writer sent to /dev/null. Then
the collector's memory and the store's size over many commands.

The arms differ only in the global config git reads (GIT_CONFIG_GLOBAL: an empty one,
and one including the agent's trace2 settings as `git-tune agent enable --all` wrote
them), so what is measured is everything the agent adds to a command: reading its
include, creating the event file, writing the events.

The agent's cost is a fixed time per command (git's writer makes one write and, to
ignore SIGPIPE around it, two sigactions per event), so the bench runs three tree sizes:
100 files, where a status is short enough to time that cost to a tenth of a millisecond
in many pairs, then 10,000 and 100,000 files, its share of a real status.

    python3 bench/agent_overhead.py [--tiny] [--beds tmpfs,disk] [--sizes 100 10000 100000] [--commands N]
"""
import os
import shutil
import subprocess
import tempfile
import time

from common import BedUnavailable, ab, bed_latency, median, ms, parser, repo_on, report, storage

BEDS = ("tmpfs", "disk", "latfs-nfs")
SHORT = 100     # files: the tree whose status times the agent's fixed cost


def isolate(home: str, runtime: str) -> None:
    """This process and every git and git-tune it starts use a throw-away HOME and
    runtime directory: the bench never touches the user's config or agent."""
    for k in list(os.environ):
        if k.startswith("GIT_") and not k.startswith("GIT_TUNE_"):
            del os.environ[k]
    os.environ.update(HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
                      XDG_STATE_HOME=os.path.join(home, ".state"), XDG_RUNTIME_DIR=runtime,
                      GIT_CONFIG_GLOBAL=os.path.join(home, ".gitconfig"), GIT_CONFIG_NOSYSTEM="1")
    os.environ.pop("GIT_TUNE_STATE_DIR", None)


def variant(home: str, name: str, target: str, **changed: str) -> str:
    """A global config routing events to `target` with the agent's other settings
    (`changed`: trace2 settings by their short lower-case name, e.g. eventnesting)."""
    from git_tune.advisor.agent import switch
    include = os.path.join(home, f"{name}.agent.gitconfig")
    settings = {k.split(".", 1)[1]: v for k, v in switch.trace2_settings(target).items()}
    with open(include, "w") as f:
        f.write("[trace2]\n" + "".join(f"\t{k} = {v}\n" for k, v in {**settings, **changed}.items()))
    path = os.path.join(home, f"{name}.gitconfig")
    with open(path, "w") as f:
        f.write(f"[include]\n\tpath = {include}\n")
    return path


class Listener:
    """A Unix stream socket reading and dropping whatever git sends: the socket target
    the agent did not choose, measured beside the spool."""

    def __init__(self, path: str):
        import socket
        import threading
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(64)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        import threading
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn):
        with conn:
            while conn.recv(1 << 16):
                pass

    def close(self):
        self.server.close()


def drain(spool_dir: str):
    """The disk spool emptied after every run, as a collector would within a second
    (the bench's own directory: spool.clear() removes only from git-tune's own places)."""
    def clear() -> None:
        for name in os.listdir(spool_dir):
            os.unlink(os.path.join(spool_dir, name))
    return clear


def status_run(repo: str, global_config: str, after=None):
    cmd = ["git", "status", "-uno", "--porcelain"]
    env = dict(os.environ, GIT_CONFIG_GLOBAL=global_config)

    def run() -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL)
        took = time.perf_counter() - t0
        if after:
            after()
        return took
    return run


def cell(repo: str, plain: str, agent: str, repeat: int, after=None) -> dict:
    from git_tune.models import stats
    off, on = ab(status_run(repo, plain), status_run(repo, agent, after), repeat)
    est = stats.compare_paired(off, on)
    return {"off": off, "on": on, "ratio": est.ratio, "low": est.low, "high": est.high}


def cell_key(kind: str, files: int, where: str, how: str) -> str:
    return f"{kind}-{files}-{where}-{how}"


RUNTIME = "runtime dir (tmpfs)"     # the spool `agent enable` makes where it can


def fixed_cost(kind: str, sizes, data: dict) -> str:
    """The agent's cost per command, read from the shortest status (its paired ratio
    times that status's time), and its share of each larger status on the bed."""
    short = min(sizes)
    running = {n: data[cell_key(kind, n, RUNTIME, "running")] for n in sizes}
    c = running[short]
    base = median(c["off"])
    cost = [(r - 1) * base * 1e3 for r in (c["ratio"], c["low"], c["high"])]
    shares = ", ".join(f"{cost[0] / (median(running[n]['off']) * 1e3) * 100:.1f}% "
                       f"of {n} files' status" for n in sizes if n != short)
    return (f"{kind}: the agent (collector running) adds {cost[0]:.2f} ms [{cost[1]:.2f}, {cost[2]:.2f}] "
            f"to each command, timed on {short} files; {shares or 'no larger tree run'}; "
            f"at most 1% of any command over {max(cost[0], 0) * 100:.0f} ms")


def soak(repo: str, agent: str, commands: int) -> dict:
    """`commands` statuses with the collector running: its peak memory, the store's
    bytes, the spool's peak file count."""
    from git_tune.advisor.agent import collector, spool, store, switch
    run = status_run(repo, agent)
    peak_rss, peak_spool, start = 0, 0, time.monotonic()
    for i in range(commands):
        run()
        if i % max(1, commands // 50) == 0:
            state = collector.running()
            peak_rss = max(peak_rss, state.rss_bytes or 0)
            peak_spool = max(peak_spool, spool.pending(switch.load().spool))
    deadline = time.monotonic() + 30
    while spool.pending(switch.load().spool) and time.monotonic() < deadline:
        time.sleep(0.2)
    return {"commands": commands, "seconds": time.monotonic() - start,
            "collector_peak_rss": peak_rss, "store_bytes": store.size(),
            "records": len(store.records()), "spool_peak_files": peak_spool,
            "spool_left": spool.pending(switch.load().spool)}


def main():
    p = parser(__doc__)
    p.add_argument("--commands", type=int, default=None, help="commands in the soak")
    p.add_argument("--beds", default=",".join(BEDS), help="comma-separated beds to run")
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="files in the work tree (default 100 10000 100000; --tiny 100)")
    args = p.parse_args()
    beds = tuple(b for b in args.beds.split(",") if b)
    sizes = args.sizes or ([100] if args.tiny else [100, 10000, 100000])
    repeat = args.repeat or (3 if args.tiny else 60)
    commands = args.commands or (200 if args.tiny else 10000)
    home = tempfile.mkdtemp(prefix="git-tune-agent-bench-")
    runtime = tempfile.mkdtemp(prefix="git-tune-agent-run-", dir="/dev/shm")  # 0700, tmpfs
    isolate(home, runtime)
    from git_tune.advisor.agent import collector, switch
    rows, data, notes = [], {}, []
    try:
        plain = os.path.join(home, "plain.gitconfig")
        open(plain, "w").close()
        subprocess.run(["git-tune", "agent", "enable", "--all"], check=True,
                       stdout=subprocess.DEVNULL)
        agent = os.environ["GIT_CONFIG_GLOBAL"]
        sock = os.path.join(runtime, "bench.sock")
        listener = Listener(sock)
        disk_spool = os.path.join(home, "disk-spool")
        os.mkdir(disk_spool, 0o700)
        arms = ((RUNTIME, "running", agent, None),
                (RUNTIME, "stopped", agent, None),
                ("state dir (disk)", "drained", variant(home, "disk", disk_spool),
                 drain(disk_spool)),
                ("af_unix socket", "reading", variant(home, "socket", f"af_unix:stream:{sock}"),
                 None),
                ("/dev/null (git's floor)", "-", variant(home, "null", "/dev/null"), None),
                ("/dev/null, nesting 1", "-", variant(home, "null1", "/dev/null", eventnesting="1"),
                 None))
        for kind in beds:
            try:
                # A 100,000-file repository's objects and tree fill about 1.5 GiB.
                with storage(kind, bed_latency(args.tiny), size_mb=max(1024, max(sizes) // 40)) as mnt:
                    for files in sizes:
                        repo = repo_on(kind, mnt, files, name=f"repo-{files}")
                        status_run(repo, plain)()          # settles the index's stat data
                        for where, how, config, after in arms:
                            if how == "running":
                                collector.start()
                            elif how == "stopped":
                                collector.stop()
                            # A short status: many pairs resolve its fixed cost.
                            pairs = repeat * (8 if files <= SHORT else 1)
                            c = cell(repo, plain, config, pairs, after)
                            data[cell_key(kind, files, where, how)] = c
                            rows.append((kind, files, where, how, ms(median(c["off"])),
                                         ms(median(c["on"])),
                                         f"{(median(c['on']) - median(c['off'])) * 1e3:+.2f} ms",
                                         f"{(c['ratio'] - 1) * 100:+.1f}% "
                                         f"[{(c['low'] - 1) * 100:+.1f}, {(c['high'] - 1) * 100:+.1f}]"))
                        switch.collect()
                notes.append(fixed_cost(kind, sizes, data))
            except BedUnavailable as e:
                notes.append(f"{kind}: {e}")
        with storage("tmpfs") as mnt:
            repo = repo_on("tmpfs", mnt, 100)
            collector.start()
            s = soak(repo, agent, commands)
        data["soak"] = s
        notes.append(f"soak: {s['commands']} `git status -uno` in {s['seconds']:.0f} s with the "
                     f"collector running: its resident memory peaked at "
                     f"{s['collector_peak_rss'] / 2**20:.1f} MiB, the store holds "
                     f"{s['records']} records in {s['store_bytes'] / 2**10:.0f} KiB "
                     f"({s['store_bytes'] / max(1, s['records']):.0f} B each; capped at 2 x 4 MiB), "
                     f"the spool peaked at {s['spool_peak_files']} files and ended with "
                     f"{s['spool_left']}")
    finally:
        subprocess.run(["git-tune", "agent", "disable", "--forget"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        collector.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)
    report("agent_overhead", "hot git status -uno: without and with the agent (paired)",
           ("bed", "files", "spool", "collector", "without", "with agent", "difference", "overhead [95%]"),
           rows, data, args.tiny,
           notes + [f"pairs: {repeat} a cell, {repeat * 8} on {SHORT} files",
                    "overhead: the median paired ratio less 1, with its bootstrap interval; "
                    "'stopped' is git with the routing on and nothing reading the spool; "
                    "'drained': the bench empties the disk spool after each run; trace2 "
                    f"nesting {switch.trace2_settings('x')['trace2.eventnesting']}, as "
                    "`agent enable` writes it"])


if __name__ == "__main__":
    main()
