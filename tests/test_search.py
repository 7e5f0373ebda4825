"""Every strategy finds a known optimum of a scripted, noisy surface, deterministically."""
import random

import pytest

from git_tune.advisor.measure import search, sweep
from git_tune.advisor.measure.search import Dim


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def surface_1d(noise_seed):
    rng = random.Random(noise_seed)

    def measure(point):
        w = point["checkout.workers"]
        true = 0.05 + 2.0 / min(w, 6) + 0.01 * w
        return true * (1 + rng.gauss(0, 0.03))
    return measure


def surface_2d(noise_seed):
    rng = random.Random(noise_seed)

    def measure(point):
        t, s = point["engine.preload.threads"], point["engine.preload.io_streams"]
        true = 1.0 / min(t, 8) + 0.02 * t + 0.05 * abs(s - 2) + 0.1
        return true * (1 + rng.gauss(0, 0.03))
    return measure


DIMS_1D = [Dim("checkout.workers", 1, 32, default=1)]
DIMS_2D = [Dim("engine.preload.threads", 1, 20, default=20),
           Dim("engine.preload.io_streams", 1, 4, default=1)]


def run(name, dims, surface, seed, budget):
    clock = FakeClock()
    measure = surface(seed)

    def timed(point):
        clock.t += 1.0  # every measurement costs one "second"
        return measure(point)

    return sweep.run(search.make(name, dims, seed), timed, budget=budget, clock=clock,
                     patience=1000)


@pytest.mark.parametrize("name", sorted(search.STRATEGIES))
def test_finds_1d_optimum_within_budget(name):
    r = run(name, DIMS_1D, surface_1d, seed=3, budget=50)
    w = r.best["checkout.workers"]
    assert 0.05 + 2.0 / min(w, 6) + 0.01 * w <= (0.05 + 2.0 / 6 + 0.06) * 1.05, r.best
    assert r.stopped == "budget" and len(r.evaluations) == 50


@pytest.mark.parametrize("name", sorted(search.STRATEGIES))
def test_finds_2d_optimum_within_budget(name):
    r = run(name, DIMS_2D, surface_2d, seed=5, budget=30)
    true = 1.0 / min(r.best["engine.preload.threads"], 8) + 0.02 * r.best["engine.preload.threads"] \
        + 0.05 * abs(r.best["engine.preload.io_streams"] - 2) + 0.1
    optimum = 1.0 / 8 + 0.02 * 8 + 0.1
    assert true <= optimum * 1.08, r.best


@pytest.mark.parametrize("name", sorted(search.STRATEGIES))
def test_same_seed_same_sweep(name):
    a = run(name, DIMS_1D, surface_1d, seed=7, budget=15)
    b = run(name, DIMS_1D, surface_1d, seed=7, budget=15)
    assert [e.point for e in a.evaluations] == [e.point for e in b.evaluations]


def test_incumbent_is_remeasured_and_failures_are_recorded():
    calls = []

    def measure(point):
        calls.append(point)
        if len(calls) in (2, 3):
            raise sweep.MeasurementFailed("disk full")
        return float(point["checkout.workers"])

    r = sweep.run(search.make("grid", DIMS_1D, 0), measure, budget=1e9, max_evals=12)
    assert sum(1 for e in r.evaluations if e.value is None) == 2
    assert all(e.error == "disk full" for e in r.evaluations if e.value is None)
    assert any(e.repeat for e in r.evaluations)
    assert r.best_samples >= 2  # the winner was measured more than once


def test_three_failures_in_a_row_stop_the_sweep():
    def measure(point):
        raise sweep.MeasurementFailed("read-only file system")

    with pytest.raises(sweep.MeasurementFailed, match="read-only"):
        sweep.run(search.make("random", DIMS_1D, 0), measure, budget=1e9)


def test_converges_early_on_a_flat_surface():
    r = sweep.run(search.make("random", DIMS_1D, 1), lambda p: 1.0, budget=1e9, patience=6)
    assert r.stopped == "converged" and len(r.evaluations) < 10


def test_a_cheap_flat_surface_is_covered_before_it_converges():
    # Auto patience: a 32-value space is measured whole before the sweep gives up.
    dims = [search.Dim("checkout.workers", 1, 32, default=1)]
    r = sweep.run(search.make("grid", dims, 0), lambda p: 1.0, budget=1e9)
    assert r.stopped == "converged"
    assert {e.point["checkout.workers"] for e in r.evaluations} == set(range(1, 33))


@pytest.mark.parametrize("name", sorted(search.STRATEGIES))
def test_the_first_measurement_is_gits_default(name):
    # A budget that allows one measurement (slow, cold storage) keeps Git's default.
    clock = FakeClock()
    dims = [Dim("engine.preload.threads", 1, 20, default=6),
            Dim("engine.preload.split", categories=("slices", "streams"), default="slices")]

    def measure(point):
        clock.t += 10.0
        return 1.0

    r = sweep.run(search.make(name, dims, 3), measure, budget=5.0, clock=clock)
    assert r.best == {"engine.preload.threads": 6, "engine.preload.split": "slices"}
    assert len(r.evaluations) == 1


@pytest.mark.parametrize("name", sorted(search.STRATEGIES))
def test_seeded_points_come_first_then_the_strategys_own(name):
    """The checkout sweep's octaves are measured right after Git's default, whatever the
    strategy (a short share measures a handful of counts: each interval (w, 2w] then
    holds one), and the strategy then goes on from what it was told."""
    from git_tune.advisor.keys.checkout_sweep import octaves, sweep_strategy
    assert octaves(32) == [2, 4, 8, 16, 32] and octaves(8) == [2, 4, 8]
    assert octaves(12) == [2, 4, 8, 12] and octaves(1) == []
    for w in range(1, 17):
        assert any(w < c <= 2 * w for c in [1] + octaves(32))
    clock, measure = FakeClock(), surface_1d(2)

    def timed(point):
        clock.t += 1.0
        return measure(point)
    r = sweep.run(sweep_strategy(name, DIMS_1D, 4), timed, budget=20,
                  clock=clock, patience=1000)
    fresh = [e.point["checkout.workers"] for e in r.evaluations if not e.repeat]
    assert fresh[:6] == [1, 32, 16, 8, 4, 2] and len(r.evaluations) == 20
    assert r.strategy == name
