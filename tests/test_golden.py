"""Golden end-to-end numbers: `api.analyze` against the brute-force reference in oracle.py.

The expected values are computed here, pass by pass and op by op, from the documented formulas
(tests/oracle.py imports nothing from dlmcost), for every scheme (ar, mdm, prefix-cache,
dual-cache, block with and without a store pass, multi-block, windowed-refresh, draft-verify with
and without a drafter) on a dense model (LLaDA-8B), an MoE (LLaDA2.0-mini, whose prefix-cache
and multi-block tail passes touch a different number of experts as q shrinks) and an MLA model
(DeepSeek-V3, both forms and the automatic choice), with batch > 1, CFG, TP/EP, fp8/fp4/
weight-only precisions, committed logits, every expert loaded, fractional steps per block and
the ideal profile. Expert parallelism (costed at the busiest GPU) also runs on Mixtral (one
expert per GPU at ep 8) and Qwen3-30B-A3B (16 per GPU); quantised precisions keep the LM head
and embedding in bf16; hand-checked values for both conventions are in
test_golden_conventions.py.

Under a software stack (the last cases: GEMM curve, attention and elementwise factors, the
sampler, host wait per pass, fixed cost per forward) the oracle applies docs/stacks.md's rule
pass by pass.

Agreement is to a relative 1e-9 on every JSON-level number compared: NFE, FLOPs and bytes by
kind, time and its bound, each op's totals, each pass family's entry and the AR baseline time.
"""

from __future__ import annotations

import math

import pytest

import oracle
from dlmcost import api
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.models import load_bundled

REL = 1e-9

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
MOE = "inclusionAI/LLaDA2.0-mini"
MLA = "deepseek-ai/DeepSeek-V3"
SDAR = "JetLM/SDAR-4B-Chat"  # qk-norm, block diffusion with a store pass
DREAM = "Dream-org/Dream-v0-Instruct-7B"  # q/k/v biases
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"  # 8 experts, top 2: one per GPU at ep 8
QWEN3_MOE = "Qwen/Qwen3-30B-A3B"  # 128 experts, top 8, qk-norm

# --gpu alias -> its file in hardware/ (the oracle reads the YAML itself)
GPU_FILES = {"h100": "nvidia-h100-sxm.yaml", "mi300x": "amd-mi300x.yaml", "b200": "nvidia-b200.yaml",
             "tpu7x": "google-tpu7x.yaml", "h200": "nvidia-h200-sxm.yaml", "a100": "nvidia-a100-80gb-sxm4.yaml"}

# Every knob explicit, so nothing depends on the models' sampler defaults.
BASE = dict(prompt=64, gen=64, steps=32, block=16, batch=1, cfg=False, precision="bf16", kv_dtype="bf16",
            store_pass=False, logits="all", expert_load="expected", tp=1, ep=1, mla_form="auto")


def case(name, model, gpus, profile="realistic", tpf=None, marks=(), **knobs):
    w = {**BASE, **knobs}
    if tpf is not None:
        w["steps"] = None
    return pytest.param(model, gpus, profile, tpf, w, id=name, marks=marks)


CASES = [
    # --- dense (LLaDA-8B): every scheme ------------------------------------------------------
    case("dense-ar", LLADA, "h100,mi300x,tpu7x", scheme="ar", gen=32),
    case("dense-ar-noprompt", LLADA, "h100", scheme="ar", prompt=0, gen=16),
    case("dense-mdm", LLADA, "h100,mi300x,tpu7x", scheme="mdm"),
    case("dense-mdm-committed", LLADA, "h100", scheme="mdm", logits="committed"),
    case("dense-prefix", LLADA, "h100,mi300x,tpu7x", scheme="prefix-cache"),
    case("dense-prefix-committed", LLADA, "h100", scheme="prefix-cache", logits="committed"),
    case("dense-prefix-tpf", LLADA, "h100,mi300x", tpf=3, scheme="prefix-cache"),
    case("dense-prefix-one-step-per-block", LLADA, "h100", scheme="prefix-cache", steps=4),
    case("dense-dual", LLADA, "h100,mi300x,tpu7x", scheme="dual-cache"),
    # a cached step as long as the prompt is not a pass over the prompt alone
    case("dense-dual-prompt-is-a-block", LLADA, "h100", scheme="dual-cache", prompt=16),
    case("dense-dual-tpf-committed", LLADA, "h100", tpf=2.5, scheme="dual-cache", gen=80, logits="committed"),
    case("dense-block", LLADA, "h100,mi300x,tpu7x", scheme="block"),
    case("dense-block-store", LLADA, "h100,mi300x", scheme="block", store_pass=True),
    case("dense-block-tpf-noprompt", LLADA, "h100", tpf=2.5, scheme="block", prompt=0, gen=80),
    # variations: batch, CFG, precisions, K/V dtype, TP, the ideal profile
    case("dense-mdm-batch-cfg-fp8", LLADA, "h100,mi300x,b200", scheme="mdm", batch=3, cfg=True,
         precision="fp8", kv_dtype="fp8"),
    case("dense-dual-batch-w4a16", LLADA, "h100,a100", scheme="dual-cache", batch=8, precision="w4a16"),
    case("dense-block-fp4", LLADA, "b200", scheme="block", batch=4, precision="fp4", kv_dtype="fp4"),
    # q shrinks block by block: the GEMMs cross from compute- to memory-bound inside the family
    case("dense-prefix-crossing", LLADA, "h100,mi300x", scheme="prefix-cache", batch=8),
    # long canvases: softmax makes elementwise work compute-bound on the A100's vector units;
    # attention turns compute-bound (at bf16 efficiency while the GEMMs run at fp8's)
    case("dense-mdm-long-context", LLADA, "a100,h100", scheme="mdm", prompt=8128, gen=64, steps=2, block=64),
    case("dense-mdm-long-fp8", LLADA, "h100,b200", scheme="mdm", prompt=8128, gen=64, steps=2, block=64,
         precision="fp8"),
    case("dense-prefix-tp2", LLADA, "h100,b200", scheme="prefix-cache", batch=2, tp=2),
    case("dense-block-store-tp4-fp8", LLADA, "h100,mi300x", scheme="block", store_pass=True, tp=4,
         precision="fp8"),
    case("dense-ar-tp2-cfg", LLADA, "h100", scheme="ar", gen=16, batch=2, cfg=True, tp=2),
    case("dense-dual-ideal", LLADA, "h100,mi300x", profile="ideal", scheme="dual-cache", batch=4),
    case("dense-mdm-ideal-tp2", LLADA, "h100", profile="ideal", scheme="mdm", tp=2),
    # q/k/v biases (Dream) and qk-norm (SDAR) in the projection weights
    case("dream-mdm-bias", DREAM, "h100", scheme="mdm"),
    case("sdar-block-store-qknorm", SDAR, "h100", scheme="block", block=4, steps=32, store_pass=True,
         gen=32, batch=2),
    # --- MoE (LLaDA2.0-mini): prefix-cache touches fewer experts each block as q shrinks ------
    case("moe-prefix", MOE, "h100,mi300x", scheme="prefix-cache", prompt=32, block=8),
    case("moe-prefix-batch-cfg", MOE, "h100", scheme="prefix-cache", prompt=32, block=8, batch=2, cfg=True),
    case("moe-prefix-tpf", MOE, "h100", tpf=2.5, scheme="prefix-cache", prompt=32, gen=80, block=16),
    case("moe-prefix-all-experts", MOE, "h100", scheme="prefix-cache", prompt=32, block=8, expert_load="all"),
    case("moe-prefix-tp2-ep2", MOE, "h100,b200", scheme="prefix-cache", prompt=32, block=8, tp=2, ep=2),
    case("moe-prefix-all-experts-tp2-ep2", MOE, "h100", scheme="prefix-cache", prompt=32, block=8,
         expert_load="all", tp=2, ep=2),
    # every expert read, q fixed per pass: the busiest GPU's copies still follow E[max | d]
    case("moe-block-all-experts-tp4-ep4", MOE, "h100", scheme="block", batch=2, expert_load="all", tp=4, ep=4),
    case("moe-mdm-all-experts-tp2-ep2-fp8", MOE, "h100", scheme="mdm", expert_load="all", tp=2, ep=2,
         precision="fp8"),
    case("moe-prefix-tp4-ep1", MOE, "h100", scheme="prefix-cache", prompt=32, block=8, tp=4),
    case("moe-ar", MOE, "h100", scheme="ar", gen=32),
    case("moe-mdm", MOE, "h100,mi300x", scheme="mdm", batch=2),
    case("moe-dual", MOE, "h100", scheme="dual-cache", block=8),
    case("moe-block", MOE, "h100,mi300x,tpu7x", scheme="block", batch=2),
    case("moe-block-store-committed", MOE, "h100", scheme="block", store_pass=True, logits="committed"),
    case("moe-block-tp8-ep4-fp8", MOE, "h100,b200", scheme="block", batch=16, tp=8, ep=4, precision="fp8"),
    case("moe-block-all-experts", MOE, "h100", scheme="block", batch=4, expert_load="all"),
    # --- expert parallelism at the busiest GPU: one expert per GPU (Mixtral), 16 per GPU (Qwen3) --
    case("mixtral-ar-tp8-ep8", MIXTRAL, "h100,b200", scheme="ar", gen=16, tp=8, ep=8),
    case("mixtral-prefix-tp8-ep8-batch2", MIXTRAL, "h100", scheme="prefix-cache", prompt=32, block=8,
         batch=2, tp=8, ep=8),
    case("mixtral-ar-tp8-ep4-w4a16", MIXTRAL, "h100", scheme="ar", gen=16, batch=3, tp=8, ep=4,
         precision="w4a16"),
    case("qwen3-moe-prefix-tp8-ep8-fp8", QWEN3_MOE, "h100", scheme="prefix-cache", prompt=32, block=8,
         tp=8, ep=8, precision="fp8"),
    case("qwen3-moe-ar-tp4-ep2", QWEN3_MOE, "h100", scheme="ar", gen=16, batch=4, tp=4, ep=2),
    # --- MLA (DeepSeek-V3): both forms, and auto choosing per pass family ---------------------
    case("mla-ar-auto", MLA, "h200", scheme="ar", gen=16, prompt=128),
    case("mla-ar-expanded", MLA, "h200", scheme="ar", gen=16, prompt=128, mla_form="expanded"),
    # the first step (nothing cached) alone would be faster expanded; the family runs absorbed
    case("mla-ar-noprompt-auto", MLA, "h200", scheme="ar", gen=16, prompt=0, batch=8),
    case("mla-mdm-absorbed", MLA, "h200", scheme="mdm", gen=32, steps=8, block=8, mla_form="absorbed"),
    case("mla-mdm-expanded", MLA, "h200", scheme="mdm", gen=32, steps=8, block=8, mla_form="expanded"),
    case("mla-prefix-auto", MLA, "h200,b200", scheme="prefix-cache", gen=32, steps=16, block=8),
    case("mla-prefix-expanded", MLA, "h200", scheme="prefix-cache", gen=32, steps=16, block=8,
         mla_form="expanded"),
    case("mla-dual-absorbed", MLA, "h200", scheme="dual-cache", gen=32, steps=16, block=8,
         mla_form="absorbed"),
    case("mla-dual-auto-batch", MLA, "h200", scheme="dual-cache", gen=32, steps=16, block=8, batch=8),
    case("mla-block-store-expanded", MLA, "h200", scheme="block", gen=32, steps=16, block=8,
         store_pass=True, mla_form="expanded"),
    case("mla-block-tp8-ep8-fp8", MLA, "h200,b200", scheme="block", gen=32, steps=16, block=8, batch=8,
         tp=8, ep=8, precision="fp8"),
    case("mla-block-tp8-ep1-auto", MLA, "h200", scheme="block", gen=32, steps=16, block=8, tp=8),
    # --- multi-block: A blocks in flight, K/V cached d passes late, full refresh every R ------
    case("dense-multi-block", LLADA, "h100,mi300x", scheme="multi-block", block=8, active_blocks=2,
         cache_delay=1, refresh_every=0),
    case("dense-multi-block-refresh", LLADA, "h100", scheme="multi-block", block=8, active_blocks=2,
         cache_delay=1, refresh_every=5),
    case("dense-multi-block-noprompt-refresh", LLADA, "h100", scheme="multi-block", prompt=0, block=8,
         active_blocks=2, cache_delay=1, refresh_every=5),
    case("dense-multi-block-no-cache", LLADA, "h100", scheme="multi-block", block=8, active_blocks=2,
         cache_delay=1, refresh_every=1),
    case("dense-multi-block-whole-window", LLADA, "h100", scheme="multi-block", block=8, active_blocks=8,
         cache_delay=0, refresh_every=0, batch=4),
    case("dense-multi-block-tpf-tp2", LLADA, "h100", tpf=2.5, scheme="multi-block", gen=80, block=8,
         active_blocks=3, cache_delay=2, refresh_every=4, tp=2, batch=2),
    # a window of 3.25 blocks drains over 3 tail positions whose q (and experts touched) shrink
    case("moe-multi-block", MOE, "h100,mi300x", scheme="multi-block", block=8, active_blocks=3, cache_delay=1,
         refresh_every=0),
    case("moe-multi-block-all-experts-tp2-ep2", MOE, "h100", scheme="multi-block", block=8, active_blocks=3,
         cache_delay=1, refresh_every=0, expert_load="all", tp=2, ep=2),
    case("moe-multi-block-refresh", MOE, "h100", scheme="multi-block", block=8, active_blocks=2, cache_delay=1,
         refresh_every=3),
    case("mla-multi-block", MLA, "h200", scheme="multi-block", gen=32, steps=16, block=8, active_blocks=2,
         cache_delay=2, refresh_every=4),
    # --- windowed-refresh: the block and w tokens either side, full refresh per block / every R
    case("dense-windowed", LLADA, "h100,mi300x", scheme="windowed-refresh", window=8, refresh_every=0),
    case("dense-windowed-refresh", LLADA, "h100", scheme="windowed-refresh", window=8, refresh_every=3),
    case("dense-windowed-tpf-committed", LLADA, "h100", tpf=2.5, scheme="windowed-refresh", gen=80, window=4,
         refresh_every=2, logits="committed"),
    case("dense-windowed-clipped", LLADA, "h100", scheme="windowed-refresh", window=100, refresh_every=0),
    case("moe-windowed-tp2-ep2", MOE, "h100", scheme="windowed-refresh", window=16, refresh_every=4, tp=2,
         ep=2, batch=4),
    case("mla-windowed", MLA, "h200", scheme="windowed-refresh", gen=32, steps=16, block=8, window=4,
         refresh_every=2),
    # --- draft-verify: k = block drafts per iteration, tpf = accepted tokens per iteration ------
    case("dense-draft-verify-self", LLADA, "h100,mi300x", tpf=4, scheme="draft-verify", block=8),
    case("dense-draft-verify-fractional", LLADA, "h100", tpf=2.5, scheme="draft-verify", block=4, batch=4),
    case("moe-draft-verify-drafter", "inclusionAI/LLaDA2.0-flash", "h100,b200", tpf=3, scheme="draft-verify",
         block=8, drafter=MOE),
    case("moe-draft-verify-drafter-tp2-fp8", "inclusionAI/LLaDA2.0-flash", "h100", tpf=2.5,
         scheme="draft-verify", block=4, drafter=MOE, tp=2, precision="fp8", batch=2),
    case("mla-draft-verify-self", MLA, "h200", tpf=3, scheme="draft-verify", gen=36, block=4),
    # a drafter of another architecture: each model's passes have only its own ops (an MoE verifier
    # has no dense MLP, a dense drafter no experts)
    case("moe-verifier-dense-drafter", QWEN3_MOE, "h100", tpf=3, scheme="draft-verify", block=8,
         drafter="Qwen/Qwen3-8B"),
    case("dense-verifier-moe-drafter", "Qwen/Qwen3-8B", "h100", tpf=2, scheme="draft-verify", block=4,
         drafter=QWEN3_MOE, batch=2),
]


def _api_kwargs(w: dict, tpf) -> dict:
    kw = dict(w)
    if tpf is not None:
        kw["tpf"] = tpf
    return {k: v for k, v in kw.items() if v is not None}


def _oracle(spec, gpu: str, profile: str, tpf, w: dict) -> dict:
    steps = w["steps"] if tpf is None else w["gen"] / tpf
    drafter = load_bundled(w["drafter"]) if w.get("drafter") else None
    return oracle.generation(spec, GPU_FILES[gpu], **{**w, "steps": steps, "drafter": drafter}, profile=profile)


def _plain(result) -> dict:
    """A result as a dictionary (typed results are dumped; dictionaries pass through)."""
    return result.model_dump() if hasattr(result, "model_dump") else result


def _close(actual: float, expected: float, scale: float) -> bool:
    """Relative 1e-9; an expected zero must be zero to 1e-9 of the quantity's scale."""
    if expected == 0.0:
        return abs(actual) <= REL * scale
    return math.isclose(actual, expected, rel_tol=REL, abs_tol=0.0)


def _diff(r: dict, e: dict) -> list[str]:
    """Every compared JSON-level number that disagrees, as readable lines."""
    bad = []

    def check(label, actual, expected, scale=None):
        if not _close(actual, expected, scale if scale is not None else abs(expected)):
            rel = (actual - expected) / expected if expected else float("inf")
            bad.append(f"{label}: dlmcost {actual!r} oracle {expected!r} (rel {rel:+.3e})")

    for key in ("nfe", "flops", "bytes", "time_s", "time_bound_s"):
        check(key, r[key], e[key])
    for key in e["flops_breakdown"]:
        check(f"flops_breakdown.{key}", r["flops_breakdown"][key], e["flops_breakdown"][key], e["flops"])
    for key in e["bytes_breakdown"]:
        check(f"bytes_breakdown.{key}", r["bytes_breakdown"][key], e["bytes_breakdown"][key], e["bytes"])
    ops = {o["name"]: o for o in r["ops"]}
    if set(ops) != set(e["ops"]):
        bad.append(f"ops: dlmcost {sorted(ops)} oracle {sorted(e['ops'])}")
    for name, eo in e["ops"].items():
        if name in ops:
            check(f"ops.{name}.flops", ops[name]["flops"], eo["flops"], e["flops"])
            check(f"ops.{name}.bytes", ops[name]["bytes"], eo["bytes"], e["bytes"])
            check(f"ops.{name}.time_s", ops[name]["time_s"], eo["time_s"], e["time_s"])
    passes = {p["name"]: p for p in r["passes"]}
    if set(passes) != set(e["passes"]):
        bad.append(f"passes: dlmcost {sorted(passes)} oracle {sorted(e['passes'])}")
    for name, ep in e["passes"].items():
        if name not in passes:
            continue
        rp = passes[name]
        for key, value in ep.items():
            if key == "mla_form":
                if rp.get("mla_form") != value:
                    bad.append(f"passes.{name}.mla_form: dlmcost {rp.get('mla_form')} oracle {value}")
            else:
                scale = ep["bytes"] if "bytes" in key else ep["flops"] if "flops" in key else abs(value)
                check(f"passes.{name}.{key}", rp[key], value, scale)
    return bad


def _compare(model, gpus, profile, tpf, w) -> list[str]:
    spec = load_bundled(model)
    # the hardware roofline: software-stack terms are pinned below and in test_stack_engine.py
    got = api.analyze(spec, gpus, efficiency=profile, stack="none", **_api_kwargs(w, tpf))
    results = [_plain(res) for res in got["results"]]
    assert [res["supported"] for res in results] == [True] * len(results)
    problems = []
    for gpu, res in zip(gpus.split(","), results):
        expected = _oracle(spec, gpu, profile, tpf, w)
        problems += [f"{gpu}: {line}" for line in _diff(res, expected)]
        # the AR baseline every result is compared with: same model, sizes, batch, layout, GPU,
        # without CFG's unconditional copy (AR has no guidance)
        ar = _oracle(spec, gpu, profile, None, {**{k: w[k] for k in BASE}, "scheme": "ar", "steps": None,
                                                 "block": None, "store_pass": False, "cfg": False})
        if not _close(res["ar_time_s"], ar["time_s"], ar["time_s"]):
            problems.append(f"{gpu}: ar_time_s: dlmcost {res['ar_time_s']!r} oracle {ar['time_s']!r}")
    return problems


@pytest.mark.parametrize("model,gpus,profile,tpf,w", CASES)
def test_analyze_matches_the_brute_force_oracle(model, gpus, profile, tpf, w):
    problems = _compare(model, gpus, profile, tpf, w)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("model,gpus,profile,tpf,w", CASES)
def test_first_pass_matches_the_brute_force_oracle(model, gpus, profile, tpf, w):
    """What `dlmcost plan` times apart: the first pass of the generation (the head of the oracle's
    pass list, costed alone) and the passes over the prompt alone, through `api.sweep_first_pass`."""
    spec = load_bundled(model)
    knobs = {k: w[k] for k in ("active_blocks", "cache_delay", "refresh_every", "window", "drafter") if k in w}
    got = api.sweep_first_pass(spec, gpus=gpus, schemes=[w["scheme"]], prompts=[w["prompt"]], gens=[w["gen"]],
                               steps=None if w["steps"] is None else [w["steps"]], tpf=tpf, blocks=[w["block"]],
                               batches=[w["batch"]], precisions=[w["precision"]], tps=[w["tp"]], eps=[w["ep"]],
                               kv_dtype=w["kv_dtype"], cfg=w["cfg"], store_pass=w["store_pass"], logits=w["logits"],
                               expert_load=w["expert_load"], mla_form=w["mla_form"], efficiency=profile,
                               stack="none", **knobs)
    assert got["gpu"].tolist() == [HardwareDB.load().get(g).name for g in gpus.split(",")]
    for i, gpu in enumerate(gpus.split(",")):
        steps = w["steps"] if tpf is None else w["gen"] / tpf
        drafter = load_bundled(w["drafter"]) if w.get("drafter") else None
        e = oracle.first_pass(spec, GPU_FILES[gpu], **{**w, "steps": steps, "drafter": drafter}, profile=profile)
        assert got["nfe"][i] == pytest.approx(e["nfe"], rel=REL)
        assert got["time_s"][i] == pytest.approx(e["total_s"], rel=REL)
        assert got["first_pass_s"][i] == pytest.approx(e["time_s"], rel=REL), gpu
        assert got["prompt_passes"][i] == e["prompt_passes"]


# --- under a software stack -------------------------------------------------------------------
#
# The stack's terms (docs/stacks.md, "The time of a pass": GEMM curve at B x q rows, attention
# efficiency, elementwise byte factor, the sampler's B x positions x V logits (all of V), host wait,
# fixed cost per forward and per sequence, an MoE model's experts at their own rows, the H100's
# rows scale on the curve) against the oracle's pass-by-pass rule. A GEMM curve that changes
# between every shape's rows, batch > 1 and TP 2 so that each factor of each term shows.

# depth: (overhead, reference K) of the GEMM depth term, a reference that some matrices of each
# case are deeper than and others shallower (LLaDA's 2048-wide heads and 6144-wide FFN share at TP 2;
# the MoE's experts, whose fused kernel has a depth overhead and an fp8 rate of its own)
GOLDEN_STACK = dict(gemm=[(1, 0.3), (64, 0.5), (1024, 0.9)], attention=0.7, elementwise=1.5, sampler_bytes=10.0,
                    sampler_traffic=37.0, fixed_us=200.0, us_per_sequence=7.0, us_per_sequence_squared=3.0,
                    us_per_expert=0.4, depth=(0.6, 3000.0), keys_overhead=300.0, fused_moe=(40.0, 0.05))


def _stack_file(stack: dict):
    from dlmcost.inputs.stacks import validate_stack

    keys = ("host", "fixed", "gemm_efficiency", "attention_efficiency", "elementwise_bytes_factor",
            "sampler_logits_bytes", "sampler_traffic_bytes", "us_per_sequence", "us_per_sequence_squared",
            "us_per_expert", "depth_overhead", "attention_keys_overhead", "fused_moe")
    depth = dict(zip(("depth_overhead", "reference_depth"), stack["depth"])) if "depth" in stack else {}
    return validate_stack(dict(
        name="golden", host=dict(us_per_layer=stack["us_per_layer"], overlaps_gpu=stack["overlaps_gpu"],
                                 fixed_us_per_forward=stack["fixed_us"], us_per_sequence=stack["us_per_sequence"],
                                 us_per_sequence_squared=stack.get("us_per_sequence_squared", 0.0),
                                 us_per_expert=stack.get("us_per_expert", 0.0)),
        gemm_efficiency=dict(rows=[r for r, _ in stack["gemm"]], efficiency=[e for _, e in stack["gemm"]], **depth),
        attention_efficiency=stack["attention"], attention_keys_overhead=stack.get("keys_overhead", 0.0),
        elementwise_bytes_factor=stack["elementwise"],
        sampler_logits_bytes=stack["sampler_bytes"], sampler_traffic_bytes=stack.get("sampler_traffic"),
        fused_moe=dict(zip(("depth_overhead", "fp8_rate"), stack["fused_moe"])) if "fused_moe" in stack else None,
        sources=dict.fromkeys(keys, "test")))


def _host_between_the_passes(spec, w: dict) -> float:
    """Microseconds per layer that put the host time halfway between the fastest and the slowest
    pass's GPU time, so the host wait is positive for some passes and zero for others (the max()
    per pass is what is tested)."""
    st = oracle.Setup(B=w["batch"], tp=w["tp"])
    g = oracle.gpu_rates(GPU_FILES["h100"], "bf16")
    stack = {**GOLDEN_STACK, "us_per_layer": 0.0, "overlaps_gpu": True}
    gpu = [sum(t for k, t in oracle.pass_times(spec, p, st, g, stack).items() if k not in ("host_wait", "per_forward"))
           for p in oracle.passes(w["scheme"], w["prompt"], w["gen"], w["steps"], w["block"], store_pass=w["store_pass"])]
    assert max(gpu) > 1.2 * min(gpu)
    loops_us = _expert_loops(spec) * GOLDEN_STACK["us_per_expert"]  # the MoE loop's share of the host time
    assert loops_us < min(gpu) * 1e6 / 2
    return ((min(gpu) + max(gpu)) / 2 * 1e6 - loops_us) / spec.n_layers


def _expert_loops(spec) -> int:
    """Every expert of every MoE layer, once per forward (a reference MoE loop)."""
    return spec.moe.n_moe_layers * spec.moe.n_experts if spec.moe else 0


STACK_CASES = [
    # MoE prefix-cache steps are summed pass by pass (q shrinks block by block); the refresh
    # passes and the AR baseline's steps in closed form
    pytest.param(MOE, dict(scheme="prefix-cache", batch=4, tp=2), True, id="moe-prefix-cache-overlapped"),
    # at fp8, where the fused MoE kernel's own fp8 rate applies
    pytest.param(MOE, dict(scheme="prefix-cache", batch=4, tp=2, precision="fp8"), False, id="moe-prefix-cache-serial"),
    # dense, closed form throughout (q fixed in every family): prefill at 4 x 64 rows, steps at 4 x 16
    pytest.param(LLADA, dict(scheme="block", batch=4, tp=2, store_pass=True), True, id="dense-block"),
]


@pytest.mark.parametrize("model,knobs,overlaps", STACK_CASES)
def test_analyze_under_a_stack_matches_the_oracle(model, knobs, overlaps):
    spec = load_bundled(model)
    w = {**BASE, **knobs}
    stack = {**GOLDEN_STACK, "us_per_layer": _host_between_the_passes(spec, w), "overlaps_gpu": overlaps}
    res = _plain(api.analyze(spec, "h100", stack=_stack_file(stack), **_api_kwargs(w, None))["results"][0])
    expected = oracle.generation(spec, GPU_FILES["h100"], **w, stack=stack)
    problems = _diff(res, expected)
    ar = oracle.generation(spec, GPU_FILES["h100"], **{**w, "scheme": "ar", "steps": None, "block": None,
                                                        "store_pass": False}, stack=stack)
    if not _close(res["ar_time_s"], ar["time_s"], ar["time_s"]):
        problems.append(f"ar_time_s: dlmcost {res['ar_time_s']!r} oracle {ar['time_s']!r}")
    assert not problems, "\n".join(problems)
    # each stack term is there to be checked: some passes wait for the host, others do not
    host_s = (spec.n_layers * stack["us_per_layer"] + _expert_loops(spec) * stack["us_per_expert"]) * 1e-6
    assert 0 < expected["ops"]["host_wait"]["time_s"] < expected["nfe"] * host_s or not overlaps


def test_the_moe_prefix_cache_case_is_not_affine():
    """The MoE prefix-cache cases above need pass-by-pass summing: the expert weight bytes of a
    step fall block by block (q shrinks from Lg to b), so a straight line through the first two
    blocks misses the last one by far more than the 1e-9 tolerance."""
    spec = load_bundled(MOE)
    first_of_block = {}
    for p in oracle.passes("prefix-cache", 32, 64, 32, 8):
        if p.family == "step":
            first_of_block.setdefault(p.c, p)
    shapes = list(first_of_block.values())
    assert len(shapes) == 8
    experts = [next(o for o in oracle.pass_ops(spec, p, oracle.Setup(B=1)) if o.name == "experts").weights
               for p in shapes]
    line = experts[0] + (experts[1] - experts[0]) * (len(shapes) - 1)
    assert abs(line - experts[-1]) > 0.05 * experts[-1]


def test_the_oracle_walks_every_pass():
    """NFE from the explicit schedule, against the documented counts per scheme."""
    Lp, Lg, S, b = 64, 64, 32, 16
    nb = Lg // b
    assert len(oracle.passes("ar", Lp, Lg, Lg, Lg)) == 1 + (Lg - 1)  # the prefill samples the first token
    assert len(oracle.passes("ar", 0, Lg, Lg, Lg)) == Lg  # without a prompt it takes a pass
    assert len(oracle.passes("mdm", Lp, Lg, S, b)) == S
    assert len(oracle.passes("prefix-cache", Lp, Lg, S, b)) == S
    assert len(oracle.passes("dual-cache", Lp, Lg, S, b)) == S
    assert len(oracle.passes("block", Lp, Lg, S, b)) == 1 + S
    assert len(oracle.passes("block", Lp, Lg, S, b, store_pass=True)) == 1 + S + nb
    frac = oracle.passes("prefix-cache", Lp, Lg, Lg / 3, b)
    assert sum(p.weight for p in frac) == pytest.approx(Lg / 3, rel=1e-12)


def test_the_oracle_stays_independent_of_the_code_it_checks():
    """oracle.py may read ModelSpec fields it is handed, but imports nothing from dlmcost."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(oracle.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not [name for name in imported if name.split(".")[0] == "dlmcost"]


def test_first_pass_of_a_mixed_sweep_equals_each_configuration_alone():
    """engine.first_pass takes each scheme's rows out of a grid that mixes schemes and sizes: every
    row's first pass must equal the same configuration evaluated alone."""
    grid = dict(gpus="h100,mi300x", schemes=["ar", "mdm", "prefix-cache", "block"], prompts=[0, 64], gens=[64],
                blocks=[16, 64], batches=[1, 8])
    mixed = api.sweep_first_pass(LLADA, **grid)
    assert len(mixed["scheme"]) > 8
    for i in range(len(mixed["scheme"])):
        alone = api.sweep_first_pass(LLADA, gpus=mixed["gpu"][i], schemes=[mixed["scheme"][i]],
                                     prompts=[int(mixed["prompt"][i])], gens=[64],
                                     blocks=[int(mixed["block"][i]) if mixed["block"][i] is not None else 16],
                                     batches=[int(mixed["batch"][i])])
        assert alone["first_pass_s"].tolist() == pytest.approx([mixed["first_pass_s"][i]], rel=1e-12)
        assert alone["prompt_passes"].tolist() == [mixed["prompt_passes"][i]]


def test_a_mixed_sweep_matches_the_oracle_row_by_row():
    """One grid in which the same family has one shape in some configurations and several in
    others (one block or four, with and without a prompt): every row against the oracle, on the
    bare roofline as the oracle costs it."""
    spec = load_bundled(LLADA)
    swept = api.sweep(spec, gpus="h100", schemes=["block", "dual-cache", "ar"], prompts=[0, 64], gens=[32, 128],
                      blocks=[32], steps=[32], batches=[1, 4], stack="none")
    rows = api.sweep_rows(swept)
    assert {(r["scheme"], r["gen"]) for r in rows} == {(s, g) for s in ("block", "dual-cache", "ar") for g in (32, 128)}
    for r in rows:
        w = {**BASE, "scheme": r["scheme"], "prompt": r["prompt"], "gen": r["gen"], "batch": r["batch"],
             "steps": None if r["scheme"] == "ar" else 32, "block": None if r["scheme"] == "ar" else 32}
        e = _oracle(spec, "h100", "realistic", None, w)
        assert r["time_s"] == pytest.approx(e["time_s"], rel=REL), r
        assert r["flops_per_token"] * r["gen"] * r["batch"] == pytest.approx(e["flops"], rel=REL), r


def test_one_grid_of_block_lengths_times_decode_attention_only_where_q_is_one():
    """Decode's measured attention rate (a hardware file's `decode_attention`) is chosen per
    configuration: in one grid of block lengths 1, 2 and 32, the b = 1 rows' passes have one query
    a sequence (decode's kernel), the b = 2 and b = 32 rows' do not. On the A100 (0.46 of the peak
    and 16.5 us a kernel, against the generic 0.8 and its generic overhead) and the H100 (its
    measured 10.6 us at the generic 0.8) every row against the oracle, which marks a pass as
    decode by its own q == 1. A rule applied to the whole grid (all rows or none), or to q <= 2,
    misses some rows by 0.17% to 4% (far past the 1e-9 tolerance)."""
    spec = load_bundled(LLADA)
    swept = api.sweep(spec, gpus="h100,a100", schemes=["block"], prompts=[64], gens=[32], blocks=[1, 2, 32],
                      steps=[32], batches=[1], stack="none")
    rows = api.sweep_rows(swept)
    assert sorted((r["gpu"], r["block"]) for r in rows) == [(g, b) for g in ("A100 80GB SXM", "H100 SXM")
                                                             for b in (1, 2, 32)]
    for r in rows:
        gpu = "a100" if r["gpu"].startswith("A100") else "h100"
        w = {**BASE, "scheme": "block", "gen": 32, "steps": 32, "block": r["block"]}
        assert r["time_s"] == pytest.approx(_oracle(spec, gpu, "realistic", None, w)["time_s"], rel=REL), r
