"""The suite's own scheduling (tools/test, tests/conftest.py), with the pytest and
pytest-xdist setup.cfg installs: a module's fixture is made once where its tests share it."""
import os
import subprocess
import sys

CONFTEST = os.path.join(os.path.dirname(__file__), "conftest.py")

# Four tests on one module fixture, four without: under a round-robin of two workers
# the fixture's tests land on both.
MODULE = '''
import os
import pytest

@pytest.fixture(scope="module")
def made():
    with open(os.environ["MADE_LOG"], "a") as f:
        f.write(f"{os.getpid()}\\n")

@pytest.mark.parametrize("i", range(4))
def test_shared(made, i):
    pass

@pytest.mark.parametrize("i", range(4))
def test_alone(i):
    pass
'''


def test_a_modules_fixture_is_made_once_under_the_timed_stages_distribution(tmp_path):
    """tools/test runs the timed tests with `--dist loadgroup`; conftest.py puts the tests
    of a module-scoped fixture in one group, so one worker makes it once for them all
    (pytest 9.2 with pytest-xdist 3.8 drops the group: pytest-dev/pytest-xdist#1386)."""
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {CONFTEST!r})\n"
        "suite = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(suite)\n"
        "pytest_collection_modifyitems = suite.pytest_collection_modifyitems\n")
    (tmp_path / "test_group.py").write_text(MODULE)
    log = tmp_path / "made.log"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-c", os.devnull, "--rootdir", str(tmp_path),
         str(tmp_path / "test_group.py")],
        cwd=tmp_path, env={**os.environ, "MADE_LOG": str(log)}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert run.returncode == 0, run.stdout
    assert "8 passed" in run.stdout, run.stdout
    assert len(log.read_text().split()) == 1, (log.read_text(), run.stdout)
