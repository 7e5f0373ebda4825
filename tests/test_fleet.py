"""Fleet profiles: export, apply with --check, class matching, merging many hosts."""
import dataclasses
import json
import subprocess

import pytest
from click.testing import CliRunner

from git_tune.advisor.fleet import profiles
from git_tune.cli import cli
from git_tune.probes.report import probe


@pytest.fixture
def home(isolated_git, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    return isolated_git


# The class is measured (latencies), and under load one probe of a disk can read a seek
# where the next does not: the profiles a test makes for one host are of one class
# (this host's, probed once a repository; apply's own probe takes a majority of three).
_probed = {}


def make_profile(small_repo, settings, measurements=None, fingerprint="test", **cls):
    if str(small_repo) not in _probed:
        _probed[str(small_repo)] = probe(str(small_repo))
    report = _probed[str(small_repo)]
    here = profiles.host_class(report)
    here.update(cls)
    return {"schema": profiles.SCHEMA, "class": here, "settings": settings,
            "measurements": measurements or {}, "workload": "mixed",
            "provenance": {"fingerprint": fingerprint, "created": 0, "git_tune_version": "0",
                           "git_version": report.git.version, "hosts": 1}}


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def git_get(key):
    p = subprocess.run(["git", "config", "--get", key], stdout=subprocess.PIPE, text=True)
    return p.stdout.strip() or None


def test_export_is_a_versioned_profile(home, small_repo, monkeypatch, tmp_path):
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "p.json"
    res = CliRunner().invoke(cli, ["profile", "export", "--repo", str(small_repo), "--budget", "3",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["schema"] == "git-tune-profile/1"
    assert set(data["class"]) == set(profiles.CLASS_FIELDS)
    assert data["class"]["git"].startswith(">=") and data["provenance"]["hosts"] == 1
    # Read by people in pull requests: dates, and ratios of three digits.
    import re
    for when in ("created", "calibrated"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["provenance"][when])
    for m in data["measurements"].values():
        assert all(round(v, 3) == v for v in m.values() if isinstance(v, float)), m
    for key in data["settings"]:
        assert key in data["measurements"]  # every value carries its measurement
    assert profiles.load(str(out)) == data


def test_export_takes_the_storage_class_the_values_were_measured_on(home, small_repo):
    """The storage class is measured, and a stored calibration may have read another than
    today's probe (a busy host): the profile's class is the one its values were
    calibrated on, so apply's class check compares like with like."""
    from git_tune.advisor.decide.recommend import recommend
    from git_tune.advisor.measure.calibrate import calibrate, probe_repository
    from git_tune.advisor.measure.record import Options
    report = probe_repository(str(small_repo), 3)
    record = calibrate(report, Options(budget=3, workload="ci"))
    other = "network" if record.storage.storage_class != "network" else "local-ssd"
    record = dataclasses.replace(record, storage=dataclasses.replace(record.storage,
                                                                     storage_class=other))
    data = profiles.export(report, record, recommend(record, "ci"))
    assert data["class"]["storage_class"] == other
    assert data["class"]["fstype"] == profiles.host_class(report)["fstype"]


def test_apply_check_then_apply_then_check(home, small_repo, tmp_path):
    p = write(tmp_path, "p.json", make_profile(small_repo, {"checkout.workers": "4"},
                                               {"checkout.workers": {"speedup": 1.4, "low": 1.2, "high": 1.6,
                                                                     "runs": 5, "workload": "checkout"}}))
    runner = CliRunner()
    res = runner.invoke(cli, ["apply", p, "--repo", str(small_repo), "--check", "--diff"])
    assert res.exit_code == 6, res.output
    # The diff is of the exact bytes to be written.
    assert "+\tworkers = 4" in res.stdout and git_get("checkout.workers") is None
    res = runner.invoke(cli, ["apply", p, "--repo", str(small_repo)])
    assert res.exit_code == 0, res.output
    assert git_get("checkout.workers") == "4"
    res = runner.invoke(cli, ["apply", p, "--repo", str(small_repo), "--check", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["would_change"] is False


def test_apply_refuses_another_class_unless_forced(home, small_repo, tmp_path):
    p = write(tmp_path, "p.json", make_profile(small_repo, {"checkout.workers": "16"},
                                               storage_class="network", fstype="nfs4"))
    runner = CliRunner()
    res = runner.invoke(cli, ["apply", p, "--repo", str(small_repo)])
    assert res.exit_code == 8
    assert "'nfs4' in the profile" in res.stderr and git_get("checkout.workers") is None
    res = runner.invoke(cli, ["apply", p, "--repo", str(small_repo), "--force"])
    assert res.exit_code == 0 and git_get("checkout.workers") == "16"


def test_a_file_system_known_only_by_statfs_is_of_the_class_its_mount_names(home, small_repo):
    """Under a chroot below its mount, a probe sees no mount entry and names the file
    system by its statfs family ("ext2/3/4"); a profile made where the mount was seen
    ("ext4") is still of this host's class, and another file system is not."""
    from git_tune.probes.storage import probe_storage, same_file_system
    profile = make_profile(small_repo, {"checkout.workers": "4"})
    here = dict(profiles.host_class(probe(str(small_repo))), git_version=git_version_text())
    chroot = probe_storage(str(small_repo), None, mount_table=[])
    assert "no /proc/self/mountinfo entry" in " ".join(chroot.notes)
    assert same_file_system(chroot.fstype, profile["class"]["fstype"])
    assert profiles.mismatches(profile, dict(here, fstype=chroot.fstype)) == []
    other = "xfs" if chroot.fstype != "xfs" else "btrfs"
    assert profiles.mismatches(profile, dict(here, fstype=other)) == [
        f"fstype is {other!r} here, {profile['class']['fstype']!r} in the profile"]


def git_version_text():
    from git_tune.probes.gitinfo import git_version
    return ".".join(map(str, git_version()))


def test_apply_drops_keys_this_git_does_not_read(home, small_repo, tmp_path):
    from git_tune.probes.gitinfo import git_version
    if git_version() >= (2, 40, 0):
        pytest.skip("this git reads index.skipHash")
    p = write(tmp_path, "p.json", make_profile(small_repo, {"index.skipHash": "true", "index.threads": "4"}))
    res = CliRunner().invoke(cli, ["apply", p, "--repo", str(small_repo), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["dropped_keys"] == ["index.skipHash"]
    assert git_get("index.skipHash") is None and git_get("index.threads") == "4"


def test_bad_profiles_are_usage_errors(home, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = CliRunner().invoke(cli, ["apply", str(bad)])
    assert res.exit_code == 2 and "is not JSON" in res.stderr
    bad.write_text(json.dumps({"schema": "something-else"}))
    res = CliRunner().invoke(cli, ["apply", str(bad)])
    assert res.exit_code == 2 and "not a git-tune-profile/1 profile" in res.stderr


def test_fleet_merge_one_profile_per_class_with_spread(home, small_repo, tmp_path):
    clear = {"checkout.workers": {"speedup": 1.5, "low": 1.3, "high": 1.7, "runs": 5, "workload": "checkout"}}
    a = make_profile(small_repo, {"checkout.workers": "4"}, clear)
    # Another host's export: the same values, its own fingerprint (a file given twice is
    # one host, test_never_touch.py).
    b = make_profile(small_repo, {"checkout.workers": "4"}, clear, fingerprint="test-b")
    c = make_profile(small_repo, {})
    d = make_profile(small_repo, {"checkout.workers": "32"}, storage_class="network", fstype="nfs4")
    paths = [write(tmp_path, f"{n}.json", p) for n, p in zip("abcd", (a, b, c, d))]
    out = tmp_path / "merged"
    res = CliRunner().invoke(cli, ["fleet", "merge", *paths, "--output-dir", str(out), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert len(data["classes"]) == 2 and len(data["files"]) == 2
    local = next(c for c in data["classes"] if c["profile"]["class"]["fstype"] != "nfs4")
    assert local["hosts"] == 3 and local["profile"]["settings"] == {"checkout.workers": "4"}
    assert local["spread"]["checkout.workers"] == {"4": 2, "(default)": 1}
    assert any("disagree beyond noise" in w for w in local["warnings"])
    assert "disagree beyond noise" in res.stderr
    for f in data["files"]:
        assert profiles.load(f)["provenance"]["hosts"] in (1, 3)


def test_fleet_merge_puts_a_host_seen_by_statfs_in_the_class_of_its_member_type(home,
                                                                                small_repo):
    """A host whose mount was not visible (a chroot) exports the statfs family: it joins
    the class of the one member type the fleet has, as apply would match it; beside two
    member types of one family ("fuse.sshfs", "fuse.s3fs") it stays apart."""
    def host(fstype, value, name):
        return profiles.parse(make_profile(small_repo, {"checkout.workers": value},
                                           fingerprint=name, fstype=fstype), name)

    ext = profiles.merge([host("ext4", "4", "a"), host("ext2/3/4", "4", "b")])
    assert [(m.hosts, m.profile["class"]["fstype"]) for m in ext] == [(2, "ext4")]
    assert ext[0].profile["settings"] == {"checkout.workers": "4"}
    fuse = profiles.merge([host("fuse.sshfs", "8", "a"), host("fuse.s3fs", "16", "b"),
                           host("fuse", "8", "c")])
    assert sorted(m.profile["class"]["fstype"] for m in fuse) == ["fuse", "fuse.s3fs",
                                                                  "fuse.sshfs"]


def test_fleet_merge_weighs_values_the_agent_kept_on_real_commands(home, small_repo, tmp_path):
    """Issue #33: two hosts of a class disagree; the one whose agent kept its value on its
    user's own commands weighs more. Without that evidence the tie keeps Git's default."""
    confirmed = {"checkout.workers": {"confirms": True, "pairs": 6, "speedup": 1.31}}
    a = make_profile(small_repo, {"checkout.workers": "4"}, fingerprint="a")
    b = dict(make_profile(small_repo, {"checkout.workers": "8"}, fingerprint="b"))
    plain = profiles.merge([a, profiles.parse(b, "b")])
    assert plain[0].profile["settings"] == {}
    b["agent"] = confirmed
    (merged,) = profiles.merge([profiles.parse(a, "a"), profiles.parse(b, "b")])
    assert merged.profile["settings"] == {"checkout.workers": "8"}
    assert merged.profile["agent"]["checkout.workers"]["pairs"] == 6
    # The merged profile is a profile: it loads.
    path = write(tmp_path, "merged.json", merged.profile)
    assert profiles.load(path)["agent"]["checkout.workers"]["confirms"] is True


def test_agent_evidence_is_aggregates_only_and_checked_as_untrusted(home, small_repo, tmp_path):
    log = [{"experiment": "decided", "key": "checkout.workers", "repo": "/secret/path",
            "value": "8", "approved_costs": [2.0, 2.2],
            "candidate_costs": [1.0, 1.1]},
           {"experiment": "decided", "key": "index.threads", "value": "2",
            "approved_costs": [1.0], "candidate_costs": [1.0]}]
    got = profiles.agent_evidence(log, {"checkout.workers": "8"})
    assert got == {"checkout.workers": {"confirms": True, "pairs": 2, "speedup": 2.0}}
    assert "secret" not in json.dumps(got)
    bad = make_profile(small_repo, {"checkout.workers": "8"})
    for evidence in ({"checkout.workers": {"confirms": "yes", "pairs": 1, "speedup": 1}},
                     {"checkout.workers": {"confirms": True, "pairs": 1, "speedup": "fast"}},
                     {"no.such": {"confirms": True, "pairs": 1, "speedup": 1.0}}):
        with pytest.raises(profiles.MalformedProfile):
            profiles.parse(dict(bad, agent=evidence), "bad")
