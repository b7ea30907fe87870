"""The formats every command writes (`--format`), and the machine ones: JSON, CSV and Markdown
from plain rows. A streamed sweep's CSV and JSONL are columns.py's."""

from __future__ import annotations

import io
import json
from typing import Any, Iterable

from .cells import safe

FORMATS = ("table", "json", "csv", "markdown", "html")
CHART_FORMATS = ("html",)  # formats only the commands that draw charts offer (analyze, sweep, plan, serve)


def _jsonable(o: Any):
    if hasattr(o, "model_dump"):  # typed result records
        return o.model_dump()
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=_jsonable, allow_nan=False)


def typed_json(command: str, document) -> str:
    """A command's `--format json`, through its typed record (dlmcost/documents.py): the keys
    printed are the keys `dlmcost schema COMMAND` documents."""
    from .. import documents

    return to_json(documents.plain(command, document)) + "\n"


CSV_LIST_SEPARATOR = ";"  # a list in one cell (a scheme's knobs): steps;block, never Python's ['steps', 'block']


def csv_cell(value):
    """A value as a CSV cell: text made safe, a list joined by CSV_LIST_SEPARATOR."""
    if isinstance(value, (list, tuple)):
        value = CSV_LIST_SEPARATOR.join(str(v) for v in value)
    return safe(value) if isinstance(value, str) else value


def to_csv(rows: list[dict]) -> str:
    import csv  # only for --format csv

    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return buf.getvalue()


def markdown_text(text: str) -> str:
    """Markdown prose made inert: control characters escaped line by line (`Output.write` writes
    Markdown as it is), `&`, `<` and `>` as entities and brackets escaped (`_inert`), so that a
    name from input holding `<script>`, `<img onerror=...>` or a link renders as the text it is
    wherever the Markdown is shown (dlmcost's own Markdown holds no HTML and no links)."""
    return _inert("\n".join(safe(line) for line in text.split("\n")))


def _inert(text: str) -> str:
    """`&`, `<`, `>` as entities (no HTML), `[` and `]` escaped (no link or image: a name such as
    `[x](javascript:...)` or `![](https://tracker/...)` shows as typed)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("[", "\\[").replace("]", "\\]"))


def markdown_cell(value) -> str:
    """A table cell: control characters escaped, inert as prose, and `|` escaped, so that a name
    holding one does not split its row into more cells."""
    return _inert(safe(value)).replace("|", "\\|")


def to_markdown(headers: list[str], rows: Iterable[list[str]], right: Iterable[bool] | None = None) -> str:
    """A pipe table; `right` marks the columns to right-align (numbers)."""
    align = list(right) if right is not None else [False] * len(headers)
    lines = ["| " + " | ".join(markdown_cell(h.replace("\n", " ")) for h in headers) + " |",
             "|" + "|".join("---:" if r else "---" for r in align) + "|"]
    lines += ["| " + " | ".join(markdown_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
