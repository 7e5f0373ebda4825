"""bench/README's run lines say where each row was measured: a run over some beds keeps
the other beds' rows with the commit and time they were measured at, and the table's
run line names each commit and the command that reproduces its rows."""
import json
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench")


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    import collect
    import common
    monkeypatch.setattr(common, "RESULTS", str(tmp_path))
    return common, collect


def _run(common, monkeypatch, at: str, beds, value: str):
    monkeypatch.setattr(common, "commit", lambda: at)
    common.report("demo", "Demo", ["bed", "value"], [[b, value] for b in beds],
                  {b: {"value": value} for b in beds}, False, [f"{b}: note {value}" for b in beds],
                  beds=beds)


def test_a_partial_run_keeps_the_other_beds_rows_with_their_own_commit(bench, monkeypatch, tmp_path):
    common, collect = bench
    _run(common, monkeypatch, "aaa1111", ["tmpfs", "disk"], "1")
    _run(common, monkeypatch, "bbb2222", ["disk"], "2")
    data = json.loads((tmp_path / "demo.json").read_text())
    assert data["rows"] == [["tmpfs", "1"], ["disk", "2"]]
    assert {b: r["commit"] for b, r in data["runs"].items()} == {"tmpfs": "aaa1111", "disk": "bbb2222"}
    line = collect.run_line("demo", data)
    assert "tmpfs: " in line and "at aaa1111: `python3 bench/demo.py --beds tmpfs`" in line
    assert "disk: " in line and "at bbb2222: `python3 bench/demo.py --beds disk`" in line


def test_a_whole_run_names_one_commit(bench, monkeypatch, tmp_path):
    common, collect = bench
    _run(common, monkeypatch, "aaa1111", ["tmpfs"], "1")
    _run(common, monkeypatch, "ccc3333", ["tmpfs", "disk"], "3")
    line = collect.run_line("demo", json.loads((tmp_path / "demo.json").read_text()))
    assert line.startswith("_Run ") and "at ccc3333: `python3 bench/demo.py`" in line
    assert "aaa1111" not in line and "\n" not in line


def test_what_a_table_says_is_shown_only_under_the_run_it_was_written_for(bench, tmp_path):
    """A table's "what it says" names the commit it was written for: under a run of that
    commit it is shown, under a later run it is left out (words about another run), and
    one longer than SAYS_LINES is refused."""
    _, collect = bench
    says = tmp_path / "says"
    says.mkdir()
    (says / "demo.md").write_text("<!-- for aaa1111 -->\nFour workers win on NFS.\n")
    shown = collect.says("demo", {"commit": "aaa1111"}, str(says))
    assert shown.startswith("**What it says.** Four workers win on NFS.")
    assert collect.says("demo", {"commit": "ccc3333"}, str(says)) == ""
    (says / "demo.md").write_text("<!-- for aaa1111 -->\n" + "a line\n" * 11)
    with pytest.raises(SystemExit):
        collect.says("demo", {"commit": "aaa1111"}, str(says))
