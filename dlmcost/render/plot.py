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


def figure(chart: Chart):
    """A matplotlib Figure (no pyplot, no GUI backend) with one Axes per panel."""
    from matplotlib.figure import Figure

    n = len(chart.panels)
    cols = min(n, PANELS_PER_ROW)
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
        for note in panel.notes:
            ax.annotate(_text(note.text), (note.x, note.y), textcoords="offset points", xytext=(4, -4 if note.below else 4),
                        va="top" if note.below else "baseline", fontsize=7)
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
        if any(s.label for s in panel.series):
            legend = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            for handle in legend.legend_handles:  # markers sized by time share: one size in the legend
                handle.set_markersize(7)
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
    return buf.getvalue()


def inline_svg(chart: Chart) -> str:
    """The SVG element alone, for embedding in HTML: no XML prolog, DOCTYPE (which names a DTD
    URL), RDF metadata block or comments (matplotlib repeats each text drawn as paths in one)."""
    text = svg(chart)
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return re.sub(r"\s*<!--.*?-->", "", text, flags=re.S)
