"""The key registry and the typed calibration record (issue #13).

- A calibration recorded by git-tune before the registry (schema 1) gives the
  same decisions now: same keys, statuses, values, gains, reasons and evidence.
- A toy key added through the registry alone (one module, one toml entry, in a
  temporary package) is trialled, recommended, written, shown and reverted by
  the real CLI on a real repository.
- The code keeps its shape: no function over 60 lines, no Git key name
  compared outside its key module, one probe of the storage per `auto`.
"""
import ast
import glob
import json
import re
import os
import subprocess
import sys
import textwrap
from typing import List

import pytest

from git_tune.models import stats, workloads

from git_tune.advisor.decide.recommend import recommend
from git_tune.advisor.measure.record import Calibration, RecordUnreadable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDED = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "calibrations", "*-v1.json")))


UNMEASURED_THEN = "left to Git: git-tune does not measure it yet"
UNMEASURED_NOW = "not set: not measured in this calibration"


def _plain(value):
    return json.loads(json.dumps(value))


def _without_gains(got_key: dict) -> dict:
    """#11 added `gains` (a value's gain on each workload real git timed it on) after these
    were recorded: the headline gain is among them, and the rest is compared as before."""
    g = dict(got_key)
    gains = g.pop("gains")
    assert not gains or g["gain"] in gains, g
    return g


def _measured_workloads(got_keys) -> set:
    return {gain["workload"] for k in got_keys if k["status"] == "set"
            for gain in (k["gains"] or [k["gain"]]) if gain}


def _threshold_within_noise(recorded_key: dict) -> bool:
    gain = recorded_key.get("gain")
    return (recorded_key["key"] == "checkout.thresholdForParallelism" and gain is not None
            and gain["low"] <= 1 / (1 - stats.MIN_EFFECT))


def _reworded(findings):
    """The recorded findings in today's words: #34 made counts agree with their nouns
    ("1 thread", "Git starts 5 threads") and says "one thread: 5.7 ms"; the figures and
    what they say are the recordings' own."""
    out = []
    for f in findings:
        f = re.sub(r"\b1 threads\b", "1 thread", f)
        f = re.sub(r"Git starts (\d+) \(", lambda m: f"Git starts {m.group(1)} thread"
                   + ("" if m.group(1) == "1" else "s") + " (", f)
        f = f.replace("one thread takes not measured", "one thread: not timed")
        f = f.replace("one thread takes ", "one thread: ").replace("(not measured)", "(not timed)")
        out.append(f)
    return out


@pytest.mark.parametrize("path", RECORDED, ids=[os.path.basename(p) for p in RECORDED])
def test_recorded_calibration_gives_the_same_decisions(path):
    with open(path) as f:
        data = json.load(f)
    cal = Calibration.from_json(data["calibration"])
    assert cal.schema == 2 and cal.trials
    for workload, want in data["recommendation"].items():
        got = recommend(cal, workload).to_dict()
        counted = workloads.counted(workload)
        unweighed = {k for k, t in cal.trials.items()
                     if not any(c.workload in counted for c in t.comparisons)}
        if workload != "ci":
            assert not unweighed, workload   # #15: the same decisions where nothing changed
        # Every key recorded is decided again, in the same order: a key missing (where
        # zip() alone would stop at the shorter list) fails. A key the catalogue gained
        # since the recording comes after them, and the record, with no trial of it,
        # sets nothing for it.
        names = [k["key"] for k in got["keys"]]
        assert names[:len(want["keys"])] == [k["key"] for k in want["keys"]], workload
        added = got["keys"][len(want["keys"]):]
        assert all(k["status"] != "set" for k in added), added
        for g, w in zip(map(_without_gains, _plain(got["keys"][:len(want["keys"])])),
                        want["keys"], strict=True):
            if w["reason"] == UNMEASURED_THEN:
                # #14: a key measured since; a record from before has no trial of it.
                assert g["status"] == "not set" and g["reason"] == UNMEASURED_NOW, g
            elif _threshold_within_noise(w):
                # #11: a threshold whose own batch was not faster beyond noise is no
                # longer written (auto promised a gain verify could not confirm).
                assert g["status"] == "not set" and "the batch it changes was" in g["reason"], g
            elif g["key"] not in unweighed:
                assert g == w, workload
            else:   # #15: a key measured only on work the profile does not weigh keeps Git's
                assert g["status"] != "set" and "does not weigh" in g["reason"], g
        # The workload only a threshold within noise was said to speed up is no longer
        # expected faster; the weighted figure then changes with it.
        dropped = {w["gain"]["workload"] for w in want["keys"] if _threshold_within_noise(w)}
        # #11: a clone was expected to gain what the checkout batch did; a workload real
        # git never timed is no longer expected faster.
        dropped |= {"clone"} - _measured_workloads(_plain(got["keys"]))
        want_expected = {k: v for k, v in want["expected"].items() if k not in dropped}
        if not unweighed:
            assert got["expected"] == pytest.approx(want_expected)
            w = workloads.weights(workload)
            assert got["weighted_speedup"] == pytest.approx(workloads.weighted_geomean(
                (w[n], want_expected.get(n, 1.0)) for n in w))
        if not unweighed and not dropped:
            # #14 added the `write` workload after these were recorded; no recorded key
            # changes it, so it counts as 1.00x and only dilutes the geometric mean.
            w = workloads.weights(workload)
            share = (sum(w.values()) - w["write"]) / sum(w.values())
            assert got["weighted_speedup"] == pytest.approx(want["weighted_speedup"] ** share)
        assert sorted(got["findings"]) == sorted(_reworded(want["findings"]))


def test_recorded_decisions_are_not_all_defaults():
    """The recorded set covers both branches: values set and values kept."""
    statuses = set()
    for path in RECORDED:
        with open(path) as f:
            keys = json.load(f)["recommendation"]["mixed"]["keys"]
        statuses |= {(k["key"], k["status"]) for k in keys}
    assert len(RECORDED) >= 2
    assert any(s == "set" for _, s in statuses) and any(s == "not set" for _, s in statuses)
    assert ("checkout.thresholdForParallelism", "set") in statuses


def test_a_schema_2_record_round_trips():
    with open(RECORDED[0]) as f:
        cal = Calibration.from_json(json.load(f)["calibration"])
    again = Calibration.from_json(json.loads(json.dumps(cal.to_json())))
    assert again == cal


@pytest.mark.parametrize("data", [None, [], {"schema": 99}, {"schema": 2, "created": "x"},
                                  {"schema": 1}])
def test_an_unreadable_record_is_refused_cleanly(data):
    with pytest.raises(RecordUnreadable):
        Calibration.from_json(data)


# The code keeps its shape. -------------------------------------------------------

PACKAGES = ("advisor", "probes", "models", "core")


def _sources():
    for package in PACKAGES:
        yield from sorted(glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True))


def _module_name(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[0] == "core":
        rel = rel[1:]
    return ".".join(["git_tune", *rel])


def test_no_function_is_longer_than_60_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.name} {lines}")
    assert not long, long


# Words that tell a story where a docstring or comment should state a contract: a bed a
# figure was measured on, the history of a rule, an issue's number (#66).
DIARY = re.compile(r"\bbed\b|\bas before\b|\bthis session\b|\bissue\s+#\d|\(#\d+\b",
                   re.IGNORECASE)


def _prose(path):
    """(line, text) of every docstring and comment in the file at path."""
    import io
    import tokenize
    text = open(path).read()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.body[0].lineno, doc
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def test_every_built_in_key_module_declares_typed_tuners():
    """A built-in key's parts are a registry.Tuner's methods (TUNERS), never looked up by
    name on its module (ModuleTuner is for a plug-in's key)."""
    from git_tune.advisor.keys import registry
    by_name = [e.key.name for e in registry.entries()
               if e.module is not None and isinstance(e.tuner, registry.ModuleTuner)]
    assert not by_name, by_name


def test_docstrings_and_comments_state_contracts_not_a_diary():
    """No bed, no history, no issue number in the package's docstrings and comments: the
    figures behind a rule are in docs/planner.md, its history in git log."""
    found = [f"{os.path.relpath(path, ROOT)}:{line}: {m.group(0)!r}"
             for path in _sources() for line, text in _prose(path)
             for m in DIARY.finditer(text)]
    assert not found, found


def _key_uses(tree, keys):
    """String constants naming a Git key where code decides on them: comparisons
    (==, !=, in), subscripts, .get()/.pop() and literal tuples/lists/sets used in tests."""
    def named(node):
        return (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value.lower() in keys)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                yield from (n for n in items if named(n))
        elif isinstance(node, ast.Subscript) and named(node.slice):
            yield node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "pop", "setdefault") and node.args \
                and named(node.args[0]):
            yield node.args[0]
        elif isinstance(node, ast.Dict):
            yield from (k for k in node.keys if k is not None and named(k))


def test_no_git_key_is_decided_on_outside_its_key_module():
    from git_tune.models import catalogue
    keys = {k.name.lower(): k.module for k in catalogue.catalogue().values()}
    found = []
    for path in _sources():
        module = _module_name(path)
        for node in _key_uses(ast.parse(open(path).read()), keys):
            if keys[node.value.lower()] != module:
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.value}")
    assert not found, found


def test_the_key_scan_finds_what_it_looks_for():
    """The scan above would catch the if-chains it replaced."""
    code = ('if name == "checkout.workers": pass\n'
            'x = v["core.preloadIndex"]\n'
            'y = d.get("index.version")\n'
            'z = {"core.untrackedCache": 1}\n'
            'ok = "checkout.workers" in text_for_a_person\n')
    keys = {"checkout.workers", "core.preloadindex", "index.version", "core.untrackedcache"}
    found = [n.value for n in _key_uses(ast.parse(code), keys)]
    assert found == ["checkout.workers", "core.preloadIndex", "index.version",
                     "core.untrackedCache", "checkout.workers"]


# A key added through the registry alone. ----------------------------------------

TOY_MODULE = '''
"""A toy key: git ignores it; its trial times real git all the same."""
from git_tune.advisor.decide import advice
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.record import Trial

KEY = "toy.knob"
TRIAL_RANK = 0     # first: what is tested is the stages, not what the budget reaches


def trial(key, bench):
    bench.notes.append("toy trial ran")
    st = gitbench.status(bench.repo, bench.ws.index_copy("plain"), untracked=False)
    off, on = {KEY: "false"}, {KEY: "true"}
    return Trial(KEY, (bench.ab("status", off, on, lambda: st(off), lambda: st(on)),))


def decide(key, cal, weights):
    t = cal.trials[key.name]
    a = advice.validated(key, t.main, "true", "toy")
    return advice.KeyAdvice(key.name, advice.SET, "true", key.default, a.gain,
                            "toy: always set", {"runs": len(t.main.times_candidate)})


def verify_workloads(key):
    return ("index",)
'''

TOY_TOML = '''
[keys."toy.knob"]
module = "toykeys.knob"
type = "bool"
default = "false"
since = "1.0.0"
affects = ["status"]
measured_by = "git"
facts = "A key for testing the registry."
'''


def _git_tune(*args, env):
    return subprocess.run([sys.executable, "-m", "git_tune", *args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _plugin_key(tmp_path, small_repo, module_name: str, module_text: str, toml_text: str):
    """A key added as a user would: one module in a package of its own on PYTHONPATH and
    its catalogue entry through GIT_TUNE_KEYS; a copy of the repository to tune. (the
    repository, the environment git-tune runs in, the repository's config bytes)"""
    package = tmp_path / "plugins" / "toykeys"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / f"{module_name}.py").write_text(textwrap.dedent(module_text))
    catalogue_file = tmp_path / "toy.toml"
    catalogue_file.write_text(toml_text)
    repo = tmp_path / "r"
    subprocess.run(["cp", "-a", str(small_repo), str(repo)], check=True)
    env = dict(os.environ, GIT_TUNE_KEYS=str(catalogue_file),
               PYTHONPATH=os.pathsep.join([str(tmp_path / "plugins"),
                                           os.environ.get("PYTHONPATH", "")]),
               GIT_TUNE_CACHE_DIR=str(tmp_path / "cache"))
    return repo, env, (repo / ".git" / "config").read_bytes()


@pytest.mark.timed
def test_a_toy_key_goes_through_every_stage(small_repo, tmp_path):
    repo, env, config_before = _plugin_key(tmp_path, small_repo, "knob", TOY_MODULE, TOY_TOML)

    # The toy trial runs first (TRIAL_RANK 0), so a loaded machine's slower real keys cannot
    # leave it out of the budget; a key the budget cannot reach stays at Git's default.
    # verify runs on its own below: the toy changes nothing git does, so auto's verify
    # could read it slower by chance on a busy machine and take it back.
    auto = _git_tune("auto", "--repo", str(repo), "--scope", "local", "--budget", "6",
                     "--yes", "--json", "--no-verify", env=env)
    assert auto.returncode == 0, auto.stderr
    out = json.loads(auto.stdout)
    toy = next(k for k in out["recommendation"]["keys"] if k["key"] == "toy.knob")
    assert toy["status"] == "set" and toy["value"] == "true", toy
    # Trialled: its A/B ran. Both arms are the same git status, so on a busy machine the
    # candidate can look clearly slower by chance and be dropped after EARLY_RUNS pairs.
    from git_tune.advisor.measure.ab import EARLY_RUNS
    assert toy["evidence"]["runs"] >= EARLY_RUNS and toy["gain"]["workload"] == "status"
    assert out["plan"]["settings"]["toy.knob"] == "true"
    got = subprocess.run(["git", "config", "toy.knob"], cwd=repo, stdout=subprocess.PIPE,
                         text=True)
    assert got.stdout.strip() == "true", out["message"]                         # written
    verify = _git_tune("verify", "--repo", str(repo), "--json", env=env)
    assert verify.returncode == 0, verify.stderr
    assert "index" in [w["name"] for w in json.loads(verify.stdout)["workloads"]]  # verified

    # The toy trial runs first: a short calibration holds it.
    cal = json.loads(_git_tune("calibrate", "--repo", str(repo), "--budget", "5", "--json",
                               env=env).stdout)
    assert "toy.knob" in cal["trials"] and "toy trial ran" in cal["notes"]

    shown = json.loads(_git_tune("show", "--json", env=env).stdout)
    assert shown["applied"][0]["settings"]["toy.knob"] == "true"                 # shown
    reverted = _git_tune("revert", "--scope", "local", "--repo", str(repo), env=env)
    assert reverted.returncode == 0, reverted.stderr
    assert (repo / ".git" / "config").read_bytes() == config_before              # reverted


@pytest.mark.timed
def test_auto_probes_the_storage_once(small_repo, tmp_path, monkeypatch):
    """One `auto`: probe, calibrate, recommend, write, verify, with one storage probe."""
    from click.testing import CliRunner
    from git_tune.cli import cli
    from git_tune.probes import storage
    calls = []
    real = storage.probe_storage

    def counted(*args, **kw):
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(storage, "probe_storage", counted)
    monkeypatch.setenv("GIT_TUNE_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "r"
    subprocess.run(["cp", "-a", str(small_repo), str(repo)], check=True)
    args = ["auto", "--repo", str(repo), "--scope", "local", "--budget", "2", "--yes", "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert len(calls) == 1, calls
    # A second run reuses the stored calibration, found from the same single probe.
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0 and json.loads(res.stdout)["calibration_reused"]
    assert len(calls) == 2, calls


def _absolute(path: str, node: ast.ImportFrom) -> str:
    """The module an import names, its dots resolved against the file's package."""
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _type_only(tree: ast.AST) -> set:
    """The nodes under `if TYPE_CHECKING:`: names for annotations, which nothing runs, so
    they set no order on the modules (an interface's types, named where it is declared)."""
    return {id(n) for top in ast.walk(tree)
            if isinstance(top, ast.If) and isinstance(top.test, ast.Name)
            and top.test.id == "TYPE_CHECKING"
            for stmt in top.body for n in ast.walk(stmt)}


def _imports(path: str, modules) -> set:
    """The git_tune modules a source file imports when it runs, at its top or inside a
    function (not those named for annotations only: _type_only)."""
    found = set()
    tree = ast.parse(open(path).read())
    skipped = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and _absolute(path, node).startswith("git_tune"):
            module = _absolute(path, node)
            for alias in node.names:
                name = f"{module}.{alias.name}"
                found.add(name if name in modules else module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("git_tune"))
    return found & modules


def test_no_import_circle_even_through_deferred_imports():
    """Issue #31: an import inside a function that would close a circle at the top is a
    circle all the same (it only hides the order the modules need): none anywhere."""
    paths = {_module_name(p).removesuffix(".__init__"): p for p in _sources()}
    graph = {m: _imports(p, set(paths)) - {m} for m, p in paths.items()}
    state, circles = {}, []

    def visit(m, stack):
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                circles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_imports_inside_the_package_are_relative():
    """The structure shows in the tree: a package module names another by its place
    (`from ..measure import ab`), never through `git_tune.` (which a tree-reading import
    viewer cannot map to the directories)."""
    absolute = [f"{os.path.relpath(p, ROOT)}:{n.lineno}" for p in _sources()
                for n in ast.walk(ast.parse(open(p).read()))
                if (isinstance(n, ast.ImportFrom) and not n.level and (n.module or "").startswith("git_tune"))
                or (isinstance(n, ast.Import) and any(a.name.startswith("git_tune") for a in n.names))]
    assert not absolute, absolute
    graph = {_module_name(p): _imports(p, {_module_name(q) for q in _sources()}) for p in _sources()}
    assert "git_tune.advisor.measure.planner" in graph["git_tune.advisor.keys.checkout"]


def test_no_tuner_dispatches_on_its_keys_name():
    """Issue #31: two keys, two tuners. No key module compares `key.name`, and a module
    that owns more than one catalogue key gives each its own Tuner (TUNERS)."""
    from git_tune.advisor.keys import registry
    from git_tune.models import catalogue
    compared = []
    for path in sorted(glob.glob(os.path.join(ROOT, "advisor", "keys", "*.py"))):
        if path.endswith("registry.py"):
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(x, ast.Attribute) and x.attr == "name"
                       and isinstance(x.value, ast.Name) and x.value.id == "key" for x in sides):
                    compared.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert not compared, compared
    owners = {}
    for k in catalogue.catalogue().values():
        if k.module:
            owners.setdefault(k.module, []).append(k.name)
    for module, names in owners.items():
        if len(names) > 1:
            entries = [registry.entry(n) for n in names]
            assert all(type(e.tuner) is not registry.ModuleTuner for e in entries), module
            assert len({id(e.tuner) for e in entries}) == len(names), module


WORKLOAD_MODULE = '''
"""A key that brings a workload of its own, `git log -p`: its catalogue entry names the
workload and weighs it per profile; this module times it for the trial and for verify,
and decides by what real git showed. Nothing else changes. Git ignores the toy key, so
the runner stands for what it would change: with 1, the log's patches are not made."""
from git_tune.advisor.decide import advice
from git_tune.advisor.measure import gitbench
from git_tune.advisor.measure.record import Trial

KEY = "toy.deltacache"
TRIAL_RANK = 0
LOG = ["log", "-p", "-n", "20"]


def _log(repo):
    def run(settings, trace_file=None):
        args = LOG if settings.get(KEY, "0") == "0" else ["log", "-n", "20"]
        return gitbench.timed_git(args, repo.worktree, settings, trace_file=trace_file,
                                  repo=repo)
    return run


def trial(key, bench):
    if not bench.counts("log"):
        return None
    run = _log(bench.repo)
    off, on = {KEY: "0"}, {KEY: "1"}
    return Trial(KEY, (bench.ab("log", off, on, lambda: run(off), lambda: run(on)),))


def decide(key, cal, weights):
    t = cal.trials[key.name]
    return advice.validated(key, t.main, "1", "git log -p",
                            {"runs": len(t.main.times_candidate)})


def verify_workloads(key):
    return ("log",)


def verify_runner(key, repo, index_file, trial):
    return _log(repo)
'''

WORKLOAD_TOML = '''
[keys."toy.deltacache"]
module = "toykeys.delta"
type = "int"
min = 0
max = 1
default = "0"
since = "1.0.0"
affects = ["log"]
measured_by = "git"
facts = "A key with a workload of its own."

[keys."toy.deltacache".workload]
name = "log"
command = "git log -p -n 20"
weights = { mixed = 0.2, interactive = 0.2 }
'''


def test_the_worked_examples_decision_follows_real_gits_evidence():
    """The worked example's key is set because real git was faster with it (the test
    below), not whatever was timed: the same module, given a comparison where its value
    was slower, keeps Git's default."""
    import types
    from git_tune.advisor.decide import advice
    from git_tune.advisor.measure.record import Trial, comparison
    module = types.ModuleType("toy_delta")
    exec(compile(WORKLOAD_MODULE, "toy_delta", "exec"), module.__dict__)
    key = types.SimpleNamespace(name="toy.deltacache", default="0", needs_index_rewrite=False)

    def decided(default_s, candidate_s):
        c = comparison("log", {key.name: "0"}, {key.name: "1"}, [default_s] * 5,
                       [candidate_s] * 5)
        cal = types.SimpleNamespace(trials={key.name: Trial(key.name, (c,), {})})
        return module.decide(key, cal, {"log": 1.0}).status

    assert decided(0.060, 0.020) == advice.SET
    assert decided(0.020, 0.060) != advice.SET
    assert decided(0.020, 0.020) != advice.SET


def test_facts_read_back_from_json_are_of_their_fields_types():
    """A record's facts are stored as JSON (tuples become lists); read back through
    facts_as, a tuple field is a tuple again, as the tuner wrote it."""
    from git_tune.advisor.keys import untracked
    from git_tune.advisor.measure.record import typed_facts
    stored = json.loads(json.dumps({"costs_not_timed": list(untracked.COSTS), "later": 1}))
    assert typed_facts(untracked.TrialFacts, stored).costs_not_timed == untracked.COSTS


def test_every_tuners_facts_are_typed():
    """Issue #31: a key module writes its trial's and sweep's facts from its own dataclass
    (asdict) and reads them back through it (facts_as): no dict literal as a Trial's or a
    Sweep's facts, no facts read by a string."""
    untyped = []
    for path in sorted(glob.glob(os.path.join(ROOT, "advisor", "keys", "*.py"))):
        where = os.path.relpath(path, ROOT)
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                if name == "Trial" and len(node.args) >= 3 and isinstance(node.args[2], ast.Dict):
                    untyped.append(f"{where}:{node.lineno}: Trial facts as a dict literal")
                if name == "of" and len(node.args) >= 3 and isinstance(node.args[2], ast.Dict):
                    untyped.append(f"{where}:{node.lineno}: Sweep facts as a dict literal")
                if (name == "get" and isinstance(f, ast.Attribute)
                        and isinstance(f.value, ast.Attribute) and f.value.attr == "facts"):
                    untyped.append(f"{where}:{node.lineno}: facts read by a string")
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "facts"):
                untyped.append(f"{where}:{node.lineno}: facts read by a string")
    assert not untyped, untyped


@pytest.mark.parametrize("path", RECORDED, ids=os.path.basename)
def test_every_trial_times_a_workload_its_keys_affects_name(path):
    """Issue #31: one workload table, and `affects` says what a key's trial may time: on
    the stored recordings, every comparison's workload is a row of the table whose git
    commands the key affects."""
    with open(path) as f:
        cal = Calibration.from_json(json.load(f)["calibration"])
    from git_tune.models import catalogue
    table = workloads.table()
    for name, trial in cal.trials.items():
        key = catalogue.lookup(name)
        for c in trial.comparisons:
            assert c.workload in table and table[c.workload].shows(key), (name, c.workload)


def test_verify_times_the_workloads_a_keys_affects_name():
    """Issue #31: one workload table; `affects` chooses what verify times for a key."""
    from git_tune.advisor.keys import registry
    assert registry.verify_workloads(["checkout.workers"]) == ("switch", "clone")
    # A clone's index-pack is what pack.threads changes, not the tree written after it.
    assert "clone" not in registry.verify_workloads(["pack.threads"])
    assert registry.verify_workloads(["index.threads"]) == ("index",)
    # The untracked cache lives in the index: reading and writing it pay for it.
    assert set(registry.verify_workloads(["core.untrackedCache"])) == {
        "status", "untracked", "index", "write"}
    assert set(workloads.verified()) >= {"status", "untracked", "diff", "index", "write", "switch",
                                         "clone"}
    assert all(w in workloads.table() for p in workloads.profiles().values() for w in p
               if w not in ("description", "cold"))


@pytest.mark.timed
def test_a_key_with_a_workload_of_its_own_is_added_in_one_module_and_a_toml_entry(
        small_repo, tmp_path):
    """Issue #31's worked example: `git log -p` is no workload git-tune knows. One
    module and one catalogue entry (its [workload] table weighs it per profile) are all
    it takes for the key to be trialled on it, recommended, written, shown, verified on
    it and reverted. (verify runs on its own: the toy key changes nothing git does, so
    auto's verify could read it slower by chance on a busy machine and take it back.)"""
    repo, env, config_before = _plugin_key(tmp_path, small_repo, "delta", WORKLOAD_MODULE,
                                           WORKLOAD_TOML)
    auto = _git_tune("auto", "--repo", str(repo), "--scope", "local", "--budget", "6",
                     "--yes", "--json", "--no-verify", env=env)
    assert auto.returncode == 0, auto.stderr
    out = json.loads(auto.stdout)
    toy = next(k for k in out["recommendation"]["keys"] if k["key"] == "toy.deltacache")
    assert toy["status"] == "set" and toy["gain"]["workload"] == "log", toy    # trialled
    assert out["plan"]["settings"]["toy.deltacache"] == "1"
    got = subprocess.run(["git", "config", "toy.deltacache"], cwd=repo, text=True,
                         stdout=subprocess.PIPE).stdout.strip()
    assert got == "1"                                                           # written
    verify = _git_tune("verify", "--repo", str(repo), "--json", env=env)
    assert verify.returncode == 0, verify.stderr
    verified = {w["name"]: w for w in json.loads(verify.stdout)["workloads"]}
    assert verified["log"]["command"] == "git log -p -n 20"                     # verified
    shown = json.loads(_git_tune("show", "--json", env=env).stdout)
    assert shown["applied"][0]["settings"]["toy.deltacache"] == "1"             # shown
    assert _git_tune("revert", "--scope", "local", "--repo", str(repo),
                     env=env).returncode == 0                                   # reverted
    assert (repo / ".git" / "config").read_bytes() == config_before


def _budget_arithmetic(path: str) -> List[str]:
    """Where a module reads or divides the calibration's budget itself: the budget's
    clock or what is left of it, a named share (budget.py's constants), a Share made,
    a deadline set, OutOfBudget raised. The planner (advisor/measure/planner.py) owns
    all of that; a key module asks it."""
    sites = []
    for node in ast.walk(ast.parse(open(path).read())):
        hit = None
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("now", "Share", "deadline", "OutOfBudget"):
                hit = name
            elif (name == "left" and isinstance(f, ast.Attribute)
                  and isinstance(f.value, ast.Attribute) and f.value.attr == "budget"):
                hit = "budget.left"
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "plan" and node.attr.isupper()):
            hit = f"plan.{node.attr}"
        elif isinstance(node, ast.Attribute) and node.attr == "end" and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "budget":
            hit = "budget.end"
        if hit:
            sites.append(f"{os.path.basename(path)}:{node.lineno} {hit}")
    return sites


def test_no_key_module_spends_the_budget_itself():
    """One planner owns the budget. A key module declares what to compare and how to
    decide; the planner prices, sizes and bounds every run."""
    over = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "advisor", "keys", "*.py"))):
        sites = _budget_arithmetic(path)
        if sites:
            over[os.path.basename(path)] = sites
    assert not over, over


def test_the_budget_arithmetic_finder_finds_it(tmp_path):
    """The finder above is not blind: each form it names, in a module, is a site."""
    src = tmp_path / "k.py"
    src.write_text("def f(bench):\n"
                   "    a = bench.budget.left() * plan.LADDER\n"
                   "    with gitbench.deadline(a):\n"
                   "        s = Share(3, bench.budget.end)\n"
                   "    raise OutOfBudget(plan.now())\n")
    kinds = sorted(s.split(" ", 1)[1] for s in _budget_arithmetic(str(src)))
    assert kinds == sorted(["budget.left", "plan.LADDER", "deadline", "Share", "budget.end",
                            "OutOfBudget", "now"])
