"""git-tune's own state files are untrusted input (issue #61), fed through their readers
property by property: every trace2 event line, store line, agent state, experiment state
and log line reads as a record or is skipped, set aside or shown, and never ends a reader
in a traceback. A file of its own so a test worker takes it beside test_own_state.py's
(tools/test runs the files on three workers, a file to a worker)."""
import json
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from git_tune.advisor.agent import events, experiment, retune, spool, store, switch
from git_tune.views import agent_log_view

FUZZ = settings(max_examples=int(os.environ.get("GIT_TUNE_FUZZ_EXAMPLES", "300")),
                deadline=None, suppress_health_check=list(HealthCheck))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10),
                                                                       children, max_size=4),
    max_leaves=12)
EVENT_KEYS = ["event", "sid", "name", "argv", "repo", "worktree", "thread", "category",
              "label", "t_rel", "t_abs", "code", "key", "value", "param", "exe", "ancestry"]
event_objects = st.builds(
    lambda d, kind: {**d, "event": kind},
    st.dictionaries(st.sampled_from(EVENT_KEYS), json_values, max_size=8),
    st.sampled_from(["start", "cmd_name", "exit", "atexit", "data", "region_leave",
                     "def_param", "def_repo", "cmd_ancestry", "version"]))
lines = st.one_of(event_objects.map(lambda o: json.dumps(o, allow_nan=True)),
                  st.text(max_size=60), st.just("[" * 5000), st.just('{"t_abs":1e400}'))


@FUZZ
@given(st.lists(lines, max_size=12))
def test_fuzz_event_lines_reduce_to_a_record_or_nothing(batch):
    r = events.reduce(batch, ["checkout.workers"], 1.0)
    assert r is None or (r.elapsed is None or 0 <= r.elapsed <= events.MAX_SECONDS)
    if r is not None:
        again = events.from_stored(json.loads(json.dumps(r.__dict__)))
        assert again == r


@FUZZ
@given(json_values | event_objects)
def test_fuzz_store_lines_are_a_record_or_skipped(value):
    r = events.from_stored(value)
    assert r is None or isinstance(r, events.Command)


@FUZZ
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode())
       | st.fixed_dictionaries({"enabled": st.booleans(), "watch_all": st.booleans(),
                                "watch": st.lists(st.text(max_size=5)), "spool": st.text(max_size=30)}
                               ).map(lambda v: json.dumps(v).encode()))
def test_fuzz_agent_state_loads_or_is_set_aside(data):
    path = os.path.join(store.agent_dir(), switch.STATE)
    with open(path, "wb") as f:
        f.write(data)
    state = switch.load()
    assert not state.spool or spool.is_own_place(state.spool)


@FUZZ
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode())
       | st.dictionaries(st.sampled_from(["scope", "repo", "key", "approved", "candidate",
                                          "classes", "arm", "since", "slots", "wrote"]),
                         json_values).map(lambda v: json.dumps(v).encode()))
def test_fuzz_experiment_state_reads_or_is_damaged(data):
    with open(experiment._path(), "wb") as f:
        f.write(data)
    exp, damaged = experiment._read()
    assert (exp is None) or not damaged
    if exp is not None:
        experiment.pairs(exp)
        experiment.status()


@FUZZ
@given(st.lists(st.binary(max_size=80) | json_values.map(lambda v: json.dumps(v).encode()),
                max_size=6))
def test_fuzz_log_lines_show_or_are_skipped(batch):
    with open(retune.log_path(), "wb") as f:
        f.write(b"\n".join(batch))
    entries = retune.log()
    agent_log_view({"retunes": entries})
