"""Draw a `charts.Chart` with matplotlib: PNG or SVG files, and SVG text for the HTML page.

matplotlib comes with the optional `plot` extra and is imported only here, when a picture is
asked for; `require()` turns its absence into one line saying how to install it.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

from .charts import GRAY, Chart
from .labels import si
from ..errors import MissingExtraError, UsageError, install_hint
from ..safe_text import shown

FILE_FORMATS = (".png", ".svg")
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
PANEL_SIZE_IN = (6.4, 4.6)
PANELS_PER_ROW = 3
NOTE_FONT_PT = 7
# What a panel's frame takes from its share of the figure, in points, kept on the generous side
# (the constrained layout usually leaves the axes more): tick labels and the axis label left and
# below, the figure's title, the legend's handle and padding. `_place` reads the axes this much
# smaller than they are, so labels it keeps apart stay apart.
FRAME_PT = dict(left=70, bottom=52, title=30, panel_title=14, legend_extra=40)


def require(what: str = "--plot") -> None:
    """Fail with one line (exit 9) before any work when matplotlib is missing, or is there but
    fails to load: any exception from its import (a RuntimeError, a broken matplotlibrc, a
    package half upgraded) is the plot extra's failure, with its reason, not a dlmcost bug."""
    try:
        import matplotlib  # noqa: F401
        import matplotlib.figure  # noqa: F401 - what figure() draws with; loaded here, before any work
    except ImportError:
        raise MissingExtraError(f"{what} needs matplotlib, which is not installed: {install_hint('plot')}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the installed matplotlib raises
        reason = " ".join(str(exc).split()) or "no message"
        raise MissingExtraError(
            f"{what} needs matplotlib, which failed to load ({type(exc).__name__}: {shown(reason)}): "
            f"check MPLCONFIGDIR and its matplotlibrc, or reinstall: {install_hint('plot')}") from None


def check_path(path: str) -> Path:
    out = Path(path)
    if out.suffix.lower() not in FILE_FORMATS:
        raise UsageError(f"--plot: '{path}' must end in {' or '.join(FILE_FORMATS)} (or be - for the terminal)")
    if not out.parent.is_dir():
        if out.parent.exists():
            raise UsageError(f"--plot: '{shown(out.parent)}' is not a folder")
        raise UsageError(f"--plot: folder '{shown(out.parent)}' does not exist")
    return out


def color(index: int) -> str:
    return "#7f7f7f" if index == GRAY else PALETTE[index % len(PALETTE)]


def _text(value: str) -> str:
    """Text for matplotlib: control characters shown as escapes (a model id's ESC would reach the
    SVG), and every `$` literal (an even number of them would start mathtext, which can fail to parse)."""
    return shown(value, None).replace("$", r"\$")


def _log_tick_labels(axis) -> None:
    """A log axis labelled as the tables write numbers (1k, 10T, 1P), not 10^3 in mathtext: the
    same words on the chart as in the table, and a drawing about twice as fast (mathtext parses
    every tick label). Decades carry the labels; the ticks between them (2-9 x 10^n) only when
    the axis spans less than a decade and may show no decade at all: 2 and 5 x 10^n, or every
    one on an axis narrower than a factor of 3."""
    from matplotlib.ticker import Formatter

    class Decades(Formatter):
        def __call__(self, x, pos=None):
            return si(x)

    class Between(Formatter):
        def __call__(self, x, pos=None):
            lo, hi = sorted(self.axis.get_view_interval())
            if x <= 0 or lo <= 0 or hi >= 10 * lo:
                return ""
            lead = round(x / 10 ** math.floor(math.log10(x)))
            return si(x) if hi < 3 * lo or lead in (2, 5) else ""

    axis.set_major_formatter(Decades())
    axis.set_minor_formatter(Between())


def _text_size(text: str, size: float = NOTE_FONT_PT) -> tuple[float, float]:
    """Width and height of one line of text in points, from the font's metrics (no drawing)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    w, h, d = TextToPath().get_text_width_height_descent(text, FontProperties(size=size), ismath=False)
    return w, h + d


def _fraction(value: float, lo: float, hi: float, log: bool) -> float:
    if log:
        value, lo, hi = (math.log10(max(v, 1e-300)) for v in (value, lo, hi))
    return (value - lo) / (hi - lo) if hi != lo else 0.5


def _overlap(a: tuple, b: tuple) -> float:
    """Area shared by two boxes (x0, y0, x1, y1)."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _place(ax, notes: list, size_pt: tuple[float, float]) -> list[tuple[float, float, str, str]]:
    """Where each note's text goes, as (dx, dy) points from its point and its alignment: the first
    of a list of spots (beside the point, then stacked further above and below it; right of it,
    left of it, centred over it) whose box stays inside the axes and clear of the labels placed before it and of
    the other notes' points; else the spot that overlaps least. `size_pt`: the axes' size in
    points (an underestimate: see FRAME_PT)."""
    width, height = size_pt
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    xlog, ylog = ax.get_xscale() == "log", ax.get_yscale() == "log"
    anchors = [(_fraction(n.x, x0, x1, xlog) * width, _fraction(n.y, y0, y1, ylog) * height) for n in notes]
    taken = [(x - 2, y - 2, x + 2, y + 2) for x, y in anchors]  # every labelled point stays visible
    out = []
    for note, (px, py) in zip(notes, anchors):
        w, h = _text_size(_text(note.text))
        vertical = ("below", "above") if note.below else ("above", "below")
        spots = [(side, way, k) for k in range(9) for side in ("right", "left", "center") for way in vertical]
        best, best_cost = None, math.inf
        for side, way, k in spots:
            dx = {"right": 4, "left": -4, "center": 0}[side]
            dy = (4 + k * (h + 2)) * (1 if way == "above" else -1)
            left = {"right": px + dx, "left": px + dx - w, "center": px - w / 2}[side]
            bottom = py + dy if way == "above" else py + dy - h
            box = (left - 1, bottom - 1, left + w + 1, bottom + h + 1)
            outside = (max(0.0, -box[0]) + max(0.0, box[2] - width)) * h + (max(0.0, -box[1]) + max(0.0, box[3] - height)) * w
            cost = outside + sum(_overlap(box, t) for t in taken)
            if cost < best_cost:
                best, best_cost = (dx, dy, side, way, box), cost
            if cost == 0:
                break
        dx, dy, side, way, box = best
        taken.append(box)
        out.append((dx, dy, {"right": "left", "left": "right", "center": "center"}[side],
                    "bottom" if way == "above" else "top"))
    return out


def _axes_size_pt(fig, cols: int, rows: int, legend_labels: list[str], titled: bool) -> tuple[float, float]:
    """The size one panel's axes get at least, in points: the figure's share less FRAME_PT and the
    legend beside it."""
    fw, fh = (v * 72 for v in fig.get_size_inches())
    legend = max((_text_size(label)[0] for label in legend_labels), default=-FRAME_PT["legend_extra"])
    width = fw / cols - FRAME_PT["left"] - legend - FRAME_PT["legend_extra"]
    height = (fh - FRAME_PT["title"]) / rows - FRAME_PT["bottom"] - (FRAME_PT["panel_title"] if titled else 0)
    return max(width, 50.0), max(height, 50.0)


def figure(chart: Chart):
    """A matplotlib Figure (no pyplot, no GUI backend) with one Axes per panel."""
    from matplotlib.figure import Figure

    n = len(chart.panels)
    cols = min(n, chart.per_row or PANELS_PER_ROW)
    rows = -(-n // cols)
    fig = Figure(figsize=(PANEL_SIZE_IN[0] * cols + 2.2, PANEL_SIZE_IN[1] * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=chart.shared_y)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    fig.suptitle(_text(chart.title), fontsize=10)
    for ax, panel in zip(axes.flat, chart.panels):
        for s in panel.series:
            c = color(s.color)
            (line,) = ax.plot(s.x, s.y, linestyle=s.linestyle or "none", marker=s.marker or "None", color=c,
                              markersize=s.size, markerfacecolor=c if s.filled else "none", markeredgecolor=c,
                              label=_text(s.label) if s.label else "_nolegend_", linewidth=s.width, alpha=0.9)
            if s.gid:
                line.set_gid(s.gid)
        if panel.xlog:
            ax.set_xscale("log")
            _log_tick_labels(ax.xaxis)
        if panel.ylog:
            ax.set_yscale("log")
            _log_tick_labels(ax.yaxis)
        if panel.xticks:
            ax.set_xticks([t for t, _ in panel.xticks], [_text(label) for _, label in panel.xticks])
            ax.minorticks_off() if not panel.xlog else ax.xaxis.set_minor_formatter("")
        ax.set_xlabel(_text(panel.xlabel))
        ax.set_ylabel(_text(panel.ylabel))
        if panel.title:
            ax.set_title(_text(panel.title), fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        labels = [s.label for s in panel.series if s.label]
        if labels:
            legend = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            for handle in legend.legend_handles:  # markers sized by time share: one size in the legend
                handle.set_markersize(7)
        size = _axes_size_pt(fig, cols, rows, [_text(label) for label in labels], bool(panel.title))
        for note, (dx, dy, ha, va) in zip(panel.notes, _place(ax, panel.notes, size)):
            leader = dict(arrowstyle="-", linewidth=0.4, color="#7f7f7f") if abs(dy) > 8 else None
            ax.annotate(_text(note.text), (note.x, note.y), textcoords="offset points", xytext=(dx, dy), ha=ha, va=va,
                        fontsize=NOTE_FONT_PT, arrowprops=leader)
    return fig


def save(chart: Chart, path: str) -> None:
    out = check_path(path)
    fig = figure(chart)
    try:
        if out.suffix.lower() == ".svg":
            out.write_text(svg(chart, fig), encoding="utf-8")
        else:
            fig.savefig(out, format="png", dpi=110, metadata={"Software": None})
    except OSError as exc:
        raise UsageError(f"--plot: cannot write '{path}': {exc.strerror or exc}") from None


def svg(chart: Chart, fig=None) -> str:
    """Standalone SVG text: text as paths (no fonts needed), no timestamp, fixed ids."""
    import matplotlib

    fig = fig or figure(chart)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "dlmcost"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return _with_tips(buf.getvalue(), chart)


def _with_tips(text: str, chart: Chart) -> str:
    """Each point of a series with `tips` gets its text as an SVG <title> (a browser shows it on
    hover): matplotlib writes a series' markers as one <use> per point, in order, in its gid's group."""
    from html import escape

    for s in (s for p in chart.panels for s in p.series if s.tips and s.gid):
        start = text.find(f'<g id="{escape(s.gid)}">')
        if start < 0:
            continue
        head, tail = text[:start], text[start:]
        uses = iter(s.tips)

        def titled(m: re.Match) -> str:
            tip = next(uses, None)
            return m.group(0) if tip is None else f"{m.group(1)}><title>{escape(shown(tip, None))}</title></use>"

        tail = re.sub(r'(<use [^>]*?)\s*/>', titled, tail, count=len(s.tips))
        text = head + tail
    return text


def inline_svg(chart: Chart) -> str:
    """The SVG element alone, for embedding in HTML: no XML prolog, DOCTYPE (which names a DTD
    URL), RDF metadata block or comments (matplotlib repeats each text drawn as paths in one)."""
    text = svg(chart)
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return re.sub(r"\s*<!--.*?-->", "", text, flags=re.S)
