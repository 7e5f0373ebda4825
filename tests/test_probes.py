"""Probes on fake /proc and /sys trees, and on real file systems."""
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from git_tune import repogen
from git_tune.cli import cli
from git_tune.models import catalogue, storage as storage_model
from git_tune.probes import blockdev, host, mounts
from git_tune.probes.report import probe
from git_tune.probes.scratch import PREFIX
from testbeds import BedUnavailable, bed
from tests.conftest import git_out


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# ---- cgroups on fake trees ----

def test_cgroup_v2_quota_is_found_up_the_tree(tmp_path):
    write(tmp_path, "proc/self/cgroup", "0::/user.slice/app.scope\n")
    write(tmp_path, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
    write(tmp_path, "sys/fs/cgroup/user.slice/cpu.max", "150000 100000\n")
    write(tmp_path, "sys/fs/cgroup/user.slice/app.scope/cpu.max", "max 100000\n")
    write(tmp_path, "sys/fs/cgroup/user.slice/app.scope/memory.max", "1073741824\n")
    limits = host.cgroup_limits(host.SysRoot(str(tmp_path)))
    assert (limits.version, limits.cpu_quota, limits.memory_limit) == (2, 1.5, 1 << 30)


def test_cgroup_v1_quota_and_unlimited_memory(tmp_path):
    write(tmp_path, "proc/self/cgroup",
          "4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "50000\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    write(tmp_path, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n")
    limits = host.cgroup_limits(host.SysRoot(str(tmp_path)))
    assert (limits.version, limits.cpu_quota, limits.memory_limit) == (1, 0.5, None)
    facts = host.host_facts(str(tmp_path))
    assert facts.effective_cores == 1
    assert any("quota of 0.5" in n for n in facts.notes)


def test_cgroup_pid_limits_v1_and_v2(tmp_path):
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    write(v1, "proc/self/cgroup", "8:pids:/ci/job\n3:cpu:/\n0::/\n")
    write(v1, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    write(v1, "sys/fs/cgroup/pids/ci/job/pids.max", "max\n")
    write(v1, "sys/fs/cgroup/pids/ci/pids.max", "64\n")
    write(v1, "sys/fs/cgroup/pids/ci/pids.current", "60\n")
    limits = host.cgroup_limits(host.SysRoot(str(v1)))
    assert (limits.pids_max, limits.pids_headroom) == (64, 4)
    assert any("pid limit of 64" in n for n in host.host_facts(str(v1)).notes)
    write(v2, "proc/self/cgroup", "0::/job\n")
    write(v2, "sys/fs/cgroup/cgroup.controllers", "cpu pids\n")
    write(v2, "sys/fs/cgroup/job/pids.max", "20\n")
    write(v2, "sys/fs/cgroup/job/pids.current", "3\n")
    limits = host.cgroup_limits(host.SysRoot(str(v2)))
    assert (limits.version, limits.pids_max, limits.pids_headroom) == (2, 20, 17)


@pytest.mark.parametrize("text", ["-5", "0", "12x", "\x00\xff", "", "max 100000",
                                  "-1 100000", "50000 -100000"])
@pytest.mark.parametrize("version", [1, 2])
def test_a_cgroup_limit_that_cannot_be_read_is_no_limit(tmp_path, text, version):
    """Bad input: a memory or CPU limit that holds no number above zero reads as no
    limit, so the host's available memory and CPUs stand, and no note claims one."""
    if version == 2:
        write(tmp_path, "proc/self/cgroup", "0::/job\n")
        write(tmp_path, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
        write(tmp_path, "sys/fs/cgroup/job/memory.max", text)
        write(tmp_path, "sys/fs/cgroup/job/cpu.max", text)
    else:
        write(tmp_path, "proc/self/cgroup", "4:memory:/job\n3:cpu:/job\n0::/\n")
        write(tmp_path, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", text)
        write(tmp_path, "sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", text.split(" ")[0])
        write(tmp_path, "sys/fs/cgroup/cpu/job/cpu.cfs_period_us", text.split(" ")[-1])
    limits = host.cgroup_limits(host.SysRoot(str(tmp_path)))
    assert (limits.version, limits.memory_limit, limits.cpu_quota) == (version, None, None)
    facts = host.host_facts(str(tmp_path))
    assert facts.memory_limit is None and facts.memory_available > 0
    assert facts.effective_cores == len(os.sched_getaffinity(0))
    assert not any("memory limit" in n or "quota" in n for n in facts.notes), facts.notes


def test_no_cgroup_no_sys(tmp_path):
    facts = host.host_facts(str(tmp_path))  # an empty root: no /proc, no /sys
    assert facts.cgroup.version is None and facts.effective_cores >= 1


def test_effective_cores_match_nproc():
    if not shutil.which("nproc"):
        pytest.skip("no nproc")
    facts = host.host_facts()
    nproc = int(subprocess.run(["nproc"], stdout=subprocess.PIPE, text=True).stdout)
    if facts.cgroup.cpu_quota is None:
        assert facts.effective_cores == nproc
    else:
        assert facts.effective_cores <= nproc


# ---- block devices on fake trees ----

def make_dev(root, name, majmin, node_dir, rotational=None, partition=False, slaves=(),
             backing=None):
    node = root / "sys/devices" / node_dir / name
    node.mkdir(parents=True)
    (node / "dev").write_text(majmin + "\n")
    (node / "size").write_text("2048\n")
    if rotational is not None:
        (node / "queue").mkdir()
        (node / "queue/rotational").write_text(f"{int(rotational)}\n")
        (node / "queue/scheduler").write_text("none [mq-deadline]\n")
    if partition:
        (node / "partition").write_text("1\n")
    if slaves:
        (node / "slaves").mkdir()
        for s in slaves:
            (node / "slaves" / s).mkdir()
    if backing:
        (node / "loop").mkdir()
        (node / "loop/backing_file").write_text(backing + "\n")
    for d in ("sys/dev/block", "sys/class/block"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.symlink(node, root / "sys/dev/block" / majmin)
    os.symlink(node, root / "sys/class/block" / name)
    return node


def test_partition_resolves_to_its_disk(tmp_path):
    make_dev(tmp_path, "sda", "8:0", "pci/host0", rotational=True)
    make_dev(tmp_path, "sda1", "8:1", "pci/host0/sda", partition=True)
    d = blockdev.resolve((8, 1), str(tmp_path))
    assert d.kind == "partition" and [l.name for l in d.leaves()] == ["sda"]
    assert d.leaves()[0].rotational is True and d.leaves()[0].scheduler == "mq-deadline"


def test_dm_and_md_resolve_through_slaves(tmp_path):
    make_dev(tmp_path, "nvme0n1", "259:0", "pci/nvme", rotational=False)
    make_dev(tmp_path, "sdb", "8:16", "pci/host1", rotational=True)
    make_dev(tmp_path, "md0", "9:0", "virtual/block", rotational=False, slaves=("nvme0n1", "sdb"))
    make_dev(tmp_path, "dm-0", "253:0", "virtual/block", rotational=False, slaves=("md0",))
    d = blockdev.resolve((253, 0), str(tmp_path))
    assert d.kind == "dm" and d.slaves[0].kind == "md"
    assert sorted(l.name for l in d.leaves()) == ["nvme0n1", "sdb"]
    assert any(l.rotational for l in d.leaves())


def test_loop_reports_its_backing_file(tmp_path):
    make_dev(tmp_path, "loop3", "7:3", "virtual/block", rotational=False, backing="/images/a.img")
    d = blockdev.resolve((7, 3), str(tmp_path))
    assert d.kind == "loop" and d.backing_file == "/images/a.img"


def test_missing_device_is_none(tmp_path):
    assert blockdev.resolve((0, 42), str(tmp_path)) is None


# ---- mountinfo ----

MOUNTINFO = r"""22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 22 0:50 / /home/my\040dir rw,nosuid - nfs4 server:/export rw,vers=4.1,rsize=1048576,lookupcache=pos,actimeo=3,nconnect=8,proto=tcp
41 22 0:51 / /mnt/lat rw - fuse.gittune-lat gittune-lat rw,user_id=0
42 22 8:1 /sub /bind rw - ext4 /dev/sda1 rw
"""


def test_mountinfo_options_and_escapes():
    ms = mounts.parse_mountinfo(MOUNTINFO)
    nfs = ms[1]
    assert nfs.mount_point == "/home/my dir" and nfs.fstype == "nfs4"
    assert nfs.network_options() == {"vers": "4.1", "rsize": "1048576", "lookupcache": "pos",
                                     "actimeo": "3", "nconnect": "8", "proto": "tcp"}
    assert ms[2].base_type == "fuse" and ms[2].subtype == "gittune-lat"
    assert mounts.find_mount("/home/my dir/x", ms, dev=(0, 50)).mount_id == 40
    assert mounts.find_mount("/bind/x", ms, dev=(8, 1)).mount_id == 42
    assert mounts.find_mount("/etc", ms, dev=(8, 1)).mount_id == 22


# ---- classification rules ----

def lat(**ms):
    return {k: {"count": 10, "p50": v / 1e3} for k, v in ms.items()}


@pytest.mark.parametrize("fstype,latency,rot,want", [
    ("tmpfs", lat(fsync=0.001), None, "memory"),
    ("nfs4", lat(fsync=2, lstat_miss=0.5), None, "network"),
    ("fuse.gittune-lat", lat(fsync=1), None, "network"),
    ("ext4", lat(fsync=0.3, cold_read=0.1), True, "local-ssd"),
    ("ext4", lat(fsync=9, cold_read=7), False, "local-hdd"),
    ("ext4", lat(fsync=9, cold_read=0.1), None, "local-ssd"),   # busy flash, not a spindle
    ("ext4", lat(fsync=9), False, "local-hdd"),                  # no cold read: fsync decides
    ("xfs", lat(fsync=0.01, cold_read=0.01), None, "memory"),
    ("ext4", {}, True, "unknown"),
])
def test_classification(fstype, latency, rot, want):
    c = storage_model.classify(fstype, latency, rot)
    assert c.storage_class == want
    if fstype == "ext4" and rot is True and want == "local-ssd":
        assert any("rotational=1 but answers like flash" in n for n in c.notes)
    if want == "local-hdd":
        assert any("rotational=0" in n for n in c.notes)


# ---- the whole probe on real repositories and file systems ----

def no_scratch_left(*dirs):
    for d in dirs:
        for root, names, files in os.walk(d):
            assert not any(n.startswith(PREFIX) for n in names + files), root


def test_probe_real_repository(small_repo):
    (small_repo / "untracked-a").write_text("a")
    try:
        r = probe(str(small_repo))
    finally:
        (small_repo / "untracked-a").unlink()
    rep = r.repository
    assert rep.tracked_files == len(git_out(small_repo, "ls-files").split()) == 999
    assert rep.directories == 110 and rep.max_depth == 2
    assert rep.untracked_estimate == 1
    assert r.same_file_system is True
    s = r.storage["worktree"]
    assert s.measured == "scratch" and s.latency["fsync"]["count"] == 5
    assert r.cache.state in ("hot", "warm", "cold")
    assert r.git.version and "checkout.workers" in r.git.keys_understood
    # Which keys count as read follows this git's version (2.39 lacks skipHash, 2.47 has it).
    skip_hash = catalogue.lookup("index.skipHash")
    read = skip_hash.available(catalogue.parse_version(r.git.version))
    assert ("index.skipHash" in r.git.keys_understood) == read
    assert ("index.skipHash" in r.git.keys_not_understood) == (not read)
    no_scratch_left(small_repo, small_repo.parent)


def test_config_values_carry_scope_and_origin(small_repo, isolated_git):
    subprocess.run(["git", "config", "--global", "checkout.workers", "3"], check=True)
    r = probe(str(small_repo))
    (setting,) = r.git.values["checkout.workers"]
    assert setting["value"] == "3" and setting["scope"] == "global"
    assert setting["origin"] == f"file:{isolated_git / '.gitconfig'}"


def test_probe_outside_repository_and_bare(tmp_path):
    r = probe(str(tmp_path))
    assert r.repository is None and "not inside a git repository" in r.notes[0]
    no_scratch_left(tmp_path)
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    r = probe(str(bare))
    assert r.repository.layout.bare is True and "worktree" not in r.storage


def test_cli_probe_json_schema_and_exit_codes(small_repo):
    runner = CliRunner()
    res = runner.invoke(cli, ["probe", "--repo", str(small_repo), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["schema"] == "git-tune-probe/1"
    assert set(data) == {"schema", "git_tune_version", "path", "host", "repository", "storage",
                         "same_file_system", "cache", "git", "timings", "notes", "measured_peak"}
    res = runner.invoke(cli, ["probe", "--repo", str(small_repo / "nope")])
    assert res.exit_code == 2 and "does not exist" in res.stderr


def test_probe_without_git_on_path(small_repo, tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "git_tune", "probe", "--repo", str(small_repo),
                           "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["git"]["version"] is None and "git is not on PATH" in data["git"]["notes"][0]
    assert data["repository"] is None


def _bed_or_skip(kind, **kw):
    try:
        return bed(kind, **kw)
    except BedUnavailable as e:
        pytest.skip(str(e))


def _enter(kind, **kw):
    from testbeds.mount import available
    reason = available(kind)
    if reason:
        pytest.skip(reason)
    return bed(kind, **kw)


def fstype_from_tools(path):
    findmnt = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", path],
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    stat_f = subprocess.run(["stat", "-f", "-c", "%T", path], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    return findmnt, stat_f


@pytest.mark.parametrize("kind", ["tmpfs", "ext2", "ext4", "xfs"])
def test_real_file_systems_are_typed_and_classed(kind):
    with _enter(kind) as mnt:
        r = probe(mnt)
        s = r.storage["worktree"]
        assert s.fstype == kind
        findmnt, stat_f = fstype_from_tools(mnt)
        assert findmnt == kind
        assert stat_f.split("/")[0] in (kind, "ext2")  # stat -f says ext2/ext3 for ext4
        want = "memory" if kind == "tmpfs" else ("local-ssd", "local-hdd")
        assert s.storage_class in (want if isinstance(want, tuple) else (want,))
        no_scratch_left(mnt)


def test_read_only_file_system_reports_and_writes_nothing(small_repo):
    with _enter("tmpfs") as mnt:
        repo = os.path.join(mnt, "r")
        shutil.copytree(small_repo, repo)
        from testbeds.mount import remount
        remount(mnt, read_only=True)
        try:
            runner = CliRunner()
            res = runner.invoke(cli, ["probe", "--repo", repo, "--json"])
            assert res.exit_code == 0, res.output
            data = json.loads(res.stdout)
            s = data["storage"]["worktree"]
            assert s["read_only"] and s["measured"] == "read-only sample"
            assert any("read-only" in n for n in s["notes"])
            assert s["latency"]["lstat_hit"]["count"] > 0
        finally:
            remount(mnt, read_only=False)


def test_probe_names_the_stat_fields_a_copy_changed_and_what_ends_the_rehash(small_repo,
                                                                             tmp_path):
    """A copy that kept mtimes (cp -a) has new inodes and ctimes: every git status would
    re-read and hash every file. The probe says which fields differ and what fixes it;
    once git has written the index again (one git status), it says nothing."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(small_repo), str(copy)], check=True)
    r = probe(str(copy))
    stat = r.repository.stat_data
    assert stat["sampled"] > 100 and stat["changed"] == stat["sampled"], stat
    assert "inode" in stat["fields"] and "mtime" not in stat["fields"], stat
    note = next(n for n in r.repository.notes if "no longer match" in n)
    assert "core.checkStat=minimal" in note and "git update-index --refresh" in note
    subprocess.run(["git", "-C", str(copy), "status", "--porcelain"], check=True,
                   stdout=subprocess.DEVNULL)
    again = probe(str(copy)).repository
    assert again.stat_data["changed"] == 0 and again.stat_data["diagnosis"] is None
    assert not any("no longer match" in n for n in again.notes)
    assert probe(str(small_repo)).repository.stat_data["diagnosis"] is None


def test_lookups_without_a_scratch_stay_within_the_allowance(latfs_bed):
    """#30: where nothing may be written (a read-only file system, or one still writing
    back), only lookups of the sample are timed: as many as a pilot says fit the
    allowance, not the whole sample (on the hdd bed at 100,000 files the whole sample took
    12.9 s of a 20 s budget's 2 s probe)."""
    from git_tune.probes import storage
    backing = os.path.join(os.path.dirname(latfs_bed), "backing")
    names = [f"d{i % 10}/f{i}" for i in range(600)]
    for n in names:
        os.makedirs(os.path.join(backing, os.path.dirname(n)), exist_ok=True)
        open(os.path.join(backing, n), "w").close()
    whole = storage.probe_storage(latfs_bed, None, names, unwritten="test")
    assert whole.latency["lstat_hit"]["count"] == len(names)
    # A third of what the whole sample's lookups took (half of it for the hits): room for
    # some of them on a loaded machine, never for all.
    took = whole.latency["lstat_hit"]["count"] * whole.latency["lstat_hit"]["mean"]
    cut = storage.probe_storage(latfs_bed, None, names, allowance=took / 3, unwritten="test")
    counted = cut.latency["lstat_hit"]["count"]
    assert 0 < counted < len(names) and cut.measured == "read-only sample", counted
    # An allowance the pilot's lookups alone overrun (4 of its 16): a call stopped by it
    # keeps the lookups it made; none of them fails the measurement.
    tight = storage.probe_storage(latfs_bed, None, names, unwritten="test",
                                  allowance=4 * whole.latency["lstat_hit"]["mean"])
    assert not any("failed" in n for n in tight.notes), tight.notes
    assert all(0 < v["count"] < len(names) for v in tight.latency.values()), tight.latency


def test_a_stray_promisor_file_makes_no_partial_clone(tmp_path):
    """git.git copied from a mirror keeps a `.promisor` beside its pack: git treats the
    repository as whole (no promisor remote, no extensions.partialClone), and so does
    git-tune; a remote marked `promisor = true` makes it partial."""
    from git_tune.probes import repo as repo_probe
    root = tmp_path / "r"
    repogen.generate(str(root), repogen.RepoShape(depth=1, width=2, files=5))
    subprocess.run(["git", "-C", str(root), "repack", "-adq"], check=True)
    (pack,) = glob.glob(str(root / ".git" / "objects" / "pack" / "*.pack"))
    open(pack[:-len(".pack")] + ".promisor", "w").close()
    layout = repo_probe.locate(str(root))
    assert not repo_probe.partial_clone(layout)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "remote.origin.promisor", "true"],
                   check=True)
    assert repo_probe.partial_clone(layout)


def test_a_repository_is_located_as_git_answers_each_question_newlines_and_all(tmp_path):
    """locate() asks rev-parse everything at once; where a path holds a newline (more
    lines than questions) it asks each on its own. Either way the layout is git's own
    answers, and the work trees counted are those `git worktree list` lists (a linked
    one whose gitdir file is gone is not)."""
    from git_tune.probes import repo as repo_probe

    def one_by_one(path, *args):
        return subprocess.run(["git", "rev-parse", *args], cwd=path, check=True,
                              capture_output=True, text=True).stdout[:-1]

    plain = repogen.generate(str(tmp_path / "plain"), repogen.RepoShape.for_files(20), limit=20)
    newline = repogen.generate(str(tmp_path / "new\nline"), repogen.RepoShape.for_files(20),
                               limit=20)
    for wt in ("one", "two"):
        subprocess.run(["git", "-C", plain, "worktree", "add", "-q", "--detach",
                        str(tmp_path / wt)], check=True)
    os.remove(os.path.join(plain, ".git", "worktrees", "two", "gitdir"))
    bare = str(tmp_path / "bare.git")
    subprocess.run(["git", "clone", "-q", "--bare", plain, bare], check=True)
    for path in (plain, newline, str(tmp_path / "one"), bare):
        layout = repo_probe.locate(path)
        assert layout.git_dir == one_by_one(path, "--absolute-git-dir")
        assert layout.common_dir == os.path.abspath(os.path.join(
            path, one_by_one(path, "--git-common-dir")))
        assert layout.index_file == os.path.abspath(os.path.join(
            path, one_by_one(path, "--git-path", "index")))
        assert layout.bare == (path == bare)
        assert layout.worktree == (None if path == bare else one_by_one(path, "--show-toplevel"))
        listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=path,
                                check=True, capture_output=True, text=True).stdout
        assert repo_probe._worktrees(layout) == listed.count("worktree ")
    assert repo_probe._worktrees(repo_probe.locate(plain)) == 2


def test_the_commands_a_repositorys_config_makes_git_run_are_named(tmp_path):
    """The probe names what timing git there runs: core.fsmonitor's last value (not
    where it is false), each filter driver's command and the hooks git would start."""
    from git_tune.probes import repo as repo_probe
    repo = repogen.generate(str(tmp_path / "r"), repogen.RepoShape.for_files(20), limit=20)

    def config(*args):
        subprocess.run(["git", "-C", repo, "config", *args], check=True)
    config("core.fsmonitor", "false")
    layout = repo_probe.locate(repo)
    assert repo_probe.repository_commands(layout) == []
    config("--add", "core.fsmonitor", "/opt/watch-it")
    config("filter.Big.smudge", "big-smudge %f")
    hook = os.path.join(repo, ".git", "hooks", "post-checkout")
    os.makedirs(os.path.dirname(hook), exist_ok=True)
    with open(hook, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(hook, 0o755)
    assert repo_probe.repository_commands(layout) == [
        "core.fsmonitor = /opt/watch-it", f"hook {hook}", "filter.Big.smudge = big-smudge %f"]
