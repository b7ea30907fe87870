"""Serving cost terms of a software stack, each against a value computed by hand: MoE expert GEMMs
at the rows each expert receives, the GPU's factor on the GEMM curve, the step's host time as a
function of the batch, the stack's limit on running requests."""

import math

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine import stack_time
from dlmcost.inputs.stacks import StackFileError, bundled_stack_names, load_stack, validate_stack

SOURCES = {k: "test" for k in ("host", "fixed", "gemm_efficiency", "attention_efficiency",
                                "elementwise_bytes_factor", "sampler_logits_bytes")}
H20_PEAK, H20_GEMM_EFF, H20_BANDWIDTH, H20_MEM_EFF = 148e12, 0.80, 4.0e12, 0.36  # hardware/nvidia-h20.yaml
H20_OVERHEAD_S = 3e-6


def neutral(**over):
    """A stack that changes nothing but what `over` sets."""
    host = dict(us_per_layer=0, overlaps_gpu=True, fixed_us_per_forward=0)
    host.update(over.pop("host", {}))
    sources = {**SOURCES, **over.pop("sources", {})}
    data = dict(name="t", host=host, gemm_efficiency=dict(rows=[1], efficiency=[1.0]), attention_efficiency=1.0,
                elementwise_bytes_factor=1.0, sampler_logits_bytes=0.0, sources=sources)
    data.update(over)
    return validate_stack(data)


def op(result, name):
    return next(o for o in result["ops"] if o["name"] == name)


# LLaDA2.0-mini: 256 experts, 8 per token, 19 MoE layers. mdm over a 16 + 16 canvas at batch 128:
# every pass holds T = 128 x 32 = 4096 tokens, so each expert receives T k / E = 4096 x 8 / 256 = 128
# rows (all 256 experts are touched: d = 256 (1 - (1 - 8/256)^4096) = 256 to 50 digits).
MINI = dict(scheme="mdm", prompt=16, gen=16, steps=4, batch=128)
# a curve linear in log M from 0.4 at 64 rows to 0.8 at 256: 0.6 at 128 rows, 0.8 at 4096
CURVE = dict(rows=[64, 256], efficiency=[0.4, 0.8])


def mini(stack, gpus="h20", **over):
    return api.analyze("inclusionAI/LLaDA2.0-mini", gpus=gpus, stack=stack, **{**MINI, **over})["results"][0]


def test_expert_rows_by_hand():
    assert stack_time.expert_rows(4096.0, 256, 8) == pytest.approx(128.0, rel=1e-12)
    # one token: k copies over the k experts it touches, one row each
    assert stack_time.expert_rows(1.0, 256, 8) == pytest.approx(1.0, rel=1e-12)
    # 8 tokens, E = 4, k = 2: d = 4 (1 - (1/2)^8) = 3.984375; rows = 16 / d
    assert stack_time.expert_rows(8.0, 4, 2) == pytest.approx(16 / 3.984375, rel=1e-12)


def test_a_pass_without_tokens_gives_each_expert_one_row():
    # T = 0 touches no expert (d = 0): T k / d is 0 / 0, so the rows are the curve's floor, one row,
    # never NaN (a NaN there would make the pass's time NaN: 0 FLOPs / (peak x NaN)), whatever else
    # the batch holds
    rows = stack_time.expert_rows(np.array([0.0, 0.0, 0.0, 4096.0, 0.0]), 256, 8)
    assert rows.tolist() == pytest.approx([1.0, 1.0, 1.0, 128.0, 1.0], rel=1e-12)
    assert float(stack_time.expert_rows(0.0, 256, 8)) == 1.0


def test_every_kind_has_the_shape_of_its_rows_and_the_gpus_rows_scale():
    # one pass's rows on two GPUs (rows scales 1 and 2): a factor per GPU for every kind of op, as
    # the GEMM curve gives, so callers can index the factors of all kinds the same way
    stack = neutral(gemm_efficiency=CURVE, attention_efficiency=0.9)
    scales = np.array([1.0, 2.0])
    assert stack_time.compute_factor("linear", 128.0, stack, scales).tolist() == pytest.approx([0.6, 0.4])
    assert stack_time.compute_factor("attention", 128.0, stack, scales).tolist() == [0.9, 0.9]
    assert stack_time.compute_factor("other", 128.0, stack, scales).tolist() == [1.0, 1.0]
    assert stack_time.compute_factor("attention", np.array([[64.0], [256.0]]), stack, scales).shape == (2, 2)


def test_moe_experts_read_the_curve_at_the_rows_each_expert_receives():
    bare = op(mini("none"), "experts")
    routed = op(mini(neutral(gemm_efficiency=CURVE)), "experts")
    pooled = op(mini(neutral(gemm_efficiency=CURVE, expert_rows="pass", sources={"expert_rows": "t"})), "experts")
    # compute-bound on an H20 (AI ~128 FLOP/B against an achievable ridge of 82) in all three: the experts'
    # time is FLOPs / (peak x efficiency x factor) + 19 layers x 2 kernels (the fused block's two grouped
    # GEMMs) x 3 us x 4 passes
    compute = bare["flops"] / (H20_PEAK * H20_GEMM_EFF)
    overhead = 19 * 2 * H20_OVERHEAD_S * 4
    assert bare["time_s"] == pytest.approx(compute + overhead, rel=1e-9)
    assert routed["time_s"] == pytest.approx(compute / 0.6 + overhead, rel=1e-9)  # 128 rows per expert
    assert pooled["time_s"] == pytest.approx(compute / 0.8 + overhead, rel=1e-9)  # the pass's 4096 rows


def test_dense_ops_of_an_moe_pass_keep_the_passs_rows():
    routed = mini(neutral(gemm_efficiency=CURVE))
    pooled = mini(neutral(gemm_efficiency=CURVE, expert_rows="pass", sources={"expert_rows": "t"}))
    for name in ("qkv_proj", "shared_experts", "lm_head"):
        assert op(routed, name)["time_s"] == pytest.approx(op(pooled, name)["time_s"], rel=1e-12)


def test_gpu_rows_scale_on_the_gemm_curve(tmp_path):
    # an H20 whose GEMMs need twice the curve's rows: each expert's 128 rows read the curve at 64
    # (0.4); the dense GEMMs' 4096 rows at 2048 (0.8, flat beyond 256 rows)
    text = (api_hardware_text("nvidia-h20.yaml")
            .replace("name: H20", "name: H20 slow").replace("aliases: [", "aliases: [h20-slow]  # was: [")
            .replace("  overhead_us_per_op: 3", "  gemm_rows_scale: 2\n  overhead_us_per_op: 3", 1))
    (tmp_path / "h20-slow.yaml").write_text(text)
    r = api.analyze("inclusionAI/LLaDA2.0-mini", gpus="h20-slow", stack=neutral(gemm_efficiency=CURVE),
                    hardware=[str(tmp_path)], **MINI)["results"][0]
    bare = op(mini("none"), "experts")
    compute = bare["flops"] / (H20_PEAK * H20_GEMM_EFF)
    assert op(r, "experts")["time_s"] == pytest.approx(compute / 0.4 + 19 * 2 * H20_OVERHEAD_S * 4, rel=1e-9)
    assert op(r, "qkv_proj")["time_s"] == pytest.approx(op(mini(neutral(gemm_efficiency=CURVE)), "qkv_proj")["time_s"])
    curve = neutral(gemm_efficiency=CURVE)
    assert stack_time.gemm_factor(128, curve, 2.0) == pytest.approx(0.4)
    assert stack_time.gemm_factor(4096, curve, 2.0) == pytest.approx(0.8)  # large GEMMs: the curve's top
    assert stack_time.gemm_factor(128, curve, 0.5) == pytest.approx(0.8)  # 256 rows' worth


def test_a_flat_curve_is_the_same_on_every_gpu():
    flat = neutral(gemm_efficiency=dict(rows=[1], efficiency=[0.7]))
    assert stack_time.gemm_factor(512, flat, 2.36) == pytest.approx(0.7)


# --- the GEMM depth term ----------------------------------------------------------------------
# LLaDA2.0-mini: d_model 2048, 16 heads x 128, one dense layer of FFN width 5120, experts 512 wide
# (one shared expert, 512 wide), gated (three matrices per FFN), vocabulary 157,184.
DEPTH = dict(rows=[1], efficiency=[1.0], reference_depth=4096, depth_overhead=0.5)


def deep():
    return neutral(gemm_efficiency=DEPTH, sources={"depth_overhead": "test"})


def test_gemm_depths_of_each_op_by_hand():
    from dlmcost.engine.cost import gemm_depths
    from dlmcost.inputs.models import load_bundled

    got = gemm_depths(load_bundled("inclusionAI/LLaDA2.0-mini"), tp=4.0, ep=2.0)
    depths = {name: [float(k) for _, k in matrices] for name, matrices in got.items()}
    assert depths == {
        "qkv_proj": [2048], "o_proj": [16 * 128 / 4],  # the GPU's 4 heads
        "mlp": [2048, 5120 / 4],  # gate and up read d_model; down its quarter of the width
        "router": [2048],
        "experts": [2048, 512 * 2 / 4],  # each expert a tp/ep = 2-way slice: 256 of its 512 columns
        "shared_experts": [2048, 512 / 4],
        "lm_head": [2048],
    }
    weights = {name: [float(w) for w, _ in matrices] for name, matrices in got.items()}
    assert weights["mlp"] == [2 * 2048 * 1280, 2048 * 1280]  # gate + up, down: the FLOPs split 2 : 1
    assert weights["experts"] == [2 * 2048 * 256, 2048 * 256]


def test_gemm_depths_of_mla_and_self_conditioning_by_hand():
    from dlmcost.engine.cost import gemm_depths
    from dlmcost.inputs.models import load_bundled

    # DeepSeek-V3 at TP 8: the down-projections read d_model 7168, Q's up-projection the 1536-wide
    # q latent; W_kvb reads the 512-wide latent, except W_UK when absorbed (the queries' 128
    # qk_nope columns); the 16 heads on a GPU give o_proj 16 x 128
    v3 = load_bundled("deepseek-ai/DeepSeek-V3")
    for absorbed, uk in ((True, 128), (False, 512)):
        got = gemm_depths(v3, tp=8.0, ep=1.0, mla_absorbed=absorbed)
        assert [float(k) for _, k in got["qkv_proj"]] == [7168, 1536]
        assert [float(k) for _, k in got["mla_kv_up"]] == [uk, 512]
        assert [float(k) for _, k in got["o_proj"]] == [16 * 128]
    # DiffusionGemma's self-conditioning: probabilities over the GPU's half of the 262,144-word
    # vocabulary times the embedding table
    gemma = gemm_depths(load_bundled("google/diffusiongemma-26B-A4B-it"), tp=2.0, ep=1.0)
    assert [float(k) for _, k in gemma["self_condition"]] == [262144 / 2]
    assert [float(k) for _, k in gemma["lm_head"]] == [2816]


def test_depth_factor_by_hand():
    # a GPU of 148 TF/s x 0.80 and 4.0 TB/s x 0.80: K0 = 0.5 x 37 = 18.5 FLOP/B. An expert's gate and up
    # (K = 2048, 2/3 of its FLOPs) and down (K = 512, 1/3) against the reference K = 4096: each
    # matrix's time x (1 + K0/K) / (1 + K0/4096)
    k0 = 0.5 * 148e12 * 0.80 / (4.0e12 * 0.80)
    assert stack_time.depth_k0(deep(), 148e12 * 0.80, 4.0e12 * 0.80) == pytest.approx(18.5)
    ref = 1 + k0 / 4096
    slowdown = (2 / 3) * (1 + k0 / 2048) / ref + (1 / 3) * (1 + k0 / 512) / ref
    matrices = [(2 * 2048 * 512, 2048), (2048 * 512, 512)]
    assert stack_time.depth_factor(matrices, deep(), k0) == pytest.approx(1 / slowdown, rel=1e-12)
    assert stack_time.depth_factor([(1.0, 4096)], deep(), k0) == pytest.approx(1.0)  # the reference
    assert stack_time.depth_factor([(1.0, 16384)], deep(), k0) > 1  # deeper: faster
    assert stack_time.depth_factor(matrices, neutral(), k0) == 1.0  # no depth term


def test_the_depth_table_of_the_docs_by_hand():
    """docs/stacks.md's H100 SXM bf16 row under the bundled stacks: K0 = 0.41 x 989.5 x 0.80 /
    (3.35 x 0.80) = 121.1 FLOP/B, and q(K) / q(4096) at five depths."""
    k0 = 0.41 * 989.5e12 * 0.80 / (3.35e12 * 0.80)
    sglang = load_stack("sglang")
    assert stack_time.depth_k0(sglang, 989.5e12 * 0.80, 3.35e12 * 0.80) == pytest.approx(k0, rel=1e-12)
    table = {512: 0.833, 1024: 0.921, 2048: 0.972, 4096: 1.0, 12288: 1.020}
    for depth, shown in table.items():
        assert round(float(stack_time.depth_factor([(1.0, depth)], sglang, k0)), 3) == shown


def test_an_ops_compute_time_follows_the_depth_of_its_matrices():
    """The experts of the batch-128 mdm pass, compute-bound on an H20: FLOPs / (peak x 0.80 x the
    depth factor by hand) + 19 kernels x 3 us x 4 passes; the LM head (K = d_model = 2048 alone)
    by its own factor."""
    with_depth = mini(deep())
    k0 = 0.5 * H20_PEAK * H20_GEMM_EFF / (H20_BANDWIDTH * H20_MEM_EFF)  # 41.1 FLOP/B
    ref = 1 + k0 / 4096
    experts = op(with_depth, "experts")
    slowdown = ((2 / 3) * (1 + k0 / 2048) + (1 / 3) * (1 + k0 / 512)) / ref
    compute = experts["flops"] / (H20_PEAK * H20_GEMM_EFF)
    assert experts["time_s"] == pytest.approx(compute * slowdown + 19 * 2 * H20_OVERHEAD_S * 4, rel=1e-9)
    shallow = op(mini(neutral()), "experts")
    assert experts["time_s"] > shallow["time_s"]
    # o_proj reads 16 x 128 = 2048 as well: same factor as qkv_proj's K = 2048
    for name in ("qkv_proj", "o_proj"):
        a, b = op(with_depth, name), op(mini(neutral()), name)  # 20 layers' kernels x 3 us x 4 passes
        assert (a["time_s"] - 20 * H20_OVERHEAD_S * 4) / (b["time_s"] - 20 * H20_OVERHEAD_S * 4) == \
            pytest.approx((1 + k0 / 2048) / ref, rel=1e-9)


def fused(depth_overhead=2.0, fp8_rate=0.5):
    return neutral(gemm_efficiency=DEPTH, fused_moe=dict(depth_overhead=depth_overhead, fp8_rate=fp8_rate),
                   sources={"depth_overhead": "test", "fused_moe": "test"})


@pytest.mark.parametrize("precision,peak,gemm_eff,rate", [("bf16", H20_PEAK, H20_GEMM_EFF, 1.0),
                                                          ("fp8", 296e12, 0.72, 0.5),
                                                          ("w8a16", H20_PEAK, H20_GEMM_EFF, 1.0)])
def test_the_fused_moe_kernel_has_its_own_depth_overhead_and_fp8_rate(precision, peak, gemm_eff, rate):
    """The experts of the batch-128 mdm pass, compute-bound on an H20, under a fused MoE kernel of depth
    overhead 2.0 (the curve's: 0.5) and fp8 rate 0.5: K0 = 2.0 x the achievable GEMM rate / the achievable
    bandwidth (4.0 TB/s x 0.36), each matrix's time x (1 + K0/K) / (1 + K0/4096), and at fp8 the time
    doubled; + 19 layers x 2 kernels x 3 us x 4 passes. The dense GEMMs keep the curve's overhead.
    w8a16 (8-bit weights, bf16 GEMMs at the bf16 peak) is not the fp8 kernel: no fp8 rate."""
    r = mini(fused(), precision=precision)
    k0 = 2.0 * peak * gemm_eff / (H20_BANDWIDTH * H20_MEM_EFF)  # bf16: 164.4 FLOP/B; fp8: 296.0
    ref = 1 + k0 / 4096
    slowdown = ((2 / 3) * (1 + k0 / 2048) + (1 / 3) * (1 + k0 / 512)) / ref
    experts = op(r, "experts")
    compute = experts["flops"] / (peak * gemm_eff)
    assert experts["time_s"] == pytest.approx(compute * slowdown / rate + 19 * 2 * H20_OVERHEAD_S * 4, rel=1e-9)
    for name in ("qkv_proj", "shared_experts"):
        assert op(r, name)["time_s"] == pytest.approx(op(mini(deep(), precision=precision), name)["time_s"], rel=1e-12)


def test_a_fused_moe_depth_overhead_applies_on_a_curve_without_one_of_its_own():
    """A curve that states the depth it was measured at (4096) but no depth term (depth_overhead 0:
    the dense GEMMs run on the curve as measured), under a fused MoE kernel of depth overhead 2.0:
    the experts still take the kernel's term, by hand as in the test above (bf16 on the H20,
    K0 = 2.0 x 148 TF/s x 0.80 / (4.0 TB/s x 0.36) = 164.4 FLOP/B, gate/up K = 2048 for 2/3 of the
    FLOPs, down K = 512 for 1/3), and the dense GEMMs none (their K0 is 0)."""
    curve = dict(rows=[1], efficiency=[1.0], reference_depth=4096)
    r = mini(neutral(gemm_efficiency=curve, fused_moe=dict(depth_overhead=2.0), sources={"fused_moe": "test"}))
    k0 = 2.0 * H20_PEAK * H20_GEMM_EFF / (H20_BANDWIDTH * H20_MEM_EFF)
    assert k0 == pytest.approx(164.44, abs=0.01)
    slowdown = ((2 / 3) * (1 + k0 / 2048) + (1 / 3) * (1 + k0 / 512)) / (1 + k0 / 4096)
    experts = op(r, "experts")
    compute = experts["flops"] / (H20_PEAK * H20_GEMM_EFF)
    assert experts["time_s"] == pytest.approx(compute * slowdown + 19 * 2 * H20_OVERHEAD_S * 4, rel=1e-9)
    assert op(r, "qkv_proj")["time_s"] == pytest.approx(op(mini(neutral()), "qkv_proj")["time_s"], rel=1e-12)


def test_the_bundled_fused_moe_numbers_of_the_docs_by_hand():
    """docs/stacks.md's DeepSeek-V3 example: TP8 on an H200 at fp8 under vllm, K0 = 4.2 x 1979 x 0.72 x 0.67 /
    (4.8 x 0.80) = 1,044 FLOP/B; gate and up (K = 7168, 2/3 of the FLOPs) and down (K = 2048 / 8 = 256, 1/3);
    256 rows an expert read at 1,024 (the H200's rows scale, 0.25): 0.80 on the curve, x 0.68 at fp8."""
    vllm = load_stack("vllm")
    rate, bandwidth = 1979e12 * 0.72 * 0.67, 4.8e12 * 0.80
    k0 = 4.2 * rate / bandwidth
    assert k0 == pytest.approx(1044.2, abs=0.1)
    assert stack_time.depth_k0(vllm, rate, bandwidth, stack_time.op_depth_overhead("experts", vllm)) == pytest.approx(k0)
    assert stack_time.op_depth_overhead("o_proj", vllm) == 0.41
    q = lambda k: k / (k + k0)  # noqa: E731
    depth = 1 / ((2 / 3) * q(4096) / q(7168) + (1 / 3) * q(4096) / q(256))
    assert round(depth, 3) == 0.511
    matrices = [(2 * 7168 * 256, 7168), (7168 * 256, 256)]
    assert stack_time.depth_factor(matrices, vllm, k0) == pytest.approx(depth, rel=1e-12)
    assert stack_time.expert_factor(256.0, vllm, 0.25, 1.0) == pytest.approx(0.80 * 0.68, rel=1e-12)
    assert stack_time.expert_factor(256.0, vllm, 0.25, 0.0) == pytest.approx(0.80, rel=1e-12)  # bf16 GEMMs
    # 722 GFLOP a layer at 954.7 TF/s x 0.80 x 0.511 x 0.68: 2.72 ms
    flops = 2 * 8192 * 8 * 3 * 7168 * 2048 / 8
    assert flops / (rate * 0.80 * depth * 0.68) == pytest.approx(2.72e-3, abs=0.005e-3)
    sglang = load_stack("sglang-dllm").fused_moe
    assert (sglang.depth_overhead, sglang.fp8_rate) == (4.1, 0.83)


def test_a_fused_moe_kernel_needs_a_source_and_a_reference_depth():
    with pytest.raises(StackFileError, match="fused_moe"):
        neutral(gemm_efficiency=DEPTH, fused_moe=dict(depth_overhead=2.0), sources={"depth_overhead": "t"})
    with pytest.raises(StackFileError, match="reference_depth"):
        neutral(fused_moe=dict(depth_overhead=2.0), sources={"fused_moe": "t"})
    assert fused(fp8_rate=1.0).fused_moe.fp8_rate == 1.0


def test_a_depth_term_needs_its_reference_and_a_source():
    with pytest.raises(StackFileError, match="reference_depth"):
        neutral(gemm_efficiency=dict(rows=[1], efficiency=[1.0], depth_overhead=0.4), sources={"depth_overhead": "t"})
    with pytest.raises(StackFileError, match="depth_overhead"):
        neutral(gemm_efficiency=DEPTH)
    assert neutral(gemm_efficiency=dict(rows=[1], efficiency=[1.0], reference_depth=4096)).gemm_efficiency.depth_overhead == 0


def api_hardware_text(name):
    from dlmcost.inputs.hardware import bundled_hardware_dir
    return (bundled_hardware_dir() / name).read_text(encoding="utf-8")


def test_step_overhead_grows_with_the_batch():
    s = neutral(host=dict(fixed_us_per_forward=1000, us_per_sequence=20), sources={"us_per_sequence": "t"})
    assert stack_time.step_overhead(1, s) == pytest.approx(1020e-6)
    assert stack_time.step_overhead(64, s) == pytest.approx(1000e-6 + 64 * 20e-6)
    # in the engine: per_forward = (1000 + 20 B) us per pass; 4 passes at batch 128
    r = mini(s)
    assert op(r, "per_forward")["time_s"] == pytest.approx(4 * (1000 + 20 * 128) * 1e-6, rel=1e-12)


def test_optional_fields_need_a_source_only_when_set():
    with pytest.raises(StackFileError, match="us_per_sequence"):
        neutral(host=dict(us_per_sequence=5))
    with pytest.raises(StackFileError, match="max_running_requests"):
        neutral(max_running_requests=1)
    with pytest.raises(StackFileError, match="expert_rows"):
        neutral(expert_rows="pass")
    assert neutral().max_running_requests is None  # no limit of its own


@pytest.mark.parametrize("name", ["sglang-dllm", "vllm-dllm", "jax-tpu"])
def test_serving_stacks_are_bundled_dated_and_versioned(name):
    assert name in bundled_stack_names()
    s = load_stack(name)
    assert s.version and s.as_of
    assert s.max_running_requests is None or s.max_running_requests >= 1


def test_sglang_dllm_runs_as_deployed_and_syncs_every_step():
    s = load_stack("sglang-dllm")
    assert s.max_running_requests == 128  # as published deployments under load launch it (the engine's own: 1)
    assert s.release == "first-done"  # FDFO, the throughput recipes' scheduler
    assert not s.host.overlaps_gpu or s.host.fixed_us_per_forward >= 4100  # PR #40756: ~4.1 ms exposed per step
    assert math.isclose(stack_time.step_overhead(0, s), s.host.fixed_us_per_forward * 1e-6)
    # each running request adds its host work, linearly (jax-tpu's grows with the square of the batch)
    assert math.isclose(stack_time.step_overhead(10, s) - stack_time.step_overhead(0, s), 10 * s.host.us_per_sequence * 1e-6)
    t = load_stack("jax-tpu")
    assert math.isclose(stack_time.step_overhead(32, t), (t.host.fixed_us_per_forward + 32 ** 2 * t.host.us_per_sequence_squared)
                        * 1e-6)


def test_logits_are_a_term_of_admission():
    """dLLM-Serve (arXiv 2512.17077): a step's logits, batch x positions x vocabulary, limit
    admission. mdm at Lp 256, Lg 128 holds logits for 384 positions of LLaDA's 126,464-token
    vocabulary: 6 bytes each under sglang (bf16 + fp32), 18 under hf-eager (+ fp64 copy and
    softmax). max_batch = floor((0.9 x 80 GiB - weights) / per-sequence bytes) (methodology F8)."""
    kw = dict(scheme="mdm", prompt=256, gen=128, steps=128)
    mem = {s: api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", stack=s, **kw)["results"][0]["memory"]
           for s in ("sglang", "hf-eager")}
    assert mem["hf-eager"]["per_sequence_bytes"] - mem["sglang"]["per_sequence_bytes"] == 384 * 126_464 * 12
    usable = 0.9 * 80 * 2**30
    for m in mem.values():
        assert m["max_batch"] == math.floor((usable - m["weights_bytes"]) / m["per_sequence_bytes"])
    # the logits are most of a sequence's bytes here: without them the batch would be ~9x larger
    assert mem["sglang"]["logits_bytes"] > 0.8 * mem["sglang"]["per_sequence_bytes"]


def test_early_eos_only_where_the_scheme_can_stop():
    """dInfer's early_stop ends answers at 219 of 256 tokens. block (32-token blocks, stops after
    the block holding EOS): 7 blocks = 224 positions, 224 of the 256 steps, plus the prompt's
    prefill = 225 passes. mdm, whose every step spans the canvas, runs all 256 steps."""
    run = lambda **kw: api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", prompt=128, gen=256, steps=256,  # noqa: E731
                                   answer_tokens=219, **kw)["results"][0]
    assert run(scheme="block", block=32)["nfe"] == 1 + 224
    assert run(scheme="mdm")["nfe"] == 256


# --- the attention keys term ------------------------------------------------------------------
# attention at attention_efficiency x k / (k + k0) for k keys per query: its compute time x (1 + k0 / k)


def keyed(k0):
    return neutral(attention_keys_overhead=k0, sources={"attention_keys_overhead": "test"})


def test_keys_term_by_hand():
    stack = keyed(1000.0)
    # 8e6 FLOPs at 2e3 per key: k = 4000 keys per query, 1 + 1000 / 4000
    assert float(stack_time.keys_term(8e6, 2e3, stack)) == pytest.approx(1.25, rel=1e-12)
    assert float(stack_time.keys_term(0.0, 0.0, stack)) == 1.0  # an op without FLOPs: no term, no NaN
    assert float(stack_time.keys_term(8e6, 2e3, neutral())) == 1.0  # no overhead: no term


def test_a_bidirectional_canvas_pays_k0_keys_per_query_by_hand():
    # LLaDA-8B (32 layers, 32 heads x 128) over one 2048 + 2048 canvas pass on an H20: every query
    # reads k = 4096 keys, FLOPs 4 x 32 layers x 4096 queries x 4096 keys x 32 x 128, compute-bound
    # (AI in the thousands against a ridge of 37); one kernel per layer
    flops = 4 * 32 * 4096 * 4096 * 32 * 128
    work = dict(scheme="mdm", prompt=2048, gen=2048, steps=1, block=2048)
    got = op(api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h20", stack=keyed(1000.0), **work)["results"][0],
             "attention")
    assert got["flops"] == flops
    assert got["time_s"] == pytest.approx(flops * (1 + 1000 / 4096) / (H20_PEAK * H20_GEMM_EFF) + 32 * H20_OVERHEAD_S,
                                          rel=1e-9)


def test_a_causal_prefill_pays_k0_keys_for_each_of_its_queries_by_hand():
    # Llama-3-8B (32 layers, 32 query heads x 128), a 2048-token prompt and one decode step on an
    # H20: the keys term adds k0 x the prefill's FLOPs per key, 4 x 32 x 2048 x 32 x 128, at the
    # attention rate, whatever its k-bar; the decode step's attention stays memory-bound (AI about
    # 4 x 1.5 against a ridge of 37), so it adds nothing there
    per_key = 4 * 32 * 2048 * 32 * 128
    work = dict(scheme="ar", prompt=2048, gen=1)
    plain, keyed_ = (op(api.analyze("meta-llama/Meta-Llama-3-8B", gpus="h20", stack=s, **work)["results"][0],
                        "attention")["time_s"] for s in (neutral(), keyed(500.0)))
    assert keyed_ - plain == pytest.approx(500 * per_key / (H20_PEAK * H20_GEMM_EFF), rel=1e-9)
