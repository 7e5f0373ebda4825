"""A part of the repository (issue #30): a scratch repository whose index holds runs of
the user's entries, so the git work a trial makes there (files written, entries read
and lstat-ed by the next status) is the part's, whatever the size of the repository.
Real git, generated repositories, trace2's own counts."""
import json
import os

from git_tune import repogen
from tests.test_never_touch import git



def test_a_part_repository_makes_git_work_on_the_part_only(isolated_git, tmp_path):
    from git_tune.advisor.measure import gitbench
    from git_tune.probes.repo import locate
    seen = {}
    for files in (300, 3000):
        src = tmp_path / f"r{files}"
        repogen.generate(str(src), repogen.RepoShape.for_files(files), limit=files)
        scratch = tmp_path / f"s{files}"
        scratch.mkdir()
        ws = gitbench.Workspace(locate(str(src)), str(scratch))
        part = ws.part(120)
        assert part.entries == files and len(part.paths) == 120
        # Runs of consecutive entries from all over the index, not its first 120.
        assert part.paths[0] != part.paths[-1] and part.paths[-1] > part.paths[60]
        gitbench.WholeTreeWrite(part.worktree, part.paths, str(scratch)).run({})
        written = sum(len(fs) for d, _, fs in os.walk(part.worktree) if "/.git" not in d + "/")
        # What the next status does there, as git counts it (trace2): entries read, lstat.
        trace = tmp_path / f"trace{files}.json"
        git(part.worktree, "status", "--porcelain", "-uno",
            env=dict(os.environ, GIT_TRACE2_EVENT=str(trace)))
        data = {e["key"].rsplit("/", 1)[-1]: int(e["value"]) for e in map(json.loads, open(trace))
                if e.get("event") == "data" and e.get("category") == "index"}
        seen[files] = (written, data.get("cache_nr"), data.get("sum_lstat"))
        # The work tree holds what the index does (HEAD is unborn: every entry is added).
        assert git(part.worktree, "diff", "--name-only").stdout == ""
        status = git(part.worktree, "status", "--porcelain", "-uno").stdout.splitlines()
        assert len(status) == 120 and all(line.startswith("A  ") for line in status), status
    assert seen[300] == seen[3000] == (120, 120, 120), seen
