"""JSON from files git-tune did not write this instant (its own state, git's events):
finite numbers only, bounded nesting, and one exception for every way it can be bad.

json.loads alone accepts NaN and Infinity, turns 1e400 into inf (and int(inf) raises
OverflowError later), and raises RecursionError on deep nesting: each would end a
long-lived collector in a traceback.
"""
import json
import math
from typing import Any, TypeGuard

MAX_DEPTH = 32


class BadJSON(ValueError):
    """Text that is not JSON git-tune accepts."""


def _reject_constant(name: str) -> Any:
    raise BadJSON(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJSON(f"number out of range: {text[:20]}")
    return value


def _finite_int(text: str) -> int:
    if len(text) > 30:              # past any count or time git-tune records
        raise BadJSON(f"number out of range: {text[:20]}...")
    return int(text)


def _depth_ok(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children)
    return True


def loads(text: "str | bytes", max_depth: int = MAX_DEPTH) -> Any:
    """The value of `text`, or BadJSON: not JSON, a non-finite or huge number, or nested
    deeper than `max_depth`."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                           parse_int=_finite_int)
    except BadJSON:
        raise
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise BadJSON(str(e)[:200]) from None
    if not _depth_ok(value, max_depth):
        raise BadJSON(f"nested deeper than {max_depth}")
    return value


def finite(value: Any, low: float = 0.0, high: float = math.inf) -> TypeGuard[float]:
    """Whether `value` is a number (not a bool) within [low, high]."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and low <= value <= high)
