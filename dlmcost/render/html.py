"""`--format html`: one self-contained page (header, tables, charts as inline SVG) for CI
artifacts and pull-request links. No network: no external scripts, styles, fonts or images;
the SVG draws its text as paths. The tables are the ones the terminal shows (`report.py`).

Every piece of text goes through `_text`: `safe_text.shown` (a model id's ESC, BEL or bidi override
is written as `\\x1b`, `\\x07`, `\\u202e`, as on the terminal), then HTML escaping (`<script>` is
text)."""

from __future__ import annotations

from html import escape

from . import report
from .charts import Chart
from ..safe_text import shown

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; background: #fff; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
pre.header { background: #f4f4f4; padding: .6em; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
caption { caption-side: bottom; text-align: left; color: #555; font-size: .85em; padding-top: .3em; }
.warning { color: #8a4b00; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
"""


def _text(value: object) -> str:
    """One piece of text for the page: control characters shown as escapes, then HTML-escaped."""
    return escape(shown(value, None))


def _lines(text: str) -> str:
    """Text of several lines (the `<pre>` header): each line as `_text`, the line breaks kept."""
    return "\n".join(_text(line) for line in str(text).split("\n"))


def table(headers: list[str], rows: list[list], caption: str | None = None) -> str:
    head = "".join(f"<th>{_text(h.replace(chr(10), ' '))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_text(report.plain(c))}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{_text(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figures(charts: list[Chart]) -> str:
    from . import plot

    return "".join(f'<figure id="chart-{_text(c.kind)}">{plot.inline_svg(c)}'
                   f"<figcaption>{_text(c.title)}</figcaption></figure>" for c in charts)


def page(title: str, header: str, sections: list[str], warnings: list[str] = ()) -> str:
    warn = "".join(f'<p class="warning">warning: {_text(w)}</p>' for w in warnings)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_text(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{_text(title)}</h1><pre class=\"header\">{_lines(header)}</pre>{warn}"
            + "".join(sections) + "</body></html>\n")


def analyze_page(a: dict, charts: list[Chart], show_ops: bool = False) -> str:
    sections = [table(report.ANALYZE_HEADERS, report.analyze_rows(a)), figures(charts)]
    for r in a["results"]:
        if not r.get("supported"):
            sections.append(f"<p>{_text(r['gpu'])}: {_text(r['error'])}</p>")
        elif show_ops:
            sections.append(f"<h2>{_text(r['gpu'])}: passes</h2>" + table(report.PASS_HEADERS, report.pass_rows(r)))
            sections.append(f"<h2>{_text(r['gpu'])}: ops over the whole generation</h2>"
                            + table(report.OP_HEADERS, report.op_rows(r)))
    return page(f"dlmcost analyze: {a['model']['id']}", report.analyze_header(a), sections, a.get("warnings", []))


def sweep_page(result: dict, rows: list[dict], shown: list[dict], charts: list[Chart]) -> str:
    headers, body = report.sweep_table(shown, rows)
    note = f"<p>showing {len(shown)} of {len(rows)} rows (--limit)</p>" if len(shown) < len(rows) else ""
    return page(f"dlmcost sweep: {result['model']['id']}", report.sweep_summary(result),
                [figures(charts), note, table(headers, body)])


def plan_page(p: dict, charts: list[Chart], top: int) -> str:
    """`plan --format html`: the header, the cost/latency chart, the ranked table and the AR baseline."""
    sections = [figures(charts)]
    if p["deployments"]:
        headers, rows = report.plan_table(p["deployments"][:top], len(p["search"]["decodings"]) > 1)
        sections.append("<h2>deployments meeting the targets</h2>" + table(headers, rows))
    if p["ar_baseline"]:
        headers, rows = report.plan_table(p["ar_baseline"][:3], False)
        sections.append("<h2>AR baseline at the same targets</h2>" + table(headers, rows))
    if not p["deployments"] and p.get("nearest_miss"):
        headers, rows = report.plan_table([p["nearest_miss"]], True)
        sections.append("<h2>no deployment meets the targets; nearest miss</h2>" + table(headers, rows))
    return page(f"dlmcost plan: {p['model']}", report.plan_header(p), sections)
