"""The numbers analyze and sweep derive from a generation's totals, each against its documented
formula (docs/methodology.md, "Verdicts, knee, AR ratio", "Memory", "Output fields") computed here
by hand: tokens counted, throughput per group and per GPU, per-token costs, the AR baseline's
tokens/s, per-pass and per-op entries, the time-weighted verdict, the knee (by brute force over
the oracle's pass costs), memory (F8) from the model's config numbers, and the table cells that
are not a JSON value as such (speed-up vs AR, knee 'all', GB).

The totals these formulas start from (time_s, flops, bytes, each pass family's cost, the AR
baseline's time) are pinned against the brute-force oracle in test_golden.py; here they are
inputs, and every derived number must follow from them as documented, in analyze and in sweep
(two code paths).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

import oracle
from dlmcost import api
from dlmcost.cli import main
from dlmcost.inputs.models import load_bundled

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
HARDWARE = Path(__file__).resolve().parents[1] / "hardware"

# LLaDA-8B-Instruct's config.json, by hand
L, D, H, H_KV, HD, F, V = 32, 4096, 32, 32, 128, 12288, 126464


def h100():
    """The H100 SXM's numbers straight from its hardware file."""
    return yaml.safe_load((HARDWARE / "nvidia-h100-sxm.yaml").read_text())


def h100_ridge_bf16() -> float:
    g = h100()
    return g["peak_tflops"]["bf16"] * 1e12 / (g["bandwidth_tb_s"] * 1e12)  # (F6)


def h100_achievable_ridge_bf16(rows: float) -> float:
    """The ridge of the rates the time model uses, from the files by hand: H100's bf16 peak x its
    GEMM efficiency x its sustained_compute x the default stack's (sglang) GEMM curve at `rows` (straight lines in log
    rows between its points, flat beyond, read at rows / the GPU's gemm_rows_scale), over
    bandwidth x its memory efficiency (docs/stacks.md)."""
    g = h100()
    curve = yaml.safe_load((HARDWARE.parent / "stacks" / "sglang.yaml").read_text())["gemm_efficiency"]
    xs, ys = curve["rows"], curve["efficiency"]
    rows = max(rows / g["efficiency"].get("gemm_rows_scale", 1.0), 1.0)
    if rows <= xs[0]:
        factor = ys[0]
    elif rows >= xs[-1]:
        factor = ys[-1]
    else:
        i = next(i for i in range(len(xs) - 1) if xs[i] <= rows <= xs[i + 1])
        w = (math.log(rows) - math.log(xs[i])) / (math.log(xs[i + 1]) - math.log(xs[i]))
        factor = ys[i] + w * (ys[i + 1] - ys[i])
    compute = g["peak_tflops"]["bf16"] * 1e12 * g["efficiency"]["gemm"]["bf16"] * g["efficiency"]["sustained_compute"] * factor
    return compute / (g["bandwidth_tb_s"] * 1e12 * g["efficiency"]["memory_bandwidth"])


def h100_capacity_bytes() -> float:
    return h100()["memory_gib"] * 2**30  # the vendor's "80 GB" is GiB


def analyze(**knobs) -> dict:
    r = api.analyze(LLADA, "h100", **knobs)["results"][0]
    return r.model_dump()


def sweep_row(**knobs) -> dict:
    lists = {"scheme": "schemes", "prompt": "prompts", "gen": "gens", "block": "blocks", "steps": "steps",
             "batch": "batches", "tp": "tps"}
    args = {lists.get(k, k): [v] if k in lists else v for k, v in knobs.items()}
    rows = api.sweep_rows(api.sweep(LLADA, gpus="h100", **args))
    assert len(rows) == 1
    return rows[0]


# --- tokens counted and the per-token numbers ------------------------------------------------------

# Block diffusion, 3 sequences with CFG (6 in every pass), two-way tensor parallel, and a 40-token
# answer in a 128-token generation of 32-token blocks: the scheme stops after the block holding
# end-of-sequence, ceil(40/32) = 2 blocks of 64/4 = 16 steps each, plus the prefill.
PER_TOKEN = dict(scheme="block", prompt=64, gen=128, block=32, steps=64, batch=3, cfg=True, tp=2, answer_tokens=40)
TOKENS = 3 * 40  # B·A: the batch's answer tokens (the CFG copy produces none)
NFE = 1 + 2 * 16


def test_analyze_per_token_numbers_by_hand():
    r = analyze(**PER_TOKEN)
    assert r["nfe"] == NFE
    assert r["tokens_per_nfe"] == pytest.approx(TOKENS / NFE, rel=1e-12)
    assert r["gpus"] == 2
    assert r["tokens_per_s"] == pytest.approx(TOKENS / r["time_s"], rel=1e-12)
    assert r["tokens_per_s_per_gpu"] == pytest.approx(TOKENS / r["time_s"] / 2, rel=1e-12)
    # flops and bytes are per GPU; per token they are the whole group's
    assert r["flops_per_token"] == pytest.approx(r["flops"] * 2 / TOKENS, rel=1e-12)
    assert r["bytes_per_token"] == pytest.approx(r["bytes"] * 2 / TOKENS, rel=1e-12)
    assert r["ar_tokens_per_s"] == pytest.approx(TOKENS / r["ar_time_s"], rel=1e-12)
    # speed-up over AR: AR latency / latency (above 1 = faster); the deprecated alias is its inverse
    assert r["speedup_vs_ar"] == pytest.approx(r["ar_time_s"] / r["time_s"], rel=1e-12)
    assert r["time_ratio_to_ar"] == pytest.approx(r["time_s"] / r["ar_time_s"], rel=1e-12)
    assert r["arithmetic_intensity"] == pytest.approx(r["flops"] / r["bytes"], rel=1e-12)


def test_sweep_per_token_numbers_by_hand():
    row = sweep_row(**PER_TOKEN)
    ar_time = analyze(**PER_TOKEN)["ar_time_s"]  # pinned by the oracle (test_golden.py)
    assert row["nfe"] == NFE
    assert row["tokens_per_nfe"] == pytest.approx(TOKENS / NFE, rel=1e-12)
    assert row["tokens_per_s"] == pytest.approx(TOKENS / row["time_s"], rel=1e-12)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(TOKENS / row["time_s"] / 2, rel=1e-12)
    assert row["speedup_vs_ar"] == pytest.approx(ar_time / row["time_s"], rel=1e-12)
    assert row["time_ratio_to_ar"] == pytest.approx(row["time_s"] / ar_time, rel=1e-12)
    r = analyze(**PER_TOKEN)  # flops and bytes per GPU are not sweep columns
    assert row["flops_per_token"] == pytest.approx(r["flops"] * 2 / TOKENS, rel=1e-12)
    assert row["bytes_per_token"] == pytest.approx(r["bytes"] * 2 / TOKENS, rel=1e-12)
    assert row["arithmetic_intensity"] == pytest.approx(r["flops"] / r["bytes"], rel=1e-12)


# --- per-pass and per-op entries, the time-weighted verdict ----------------------------------------

# methodology.md's worked example: LLaDA-8B dual-cache, Lp = Lg = 256, b = 32, S = 256/3
DUAL = dict(scheme="dual-cache", prompt=256, gen=256, block=32, tpf=3)


def test_pass_entries_by_hand():
    r = analyze(**DUAL)
    ridge = h100_ridge_bf16()
    assert r["ridge_flops_per_byte"] == pytest.approx(ridge, rel=1e-12)
    refresh, step = r["passes"]
    S, nb = 256 / 3, 256 / 32
    assert (refresh["name"], refresh["count"], refresh["q"], refresh["c"]) == ("refresh", nb, 512, 0)
    assert (step["name"], step["q"], step["c"]) == ("step", 32, 512 - 32)
    assert step["count"] == pytest.approx(S - nb, rel=1e-12)
    # one step reads the K/V of its c = 480 cached tokens: B·c·2H_kv·h·kv over L layers (252 MB)
    assert step["kv_read_bytes"] == pytest.approx(480 * L * 2 * H_KV * HD * 2, rel=1e-12)
    assert refresh["kv_read_bytes"] == 0
    # a refresh writes the K/V of every token but the block's: (Lp + Lg - b) tokens
    assert refresh["kv_write_bytes"] == pytest.approx((512 - 32) * L * 2 * H_KV * HD * 2, rel=1e-12)
    for p in r["passes"]:
        kinds = p["weight_bytes"] + p["kv_read_bytes"] + p["kv_write_bytes"] + p["activation_bytes"]
        assert p["bytes"] == pytest.approx(kinds, rel=1e-12)
        assert p["flops"] == pytest.approx(sum(p[f"flops_{k}"] for k in ("linear", "attention", "lm_head", "other")),
                                           rel=1e-12)
        assert p["arithmetic_intensity"] == pytest.approx(p["flops"] / p["bytes"], rel=1e-12)
        assert p["verdict"] == ("memory-bound" if p["flops"] / p["bytes"] < ridge else "compute-bound")
    assert [p["verdict"] for p in r["passes"]] == ["compute-bound", "memory-bound"]
    # count x time per pass sums to the generation's time
    assert sum(p["count"] * p["time_s"] for p in r["passes"]) == pytest.approx(r["time_s"], rel=1e-12)
    # the generation's verdict: the share of its time in memory-bound families, memory-bound from 0.5
    memory_time = step["count"] * step["time_s"]
    assert r["memory_bound_time_fraction"] == pytest.approx(memory_time / r["time_s"], rel=1e-12)
    assert r["verdict"] == ("memory-bound" if memory_time / r["time_s"] >= 0.5 else "compute-bound")


def test_a_generation_mostly_in_compute_bound_passes_is_compute_bound():
    """mdm at batch 8: every pass is compute-bound, so none of the time is memory-bound."""
    r = analyze(scheme="mdm", prompt=256, gen=128, steps=128, batch=8)
    (step,) = r["passes"]
    assert step["flops"] / step["bytes"] >= h100_ridge_bf16()
    assert r["memory_bound_time_fraction"] == 0.0 and r["verdict"] == "compute-bound"
    row = sweep_row(scheme="mdm", prompt=256, gen=128, steps=128, batch=8)
    assert row["memory_bound_time_fraction"] == 0.0 and row["verdict"] == "compute-bound"
    ar = sweep_row(scheme="ar", prompt=256, gen=128, batch=1)
    assert ar["memory_bound_time_fraction"] > 0.5 and ar["verdict"] == "memory-bound"


def test_op_entries_by_hand():
    r = analyze(**DUAL)
    time_s = r["time_s"]
    assert sum(o["time_s"] for o in r["ops"]) == pytest.approx(time_s, rel=1e-12)
    for o in r["ops"]:
        assert o["time_share"] == pytest.approx(o["time_s"] / time_s, rel=1e-12)
        assert o["arithmetic_intensity"] == pytest.approx(o["flops"] / o["bytes"] if o["bytes"] else 0.0, rel=1e-12)
    assert sum(o["time_share"] for o in r["ops"]) == pytest.approx(1.0, rel=1e-12)


# --- the knee, by brute force over the oracle's pass cost -------------------------------------------


def oracle_ai(q: float, c: float, B: float) -> float:
    """AI of a cached block-decoding step: q tokens per sequence, bidirectional, over c cached
    tokens, logits for all q (the knee's pass), costed by the independent oracle."""
    ops = oracle.pass_ops(load_bundled(LLADA), oracle.Pass("step", q, c, 0, q, False), oracle.Setup(B=B))
    return sum(o.flops for o in ops) / sum(o.bytes for o in ops)


@pytest.mark.parametrize("scheme,decode_q", [("dual-cache", 32), ("ar", 1)])
def test_knee_by_brute_force(scheme, decode_q):
    """knee block: the largest b with AI(q = b, c = Lp + Lg/2, batch B) below the achievable ridge
    at its B·q rows; knee batch: the largest B with AI(q = b, or 1 for ar) below it."""
    r = analyze(scheme=scheme, prompt=256, gen=128, block=32, steps=128)
    context = 256 + 128 / 2
    ridge = h100_achievable_ridge_bf16
    k = r["knee"]
    assert k["context_tokens"] == context and k["limit"] == 2**20
    b = k["block"]
    assert oracle_ai(b, context, 1) < ridge(b) and oracle_ai(b + 1, context, 1) >= ridge(b + 1)
    if k["batch"] is None:  # still memory-bound at the limit: LLaDA's decode (G = 1) reads K/V per sequence
        assert oracle_ai(decode_q, context, 2**20) < ridge(2**20 * decode_q)
    else:
        B = k["batch"]
        assert oracle_ai(decode_q, context, B) < ridge(B * decode_q)
        assert oracle_ai(decode_q, context, B + 1) >= ridge((B + 1) * decode_q)


# --- memory (F8) from the config's numbers -----------------------------------------------------------


@pytest.mark.parametrize("cfg", [False, True])
def test_memory_by_hand(cfg):
    """Block diffusion, Lp = 64, Lg = 128, b = 32, batch 3 (6 sequences with CFG) on one H100."""
    params = 8_015_581_184  # published and pinned in test_models.py
    copies = 2 if cfg else 1
    B = 3 * copies
    weights = params * 2
    kv = (64 + 128) * L * 2 * H_KV * HD * 2  # every token cached, K and V, bf16
    widest = max((H + 2 * H_KV) * HD, 3 * F)  # SwiGLU's 3·f
    act = 64 * (2 * D + widest) * 2  # q_max: the prefill's 64 tokens
    logits = 32 * V * 6  # l_max = b positions, all V, bf16 logits + fp32 probabilities (sglang)
    per_sequence = kv + act + logits
    usable = h100_capacity_bytes() * 0.9
    knobs = dict(scheme="block", prompt=64, gen=128, block=32, steps=64, batch=3, cfg=cfg)
    mem = analyze(**knobs)["memory"]
    assert mem["weights_bytes"] == weights
    assert mem["kv_cache_bytes"] == B * kv
    assert mem["activation_bytes"] == B * act
    assert mem["logits_bytes"] == B * logits
    assert mem["per_sequence_bytes"] == per_sequence
    assert mem["total_bytes"] == weights + B * per_sequence
    assert mem["capacity_bytes"] == h100_capacity_bytes()
    assert mem["usable_bytes"] == pytest.approx(usable, rel=1e-15)
    assert mem["fits"] is True
    # max batch counts sequences, each with its CFG copy
    max_batch = math.floor((usable - weights) / per_sequence) // copies
    assert mem["max_batch"] == max_batch
    row = sweep_row(**knobs)
    assert row["max_batch"] == max_batch
    assert row["memory_total_bytes"] == weights + B * per_sequence and row["fits"] is True


def test_fits_is_total_within_ninety_percent_of_capacity():
    """The largest batch that fits fits; one more sequence does not (F8 at its boundary)."""
    knobs = dict(scheme="block", prompt=64, gen=128, block=32, steps=64)
    largest = analyze(batch=1, **knobs)["memory"]["max_batch"]
    at, over = (analyze(batch=b, **knobs)["memory"] for b in (largest, largest + 1))
    usable = h100_capacity_bytes() * 0.9
    assert at["total_bytes"] <= usable < over["total_bytes"]
    assert at["fits"] is True and over["fits"] is False


# --- table cells that are not JSON values as such ---------------------------------------------------


def table_line(capsys, *args) -> list[str]:
    capsys.readouterr()
    assert main([*args, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("| H100 SXM"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_analyze_table_cells(capsys):
    """speed-up vs AR = ar_time_s / time_s; mem GB = total bytes / 1e9; knee block 'all' when
    every block up to the generation length stays memory-bound, else the block."""
    args = ["analyze", "--gpu", "h100", "--scheme", "dual-cache", "--prompt", "256", "--gen", "256", "--block", "32",
            "--tpf", "3"]
    r = analyze(**DUAL)
    cells = table_line(capsys, *args)
    assert cells[3] == f"{r['ar_time_s'] / r['time_s']:.3g}"
    assert cells[7] == f"{r['memory']['total_bytes'] / 1e9:.4g}"
    assert r["knee"]["block"] < 256 and cells[10] == str(r["knee"]["block"])  # the knee itself
    # a generation no longer than the knee shows 'all'
    short = analyze(scheme="dual-cache", prompt=256, gen=128, block=32, tpf=3)
    assert short["knee"]["block"] >= 128
    cells = table_line(capsys, "analyze", "--gpu", "h100", "--scheme", "dual-cache", "--prompt", "256", "--gen",
                       "128", "--block", "32", "--tpf", "3")
    assert cells[10] == "all"
    # a generation longer than the knee shows the knee itself
    long = analyze(scheme="dual-cache", prompt=256, gen=1024, block=32, tpf=3)
    assert long["knee"]["block"] < 1024
    cells = table_line(capsys, "analyze", "--gpu", "h100", "--scheme", "dual-cache", "--prompt", "256", "--gen",
                       "1024", "--block", "32", "--tpf", "3")
    assert cells[10] == str(long["knee"]["block"])


def test_memory_per_gpu_under_tensor_parallelism_by_hand():
    """tp 2: every matrix, the embedding and the head split in two, the norms replicated; the
    K/V heads split; activations keep the residual stream whole and split the widest
    intermediate; the logits buffer holds all V (gathered for the sampler)."""
    params, norms = 8_015_581_184, L * 2 * D + D
    knobs = dict(scheme="block", prompt=64, gen=128, block=32, steps=64, batch=1, tp=2)
    mem = analyze(**knobs)["memory"]
    assert mem["weights_bytes"] == ((params - norms) / 2 + norms) * 2
    assert mem["kv_cache_bytes"] == (64 + 128) * L * 2 * (H_KV / 2) * HD * 2
    assert mem["activation_bytes"] == 64 * (2 * D + max((H + 2 * H_KV) * HD, 3 * F) / 2) * 2
    assert mem["logits_bytes"] == 32 * V * 6


@pytest.mark.parametrize("stack,logit_bytes", [("none", 2 + 4), ("hf-eager", 2 + 8 + 8)])
def test_logits_buffer_holds_the_stacks_bytes_per_logit(stack, logit_bytes):
    """Without a stack: bf16 logits and fp32 probabilities; hf-eager: plus an fp64 copy and an
    fp64 softmax (LLaDA's reference sampler)."""
    r = api.analyze(LLADA, "h100", stack=stack, scheme="mdm", prompt=64, gen=128, steps=32, batch=2)
    assert r["results"][0].memory.logits_bytes == 2 * (64 + 128) * V * logit_bytes


def test_memory_with_a_drafter_adds_its_weights_and_cache():
    """draft-verify with a drafter: both models' weights and both K/V caches (prompt and
    generation, every layer of each) are resident. Qwen2.5-7B and Dream-7B share their shapes:
    28 layers, 4 K/V heads of 128."""
    r = api.analyze("Qwen/Qwen2.5-7B", "h100", scheme="draft-verify", prompt=100, gen=128, block=16, tpf=4,
                    batch=2, drafter="Dream-org/Dream-v0-Instruct-7B")["results"][0].model_dump()
    per_token = 28 * 2 * 4 * 128 * 2  # bytes per cached token of one of the two models
    mem = r["memory"]
    assert mem["kv_cache_bytes"] == 2 * (100 + 128) * 2 * per_token
    verifier, drafter = load_bundled("Qwen/Qwen2.5-7B"), load_bundled("Dream-org/Dream-v0-Instruct-7B")
    assert mem["weights_bytes"] == 2 * (verifier.params_total + drafter.params_total)
    per_sequence = (100 + 128) * 2 * per_token + mem["activation_bytes"] / 2 + mem["logits_bytes"] / 2
    assert mem["per_sequence_bytes"] == per_sequence
    assert mem["max_batch"] == math.floor((h100_capacity_bytes() * 0.9 - mem["weights_bytes"]) / per_sequence)


def test_knee_equal_to_the_generation_length_is_all(capsys):
    """'all': every block up to the generation length stays memory-bound, the generation's own
    length included (LLaDA-8B, no prompt, 171 tokens: the knee at its achievable ridge is exactly
    171, checked by the independent oracle on both sides)."""
    r = analyze(scheme="mdm", prompt=0, gen=171, steps=171)
    context, ridge = 0 + 171 / 2, h100_achievable_ridge_bf16
    assert oracle_ai(171, context, 1) < ridge(171) and oracle_ai(172, context, 1) >= ridge(172)
    assert r["knee"]["block"] == 171
    # the knee is a block's: the table shows it for a scheme with a block (the search is the same)
    cells = table_line(capsys, "analyze", "--gpu", "h100", "--scheme", "dual-cache", "--block", "9", "--prompt", "0",
                       "--gen", "171", "--steps", "171")
    assert cells[10] == "all"
    cells = table_line(capsys, "analyze", "--gpu", "h100", "--scheme", "mdm", "--prompt", "0", "--gen", "171",
                       "--steps", "171")
    assert cells[10] == "-"  # mdm has no block to grow


# --- gpus, models, model -----------------------------------------------------------------------------


def markdown_row(capsys, args: list[str], first_cell: str) -> list[str]:
    capsys.readouterr()
    assert main([*args, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(f"| {first_cell} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_gpus_row_from_the_hardware_file(capsys):
    g = h100()
    peak, bw = g["peak_tflops"], g["bandwidth_tb_s"]
    cells = markdown_row(capsys, ["gpus"], "H100 SXM")
    assert cells[1] == f"{80 * 2**30 / 1e9:.4g}" == "85.9"  # 80 GiB in GB
    assert cells[2] == "80 GiB"
    assert cells[3] == f"{bw:.3g}"
    assert cells[4:6] == [f"{peak['bf16']:.0f}", f"{peak['fp8']:.0f}"] and cells[6] == "—"
    assert cells[7:9] == [f"{peak['bf16'] / bw:.0f}", f"{peak['fp8'] / bw:.0f}"] and cells[9] == "—"  # (F6)
    assert cells[7] == "295"


# LLaDA2.0-mini's config.json: 20 layers (the first dense), d 2048, 16 heads, 4 K/V heads of 128,
# dense FFN 5120, 256 routed experts of 512 (top 8) + 1 shared, router bias, vocabulary 157184, untied
MINI = "inclusionAI/LLaDA2.0-mini"
MINI_ATTENTION = 2048 * (16 + 2 * 4) * 128 + 16 * 128 * 2048
MINI_EXPERT = 3 * 2048 * 512
MINI_MOE_LAYER = 256 * MINI_EXPERT + 1 * MINI_EXPERT + 2048 * 256 + 256  # experts, shared, router + bias
MINI_NONEMBEDDING = 20 * MINI_ATTENTION + 1 * 3 * 2048 * 5120 + 19 * MINI_MOE_LAYER + 20 * 2 * 2048 + 2048
MINI_TOTAL = MINI_NONEMBEDDING + 2 * 157184 * 2048  # embedding and LM head
MINI_ACTIVE = MINI_TOTAL - 19 * (256 - 8) * MINI_EXPERT
MINI_KV = 20 * 2 * 4 * 128  # elements per token, every layer


def test_model_numbers_by_hand(capsys):
    import json

    capsys.readouterr()
    assert main(["model", MINI, "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["params_total"] == MINI_TOTAL == 16_255_638_272
    assert info["params_nonembedding"] == MINI_NONEMBEDDING
    assert info["params_active"] == MINI_ACTIVE
    assert info["kv_bytes_per_token"] == {"bf16": 2 * MINI_KV, "fp8": MINI_KV, "int8": MINI_KV, "fp4": MINI_KV / 2}
    assert info["group_size"] == 16 / 4


def test_models_row_by_hand(capsys):
    cells = markdown_row(capsys, ["models"], MINI)
    assert cells[2] == f"{MINI_TOTAL / 1e9:.2f}B" == "16.26B"
    assert cells[3] == f"{MINI_ACTIVE / 1e9:.2f}B" == "1.43B"
    assert cells[4] == f"{2 * MINI_KV / 1024:.4g}" == "40"


def test_pass_and_op_table_cells(capsys):
    """--ops: a pass row shows the family's average pass (weights MB, KV read MB: 480 cached
    tokens' K/V, 252 MB), an op row its share of the generation's time in percent."""
    r = analyze(**DUAL)
    capsys.readouterr()
    assert main(["analyze", "--gpu", "h100", "--scheme", "dual-cache", "--prompt", "256", "--gen", "256", "--block",
                 "32", "--tpf", "3", "--ops", "--format", "markdown"]) == 0
    rows = {cells[0]: cells for cells in ([c.strip() for c in x.strip("|").split("|")]
                                         for x in capsys.readouterr().out.splitlines() if x.startswith("| "))}
    step = next(p for p in r["passes"] if p["name"] == "step")
    weights_mb = step['weight_bytes'] / 1e6  # 3 significant digits, whole with separators from 1,000 on
    assert weights_mb > 1e3 and rows["step"][6] == f"{weights_mb:,.0f}"
    assert rows["step"][7] == f"{480 * L * 2 * H_KV * HD * 2 / 1e6:.3g}" == "252"
    assert rows["step"][10] == f"{step['time_s'] * 1e3:.4g}"
    shown = [o for o in r["ops"] if o["time_s"] > 0]  # ops that take no time are left out
    assert len(shown) >= 6
    for o in shown:
        assert rows[o["name"]][5] == f"{100 * o['time_s'] / r['time_s']:.1f}"


def test_a_pass_rows_token_counts_take_separators_from_five_digits():
    """The q and c cells: whole counts below 10,000 as they are (a 1,024 + 1,024-token canvas: q
    2048), with separators from 10,000 on (a 12,288-token canvas), fractional averages as given."""
    from dlmcost.render.analyze import pass_rows, tokens

    step = pass_rows(api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="mdm", prompt=1024, gen=1024,
                                 steps=64).plain()["results"][0])[0]
    assert step[:4] == ["step", "64", "2048", "0"]
    assert (tokens(12288.0), tokens(9999.0), tokens(1500.5)) == ("12,288", "9999", "1500.5")


def test_sweep_and_analyze_show_the_same_tokens_per_second_cell():
    """The sweep table's tok/s: 4 significant digits of the row's tokens/s (1,024 tokens in 64
    passes: 231.2), the cell analyze shows for the same workload."""
    from dlmcost.render.analyze import analyze_rows
    from dlmcost.render.sweep import sweep_table

    rows = api.sweep("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", schemes="mdm", prompts=1024, gens=1024,
                     steps=64).plain()["rows"]
    head, (cells,) = sweep_table(rows, rows)
    shown = cells[head.index("tok/s")]
    assert shown == f"{rows[0]['tokens_per_s']:.4g}" == "231.2"
    a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="mdm", prompt=1024, gen=1024, steps=64).plain()
    assert shown in analyze_rows(a)[0]


def test_verdicts_near_their_thresholds():
    """Dual cache with 152-token blocks: a cached step's AI is 0.93 of its achievable ridge (the
    rates its time is computed with: memory-bound), and with 4 steps per block 46% of the time is
    in those steps, so the generation is compute-bound; with 5 steps per block, 53%: memory-bound."""
    for steps_per_block, expected in ((4, "compute-bound"), (5, "memory-bound")):
        knobs = dict(scheme="dual-cache", prompt=256, gen=4 * 152, block=152, steps=4 * steps_per_block)
        r = analyze(**knobs)
        refresh, step = r["passes"]
        ridge = h100_achievable_ridge_bf16(152)  # the step's rows: batch 1 x 152
        assert 0.9 * ridge < step["flops"] / step["bytes"] < ridge and step["verdict"] == "memory-bound"
        assert step["achievable_ridge_flops_per_byte"] == pytest.approx(ridge, rel=1e-12)
        assert refresh["flops"] / refresh["bytes"] > h100_achievable_ridge_bf16(256 + 4 * 152)
        assert refresh["verdict"] == "compute-bound"
        share = step["count"] * step["time_s"] / r["time_s"]
        assert 0.4 < share < 0.6
        assert r["memory_bound_time_fraction"] == pytest.approx(share, rel=1e-12)
        assert r["verdict"] == expected == ("memory-bound" if share >= 0.5 else "compute-bound")
        row = sweep_row(**knobs)
        assert row["memory_bound_time_fraction"] == pytest.approx(share, rel=1e-12) and row["verdict"] == expected


def test_analyze_header_numbers(capsys):
    """The header: parameters and active parameters in billions, S = Lg / tpf and nb = Lg / b."""
    capsys.readouterr()
    assert main(["analyze", MINI, "--gpu", "h100", "--scheme", "block", "--gen", "256", "--block", "32",
                 "--tpf", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{MINI_TOTAL / 1e9:.2f}B params ({MINI_ACTIVE / 1e9:.2f}B active)" in out
    assert f"S={256 / 3:.2f} · block 32 ({256 // 32} blocks)" in out


@pytest.mark.parametrize("precision,peak", [("bf16", "bf16"), ("fp8", "fp8"), ("w4a16", "bf16")])
def test_ridge_is_the_precisions_gemm_peak_over_bandwidth(precision, peak):
    """(F6) at the peak the precision's GEMMs run at: weight-only formats compute in bf16."""
    g = h100()
    ridge = g["peak_tflops"][peak] * 1e12 / (g["bandwidth_tb_s"] * 1e12)
    assert analyze(scheme="ar", prompt=64, gen=16, precision=precision)["ridge_flops_per_byte"] == pytest.approx(
        ridge, rel=1e-12)
    assert sweep_row(scheme="ar", prompt=64, gen=16, precision=precision)["ridge_flops_per_byte"] == pytest.approx(
        ridge, rel=1e-12)


def test_achievable_ridge_worked_example():
    """docs/methodology.md (F6a): H100 bf16 under sglang at M = 32 rows (a 32-token block at
    batch 1; 32 / 0.25 = 128 rows on the curve, its point of 0.45): 989.5e12 · 0.80 · 0.68 · 0.45 /
    (3.35e12 · 0.80) = 90 FLOP/byte, against the bare ridge of 295."""
    r = analyze(scheme="dual-cache", prompt=256, gen=128, block=32, steps=128)
    step = r["passes"][1]
    assert step["q"] == 32
    assert step["achievable_ridge_flops_per_byte"] == pytest.approx(989.5e12 * 0.80 * 0.68 * 0.45 / (3.35e12 * 0.80),
                                                                    rel=1e-9)
    assert r["ridge_flops_per_byte"] == pytest.approx(h100_ridge_bf16(), rel=1e-12)
    assert step["verdict"] == ("memory-bound" if step["flops"] / step["bytes"] < 89.055 else "compute-bound")


def test_the_ridge_of_a_family_whose_q_varies_is_read_at_its_mean_pass():
    """Prefix cache, 256 tokens in blocks of 32, one token per step: after each block's refresh
    its steps run the block and all after it, q from 256 down to 32, so the steps' mean pass has
    (256 + 32) / 2 = 144 rows at batch 1. Its ridge (and the generation's: the steps take most of
    the time) is the achievable ridge at 144 rows, by hand from the files, not at the first
    pass's 256."""
    r = analyze(scheme="prefix-cache", prompt=256, gen=256, block=32, steps=256)
    refresh, step = r["passes"]
    assert (step["q"], step["q_last"]) == (256, 32)
    assert step["count"] * step["time_s"] > refresh["count"] * refresh["time_s"]
    ridge = h100_achievable_ridge_bf16(144)
    assert ridge < 0.95 * h100_achievable_ridge_bf16(256)  # the curve still climbs here: the two differ
    assert step["achievable_ridge_flops_per_byte"] == pytest.approx(ridge, rel=1e-12)
    assert r["achievable_ridge_flops_per_byte"] == pytest.approx(ridge, rel=1e-12)
    assert sweep_row(scheme="prefix-cache", prompt=256, gen=256, block=32, steps=256)[
        "achievable_ridge_flops_per_byte"] == pytest.approx(ridge, rel=1e-12)


def test_a_sweeps_tokens_per_forward_list_may_hold_the_decodings_own():
    """--tpf as a list through the Python API, None standing for the decoding's own (the sampler's
    128 steps for 128 tokens, block 32): the rows of None and of 2 (64 steps) swept apart, together."""
    def rows(tpf):
        return api.sweep("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", schemes="block", blocks=[32], tpf=tpf).plain()["rows"]

    both, apart = rows([None, 2.0]), rows(None) + rows([2.0])
    assert [r["steps"] for r in both] == [r["steps"] for r in apart] == [128, 64]
    # (one grid or two: the last bit may differ)
    assert [r["tokens_per_s"] for r in both] == pytest.approx([r["tokens_per_s"] for r in apart], rel=1e-12)
