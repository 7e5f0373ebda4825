import os
import subprocess

import pytest

from git_tune.advisor import repogen


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory, monkeypatch):
    """Every test gets its own HOME and no global or system git config."""
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith("GIT_") and key != "GIT_TUNE_ENGINE":
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home


@pytest.fixture(scope="session")
def small_repo(tmp_path_factory):
    """A real repository of 999 files in 111 directories, two commits apart by 50 files."""
    root = tmp_path_factory.mktemp("repo") / "small"
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    os.environ.update(env)
    repogen.generate(str(root), repogen.RepoShape(depth=2, width=10, files=9),
                     second_commit_changes=50)
    return root


def git_out(repo, *args, **kw) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, text=True,
                          stdout=subprocess.PIPE, **kw).stdout


def is_root() -> bool:
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="needs root (mount, drop caches)")
