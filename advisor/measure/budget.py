"""The calibration's one budget: its clock, and every share of it with its base.

`--budget` is wall-clock seconds for the whole calibration, the probe included. Every
stage that spends it reads the time here (`now()`), so a test can run a calibration on a
clock it moves itself (`use_clock(FakeClock())`): exact, and no sleeping. The shares
below are the only places where the budget is divided; each says what it is a share of:

- TOTAL: `Options.budget`, the whole budget, fixed when the calibration starts;
- LEFT: `Budget.left()`, what is left of it when the stage starts.

A share of TOTAL guarantees a stage its part even late in the run (a sweep always gets
its time); a share of LEFT lets what comes later keep the rest.
"""
import contextlib
import contextvars
import time
from typing import Callable, Dict, Iterator, Optional

Clock = Callable[[], float]

# Of TOTAL: the probe's timed parts (storage latencies, cache sample, untracked walk).
PROBE = 0.1
# Of LEFT: waiting for earlier writes to reach the disk before anything is timed.
SETTLE = 0.5
# Of TOTAL: each family's engine sweep (keys/<family>.py).
SWEEP_CHECKOUT = 0.15
SWEEP_PRELOAD = 0.08
SWEEP_INDEX = 0.05
# Of the checkout sweep's share: reading the sample's file sizes.
SAMPLE_OF_SWEEP = 0.2
# Of LEFT: the workers' batch A/B (its batch is sized to fit).
CHECKOUT_BATCH = 0.4
# Of LEFT when the ladder starts: every worker count real git times (keys/checkout_trial.py).
LADDER = 0.6
# Of LEFT: a trial on a part grown to fit, its A/B included (planner.grown_part: the
# untracked cache's).
GROWN_PART = 0.5
# Of LEFT: making the pack pack.threads is timed on.
PACK = 0.25
# Of LEFT: pack-objects over the history's parts, for the memory its objects fill
# (keys/packmem.py); the rest is left to the keys after it.
HISTORY = 0.5
# Of LEFT: more runs for a comparison still within noise (bench.Bench.ab's extensions),
# split with the trials still to run (ab.Runs.extend_share).
EXTEND = 0.5
# Of TOTAL: how far past the budget the key with the most at stake may finish its
# comparison (planner.owed_grace), once per calibration. The wall's promise is 1.25
# times the budget; the rest of it is the scratch directory's removal and the record.
OWED_GRACE = 0.15

_clock: contextvars.ContextVar[Clock] = contextvars.ContextVar("clock", default=time.monotonic)


def now() -> float:
    """Seconds on the calibration's clock (time.monotonic unless a test set another)."""
    return _clock.get()()


@contextlib.contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Within this block every budget, deadline and share reads `clock`."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


class FakeClock:
    """A clock that moves only when told: a scripted run's seconds pass exactly."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


Progress = Callable[[str, float], None]   # (phase, fraction of budget used)


class Budget:
    """Wall-clock seconds for the whole calibration, and progress reports against it.
    `went`: where they went, seconds by phase (each tick closes the time since the last
    one under its phase's name: a family's sweep and trials, the wait for write-back,
    the record), which the calibration keeps and its output shows."""

    def __init__(self, total: float, progress: Optional[Progress] = None, spent: float = 0.0) -> None:
        self.total = total
        self.start = now() - spent     # seconds already spent (the probe)
        self.progress = progress
        self.went: Dict[str, float] = {}
        self._last = now()

    def used(self) -> float:
        return now() - self.start

    def left(self) -> float:
        return max(0.0, self.total - self.used())

    @property
    def end(self) -> float:
        """When the budget ends, on now()'s clock."""
        return self.start + self.total

    @contextlib.contextmanager
    def extended(self, seconds: float) -> Iterator[None]:
        """Within this block the budget is `seconds` longer (a grace, planner.owed_grace);
        after it, what the block spent past the budget's own end leaves nothing."""
        self.total += seconds
        try:
            yield
        finally:
            self.total -= seconds

    def tick(self, phase: str) -> None:
        t = now()
        self.went[phase] = self.went.get(phase, 0.0) + t - self._last
        self._last = t
        if self.progress:
            self.progress(phase, min(1.0, self.used() / self.total))
