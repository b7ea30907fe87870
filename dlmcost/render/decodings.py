"""`dlmcost decodings` output: the published decodings as a table, JSON, CSV or Markdown, one row
per checkpoint x decoding setting x task (the records of `api.list_decodings`)."""

from __future__ import annotations

from .formats import to_csv, to_markdown, typed_json
from .output import Output, Styled
from .tables import Column, print_fitted

HEADERS = ["checkpoint", "setting", "scheme\n/block", "task", "acc\n%", "TPF", "TPF\nCV", "source"]
NUMBERS = ("acc\n%", "TPF", "TPF\nCV")  # right-aligned
# a narrow terminal keeps what a row is and its two numbers; the knobs and the spread go first
PRIORITY = [0, 0, 2, 0, 0, 0, 3, 1]
CAPTION = ("acc: the benchmark's own metric, in % (? = read in a secondary copy, not the primary source); TPF: "
           "tokens per forward as the source counts them, not comparable across sources; {cv}* = the model's "
           "default decoding and task; - = not published (docs/decoding.md)")
CV_CAPTION = ("TPF CV: the spread of TPF across the mix's benchmarks (std / mean), a proxy for the spread across "
              "requests; ")


def _number(x: float | None, scale: float = 1.0) -> str:
    return "-" if x is None else f"{x * scale:.2f}"


def _cells(r: dict) -> list:
    accuracy = _number(r["accuracy"], 100)
    if r["accuracy"] is not None and not r["verified"]:
        accuracy += "?"
    setting = f"{r['setting']} *" if r["default"] else r["setting"]
    scheme = r["scheme"] if r["block"] is None else f"{r['scheme']}/{r['block']}"
    return [r["checkpoint"].rsplit("/", 1)[-1], Styled(setting, "bold" if r["default"] else ""), scheme, r["task"],
            accuracy, _number(r["tpf"]), _number(r["tpf_cv"]), r["source"]]


def render_decodings(records: list[dict], fmt: str, out: Output, title: str | None = None) -> None:
    if fmt == "json":
        out.write(typed_json("decodings", records))
        return
    if fmt == "csv":
        out.write(to_csv(records))
        return
    rows = [_cells(r) for r in records]
    keep = range(len(HEADERS))
    spread = any(r["tpf_cv"] is not None for r in records)
    if not spread:  # no row is a benchmark mix: no spread column
        keep = [i for i in keep if HEADERS[i] != "TPF\nCV"]
    headers = [HEADERS[i] for i in keep]
    rows = [[row[i] for i in keep] for row in rows]
    if fmt == "markdown":
        out.write(to_markdown(headers, rows, right=[h in NUMBERS for h in headers]))
        return
    columns = [Column(HEADERS[i], PRIORITY[i], right=HEADERS[i] in NUMBERS) for i in keep]
    print_fitted(out, columns, rows, CAPTION.format(cv=CV_CAPTION if spread else ""), title=title)
