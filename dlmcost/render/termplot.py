"""Draw a `charts.Chart` as plain text for the terminal (`--plot -`, `dlmcost plot ...`).

A small renderer of its own rather than a terminal plotting library: the pictures need only
markers, lines, log axes and labels, and the light library that fits (plotext) changed its
whole API between 5.x and 6.x. Output is printable characters only (no colour escapes), so it
reads the same in a pipe, a log file or a CI page; series differ by marker and line character,
as in black and white.
"""

from __future__ import annotations

import math
import shutil

from .charts import Chart, Panel
from .labels import si

MARKER_CHARS = {"o": "o", "s": "#", "^": "^", "D": "D", "v": "v", "P": "+", "X": "X", "*": "*", "<": "<",
                ">": ">", "h": "h", "x": "x", "|": "|"}
# Each line with a legend entry gets its own character (the n-th such line the n-th of these).
# Lines without one (the bf16 roofs of the second and later GPUs) are left out: in a hundred
# columns they would bury the rest.
LINE_CHARS = ".:=~-'\"`;,"
Y_LABEL_WIDTH = 9
MAX_WIDTH = 120


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


class _Axis:
    """Maps data values to 0..cells-1 on a linear or log scale."""

    def __init__(self, values: list[float], cells: int, log: bool):
        vals = [v for v in values if (v > 0 if log else math.isfinite(v))]
        self.log = log and bool(vals)
        f = math.log10 if self.log else float
        lo, hi = (min(map(f, vals)), max(map(f, vals))) if vals else (0.0, 1.0)
        pad = (hi - lo) * 0.04 or (0.5 if self.log else abs(lo) * 0.1 or 1.0)
        # a linear axis of values none of which is negative (tokens/s, latency) starts at 0 at the
        # lowest: padded below it, it drew ticks no value can have (-114 tok/s)
        below = lo - pad if self.log or lo < 0 else max(lo - pad, 0.0)
        self.lo, self.hi, self.cells = below, hi + pad, cells

    def cell(self, v: float) -> int | None:
        if self.log and v <= 0:
            return None
        t = ((math.log10(v) if self.log else v) - self.lo) / (self.hi - self.lo)
        return round(t * (self.cells - 1)) if 0 <= t <= 1 else None

    def ticks(self) -> list[float]:
        if self.log:
            return [10.0 ** k for k in range(math.ceil(self.lo), math.floor(self.hi) + 1)]
        step = (self.hi - self.lo) / 4
        return [self.lo + step * i for i in range(5)]


def _label_spot(n: int, col: int, row: int, below: bool, width: int, height: int,
                taken: set[tuple[int, int]]) -> tuple[int, int]:
    """Row and first column of an n-character label for the point at (row, col): beside it,
    right of the point before left of it, on the row above (below: under) it, then further
    above and below; the first spot clear of every label placed before; else the first spot."""
    steps = (1, -1) if below else (-1, 1)
    rows = [row + k * s for k in range(1, 6) for s in steps]
    spots = [(r, c) for r in rows if 0 <= r < height
             for c in (min(col + 1, width - n), max(0, col - n)) if 0 <= c and c + n <= width]
    for r, c in spots:
        if not any((r, c + i) in taken for i in range(n)):
            return r, c
    return spots[0] if spots else (max(0, min(height - 1, row + steps[0])), max(0, min(col + 1, width - n)))


def render_panel(panel: Panel, width: int, height: int, y_values: list[float] | None = None) -> list[str]:
    """The panel as lines of text; `y_values`: what the y axis spans (default: the panel's own
    points; a chart whose panels share one scale passes every panel's)."""
    plot_w = max(20, width - Y_LABEL_WIDTH - 1)
    xs = [v for s in panel.series for v in s.x]
    ys = y_values if y_values is not None else [v for s in panel.series for v in s.y]
    ax, ay = _Axis(xs, plot_w, panel.xlog), _Axis(ys, height, panel.ylog)
    grid = [[" "] * plot_w for _ in range(height)]

    def put(x: float, y: float, ch: str) -> tuple[int, int] | None:
        cx, cy = ax.cell(x), ay.cell(y)
        if cx is None or cy is None:
            return None
        grid[height - 1 - cy][cx] = ch
        return cx, height - 1 - cy

    labelled = [s for s in panel.series if s.linestyle and s.label]
    line_char = {id(s): LINE_CHARS[i % len(LINE_CHARS)] for i, s in enumerate(labelled)}
    for s in labelled:  # lines first, markers on top
        ch = line_char[id(s)]
        for (x0, y0), (x1, y1) in zip(zip(s.x, s.y), zip(s.x[1:], s.y[1:])):
            fx = (lambda a, b, t: a * (b / a) ** t) if ax.log else (lambda a, b, t: a + (b - a) * t)
            fy = (lambda a, b, t: a * (b / a) ** t) if ay.log else (lambda a, b, t: a + (b - a) * t)
            for i in range(plot_w * 2 + 1):
                t = i / (plot_w * 2)
                put(fx(x0, x1, t), fy(y0, y1, t), ch)
    # cells holding a marker or a label's text: a label goes where it covers neither
    labelled = {(height - 1 - cy, cx) for s in panel.series if s.marker for x, y in zip(s.x, s.y)
                if (cx := ax.cell(x)) is not None and (cy := ay.cell(y)) is not None}
    for note in panel.notes:
        cx, cy = ax.cell(note.x), ay.cell(note.y)
        if cx is None or cy is None:
            continue
        text = _printable(note.text)[: plot_w - 1]
        r, start = _label_spot(len(text), cx, height - 1 - cy, note.below, plot_w, height, labelled)
        for i, c in enumerate(text):
            grid[r][start + i] = c
            labelled.add((r, start + i))
    for s in sorted(panel.series, key=lambda s: s.size):  # big (time-weighted) markers stay visible
        if s.marker:
            for x, y in zip(s.x, s.y):
                put(x, y, MARKER_CHARS.get(s.marker, "o"))

    yticks = {height - 1 - c: si(t) for t in ay.ticks() if (c := ay.cell(t)) is not None}
    lines = [_printable(panel.title)] if panel.title else []
    lines.append(_printable(panel.ylabel) + (" (log)" if ay.log else ""))
    for r, row in enumerate(grid):
        lines.append(f"{yticks.get(r, ''):>{Y_LABEL_WIDTH}}|" + "".join(row).rstrip())
    lines.append(" " * Y_LABEL_WIDTH + "+" + "-" * plot_w)
    axis = [" "] * (plot_w + 12)
    xticks = [(ax.cell(v), label) for v, label in panel.xticks] if panel.xticks else \
        [(ax.cell(t), si(t)) for t in ax.ticks()]
    for c, label in xticks:
        if c is not None and all(ch == " " for ch in axis[max(0, c - 1):c + len(label) + 1]):
            axis[c:c + len(label)] = list(_printable(label))
    lines.append(" " * (Y_LABEL_WIDTH + 1) + "".join(axis).rstrip())
    lines.append(" " * (Y_LABEL_WIDTH + 1) + _printable(panel.xlabel) + (" (log)" if ax.log else ""))
    keys = [f"{MARKER_CHARS.get(s.marker, '') if s.marker else ''}{line_char.get(id(s), '') * 2} "
            f"{_printable(s.label)}" for s in panel.series if s.label]
    lines += ["  " + k for k in keys]
    return lines


def render(chart: Chart, width: int | None = None, height: int = 22) -> str:
    width = min(MAX_WIDTH, width or shutil.get_terminal_size((100, 24)).columns)
    out = [_printable(chart.title)]
    shared = [v for p in chart.panels for s in p.series for v in s.y] if chart.shared_y else None
    for panel in chart.panels:
        out += [""] + render_panel(panel, width, height, shared)
    return "\n".join(out) + "\n"
