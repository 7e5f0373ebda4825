"""The Ansible role against localhost: changed, then ok; check mode changes nothing."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from git_tune.advisor.fleet import profiles
from git_tune.probes.report import probe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(ROOT, "deploy", "ansible", "site.yml")

pytestmark = pytest.mark.skipif(not shutil.which("ansible-playbook"),
                                reason="ansible-core is not installed")


def play(tmp_path, profile, *flags, **variables):
    """The playbook against localhost with this profile ("" for none) and any other role
    variables: its output and how many tasks changed."""
    extra = {"git_tune_install": "none", "git_tune_profile": profile,
             "git_tune_command": [sys.executable, "-m", "git_tune"],
             "ansible_python_interpreter": sys.executable, **variables}
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_STDOUT_CALLBACK="default")
    proc = subprocess.run(["ansible-playbook", "-c", "local", "-i", "localhost,", PLAYBOOK,
                           "-e", json.dumps(extra), *flags], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recap = proc.stdout[proc.stdout.rindex("PLAY RECAP"):]
    return proc.stdout, int(recap.split("changed=")[1].split()[0])


def git_get(key):
    p = subprocess.run(["git", "config", "--get", key], stdout=subprocess.PIPE, text=True)
    return p.stdout.strip() or None


def test_role_reports_changed_then_ok_and_honours_check_mode(isolated_git, monkeypatch, tmp_path,
                                                            small_repo):
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    report = probe(str(small_repo))
    data = {"schema": profiles.SCHEMA, "class": profiles.host_class(report),
            "settings": {"checkout.workers": "4"}, "measurements": {}, "workload": "mixed",
            "provenance": {"fingerprint": "ansible-test", "hosts": 1}}
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(data))

    out, changed = play(tmp_path, str(profile), "--check", "--diff")
    assert changed >= 1 and "+checkout.workers = 4" in out
    assert git_get("checkout.workers") is None          # check mode wrote nothing

    out, changed = play(tmp_path, str(profile))
    assert changed >= 1 and git_get("checkout.workers") == "4"

    out, changed = play(tmp_path, str(profile))
    assert changed == 0                                 # second run: ok

    data["settings"] = {"checkout.workers": "6"}
    profile.write_text(json.dumps(data))
    out, changed = play(tmp_path, str(profile), "--check", "--diff")
    assert changed >= 1 and git_get("checkout.workers") == "4"
    assert "-checkout.workers = 4" in out and "+checkout.workers = 6" in out


def test_role_never_installs_by_a_bare_package_name(isolated_git, tmp_path):
    """The old default (pip install git-tune from a public index) is refused before any
    task touches the host: anyone could register that name."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "t"),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / "t"), ANSIBLE_STDOUT_CALLBACK="default")
    for extra in ({"git_tune_install": "pip"},
                  {"git_tune_install": "wheel", "git_tune_wheel_src": "git-tune"}):
        extra["ansible_python_interpreter"] = sys.executable
        proc = subprocess.run(["ansible-playbook", "-c", "local", "-i", "localhost,", PLAYBOOK,
                               "-e", json.dumps(extra)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=300)
        assert proc.returncode != 0, proc.stdout
        assert "never by a bare name" in proc.stdout, proc.stdout


def test_a_host_of_another_class_is_skipped_not_failed(isolated_git, monkeypatch, tmp_path,
                                                      small_repo):
    """A mixed fleet: the profile is for another storage class; the play goes on, this
    host's config stays as it was, and the output says why."""
    monkeypatch.chdir(small_repo)
    report = probe(str(small_repo))
    here = profiles.host_class(report)
    other = "network" if here["storage_class"] != "network" else "local-hdd"
    data = {"schema": profiles.SCHEMA, "class": dict(here, storage_class=other),
            "settings": {"checkout.workers": "4"}, "measurements": {}, "workload": "mixed",
            "provenance": {"fingerprint": "other", "hosts": 1}}
    profile = tmp_path / "other.json"
    profile.write_text(json.dumps(data))
    out, changed = play(tmp_path, str(profile), "-v")     # -v: each task's message
    assert changed == 0 and "not of the profile's class" in out, out
    assert git_get("checkout.workers") is None


def test_role_enables_the_agent_once_and_honours_check_mode(isolated_git, monkeypatch, tmp_path):
    """Issue #33: `git_tune_agent: true` enables the agent (changed), a second run is ok,
    check mode enables nothing; no profile needed."""
    from git_tune.advisor.agent import collector
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    routed = lambda: git_get("trace2.eventtarget") is not None  # noqa: E731

    def agent_play(*flags):
        return play(tmp_path, "", *flags, git_tune_agent=True)[1]

    try:
        assert agent_play("--check") == 1 and not routed()
        assert agent_play() == 1 and routed()
        assert agent_play() == 0 and routed()
    finally:
        subprocess.run([sys.executable, "-m", "git_tune", "agent", "disable"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        collector.stop()
    assert not routed()
