"""One way out for every command: the same data as JSON for machines or text for people.

Results go to stdout; progress and chatter to stderr.
"""
import json
import os
import shutil
import sys
import textwrap
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import click

MIN_WIDTH = 40          # narrower than this, text is not worth wrapping
MIN_COLUMN = 8          # a table column is never squeezed narrower


def width() -> Optional[int]:
    """The width people read this output at: COLUMNS, or the terminal's; None when the
    output goes to a file or a pipe with no COLUMNS (nothing is wrapped there)."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return max(MIN_WIDTH, int(cols))
    if sys.stdout.isatty():
        return max(MIN_WIDTH, shutil.get_terminal_size().columns)
    return None


# Marks a line fit() must leave as it is (a diff of bytes written: wrapped, it would
# show lines the file does not hold).
VERBATIM = "\0"


def verbatim(text: str) -> str:
    """text, each line marked for fit() to leave unwrapped."""
    return "\n".join(VERBATIM + line for line in text.split("\n"))


def fit(text: str, columns: Optional[int]) -> str:
    """Every line at most `columns` wide: a longer one is wrapped at spaces (a word
    longer than the line is cut), its continuations indented under its text; a line
    marked verbatim() is shown whole."""
    out: List[str] = []
    for line in text.split("\n"):
        if line.startswith(VERBATIM):
            out.append(line[len(VERBATIM):])
            continue
        if not columns or len(line) <= columns:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip())]
        hang = lead + "  " if len(lead) + 2 < columns // 2 else ""
        out += textwrap.wrap(line, columns, initial_indent="", subsequent_indent=hang,
                             break_long_words=True, break_on_hyphens=False,
                             drop_whitespace=True) or [""]
    return "\n".join(out)


# Every --json output says what it is in one form, "git-tune-<kind>/<version>" (a
# fleet profile's own since the start): the version changes when a field changes meaning
# or goes away; new fields may appear within a version.
SCHEMAS = {"probe": 1, "calibration": 2, "calibrations": 1, "recommendation": 1, "auto": 1,
           "verify": 1, "write": 1, "show": 1, "revert": 1, "profile": 1, "apply": 1,
           "fleet-merge": 1, "agent": 1, "agent-report": 1, "agent-retune": 1,
           "agent-log": 1}


def schema(kind: str) -> str:
    return f"git-tune-{kind}/{SCHEMAS[kind]}"


def say(text: str, err: bool = False) -> None:
    """One message for people. A name that is not UTF-8 (a directory, a file: git keeps
    bytes, Python holds them as surrogate escapes) goes out as the bytes it stands for, as
    git prints it, instead of failing the command on a UTF-8 terminal."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        click.echo(text.encode("utf-8", "surrogateescape"), err=err)
        return
    click.echo(text, err=err)


def emit(data: Dict[str, Any], as_json: bool, human: Callable[[Dict[str, Any]], str],
         kind: str) -> None:
    """The result: JSON with its `schema` first, or text for people fitted to the width."""
    if as_json:
        data = {"schema": schema(kind), **{k: v for k, v in data.items() if k != "schema"}}
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    else:
        say(fit(human(data), width()))


def chatter(message: str) -> None:
    """A progress line for people, on stderr, fitted to the width as the result is."""
    say(fit(message, width()), err=True)


def seconds(s: Optional[float]) -> str:
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


def counted(n: object, noun: str) -> str:
    """'1 thread', '2 threads': a count with its noun in the right number."""
    return f"{n} {noun}" if str(n) == "1" else f"{n} {noun}s"


def size(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], align: str = "",
          columns: Optional[int] = None) -> str:
    """A plain text table; align is one letter per column, 'l' or 'r' (default l). It
    fits `columns` (default: width()): the widest columns are narrowed, widest first,
    and their cells wrapped onto more lines of the row."""
    cells = [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    columns = width() if columns is None else columns
    if columns:
        widths = _narrowed(widths, columns - 2 * (len(widths) - 1))

    def lines(row_cells: Sequence[str]) -> List[str]:
        wrapped = [textwrap.wrap(c, widths[i], break_long_words=True, break_on_hyphens=False)
                   or [""] for i, c in enumerate(row_cells)]
        out = []
        for k in range(max(len(w) for w in wrapped)):
            row = []
            for i, w in enumerate(wrapped):
                c = w[k] if k < len(w) else ""
                right = i < len(align) and align[i] == "r"
                row.append(c.rjust(widths[i]) if right else c.ljust(widths[i]))
            out.append("  ".join(row).rstrip())
        return out

    sep = "  ".join("-" * w for w in widths)
    return "\n".join(lines(headers) + [sep] + [l for r in cells for l in lines(r)])


# The last column is the reason, prose that wraps well: it gives way first, down to this.
PROSE_COLUMN = 24


def _narrowed(widths: List[int], room: int) -> List[int]:
    """Column widths summing to at most `room`: the last (prose) column narrowed first,
    down to PROSE_COLUMN, then the widest, none below MIN_COLUMN (a table that cannot
    fit even so is left as wide as that). Names in the first columns stay whole where
    the prose can make room for them."""
    widths = list(widths)
    excess = sum(widths) - room
    if excess > 0 and widths[-1] > PROSE_COLUMN:
        widths[-1] = max(PROSE_COLUMN, widths[-1] - excess)
    while sum(widths) > room:
        i = max(range(len(widths)), key=lambda j: widths[j])
        if widths[i] <= MIN_COLUMN:
            break
        others = sorted(widths[:i] + widths[i + 1:], reverse=True)
        target = max(MIN_COLUMN, others[0] if others else MIN_COLUMN,
                     widths[i] - (sum(widths) - room))
        widths[i] = target if target < widths[i] else widths[i] - 1
    return widths


def progress(iterable: Optional[Iterable[Any]] = None, length: Optional[int] = None,
             label: str = "", enabled: bool = True) -> Any:
    """A progress bar on a terminal's stderr, nothing elsewhere (either is a context
    manager with update(n), iterable over `iterable`)."""
    if not enabled or not sys.stderr.isatty():
        return _Silent(iterable)
    return click.progressbar(iterable, length=length, label=label, file=sys.stderr)


class _Silent:
    def __init__(self, iterable: Optional[Iterable[Any]]) -> None:
        self.iterable = iterable

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.iterable or ())

    def update(self, n: int, current_item: object = None) -> None:
        pass
