"""What a default and an interval stand on, in words: the published decoding a model's tokens
per forward come from, the error bands a range is drawn from (speed and first token), and the
prefill budget the prompts run under (shared by analyze, serve and plan, so that the three say it
alike)."""

from __future__ import annotations

from .cells import num, plural, safe


def published_phrase(d: dict, change: str = "--task or --tpf to change") -> str:
    """Where the default tokens per forward come from: the model's published decoding on a task."""
    rate = f"{d['tpf']:.3g} token{'' if d['tpf'] == 1 else 's'} per forward"
    if d["tpf"] != d["tpf_published"]:
        rate += f" (the mix's pooled rate; printed average {d['tpf_published']:.3g})"
    task = d["task"] if d["tpf_task"] == d["task"] else f"{d['task']} (TPF from {d['tpf_task']})"
    acc = f", accuracy {100 * d['accuracy']:.1f}%" if d.get("accuracy") is not None else ""
    hint = f"; {change}" if change else ""
    return f"{rate}: {safe(d['label'])} on {safe(task)}{acc} ({safe(d['source'])}){hint}"


def published_brief(d: dict) -> str:
    """'LLaDA-8B-Instruct 256 steps for 256 tokens, block 8 (gsm8k 78.6%; arXiv 2502.09992)': a
    published setting, where the decoding's label already says its tokens per forward."""
    acc = f" {100 * d['accuracy']:.1f}%" if d.get("accuracy") is not None else ""
    where = f"{d['task']}{acc}" + ("" if d["tpf_task"] == d["task"] else f", TPF from {d['tpf_task']}")
    return f"{safe(d['label'])} ({safe(where)}; {safe(d['source'])})"


def band_phrase(stack: str, low: float, high: float, numbers: int | None = None) -> str:
    """'sglang-dllm 1.22–1.55× (16 numbers)': a stack's error band, predicted / measured speed at
    the 10th and 90th percentile of the published measurements it was not fitted on."""
    count = f" over {numbers} measurements" if numbers else ""
    return f"{safe(stack)} {low:.2f}–{high:.2f}×{count}"


BAND_MEANING = ("predicted / measured speed, 10th–90th percentile over published measurements the stack was "
                "not fitted on; ranges are the same run at the band's two ends")
CALIBRATED_MEANING = ("predicted / measured speed over measurements the stack was not fitted on; ranges are the same "
                      "run at the band's two ends")


FIRST_TOKEN_MEANING = ", the time to first token further to its own band's ends"


def band_meaning(bands: list[dict]) -> str:
    """What the bands' ratios are: published measurements, or a calibration's held-out ones (and
    how a time to first token moves, where a band has a first-token band of its own)."""
    meaning = CALIBRATED_MEANING if any(b.get("source") == "calibration" for b in bands) else BAND_MEANING
    return meaning + (FIRST_TOKEN_MEANING if any(first_token_phrase(b) for b in bands) else "")


def narrowing_phrase(narrowing: float | None) -> str:
    """'narrower by 3.6×' (a band's width against its stack's published band's; widths ln(high / low))."""
    if narrowing is None:
        return "of no width (every held-out ratio the same)"
    if round(narrowing, 2) == 1:
        return "as wide"
    return f"narrower by {narrowing:.3g}×" if narrowing > 1 else f"wider by {1 / narrowing:.3g}×"


def against_published(band: dict) -> str:
    """'; sglang's published band 0.88–1.61×: narrower by 3.6×' for a calibration's band ('' for a
    published one)."""
    p = band.get("published")
    if not p:
        return ""
    whose = "the pooled" if p["stack"] == "pooled" else f"{safe(p['stack'])}'s"  # (a stack file's: every stack's)
    where = f" on {safe(p['vendor'])} parts" if p.get("vendor") else ""
    return f"; {whose} published band{where} {p['low']:.2f}–{p['high']:.2f}×: {narrowing_phrase(band['narrowing'])}"


def first_token_apart(band: dict) -> dict | None:
    """The band's first-token band where its printed ends differ from the speed band's; None where
    it has none or they read the same at two decimals."""
    f = band.get("first_token")
    if not f or (round(f["low"], 2), round(f["high"], 2)) == (round(band["low"], 2), round(band["high"], 2)):
        return None
    return f


def first_token_phrase(band: dict, basis: bool = True) -> str:
    """'; time to first token 1.09–2.73× over 14 measurements, its own ...' (' (time to first token
    1.09–2.73×)' without the basis): the band the times to the first block take, where it differs
    from the speed band ('' where it does not)."""
    f = first_token_apart(band)
    if f is None:
        return ""
    ends = f"time to first token {f['low']:.2f}–{f['high']:.2f}×"
    return f"; {ends} over {f['numbers']} measurements, {safe(f['basis'])}" if basis else f" ({ends})"


def span(low, high, fmt) -> str:
    """'1.5–2.6', one value when both ends agree, 'none' for an end with no value (nothing met the
    targets there)."""
    a, b = ("none" if v is None else fmt(v) for v in (low, high))
    return a if a == b else f"{a}–{b}"


def front_end_phrase(servers: int | None, us_per_request: float | None, source: str, stack: str,
                     delay_us: float | None = None) -> str:
    """The API servers every request passes before the engine, where the stack has a front-end cost
    (else ''): 'front end: 1 API server, 5 ms a request each (vllm's default, --api-servers to change),
    then 28.8 ms of dispatch before the engine sees it' (the last part where the stack has a
    first-token delay, `delay_us`); a front end whose servers take no time a request is its delay
    alone: 'front end: 59.7 ms of dispatch before the engine sees each request (sglang's)'."""
    if not servers or us_per_request is None:
        return ""
    if not us_per_request:
        return (f"front end: {num(delay_us / 1000)} ms of dispatch before the engine sees each request "
                f"({safe(stack)}'s)") if delay_us else ""
    where = {"stack": f"{stack}'s default"}.get(source, source)
    then = f", then {num(delay_us / 1000)} ms of dispatch before the engine sees it" if delay_us else ""
    return (f"front end: {plural(servers, 'API server')}, {num(us_per_request / 1000)} ms a request each "
            f"({safe(where)}, --api-servers to change){then}")


def prefill_chunk_phrase(chunk: int | None, source: str, stack: str, before: bool = False) -> str:
    """The autoregressive prompts' token budget a step, beside the decodes or (`before`: SGLang's
    scheduler) before them, where one is on: 'prompts prefilled 8,192 tokens a step beside the
    decodes (vllm's default, --prefill-chunk to change)'; without one, 'prompts prefilled before
    the decodes' where they are, else ''."""
    where = "before the decodes, which wait for them" if before else "beside the decodes"
    if not chunk:
        return f"prompts prefilled {where}" if before else ""
    source = {"stack": f"{stack}'s default"}.get(source, source)
    return f"prompts prefilled {plural(chunk, 'token')} a step {where} ({safe(source)}, --prefill-chunk to change)"


def recv_interval_phrase(every: int) -> str:
    """The scheduler's receive interval where it skips receives (above 1; else ''): 'new requests
    taken in every 10 decode iterations, at once after a prefill or when idle (--recv-interval)'."""
    if every <= 1:
        return ""
    return f"new requests taken in every {every:,} decode iterations, at once after a prefill or when idle (--recv-interval)"


def slow_kernels_phrase(entries: list[dict]) -> str:
    """Where a stack's release ran a part's kernels slower than the hardware file's tuned times (its
    slow_kernels), what it adds to every pass ('' where none), parts alike named together and stacks
    alike on the same parts too (a stack that extends another carries its slow_kernels):
    'untuned kernels: sglang and sglang-dllm on MI300X and MI325X at fp8, 242.61 µs a decoder layer
    + 0.55 µs a layer for each token a pass runs (the release's slow_kernels: `dlmcost stacks`)'."""
    parts: dict[tuple, list[str]] = {}
    for e in entries:
        key = (e["stack"], e["precision"], e["us_per_layer"], e["us_per_token_layer"])
        parts.setdefault(key, []).append(safe(e["gpu"]))
    alike: dict[tuple, list[str]] = {}
    for (stack, *times), gpus in parts.items():
        alike.setdefault((tuple(gpus), *times), []).append(safe(stack))
    if not alike:
        return ""

    def one(key: tuple, stacks: list[str]) -> str:
        gpus, precision, fixed, per_token = key
        token = f" + {num(per_token, 4)} µs a layer for each token a pass runs" if per_token else ""
        return f"{_and(stacks)} on {_and(list(gpus))} at {safe(precision)}, {num(fixed, 5)} µs a decoder layer{token}"

    return ("untuned kernels: " + "; ".join(one(k, g) for k, g in alike.items())
            + " (the release's slow_kernels: `dlmcost stacks`)")


def _and(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
