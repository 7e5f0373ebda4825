"""The collector as a systemd user service (issue #62, item 3): where a systemd user
instance answers, `agent enable` installs and starts the unit and `agent disable`
removes it; elsewhere (this CI's containers) the detached collector and its restart by
the next git-tune command stand in (tests/test_agent.py)."""
import os
import subprocess
import sys

import pytest

from git_tune import repogen
from git_tune.advisor.agent import collector, service

needs_systemd = pytest.mark.skipif(not service.available(), reason="no systemd user "
                                   "instance answers here (`systemctl --user` has no bus)")


def test_the_unit_runs_this_git_tunes_collector_in_its_environment():
    env = {"HOME": "/home/u", "GIT_TUNE_STATE_DIR": "/s", "GIT_TRACE2_EVENT": "0",
           "GIT_DIR": "/elsewhere/.git", "SECRET": "x"}
    text = service.unit_text(env)
    assert f"ExecStart={sys.executable} -m git_tune agent run" in text
    assert "Environment=GIT_TUNE_STATE_DIR=/s" in text and "Environment=GIT_TRACE2_EVENT=0" in text
    assert "GIT_DIR" not in text and "SECRET" not in text
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text


@needs_systemd
def test_enable_installs_the_unit_and_disable_removes_it(tmp_path):
    repo = tmp_path / "r"
    repogen.generate(str(repo), repogen.RepoShape(depth=1, width=2, files=5))
    try:
        out = subprocess.run(["git-tune", "agent", "enable", "--repo", str(repo)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert os.path.exists(service.unit_path())
        assert subprocess.run(["systemctl", "--user", "is-active", service.UNIT],
                              capture_output=True).returncode == 0
        assert collector.running().running
    finally:
        subprocess.run(["git-tune", "agent", "disable"], capture_output=True)
    assert not os.path.exists(service.unit_path()) and not collector.running().running
