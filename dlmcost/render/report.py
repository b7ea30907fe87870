"""Rendering: the terminal tables (rich, through tables.py), JSON, CSV, Markdown and the HTML
pages of analyze, sweep and plan. No arithmetic beyond unit scaling. Reads results only: what a
label needs (the knobs a scheme reads, the precision its GEMMs run at) is in the result."""

from __future__ import annotations

import io
import json
import math
from typing import Any, Iterable

from . import tables
from .output import Output, Styled
from .page import plain
from ..safe_text import shown
from .labels import knee_label, si, uses
from .tables import Column
from .columns import formatted

FORMATS = ("table", "json", "csv", "markdown", "html")
CHART_FORMATS = ("html",)  # formats only analyze and sweep offer (they draw charts)
VERDICT_STYLE = {"memory-bound": "cyan", "compute-bound": "magenta"}


# --- number formatting ---------------------------------------------------------------------------


def sig(x: float, digits: int) -> str:
    """`digits` significant digits, never exponent notation: a number with more whole digits
    than that is shown whole, with thousands separators (10,920, not 1.092e+04)."""
    return f"{x:,.0f}" if abs(x) >= 10 ** digits else f"{x:.{digits}g}"


def num(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return sig(x, digits) if abs(x) < 1e6 else si(x, digits)


def ms(seconds: float | None) -> str:
    """Milliseconds to four digits, whole from 10,000 on (12,345: never exponent notation)."""
    if seconds is None:
        return "-"
    return sig(seconds * 1e3, 4)


def gb(nbytes: float | None) -> str:
    return "-" if nbytes is None else sig(nbytes / 1e9, 4)


def verdict_text(v: str | None) -> Styled:
    """Tables say 'memory' / 'compute' under a 'bound' header to stay within 100 columns."""
    if not v:
        return Styled("-")
    return Styled(v.removesuffix("-bound"), VERDICT_STYLE.get(v, ""))


# --- generic output --------------------------------------------------------------------------------


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


def safe(text) -> str:
    """Text from input (a model id, a GPU name...) for the terminal: control characters escaped."""
    return shown(text, None)


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




def print_fitted(out: Output, columns: list[Column], rows: list[list], caption: str | None = None,
                 title: str | None = None) -> None:
    """A table within the output's width: the least important columns are dropped whole (and
    named) rather than the numbers elided; free-text columns wrap. `title` above it in bold,
    `caption` below it dimmed."""
    if title is not None:
        out.line(safe(title), style="bold")
    dropped = tables.draw(out, columns, rows)
    if dropped:
        out.line(f"(hidden at {out.width} columns: {', '.join(dropped)}; widen the terminal, set COLUMNS, "
                 f"or use --format csv)", style="dim")
    if caption:
        out.line(caption, style="dim")


def table_columns(headers: list[str], priority: list[int], left: int = 1) -> list[Column]:
    return [Column(h, p, right=i >= left) for i, (h, p) in enumerate(zip(headers, priority))]


# --- analyze ---------------------------------------------------------------------------------------

ANALYZE_HEADERS = ["GPU", "latency\nms", "tok/s", "speed-up\nvs AR ×", "AI\nFLOP/B", "ridge\nFLOP/B", "bound",
                   "mem\nGB", "fits", "max\nbatch", "knee\nblock"]
# Which columns a narrow terminal drops first (larger = sooner; 0 = never).
ANALYZE_PRIORITY = [0, 0, 0, 2, 3, 4, 1, 2, 0, 3, 4]
ANALYZE_CAPTION = ("latency: whole generation; tok/s: the whole tensor-parallel group's; speed-up vs AR: AR decode "
                   "latency / this latency (same model, GPU, prompt, gen, batch; above 1 = faster than AR); "
                   "ridge: where the achievable compute and memory times meet (the GEMM rate at the longest "
                   "pass's rows over the achievable bandwidth; peak / bandwidth in `dlmcost gpus`); verdict: "
                   "time-weighted over passes, each against its own ridge; mem: GB = 1e9 bytes; max batch: largest batch that fits "
                   "in memory; knee block: largest block whose cached step stays memory-bound (all: every block "
                   "up to the generation length)")


def speedup(time_ratio_to_ar: float) -> str:
    """The table shows AR latency / latency (above 1 = faster); JSON keeps `time_ratio_to_ar`."""
    return sig(1 / time_ratio_to_ar, 3) if time_ratio_to_ar else "-"


def count(x: float | None) -> str:
    """Step and pass counts: whole numbers as such, fractions to four digits (85.33, not 85.3333)."""
    return "-" if x is None else sig(x, 4)


def analyze_rows(a: dict) -> list[list]:
    rows = []
    for r in a["results"]:
        if not r.get("supported"):
            rows.append([r["gpu"], "-", "-", "-", "-", "-", Styled("unsupported", "yellow"), "-", "-", "-", "-"])
            continue
        knee = knee_label(r["knee"]["block"], a["workload"]["gen"])
        rows.append([
            r["gpu"], ms(r["time_s"]), num(r["tokens_per_s"], 4), speedup(r["time_ratio_to_ar"]),
            num(r["arithmetic_intensity"]), num(r["achievable_ridge_flops_per_byte"]), verdict_text(r["verdict"]),
            gb(r["memory"]["total_bytes"]), "yes" if r["memory"]["fits"] else Styled("NO", "red bold"),
            str(r["memory"]["max_batch"]), knee,
        ])
    return rows


def analyze_header(a: dict) -> str:
    m, w = a["model"], a["workload"]
    steps = f"S={count(w['steps'])}" if uses(w, "steps") else "one pass per token"
    store = f" · store pass {'on' if w['store_pass'] else 'off'}" if uses(w, "store_pass") else ""
    # the block only where the scheme's cost depends on it (as sweep shows `-` for the others)
    block = f" · block {w['block']} ({count(w['n_blocks'])} blocks)" if uses(w, "block") else ""
    parallel = f" · tp {w['tp']}" + (f" ep {w['ep']}" if w["ep"] > 1 else "") + (" (tok/s per group)" if w["tp"] > 1 else "")
    cfg = " · CFG (batch doubled)" if w["cfg"] else ""
    unverified = " (UNVERIFIED config)" if not m["verified"] else ""
    return (
        f"{safe(m['id'])}{unverified} · {m['params_total'] / 1e9:.2f}B params ({m['params_active'] / 1e9:.2f}B active) · "
        f"source: {safe(m['source'])}{' @ ' + safe(m['revision']) if m.get('revision') else ''}\n"
        f"scheme {w['scheme']} · prompt {w['prompt']} · gen {w['gen']} · {steps}{block}{store} · "
        f"batch {w['batch']}{cfg}{parallel} · {w['precision']} weights · "
        f"K/V {w['kv_dtype']} · logits: {w['logits']}\n"
        f"efficiency profile: {safe(a['efficiency_profile'])} · stack: {safe(a['stack'])}"
    )


PASS_HEADERS = ["pass", "count", "q", "c", "GFLOP\n/pass", "MB\n/pass", "weights\nMB", "KV read\nMB",
                "AI\nFLOP/B", "bound", "ms\n/pass"]
# A narrow terminal keeps what a pass costs (count, time, verdict) and drops its make-up first.
PASS_PRIORITY = [0, 0, 2, 2, 1, 1, 3, 3, 2, 0, 0]


def tokens(x: float) -> str:
    """A token count (q, c): whole, or as given when fractional (an average over passes)."""
    return f"{x:,.0f}" if abs(x) >= 1e4 and (x == int(x) or abs(x) >= 1e6) else f"{x:g}"


def pass_rows(result: dict) -> list[list]:
    rows = []
    for p in result["passes"]:
        c = tokens(p["c"]) if p["c"] == p["c_last"] else f"{tokens(p['c'])}–{tokens(p['c_last'])}"
        q = tokens(p["q"]) if p["q"] == p["q_last"] else f"{tokens(p['q'])}–{tokens(p['q_last'])}"
        rows.append([p["name"], count(p["count"]), q, c, num(p["flops"] / 1e9), num(p["bytes"] / 1e6),
                     num(p["weight_bytes"] / 1e6), num(p["kv_read_bytes"] / 1e6), num(p["arithmetic_intensity"]),
                     verdict_text(p["verdict"]), ms(p["time_s"])])
    return rows


OP_HEADERS = ["op", "TFLOP", "GB\nmoved", "AI\nFLOP/B", "time\nms", "share\n%"]
OP_PRIORITY = [0, 1, 1, 2, 0, 0]


def op_rows(result: dict) -> list[list]:
    return [[o["name"], num(o["flops"] / 1e12), num(o["bytes"] / 1e9), num(o["arithmetic_intensity"]),
             ms(o["time_s"]), f"{100 * o['time_share']:.1f}"] for o in result["ops"] if o["time_s"] > 0]


def analyze_csv_rows(a: dict) -> list[dict]:
    out = []
    for r in a["results"]:
        row = dict(model=a["model"]["id"], **{f"workload_{k}": v for k, v in a["workload"].items()}, gpu=r["gpu"],
                   supported=r["supported"])
        if r["supported"]:
            for k, v in r.items():
                if k in ("passes", "ops", "gpu", "gpu_key", "supported"):
                    continue
                if isinstance(v, dict):
                    row.update({f"{k}_{kk}": vv for kk, vv in v.items()})
                else:
                    row[k] = v
        out.append(row)
    keys = list(dict.fromkeys(k for row in out for k in row))
    return [{k: row.get(k, "") for k in keys} for row in out]


def analyze_ops_csv_rows(a: dict) -> list[dict]:
    """`--format csv --ops`: one table with a `row` column, 'result' (the summary row of each GPU),
    'pass' (each pass family) or 'op' (each op over the generation), so it stays one CSV."""
    out = []
    for summary, r in zip(analyze_csv_rows(a), a["results"]):
        out.append(dict(row="result", **summary))
        if r["supported"]:
            out += [dict(row="pass", gpu=r["gpu"], **p) for p in r["passes"]]
            out += [dict(row="op", gpu=r["gpu"], **o) for o in r["ops"]]
    keys = list(dict.fromkeys(k for row in out for k in row))
    return [{k: row.get(k, "") for k in keys} for row in out]


def render_analyze(a: dict, fmt: str, out: Output, show_ops: bool = False, charts: list | None = None) -> None:
    if fmt == "html":
        out.write(analyze_page(a, charts or [], show_ops))
        return
    if fmt == "json":
        out.write(to_json(a) + "\n")
        return
    if fmt == "csv":
        out.write(to_csv(analyze_csv_rows(a) if not show_ops else analyze_ops_csv_rows(a)))
        return
    rows = analyze_rows(a)
    if fmt == "markdown":
        parts = [analyze_header(a).replace("\n", "  \n") + "\n",
                 to_markdown(ANALYZE_HEADERS, ([plain(c) for c in r] for r in rows), [i >= 1 and h != "bound" and h != "fits" for i, h in enumerate(ANALYZE_HEADERS)]),
                 f"\n{ANALYZE_CAPTION}\n"]
        if show_ops:
            for r in a["results"]:
                if r.get("supported"):
                    parts.append(f"\n**{safe(r['gpu'])}** passes\n\n" + to_markdown(PASS_HEADERS, ([plain(c) for c in x] for x in pass_rows(r)), [i >= 1 and h != "bound" for i, h in enumerate(PASS_HEADERS)]))
                    parts.append("\n" + to_markdown(OP_HEADERS, op_rows(r), [i >= 1 for i in range(len(OP_HEADERS))]))
        out.write("".join(parts))
        return
    out.line(analyze_header(a))
    print_fitted(out, table_columns(ANALYZE_HEADERS, ANALYZE_PRIORITY), rows, ANALYZE_CAPTION)
    for r in a["results"]:
        if not r.get("supported"):
            out.line(safe(f"{r['gpu']}: {r['error']}"), style="yellow")
    if show_ops:
        for r in a["results"]:
            if r.get("supported"):
                print_fitted(out, table_columns(PASS_HEADERS, PASS_PRIORITY), pass_rows(r),
                             title=f"{r['gpu']}: passes")
                print_fitted(out, table_columns(OP_HEADERS, OP_PRIORITY), op_rows(r),
                             title=f"{r['gpu']}: ops over the whole generation")


# --- sweep -----------------------------------------------------------------------------------------

SWEEP_HEADERS = ["model", "GPU", "scheme", "Lp", "Lg", "S", "b", "B", "prec", "tp/ep", "NFE", "latency\nms", "tok/s",
                 "speed-up\nvs AR ×", "AI\nFLOP/B", "bound", "fit"]
# Which columns a narrow terminal drops first (larger = sooner; 0 = never); a knob that is the
# same in every row goes before anything else (its value is named in the note).
SWEEP_PRIORITY = [0, 0, 0, 3, 3, 2, 1, 1, 1, 1, 5, 0, 0, 3, 4, 2, 0]
SWEEP_CAPTION = ("Lp/Lg: prompt/generated tokens; S: denoising steps; b: block length; B: batch; tok/s: the "
                 "tensor-parallel group's; speed-up vs AR: AR decode latency / latency (above 1 = faster); "
                 "fit: weights + K/V + activations within the GPU's memory")
SWEEP_KNOBS = {3: "prompt", 4: "gen", 5: "steps", 6: "block", 7: "batch", 8: "precision"}


def _distinct(rows, key: str) -> set:
    """The values of one key over all rows (rows held as columns answer without building rows)."""
    return rows.distinct(key) if hasattr(rows, "distinct") else {r[key] for r in rows}


def sweep_table(rows: list[dict], all_rows: list[dict]) -> tuple[list[str], list[list]]:
    """Headers and cells; the precision and TP/EP columns appear only when the sweep varies them."""
    headers, cells, _ = _sweep_cells(rows, all_rows)
    return headers, cells


def _same(value):
    return value


# What each column of SWEEP_HEADERS shows: the row keys it reads, and the cell made of their values
SWEEP_CELLS = [(("model",), _same), (("gpu",), _same), (("scheme",), _same), (("prompt",), str), (("gen",), str),
               (("steps",), count), (("block",), lambda b: "-" if b is None else str(b)), (("batch",), str),
               (("precision",), _same), (("tp", "ep"), lambda tp, ep: f"{tp}/{ep}"), (("nfe",), count),
               (("time_s",), ms), (("tokens_per_s",), lambda x: num(x, 4)), (("time_ratio_to_ar",), speedup),
               (("arithmetic_intensity",), num), (("verdict",), verdict_text),
               (("fits",), lambda fits: "yes" if fits else Styled("NO", "red bold"))]


def _sweep_cells(rows: list[dict], all_rows: list[dict]) -> tuple[list[str], list[list], list[int]]:
    """Headers, cells and the indices of SWEEP_HEADERS shown; rows held as columns (ColumnRows)
    are formatted column by column, each distinct value once (columns.formatted)."""
    show_prec = len(_distinct(all_rows, "precision")) > 1
    show_tp = any(v > 1 for k in ("tp", "ep") for v in _distinct(all_rows, k))
    held = getattr(rows, "columns", None)
    keep = [bool(rows) and ("model" in held if held is not None else "model" in rows[0])] + [True] * 7 + \
        [show_prec, show_tp] + [True] * 7
    index = [i for i, k in enumerate(keep) if k]
    if held is not None:
        cells = list(map(list, zip(*(formatted(held, *SWEEP_CELLS[i]) for i in index)))) if len(rows) else []
    else:
        cells = [[form(*(r.get(k) for k in keys)) for keys, form in (SWEEP_CELLS[i] for i in index)] for r in rows]
    return [SWEEP_HEADERS[i] for i in index], cells, index


def sweep_summary(result: dict) -> str:
    """The sweep's header line; skipped configurations are named only when there are any."""
    parts = [f"{result['evaluated']} configurations evaluated"]
    if result["skipped_impossible"]:
        parts.append(f"skipped {result['skipped_impossible']} impossible (block not dividing the generation, fewer "
                     f"steps than blocks, a TP/EP layout that does not split the model)")
    if result["skipped_unsupported"]:
        parts.append(f"skipped {result['skipped_unsupported']} on GPUs without the precision")
    parts += [f"efficiency profile: {safe(result['efficiency_profile'])}", f"stack: {safe(result['stack'])}"]
    if result.get("grid"):  # several models in one table
        parts.append(safe(result["grid"]))
    return "; ".join(parts)


def more_rows_note(shown: int, total: int) -> str:
    return (f"… {total - shown:,} more rows ({total:,} in all): --limit N shows N (0: all), --sort KEY picks "
            f"which come first, --format csv prints every row")


def render_sweep(result: dict, rows: list[dict], fmt: str, out: Output, shown: list[dict],
                 charts: list | None = None) -> None:
    if fmt == "html":
        out.write(sweep_page(result, rows, shown, charts or []))
        return
    if fmt == "json":
        meta = {k: v for k, v in result.items() if k != "columns"}
        out.write(to_json(dict(**meta, rows=rows)) + "\n")
        return
    if fmt == "csv":
        out.write(to_csv(rows))
        return
    skipped = sweep_summary(result)
    headers, body, index = _sweep_cells(shown, rows)
    if fmt == "markdown":
        out.write(f"{safe(result['model']['id'])}: {skipped}\n\n"
                  + to_markdown(headers, ([plain(c) for c in r] for r in body),
                                [SWEEP_HEADERS.index(h) >= 3 and h not in ("prec", "bound", "fit") for h in headers])
                  + (f"\n{more_rows_note(len(shown), len(rows))}\n" if len(shown) < len(rows) else "")
                  + f"\n{SWEEP_CAPTION}\n")
        return
    out.line(f"{safe(result['model']['id'])} · {skipped}")
    columns = table_columns(headers, [SWEEP_PRIORITY[i] for i in index], left=2)
    for c, i in zip(columns, index):
        c.right = 3 <= i != 8
        knob = SWEEP_KNOBS.get(i)
        if knob is not None and len(_distinct(rows, knob)) == 1:
            c.priority, c.same = 6, plain(body[0][index.index(i)]) if body else None
    print_fitted(out, columns, body)
    if len(shown) < len(rows):
        out.line(more_rows_note(len(shown), len(rows)), style="yellow")
    out.line(SWEEP_CAPTION, style="dim")

# --- schemes ---------------------------------------------------------------------------------------

SCHEME_HEADERS = ["scheme", "knobs", "stops\nat EOS", "what it runs"]


def render_schemes(entries: list[dict], fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(to_json(entries) + "\n")
        return
    if fmt == "csv":
        out.write(to_csv(entries))
        return
    rows = [[e["name"], e["knobs"], "yes" if e["stops_at_eos"] else "no", e["summary"]] for e in entries]
    if fmt == "markdown":
        out.write(to_markdown(SCHEME_HEADERS, rows))
    else:  # one knob per line, so that the description, wrapped, keeps most of the width
        rows = [[name, knobs.split(", "), *rest] for name, knobs, *rest in rows]
        columns = [Column("scheme", 0, right=False), Column("knobs", 1, right=False),
                   Column("stops\nat EOS", 2, right=False), Column("what it runs", 0, wrap=True)]
        print_fitted(out, columns, rows)


# --- gpus / models / model ---------------------------------------------------------------------


def gpu_records(gpus) -> list[dict]:
    return [dict(name=g.name, key=g.key, aliases=list(g.aliases), vendor=g.vendor, status=g.status,
                 memory_bytes=g.memory_bytes,
                 memory_as_listed=f"{g.memory_gb:g} GB" if g.memory_gb is not None else f"{g.memory_gib:g} GiB",
                 bandwidth_bytes_per_s=g.bandwidth_bytes_per_s,
                 peak_flops=dict(g.peak_flops), ridge_flops_per_byte=dict(g.ridge_flops_per_byte),
                 scale_up_bytes_per_s=g.link_bytes_per_s, efficiency=g.efficiency.model_dump(), notes=g.notes)
            for g in gpus]


GPU_HEADERS = ["GPU", "mem\nGB", "listed\nas", "BW\nTB/s", "bf16\nTF/s", "fp8\nTF/s", "fp4\nTF/s",
               "ridge\nbf16", "ridge\nfp8", "ridge\nfp4", "status"]


GPU_CAPTION = ("mem: GB = 1e9 bytes, the unit of every memory figure dlmcost prints (JSON: memory_bytes); listed as: "
               "the vendor's figure, whose 'GB' is often binary (an H100's 80 GB is 80 GiB = 85.9 GB); dense "
               "tensor-core peaks (no sparsity); ridge = peak / bandwidth in FLOP/byte")


GPU_PRIORITY = [0, 0, 3, 0, 1, 2, 2, 3, 4, 4, 2]


def render_gpus(gpus, fmt: str, out: Output) -> None:
    recs = gpu_records(gpus)
    if fmt == "json":
        out.write(to_json(recs) + "\n")
        return

    def peak(r, k):
        return f"{r['peak_flops'][k] / 1e12:.0f}" if k in r["peak_flops"] else "—"

    def ridge(r, k):
        return f"{r['ridge_flops_per_byte'][k]:.0f}" if k in r["ridge_flops_per_byte"] else "—"

    rows = [[r["name"], gb(r["memory_bytes"]), r["memory_as_listed"], f"{r['bandwidth_bytes_per_s'] / 1e12:.3g}",
             peak(r, "bf16"), peak(r, "fp8"), peak(r, "fp4"), ridge(r, "bf16"), ridge(r, "fp8"), ridge(r, "fp4"),
             r["status"]] for r in recs]
    if fmt == "csv":
        out.write(to_csv([dict(zip((h.replace("\n", " ") for h in GPU_HEADERS), r)) for r in rows]))
    elif fmt == "markdown":
        out.write(to_markdown(GPU_HEADERS, rows))
    else:
        columns = table_columns(GPU_HEADERS, GPU_PRIORITY)
        columns[-1].right = False  # status is a word
        print_fitted(out, columns, rows, GPU_CAPTION)


MODEL_HEADERS = ["model", "family", "params", "active", "KV\nKiB/tok", "default\nscheme", "config"]
# A narrow terminal keeps the id, the size, the K/V bytes (what memory planning needs) and the config status.
MODEL_PRIORITY = [0, 3, 0, 1, 0, 2, 1]
MODEL_CAPTION = ("KV: bf16 K/V cache per token, all layers; config status from the bundled MANIFEST (unverified = "
                 "third-party dimensions)")


def render_models(entries: list[dict], fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(to_json(entries) + "\n")
        return
    rows = [[e["id"], e["family"], f"{e['params_total'] / 1e9:.2f}B", f"{e['params_active'] / 1e9:.2f}B",
             sig(e['kv_bytes_per_token'] / 1024, 4), e["default_scheme"],
             Styled(e["status"], "yellow" if e["status"] == "unverified" else "")] for e in entries]
    if fmt == "csv":
        out.write(to_csv(entries))
    elif fmt == "markdown":
        out.write(to_markdown(MODEL_HEADERS, ([plain(c) for c in r] for r in rows)))
    else:
        columns = table_columns(MODEL_HEADERS, MODEL_PRIORITY, left=2)
        columns[-2].right = columns[-1].right = False  # words
        print_fitted(out, columns, rows, MODEL_CAPTION)


def render_model(info: dict, fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(to_json(info) + "\n")
        return
    rows = [[k, _fmt_value(v)] for k, v in info.items() if not isinstance(v, dict)]
    for k, v in info.items():
        if isinstance(v, dict):
            rows += [[f"{k}.{kk}", _fmt_value(vv)] for kk, vv in v.items()]
    if fmt == "csv":
        out.write(to_csv([{r[0]: r[1] for r in rows}]))
    elif fmt == "markdown":
        out.write(to_markdown(["field", "value"], rows))
    else:
        columns = [Column("field", 0, right=False), Column("value", 0, right=False, wrap=True)]
        print_fitted(out, columns, rows, title=info["id"])


def _fmt_value(v) -> str:
    if v is None:  # not set (no pinned revision, a sampler setting the model card leaves open)
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) and abs(v) >= 10**6:
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


# --- plan --------------------------------------------------------------------------------------

PLAN_HEADERS = ["model", "GPU", "scheme/\nb/tpf", "R×TP\nprec", "B", "p50\ns", "p95\ns", "1st\nblk s", "tok/s\n/user",
                "out\ntok/s", "tok/s\n/GPU", "cap\nreq/s", "head\n%", "$/h", "$/Mtok", "$/Mtok\n@cap", "J/tok"]
PLAN_PRIORITY = [0, 0, 0, 0, 3, 2, 0, 3, 2, 3, 1, 4, 4, 3, 0, 0, 4]  # larger: dropped sooner on a narrow terminal


def plan_table(records: list[dict], show_decoding: bool) -> tuple[list[str], list[list]]:
    """Headers and cells, two significant digits (json/csv carry full values); the decoding column
    only when several decodings were searched, the model column only when several models were, so
    that the table stays within 100 columns. '*' after $/Mtok marks the cost/latency Pareto front;
    '-': no price for the GPU."""
    def g2(x):
        return "-" if x is None else f"{x:.2g}" if abs(x) < 100 else f"{x:,.0f}"

    def model(r):
        return r.get("model", "").rpartition("/")[2]

    def rate(x):
        return "-" if x is None else f"{x:.0f}" if x >= 100 else f"{x:.3g}"

    cells = [[model(r), r["gpu"], r["decoding"], f"{r['replicas']}×{r['tp']} {r['precision']}", str(r["max_batch"]),
              g2(r["p50_latency_s"]), g2(r["p95_latency_s"]), g2(r["p95_first_block_s"]),
              num(r["tokens_per_s_per_user"]), rate(r.get("output_tokens_per_s")), rate(r.get("tokens_per_s_per_gpu")),
              num(r["capacity_rps"]), f"{100 * r['headroom']:,.0f}",
              "-" if r["usd_per_hour"] is None else sig(r['usd_per_hour'], 4),
              g2(r["usd_per_mtok"]) + ("*" if r.get("pareto") else ""), g2(r.get("usd_per_mtok_at_capacity")),
              g2(r["joules_per_token"])] for r in records]
    several_models = len({r.get("model") for r in records}) > 1
    keep = [several_models, True, show_decoding] + [True] * (len(PLAN_HEADERS) - 3)
    return [h for h, k in zip(PLAN_HEADERS, keep) if k], [[c for c, k in zip(row, keep) if k] for row in cells]


PLAN_CSV_KEYS = ("model", "gpu", "replicas", "tp", "gpus", "precision", "scheme", "block", "tpf", "decoding", "max_batch",
                 "p50_latency_s", "p95_latency_s", "p99_latency_s", "p95_first_block_s", "tokens_per_s_per_user",
                 "served_rps", "output_tokens_per_s", "tokens_per_s_per_gpu", "capacity_rps", "sustained_rps",
                 "headroom", "usd_per_hour", "usd_per_mtok", "usd_per_mtok_at_capacity", "joules_per_token",
                 "price_per_gpu_hour", "price_source", "pareto", "absurd")


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 user', '2 users' (`many`: an irregular plural)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def _listed(n: int, word: str, values: list, many: str | None = None) -> str:
    """One factor of the search's product: '2 GPUs (H100 SXM, B200)', 'tp 1'."""
    shown = ", ".join(safe(f"{v:g}" if isinstance(v, float) else v) for v in values)
    return f"{plural(n, word, many)} ({shown})"


def plan_search_line(p: dict) -> str:
    """What was searched: the product of the lists, with each factor's count and values, and
    the candidates the AR baseline added (the evaluated and the skipped make up both)."""
    s = p["search"]
    factors = [(s["gpus"], "GPU", None), (s["tp"], "TP size", None), (s["precisions"], "precision", None),
               (s["decodings"], "decoding", None), (s["max_batch"], "batch limit", None)]
    product = math.prod(len(v) for v, _, _ in factors)
    text = f"searched {plural(product, 'candidate')} (" + " × ".join(_listed(len(v), w, v, m) for v, w, m in factors) + ")"
    # (absurd candidates are among the product: searched, then left out)
    tried = p["evaluated"] + sum(v for k, v in (p.get("skipped") or {}).items() if k != "absurd")
    if tried > product:
        text += f" and {tried - product:,} for the AR baseline"
    return f"{text}; {_release(s.get('release') or {})}{plural(s['requests'], 'simulated request')}, " \
           f"random seed {s['seed']}"


def _release(by_decoding: dict) -> str:
    """How the batches are released ('synchronous release; '), per decoding where they differ."""
    policies = list(dict.fromkeys(by_decoding.values()))
    if not policies:
        return ""
    if len(policies) == 1:
        return f"{safe(policies[0])} release; "
    return "release " + ", ".join(f"{safe(k)} {safe(v)}" for k, v in by_decoding.items()) + "; "


def plan_header(p: dict) -> str:
    t = p["traffic"]
    load = f"{t['rate']:g} req/s (Poisson)" if t.get("rate") else f"{plural(t['users'], 'user')} (think {t['think_s']:g} s)"
    targets = ", ".join(f"{k}={v:g}" for k, v in p["targets"].items()) or "none"

    def lengths(v):
        return ",".join(f"{k}:{x}" for k, x in v.items()) if isinstance(v, dict) else str(v)

    s, absurd = p["search"], (p.get("skipped") or {}).get("absurd", 0)
    hidden = (f"; {absurd} absurd (over 10x their model's cheapest $/Mtok) left out, --absurd lists them"
              if absurd and not s.get("absurd_shown") else "")
    return (f"{safe(p['model'])} · {load} · prompt {lengths(t['prompt'])} · answer {lengths(t['answer'])} tokens\n"
            f"targets: {targets}\n{plan_search_line(p)}{hidden}")


def plan_csv_rows(p: dict) -> list[dict]:
    rows = [("plan", r) for r in p["deployments"]] + [("ar_baseline", r) for r in p["ar_baseline"]]
    return [dict(set=name, **{k: r.get(k) for k in PLAN_CSV_KEYS}) for name, r in rows]


def render_plan(p: dict, fmt: str, out: Output, top: int = 15) -> None:
    if fmt == "json":
        out.write(to_json(p) + "\n")
        return
    if fmt == "csv":
        out.write(to_csv(plan_csv_rows(p)))
        return
    shown = p["deployments"][:top]
    baseline = p["ar_baseline"][:3]
    miss = [p["nearest_miss"]] if not p["deployments"] and p["nearest_miss"] else []
    multi = len(p["search"]["decodings"]) > 1
    caption = ("ranked by $/Mtok at the offered load (* = on the cost/latency Pareto front); R×TP: replicas × "
               "tensor-parallel GPUs; B: batch limit; 1st blk: time to the first streamed block (AR: token); "
               "tok/s/user: median answer tokens / latency; cap: saturation throughput, head: its margin over "
               "the load; prices: dated list-price estimates; J/tok: board power envelope")
    sections = []
    if shown:
        more = f" (first {len(shown)} of {len(p['deployments'])}; json/csv list all)" if len(p["deployments"]) > len(shown) else ""
        sections.append((f"deployments meeting the targets{more}", plan_table(shown, multi), caption))
    if baseline:
        sections.append(("AR baseline at the same targets (the same model decoding one token per pass)",
                         plan_table(baseline, False), None))
    if miss:
        sections.append(("no deployment meets the targets; nearest miss", plan_table(miss, True), None))
    no_ar = p["search"].get("ar_baseline", True) and not baseline and not p.get("all_autoregressive", False)
    if fmt == "markdown":
        parts = [plan_header(p).replace("\n", "  \n") + "\n"]
        for title, (headers, rows), _ in sections:
            parts.append(f"\n{title}\n\n" + to_markdown(headers, rows, [h not in ("GPU", "scheme/\nb/tpf", "R×TP\nprec") for h in headers]))
        if no_ar:
            parts.append("\nAR baseline: no autoregressive deployment meets the targets\n")
        parts.append(f"\n{caption}\n")
        out.write("".join(parts))
        return
    out.line(plan_header(p))
    for title, (headers, rows), cap in sections:
        left = 2 if headers[1] != "R×TP\nprec" else 1
        print_fitted(out, table_columns(headers, [PLAN_PRIORITY[PLAN_HEADERS.index(h)] for h in headers], left),
                     rows, cap, title=title)
    if no_ar:
        out.line("AR baseline: no autoregressive deployment meets the targets", style="yellow")


# --- html pages ------------------------------------------------------------------------------


def analyze_page(a: dict, charts: list, show_ops: bool = False) -> str:
    """`analyze --format html`: the header, the table, the roofline, the unsupported GPUs and
    (`show_ops`) each GPU's passes and ops."""
    from . import page

    escape = page.text  # control characters shown, then HTML-escaped
    sections = [page.table(ANALYZE_HEADERS, analyze_rows(a)), page.figures(charts)]
    for r in a["results"]:
        if not r.get("supported"):
            sections.append(f"<p>{escape(r['gpu'])}: {escape(r['error'])}</p>")
        elif show_ops:
            sections.append(f"<h2>{escape(r['gpu'])}: passes</h2>" + page.table(PASS_HEADERS, pass_rows(r)))
            sections.append(f"<h2>{escape(r['gpu'])}: ops over the whole generation</h2>"
                            + page.table(OP_HEADERS, op_rows(r)))
    return page.page(f"dlmcost analyze: {a['model']['id']}", analyze_header(a), sections, a.get("warnings", []))


def sweep_page(result: dict, rows: list[dict], shown: list[dict], charts: list) -> str:
    """`sweep --format html`: the chart, then the rows shown (--limit)."""
    from . import page

    headers, body = sweep_table(shown, rows)
    note = f"<p>showing {len(shown)} of {len(rows)} rows (--limit)</p>" if len(shown) < len(rows) else ""
    return page.page(f"dlmcost sweep: {result['model']['id']}", sweep_summary(result),
                     [page.figures(charts), note, page.table(headers, body)])


def plan_page(p: dict, charts: list, top: int) -> str:
    """`plan --format html`: the header, the cost/latency chart, the ranked table and the AR baseline."""
    from . import page

    sections = [page.figures(charts)]
    if p["deployments"]:
        headers, rows = plan_table(p["deployments"][:top], len(p["search"]["decodings"]) > 1)
        sections.append("<h2>deployments meeting the targets</h2>" + page.table(headers, rows))
    if p["ar_baseline"]:
        headers, rows = plan_table(p["ar_baseline"][:3], False)
        sections.append("<h2>AR baseline at the same targets</h2>" + page.table(headers, rows))
    if not p["deployments"] and p.get("nearest_miss"):
        headers, rows = plan_table([p["nearest_miss"]], True)
        sections.append("<h2>no deployment meets the targets; nearest miss</h2>" + page.table(headers, rows))
    return page.page(f"dlmcost plan: {p['model']}", plan_header(p), sections)
