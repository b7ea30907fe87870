"""The parts of an HTML page (`--format html`): one self-contained document (header, tables,
charts as inline SVG) for CI artifacts and pull-request links. No network: no external scripts,
styles, fonts or images; the SVG draws its text as paths. Which tables and charts a command's
page holds is its command's module's (`analyze_page`, `sweep_page`, `plan_page`).

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
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
caption { caption-side: bottom; text-align: left; color: #555; font-size: .85em; padding-top: .3em; }
.warning { color: #8a4b00; }
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


def table(headers: list[str], rows: list[list], caption: str | None = None) -> str:
    head = "".join(f"<th>{text(h.replace(chr(10), ' '))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{text(plain(c))}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{text(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figures(charts: list) -> str:
    """Each chart (a charts.Chart) as an inline SVG figure with its title as the caption."""
    from . import plot

    return "".join(f'<figure id="chart-{text(c.kind)}">{plot.inline_svg(c)}'
                   f"<figcaption>{text(c.title)}</figcaption></figure>" for c in charts)


def page(title: str, header: str, sections: list[str], warnings: list[str] = ()) -> str:
    warn = "".join(f'<p class="warning">warning: {text(w)}</p>' for w in warnings)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{text(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{text(title)}</h1><pre class=\"header\">{lines(header)}</pre>{warn}"
            + "".join(sections) + "</body></html>\n")
