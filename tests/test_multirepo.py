"""Per-repository values through includeIf "gitdir:..." blocks, with real git."""
import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from git_tune.advisor.write import configwrite, scopes
from git_tune.advisor.fleet import multirepo
from git_tune.cli import cli


@pytest.fixture
def home(isolated_git, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_STATE_DIR", str(isolated_git / "state"))
    return isolated_git


@pytest.fixture
def two_repos(small_repo, tmp_path):
    a, b = tmp_path / "work" / "a", tmp_path / "work" / "nested" / "b"
    shutil.copytree(small_repo, a)
    shutil.copytree(small_repo, b)
    return a, b


def get(repo, key):
    p = subprocess.run(["git", "-C", str(repo), "config", "--get", key], stdout=subprocess.PIPE, text=True)
    return p.stdout.strip() or None


def test_per_repo_blocks_apply_only_to_their_repository(home, two_repos):
    a, b = two_repos
    scope = scopes.resolve("global")
    per_repo = {str(a / ".git"): {"index.threads": "4"}, str(b / ".git"): {"checkout.workers": "6"}}
    prov = configwrite.Provenance("2.39.5", "test", "local-ssd")
    plan = configwrite.plan(scope, {"core.untrackedCache": "true"}, prov, per_repo=per_repo)
    # The diff shows the exact bytes: the includeIf block and the repository's own file.
    assert plan.changes and f'+[includeIf "gitdir:{a}/.git"]' in plan.diff
    assert "+\tthreads = 4" in plan.diff
    configwrite.apply(plan, prov)
    assert get(a, "index.threads") == "4" and get(b, "index.threads") is None
    assert get(b, "checkout.workers") == "6" and get(a, "checkout.workers") is None
    assert get(a, "core.untrackedCache") == get(b, "core.untrackedCache") == "true"
    again = configwrite.plan(scope, {"core.untrackedCache": "true"}, prov, per_repo=per_repo)
    assert not again.changes
    # Dropping a repository removes its file on the next write.
    shrink = configwrite.plan(scope, {"core.untrackedCache": "true"}, prov,
                              per_repo={str(a / ".git"): {"index.threads": "4"}})
    configwrite.apply(shrink, prov)
    assert get(b, "checkout.workers") is None
    assert not os.path.exists(configwrite.repo_file(scope.include_file, str(b / ".git")))
    from git_tune.advisor.write.revert import revert
    revert(scope)
    assert get(a, "index.threads") is None and not os.path.exists(scope.include_file)
    assert not os.path.exists(configwrite.repo_file(scope.include_file, str(a / ".git")))


def test_scan_finds_repositories_without_descending_into_them(two_repos, tmp_path):
    a, b = two_repos
    (a / "vendor" / "inner").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(a / "vendor" / "inner")], check=True)
    assert multirepo.scan(str(tmp_path / "work")) == [str(a), str(b)]


def test_recommend_scan_and_write(home, two_repos, tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path / "cache"))
    res = CliRunner().invoke(cli, ["recommend", "--scan", str(tmp_path / "work"), "--budget", "2",
                                   "--strategy", "grid", "--write", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [r["repo"] for r in data["repos"]] == [str(p) for p in two_repos]
    for r in data["repos"]:
        settings = {k["key"]: k["value"] for k in r["recommendation"]["keys"] if k["status"] == "set"}
        for key, value in settings.items():
            assert get(r["repo"], key) == value  # shared or per-repository, git reads it there
