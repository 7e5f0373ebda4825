"""One way out for every command: the same data as JSON for machines or text for people.

Results go to stdout; progress and chatter to stderr.
"""
import json
import sys
from typing import Callable, Iterable, Sequence

import click


def emit(data: dict, as_json: bool, human: Callable[[dict], str]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    else:
        click.echo(human(data))


def chatter(message: str) -> None:
    click.echo(message, err=True)


def seconds(s) -> str:
    """A duration in the unit that reads best: 412 ns, 3.1 µs, 0.25 ms, 1.43 s."""
    if s is None:
        return "-"
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def size(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def table(headers: Sequence[str], rows: Iterable[Sequence], align: str = "") -> str:
    """A plain text table; align is one letter per column, 'l' or 'r' (default l)."""
    rows = [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        out = []
        for i, c in enumerate(cells):
            right = i < len(align) and align[i] == "r"
            out.append(c.rjust(widths[i]) if right else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


def progress(iterable=None, length=None, label: str = "", enabled: bool = True):
    """A progress bar on a terminal's stderr, nothing elsewhere."""
    if not enabled or not sys.stderr.isatty():
        return _Silent(iterable)
    return click.progressbar(iterable, length=length, label=label, file=sys.stderr)


class _Silent:
    def __init__(self, iterable):
        self.iterable = iterable

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(self.iterable)

    def update(self, n, current_item=None):
        pass
