"""The agent's own files fuzzed for longer than CI does: every state file's validator
(git's event lines, store lines, agent.json, experiment.json, log lines) through the
property-based tests of tests/test_own_state_fuzz.py, at many more cases each. A failure is
a traceback some damaged file would cause: the table counts them (0 is the claim).

    python3 bench/fuzz_agent_state.py [--tiny]     (examples per input: 20,000; tiny 20)
"""
import os
import re
import subprocess
import sys
import time

from common import parser, report

INPUTS = {"event lines": "test_fuzz_event_lines_reduce_to_a_record_or_nothing",
          "store lines": "test_fuzz_store_lines_are_a_record_or_skipped",
          "agent.json": "test_fuzz_agent_state_loads_or_is_set_aside",
          "experiment.json": "test_fuzz_experiment_state_reads_or_is_damaged",
          "log lines": "test_fuzz_log_lines_show_or_are_skipped"}


def main() -> None:
    args = parser(__doc__).parse_args()
    examples = 20 if args.tiny else 20000
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    rows, data = [], {}
    for name, test in INPUTS.items():
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-p", "no:warnings", f"tests/test_own_state_fuzz.py::{test}"],
                              cwd=root, capture_output=True, text=True,
                              env=dict(os.environ, GIT_TUNE_FUZZ_EXAMPLES=str(examples)))
        failed = re.search(r"(\d+) failed", proc.stdout)
        failures = int(failed.group(1)) if failed else (0 if proc.returncode == 0 else 1)
        rows.append((name, f"{examples:,}", failures, f"{time.monotonic() - t0:.0f} s"))
        data[name] = {"examples": examples, "failures": failures, "output": proc.stdout[-2000:]}
    report("fuzz_agent_state", "The agent's own files, fuzzed (cases per input, tracebacks)",
           ("input", "cases", "failing tests", "wall"), rows, data, args.tiny)
    if any(r[2] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
