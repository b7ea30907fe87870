"""Plain-text tables for every table dlmcost prints on a terminal.

A handful of string joins (a 4,000-row sweep draws in milliseconds; rich laid out every cell at
about 2 ms a row). They fit the width they are given by dropping the least important columns,
whole, instead of eliding numbers to '…', and report which columns they dropped. A column of
free text (a description) is instead wrapped at word boundaries into the width that is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from .output import Styled, cell_len, pad, paint, wrap
from ..safe_text import shown

GAP = 2  # spaces between columns


@dataclass
class Column:
    header: str  # may hold one '\n' (two header lines)
    priority: int  # 0 = never dropped; larger numbers are dropped first
    right: bool = True  # numbers are right-aligned
    same: str | None = None  # the value in every row, when it is the same (said when the column is dropped)
    wrap: bool = False  # free text: left-aligned and wrapped into the width the other columns leave
    min_width: int = 24  # a wrapped column narrower than this is dropped instead (if its priority allows)


def _printable(s: str) -> str:
    """A GPU or model name read from a user's file must not move the cursor or ring the bell:
    control characters are shown escaped, as everywhere else (terminal.shown)."""
    return s if s.isprintable() else shown(s, None)


def _lines(cell) -> list[str]:
    """A cell's lines: a list or tuple of strings is one line each (the knobs of a scheme)."""
    if type(cell) is str:  # nearly every cell: the fast path
        return [cell if cell.isprintable() else shown(cell, None)]
    if isinstance(cell, (list, tuple)):
        return [_printable(str(c)) for c in cell] or [""]
    return [_printable(str.__str__(cell) if isinstance(cell, str) else str(cell))]


def _natural(columns: list[Column], cells: list[list[list[str]]]) -> list[int]:
    out = [max(len(line) for line in c.header.split("\n")) for c in columns]
    for row in cells:
        for i, lines in enumerate(row):
            for s in lines:
                n = len(s) if s.isascii() else cell_len(s)
                if n > out[i]:
                    out[i] = n
    return out


def _needed(column: Column, natural: int) -> int:
    """The width a column needs to be kept: a wrapped one can give up all but `min_width`."""
    return min(natural, max(column.min_width, len(column.header))) if column.wrap else natural


def fit(columns: list[Column], natural: list[int], width: int | None) -> tuple[list[int], list[str]]:
    """Indices of the columns kept within `width`, and the headers of those dropped
    (highest priority number first, the rightmost of equals first)."""
    need = [_needed(c, n) for c, n in zip(columns, natural)]
    keep = list(range(len(columns)))
    dropped = []
    if width is None:
        return keep, dropped
    order = sorted((i for i, c in enumerate(columns) if c.priority > 0), key=lambda i: (-columns[i].priority, -i))
    for i in order:
        if sum(need[k] for k in keep) + GAP * (len(keep) - 1) <= width:
            break
        keep.remove(i)
        name = columns[i].header.replace("\n", " ")
        dropped.append(f"{name} (= {columns[i].same} in every row)" if columns[i].same is not None else name)
    return keep, dropped


def _widths(cols: list[Column], natural: list[int], width: int | None) -> list[int]:
    """Column widths: natural, except that wrapped columns share what the others leave of `width`,
    never less than the width `fit` counted them at."""
    wrapped = [j for j, c in enumerate(cols) if c.wrap]
    if width is None or not wrapped:
        return natural
    out = list(natural)
    spare = width - GAP * (len(cols) - 1) - sum(n for j, n in enumerate(natural) if j not in wrapped)
    for k, j in enumerate(sorted(wrapped, key=lambda j: natural[j])):  # the narrowest take their fill first
        out[j] = max(min(natural[j], spare // (len(wrapped) - k)), _needed(cols[j], natural[j]))
        spare -= out[j]
    return out


def draw(columns: list[Column], rows: list[list], width: int | None, color: bool) -> tuple[str, list[str]]:
    """The table as text within `width` (None: every column, unwrapped), and the names of the
    columns dropped to fit. Text: the header lines (bold when `color`), a rule, the rows; styled
    cells keep their style when `color` is on (a terminal that takes colour)."""
    cells = [[_lines(c) for c in r] for r in rows]
    keep, dropped = fit(columns, _natural(columns, cells), width)
    cols = [columns[i] for i in keep]
    cells = [[row[i] for i in keep] for row in cells]
    w = _widths(cols, _natural(cols, cells), width)
    heads = [c.header.split("\n") for c in cols]
    depth = max(len(h) for h in heads)
    gap = " " * GAP
    lines = []
    for level in range(depth):
        parts = []
        for c, h, cw in zip(cols, heads, w):
            text = h[level - (depth - len(h))] if level >= depth - len(h) else ""
            parts.append(text.rjust(cw) if c.right and not c.wrap else text.ljust(cw))
        line = gap.join(parts).rstrip()
        lines.append(paint(line, "bold") if color else line)
    lines.append(gap.join("─" * cw for cw in w))
    right = [c.right and not c.wrap for c in cols]
    wraps = [j for j, c in enumerate(cols) if c.wrap]
    for raw, row in zip(rows, cells):
        for j in wraps:
            row[j] = [piece for s in row[j] for piece in wrap(s, w[j])]
        styles = [raw[i].style if color and type(raw[i]) is Styled else None for i in keep]
        if all(len(lines_) == 1 for lines_ in row):  # one line: the common case, kept quick
            parts = [((s[0].rjust(cw) if r else s[0].ljust(cw)) if s[0].isascii() else pad(s[0], cw, r))
                     for s, cw, r in zip(row, w, right)]
            if color:
                parts = [paint(p, st) for p, st in zip(parts, styles)]
            lines.append(gap.join(parts).rstrip())
            continue
        for k in range(max(len(b) for b in row)):
            parts = []
            for s, cw, r, st in zip(row, w, right, styles):
                parts.append(paint(pad(s[k], cw, r), st) if k < len(s) else " " * cw)
            lines.append(gap.join(parts).rstrip())
    return "\n".join(lines) + "\n", dropped
