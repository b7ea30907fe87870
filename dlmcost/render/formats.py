"""The formats every command writes (`--format`), and the machine ones: JSON, CSV and Markdown
from plain rows. A streamed sweep's CSV and JSONL are columns.py's."""

from __future__ import annotations

import io
import json
from typing import Any, Iterable

from .cells import safe

FORMATS = ("table", "json", "csv", "markdown", "html")
CHART_FORMATS = ("html",)  # formats only analyze and sweep offer (they draw charts)


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


def to_csv(rows: list[dict]) -> str:
    import csv  # only for --format csv

    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: safe(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows)
    return buf.getvalue()


def to_markdown(headers: list[str], rows: Iterable[list[str]], right: Iterable[bool] | None = None) -> str:
    """A pipe table; `right` marks the columns to right-align (numbers)."""
    align = list(right) if right is not None else [False] * len(headers)
    lines = ["| " + " | ".join(h.replace("\n", " ") for h in headers) + " |",
             "|" + "|".join("---:" if r else "---" for r in align) + "|"]
    lines += ["| " + " | ".join(safe(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
