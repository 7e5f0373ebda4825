"""How long `calibrate` takes with its default budget, and where the time goes.

Target (autotuner issue): done in about 20 s on a 50,000-file repository on
this 2-core machine. Each phase is timed from calibrate's own progress
ticks; "validate" is the real-git A/B runs against Git's defaults.

    python3 bench/calibrate_speed.py [--tiny]
"""
import os
import tempfile
import time

from common import median, parser, report

from git_tune.advisor.measure import calibrate as cal
from git_tune.advisor.measure.record import Options
from git_tune import repogen


def timed_calibration(repo: str, budget: float):
    marks = []
    t0 = time.monotonic()
    record = cal.calibrate(cal.probe_repository(repo), Options(budget=budget), store=False,
                           progress=lambda phase, _: marks.append((phase, time.monotonic())))
    total = time.monotonic() - t0
    phases, last = {}, t0
    for phase, t in marks:
        phases[phase] = phases.get(phase, 0.0) + (t - last)
        last = t
    # A trial may reuse another's comparison (the threshold reuses the workers' batch).
    timed = {id(c): c for t in record.trials.values() for c in t.comparisons}.values()
    runs = sum(len(c.times_default) + len(c.times_candidate) for c in timed)
    return total, phases, runs


def main():
    args = parser(__doc__).parse_args()
    sizes = (2000,) if args.tiny else (10000, 50000)
    repeat = args.repeat or (1 if args.tiny else 3)
    budget = Options().budget
    rows, data = [], {}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        for files in sizes:
            repo = os.path.join(d, f"repo{files}")
            repogen.generate(repo, repogen.RepoShape.for_files(files), limit=files)
            runs = [timed_calibration(repo, budget) for _ in range(repeat)]
            totals = [r[0] for r in runs]
            phases = {p: median([r[1].get(p, 0.0) for r in runs]) for p in runs[0][1]}
            data[files] = {"totals": totals, "phases": [r[1] for r in runs], "git_runs": runs[0][2]}
            rows.append((files, f"{median(totals):.1f} s", f"{min(totals):.1f}-{max(totals):.1f} s",
                         f"{phases.get('preload', 0):.1f} s", f"{phases.get('checkout', 0):.1f} s",
                         f"{phases.get('index', 0):.1f} s", f"{phases.get('validate', 0):.1f} s",
                         runs[0][2]))
    report("calibrate_speed", f"calibrate with the default {budget:g} s budget, hot disk, {repeat} runs",
           ("files", "median", "range", "preload sweep", "checkout sweep", "index sweep",
            "real-git validation", "real git runs"), rows, data, args.tiny,
           ["target: about 20 s on 50,000 files; phases are medians"])


if __name__ == "__main__":
    main()
