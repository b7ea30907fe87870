"""`dlmcost plan` output: the header (traffic, targets, what was searched), the ranked table of
deployments, the AR baseline and the nearest miss, the CSV rows and the HTML page."""

from __future__ import annotations

import math

from .cells import num, safe, sig
from .formats import to_csv, to_json, to_markdown
from .output import Output
from .tables import print_fitted, table_columns

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
