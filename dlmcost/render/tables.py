"""Terminal tables, drawn by rich's Table, fitted to the width by dropping whole columns.

A narrow terminal loses the least important columns (a `priority`, named in a note under the
table) instead of seeing its numbers elided to '…'; a column of free text (a description) is
kept and wrapped by rich into the width that is left. Every cell is rich Text or plain
segments, never markup, with control characters escaped (safe_text.shown).

A table of one-line cells (analyze, sweep, plan: up to thousands of rows) goes to rich as one
body row whose cells are whole columns, each a `ColumnCells` of one line per row: rich lays
out and draws a Table cell by cell (about 2 ms a row of a sweep), so a 4,000-row sweep would
take seconds; as columns it keeps rich's widths, justification, header, rule and styles.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .output import Styled
from ..safe_text import shown

GAP = 2  # columns between two columns of a table (rich's right padding of each but the last)


@dataclass
class Column:
    header: str  # may hold '\n' (header lines, aligned at the bottom)
    priority: int  # 0 = never dropped; larger numbers are dropped first
    right: bool = True  # numbers are right-aligned
    same: str | None = None  # the value in every row, when it is the same (said when the column is dropped)
    wrap: bool = False  # free text: left-aligned and wrapped into the width the other columns leave
    min_width: int = 24  # a wrapped column narrower than this is dropped instead (if its priority allows)


def _printable(s: str) -> str:
    return s if s.isprintable() else shown(s, None)


def cell_lines(cell) -> list[str]:
    """A cell's lines, safe to show: a list or tuple of strings is one line each (the knobs of a
    scheme); a GPU or model name read from a user's file never moves the cursor."""
    if isinstance(cell, (list, tuple)):
        return [_printable(str(c)) for c in cell] or [""]
    return [_printable(str.__str__(cell) if isinstance(cell, str) else str(cell))]


def cell_style(cell) -> str:
    return cell.style if type(cell) is Styled else ""


def natural_widths(columns: list[Column], cells: list[list[list[str]]]) -> list[int]:
    """Each column's widest line, header included, in terminal columns (a wide character is two)."""
    from rich.cells import cell_len

    out = [max(cell_len(line) for line in c.header.split("\n")) for c in columns]
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


@lru_cache(maxsize=None)
def _style(name: str):
    from rich.style import Style

    return Style.parse(name) if name else None


@lru_cache(maxsize=None)
def ascii_segment():
    """rich's Segment for ASCII text without control codes, whose width is its length: rich
    measures every segment of every line several times as it lays a table out (the cell, the
    row, the printed line), through a cache of 4,096 strings that thousands of distinct cells
    overflow; the numbers are ASCII, so their width needs no lookup."""
    from rich.segment import Segment

    class AsciiSegment(Segment):
        __slots__ = ()

        @property
        def cell_length(self) -> int:
            return len(self.text)

    return AsciiSegment


class ColumnCells:
    """One column of one-line cells as a single rich renderable: each line padded to the
    column's width (right-aligned for numbers) in its cell's style, then `gap` spaces (the
    table around it has no padding of its own: rich would render every line again to add it)."""

    def __init__(self, lines: list[str], styles: list[str], width: int, right: bool, gap: int = 0,
                 styled_fill: bool = True):
        self.lines, self.styles, self.width, self.right, self.gap = lines, styles, width, right, gap
        self.styled_fill = styled_fill  # a left-aligned cell's fill in its style (rich: a cell's, not a header's)

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        return Measurement(self.width + self.gap, self.width + self.gap)

    def __rich_console__(self, console, options):
        from rich.cells import cell_len
        from rich.segment import Segment

        new_line, width, right, gap = Segment.line(), self.width, self.right, " " * self.gap
        Ascii = ascii_segment()
        for text, style in zip(self.lines, self.styles):
            ascii = text.isascii()
            fill = " " * (width - (len(text) if ascii else cell_len(text)))
            if not style:  # nearly every cell: one segment
                yield (Ascii if ascii else Segment)(fill + text + gap if right else text + fill + gap)
            elif right:  # styled as rich styles a Text cell: the text, and the fill after it
                yield Segment(fill)
                yield Segment(text, _style(style))
                yield Segment(gap)
            elif self.styled_fill:
                yield Segment(text + fill, _style(style))
                yield Segment(gap)
            else:
                yield Segment(text, _style(style))
                yield Segment(fill + gap)
            yield new_line


def header_lines(text: str, depth: int, width: int) -> tuple[list[str], list[str]]:
    """A column's header lines aligned at the bottom of `depth`, in bold, over a rule of the
    column's width (each column's rule its own: rich's box rules run on across the gaps)."""
    lines = text.split("\n")
    return [""] * (depth - len(lines)) + lines + ["─" * width], ["bold"] * depth + [""]


def build(columns: list[Column], rows: list[list], width: int | None, by_column: bool | None = None):
    """The rich Table of `rows` within `width` (None: every column), the names of the columns
    dropped to fit, and the width the kept columns need. `by_column`: one cell a column (the
    default when every cell is one line and no column wraps) or one a row."""
    from rich.table import Table
    from rich.text import Text

    cells = [[cell_lines(c) for c in r] for r in rows]
    natural = natural_widths(columns, cells)
    keep, dropped = fit(columns, natural, width)
    cols = [columns[i] for i in keep]
    need = sum(_needed(c, natural[i]) for i, c in zip(keep, cols)) + GAP * (len(keep) - 1)
    depth = max(len(c.header.split("\n")) for c in cols)
    if by_column is None:
        by_column = not any(c.wrap for c in cols) and all(len(lines) == 1 for row in cells for lines in row)
    if by_column:  # headers and cells as whole columns, each followed by the gap but the last
        table = Table(box=None, padding=0, show_header=True, header_style="")
        for k, (i, c) in enumerate(zip(keep, cols)):
            gap = GAP if k < len(cols) - 1 else 0
            lines, styles = header_lines(c.header, depth, natural[i])
            table.add_column(ColumnCells(lines, styles, natural[i], c.right, gap, styled_fill=False), no_wrap=True)
        if rows:
            table.add_row(*[ColumnCells([row[i][0] for row in cells], [cell_style(r[i]) for r in rows], natural[i],
                                        c.right, GAP if k < len(cols) - 1 else 0)
                            for k, (i, c) in enumerate(zip(keep, cols))])
        return table, dropped, need
    table = Table(box=None, pad_edge=False, padding=(0, GAP, 0, 0), show_header=True, header_style="")
    for i, c in zip(keep, cols):
        right = c.right and not c.wrap
        lines, styles = header_lines(c.header, depth, natural[i])
        head = Text(no_wrap=True, overflow="crop")  # the rule cut to the width rich gives a wrapped column
        for k, (line, style) in enumerate(zip(lines, styles)):
            head.append(("\n" if k else "") + line, style=style or None)
        table.add_column(head, justify="right" if right else "left", no_wrap=not c.wrap,
                         overflow="fold" if c.wrap else "crop")
    for raw, row in zip(rows, cells):
        table.add_row(*[Text("\n".join(row[i]), style=cell_style(raw[i])) for i in keep])
    return table, dropped, need


def draw(out, columns: list[Column], rows: list[list]) -> list[str]:
    """The table on `out` (an Output) within its width; returns the names of the columns dropped.
    Columns that are never dropped and still do not fit make the table wider than the terminal
    (rich would cut their numbers and names short)."""
    from .output import print_lines

    table, dropped, need = build(columns, rows, out.width)
    print_lines(out.console, table, max(out.console.width, need), laid_out=True)
    return dropped


def print_fitted(out, columns: list[Column], rows: list[list], caption: str | None = None,
                 title: str | None = None) -> None:
    """A table within the output's width: the least important columns are dropped whole (and
    named) rather than the numbers elided; free-text columns wrap. `title` above it in bold,
    `caption` below it dimmed."""
    if title is not None:
        out.line(shown(title, None), style="bold")
    dropped = draw(out, columns, rows)
    if dropped:
        out.line(f"(hidden at {out.width} columns: {', '.join(dropped)}; widen the terminal, set COLUMNS, "
                 f"or use --format csv)", style="dim")
    if caption:
        out.line(caption, style="dim")


def table_columns(headers: list[str], priority: list[int], left: int = 1) -> list[Column]:
    return [Column(h, p, right=i >= left) for i, (h, p) in enumerate(zip(headers, priority))]
