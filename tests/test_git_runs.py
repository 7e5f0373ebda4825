"""How git-tune starts git and knows it has ended (core/git.py): what every timing rests on."""
import os
import subprocess
import time

import pytest

from git_tune import git

# The child closes its output, then lives on: its pipes' end comes well before its own.
CLOSES_THEN_LINGERS = "exec >&- 2>&-; sleep {}"


def _pidfd_or_skip() -> None:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as e:
        pytest.skip(f"no pidfd here ({e}): subprocess's own wait is used")


def test_a_run_with_a_timeout_ends_when_the_child_does(monkeypatch):
    """communicate(timeout) waits for the child once the pipes close. subprocess's own
    wait sleeps 1, 2, 4... ms between polls there, and adds up to one such sleep to every
    timed run of a few milliseconds, more or less by a race a setting moves."""
    _pidfd_or_skip()
    slept = []
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: (slept.append(s), real_sleep(s)))
    proc = git.start(["sh", "-c", CLOSES_THEN_LINGERS.format(0.2)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.communicate(timeout=30)
    assert proc.returncode == 0 and slept == []


def test_the_timeout_still_ends_a_wait_for_a_child_that_lingers():
    _pidfd_or_skip()
    proc = git.start(["sh", "-c", CLOSES_THEN_LINGERS.format(30)], start_new_session=True,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.communicate(timeout=0.3)
        assert proc.returncode is None
    finally:
        git.kill_group(proc.pid)
        proc.wait()
    assert proc.returncode == -9


def test_a_wait_works_in_a_process_with_more_than_1024_files_open():
    """Where git-tune itself holds many files (a hook's, an IDE's inherited descriptors),
    the pidfd is numbered above select()'s 1,024: the wait must not depend on it."""
    _pidfd_or_skip()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"at most {hard} open files here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]
    try:
        assert git.run(["--version"], timeout=30).stdout.startswith("git version")
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
