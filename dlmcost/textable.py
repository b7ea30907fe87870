"""Fast plain-text tables for results that can run to thousands of rows (analyze, sweep).

rich lays out every cell of a Table (about 2 ms a row), so a 4,000-row sweep took seconds to
draw; these tables are a handful of string joins. They also fit the width they are given by
dropping the least important columns, whole, instead of eliding the numbers to '…', and report
which columns they dropped.
"""

from __future__ import annotations

from .terminal import shown

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

GAP = 2  # spaces between columns


@dataclass
class Column:
    header: str  # may hold one '\n' (two header lines)
    priority: int  # 0 = never dropped; larger numbers are dropped first
    right: bool = True  # numbers are right-aligned
    same: str | None = None  # the value in every row, when it is the same (said when the column is dropped)


def _printable(s: str) -> str:
    """A GPU or model name read from a user's file must not move the cursor or ring the bell:
    control characters are shown escaped, as everywhere else (terminal.shown)."""
    return s if s.isprintable() else shown(s, None)


def _plain(cell) -> str:
    return _printable(cell.plain if isinstance(cell, Text) else str(cell))


def widths(columns: list[Column], cells: list[list[str]]) -> list[int]:
    out = [max(len(line) for line in c.header.split("\n")) for c in columns]
    for row in cells:
        for i, s in enumerate(row):
            if len(s) > out[i]:
                out[i] = len(s)
    return out


def fit(columns: list[Column], rows: list[list], width: int | None) -> tuple[list[int], list[str]]:
    """Indices of the columns kept within `width`, and the headers of those dropped
    (highest priority number first, the rightmost of equals first)."""
    cells = [[_plain(c) for c in r] for r in rows]
    w = widths(columns, cells)
    keep = list(range(len(columns)))
    dropped = []
    if width is None:
        return keep, dropped
    order = sorted((i for i, c in enumerate(columns) if c.priority > 0), key=lambda i: (-columns[i].priority, -i))
    for i in order:
        if sum(w[k] for k in keep) + GAP * (len(keep) - 1) <= width:
            break
        keep.remove(i)
        name = columns[i].header.replace("\n", " ")
        dropped.append(f"{name} (= {columns[i].same} in every row)" if columns[i].same is not None else name)
    return keep, dropped


def render(columns: list[Column], rows: list[list], keep: list[int], color_system: str | None) -> str:
    """The table as text: two header lines, a rule, the rows. Styled cells (rich Text) keep their
    style when `color_system` is set (a terminal that takes colour), and are plain otherwise."""
    cols = [columns[i] for i in keep]
    cells = [[_plain(r[i]) for i in keep] for r in rows]
    w = widths(cols, cells)
    heads = [c.header.split("\n") for c in cols]
    depth = max(len(h) for h in heads)
    lines = []
    for level in range(depth):
        parts = []
        for c, h, width in zip(cols, heads, w):
            text = h[level - (depth - len(h))] if level >= depth - len(h) else ""
            parts.append(text.rjust(width) if c.right else text.ljust(width))
        line = (" " * GAP).join(parts).rstrip()
        lines.append(Style(bold=True).render(line, color_system=color_system) if color_system else line)
    lines.append((" " * GAP).join("─" * width for width in w))
    styled = color_system is not None
    for raw, row in zip(rows, cells):
        parts = []
        for j, (i, c, width) in enumerate(zip(keep, cols, w)):
            s = row[j].rjust(width) if c.right else row[j].ljust(width)
            cell = raw[i]
            if styled and isinstance(cell, Text) and cell.style:
                s = Style.parse(str(cell.style)).render(s, color_system=color_system)
            parts.append(s)
        lines.append((" " * GAP).join(parts).rstrip())
    return "\n".join(lines) + "\n"
