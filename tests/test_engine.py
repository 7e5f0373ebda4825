"""The real engine library on real files and real Git index files."""
import os
import random
import shutil
import signal
import subprocess
import threading
import time

import pytest

from git_tune import engine
from git_tune.errors import EngineError, EngineLoadError
from git_tune.engine import _lib
from tests.conftest import git_out


def test_abi_and_path():
    assert engine.version() == _lib.ABI_VERSION
    assert engine.library_path().endswith("libgittune.so")


def test_wrong_library_named_in_error(tmp_path, monkeypatch):
    # A real shared library of another ABI: libc has none of our symbols.
    monkeypatch.setattr(_lib, "_lib", None)
    monkeypatch.setenv("GIT_TUNE_ENGINE", "libc.so.6")
    with pytest.raises(EngineLoadError, match="'libc.so.6' lacks gt_"):
        _lib.lib()
    monkeypatch.setenv("GIT_TUNE_ENGINE", str(tmp_path / "missing.so"))
    with pytest.raises(EngineLoadError, match="missing.so"):
        _lib.lib()
    monkeypatch.delenv("GIT_TUNE_ENGINE")
    monkeypatch.setattr(_lib, "_lib", None)
    assert _lib.lib() is not None


def test_preload_counts_hits_and_misses(small_repo):
    files = git_out(small_repo, "ls-files").split()
    listing = files + [f + ".missing" for f in files[:100]]
    for split in (engine.SPLIT_SLICES, engine.SPLIT_STREAMS):
        r = engine.preload(listing, base=str(small_repo), threads=3, split=split,
                           io_streams=2, batch=50, record_latency=True)
        assert r.done == len(listing)
        assert r.errors == 100 and r.errors_by_errno == {2: 100}
        assert len(r.threads) == 3 and all(t.end >= t.start for t in r.threads)
        assert sum(t.ops for t in r.threads) == len(listing)
        assert r.latency.count == len(listing)
        assert r.latency.min <= r.latency.p50 <= r.latency.p99 <= r.latency.max


def test_preload_rejects_bad_arguments():
    with pytest.raises(EngineError) as e:
        engine.preload(["a"], threads=0)
    assert e.value.name == "invalid-argument" and "threads must be" in e.value.message


def test_checkout_writes_and_removes(tmp_path):
    paths = [f"d{i % 7}/sub/f{i}" for i in range(300)]
    sizes = [i * 13 for i in range(300)]
    r = engine.checkout(tmp_path, paths, sizes, workers=4, threshold=100)
    assert r.files == 300 and r.bytes == sum(sizes) and r.workers_used == 4
    assert sorted(w.ops for w in r.workers) == [75, 75, 75, 75]
    assert list(tmp_path.iterdir()) == []
    r = engine.checkout(tmp_path, paths, sizes, workers=4, threshold=1000, keep=True)
    assert r.workers_used == 1
    assert (tmp_path / "d3/sub/f3").stat().st_size == 39


def test_checkout_keep_dirs_leaves_directories_for_the_next_run(tmp_path):
    """keep_dirs: the files go, the directories stay, and a run after it on the same
    paths makes none (the sweep makes a sample's directories once, not per count)."""
    paths = [f"d{i % 7}/sub{i % 3}/deep/f{i}" for i in range(60)]
    r = engine.checkout(tmp_path, paths, [5] * 60, workers=2, threshold=0, keep_dirs=True)
    assert r.files == 60 and r.dirs_created == 7 + 21 + 21
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    r = engine.checkout(tmp_path, paths, [5] * 60, workers=4, threshold=0, keep_dirs=True)
    assert r.files == 60 and r.dirs_created == 0
    assert len(list(tmp_path.rglob("*"))) == 49


def test_checkout_removes_what_it_made_many_at_a_time_and_nothing_else(tmp_path):
    """Thousands of files at depths 1 to 5: removal prices itself by its first unlink
    and goes to threads (it does on any storage at this count); every file and directory
    the engine made is gone, deepest first, and a directory it found, with a file of
    the user's in it, stays."""
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "users").write_text("kept")
    paths = ["/".join(f"d{(i + k) % 4}" for k in range(1 + i % 5)) + f"/f{i}"
             for i in range(3000)]
    r = engine.checkout(tmp_path, paths, [8] * len(paths), workers=1, threshold=0)
    assert r.files == 3000 and r.dirs_created > 0
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == \
        ["d1", "d1/users"]


def test_checkout_makes_directories_before_the_workers(tmp_path):
    """Git's main process makes an entry's leading directories and its workers only
    write files: the engine makes every directory on the calling thread before a worker
    starts, times it apart, and its wall is the workers' alone."""
    paths = [f"d{i % 8}/e{i % 3}/f{i}" for i in range(200)]
    r = engine.checkout(tmp_path, paths, [8] * len(paths), workers=4, threshold=0)
    assert r.files == 200 and r.dirs_created == 8 + 24 and r.dirs > 0
    assert min(t.start for t in r.workers) >= r.dirs
    assert list(tmp_path.iterdir()) == []


def test_checkout_full_disk_is_an_error_and_cleans_up(tmp_path):
    # /dev/full-like behaviour from a real tiny tmpfs needs root; a byte
    # budget is the portable bound and must refuse before writing.
    with pytest.raises(EngineError) as e:
        engine.checkout(tmp_path, ["a", "b"], [10, 10],
                        limits=engine.Limits(byte_budget=15))
    assert e.value.name == "over-budget"
    assert list(tmp_path.iterdir()) == []


def _make_index(repo, version, threads=None):
    args = ["-c", f"index.threads={threads}"] if threads else []
    subprocess.run(["git", "-C", str(repo), *args, "update-index", "--force-write-index",
                    "--index-version", str(version)], check=True)
    return repo / ".git" / "index"


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("alloc", [engine.ALLOC_MALLOC, engine.ALLOC_POOL])
def test_reads_real_git_indexes(small_repo, tmp_path, version, alloc):
    repo = tmp_path / "r"
    shutil.copytree(small_repo, repo)
    if version == 3:  # v3 is only kept when an entry has extended flags
        (repo / "new-file").write_text("x")
        subprocess.run(["git", "-C", str(repo), "add", "-N", "new-file"], check=True)
    index = _make_index(repo, version, threads=4)
    names = git_out(repo, "ls-files", "-z").split("\0")[:-1]
    raw = index.read_bytes()
    for threads in (1, 4):
        r = engine.index_read(index, threads=threads, alloc=alloc)
        assert r.version == version == int.from_bytes(raw[4:8], "big")
        assert r.entries == len(names)
        assert r.name_bytes == sum(len(n.encode()) for n in names)
        assert r.has_ieot == (b"IEOT" in raw) and r.has_eoie == (b"EOIE" in raw)
        assert r.has_ieot, "git -c index.threads=4 writes an offset table"
        assert r.threads_used == (min(threads, r.ieot_blocks) if threads > 1 else 1)
        if alloc == engine.ALLOC_MALLOC:
            assert r.allocations == r.entries              # one malloc() per entry
        else:
            # The pool carves entries from a few blocks (one or more per loader thread).
            assert 1 <= r.allocations <= r.threads_used * 4 < r.entries, r.allocations


def test_index_extensions_are_listed(small_repo, tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(small_repo, repo)
    subprocess.run(["git", "-C", str(repo), "-c", "core.untrackedCache=true", "status"],
                   check=True, stdout=subprocess.DEVNULL)
    r = engine.index_read(repo / ".git" / "index")
    assert "TREE" in r.extensions and "UNTR" in r.extensions


def _git_loaders(value: int) -> int:
    """The threads git 2.55 loads the entries on with index.threads=value, transcribed from
    read-cache.c: the writer records `value` offset-table blocks (do_write_index); the
    reader gives one thread to the extensions (do_read_index, EOIE), uses the table only
    with more than one thread left, and hands each of them DIV_ROUND_UP(blocks, threads)
    blocks in turn, the last ones none (load_cache_entries_threaded)."""
    threads, blocks = value - 1, value
    if threads <= 1:
        return 1
    threads = min(threads, blocks)
    each, start, working = -(-blocks // threads), 0, 0
    for _ in range(threads):
        got = each if start + each <= blocks else blocks - start
        working += got > 0
        start += got
    return working


def test_the_engines_thread_count_is_git_s_with_the_value_that_loads_on_as_many():
    """The index sweep times the engine on n loader threads; the trial gives git the least
    index.threads with which git loads on n: not n (2 loads on one, 4 on two)."""
    from git_tune.advisor.keys import index
    for n in range(1, 33):
        value = int(index.git_value(n))
        assert _git_loaders(value) == n, (n, value)
        assert all(_git_loaders(v) < n for v in range(2, value)), (n, value)
    assert all(index.loaders(v) == _git_loaders(v) for v in range(1, 65))


@pytest.mark.parametrize("version,blocks", [(2, 0), (4, 0), (2, 3), (4, 5)])
def test_synthetic_index_is_read_by_real_git(tmp_path, version, blocks):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    index = repo / ".git" / "index"
    engine.index_write_synthetic(index, entries=5000, version=version, depth=3, width=10,
                                 files=9, ieot_blocks=blocks)
    listed = git_out(repo, "-c", "index.threads=4", "ls-files").splitlines()
    assert len(set(listed)) == 5000 and listed == sorted(listed)
    assert all(name.startswith(("dir", "file")) for name in listed)
    assert git_out(repo, "ls-files", "-s", listed[0]).split()[1].startswith("e69de29")
    r = engine.index_read(index, threads=4)
    assert (r.entries, r.version, r.has_ieot) == (5000, version, blocks > 1)
    assert r.name_bytes == engine.index_read(index, threads=1).name_bytes == sum(map(len, listed))
    # git verifies the checksum and the EOIE hash too: rewrite and compare.
    subprocess.run(["git", "-C", str(repo), "update-index", "--index-version", str(version)],
                   check=True)
    assert engine.index_read(index).entries == 5000


CORRUPTIONS = {
    "truncated": lambda b: b[: len(b) // 2],
    "signature": lambda b: b"XXXX" + b[4:],
    "version": lambda b: b[:4] + (7).to_bytes(4, "big") + b[8:],
    "count": lambda b: b[:8] + (10 ** 8).to_bytes(4, "big") + b[12:],
    "checksum": lambda b: b[:-1] + bytes([b[-1] ^ 1]),
    "empty": lambda b: b"",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_index_is_a_clear_error(small_repo, tmp_path, kind):
    data = CORRUPTIONS[kind]((small_repo / ".git" / "index").read_bytes())
    bad = tmp_path / "index"
    bad.write_bytes(data)
    with pytest.raises(EngineError) as e:
        engine.index_read(bad)
    assert e.value.name == "corrupt"
    assert e.value.message and e.value.message == str(e.value)


def test_errors_from_many_threads_keep_their_own_message(tmp_path):
    files = []
    for i in range(8):
        f = tmp_path / f"idx{i}"
        f.write_bytes(b"DIRC" + (10 + i).to_bytes(4, "big") + bytes(40))
        files.append(f)
    messages = {}

    def read(i):
        for _ in range(50):
            try:
                engine.index_read(files[i])
            except EngineError as e:
                messages.setdefault(i, set()).add(e.message)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: m for i, m in messages.items()} == {
        i: {f"bad index version {10 + i}"} for i in range(8)}


def test_smallfile_and_latency_leave_nothing(tmp_path):
    r = engine.smallfile(tmp_path, files=500, file_size=4096, per_dir=10, sync=True)
    assert (r.files, r.dirs, r.bytes) == (500, 50, 500 * 4096)
    lat = engine.latency(tmp_path, samples=50, fsync_samples=2)
    assert lat["lstat_miss"].count == 50 and lat["fsync"].count == 2
    assert list(tmp_path.iterdir()) == []


def test_deadline_stops_a_long_call(tmp_path):
    start = time.monotonic()
    with pytest.raises(EngineError) as e:
        engine.smallfile(tmp_path, files=10 ** 7, file_size=0, per_dir=100,
                         limits=engine.Limits(timeout=0.2))
    assert e.value.name == "timed-out"
    assert time.monotonic() - start < 5
    assert list(tmp_path.iterdir()) == []


def _interrupt_after(seconds, fired):
    """A timer that sends this process SIGINT `seconds` after it is started. Start it inside
    the `pytest.raises` block: Thread.start waits for the new thread, and on a loaded
    machine a short timer's signal lands in that wait, outside the block."""
    def interrupt():
        fired["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    return threading.Timer(seconds, interrupt)


def test_ctrl_c_stops_a_sweep_promptly(small_repo, ctrl_c):
    # Behaviour, not speed: the kernels poll their cancel flag between entries, so the
    # sweep stops long before its seconds of work end. The bound is ~10x what an idle
    # machine shows, so a loaded 2-core runner does not fail it.
    listing = git_out(small_repo, "ls-files").split() * 3000  # ~3M lstat calls, seconds
    fired = {}
    timer = _interrupt_after(0.3, fired)
    with pytest.raises(KeyboardInterrupt):
        timer.start()
        engine.preload(listing, base=str(small_repo), threads=2)
    stopped = time.monotonic() - fired["at"]
    timer.join()
    assert stopped < 1.0, f"took {stopped:.3f}s to stop"


def test_ctrl_c_removes_what_the_kernel_created(tmp_path, ctrl_c):
    fired = {}
    timer = _interrupt_after(0.3, fired)
    with pytest.raises(KeyboardInterrupt):
        timer.start()
        engine.smallfile(tmp_path, files=10 ** 7, file_size=0, per_dir=100)
    timer.join()
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_at_any_moment_of_a_call_leaves_no_engine_running(tmp_path, ctrl_c):
    """A Ctrl-C while the helper thread was being started escaped the cancel, and the
    engine went on writing into a scratch directory git-tune was removing (an empty
    `checkout` directory was left behind). Many short calls, interrupted at random
    moments: when KeyboardInterrupt surfaces, the engine has stopped and cleaned up."""
    rng = random.Random(7)
    paths, sizes = [f"d/f{i}" for i in range(4)], [10] * 4
    for _ in range(40):
        fired = {}
        timer = _interrupt_after(rng.uniform(0.0, 0.02), fired)
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            while True:
                engine.checkout(str(tmp_path), paths, sizes, workers=1, threshold=0)
        timer.join()
        assert not [t for t in threading.enumerate() if t.name == "git-tune-engine"]
        assert list(tmp_path.iterdir()) == []


def test_index_describes_the_tree(small_repo, tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(small_repo, repo)
    os.symlink("file0", repo / "link")
    subprocess.run(["git", "-C", str(repo), "add", "link"], check=True)
    names = git_out(repo, "ls-files").split()
    dirs = {str(p) for n in names for p in __import__("pathlib").PurePosixPath(n).parents
            if str(p) != "."}
    r = engine.index_read(repo / ".git" / "index")
    assert r.dirs == len(dirs) == 110
    assert r.max_depth == max(n.count("/") for n in names) == 2
    assert sum(r.size_histogram) == r.entries and r.symlinks == 1
    sizes = [(repo / n).lstat().st_size for n in names]
    assert r.size_histogram[0] == sum(1 for s in sizes if s == 0)
    big = sum(1 for s in sizes if 4096 <= s < 8192)
    assert r.size_histogram[13] == big


def test_fs_info_and_residency(tmp_path):
    info = engine.fs_info(tmp_path)
    st = os.stat(tmp_path)
    assert info.dev == (os.major(st.st_dev), os.minor(st.st_dev))
    assert not info.read_only and info.block_size > 0
    f = tmp_path / "data"
    f.write_bytes(b"x" * (1 << 20))
    r = engine.cache_residency([f, tmp_path / "missing"])
    assert r.bytes == 1 << 20 and r.pages == (1 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert r.resident == r.pages  # just written: in the page cache
    fd = os.open(f, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    assert engine.cache_residency([f]).resident < r.pages
    with pytest.raises(EngineError):
        engine.fs_info(tmp_path / "missing")
