"""`dlmcost serve` output: the header, the load-curve rows, the latency rows, CSV rows and the chart.

Rows are built here as plain headers + cells (`curve_table`, `latency_table`), apart from
drawing them (`render_serve`), so that another table backend can take the same rows.
Numbers: three significant digits; json and csv carry every value in full.
"""

from __future__ import annotations

from .charts import Chart, Note, Panel, Series, _log_scaled
from .output import Output
from .cells import num
from .formats import to_csv, to_json, to_markdown
from .tables import print_fitted, table_columns

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


def _points(record: dict):
    """(deployment number from 1, or None when there is one deployment; deployment; point)."""
    many = len(record["deployments"]) > 1
    for i, d in enumerate(record["deployments"], 1):
        for p in d["points"]:
            yield (i if many else None), d, p


def curve_table(record: dict) -> tuple[list[str], list[list[str]]]:
    rows = []
    curve = sum(len(d["points"]) for d in record["deployments"]) > 1
    for i, _, p in _points(record):
        mark = ("*" if p["pareto"] and curve else "") + ("!" if p["overloaded"] else "")
        rows.append(([str(i)] if i else []) + [
            short_load(p) + mark,
            n3(p["requests_per_s"]), n3(p["output_tokens_per_s"]), n3(p["output_tokens_per_s_per_gpu"]),
            n3(p["tokens_per_s_per_user"]), n3(p["ttfb_s"]["median"]), n3(p["inter_block_s"]["median"]),
            n3(p["latency_s"]["median"]), n3(p["latency_s"]["p99"]), f"{100 * p['gpu_busy_fraction']:.0f}",
            n3(p["mean_running"]), n3(p["usd_per_mtok"]), n3(p["joules_per_token"])])
    many = len(record["deployments"]) > 1
    return (["#"] if many else []) + list(CURVE_HEADERS), rows


def latency_table(record: dict) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i, _, p in _points(record):
        for key, name in METRICS:
            s = p[key]
            rows.append(([str(i)] if i else []) + [short_load(p), name] +
                        [n3(s[k]) for k in ("mean", "median", "p90", "p99")])
    many = len(record["deployments"]) > 1
    return (["#"] if many else []) + list(LATENCY_HEADERS), rows


def deployment_lines(d: dict) -> list[str]:
    ep = f" EP{d['ep']}" if d["ep"] > 1 else ""
    lines = [f"{d['model']} on {d['replicas']}× {d['gpu']} TP{d['tp']}{ep} {d['precision']} "
             f"({d['gpus']} GPU{'s' if d['gpus'] > 1 else ''}) · {d['decoding']}"
             + (f", spread {d['tpf_spread']:g}" if d["tpf_spread"] else "") + f" · stack {d['stack']}",
             f"running ≤ {d['max_running']}{' (+ first blocks)' if d.get('first_block_outside_limit') else ''} "
             f"per replica ({d['max_running_source']}; memory fits "
             f"{d['memory_limit']}) · {d['release']} release ({d['release_source']})"]
    return lines


def header(record: dict) -> str:
    many = len(record["deployments"]) > 1
    lines = []
    for i, entry in enumerate(record["deployments"], 1):
        first, second = deployment_lines(entry["deployment"])
        lines += [f"#{i} {first}", f"   {second}"] if many else [first, second]
        for p in entry["points"]:
            if p.get("makespan_s") is not None:
                lines.append(f"{'   ' if many else ''}{p['load']}: makespan {n3(p['makespan_s'])} s")
    return "\n".join(lines)


def max_rate_lines(record: dict) -> list[str]:
    many = len(record["deployments"]) > 1
    out = []
    for i, entry in enumerate(record["deployments"], 1):
        m = entry.get("max_rate")
        if not m:
            continue
        targets = ", ".join(f"{k}={v:g}" for k, v in m["targets"].items()) or "none (sustained only)"
        best = f"{n3(m['rate'])} req/s" if m["rate"] else "none (even the lowest rate misses them)"
        out.append(f"{f'#{i} ' if many else ''}highest sustained {m['arrival']} rate within targets ({targets}): "
                   f"{best}; saturation {n3(m['saturation_rate'])} req/s")
    return out


def pareto_line(record: dict) -> str | None:
    """The front, named: 'Pareto front of tokens/s per GPU against tokens/s per user: c=8, c=32'."""
    many = len(record["deployments"]) > 1
    names = [(f"#{i} " if i else "") + short_load(p) for i, _, p in _points(record) if p["pareto"]]
    if sum(len(d["points"]) for d in record["deployments"]) < 2 or not names:
        return None
    return f"Pareto front of tokens/s per GPU against tokens/s per user{' (all deployments)' if many else ''}: " \
           + ", ".join(names)


def csv_rows(record: dict) -> list[dict]:
    out = []
    for i, entry in enumerate(record["deployments"], 1):
        d = entry["deployment"]
        for p in entry["points"]:
            row = dict(deployment=i, model=d["model"], gpu=d["gpu"], replicas=d["replicas"], tp=d["tp"], ep=d["ep"],
                       precision=d["precision"], decoding=d["decoding"], release=d["release"],
                       max_running=d["max_running"], load=p["load"], concurrency=p["concurrency"], rate=p["rate"],
                       requests=p["requests"])
            for k in ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "output_tokens_per_s_per_gpu",
                      "tokens_per_s_per_user"):
                row[k] = p[k]
            for key, _ in METRICS:
                for stat in ("mean", "median", "p90", "p99"):
                    row[f"{key.removesuffix('_s')}_{stat}_s"] = p[key][stat]
            row.update(gpu_busy_fraction=p["gpu_busy_fraction"], mean_running=p["mean_running"],
                       usd_per_mtok=p["usd_per_mtok"], joules_per_token=p["joules_per_token"],
                       makespan_s=p["makespan_s"], overloaded=p["overloaded"], pareto=p["pareto"])
            out.append(row)
    return out


def render_serve(record: dict, fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(to_json(record) + "\n")
        return
    if fmt == "csv":
        out.write(to_csv(csv_rows(record)))
        return
    rates = [line for line in [pareto_line(record)] if line] + max_rate_lines(record)
    tables = []
    if any(entry["points"] for entry in record["deployments"]):
        tables = [("what the deployment delivers", curve_table(record), CAPTION),
                  ("latency (measured requests)", latency_table(record), None)]
    if fmt == "markdown":
        parts = [header(record).replace("\n", "  \n") + "\n"]
        for title, (headers, rows), _ in tables:
            parts.append(f"\n{title}\n\n" + to_markdown(headers, rows, [h not in ("load", "") for h in headers]))
        parts += [f"\n{line}\n" for line in rates]
        if tables:
            parts.append(f"\n{CAPTION}\n")
        out.write("".join(parts))
        return
    out.line(header(record))
    for title, (headers, rows), caption in tables:
        curve = headers[-1] == CURVE_HEADERS[-1]
        priority = ([0] if headers[0] == "#" else []) + (CURVE_PRIORITY if curve else [0] * len(LATENCY_HEADERS))
        left = headers.index("load") + (1 if curve else 2)
        columns = table_columns(headers, priority, left=left)
        if headers[0] == "#":
            columns[0].right = True
        print_fitted(out, columns, rows, caption, title=title)
    for line in rates:
        out.line(line)


def serve_chart(record: dict) -> Chart:
    """Two panels: tokens/s per GPU against tokens/s per user (every load of every deployment, the
    Pareto front over all of them joined), and output tokens/s against the load (concurrency or
    rate), one curve per deployment."""
    entries = [e for e in record["deployments"] if e["points"]]
    many = len(record["deployments"]) > 1
    first = entries[0]["deployment"]
    title = ("serve: " + (f"{len(entries)} deployments" if many else
                          f"{first['model']} on {first['replicas']}× {first['gpu']} TP{first['tp']} "
                          f"{first['precision']} {first['decoding']}"))
    points = [(i, p) for i, e in enumerate(entries) for p in e["points"]]
    user = [p["tokens_per_s_per_user"] for _, p in points]
    gpu = [p["output_tokens_per_s_per_gpu"] for _, p in points]
    left = Panel(xlabel="tokens/s per user", ylabel="output tokens/s per GPU", xlog=_log_scaled(user),
                 ylog=_log_scaled(gpu), title="throughput against interactivity")
    by_rate = all(p.get("rate") is not None for _, p in points)
    xs_all = [p["rate"] if by_rate else (p["concurrency"] or 0) for _, p in points]
    right = Panel(xlabel="offered rate (req/s)" if by_rate else "concurrency", ylabel="output tokens/s",
                  xlog=_log_scaled(xs_all), title="saturation")
    for i, e in enumerate(entries):
        label = f"#{i + 1} {e['deployment']['gpu']} {e['deployment']['decoding']}" if many else "load"
        ps = e["points"]
        left.series.append(Series([p["tokens_per_s_per_user"] for p in ps], [p["output_tokens_per_s_per_gpu"] for p in ps],
                                  label=label, color=i + 1 if many else -1, marker="o", filled=False, size=5,
                                  gid=f"serve:points:{i + 1}"))
        xs = [p["rate"] if by_rate else (p["concurrency"] or 0) for p in ps]
        order = sorted(range(len(ps)), key=lambda k: xs[k])
        right.series.append(Series([xs[k] for k in order], [ps[k]["output_tokens_per_s"] for k in order],
                                   label=label if many else "output tokens/s", color=i + 1, marker="o", linestyle="-",
                                   size=6, gid=f"serve:curve:{i + 1}"))
        m = e.get("max_rate")
        if m and m.get("rate") and by_rate:
            right.notes.append(Note(m["rate"], max(p["output_tokens_per_s"] for p in ps), "max rate"))
    front = sorted((p for _, p in points if p["pareto"]), key=lambda p: p["tokens_per_s_per_user"])
    if front:
        left.series.append(Series([p["tokens_per_s_per_user"] for p in front],
                                  [p["output_tokens_per_s_per_gpu"] for p in front], label="Pareto front", color=0,
                                  marker="s", linestyle="-", size=7, gid="serve:pareto"))
    left.notes += [Note(p["tokens_per_s_per_user"], p["output_tokens_per_s_per_gpu"],
                        (f"#{i + 1} " if many else "") + short_load(p)) for i, p in points]
    return Chart("serve", title, [left, right])
