"""What dlmcost knows, as tables: `dlmcost schemes`, `gpus`, `models` and one `model`."""

from __future__ import annotations

from .cells import gb, num, sig
from .evidence import first_token_apart
from .formats import to_csv, to_markdown, typed_json
from .output import Output, Styled
from .page import plain
from .tables import Column, print_fitted, table_columns

SCHEME_HEADERS = ["scheme", "knobs", "stops\nat EOS", "what it runs"]


def render_schemes(entries: list[dict], fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(typed_json("schemes", entries))
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


def gpu_records(gpus, price_ages: dict | None = None) -> list[dict]:
    """One record per GPU; `price_ages`: each list price's age in days and whether it is stale,
    by key (`api.price_ages`)."""
    ages = price_ages or {}
    return [dict(name=g.name, key=g.key, aliases=list(g.aliases), vendor=g.vendor, unit=g.unit, status=g.status,
                 memory_bytes=g.memory_bytes,
                 memory_as_listed=f"{g.memory_gb:g} GB" if g.memory_gb is not None else f"{g.memory_gib:g} GiB",
                 bandwidth_bytes_per_s=g.bandwidth_bytes_per_s,
                 peak_flops=dict(g.peak_flops), ridge_flops_per_byte=dict(g.ridge_flops_per_byte),
                 scale_up_bytes_per_s=g.link_bytes_per_s, efficiency=g.efficiency.model_dump(exclude_none=True), notes=g.notes,
                 price_per_hour=g.price_per_hour.model_dump() if g.price_per_hour is not None else None,
                 price_age_days=ages.get(g.key, {}).get("days"), price_stale=ages.get(g.key, {}).get("stale", False))
            for g in gpus]


GPU_HEADERS = ["GPU", "mem\nGB", "listed\nas", "BW\nTB/s", "bf16\nTF/s", "fp8\nTF/s", "fp4\nTF/s",
               "ridge\nbf16", "ridge\nfp8", "ridge\nfp4", "$/h", "price\nas of", "status"]


GPU_CAPTION = ("mem: GB = 1e9 bytes, the unit of every memory figure dlmcost prints (JSON: memory_bytes); listed as: "
               "the vendor's figure, whose 'GB' is often binary (an H100's 80 GB is 80 GiB = 85.9 GB); dense "
               "tensor-core peaks (no sparsity); ridge = peak / bandwidth in FLOP/byte; TPUs and Trainium are chips "
               "and Gaudi an accelerator, not GPUs (JSON: unit); $/h: list price per GPU-hour (an estimate; JSON: "
               "its low-high range and source), as of its date, ! = over a year old")


GPU_PRIORITY = [0, 0, 3, 0, 1, 2, 2, 3, 4, 4, 1, 1, 2]


def price_date(r: dict) -> str:
    """The price's date as its file gives it (the date part), '!' after it when over a year old."""
    p = r["price_per_hour"]
    if p is None:
        return "—"
    day = p["as_of"].split(" ")[0]
    return day + ("!" if r["price_stale"] else "")


def render_gpus(gpus, fmt: str, out: Output, price_ages: dict | None = None) -> None:
    recs = gpu_records(gpus, price_ages)
    if fmt == "json":
        out.write(typed_json("gpus", recs))
        return

    def peak(r, k):
        return f"{r['peak_flops'][k] / 1e12:.0f}" if k in r["peak_flops"] else "—"

    def ridge(r, k):
        return f"{r['ridge_flops_per_byte'][k]:.0f}" if k in r["ridge_flops_per_byte"] else "—"

    rows = [[r["name"], gb(r["memory_bytes"]), r["memory_as_listed"], f"{r['bandwidth_bytes_per_s'] / 1e12:.3g}",
             peak(r, "bf16"), peak(r, "fp8"), peak(r, "fp4"), ridge(r, "bf16"), ridge(r, "fp8"), ridge(r, "fp4"),
             f"{r['price_per_hour']['usd']:.2f}" if r["price_per_hour"] else "—", price_date(r), r["status"]]
            for r in recs]
    if fmt == "csv":
        out.write(to_csv([dict(zip((h.replace("\n", " ") for h in GPU_HEADERS), r)) for r in rows]))
    elif fmt == "markdown":
        out.write(to_markdown(GPU_HEADERS, rows))
    else:
        columns = table_columns(GPU_HEADERS, GPU_PRIORITY)
        columns[-1].right = columns[-2].right = False  # status is a word, the date text
        print_fitted(out, columns, rows, GPU_CAPTION)


MODEL_HEADERS = ["model", "family", "params", "active", "KV\nKiB/tok", "default\nscheme", "provenance"]
# A narrow terminal keeps the id, the size, the K/V bytes (what memory planning needs) and the provenance.
MODEL_PRIORITY = [0, 3, 0, 1, 0, 2, 1]
MODEL_CAPTION = ("KV: bf16 K/V cache per token, all layers; provenance of the config (the bundled MANIFEST): "
                 "verbatim = the Hub's config.json, reconstructed = the upstream architecture with published "
                 "dimensions, unverified = a third-party port's dimensions")


def render_models(entries: list[dict], fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(typed_json("models", entries))
        return
    rows = [[e["id"], e["family"], f"{e['params_total'] / 1e9:.2f}B", f"{e['params_active'] / 1e9:.2f}B",
             sig(e['kv_bytes_per_token'] / 1024, 4), e["default_scheme"],
             Styled(e["provenance"], "yellow" if e["provenance"] == "unverified" else "")] for e in entries]
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
        out.write(typed_json("model", info))
        return
    # `verified` is in JSON and CSV; a table says it once, as `provenance` (as `dlmcost models` does)
    rows = [[k, _fmt_value(v)] for k, v in info.items() if not isinstance(v, dict) and (k != "verified" or fmt == "csv")]
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


STACK_HEADERS = ["stack", "default\nfor", "running\nlimit", "release", "prefills", "front\nend", "version",
                 "as of", "error band\np10-p90", "fitted numbers"]
STACK_PRIORITY = [0, 0, 0, 1, 2, 1, 2, 3, 1, 0]
STACK_CAPTION = ("default for: the decodings that run on it when no --stack is given; running limit: requests at once "
                 "per replica unless --max-running says otherwise (-: no limit of its own); release: how a batch of "
                 "diffusion requests lets them go (-: synchronous); prefills: autoregressive prompt tokens a step, --prefill-chunk to change, "
                 "and whether an iteration that prefills runs the decodes beside it or holds them until none is left to "
                 "prefill (before) (-: each prompt in one pass, beside the decodes); front end: API servers x CPU time per request "
                 "that every request passes before the engine sees it, --api-servers to change (-: none); error band: predicted / measured speed, 10th to "
                 "90th percentile, over published measurements it was not fitted on (above 1: optimistic; docs/"
                 "validation.md), and where it differs, the band of the time to the first token (TTFT); fitted numbers: field <- the validation points it was fitted on (-f json: every "
                 "source)")


def _fitted_cell(fitted: dict) -> list[str]:
    return [f"{field} <- {', '.join(points)}" for field, points in fitted.items()] or ["-"]


def _front_end_cell(entry: dict) -> str:
    """'1 x 5 ms': the API servers and each one's time per request, then '+ 0.8 ms/layer' where the
    stack delays each request's first token per model layer ('0.33 ms/layer' alone where the servers
    take no time a request; '0.33 ms/layer (MLA 0.8)' where an MLA layer's differs); '-' without a
    front-end cost."""
    if entry.get("api_servers") is None:
        return "-"
    per_layer, per_mla = entry.get("first_token_us_per_layer"), entry.get("first_token_us_per_mla_layer")
    delay = f"{num(per_layer / 1000)} ms/layer" if per_layer or per_mla is not None else ""
    if delay and per_mla is not None and per_mla != per_layer:
        delay += f" (MLA {num(per_mla / 1000)})"
    if not entry["front_end_us_per_request"]:
        return delay or "-"
    return f"{entry['api_servers']} x {num(entry['front_end_us_per_request'] / 1000)} ms" + (f" + {delay}" if delay else "")


def _prefills_cell(entry: dict) -> str:
    """'8,192/step before' (SGLang: the decodes wait for the prefills), '8,192/step beside' (vLLM),
    'before' or '-' without a token budget; then the budgets on other GPUs ('(2,048: <70 GiB, A100)')."""
    chunk, before = entry.get("prefill_chunk_tokens"), entry.get("prefill_first")
    where = "before" if before else "beside"
    if chunk:
        return f"{chunk:,}/step {where}" + _tiers_words(entry.get("prefill_chunk_by_memory"), "tokens")
    return "before" if before else "-"


def _running_cell(entry: dict) -> str:
    """'1024' or, where the stack sets another on some GPUs, '1024 (256: <70 GiB, A100)'; '-' for none."""
    limit = entry.get("max_running_requests")
    return "-" if limit is None else str(limit) + _tiers_words(entry.get("max_running_by_gpu"), "requests")


def _tiers_words(tiers: list[dict] | None, field: str) -> str:
    """' (2,048: <35 GiB; 16,384: >=160 GiB)': each other value and the GPUs it holds on, in the
    tiers' order; '' for none."""
    if not tiers:
        return ""
    by_value: dict = {}
    for t in tiers:
        lo, hi = t.get("from_gib"), t.get("below_gib")
        where = [f"{num(lo)}-{num(hi)} GiB" if lo and hi else f"<{num(hi)} GiB" if hi else f">={num(lo)} GiB"] \
            if lo or hi else []
        where += [plain(name) for name in t.get("gpus_named") or ()]
        by_value.setdefault(t[field], []).append(" ".join(where))
    return " (" + "; ".join(f"{value:,}: " + ", ".join(w) for value, w in by_value.items()) + ")"


def _band_cell(band: dict | None, by_vendor: list[dict] | None = None) -> str:
    """'1.03-1.33' or, where the first-token band differs, '1.03-1.33 (TTFT 1.09-2.73)'; one such
    per vendor where the stack has a band on each vendor's parts ('NVIDIA 0.92-1.47 ...; AMD ...')."""
    if by_vendor:
        return "; ".join(f"{plain(b['vendor'])} {_band_cell(b)}" for b in by_vendor)
    if band is None:
        return "-"
    cell, first = f"{band['low']:.2f}-{band['high']:.2f}", first_token_apart(band)
    return cell if first is None else f"{cell} (TTFT {first['low']:.2f}-{first['high']:.2f})"


def render_stacks(entries: list[dict], fmt: str, out: Output) -> None:
    if fmt == "json":
        out.write(typed_json("stacks", entries))
        return
    rows = [[e["name"], ", ".join(e["default_for"]) or "-",
             _running_cell(e),
             e["release"] or "-", _prefills_cell(e), _front_end_cell(e), e["version"] or "-", e["as_of"] or "-",
             _band_cell(e["error_band"], e.get("error_bands_by_vendor")), _fitted_cell(e["fitted"])] for e in entries]
    if fmt == "csv":
        out.write(to_csv([dict(zip((h.replace("\n", " ") for h in STACK_HEADERS), r[:-1] + ["; ".join(r[-1])]))
                          for r in rows]))
    elif fmt == "markdown":
        out.write(to_markdown(STACK_HEADERS, [r[:-1] + ["; ".join(r[-1])] for r in rows]))
    else:
        columns = table_columns(STACK_HEADERS, STACK_PRIORITY)
        for c in columns[3:7] + columns[8:]:
            c.right = False
        columns[-1].wrap = True
        print_fitted(out, columns, rows, STACK_CAPTION)
