"""`dlmcost plan` output: the header (traffic, targets, what was searched), the ranked table of
deployments, the AR baseline and the nearest miss, the CSV rows and the HTML page."""

from __future__ import annotations

import math

from .cells import num, percent, plural, safe, sig
from .evidence import (against_published, band_meaning, band_phrase, first_token_phrase, front_end_phrase,
                       prefill_chunk_phrase, published_brief, recv_interval_phrase, slow_kernels_phrase, span)
from .formats import markdown_text, to_csv, to_markdown, typed_json
from .output import Output
from .tables import print_fitted, table_columns

PLAN_HEADERS = ["model", "GPU", "scheme/\nb/tpf", "R×TP\nprec", "K/V", "B", "p50\ns", "p95\ns", "1st\nblk s", "tok/s\n/user",
                "out\ntok/s", "tok/s\n/GPU", "cap\nreq/s", "head\n%", "$/h", "$/Mtok", "$/Mtok\n@cap", "J/tok",
                "GPUs\n(band)", "$/Mtok\nband", "p95 s\nband"]
PLAN_PRIORITY = [0, 0, 0, 0, 0, 3, 2, 0, 3, 2, 3, 1, 4, 4, 3, 0, 0, 4, 1, 4, 3]  # larger: dropped sooner on a narrow terminal
PRICE_RANGE = "$/Mtok\nlow–high"  # the HTML page's column: $/Mtok over the price's public range
PLAN_LEGEND = {
    "model": "the model deployed",
    "GPU": "the accelerator, as `dlmcost gpus` names it",
    "scheme/\nb/tpf": "the decoding: scheme / block length / tokens per forward (ar: one token per pass)",
    "R×TP\nprec": "data-parallel replicas × tensor-parallel GPUs per replica, and the weights' precision",
    "K/V": "the K/V cache's number format (--kv-dtype; a column when several were searched)",
    "B": "the batch limit: requests a replica runs at once (JSON: max_running, serve's --max-running)",
    "p50\ns": "median end-to-end latency of the simulated requests, seconds",
    "p95\ns": "95th percentile end-to-end latency, seconds",
    "1st\nblk s": "95th percentile time to the first streamed block (AR: token), seconds; m = memory binds (more "
                  "requests at once than memory holds at their final lengths: preemptions simulated; upper bounds under a "
                  "synchronous release)",
    "tok/s\n/user": "median over requests of answer tokens / latency",
    "out\ntok/s": "output tokens per second at the offered load",
    "tok/s\n/GPU": "output tokens/s over replicas × TP GPUs",
    "cap\nreq/s": "saturation throughput: requests/s the replicas complete with every batch full",
    "head\n%": "the capacity's margin over the offered load",
    "$/h": "dollars per hour for all the GPUs, at the hardware file's list price (an estimate) or --price",
    "$/Mtok": "dollars per million output tokens at the offered load (the ranking); * = on the cost/latency "
              "Pareto front; -: no price for the GPU",
    PRICE_RANGE: "the same at the low and high ends of the hardware file's public price range (list prices move: "
                 "a year can double or halve them)",
    "$/Mtok\n@cap": "dollars per million output tokens at the highest load the deployment sustains within the targets",
    "J/tok": "joules per output token: board power while a replica runs passes (its busy fraction), its idle "
             "share while idle, over the output tokens",
    "GPUs\n(band)": "replicas × TP GPUs, and in brackets the fewest GPUs meeting the targets were every step "
                    "slower or faster than predicted by the stack's error band (predicted / measured speed, 10th–90th "
                    "percentile over published measurements the stack was not fitted on, or over a calibration's "
                    "held-out measurements: the header says which); none: no replica count meets them there; "
                    "a band above 1 at both ends (nine in ten measurements or more slower than predicted) puts "
                    "both above the estimate",
    "$/Mtok\nband": "dollars per million output tokens at the band's two ends, on those GPUs",
    "p95 s\nband": "the p95 latency at the band's two ends, on those GPUs",
}


def plan_table(records: list[dict], show_decoding: bool, price_range: bool = False,
               show_kv: bool = False) -> tuple[list[str], list[list]]:
    """Headers and cells, two significant digits (json/csv carry full values); the decoding column
    only when several decodings were searched, the K/V format's only when several formats were
    (`show_kv`), the model column only when several models were, so that the table stays within
    100 columns. '*' after $/Mtok marks the cost/latency Pareto front, 'm' after the first block's time
    a deployment memory binds;
    '-': no price for the GPU. `price_range`: a column of $/Mtok over the price's range after $/Mtok."""
    def g2(x):
        return "-" if x is None else f"{x:.2g}" if abs(x) < 100 else f"{x:,.0f}"

    def model(r):
        return r.get("model", "").rpartition("/")[2]

    def rate(x):
        return "-" if x is None else f"{x:.0f}" if x >= 100 else f"{x:.3g}"

    cells = [[model(r), r["gpu"], r["decoding"], f"{r['replicas']}×{r['tp']} {r['precision']}",
              safe(r.get("kv_dtype", "bf16")), str(r["max_running"]),
              g2(r["p50_latency_s"]), g2(r["p95_latency_s"]),
              g2(r["p95_first_block_s"]) + ("m" if r.get("memory_binds") else ""),  # (a record from before it: none)
              num(r["tokens_per_s_per_user"]), rate(r.get("output_tokens_per_s")), rate(r.get("tokens_per_s_per_gpu")),
              num(r["capacity_rps"]), f"{100 * r['headroom']:,.0f}",
              "-" if r["usd_per_hour"] is None else sig(r['usd_per_hour'], 4),
              g2(r["usd_per_mtok"]) + ("*" if r.get("pareto") else ""), g2(r.get("usd_per_mtok_at_capacity")),
              g2(r["joules_per_token"]), *_band_cells(r, g2)] for r in records]
    several_models = len({r.get("model") for r in records}) > 1
    keep = [several_models, True, show_decoding, True, show_kv] + [True] * (len(PLAN_HEADERS) - 5)
    headers, rows = [h for h, k in zip(PLAN_HEADERS, keep) if k], [[c for c, k in zip(row, keep) if k] for row in cells]
    if price_range:
        at = headers.index("$/Mtok") + 1
        ends = [(r.get("usd_per_mtok_low"), r.get("usd_per_mtok_high")) for r in records]
        headers.insert(at, PRICE_RANGE)
        rows = [row[:at] + ["-" if None in e else f"{g2(e[0])}–{g2(e[1])}"] + row[at:] for row, e in zip(rows, ends)]
    return headers, rows


def _band_cells(r: dict, g2) -> list[str]:
    """The deployment's GPUs with those at the error band's two ends in brackets ('3 (2–5)'), and
    its $/Mtok and p95 latency at the two ends (the GPUs alone and '-' without a band)."""
    gpus, intervals = r["replicas"] * r["tp"], r.get("intervals") or {}
    if "band" not in intervals:
        return [f"{gpus}", "-", "-"]
    return [f"{gpus} ({span(*intervals['gpus'], lambda v: f'{v:.0f}')})", span(*intervals["usd_per_mtok"], g2),
            span(*intervals["p95_latency_s"], g2)]


PLAN_CSV_KEYS = ("model", "gpu", "replicas", "tp", "gpus", "precision", "kv_dtype", "scheme", "block", "tpf", "decoding",
                 "max_running", "p50_latency_s", "p95_latency_s", "p99_latency_s", "p95_first_block_s",
                 "tokens_per_s_per_user", "served_rps", "output_tokens_per_s", "tokens_per_s_per_gpu", "capacity_rps",
                 "sustained_rps", "headroom", "usd_per_hour", "usd_per_mtok", "usd_per_mtok_low", "usd_per_mtok_high",
                 "usd_per_mtok_at_capacity", "gpu_busy_fraction", "joules_per_token", "price_per_gpu_hour",
                 "price_per_gpu_hour_low", "price_per_gpu_hour_high", "price_source", "pareto", "absurd", "memory_binds",
                 "memory_fits", "preemptions",
                 "max_batch",  # max_batch: max_running's deprecated alias, for one release
                 *(f"{key}_band_{end}" for key in ("gpus", "usd_per_mtok", "p95_latency_s") for end in ("low", "high")),
                 "band_stack", "step_time_scale")


def _listed(n: int, word: str, values: list, many: str | None = None) -> str:
    """One factor of the search's product: '2 GPUs (H100 SXM, B200)', 'tp 1'."""
    shown = ", ".join(safe(f"{v:g}" if isinstance(v, float) else v) for v in values)
    return f"{plural(n, word, many)} ({shown})"


def plan_search_line(p: dict) -> str:
    """What was searched: the product of the lists, with each factor's count and values, and
    the candidates the AR baseline added (the evaluated and the skipped make up both). The batch
    limits are a factor when every decoding searched the same ones; else each its own."""
    s = p["search"]
    running = s.get("max_running") or {d: s["max_batch"] for d in s["decodings"]}
    limits = {tuple(running.get(d, s["max_batch"])) for d in s["decodings"]}
    formats = _kv_dtypes(s)
    factors = [(s["gpus"], "GPU", None), (s["tp"], "TP size", None), (s["precisions"], "precision", None)]
    factors += [(formats, "K/V format", None)] if len(formats) > 1 else []  # a factor when several were searched
    product = math.prod(len(v) for v, _, _ in factors) * sum(len(running.get(d, s["max_batch"])) for d in s["decodings"])
    factors.append((s["decodings"], "decoding", None))
    shared_limits = len(limits) == 1
    if shared_limits:
        factors.append((list(limits.pop()), "batch limit", None))
    text = f"searched {plural(product, 'candidate')} (" + " × ".join(_listed(len(v), w, v, m) for v, w, m in factors)
    text += ")" if shared_limits else ", each at its engine's batch limits)"
    # (absurd candidates are among the product: searched, then left out)
    tried = p["evaluated"] + sum(v for k, v in (p.get("skipped") or {}).items() if k != "absurd")
    if tried > product:
        text += f" and {tried - product:,} for the AR baseline"
    taken = s.get("recv_intervals") or {"": s.get("recv_interval", 1)}  # each decoding's, as its stack takes it
    receiving = recv_interval_phrase(max(taken.values()))  # named only where some decoding skips receives, as serve's
    cache = f"K/V cache {safe(formats[0])}, " if len(formats) == 1 else ""  # several: a factor above
    return (f"{text}; {cache}{percent(s['mem_fraction'])} of memory"
            + (f"; {receiving}" if receiving else "")
            + f"; {plural(s['requests'], 'simulated request')}, random seed {s['seed']}")


def _kv_dtypes(s: dict) -> list[str]:
    """The K/V cache formats a plan searched (a record from before the list: its one format)."""
    return s.get("kv_dtypes") or [s["kv_dtype"]]


def several_kv_dtypes(p: dict) -> bool:
    """Whether the plan searched several K/V formats: its tables then show each row's."""
    return len(_kv_dtypes(p["search"])) > 1


def _other_chunks_words(other: tuple) -> str:
    """' (16,384 tokens a step on B200, MI300X)': the searched GPUs whose chunk is another, by chunk."""
    return _on_other_gpus_words(other, lambda chunk: f"{plural(chunk, 'token')} a step" if chunk else "each prompt in one pass")


def _other_limits_words(other: tuple) -> str:
    """' (256 on A100, L40S)': the searched GPUs whose running limit is another, by limit."""
    return _on_other_gpus_words(other, str)


def prices_said(rows: list[dict]) -> str:
    """Where the rows' prices come from: the hardware files' dated list prices, --price (a
    scenario's prices) for the GPUs it names, or both."""
    given = sorted({r["gpu"] for r in rows if r.get("price_source") == "user"})
    if not given:
        return "dated list-price estimates"
    listed = any(r.get("price_source") not in ("user", None) for r in rows)
    return f"as given for {', '.join(safe(g) for g in given)}" + (", dated list-price estimates for the rest" if listed else "")


def _on_other_gpus_words(other: tuple, phrase) -> str:
    """((GPU, value), ...) grouped by value: ' (PHRASE(value) on GPU, GPU; ...)', '' for none."""
    if not other:
        return ""
    groups: dict = {}
    for gpu, value in other:
        groups.setdefault(value, []).append(safe(gpu))
    return " (" + "; ".join(phrase(value) + " on " + ", ".join(g) for value, g in groups.items()) + ")"


def engines_line(s: dict) -> str:
    """Which engine runs each decoding, with its batch limits and release, and its prompts' prefill
    budget where one is on: 'engines: sglang-dllm for mdm/1, dual-cache/32/1 (batch limit 128,
    first-done release); vllm for the AR baseline (...), prompts prefilled 8,192 tokens a step beside
    the decodes (vllm's default, --prefill-chunk to change)'. Decodings on the same engine with the
    same limits, release and budget share one entry."""
    stacks, running, release = s.get("stacks") or {}, s.get("max_running") or {}, s.get("release") or {}
    chunk, chunk_source = s.get("prefill_chunk_tokens") or {}, s.get("prefill_chunk_source") or {}
    before = s.get("prefill_first") or {}
    by_gpu, running_by_gpu = s.get("prefill_chunk_by_gpu") or {}, s.get("max_running_by_gpu") or {}
    servers, service = s.get("api_servers") or {}, s.get("front_end_us_per_request") or {}
    servers_source, delay = s.get("api_servers_source") or {}, s.get("first_token_delay_us") or {}
    groups: dict[tuple, list[str]] = {}
    for label in list(dict.fromkeys([*s["decodings"], *stacks])):
        if label in stacks:
            key = (stacks[label], tuple(running.get(label, s["max_batch"])), release.get(label, ""),
                   chunk.get(label), chunk_source.get(label, ""), servers.get(label), service.get(label),
                   servers_source.get(label, ""), delay.get(label), bool(before.get(label)),
                   tuple(sorted((by_gpu.get(label) or {}).items(), key=lambda kv: (kv[1] or 0, kv[0]))),
                   tuple(sorted((running_by_gpu.get(label) or {}).items(), key=lambda kv: (kv[1], kv[0]))))
            groups.setdefault(key, []).append(label)
    if not groups:
        return f"stack {safe(s.get('stack', 'none'))}"
    parts = []
    for (stack, limits, policy, tokens, source, api_servers, us, api_source, delay_us, first, other,
         other_limits), labels in groups.items():
        names = ", ".join("the AR baseline" if lab not in s["decodings"] else safe(lab) for lab in labels)
        limit = plural(len(limits), "batch limit") if len(limits) > 1 else "batch limit"
        chunks = prefill_chunk_phrase(tokens, source, stack, first) + _other_chunks_words(other)
        front = front_end_phrase(api_servers, us, api_source, stack, delay_us)
        parts.append(f"{safe(stack)} for {names} ({limit} {', '.join(map(str, limits))}{_other_limits_words(other_limits)}"
                     + (f", {safe(policy)} release)" if policy else ")") + (f", {chunks}" if chunks else "")
                     + (f", {front}" if front else ""))
    how = "each decoding's default engine, --stack to change" if s.get("stack_default") else "--stack"
    return "engines: " + "; ".join(parts) + f" ({how})"


def evidence_lines(p: dict, top: int | None = None) -> list[str]:
    """The published decodings the tokens per forward come from, the quality floor, and the error
    bands the ranges are drawn from: those of the rows shown (the first `top` deployments in a table)."""
    s, lines = p["search"], []
    published = s.get("published") or {}
    one_model = len(p.get("models") or [p.get("model")]) == 1
    shown = [f"{safe(key.partition(' ')[2] if one_model else key)} = {published_brief(r)}" for key, r in published.items()]
    if shown:
        lines.append("published decodings (--task chooses the benchmark): " + "; ".join(shown))
    floor = s.get("min_accuracy") or {}
    if floor:
        said = ", ".join(f"{safe(task)} ≥ {100 * value:.3g}%" for task, value in floor.items())
        lines.append(f"quality floor {said}: " + ("; ".join(safe(q) for q in s.get("quality") or []) or "met"))
    records = {b.get("label", b["stack"]): b for b in (s.get("error_bands") or {}).values()}
    bands = {}  # the bands of the rows with intervals (those an output shows), in the rows' order
    for r in [*p.get("deployments", [])[:top], *p.get("ar_baseline", []),
              *([p["nearest_miss"]] if p.get("nearest_miss") else [])]:
        iv = r.get("intervals") or {}
        if "band" in iv and iv["band_stack"] in records:
            bands.setdefault(iv["band_stack"], records[iv["band_stack"]])
    if bands:
        lines.append("error bands: " + ", ".join(band_phrase(k, b["low"], b["high"]) + against_published(b)
                                                 + first_token_phrase(b, basis=False) for k, b in bands.items())
                     + f" ({band_meaning(list(bands.values()))})")
    if s.get("slow_kernels"):
        lines.append(slow_kernels_phrase(s["slow_kernels"]))
    if s.get("conservative"):
        lines.append("planned at each band's slower end (--conservative): every step as many times as long as "
                     "predicted as the band's upper end, each first token further to its own band's; the rows' "
                     "numbers are at that clock, their ranges from the band's faster end to it")
    return lines


def plan_header(p: dict, top: int | None = None) -> str:
    t = p["traffic"]
    load = f"{t['rate']:g} req/s (Poisson)" if t.get("rate") else f"{plural(t['users'], 'user')} (think {t['think_s']:g} s)"
    targets = ", ".join(f"{k}={v:g}" for k, v in p["targets"].items()) or "none"

    def lengths(v):
        return ",".join(f"{k}:{x}" for k, x in v.items()) if isinstance(v, dict) else str(v)

    s, absurd = p["search"], (p.get("skipped") or {}).get("absurd", 0)
    hidden = (f"; {absurd} absurd (over 10x their model's cheapest $/Mtok) left out, --absurd lists them"
              if absurd and not s.get("absurd_shown") else "")
    return "\n".join([f"{safe(p['model'])} · {load} · prompt {lengths(t['prompt'])} · answer {lengths(t['answer'])} "
                      f"tokens" + _cached_words(t, s), f"targets: {targets}", plan_search_line(p) + hidden, engines_line(s),
                      *evidence_lines(p, top)]) + left_out_line(s)


def _cached_words(traffic: dict, search: dict) -> str:
    """The share of each prompt in the prefix cache, and the decodings it shortens, where one is given."""
    share = traffic.get("cached_prompt") or 0
    if not share:
        return ""
    taken = [safe(d) for d in search.get("cached_prompt_decodings") or []]
    others = [safe(d) for d in search.get("decodings") or [] if d not in (search.get("cached_prompt_decodings") or [])]
    where = f"for {', '.join(taken)}" if taken else "for none of the decodings"
    if others:
        where += f"; not {', '.join(others)}, whose engine prefills a block per forward or has no pass over the prompt alone"
    return f" · {share:.0%} of each prompt in the prefix cache ({where})"


def left_out_line(search: dict) -> str:
    """The default GPUs the stack does not run on, named, with the options that plan them: a new
    line of the header, or nothing."""
    gone = search.get("left_out") or []
    if not gone:
        return ""
    vendors = " and ".join(safe(v) for v in search.get("runs_on") or [])
    text = (f"\nleft out: {plural(len(gone), 'accelerator')} the {safe(search['stack'])} stack does not run on "
            f"({', '.join(safe(g['gpu']) for g in gone)}; it runs on {vendors} parts): --gpu NAME plans one")
    own = {g["vendor"]: g["stack"] for g in gone if g["stack"]}
    for vendor, stack in own.items():
        text += f", and {safe(vendor)} parts named alone plan with the {safe(stack)} stack"
    return text


def plan_csv_rows(p: dict) -> list[dict]:
    rows = [("plan", r) for r in p["deployments"]] + [("ar_baseline", r) for r in p["ar_baseline"]]
    return [dict(set=name, **{k: _flat(r).get(k) for k in PLAN_CSV_KEYS}) for name, r in rows]


def _flat(r: dict) -> dict:
    """A deployment's record with its intervals as columns: gpus_band_low, ..., band_stack."""
    iv = r.get("intervals") or {}
    ends = {f"{key}_band_{end}": v for key in ("gpus", "usd_per_mtok", "p95_latency_s")
            for end, v in zip(("low", "high"), iv.get(key) or (None, None))}
    return {**r, **ends, "band_stack": iv.get("band_stack")}


def render_plan(p: dict, fmt: str, out: Output, top: int | None = 15, charts: list | None = None) -> None:
    """The plan in `fmt`; the table and Markdown show the first `top` deployments, the HTML page
    every one."""
    if fmt == "html":
        out.write(plan_page(p, charts or []))
        return
    if fmt == "json":
        out.write(typed_json("plan", p))
        return
    if fmt == "csv":
        out.write(to_csv(plan_csv_rows(p)))
        return
    shown = p["deployments"][:top]
    baseline = p["ar_baseline"][:3]
    miss = [p["nearest_miss"]] if not p["deployments"] and p["nearest_miss"] else []
    multi, kv = len(p["search"]["decodings"]) > 1, several_kv_dtypes(p)
    caption = ("ranked by $/Mtok at the offered load (* = on the cost/latency Pareto front); R×TP: replicas × "
               "tensor-parallel GPUs; B: batch limit; 1st blk: time to the first streamed block (AR: token; m: memory "
               "binds: preemptions simulated; under a synchronous release it and the GPU count are upper bounds); "
               "tok/s/user: median answer tokens / latency; cap: saturation throughput, head: its margin over "
               f"the load; prices: {prices_said(shown + baseline + miss)}; J/tok: board power while busy, its idle "
               "share while idle, over output tokens")
    sections = []
    if shown:
        meeting = len(p["deployments"]) + p.get("deployments_unlisted", 0)
        more = f" (first {len(shown)} of {meeting}; json, csv and html list all)" if meeting > len(shown) else ""
        sections.append((f"deployments meeting the targets{more}", plan_table(shown, multi, show_kv=kv), caption))
    if baseline:
        sections.append(("AR baseline at the same targets (the same model decoding one token per pass)",
                         plan_table(baseline, False, show_kv=kv), None))
    if miss:
        sections.append(("no deployment meets the targets; nearest miss", plan_table(miss, True, show_kv=kv), None))
    no_ar = p["search"].get("ar_baseline", True) and not baseline and not p.get("all_autoregressive", False)
    if fmt == "markdown":
        parts = [markdown_text(plan_header(p, top)).replace("\n", "  \n") + "\n"]
        for title, (headers, rows), _ in sections:
            parts.append(f"\n{title}\n\n" + to_markdown(headers, rows, [h not in ("GPU", "scheme/\nb/tpf", "R×TP\nprec", "K/V") for h in headers]))
        if no_ar:
            parts.append("\nAR baseline: no autoregressive deployment meets the targets\n")
        parts.append(f"\n{caption}\n")
        out.write("".join(parts))
        return
    out.line(plan_header(p, top))
    for title, (headers, rows), cap in sections:
        left = 2 if headers[1] != "R×TP\nprec" else 1
        print_fitted(out, table_columns(headers, [PLAN_PRIORITY[PLAN_HEADERS.index(h)] for h in headers], left),
                     rows, cap, title=title)
    if no_ar:
        out.line("AR baseline: no autoregressive deployment meets the targets", style="yellow")


def recommendation(p: dict) -> str:
    """The plan in one sentence: the cheapest deployment meeting the targets, what it costs (and
    over the price's range), its latency against the target and its margin; or the nearest miss."""
    kv = several_kv_dtypes(p)
    if not p["deployments"]:
        targets = ", ".join(f"{k} {v:g}" for k, v in p["targets"].items()) or "no latency target"
        miss = p.get("nearest_miss")
        if not miss:
            return "No deployment meets the targets: no candidate could run."
        missed = "; ".join(f"{m['target']} {m['value']:.3g} against {m['limit']:g}" for m in miss["misses"])
        return f"No deployment meets the targets ({targets}); the nearest miss, {deployment(miss, kv)}, misses {missed}."
    d = p["deployments"][0]
    cost = ("with no price for its GPU (--price NAME=USD gives one)" if d["usd_per_mtok"] is None
            else f"at ${d['usd_per_mtok']:.2g} per million output tokens")
    if d.get("usd_per_mtok_low") is not None and d.get("usd_per_mtok_high") is not None \
            and d["usd_per_mtok_low"] != d["usd_per_mtok_high"]:
        cost += f" (${d['usd_per_mtok_low']:.2g}–{d['usd_per_mtok_high']:.2g} over the GPU's public price range)"
    target = p["targets"].get("p95_latency_s")
    return (f"Recommended: {deployment(d, kv)}, {cost}; p95 latency {d['p95_latency_s']:.2g} s"
            + (f" (target {target:g} s)" if target else "")
            + f", capacity {100 * d['headroom']:,.0f}% above the offered load; the cheapest of "
            f"{plural(len(p['deployments']), 'deployment')} meeting the targets."
            + (" Memory binds it: its requests' K/V is allocated as tokens come and the latest admitted is "
               "preempted and recomputed where it runs out, as in vLLM and SGLang." if d.get("memory_binds")
               else ""))


def deployment(d: dict, kv: bool = False) -> str:
    """'LLaDA2.0-mini on 2 × MI300X (TP 1, fp8), block/32/1 decoding, batch limit 256'; `kv`: with
    its K/V cache's format ('(TP 1, fp8, K/V fp8)'), when several were searched."""
    model = d.get("model", "").rpartition("/")[2]
    cache = f", K/V {safe(d.get('kv_dtype', 'bf16'))}" if kv else ""
    return (f"{safe(model)} on {d['replicas']} × {safe(d['gpu'])} (TP {d['tp']}, {d['precision']}{cache}), "
            f"{safe(d['decoding'])} decoding, batch limit {d['max_running']}")


def plan_page(p: dict, charts: list) -> str:
    """`plan --format html`: the recommendation, the header, the cost/latency chart, and every
    deployment meeting the targets (the whole ranked table, with $/Mtok over the price's range),
    the AR baseline's and the nearest miss."""
    from . import page

    multi, kv = len(p["search"]["decodings"]) > 1, several_kv_dtypes(p)
    sections = [page.figures(charts)]
    if p["deployments"]:
        headers, rows = plan_table(p["deployments"], multi, price_range=True, show_kv=kv)
        sections.append(f"<h2>deployments meeting the targets ({len(rows):,}, ranked by $/Mtok)</h2>"
                        + page.table(headers, rows, legend=PLAN_LEGEND, table_id="deployments"))
    if p["ar_baseline"]:
        headers, rows = plan_table(p["ar_baseline"], False, price_range=True, show_kv=kv)
        sections.append("<h2>AR baseline at the same targets (the same model decoding one token per pass)</h2>"
                        + page.table(headers, rows, legend=PLAN_LEGEND))
    if not p["deployments"] and p.get("nearest_miss"):
        headers, rows = plan_table([p["nearest_miss"]], True, price_range=True, show_kv=kv)
        sections.append("<h2>no deployment meets the targets; nearest miss</h2>"
                        + page.table(headers, rows, legend=PLAN_LEGEND))
    return page.page(f"dlmcost plan: {p['model']}", plan_header(p), sections, summary=recommendation(p))
