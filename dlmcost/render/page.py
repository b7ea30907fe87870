"""The parts of an HTML page (`--format html`): one self-contained document (header, tables,
charts as inline SVG) for CI artifacts and pull-request links. No network: no external scripts,
styles, fonts or images; the SVG draws its text as paths. Which tables and charts a command's
page holds is its command's module's (`analyze_page`, `sweep_page`, `plan_page`, `serve_page`).

Every page opens with a summary line, every table has a legend of its columns (also each
header's tooltip), and a click on a header sorts the table by that column: a few lines of inline
script (`SORT_SCRIPT`), no library.

Every piece of text goes through `text`: `safe_text.shown` (a model id's ESC, BEL or bidi override
is written as `\\x1b`, `\\x07`, `\\u202e`, as on the terminal), then HTML escaping (`<script>` is
text)."""

from __future__ import annotations

from html import escape

from ..safe_text import shown

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; background: #fff; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
pre.header { background: #f4f4f4; padding: .6em; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: right; } td { white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
caption { caption-side: bottom; text-align: left; color: #555; font-size: .85em; padding-top: .3em; }
.warning { color: #8a4b00; }
p.summary { font-size: 1.05em; font-weight: 600; }
th[data-sort] { cursor: pointer; } th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
dl.legend { font-size: .8em; color: #444; display: grid; grid-template-columns: max-content auto;
  gap: .1em .8em; margin: .3em 0 1em; } dl.legend dt { font-weight: 600; } dl.legend dd { margin: 0; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
"""


def text(value: object) -> str:
    """One piece of text for the page: control characters shown as escapes, then HTML-escaped."""
    return escape(shown(value, None))


def lines(value: str) -> str:
    """Text of several lines (the `<pre>` header): each line as `text`, the line breaks kept."""
    return "\n".join(text(line) for line in str(value).split("\n"))


def plain(cell) -> str:
    """A cell as text: a styled one without its style, a multi-line one joined by newlines."""
    if isinstance(cell, (list, tuple)):
        return "\n".join(cell)
    return str.__str__(cell) if isinstance(cell, str) else str(cell)


# Sorts a table by the clicked header's column, again the other way on a second click. A column
# whose cells all read as numbers (digits with thousands commas, an SI suffix k/M/G/T/P, marks
# such as * or ! after them) sorts by value; any other by text, with the numbers inside compared
# as numbers (c=8 before c=32). Empty cells and "-" go last either way.
SORT_SCRIPT = """
(function () {
  var SI = {k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15};
  function value(s) {
    var m = /^([-+]?[0-9][0-9,]*(?:\\.[0-9]+)?(?:e[-+]?[0-9]+)?)([kMGTP]?)[*!]*$/.exec(s);
    return m ? parseFloat(m[1].replace(/,/g, "")) * (SI[m[2]] || 1) : null;
  }
  document.querySelectorAll("th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var body = th.closest("table").tBodies[0], i = th.cellIndex;
      var down = th.getAttribute("aria-sort") === "ascending";
      th.parentNode.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var rows = Array.prototype.slice.call(body.rows), cell = function (r) { return r.cells[i].textContent.trim(); };
      var numeric = rows.every(function (r) { var s = cell(r); return s === "" || s === "-" || value(s) !== null; });
      rows.sort(function (a, b) {
        var x = cell(a), y = cell(b), gone = (x === "" || x === "-") - (y === "" || y === "-");
        if (gone) return gone;
        var d = numeric ? value(x) - value(y) : x.localeCompare(y, "en", {numeric: true});
        return down ? -d : d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"""


def table(headers: list[str], rows: list[list], caption: str | None = None, legend: dict[str, str] | None = None,
          table_id: str | None = None) -> str:
    """A sortable table; `legend` maps each header (as written, line breaks and all) to what its
    column means: listed under the table and shown as the header's tooltip."""
    legend = legend or {}

    def head(h: str) -> str:
        tip = f' title="{text(legend[h])}"' if h in legend else ""
        return f"<th data-sort{tip}>{text(h.replace(chr(10), ' '))}</th>"

    body = "".join("<tr>" + "".join(f"<td>{text(plain(c))}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{text(caption)}</caption>" if caption else ""
    ident = f' id="{text(table_id)}"' if table_id else ""
    notes = "".join(f"<dt>{text(h.replace(chr(10), ' '))}</dt><dd>{text(legend[h])}</dd>"
                    for h in headers if h in legend)
    return (f"<table{ident}>{cap}<thead><tr>{''.join(map(head, headers))}</tr></thead><tbody>{body}</tbody></table>"
            + (f'<dl class="legend">{notes}</dl>' if notes else ""))


def figures(charts: list) -> str:
    """Each chart (a charts.Chart) as an inline SVG figure with its title as the caption."""
    from . import plot

    return "".join(f'<figure id="chart-{text(c.kind)}">{plot.inline_svg(c)}'
                   f"<figcaption>{text(c.title)}</figcaption></figure>" for c in charts)


def page(title: str, header: str, sections: list[str], warnings: list[str] = (), summary: str | None = None) -> str:
    """The document: the title, the summary line, the header (what was run), the warnings, the
    sections, and the script that sorts the tables."""
    warn = "".join(f'<p class="warning">warning: {text(w)}</p>' for w in warnings)
    said = f'<p class="summary" id="summary">{text(summary)}</p>' if summary else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{text(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{text(title)}</h1>{said}<pre class=\"header\">{lines(header)}</pre>{warn}"
            + "".join(sections) + f"<script>{SORT_SCRIPT}</script></body></html>\n")
