"""Terminal tables, drawn by rich, fitted to the width by dropping whole columns.

A narrow terminal loses the least important columns (a `priority`, named in a note under the
table) instead of seeing its numbers elided to '…'; a column of free text (a description) is
kept and wrapped by rich into the width that is left. Every cell is rich Text or plain
segments, never markup, with control characters escaped (safe_text.shown).

A table of one-line cells (analyze, sweep, plan: up to tens of thousands of rows) is laid out
here, column by column: each column's texts, styles and width are found from the column as a
whole (one check that it is printable, one that it is ASCII, its widest line), and every line
goes to rich's Console as the segments rich's Table would draw for it, cell by cell (a test holds
the two to the same text, colours included). rich lays out and draws a Table cell by cell (about
2 ms a row of a sweep, and it measures every cell twice), so a 72,000-row sweep would take
seconds; laid out here it keeps rich's widths, justification, header, rule and styles.
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


def header_lines(text: str, depth: int, width: int) -> tuple[list[str], list[str]]:
    """A column's header lines aligned at the bottom of `depth`, in bold, over a rule of the
    column's width (each column's rule its own: rich's box rules run on across the gaps)."""
    lines = text.split("\n")
    return [""] * (depth - len(lines)) + lines + ["─" * width], ["bold"] * depth + [""]


def _texts(values: tuple) -> tuple[list[str], list[str]] | None:
    """A column's texts (safe to show) and styles when every cell is one line (None otherwise):
    the checks made once over the whole column where it allows (the usual column of numbers and
    names: plain strings, printable)."""
    kinds = set(map(type, values))
    if kinds <= {str}:
        texts = list(values)
    elif not kinds & {list, tuple}:
        texts = [str.__str__(v) if isinstance(v, str) else str(v) for v in values]
    else:
        lines = [cell_lines(v) for v in values]
        if any(len(cell) > 1 for cell in lines):
            return None
        return [cell[0] for cell in lines], [cell_style(v) for v in values]
    if not "".join(texts).isprintable():
        texts = [_printable(t) for t in texts]
    styles = [cell_style(v) for v in values] if Styled in kinds else [""] * len(values)
    return texts, styles


def _widest(texts: list[str]) -> int:
    """The widest of `texts` in terminal columns (a wide character is two)."""
    if not texts:
        return 0
    if "".join(texts).isascii():
        return max(map(len, texts))
    from rich.cells import cell_len

    return max(cell_len(t) for t in texts)


class LaidOut:
    """A table of one-line cells laid out here: header lines aligned at the bottom in bold, a
    rule under each column as wide as it, then the rows, each column padded to its width
    (right-aligned for numbers) in its cell's style and followed by GAP spaces (none after the
    last). It yields, line by line, the segments rich's Table yields for the same table drawn cell
    by cell (text and fill in a cell's style, the gap plain; a header's fill plain), with the plain
    ones run together: the Console writes the same text, escape codes and all."""

    def __init__(self, columns: list[Column], texts: list[list[str]], styles: list[list[str]], widths: list[int]):
        self.columns, self.texts, self.styles, self.widths = columns, texts, styles, widths

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        width = sum(self.widths) + GAP * (len(self.widths) - 1)
        return Measurement(width, width)

    def _lines(self):
        """(texts, styles, styled fill) of each line: the header's lines and rule, then the rows."""
        depth = max(len(c.header.split("\n")) for c in self.columns)
        heads = [header_lines(c.header, depth, w) for c, w in zip(self.columns, self.widths)]
        for k in range(depth + 1):
            yield [h[0][k] for h in heads], [h[1][k] for h in heads], False
        for row in zip(*self.texts):
            yield row, None, True

    def _plain(self) -> str:
        """Every line as text, column by column: what the Console writes when it shows no style
        (a pipe, NO_COLOR), where a style changes no character."""
        last = len(self.columns) - 1
        depth = max(len(c.header.split("\n")) for c in self.columns)
        columns = []
        for k, (c, texts, width) in enumerate(zip(self.columns, self.texts, self.widths)):
            gap = " " * GAP if k < last else ""
            cells = [_padded(t, width, c.right) + gap for t in header_lines(c.header, depth, width)[0]]
            if "".join(texts).isascii():  # (str's own padding counts characters: one column each here)
                pad = str.rjust if c.right else str.ljust
                cells += [pad(t, width) + gap for t in texts]
            else:
                cells += [_padded(t, width, c.right) + gap for t in texts]
            columns.append(cells)
        return "\n".join(map("".join, zip(*columns))) + "\n"

    def __rich_console__(self, console, options):
        from rich.segment import Segment

        if console.color_system is None:  # (rich's Style.render returns the text itself then)
            yield Segment(self._plain())
            return
        last, widths, rights = len(self.columns) - 1, self.widths, [c.right for c in self.columns]
        body_styles = list(zip(*self.styles)) if any(any(s) for s in self.styles) else None
        gaps = [" " * GAP] * last + [""]
        row_index = -1
        for texts, styles, styled_fill in self._lines():
            if styles is None:
                row_index += 1
                styles = body_styles[row_index] if body_styles is not None else None
            plain = []  # unstyled text, run together until a styled segment or the line's end
            for k, text in enumerate(texts):
                fill = " " * (widths[k] - (len(text) if text.isascii() else _cell_len(text)))
                style = styles[k] if styles is not None else ""
                if not style:
                    plain.append(fill + text + gaps[k] if rights[k] else text + fill + gaps[k])
                    continue
                if rights[k]:
                    plain.append(fill)
                    yield Segment("".join(plain))
                    yield Segment(text, _style(style))
                    plain = [gaps[k]]
                elif styled_fill:
                    yield Segment("".join(plain))
                    yield Segment(text + fill, _style(style))
                    plain = [gaps[k]]
                else:
                    yield Segment("".join(plain))
                    yield Segment(text, _style(style))
                    plain = [fill + gaps[k]]
            plain.append("\n")
            yield Segment("".join(plain))


def _cell_len(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def _padded(text: str, width: int, right: bool) -> str:
    """`text` filled with spaces to `width` terminal columns, on the left if `right`."""
    fill = " " * (width - (len(text) if text.isascii() else _cell_len(text)))
    return fill + text if right else text + fill


def build(columns: list[Column], rows: list[list], width: int | None, by_column: bool | None = None):
    """What draws `rows` within `width` (None: every column), the names of the columns dropped to
    fit, and the width the kept columns need. `by_column`: laid out here (`LaidOut`: the default
    when every cell is one line and no column wraps) or drawn by rich's Table cell by cell."""
    laid = None
    if by_column is not False and not any(c.wrap for c in columns):
        laid = [_texts(col) for col in zip(*rows)] if rows else [([], []) for _ in columns]
        if any(t is None for t in laid):
            laid = None
    if laid is not None:
        natural = [max(_widest(texts), _widest(c.header.split("\n"))) for c, (texts, _) in zip(columns, laid)]
        keep, dropped = fit(columns, natural, width)
        need = sum(natural[i] for i in keep) + GAP * (len(keep) - 1)
        return LaidOut([columns[i] for i in keep], [laid[i][0] for i in keep], [laid[i][1] for i in keep],
                       [natural[i] for i in keep]), dropped, need
    return _by_row(columns, rows, width)


def _by_row(columns: list[Column], rows: list[list], width: int | None):
    """`build` by rich's Table, one cell a cell (multi-line cells, wrapped columns)."""
    from rich.table import Table
    from rich.text import Text

    cells = [[cell_lines(c) for c in r] for r in rows]
    natural = natural_widths(columns, cells)
    keep, dropped = fit(columns, natural, width)
    cols = [columns[i] for i in keep]
    need = sum(_needed(c, natural[i]) for i, c in zip(keep, cols)) + GAP * (len(keep) - 1)
    depth = max(len(c.header.split("\n")) for c in cols)
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
    # laid out here, its lines are printed as they are, however wide; rich lays a Table out at the width
    print_lines(out.console, table, None if isinstance(table, LaidOut) else max(out.console.width, need), laid_out=True)
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
