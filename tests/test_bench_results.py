"""bench/README's tables say where each row was measured: a run over some beds keeps
the other beds' rows with the commit and time they were measured at, and a table holds
the rows of one commit, which it names with the command that reproduces them."""
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


def _run(common, monkeypatch, at: str, beds, value: str, whole=False):
    monkeypatch.setattr(common, "commit", lambda: at)
    monkeypatch.setattr(common.sys, "argv",
                        ["bench/demo.py"] + ([] if whole else ["--beds", *beds]))
    common.report("demo", "Demo", ["bed", "value"], [[b, value] for b in beds],
                  {b: {"value": value} for b in beds}, False, [f"{b}: note {value}" for b in beds],
                  beds=beds)


def _tables(collect, tmp_path):
    """The section as the page shows it, its run lines and its tables' rows, in order."""
    md = collect.tables("demo", json.loads((tmp_path / "demo.json").read_text()),
                        (tmp_path / "demo.md").read_text())
    runs = [l for l in md.splitlines() if l.startswith("_") and "bench/demo.py" in l]
    blocks = [b for b in md.split("\n\n") if b.startswith("| bed ")]
    return md, runs, [b.splitlines()[2:] for b in blocks]


def test_a_partial_run_keeps_the_other_beds_rows_in_a_table_of_their_own_commit(
        bench, monkeypatch, tmp_path):
    common, collect = bench
    _run(common, monkeypatch, "aaa1111", ["tmpfs", "disk"], "1")
    _run(common, monkeypatch, "bbb2222", ["disk"], "2")
    data = json.loads((tmp_path / "demo.json").read_text())
    assert data["rows"] == [["tmpfs", "1"], ["disk", "2"]]
    assert {b: r["commit"] for b, r in data["runs"].items()} == {"tmpfs": "aaa1111", "disk": "bbb2222"}
    md, runs, tables = _tables(collect, tmp_path)
    assert tables == [["| tmpfs | 1 |"], ["| disk | 2 |"]]
    assert len(runs) == 2
    assert runs[0].startswith("_tmpfs: run ")
    assert "at aaa1111: `python3 bench/demo.py --beds tmpfs disk`" in runs[0]
    assert runs[1].startswith("_disk: run ")
    assert "at bbb2222: `python3 bench/demo.py --beds disk`" in runs[1]
    assert md.count("### Demo") == 1 and "- tmpfs: note 1" in md and "- disk: note 2" in md


def test_a_whole_run_names_one_commit(bench, monkeypatch, tmp_path):
    common, collect = bench
    _run(common, monkeypatch, "aaa1111", ["tmpfs"], "1")
    _run(common, monkeypatch, "ccc3333", ["tmpfs", "disk"], "3", whole=True)
    md, runs, tables = _tables(collect, tmp_path)
    (line,) = runs
    assert line.startswith("_Run ") and "at ccc3333: `python3 bench/demo.py`" in line
    assert "aaa1111" not in md
    assert tables == [["| tmpfs | 3 |", "| disk | 3 |"]]


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
