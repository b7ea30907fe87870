"""`dlmcost analyze` output: the header, one row per GPU, each GPU's passes and ops, the CSV rows,
and the HTML page (the same rows as the terminal's table, with the roofline)."""

from __future__ import annotations

from .cells import count, gb, memory_share, ms, num, safe, speedup, verdict_text
from .evidence import published_phrase, slow_kernels_phrase
from .formats import markdown_text, to_csv, to_json, to_markdown
from .labels import knee_label, uses
from .output import Output, Styled
from .page import plain
from .tables import print_fitted, table_columns

ANALYZE_HEADERS = ["GPU", "latency\nms", "tok/s", "speed-up\nvs AR ×", "AI\nFLOP/B", "ridge\nFLOP/B", "bound",
                   "mem\nGB", "fits", "max\nbatch", "knee\nblock"]
# Which columns a narrow terminal drops first (larger = sooner; 0 = never).
ANALYZE_PRIORITY = [0, 0, 0, 2, 3, 4, 1, 2, 0, 3, 4]
ANALYZE_CAPTION = ("latency: whole generation; tok/s: the whole tensor-parallel group's; speed-up vs AR: AR decode "
                   "latency / this latency (same model, GPU, prompt, gen, batch; above 1 = faster than AR); AI and "
                   "ridge: of the pass family taking the most time (JSON: dominant_pass_arithmetic_intensity; the "
                   "generation's average is arithmetic_intensity), the ridge where the achievable compute and memory "
                   "times meet (the GEMM rate at its rows over the achievable bandwidth; peak / bandwidth in `dlmcost "
                   "gpus`); bound: time-weighted over passes, each against its own ridge (memory when at least half "
                   "the time is in passes below theirs); mem: GB = 1e9 bytes; max batch: largest batch that fits in "
                   "memory; knee block: largest block whose cached step stays memory-bound (all: every block up to "
                   "the generation length; -: a scheme without a cached block step, such as mdm and AR)")
# What each column means, for the HTML page's legend (docs/methodology.md has the formulas).
ANALYZE_LEGEND = {
    "GPU": "the accelerator, as `dlmcost gpus` names it",
    "latency\nms": "time of the whole generation (prompt passes and every denoising or decode step), milliseconds",
    "tok/s": "generated tokens / latency, the whole tensor-parallel group's",
    "speed-up\nvs AR ×": "AR decode latency / this latency (same model, GPU, prompt, gen, batch); above 1 = faster than AR",
    "AI\nFLOP/B": "arithmetic intensity (FLOPs / bytes moved) of the pass family taking the most time (JSON: "
                  "dominant_pass_arithmetic_intensity; the generation's average is arithmetic_intensity)",
    "ridge\nFLOP/B": "achievable ridge of that pass family: where the achievable compute and memory times meet (the "
                     "GEMM rate at its rows over the achievable bandwidth); the peak ridge, peak / bandwidth, is in "
                     "`dlmcost gpus`",
    "bound": "memory or compute: time-weighted over the passes, each against its own achievable ridge (memory when "
             "at least half the time is in passes below theirs)",
    "mem\nGB": "weights + K/V cache + peak activations and logits per GPU, GB = 1e9 bytes",
    "fits": "whether that memory fits in the GPU's",
    "max\nbatch": "the largest batch that fits in memory",
    "knee\nblock": "the largest block whose cached step stays memory-bound (all: every block up to the generation "
                   "length; >limit: past the search's limit; -: a scheme without a cached block step, such as mdm "
                   "and AR)",
}


def analyze_rows(a: dict) -> list[list]:
    rows = []
    for r in a["results"]:
        if not r.get("supported"):
            rows.append([r["gpu"], "-", "-", "-", "-", "-", Styled("unsupported", "yellow"), "-", "-", "-", "-"])
            continue
        knee = knee_label(r["knee"]["block"], a["workload"])
        rows.append([
            r["gpu"], ms(r["time_s"]), num(r["tokens_per_s"], 4), speedup(r["speedup_vs_ar"]),
            num(r["dominant_pass_arithmetic_intensity"]), num(r["achievable_ridge_flops_per_byte"]), verdict_text(r["verdict"]),
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
    share = memory_share(w)  # the memory verdicts' share of each GPU, where it is not the default
    cache = f"K/V {w['kv_dtype']}" + (f" · {share}" if share else "")
    unverified = " (UNVERIFIED config)" if not m["verified"] else ""
    return (
        f"{safe(m['id'])}{unverified} · {m['params_total'] / 1e9:.2f}B params ({m['params_active'] / 1e9:.2f}B active) · "
        f"source: {safe(m['source'])}{' @ ' + safe(m['revision']) if m.get('revision') else ''}\n"
        f"scheme {w['scheme']} · prompt {w['prompt']} · gen {w['gen']} · {steps}{block}{store} · "
        f"batch {w['batch']}{cfg}{parallel} · {w['precision']} weights · "
        f"{cache} · logits: {w['logits']}\n"
        f"efficiency profile: {safe(a['efficiency_profile'])} · {stack_phrase(a)}"
        + (f"\n{published_phrase(a['decoding_source'])}" if a.get("decoding_source") else "")
        + _slow_kernel_line(a)
    )


def _slow_kernel_line(a: dict) -> str:
    """The GPUs on which the stack's release ran kernels untuned at this precision, and what that
    adds to every pass ('' where none)."""
    untuned = [dict(stack=a["stack"], gpu=r["gpu"], precision=a["workload"]["precision"], **r["slow_kernels"])
               for r in a["results"] if r.get("slow_kernels")]
    return f"\n{slow_kernels_phrase(untuned)}" if untuned else ""


def stack_phrase(a: dict) -> str:
    """`stack: NAME`, saying when it is the default and what the AR baseline ran on when that differs."""
    default = " (default for this decoding on these parts; --stack to change)" if a.get("stack_default") else ""
    ar = a.get("ar_stack")
    baseline = f" · AR baseline on {safe(ar)}" if ar and ar != a["stack"] else ""
    return f"stack: {safe(a['stack'])}{default}{baseline}"


PASS_HEADERS = ["pass", "count", "q", "c", "GFLOP\n/pass", "MB\n/pass", "weights\nMB", "KV read\nMB",
                "AI\nFLOP/B", "bound", "ms\n/pass"]
# A narrow terminal keeps what a pass costs (count, time, verdict) and drops its make-up first.
PASS_PRIORITY = [0, 0, 2, 2, 1, 1, 3, 3, 2, 0, 0]
PASS_LEGEND = {
    "pass": "the pass family (prefill, step, refresh...): passes of one shape, or of shapes growing by a fixed step",
    "count": "passes of the family over the generation",
    "q": "query tokens per pass (first–last where they grow)",
    "c": "context tokens each query attends to (first–last where they grow)",
    "GFLOP\n/pass": "FLOPs of one pass (the family's mean), 1e9",
    "MB\n/pass": "bytes one pass moves (weights, K/V, activations, logits), 1e6",
    "weights\nMB": "weight bytes one pass reads, 1e6",
    "KV read\nMB": "K/V cache bytes one pass reads, 1e6",
    "AI\nFLOP/B": "the pass's FLOPs / bytes",
    "bound": "memory or compute: the pass's AI against its achievable ridge",
    "ms\n/pass": "time of one pass, milliseconds",
}


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
OP_LEGEND = {
    "op": "the operation, summed over every pass of the generation",
    "TFLOP": "its FLOPs, 1e12",
    "GB\nmoved": "its bytes moved, 1e9",
    "AI\nFLOP/B": "its FLOPs / bytes",
    "time\nms": "its time over the generation, milliseconds",
    "share\n%": "its share of the generation's time",
}


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
        parts = [markdown_text(analyze_header(a)).replace("\n", "  \n") + "\n",
                 to_markdown(ANALYZE_HEADERS, ([plain(c) for c in r] for r in rows), [i >= 1 and h != "bound" and h != "fits" for i, h in enumerate(ANALYZE_HEADERS)]),
                 f"\n{ANALYZE_CAPTION}\n"]
        if show_ops:
            for r in a["results"]:
                if r.get("supported"):
                    parts.append(f"\n**{markdown_text(safe(r['gpu']))}** passes\n\n" + to_markdown(PASS_HEADERS, ([plain(c) for c in x] for x in pass_rows(r)), [i >= 1 and h != "bound" for i, h in enumerate(PASS_HEADERS)]))
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


def analyze_page(a: dict, charts: list, show_ops: bool = False) -> str:
    """`analyze --format html`: the header, the table, the roofline, the unsupported GPUs and
    (`show_ops`) each GPU's passes and ops."""
    from . import page

    escape = page.text  # control characters shown, then HTML-escaped
    sections = [page.table(ANALYZE_HEADERS, analyze_rows(a), legend=ANALYZE_LEGEND), page.figures(charts)]
    for r in a["results"]:
        if not r.get("supported"):
            sections.append(f"<p>{escape(r['gpu'])}: {escape(r['error'])}</p>")
        elif show_ops:
            sections.append(f"<h2>{escape(r['gpu'])}: passes</h2>" + page.table(PASS_HEADERS, pass_rows(r), legend=PASS_LEGEND))
            sections.append(f"<h2>{escape(r['gpu'])}: ops over the whole generation</h2>"
                            + page.table(OP_HEADERS, op_rows(r), legend=OP_LEGEND))
    return page.page(f"dlmcost analyze: {a['model']['id']}", analyze_header(a), sections, a.get("warnings", []),
                     summary=analyze_summary(a))


def analyze_summary(a: dict) -> str:
    """One sentence: the fastest GPU, its latency, throughput and verdict, and how many were compared."""
    runs = [r for r in a["results"] if r.get("supported")]
    if not runs:
        return "No selected GPU supports this workload."
    best = min(runs, key=lambda r: r["time_s"])
    others = len(a["results"]) - 1
    against = f" of {len(a['results'])} GPUs" if others else ""
    fits = "fits" if best["memory"]["fits"] else "does NOT fit"
    return (f"Fastest{against}: {best['gpu']}, {ms(best['time_s'])} ms for the generation "
            f"({num(best['tokens_per_s'], 4)} tok/s), {best['verdict'] or 'no verdict'}, "
            f"and it {fits} in memory ({gb(best['memory']['total_bytes'])} GB).")
