"""Memory per GPU against the brute-force pass lists: the peak activations and logits come from
the largest query and logit counts of any pass the oracle enumerates (not from the schemes'
own peak_shape), the resident K/V from each scheme's documented cached tokens
(docs/methodology.md, "Memory"), each written out here:

    activations = B · q_max · (2d + widest intermediate / N) · 2 bytes
    logits      = B · ℓ_max · V · s_logit          (6 bytes per logit under the sglang stack)
    kv_cache    = B · cached tokens · layers · 2 · K/V heads per GPU · head_dim · kv bytes
"""

from __future__ import annotations

import json

import pytest

import oracle
from dlmcost import api

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
# LLaDA-8B: d 4096, 32 layers, 32 K/V heads of 128, a gated MLP of 12,288 (3 x 12,288 wide: wider
# than Q/K/V's 3 x 4,096), vocabulary 126,464
D, LAYERS, KV_HEADS, HEAD_DIM, WIDEST, VOCAB = 4096, 32, 32, 128, 3 * 12288, 126_464
LP, LG, S, BLOCK = 200, 128, 64, 32
SHORT_PROMPT = 16  # shorter than the answer: a shrinking family's first pass can outgrow a refresh

CASES = [  # scheme, extra knobs, the oracle's knobs, cached tokens per sequence
    ("ar", {}, {}, LP + LG),
    ("prefix-cache", dict(prompt=SHORT_PROMPT), dict(Lp=SHORT_PROMPT), SHORT_PROMPT + LG),
    ("dual-cache", dict(prompt=SHORT_PROMPT), dict(Lp=SHORT_PROMPT), SHORT_PROMPT + LG),
    ("mdm", {}, {}, 0),
    ("prefix-cache", {}, {}, LP + LG),
    ("dual-cache", {}, {}, LP + LG),
    ("block", dict(store_pass=True), dict(store_pass=True), LP + LG),
    ("multi-block", dict(active_blocks=2, cache_delay=1, refresh_every=8),
     dict(active_blocks=2, cache_delay=1, refresh_every=8), LP + LG),
    ("multi-block", dict(active_blocks=2, cache_delay=1, refresh_every=1),  # no cache: every pass whole
     dict(active_blocks=2, cache_delay=1, refresh_every=1), 0),
    ("windowed-refresh", dict(window=16, refresh_every=4), dict(window=16, refresh_every=4), LP + LG),
]


@pytest.mark.parametrize("scheme, knobs, oracle_knobs, cached", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("batch, tp", [(1, 1), (4, 2)])
def test_memory_matches_the_largest_pass_of_the_brute_force_list(scheme, knobs, oracle_knobs, cached, batch, tp):
    lp = oracle_knobs.get("Lp", LP)
    passes = oracle.passes(scheme, lp, LG, S, BLOCK, **{k: v for k, v in oracle_knobs.items() if k != "Lp"})
    q_max = max(p.q for p in passes)
    logits_max = max(p.logits for p in passes)
    mem = api.analyze(LLADA, "h100", scheme=scheme, **{"prompt": LP, **knobs}, gen=LG, steps=S, block=BLOCK,
                      batch=batch, tp=tp)["results"][0]["memory"]
    assert mem["activation_bytes"] == pytest.approx(batch * q_max * (2 * D + WIDEST / tp) * 2, rel=1e-12)
    assert mem["logits_bytes"] == pytest.approx(batch * logits_max * VOCAB * 6, rel=1e-12)
    assert mem["kv_cache_bytes"] == pytest.approx(batch * cached * LAYERS * 2 * KV_HEADS / tp * HEAD_DIM * 2,
                                                  rel=1e-12)


@pytest.mark.parametrize("store_pass, cached", [(False, LP + LG - BLOCK), (True, LP + LG)])
def test_diffgemma_keeps_the_prompt_and_the_stored_canvases(store_pass, cached):
    # every canvas but the last is stored (its K/V cached for the next); with the store pass on
    # the last one too
    mem = api.analyze(LLADA, "h100", scheme="diffgemma", prompt=LP, gen=LG, steps=S, block=BLOCK,
                      store_pass=store_pass)["results"][0]["memory"]
    assert mem["kv_cache_bytes"] == pytest.approx(cached * LAYERS * 2 * KV_HEADS * HEAD_DIM * 2, rel=1e-12)


@pytest.mark.parametrize("prompt, prefills", [(0, 0), (1, 1), (5, 1)])
def test_an_ar_prompt_is_prefilled_once_however_short(prompt, prefills):
    r = api.analyze("meta-llama/Meta-Llama-3-8B", "h100", scheme="ar", prompt=prompt, gen=16)["results"][0]
    # the prefill samples the first of the 16 tokens: 15 decode steps after it; without a prompt 16
    assert r["nfe"] == {0: 16, 1: 1 + 15}[prefills]
    # the serving simulation's count of passes that see only the prompt
    cols = api.sweep_first_pass("meta-llama/Meta-Llama-3-8B", gpus="h100", schemes=["ar"], prompts=[prompt], gens=[16])
    assert cols["prompt_passes"].tolist() == [prefills]


@pytest.mark.parametrize("precision, kv_dtype, kv_bytes", [("fp8", "bf16", 2), ("bf16", "fp8", 1), ("fp8", "fp4", 0.5),
                                                           ("w4a16", "int8", 1)])
def test_the_kv_cache_is_counted_at_its_own_precision_not_the_weights(precision, kv_dtype, kv_bytes):
    """--kv-dtype sets the cache's bytes per element whatever the weights' precision (fp8 weights
    with a bf16 cache: 2 bytes; bf16 weights with an fp8 cache: 1): LLaDA-8B's block decoding
    keeps prompt and answer, LP + LG tokens x 32 layers x 2 x 32 K/V heads x 128 x kv bytes, in
    analyze; a sweep's total grows by the same per sequence against an fp4 cache's half byte."""
    expected = (LP + LG) * LAYERS * 2 * KV_HEADS * HEAD_DIM * kv_bytes
    knobs = dict(scheme="block", prompt=LP, gen=LG, steps=S, block=BLOCK, precision=precision, kv_dtype=kv_dtype)
    mem = api.analyze(LLADA, "h100", **knobs)["results"][0]["memory"]
    assert mem["kv_cache_bytes"] == pytest.approx(expected, rel=1e-12)

    def sweep_totals(kv: str) -> list[float]:  # a sweep's rows give the total: the K/V is its only change here
        return [r["memory_total_bytes"] for r in api.sweep_rows(api.sweep(
            LLADA, gpus="h100", schemes=["block"], prompts=[LP], gens=[LG], steps=[S], blocks=[BLOCK], batches=[1, 2],
            precisions=[precision], kv_dtype=kv))]

    elements = (LP + LG) * LAYERS * 2 * KV_HEADS * HEAD_DIM
    more = [a - b for a, b in zip(sweep_totals(kv_dtype), sweep_totals("fp4"))]  # against half a byte
    assert more == pytest.approx([elements * (kv_bytes - 0.5), 2 * elements * (kv_bytes - 0.5)], rel=1e-9, abs=1)


def test_a_drafter_s_kv_cache_does_not_follow_the_weights_precision():
    """With a drafter (LLaDA2.0-mini drafting for LLaDA2.0-flash) both models' caches are kept at
    --kv-dtype: the same K/V bytes under bf16 and fp8 weights, and a bf16 cache holds 4x an fp4
    one's half byte per element."""
    def kv(precision: str, kv_dtype: str) -> float:
        return api.analyze("inclusionAI/LLaDA2.0-flash", "h100", scheme="draft-verify", block=8, tpf=3,
                           drafter="inclusionAI/LLaDA2.0-mini", prompt=LP, gen=LG, precision=precision,
                           kv_dtype=kv_dtype)["results"][0]["memory"]["kv_cache_bytes"]

    assert kv("fp8", "bf16") == kv("bf16", "bf16") == pytest.approx(4 * kv("fp8", "fp4"), rel=1e-12)
    # both models' bf16 weights, about 100 B + 16 B parameters, exceed 90% of an 80 GiB H100: no request fits
    memory = api.analyze("inclusionAI/LLaDA2.0-flash", "h100", scheme="draft-verify", block=8, tpf=3,
                         drafter="inclusionAI/LLaDA2.0-mini", prompt=LP, gen=LG)["results"][0]["memory"]
    assert memory["weights_bytes"] > 0.9 * 80 * 2**30 and (memory["max_batch"], memory["fits"]) == (0, False)


def test_a_drafter_s_bytes_decide_whether_a_batch_fits():
    """draft-verify of Qwen2.5-7B with Dream-7B drafting: the most requests that fit beside both
    models (test_printed_numbers works it by hand) fit and one more does not, though the verifier
    alone would hold that one more: `fits` counts the drafter's weights and cache too."""
    def memory(batch, **drafter):
        return api.analyze("Qwen/Qwen2.5-7B", "h100", scheme="draft-verify", prompt=100, gen=128, block=16, tpf=4,
                           batch=batch, **drafter)["results"][0]["memory"]

    most = memory(1, drafter="Dream-org/Dream-v0-Instruct-7B")["max_batch"]
    assert memory(most, drafter="Dream-org/Dream-v0-Instruct-7B")["fits"]
    assert not memory(most + 1, drafter="Dream-org/Dream-v0-Instruct-7B")["fits"]
    assert memory(most + 1)["fits"] and memory(1)["max_batch"] > most + 1


# --- the engine's share of each GPU's memory (--mem-fraction) --------------------------------------

QWEN_AR = ["Qwen/Qwen2.5-7B", "--gpu", "h100", "--scheme", "ar", "--stack", "none", "--prompt", "1024",
           "--gen", "1024"]


def test_analyze_measures_its_max_batch_against_the_memory_fraction(run):
    """Qwen2.5-7B AR, 1024 + 1024 tokens on an 80 GiB H100: floor((F x 80 GiB - weights) / a
    sequence's bytes) = 248 sequences at vLLM's default F = 0.9 and 266 at 0.95, worked by hand from
    the model's config (the numbers serve's deployment fits); JSON records F, the header names it
    only when it is not the default."""
    assert [oracle.qwen7b_requests_in_memory(2, 1024, 1024, f) for f in (0.9, 0.95)] == [248, 266]
    for given, fraction, fits in ((None, 0.9, 248), ("0.95", 0.95, 266)):
        rc, out, err = run("analyze", *QWEN_AR, *(["--mem-fraction", given] if given else []), "-f", "json")
        assert rc == 0, err
        a = json.loads(out)
        memory = a["results"][0]["memory"]
        assert (a["workload"]["mem_fraction"], memory["max_batch"]) == (fraction, fits)
        assert memory["usable_bytes"] == fraction * 80 * 2**30
    rc, out, err = run("analyze", *QWEN_AR, "--mem-fraction", "0.95")
    assert rc == 0 and "K/V bf16 · 95% of memory · logits" in out.replace("\n", " "), err
    rc, out, err = run("analyze", *QWEN_AR)
    assert rc == 0 and "K/V bf16 · logits" in out.replace("\n", " "), err


def test_a_sweep_row_fits_what_analyze_fits_at_the_same_memory_fraction(run):
    """sweep --mem-fraction 0.95 over two batches: each row's max batch and fit are analyze's at
    0.95 (266 sequences: 256 fit, 512 do not), and the summary records the share."""
    rc, out, err = run("sweep", "-m", *QWEN_AR[:1], *QWEN_AR[1:], "--batch", "256,512", "--mem-fraction", "0.95",
                       "-f", "json")
    assert rc == 0, err
    s = json.loads(out)
    assert s["settings"]["mem_fraction"] == 0.95
    assert [(r["batch"], r["max_batch"], r["fits"]) for r in s["rows"]] == [(256, 266, True), (512, 266, False)]
    rc, out, err = run("sweep", "-m", *QWEN_AR[:1], *QWEN_AR[1:], "--mem-fraction", "0.95")
    assert rc == 0 and "stack: none; 95% of memory" in out.replace("\n", " "), err


def test_a_batch_that_fills_the_usable_memory_to_the_byte_fits_and_one_more_does_not():
    """memory_breakdown at its edges, on Qwen2.5-7B AR (1024 + 1024 tokens, bf16 weights and K/V):
    with the usable memory exactly weights + 100 requests' bytes (hand-worked, oracle.py; whole
    numbers, exact in floating point) a batch of 100 fills it to the byte and fits (total <= usable),
    101 does not, and the most that fit is 100; the weights and capacity are reported as given
    whatever the batch. A GPU smaller than the weights fits no request (0, not a negative count)."""
    from dlmcost.engine.memory import memory_breakdown
    from dlmcost.inputs.models import resolve_model

    weights, request = oracle.qwen7b_memory_terms(2, 1024, 1024)
    model = resolve_model("Qwen/Qwen2.5-7B")

    def breakdown(capacity, fraction):
        return memory_breakdown(model, capacity, [100, 101], 2048, 1024, 1, 2.0, 2.0, mem_fraction=fraction)

    for fraction, capacity in ((1.0, weights + 100 * request), (0.5, 2 * (weights + 100 * request))):
        mem = breakdown(capacity, fraction)
        assert mem["total_bytes"].tolist() == [weights + 100 * request, weights + 101 * request]
        assert mem["usable_bytes"].tolist() == [weights + 100 * request] * 2
        assert mem["fits"].tolist() == [True, False]
        assert mem["max_effective_batch"] == 100
        assert mem["weights_bytes"].tolist() == [weights] * 2 and mem["capacity_bytes"].tolist() == [capacity] * 2
        assert mem["per_sequence_bytes"].tolist() == [request] * 2
    small = breakdown(weights - 1, 1.0)
    assert small["fits"].tolist() == [False, False] and small["max_effective_batch"] == 0


def test_an_moe_layer_s_widest_intermediate_holds_its_routed_and_shared_experts():
    """A model whose every layer is MoE (no dense MLP; the bundled ones with a shared expert keep a
    wider dense first layer): d 2048, 16 heads, 4 K/V heads of 128 (Q/K/V 24 x 128 = 3,072 wide),
    8 of 64 routed experts of 512 a token and one shared expert of 512, gated. A token's widest
    tensor is its experts' intermediates, 3 x (8 x 512 + 512) = 13,824; its activation bytes per
    GPU at tp 2: (2 x 2048 + 13,824 / 2) x 2 = 22,016."""
    from dlmcost.engine.memory import activation_bytes_per_token, widest_intermediate
    from dlmcost.inputs.models.spec import ModelSpec

    model = ModelSpec(id="all-moe", family="test", n_layers=4, d_model=2048, n_heads=16, n_kv_heads=4, head_dim=128,
                      ffn_dim=0, vocab_size=1000, moe=dict(n_experts=64, experts_per_token=8, expert_ffn_dim=512,
                                                           n_shared_experts=1, shared_ffn_dim=512, n_moe_layers=4))
    assert widest_intermediate(model) == 13_824
    assert activation_bytes_per_token(model, 2) == 22_016


@pytest.mark.parametrize("command", [["analyze"], ["sweep"], ["serve", "--gpu", "h100", "-c", "1"],
                                     ["plan", "--rate", "1", "--gpu", "h100", "--tp", "1"]])
def test_a_memory_fraction_outside_zero_to_one_names_the_option(run, command):
    """The share is a number in (0, 1]: 1.5 is refused with the option's name and the share as
    given, in one line, by every command that takes it."""
    rc, out, err = run(*command, "--mem-fraction", "1.5")
    assert (rc, out) == (2, "")
    assert err == "error: --mem-fraction: a share in (0, 1] of each GPU's memory, got 1.5\n"


def test_all_of_the_memory_is_a_share_analyze_takes(run):
    """(0, 1] holds 1: `--mem-fraction 1` gives the engine the whole 80 GiB of an H100."""
    rc, out, err = run("analyze", *QWEN_AR, "--mem-fraction", "1", "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["results"][0]["memory"]["usable_bytes"] == 80 * 2**30


@pytest.mark.parametrize("ring_buffer, drafter_kv", [
    (True, (22 * 512 + 4 * 4000) * 1024),  # 27,918,336: its 22 sliding layers keep their 512-token window
    (False, 26 * 4000 * 1024)])            # 106,496,000: every layer keeps all 4,000 tokens
def test_a_drafter_s_sliding_layers_follow_the_ring_buffer_setting(ring_buffer, drafter_kv):
    """A drafter's cache is held by the same engine as the verifier's: --no-ring-buffer keeps every
    token of its sliding layers too. Gemma-3-1B drafting for DiffusionGemma-26B, 2,000 + 2,000
    tokens: 26 layers, every 6th global (4), the others sliding over 512 tokens; 1 K/V head of
    256: K and V at 2 bytes, 1,024 bytes per token per layer. Its share is the total's less the
    verifier's alone."""
    def kv(**drafter):
        return api.analyze("google/diffusiongemma-26B-A4B-it", "h100", scheme="draft-verify", block=4, tpf=2,
                           prompt=2000, gen=2000, ring_buffer=ring_buffer, **drafter)["results"][0]["memory"]["kv_cache_bytes"]

    assert kv(drafter="google/gemma-3-1b-it") - kv() == drafter_kv


def test_a_drafter_s_head_follows_quantize_head():
    """--quantize-head stores the LM head and embedding at the weights' precision, the drafter's as
    the verifier's: under fp8, Gemma-3-1B's tied 262,144 x 1,152 embedding drops from 2 bytes an
    element to 1, 301,989,888 bytes, beside what the verifier's own head saves."""
    def saved(**drafter):
        def weights(quantize_head):
            return api.analyze("google/diffusiongemma-26B-A4B-it", "h100", scheme="draft-verify", block=4, tpf=2,
                               prompt=200, gen=200, precision="fp8", quantize_head=quantize_head,
                               **drafter)["results"][0]["memory"]["weights_bytes"]
        return weights(False) - weights(True)

    assert saved(drafter="google/gemma-3-1b-it") - saved() == 262_144 * 1_152 * (2 - 1)


def test_a_drafter_s_cache_is_split_across_the_tensor_parallel_group():
    """At --tp 2 the drafter's K/V heads split as the verifier's do: Qwen2.5-7B verified, Dream-7B
    drafting (both 28 layers, 4 K/V heads of 128: 2 per GPU), 2 sequences of 100 + 128 tokens,
    bf16: 2 models x 2 x 228 tokens x 28 layers x 2 (K, V) x 2 heads x 128 x 2 bytes per GPU."""
    memory = api.analyze("Qwen/Qwen2.5-7B", "h100", scheme="draft-verify", prompt=100, gen=128, block=16, tpf=4,
                         batch=2, tp=2, drafter="Dream-org/Dream-v0-Instruct-7B")["results"][0]["memory"]
    assert memory["kv_cache_bytes"] == 2 * 2 * 228 * 28 * 2 * 2 * 128 * 2
