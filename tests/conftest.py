import os
import subprocess

import pytest

from git_tune import repogen


def _isolate(home, set_env):
    """No real user or system git config, and a throw-away HOME and caches."""
    for key in list(os.environ):
        if key.startswith("GIT_") and not key.startswith("GIT_TUNE_"):
            set_env(key, None)
    set_env("HOME", str(home))
    set_env("XDG_CONFIG_HOME", str(home / ".config"))
    set_env("XDG_CACHE_HOME", str(home / ".cache"))
    set_env("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    set_env("GIT_CONFIG_NOSYSTEM", "1")
    set_env("GIT_TUNE_AGENT_AUTOSTART", "0")     # tests step the agent by hand
    # A test's claim is what auto writes, not whether the machine was idle meanwhile;
    # the busy-host tests unset it (tests/test_terminal.py).
    set_env("GIT_TUNE_WRITE_WHEN_BUSY", "1")
    # Output is read unwrapped unless a test asks for a width (a parallel runner's workers
    # inherit one).
    set_env("COLUMNS", None)
    set_env("LINES", None)


@pytest.fixture(scope="session", autouse=True)
def isolated_session(tmp_path_factory):
    """Session-wide isolation, so session and module fixtures never see the real config."""
    saved = dict(os.environ)

    def set_env(key, value):
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

    _isolate(tmp_path_factory.mktemp("session-home"), set_env)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory, monkeypatch):
    """Every test gets its own HOME, global config and caches."""
    home = tmp_path_factory.mktemp("home")

    def set_env(key, value):
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)

    _isolate(home, set_env)
    return home


@pytest.fixture(scope="session")
def small_repo(tmp_path_factory):
    """A real repository of 999 files in 111 directories, two commits apart by 50 files."""
    root = tmp_path_factory.mktemp("repo") / "small"
    repogen.generate(str(root), repogen.RepoShape(depth=2, width=10, files=9),
                     second_commit_changes=50)
    return root


@pytest.fixture(scope="session")
def few_files_repo(tmp_path_factory):
    """A real repository of 33 files in 11 directories, two commits: for what does not
    depend on how many files git then reads (whether it parses a value)."""
    root = tmp_path_factory.mktemp("few") / "repo"
    repogen.generate(str(root), repogen.RepoShape(depth=1, width=10, files=3),
                     second_commit_changes=5)
    return root


# Scheduling only. Under `--dist loadfile` a file is one unit of work and the units go to
# the workers in collection order, so a long file collected last runs on alone at the
# stage's end. These files, the longest by `tools/test --durations`, go first.
LONGEST_FIRST = ("test_readme.py", "test_hostile.py", "test_never_touch.py", "test_auto.py",
                 "test_agent_experiment.py", "test_terminal.py", "test_agent.py",
                 "test_writers.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A test that sends this process SIGINT (the ctrl_c fixture) runs alone: in a
    parallel runner's worker, a signal that lands after the test's own handler is gone
    takes the worker down (tools/test).

    The tests that share a module-scoped fixture form one group (xdist_group), so that
    under `--dist loadgroup` one worker makes the fixture once for all of them rather
    than each worker making its own."""
    def first(item):
        name = os.path.basename(str(item.fspath))
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
    items.sort(key=first)           # stable: a file's tests keep their order
    for item in items:
        if "ctrl_c" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.alone)
        info = getattr(item, "_fixtureinfo", None)
        shared = info and any(d.scope == "module" for defs in info.name2fixturedefs.values()
                              for d in defs)
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.fixture
def ctrl_c():
    """Ctrl-C raises KeyboardInterrupt here even when the test run was started in the
    background, where a shell leaves SIGINT ignored for its children."""
    import signal
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def sigint_default():
    """preexec_fn for a child that must see Ctrl-C whatever this process inherited."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def git_out(repo, *args, **kw) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, text=True,
                          stdout=subprocess.PIPE, **kw).stdout


def bench_on(tmp_path, files: int, budget):
    """A calibration's Bench (real git, a real scratch workspace) on a generated repository
    of `files` files under tmp_path, with `budget` (measure.bench.Budget)."""
    from git_tune.advisor.measure import calibrate, gitbench
    from git_tune.advisor.measure.bench import Bench
    from git_tune.advisor.measure.record import Options
    from git_tune.probes import repo as repo_probe
    repo = tmp_path / "repo"
    repogen.generate(str(repo), repogen.RepoShape.for_files(files), limit=files)
    report = calibrate.probe_repository(str(repo), 10)
    layout = report.repository.layout
    b = Bench(gitbench.Workspace(layout, str(tmp_path / "ws")),
              repo_probe.tracked_sample(layout, n=10 ** 9), 2, "local-ssd", report.git,
              Options(budget=budget.total), budget)
    os.makedirs(b.ws.root, exist_ok=True)
    return b


def is_root() -> bool:
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="needs root (mount, drop caches)")


def _built_gits():
    """The gits tools/build-git left in the user cache (read before the tests isolate
    XDG_CACHE_HOME), plus any named in GIT_TUNE_TEST_GITS (colon-separated)."""
    import glob
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    found = sorted(glob.glob(os.path.join(cache, "git-tune", "git", "*", "bin", "git")))
    extra = [p for p in os.environ.get("GIT_TUNE_TEST_GITS", "").split(":") if p]
    return [p for p in dict.fromkeys(found + extra) if os.access(p, os.X_OK)]


BUILT_GITS = _built_gits()
SYSTEM_GIT = "git"


def git_version_of(binary):
    from git_tune.models import catalogue
    out = subprocess.run([binary, "version"], stdout=subprocess.PIPE, text=True).stdout
    return catalogue.parse_version(out)


@pytest.fixture(params=[SYSTEM_GIT] + BUILT_GITS,
                ids=lambda p: "system-git" if p == SYSTEM_GIT else "git-" + p.split("/")[-3])
def any_git(request, monkeypatch):
    """The machine's git and every built one: git-tune is run with --git PATH, and the
    test runs the same git by its full path. PATH is restored after the test."""
    monkeypatch.setenv("PATH", os.environ["PATH"])
    binary = request.param if request.param != SYSTEM_GIT else subprocess.run(
        ["sh", "-c", "command -v git"], stdout=subprocess.PIPE, text=True).stdout.strip()
    return binary


def _mounted(make):
    """A test bed for the test's length (skips where it cannot mount); afterwards its
    mount point must be gone."""
    from testbeds import BedUnavailable
    try:
        cm = make()
        mnt = cm.__enter__()
    except BedUnavailable as e:
        pytest.skip(str(e))
    try:
        yield mnt
    finally:
        cm.__exit__(None, None, None)
    with open("/proc/self/mountinfo") as f:
        assert not any(line.split()[4] == mnt for line in f), f"{mnt} still mounted"


@pytest.fixture
def hdd_bed():
    """The one-spindle bed: ext4 on a loop device over nbd, one 4 ms request at a time."""
    from testbeds import hdd
    yield from _mounted(lambda: hdd(delay_ms=4, size_mb=512))


@pytest.fixture
def latfs_bed():
    """The latency FUSE bed with NFS-like attribute caching; the test writes under
    <mount>/../backing and reads through the mount."""
    from testbeds import latfs
    yield from _mounted(latfs)
