"""`dlmcost sweep` output: the summary line, the table of the rows shown (columns that do not vary
named once instead of repeated), Markdown, JSON and the HTML page."""

from __future__ import annotations

from .cells import count, memory_share, ms, num, safe, speedup, verdict_text
from .columns import formatted
from .formats import markdown_text, to_csv, to_json, to_markdown
from .output import Output, Styled
from .page import plain
from .tables import print_fitted, table_columns

SWEEP_HEADERS = ["model", "GPU", "scheme", "Lp", "Lg", "S", "b", "B", "prec", "tp/ep", "NFE", "latency\nms", "tok/s",
                 "speed-up\nvs AR ×", "AI\nFLOP/B", "bound", "fit"]
# Which columns a narrow terminal drops first (larger = sooner; 0 = never); a knob that is the
# same in every row goes before anything else (its value is named in the note).
SWEEP_PRIORITY = [0, 0, 0, 3, 3, 2, 1, 1, 1, 1, 5, 0, 0, 3, 4, 2, 0]
SWEEP_CAPTION = ("Lp/Lg: prompt/generated tokens; S: denoising steps; b: block length; B: batch; tok/s: the "
                 "tensor-parallel group's; speed-up vs AR: AR decode latency / latency (above 1 = faster); AI: of "
                 "the pass family taking the most time; bound: time-weighted over passes; fit: weights + K/V + "
                 "activations within the GPU's memory")
SWEEP_KNOBS = {3: "prompt", 4: "gen", 5: "steps", 6: "block", 7: "batch", 8: "precision"}
SWEEP_LEGEND = {
    "model": "the model of the row",
    "GPU": "the accelerator, as `dlmcost gpus` names it",
    "scheme": "the decoding scheme (`dlmcost schemes`)",
    "Lp": "prompt tokens",
    "Lg": "generated tokens",
    "S": "denoising steps over the generation (draft-verify: Lg / tokens accepted a verify pass, the carrier of "
         "--tpf; AR: -, one token a pass)",
    "b": "block length (-: the scheme reads no block)",
    "B": "sequences per batch",
    "prec": "weights and compute precision",
    "tp/ep": "tensor-parallel GPUs / expert-parallel ways",
    "NFE": "forward passes over the generation, the prompt's pass included where it runs apart (AR and "
           "draft-verify: its logits give the first token, so NFE = 1 + (Lg - 1) / tokens a pass)",
    "latency\nms": "time of the whole generation, milliseconds",
    "tok/s": "generated tokens / latency, the whole tensor-parallel group's",
    "speed-up\nvs AR ×": "AR decode latency / this latency; above 1 = faster than AR",
    "AI\nFLOP/B": "arithmetic intensity (FLOPs / bytes moved) of the pass family taking the most time (JSON: "
                  "dominant_pass_arithmetic_intensity)",
    "bound": "memory or compute: time-weighted over the passes, each against its own achievable ridge",
    "fit": "weights + K/V + activations within the GPU's memory",
}


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
               (("time_s",), ms), (("tokens_per_s",), lambda x: num(x, 4)), (("speedup_vs_ar",), speedup),
               (("dominant_pass_arithmetic_intensity",), num), (("verdict",), verdict_text),
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
    ar = result.get("ar_stack")
    parts += [f"efficiency profile: {safe(result['efficiency_profile'])}",
              f"stack: {safe(result['stack'])}" + (f" (autoregressive rows and AR baselines: {safe(ar)})"
                                                   if ar and ar != result["stack"] else "")]
    if share := memory_share(result.get("settings", {})):
        parts.append(share)
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
        out.write(markdown_text(f"{safe(result['model']['id'])}: {skipped}") + "\n\n"
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


def sweep_page(result: dict, rows: list[dict], shown: list[dict], charts: list) -> str:
    """`sweep --format html`: the chart, then the rows shown (--limit)."""
    from . import page

    headers, body = sweep_table(shown, rows)
    note = f"<p>showing {len(shown)} of {len(rows)} rows (--limit)</p>" if len(shown) < len(rows) else ""
    return page.page(f"dlmcost sweep: {result['model']['id']}", sweep_summary(result),
                     [page.figures(charts), note, page.table(headers, body, legend=SWEEP_LEGEND)],
                     summary=sweep_best(rows))


def sweep_best(rows: list[dict]) -> str:
    """One sentence: the configuration with the most tokens/s among those that fit in memory."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        return f"{len(rows):,} configurations; none fits in memory."
    best = max(fitting, key=lambda r: r["tokens_per_s"])
    knobs = " ".join(f"{k} {best[k]}" for k in ("block", "batch") if best[k] is not None)
    model = f"{best['model']} " if best.get("model") else ""
    return (f"Most tokens/s of {len(rows):,} configurations ({len(fitting):,} fit in memory): {model}{best['gpu']} "
            f"{best['scheme']} {knobs}, {best['precision']}, tp {best['tp']}: {num(best['tokens_per_s'], 4)} tok/s, "
            f"{ms(best['time_s'])} ms.")
