"""`dlmcost serve` output: the header, the load-curve rows, the latency rows, CSV rows and the chart.

Rows are built here as plain headers + cells (`curve_table`, `latency_table`), apart from
drawing them (`render_serve`), so that another table backend can take the same rows.
Numbers: three significant digits; json and csv carry every value in full.
"""

from __future__ import annotations

from .charts import Chart, Note, Panel, Series, _log_scaled
from .output import Output
from .report import num, print_fitted, table_columns, to_csv, to_json, to_markdown

CURVE_HEADERS = ["load", "req/s", "out\ntok/s", "tok/s\n/GPU", "tok/s\n/user", "TTFB\np50 s", "gap\np50 s",
                 "e2e\np50 s", "e2e\np99 s", "busy\n%", "run\nmean", "$/Mtok", "J/tok"]
CURVE_PRIORITY = [0, 2, 0, 0, 0, 1, 3, 1, 2, 3, 4, 2, 4]  # larger: dropped sooner on a narrow terminal
LATENCY_HEADERS = ["load", "", "mean s", "median s", "p90 s", "p99 s"]
METRICS = (("ttfb_s", "time to first block"), ("inter_block_s", "inter-block gap"), ("latency_s", "end to end"))
CAPTION = ("req/s, tok/s: completed in the measured window; tok/s/GPU: output tokens/s over replicas × TP GPUs; "
           "tok/s/user: median answer tokens / end-to-end latency; TTFB: arrival to the first streamed block "
           "(AR: token); gap: a request's mean time between streamed blocks (AR: tokens); busy: share of the "
           "time a replica runs passes; run: mean running requests per replica; * = Pareto front of tok/s/GPU "
           "against tok/s/user; ! = overloaded (under 95% of the rate served: queues grow); $/Mtok at list price (estimate); J/tok: board power envelope")


def n3(x: float | None) -> str:
    """Three significant digits, whole numbers from 1,000 on (never exponent notation)."""
    if x is None:
        return "-"
    return f"{x:.0f}" if abs(x) >= 1000 else num(x)


def short_load(p: dict) -> str:
    """The load in a few characters: 'c=32', '5 req/s', 'job 500×64', 'trace'."""
    label = p["load"]
    if label.startswith("batch job"):
        return f"job {p['requests']}×{p['concurrency']}"
    if p.get("rate") is not None:
        return f"{p['rate']:g} req/s"
    if p.get("concurrency") is not None:
        return f"c={p['concurrency']}"
    return "trace"


def curve_table(record: dict) -> tuple[list[str], list[list[str]]]:
    rows = []
    for p in record["points"]:
        mark = ("*" if p["pareto"] and len(record["points"]) > 1 else "") + ("!" if p["overloaded"] else "")
        rows.append([short_load(p) + mark,
                     n3(p["requests_per_s"]), n3(p["output_tokens_per_s"]), n3(p["output_tokens_per_s_per_gpu"]),
                     n3(p["tokens_per_s_per_user"]), n3(p["ttfb_s"]["median"]), n3(p["inter_block_s"]["median"]),
                     n3(p["latency_s"]["median"]), n3(p["latency_s"]["p99"]), f"{100 * p['gpu_busy_fraction']:.0f}",
                     n3(p["mean_running"]), n3(p["usd_per_mtok"]), n3(p["joules_per_token"])])
    return list(CURVE_HEADERS), rows


def latency_table(record: dict) -> tuple[list[str], list[list[str]]]:
    rows = []
    for p in record["points"]:
        for key, name in METRICS:
            s = p[key]
            rows.append([short_load(p), name] + [n3(s[k]) for k in ("mean", "median", "p90", "p99")])
    return list(LATENCY_HEADERS), rows


def header(record: dict) -> str:
    d = record["deployment"]
    ep = f" EP{d['ep']}" if d["ep"] > 1 else ""
    lines = [f"{d['model']} on {d['replicas']}× {d['gpu']} TP{d['tp']}{ep} {d['precision']} ({d['gpus']} GPU{'s' if d['gpus'] > 1 else ''}) · "
             f"{d['decoding']}" + (f", spread {d['tpf_spread']:g}" if d["tpf_spread"] else ""),
             f"running ≤ {d['max_running']} per replica ({d['max_running_source']}; memory fits {d['memory_limit']}) · "
             f"{d['release']} release ({d['release_source']}) · stack {d['stack']}"]
    for p in record["points"]:
        if p.get("makespan_s") is not None:
            lines.append(f"{p['load']}: makespan {num(p['makespan_s'])} s")
    return "\n".join(lines)


def max_rate_line(record: dict) -> str | None:
    m = record.get("max_rate")
    if not m:
        return None
    targets = ", ".join(f"{k}={v:g}" for k, v in m["targets"].items()) or "none (sustained only)"
    best = f"{num(m['rate'])} req/s" if m["rate"] else "none (even the lowest rate misses them)"
    return f"highest sustained {m['arrival']} rate within targets ({targets}): {best}; saturation {num(m['saturation_rate'])} req/s"


def csv_rows(record: dict) -> list[dict]:
    d = record["deployment"]
    out = []
    for p in record["points"]:
        row = dict(gpu=d["gpu"], replicas=d["replicas"], tp=d["tp"], ep=d["ep"], precision=d["precision"],
                   decoding=d["decoding"], release=d["release"], max_running=d["max_running"], load=p["load"],
                   concurrency=p["concurrency"], rate=p["rate"], requests=p["requests"])
        for k in ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "output_tokens_per_s_per_gpu",
                  "tokens_per_s_per_user"):
            row[k] = p[k]
        for key, _ in METRICS:
            for stat in ("mean", "median", "p90", "p99"):
                row[f"{key.removesuffix('_s')}_{stat}_s"] = p[key][stat]
        row.update(gpu_busy_fraction=p["gpu_busy_fraction"], mean_running=p["mean_running"],
                   usd_per_mtok=p["usd_per_mtok"], joules_per_token=p["joules_per_token"], makespan_s=p["makespan_s"],
                   pareto=p["pareto"])
        out.append(row)
    return out


def render_serve(record: dict, fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(to_json(record) + "\n")
        return
    if fmt == "csv":
        out.write(to_csv(csv_rows(record)))
        return
    rate = max_rate_line(record)
    tables = []
    if record["points"]:
        tables = [("what the deployment delivers", curve_table(record), CAPTION),
                  ("latency (measured requests)", latency_table(record), None)]
    if fmt == "markdown":
        parts = [header(record).replace("\n", "  \n") + "\n"]
        for title, (headers, rows), _ in tables:
            parts.append(f"\n{title}\n\n" + to_markdown(headers, rows, [i > 0 for i in range(len(headers))]))
        if rate:
            parts.append(f"\n{rate}\n")
        if tables:
            parts.append(f"\n{CAPTION}\n")
        out.write("".join(parts))
        return
    out.line(header(record))
    for title, (headers, rows), caption in tables:
        priority = CURVE_PRIORITY if headers == CURVE_HEADERS else [0] * len(headers)
        print_fitted(out, table_columns(headers, priority, left=2 if headers == LATENCY_HEADERS else 1), rows,
                     caption, title=title)
    if rate:
        out.line(rate)


def serve_chart(record: dict) -> Chart:
    """Two panels: tokens/s per GPU against tokens/s per user (every load, the Pareto front
    joined), and output tokens/s against the load (concurrency or rate)."""
    points = record["points"]
    d = record["deployment"]
    title = f"serve: {d['model']} on {d['replicas']}× {d['gpu']} TP{d['tp']} {d['precision']} {d['decoding']}"
    user = [p["tokens_per_s_per_user"] for p in points]
    gpu = [p["output_tokens_per_s_per_gpu"] for p in points]
    front = sorted((p for p in points if p["pareto"]), key=lambda p: p["tokens_per_s_per_user"])
    left = Panel(xlabel="tokens/s per user", ylabel="output tokens/s per GPU", xlog=_log_scaled(user),
                 ylog=_log_scaled(gpu), title="throughput against interactivity")
    left.series.append(Series(user, gpu, label="load", color=-1, marker="o", filled=False, size=5, gid="serve:points"))
    if front:
        left.series.append(Series([p["tokens_per_s_per_user"] for p in front],
                                  [p["output_tokens_per_s_per_gpu"] for p in front], label="Pareto front", color=0,
                                  marker="s", linestyle="-", size=7, gid="serve:pareto"))
    left.notes += [Note(p["tokens_per_s_per_user"], p["output_tokens_per_s_per_gpu"], short_load(p)) for p in points]
    by_rate = all(p.get("rate") is not None for p in points)
    xs = [p["rate"] if by_rate else (p["concurrency"] or 0) for p in points]
    right = Panel(xlabel="offered rate (req/s)" if by_rate else "concurrency", ylabel="output tokens/s",
                  xlog=_log_scaled(xs), title="saturation")
    order = sorted(range(len(points)), key=lambda i: xs[i])
    right.series.append(Series([xs[i] for i in order], [points[i]["output_tokens_per_s"] for i in order],
                               label="output tokens/s", color=1, marker="o", linestyle="-", size=6, gid="serve:curve"))
    m = record.get("max_rate")
    if m and m.get("rate") and by_rate:
        right.notes.append(Note(m["rate"], max(p["output_tokens_per_s"] for p in points), "max rate"))
    return Chart("serve", title, [left, right])
