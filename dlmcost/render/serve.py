"""`dlmcost serve` output: the header, the load-curve rows, the latency rows, CSV rows, the chart
and the HTML page.

Rows are built here as plain headers + cells (`curve_table`, `latency_table`), apart from
drawing them (`render_serve`), so that another table backend can take the same rows.
Numbers: three significant digits; json and csv carry every value in full.
"""

from __future__ import annotations

import math

from .charts import Chart, Note, Panel, Series, _log_scaled, short_model
from .output import Output
from .cells import num, percent, plural, safe
from .evidence import (against_published, band_meaning, band_phrase, first_token_phrase, front_end_phrase,
                       prefill_chunk_phrase, published_phrase, recv_interval_phrase, slow_kernels_phrase, span)
from .formats import markdown_text, to_csv, to_markdown, typed_json
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
           "against tok/s/user; ! = overloaded (under 95% of the arrivals served: queues grow); m = memory binds (more "
           "requests at once than memory holds at their final lengths: preemptions simulated, or under a synchronous "
           "release first-token times an upper bound); x = "
           "misses a target (--p95..., listed on stderr); $/Mtok at list price (estimate); J/tok: board power while busy, its idle share while "
           "idle, over output tokens")


CURVE_LEGEND = {
    "#": "the deployment, numbered as in the header",
    "load": "the load: c=N concurrent users (closed loop), a rate in requests/s (open loop), a batch job "
            "(requests × in parallel) or a trace; * = on the Pareto front of tok/s/GPU against tok/s/user, "
            "! = overloaded (under 95% of the arrivals served: queues grow), m = memory binds (preemptions simulated: "
            "stderr, and memory_binds and preemptions in JSON and CSV), x = misses a target (--p95...; which "
            "ones: stderr, and the misses column of JSON and CSV)",
    "req/s": "requests completed per second in the measured window",
    "out\ntok/s": "output tokens per second: requests/s × mean answer tokens",
    "tok/s\n/GPU": "output tokens/s over replicas × TP GPUs",
    "tok/s\n/user": "median over requests of answer tokens / end-to-end latency",
    "TTFB\np50 s": "median time from arrival to the first streamed block (AR: token), seconds",
    "gap\np50 s": "median of a request's mean time between streamed blocks (AR: tokens), seconds",
    "e2e\np50 s": "median end-to-end latency, arrival to the last answer token, seconds",
    "e2e\np99 s": "99th percentile of the end-to-end latency, seconds",
    "busy\n%": "share of the time a replica runs passes",
    "run\nmean": "mean running requests per replica",
    "$/Mtok": "dollars per million output tokens at the hardware file's list price (an estimate)",
    "$/Mtok\nlow–high": "the same at the low and high ends of the hardware file's public price range",
    "J/tok": "joules per output token: board power while a replica runs passes (busy %), its idle share while "
             "idle, over the output tokens",
}
LATENCY_LEGEND = {
    "#": "the deployment, numbered as in the header",
    "load": "the load, as in the table above",
    "": "time to first block: arrival to the first streamed block (AR: token); inter-block gap: a request's "
        "mean time between streamed blocks; end to end: arrival to the last answer token",
    "mean s": "mean over the measured requests, seconds",
    "median s": "median, seconds",
    "p90 s": "90th percentile, seconds",
    "p99 s": "99th percentile, seconds",
}


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
        mark = (("*" if p["pareto"] and curve else "") + ("!" if p["overloaded"] else "")
                + ("m" if p.get("memory_binds") else "") + ("x" if p["misses"] else ""))  # (a record from before it: none)
        rows.append(([str(i)] if i else []) + [
            short_load(p) + mark,
            n3(p["requests_per_s"]), n3(p["output_tokens_per_s"]), n3(p["output_tokens_per_s_per_gpu"]),
            n3(p["tokens_per_s_per_user"]), n3(p["ttfb_s"]["median"]), n3(p["inter_block_s"]["median"]),
            n3(p["latency_s"]["median"]), n3(p["latency_s"]["p99"]), f"{100 * p['gpu_busy_fraction']:.0f}",
            n3(p["mean_running"]), n3(p["usd_per_mtok"]), n3(p["joules_per_token"])])
    many = len(record["deployments"]) > 1
    return (["#"] if many else []) + list(CURVE_HEADERS), rows


BAND_HEADERS = ["load", "req/s", "out\ntok/s", "tok/s\n/GPU", "tok/s\n/user", "TTFB\np50 s", "e2e\np50 s", "e2e\np99 s",
                "$/Mtok"]
BAND_KEYS = ["requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu", "tokens_per_s_per_user",
             "ttfb_p50_s", "latency_p50_s", "latency_p99_s", "usd_per_mtok"]
BAND_LEGEND = {
    "#": "the deployment, numbered as in the header",
    "load": "the load, as in the table above",
    "req/s": "completed requests/s, low–high",
    "out\ntok/s": "output tokens/s, low–high",
    "tok/s\n/GPU": "output tokens/s per GPU, low–high",
    "tok/s\n/user": "median answer tokens / latency, low–high",
    "TTFB\np50 s": "median time to the first streamed block, low–high",
    "e2e\np50 s": "median end-to-end latency, low–high",
    "e2e\np99 s": "99th percentile end-to-end latency, low–high",
    "$/Mtok": "dollars per million output tokens, low–high",
}
BAND_PRIORITY = [0, 2, 1, 0, 0, 1, 0, 0, 1]  # a narrow terminal keeps the throughput per GPU and the latencies
BAND_TITLE = "the same loads at the two ends of the stack's error band"


def band_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """Each load's metrics simulated again at the two ends of the error band, 'low–high' ('-':
    no interval, as for a trace)."""
    rows = []
    for i, _, p in _points(record):
        iv = p.get("intervals") or {}
        rows.append(([str(i)] if i else []) + [short_load(p)]
                    + [span(*iv[k], n3) if k in iv else "-" for k in BAND_KEYS])
    many = len(record["deployments"]) > 1
    return (["#"] if many else []) + list(BAND_HEADERS), rows


def band_lines(record: dict) -> list[str]:
    """The published decoding each deployment's tokens per forward come from, and its error band."""
    many = len(record["deployments"]) > 1
    out = []
    for i, entry in enumerate(record["deployments"], 1):
        d, tag = entry["deployment"], f"#{i} " if many else ""
        if d.get("published"):
            out.append(f"{tag}{published_phrase(d['published'])}")
        band = d.get("error_band")
        if band:
            out.append(f"{tag}error band: {band_phrase(band.get('label') or band['stack'], band['low'], band['high'], band['numbers'])}, "
                       f"{safe(band['basis'])}{against_published(band)}{first_token_phrase(band)} "
                       f"({band_meaning([band])})")
    return out


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
    lines = [f"{d['model']} on {d['replicas']}× {d['gpu']} TP{d['tp']}{ep} {d['precision']} K/V {d['kv_dtype']} "
             f"({plural(d['gpus'], d['unit'])}) · {d['decoding']}"
             + (f", spread {d['tpf_spread']:.2g}" if d["tpf_spread"] else "") + f" · stack {d['stack']}"
             + (" (default; --stack)" if d.get("stack_default") else ""),
             f"running ≤ {d['max_running']}{' (+ first blocks)' if d.get('first_block_outside_limit') else ''} "
             f"per replica ({_limit_source(d)}; {percent(d['mem_fraction'])} of memory fits "
             f"{d['memory_limit']}) · {d['release']} release ({d['release_source']})"
             + _chunk_words(d) + _recv_words(d) + _cache_words(d) + _front_end_words(d) + _slow_kernel_words(d)]
    return lines


def _slow_kernel_words(d: dict) -> str:
    """What the stack's release adds to every pass on this part at this precision, where it ran slower
    kernels than the hardware file's tuned ones."""
    on = d.get("slow_kernels")
    phrase = slow_kernels_phrase([dict(stack=d["stack"], gpu=d["gpu"], precision=d["precision"], **on)] if on else [])
    return f" · {phrase}" if phrase else ""


def _cache_words(d: dict) -> str:
    """The share of the prompts in the prefix cache, where one was given."""
    share, given = d.get("cached_prompt_share"), d.get("cached_prompt_given") or 0
    if share is None:
        return ""
    if d.get("cached_prompt_from_trace"):
        over = "the mean over the trace's requests, from its hash_ids: 512 tokens a block, one cache for every replica, never evicted"
    else:
        over = f"the mean of {given:,} shares, one a request sent" if given > 1 else "every request"
    return f" · {share:.0%} of each prompt in the prefix cache ({over}, --cached-prompt)"


def _front_end_words(d: dict) -> str:
    """The API servers every request passes before the engine, where the stack has a front-end cost."""
    phrase = front_end_phrase(d.get("api_servers"), d.get("front_end_us_per_request"), d.get("api_servers_source", ""),
                              d["stack"], d.get("first_token_delay_us"))
    return f" · {phrase}" if phrase else ""


def _chunk_words(d: dict) -> str:
    """The prompts' token budget a step, beside the decodes or before them, where one is on."""
    phrase = prefill_chunk_phrase(d.get("prefill_chunk_tokens"), d.get("prefill_chunk_source", ""), d["stack"],
                                  bool(d.get("prefill_first")))
    return f" · {phrase}" if phrase else ""


def _recv_words(d: dict) -> str:
    """The scheduler's receive interval, where it skips receives (above 1)."""
    phrase = recv_interval_phrase(d.get("recv_interval", 1))
    return f" · {phrase}" if phrase else ""


def _limit_source(d: dict) -> str:
    """Where the running limit came from, with the flag that changes it unless the user gave it."""
    source = {"stack": f"{d['stack']}'s default"}.get(d["max_running_source"], d["max_running_source"])
    return source if d["max_running_source"] == "option" else f"{source}, --max-running to change"


def header(record: dict) -> str:
    many = len(record["deployments"]) > 1
    lines = []
    for i, entry in enumerate(record["deployments"], 1):
        first, second = deployment_lines(entry["deployment"])
        lines += [f"#{i} {first}", f"   {second}"] if many else [first, second]
        for p in entry["points"]:
            if p.get("makespan_s") is not None:
                lines.append(f"{'   ' if many else ''}{p['load']}: makespan {n3(p['makespan_s'])} s")
    return "\n".join(lines + band_lines(record))


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


def collapsed_note(record: dict) -> str | None:
    """A word when a load's latency percentiles are all one value (p50 = p90 = p99): every measured
    request took the same time, as in a closed loop whose requests all have the same lengths (each
    user's next request meets the same batch as the last), so the percentiles say nothing of a tail."""
    loads = [(f"#{i} " if i else "") + short_load(p) for i, _, p in _points(record)
             if p["requests"] > 1 and p["latency_s"]["median"] is not None
             and math.isclose(p["latency_s"]["median"], p["latency_s"]["p99"], rel_tol=1e-9)]
    if not loads:
        return None
    return (f"p50 = p90 = p99 at {', '.join(loads)}: every measured request took the same time (fixed prompt and "
            f"answer lengths, each request meeting the same batch), so there is no tail to show; give lengths as "
            f"percentiles (--answer 'p50:N,p90:M'), a --tpf-spread, or an open-loop --rate for one")


# The latency targets' names (plan's keys and serve's --p50/--p95/--p99/--first-block-p95), beside
# the full distributions: a key means the same in serve's CSV, plan's and `--require`.
TARGET_COLUMNS = (("p50_latency_s", "latency_s", "median"), ("p95_latency_s", "latency_s", "p95"),
                  ("p99_latency_s", "latency_s", "p99"), ("p95_first_block_s", "ttfb_s", "p95"))
CSV_KEYS = ("deployment", "model", "gpu", "replicas", "tp", "ep", "precision", "decoding", "release", "max_running",
            "load", "concurrency", "rate", "requests", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s",
            "output_tokens_per_s_per_gpu", "tokens_per_s_per_user",
            *(f"{key.removesuffix('_s')}_{stat}_s" for key, _ in METRICS for stat in ("mean", "median", "p90", "p95", "p99")),
            *(name for name, _, _ in TARGET_COLUMNS), "gpu_busy_fraction", "mean_running", "usd_per_mtok",
            "usd_per_mtok_low", "usd_per_mtok_high", "joules_per_token", "makespan_s", "overloaded", "memory_binds", "preemptions", "pareto",
            "meets_targets", "misses")
"""serve's CSV columns: the keys `serve --require` names."""


def miss_text(m: dict) -> str:
    """A missed target as `serve` and `plan` say it: 'p95_latency_s 3.6 > 1' (a floor: '<')."""
    op = "<" if m["target"].startswith("min_") else ">"
    return f"{m['target']} {m['value']:.4g} {op} {m['limit']:.4g}"


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
                for stat in ("mean", "median", "p90", "p95", "p99"):
                    row[f"{key.removesuffix('_s')}_{stat}_s"] = p[key][stat]
            row.update({name: p[key][stat] for name, key, stat in TARGET_COLUMNS})
            row.update(gpu_busy_fraction=p["gpu_busy_fraction"], mean_running=p["mean_running"],
                       usd_per_mtok=p["usd_per_mtok"], usd_per_mtok_low=p.get("usd_per_mtok_low"),
                       usd_per_mtok_high=p.get("usd_per_mtok_high"), joules_per_token=p["joules_per_token"],
                       makespan_s=p["makespan_s"], overloaded=p["overloaded"], memory_binds=p["memory_binds"],
                       preemptions=p.get("preemptions", 0), pareto=p["pareto"],
                       meets_targets=p["meets_targets"], misses="; ".join(miss_text(m) for m in p["misses"]))
            out.append(row)
    return out


def render_serve(record: dict, fmt: str, out: Output, charts: list | None = None) -> None:
    if fmt == "html":
        out.write(serve_page(record, charts or []))
        return
    if fmt == "json":
        out.write(typed_json("serve", record))
        return
    if fmt == "csv":
        out.write(to_csv(csv_rows(record)))
        return
    rates = [line for line in [pareto_line(record), collapsed_note(record)] if line] + max_rate_lines(record)
    tables = []
    if any(entry["points"] for entry in record["deployments"]):
        tables = [("what the deployment delivers", curve_table(record), CAPTION),
                  ("latency (measured requests)", latency_table(record), None)]
        if any(p.get("intervals") for _, _, p in _points(record)):
            tables.append((BAND_TITLE, band_table(record), None))
    if fmt == "markdown":
        parts = [markdown_text(header(record)).replace("\n", "  \n") + "\n"]
        for title, (headers, rows), _ in tables:
            parts.append(f"\n{title}\n\n" + to_markdown(headers, rows, [h not in ("load", "") for h in headers]))
        parts += [f"\n{markdown_text(line)}\n" for line in rates]
        if tables:
            parts.append(f"\n{CAPTION}\n")
        out.write("".join(parts))
        return
    out.line(header(record))
    for title, (headers, rows), caption in tables:
        curve = headers[-1] == CURVE_HEADERS[-1]
        banded = title == BAND_TITLE
        own = CURVE_PRIORITY if curve else BAND_PRIORITY if banded else [0] * len(LATENCY_HEADERS)
        priority = ([0] if headers[0] == "#" else []) + own
        left = headers.index("load") + (1 if curve or banded else 2)
        columns = table_columns(headers, priority, left=left)
        if headers[0] == "#":
            columns[0].right = True
        print_fitted(out, columns, rows, caption, title=title)
    for line in rates:
        out.line(line)


def deployment_name(d: dict) -> str:
    """A deployment as a legend names it: 'LLaDA-8B-Instruct on 1× H100 SXM TP1 block/32/2'."""
    return f"{short_model(d['model'])} on {d['replicas']}× {d['gpu']} TP{d['tp']} {d['decoding']}"


def _load_x(p: dict, by_rate: bool) -> float | None:
    """Where a load point sits on a load axis: its offered rate, or its concurrency (None: a trace)."""
    return p.get("rate") if by_rate else p.get("concurrency")


def serve_chart(record: dict) -> Chart:
    """Up to three panels: tokens/s per GPU against tokens/s per user (every load of every
    deployment, the Pareto front over all of them joined); output tokens/s against the load
    (concurrency or rate), one curve per deployment, with its saturation throughput (every batch
    full) as a dashed line and, on a rate axis, the saturation point; end-to-end latency p50 and
    p99 against the load, with the saturation rate (or, on a concurrency axis, the requests the
    replicas hold at once) as a dotted line. Each deployment's legend entry names its model. A
    trace replay, which has no load axis, gets the first panel only."""
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
    xs_all = [_load_x(p, by_rate) for _, p in points]
    on_load_axis = all(x is not None for x in xs_all)
    axis = "offered rate (req/s)" if by_rate else "concurrency"
    xlog = on_load_axis and _log_scaled(xs_all)
    right = Panel(xlabel=axis, ylabel="output tokens/s", xlog=xlog, title="throughput against load")
    latency = Panel(xlabel=axis, ylabel="end-to-end latency (s)", xlog=xlog,
                    ylog=_log_scaled([p["latency_s"][k] for _, p in points for k in ("median", "p99")]),
                    title="latency against load")
    for i, e in enumerate(entries):
        # one deployment: the title says the rest
        name = f"#{i + 1} {deployment_name(e['deployment'])}" if many else short_model(e["deployment"]["model"])
        ps = e["points"]
        left.series.append(Series([p["tokens_per_s_per_user"] for p in ps], [p["output_tokens_per_s_per_gpu"] for p in ps],
                                  label=name, color=i + 1 if many else -1, marker="o", filled=False, size=5,
                                  gid=f"serve:points:{i + 1}"))
        if not on_load_axis:
            continue
        order = sorted(range(len(ps)), key=lambda k: _load_x(ps[k], by_rate))
        xs = [_load_x(ps[k], by_rate) for k in order]
        right.series.append(Series(xs, [ps[k]["output_tokens_per_s"] for k in order], label=name, color=i + 1,
                                   marker="o", linestyle="-", size=6, gid=f"serve:curve:{i + 1}"))
        for stat, style, marker in (("median", "-", "o"), ("p99", "--", "^")):
            latency.series.append(Series(xs, [ps[k]["latency_s"][stat] for k in order],
                                         label=f"{name}, {'p50' if stat == 'median' else 'p99'}", color=i + 1,
                                         marker=marker, linestyle=style, size=5, gid=f"serve:latency-{stat}:{i + 1}"))
        _mark_saturation(right, latency, e, i, xs, by_rate, many)
    front = sorted((p for _, p in points if p["pareto"]), key=lambda p: p["tokens_per_s_per_user"])
    if front:
        left.series.append(Series([p["tokens_per_s_per_user"] for p in front],
                                  [p["output_tokens_per_s_per_gpu"] for p in front], label="Pareto front", color=0,
                                  marker="s", linestyle="-", size=7, gid="serve:pareto"))
    left.notes += [Note(p["tokens_per_s_per_user"], p["output_tokens_per_s_per_gpu"],
                        (f"#{i + 1} " if many else "") + short_load(p)) for i, p in points]
    return Chart("serve", title, [left, right, latency] if on_load_axis else [left], per_row=2)


def _mark_saturation(right: Panel, latency: Panel, entry: dict, i: int, xs: list[float], by_rate: bool,
                     many: bool) -> None:
    """The deployment's saturation on the load panels: its throughput as a dashed line across the
    throughput panel, and where the load reaches it (the saturation rate; on a concurrency axis the
    requests the replicas hold at once, when the curve spans it) as a dotted line on the latency
    panel and a point on the throughput curve's panel; the highest rate within the targets, when
    --max-rate found one."""
    sat = entry.get("saturation")
    tag = f"#{i + 1} " if many else ""
    if sat:
        where = sat["rate"] if by_rate else sat["in_flight"]
        marked = by_rate or min(xs) <= where <= max(xs)
        right.series.append(Series([min(xs), max(xs + [where] if marked else xs)], [sat["output_tokens_per_s"]] * 2,
                                   label="saturation (every batch full)" if i == 0 else None, color=i + 1,
                                   linestyle="--", width=1.0, gid=f"serve:saturation:{i + 1}"))
        if marked:
            what = f"{n3(sat['rate'])} req/s" if by_rate else f"c={sat['in_flight']}"
            right.series.append(Series([where], [sat["output_tokens_per_s"]],
                                       label="saturation point" if i == 0 else None, color=i + 1, marker="X",
                                       size=9, gid=f"serve:saturation-point:{i + 1}"))
            right.notes.append(Note(where, sat["output_tokens_per_s"],
                                    f"{tag}saturation {what}, {n3(sat['output_tokens_per_s'])} tok/s"))
            ys = [p["latency_s"][k] for p in entry["points"] for k in ("median", "p99")]
            latency.series.append(Series([where, where], [min(ys), max(ys)],
                                         label=("saturation rate" if by_rate else "batches full") if i == 0 else None,
                                         color=i + 1, linestyle=":", width=1.0, gid=f"serve:saturation-line:{i + 1}"))
    m = entry.get("max_rate")
    if m and m.get("rate") and by_rate:
        right.notes.append(Note(m["rate"], max(p["output_tokens_per_s"] for p in entry["points"]), f"{tag}max rate"))


def price_range(low: float | None, high: float | None) -> str:
    """'0.83–3.3' (three digits each); '-' without both ends."""
    return "-" if low is None or high is None else f"{n3(low)}–{n3(high)}"


def saturation_lines(record: dict) -> list[str]:
    """Each deployment's saturation: what it completes with every batch always full."""
    many = len(record["deployments"]) > 1
    out = []
    for i, entry in enumerate(record["deployments"], 1):
        s = entry.get("saturation")
        if s:
            out.append(f"{f'#{i} ' if many else ''}saturation (every batch full, {s['in_flight']:,} requests held at "
                       f"once): {n3(s['rate'])} req/s, {n3(s['output_tokens_per_s'])} output tok/s "
                       f"({n3(s['output_tokens_per_s_per_gpu'])} per GPU)")
    return out


def serve_summary(record: dict) -> str:
    """One sentence: the load that delivers the most output tokens/s per GPU (and its latency),
    how many loads were overloaded, and the saturation (one deployment) or its range (several)."""
    many = len(record["deployments"]) > 1
    points = [(i, e, p) for i, e in enumerate(record["deployments"], 1) for p in e["points"]]
    sats = [e["saturation"] for e in record["deployments"] if e.get("saturation")]
    if not points:
        return "No load was run" + (f"; saturation {n3(sats[0]['rate'])} req/s." if sats else ".")
    i, e, best = max(points, key=lambda t: t[2]["output_tokens_per_s_per_gpu"])
    who = f"#{i} {deployment_name(e['deployment'])}" if many else deployment_name(e["deployment"])
    text = (f"Most output tokens/s per GPU: {who} at {short_load(best)}, {n3(best['output_tokens_per_s_per_gpu'])} "
            f"(p99 latency {n3(best['latency_s']['p99'])} s)")
    overloaded = sum(p["overloaded"] for _, _, p in points)
    if overloaded:
        text += f"; {overloaded} of {len(points)} loads overloaded (queues grow)"
    if sats and not many:
        text += f"; it saturates at {n3(sats[0]['rate'])} req/s ({n3(sats[0]['output_tokens_per_s'])} output tok/s)"
    elif sats:
        rates = [s["rate"] for s in sats]
        text += f"; saturation {n3(min(rates))}–{n3(max(rates))} req/s across the deployments"
    return text + "."


def serve_page(record: dict, charts: list) -> str:
    """`serve --format html`: the summary, the header, the charts, the whole load-curve table (with
    the $/Mtok range of the hardware file's prices), the latency table, the Pareto front, the
    saturation and the highest sustained rate of each deployment."""
    from . import page

    sections = [page.figures(charts)]
    if any(entry["points"] for entry in record["deployments"]):
        headers, rows = curve_table(record)
        at = headers.index("$/Mtok") + 1
        ranges = [price_range(p.get("usd_per_mtok_low"), p.get("usd_per_mtok_high")) for _, _, p in _points(record)]
        headers = headers[:at] + ["$/Mtok\nlow–high"] + headers[at:]
        rows = [row[:at] + [r] + row[at:] for row, r in zip(rows, ranges)]
        sections.append("<h2>what the deployment delivers</h2>" + page.table(headers, rows, legend=CURVE_LEGEND))
        headers, rows = latency_table(record)
        sections.append("<h2>latency (measured requests)</h2>" + page.table(headers, rows, legend=LATENCY_LEGEND))
        if any(p.get("intervals") for _, _, p in _points(record)):
            headers, rows = band_table(record)
            sections.append(f"<h2>{BAND_TITLE}</h2>" + page.table(headers, rows, legend=BAND_LEGEND))
    lines = ([line for line in [pareto_line(record), collapsed_note(record)] if line] + saturation_lines(record)
             + max_rate_lines(record))
    sections += [f"<p>{page.text(line)}</p>" for line in lines]
    models = ", ".join(dict.fromkeys(e["deployment"]["model"] for e in record["deployments"]))
    return page.page(f"dlmcost serve: {models}", header(record), sections, summary=serve_summary(record))
