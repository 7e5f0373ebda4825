"""`git status -uno`, hot and cold, core.preloadIndex on vs off, on each storage bed (seed 000).

Seed 000 (WebKit, one disk): cold, preload was slower than sequential lstat
(28.7 s vs 25.6 s) because 20 threads read 20 places at once; hot, 0.49 s
vs 0.65 s. The trace2 regions index/preload and index/refresh show where
the lstat time went.

    python3 bench/status_preload.py [--tiny]
"""
import os
import tempfile

from common import bed_latency, beds_for, BedUnavailable, ab, median, parser, repo_on, report, storage, timed

from git_tune.advisor.measure.gitbench import trace_phases


def main():
    args = parser(__doc__).parse_args()
    files = 500 if args.tiny else 10000
    repeat = args.repeat or (2 if args.tiny else 7)
    rows, data, notes = [], {}, []
    for kind in beds_for(args.tiny):
        try:
            with storage(kind, bed_latency(args.tiny)) as mnt:
                repo = repo_on(kind, mnt, files)
                cmd = ["git", "status", "-uno", "--porcelain"]
                timed(cmd, repo, {})  # settles the index's stat data
                for cold in (False, True):
                    if cold and os.geteuid() != 0:
                        notes.append("cold rows need root (drop_caches)")
                        continue
                    on = lambda: timed(cmd, repo, {"core.preloadIndex": "true"}, cold)
                    off = lambda: timed(cmd, repo, {"core.preloadIndex": "false"}, cold)
                    t_on, t_off = ab(on, off, repeat)
                    phases = {}
                    with tempfile.TemporaryDirectory() as d:
                        for label, val in (("on", "true"), ("off", "false")):
                            trace = os.path.join(d, label)
                            timed(cmd, repo, {"core.preloadIndex": val}, cold, trace=trace)
                            p = trace_phases(trace)
                            phases[label] = p.get("index/preload", 0) + p.get("index/refresh", 0)
                    rows.append((kind, "cold" if cold else "hot", f"{median(t_on) * 1e3:.0f} ms",
                                 f"{median(t_off) * 1e3:.0f} ms", f"{median(t_off) / median(t_on):.2f}",
                                 f"{phases['on'] * 1e3:.0f} / {phases['off'] * 1e3:.0f} ms"))
                    data[f"{kind}-{'cold' if cold else 'hot'}"] = {"on": t_on, "off": t_off, "phases": phases}
        except BedUnavailable as e:
            notes.append(f"{kind}: {e}")
    report("status_preload", f"git status -uno on {files} files: preload on vs off (median of {repeat}, interleaved)",
           ("bed", "cache", "preload on", "preload off", "off/on", "lstat regions on / off"), rows, data,
           args.tiny, notes + ["off/on above 1: preload helps; below 1: sequential lstat is faster"])


if __name__ == "__main__":
    main()
