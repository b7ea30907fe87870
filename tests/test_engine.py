"""Schedules, exact family sums, the time model, memory, knees and monotonicity."""

import functools

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine import frames
from dlmcost.engine.evaluation import _closed_form, _pass_by_pass, closed_form_rows, op_names
from dlmcost.inputs.models import load_bundled
from dlmcost.engine.schemes import REGISTRY
from dlmcost.engine.sums import sum_max_ends

LLADA = "GSAI-ML/LLaDA-8B-Instruct"


def run(gpu="h100", **w):
    return api.analyze(LLADA, gpu, **w)["results"][0]


def test_sum_max_ends_matches_brute_force():
    """sum_j max(a(j), b(j)) from the values at the first and last pass, against adding up every
    j: random real terms (the order flips inside the family or not), then integer terms, so that
    some differences hit zero exactly at an index or at an end, with slopes of 0, n = 1, and the
    host-wait form (b = 0 given as scalars)."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        a0, da, b0, db = rng.normal(size=4) * 10
        n = int(rng.integers(1, 40))
        brute = sum(max(a0 + da * j, b0 + db * j) for j in range(n))
        got = sum_max_ends(a0, a0 + da * (n - 1), b0, b0 + db * (n - 1), n)
        assert np.ndim(got) == 0 and got == pytest.approx(brute, rel=1e-12)  # scalars in, a scalar out
    a0, b0 = (rng.integers(-20, 21, (3, 400)).astype(float) for _ in range(2))
    da, db = (rng.integers(-4, 5, (3, 400)).astype(float) for _ in range(2))
    n = rng.integers(1, 12, 400).astype(float)
    brute = np.array([[sum(max(a0[i, k] + da[i, k] * j, b0[i, k] + db[i, k] * j) for j in range(int(n[k])))
                       for k in range(400)] for i in range(3)])
    assert np.array_equal(sum_max_ends(a0, a0 + da * (n - 1), b0, b0 + db * (n - 1), n), brute)
    d0, dd = a0[0], da[0]
    brute = np.array([sum(max(d0[k] + dd[k] * j, 0.0) for j in range(int(n[k]))) for k in range(400)])
    assert np.array_equal(sum_max_ends(d0, d0 + dd * (n - 1), 0.0, 0.0, n), brute)


@pytest.mark.parametrize("scheme,nfe", [
    ("ar", 1 + 127), ("mdm", 64), ("prefix-cache", 64), ("dual-cache", 64), ("block", 1 + 64)])
def test_nfe_per_scheme(scheme, nfe):
    r = run(scheme=scheme, prompt=100, gen=128, steps=64, block=32)
    assert r["nfe"] == nfe


def test_block_store_pass_adds_one_forward_per_block():
    r = run(scheme="block", prompt=100, gen=128, steps=64, block=32, store_pass=True)
    assert r["nfe"] == 1 + 64 + 4


def test_cfg_doubles_the_batch():
    one, cfg = run(gen=64, steps=64), run(gen=64, steps=64, cfg=True)
    assert cfg["flops"] == pytest.approx(2 * one["flops"], rel=1e-9)


def test_mdm_flops_per_token_and_the_2N_per_token_simplification():
    """The back-of-envelope S*2*N/Lg leaves out the sequence length every full pass processes."""
    m = load_bundled(LLADA)
    lp, lg, S = 64, 128, 32
    r = run(scheme="mdm", prompt=lp, gen=lg, steps=S)
    linear_per_token = r["flops_breakdown"]["linear"] / lg
    assert linear_per_token == pytest.approx(S * 2 * m.params_nonembedding * (lp + lg) / lg, rel=1e-3)
    simplified = S * 2 * m.params_nonembedding / lg
    assert linear_per_token / simplified == pytest.approx(lp + lg, rel=1e-3)


def _h100_rates(gpu: str = "h100", precision: str = "bf16"):
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.precision import get_precision
    from dlmcost.inputs.profiles import Profile
    from dlmcost.engine.roofline import gpu_rates

    return gpu_rates(HardwareDB.load().get(gpu), get_precision(precision), Profile("realistic"))


def _one_config_grid(m, **workload):
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.precision import get_precision
    from dlmcost.inputs.profiles import Profile
    from dlmcost.engine.roofline import gpu_rates

    w = api.workload_for(m, **workload)
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    return w, frames.build_grid(frames.workload_columns(w), [rates], np.array([0]))


@pytest.mark.parametrize("model,scheme,block", [
    ("Dream-org/Dream-v0-Instruct-7B", "prefix-cache", 16), ("Dream-org/Dream-v0-Instruct-7B", "block", 8),
    ("Dream-org/Dream-v0-Instruct-7B", "ar", 128), ("Dream-org/Dream-v0-Instruct-7B", "dual-cache", 32),
    ("Dream-org/Dream-v0-Instruct-7B", "multi-block", 16), ("inclusionAI/LLaDA2.0-mini", "block", 8),
    ("deepseek-ai/DeepSeek-V3", "prefix-cache", 16)])
def test_closed_form_sums_equal_pass_by_pass(model, scheme, block):
    """Every family the engine sums in closed form equals the sum of its passes one by one."""
    m = load_bundled(model)
    w, grid = _one_config_grid(m, scheme=scheme, prompt=50, gen=128, steps=64 if scheme != "ar" else None,
                               block=block, tp=2 if m.mla else 1, mla_form="absorbed" if m.mla else "auto")
    for fam in REGISTRY[scheme].passes(grid.knobs):
        if fam.count[0] <= 0:
            continue
        if not closed_form_rows(m, grid, fam)[0]:
            continue
        closed, explicit = _closed_form(m, grid, fam, op_names([m])), _pass_by_pass(m, grid, fam, op_names([m]))
        assert closed.ops == pytest.approx(explicit.ops, rel=1e-9, abs=1e-18), fam.name
        assert closed.bound_s == pytest.approx(explicit.bound_s, rel=1e-9), fam.name


def test_moe_prefix_cache_is_not_summed_in_closed_form():
    """Expected distinct experts are not affine in q: the closed form would be wrong, and the
    engine does not use it."""
    m = load_bundled("inclusionAI/LLaDA2.0-mini")
    w, grid = _one_config_grid(m, scheme="prefix-cache", prompt=16, gen=64, steps=16, block=8)
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    assert not closed_form_rows(m, grid, step)[0]
    closed, explicit = _closed_form(m, grid, step, op_names([m])), _pass_by_pass(m, grid, step, op_names([m]))
    assert abs(closed.bytes[0] / explicit.bytes[0] - 1) > 1e-3  # the closed form is measurably off here
    r = api.analyze(m, "h100", scheme="prefix-cache", prompt=16, gen=64, steps=16, block=8)["results"][0]
    got = [p for p in r["passes"] if p["name"] == "step"][0]
    assert got["bytes"] * got["count"] == pytest.approx(explicit.bytes[0], rel=1e-12)


@functools.lru_cache(maxsize=None)
def _chunked_case(stack: str | None, ep: int, gpu: str = "h100", precision: str = "bf16"):
    """The grid of four prefix-cache configurations of an MoE model under `stack` and `ep`, its step
    family, the op names, and the reference: each pass of each configuration costed on its own
    and added up (the same for every path and chunk size of the test below, so built once a case)."""
    from dlmcost.engine import evaluation as engine
    from dlmcost.inputs.stacks import load_stack

    m = load_bundled("inclusionAI/LLaDA2.0-mini")
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=16, block=8))
    cols |= dict(gen=np.array([64.0, 32, 64, 16]), block=np.array([8.0, 16, 4, 16]), steps=np.array([16.0, 8, 32, 4]),
                 batch=np.array([1.0, 512, 2, 8]), prompt=np.array([16.0, 100, 0, 7]), tp=float(ep), ep=float(ep))
    grid = frames.build_grid(cols, [_h100_rates(gpu, precision)], np.zeros(4, int),
                          load_stack(stack) if stack else None)
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    names = op_names([m]) + (list(engine.STACK_OPS) if stack else [])
    reference = []
    for i in range(4):
        g, fam = grid.take([i]), step.take([i])
        passes = [engine.pass_cost(m, g, fam.at(float(j)), names) for j in range(int(fam.n[0]))]
        r = fam.r[0]
        values = r * sum(p.values[:, :, 0] for p in passes)
        time_s = r * sum(p.time_s[:, 0] for p in passes)
        bound = r * sum(max(p.bound_compute_s[0], p.bound_memory_s[0]) for p in passes)
        reference.append((values, time_s, bound, fam.n[0] * r))
    return m, grid, step, names, reference


@pytest.mark.parametrize("path,stack,ep", [("_pass_by_pass", None, 1), ("_pass_by_pass", "sglang", 1),
                                           ("_pass_by_pass", "hf-eager", 1),  # a host wait in some passes
                                           ("_touched_experts_pass_by_pass", None, 1), ("_touched_experts_pass_by_pass", "sglang", 1),
                                           ("_touched_experts_pass_by_pass", "hf-eager", 1), ("_pass_by_pass", None, 2)])
@pytest.mark.parametrize("chunk", [1, 3, 10, 1 << 15])  # 10: a chunk of two configurations, then an empty one
def test_pass_by_pass_in_chunks_equals_each_pass_added_up(monkeypatch, path, stack, ep, chunk):
    """The paths that evaluate passes one by one (every op, or on the bare roofline without expert
    parallelism the closed form corrected by each pass's experts touched) take a chunk of
    configurations at a time (a chunk of 1 pass puts every boundary inside a configuration's run):
    the sums equal each pass of each configuration costed on its own and added up."""
    from dlmcost.engine import evaluation as engine

    m, grid, step, names, reference = _chunked_case(stack, ep)
    assert (closed_form_rows(m, grid, step) == (step.n <= 1)).all()  # one block: a single shape
    assert engine.touched_experts_rows(m, grid, step, np.zeros(4, bool)).all() == (ep == 1)
    monkeypatch.setattr(engine, "PASS_CHUNK", chunk)
    got = getattr(engine, path)(m, grid, step, names)
    for i, (values, time_s, bound, count) in enumerate(reference):
        assert got.data[:-1, :, i] == pytest.approx(values, rel=1e-12, abs=1e-30)
        assert got.data[-1, :, i] == pytest.approx(time_s, rel=1e-12, abs=1e-30)
        assert got.bound_s[i] == pytest.approx(bound, rel=1e-12)
        assert got.count[i] == count


@pytest.mark.parametrize("stack", [None, "sglang"])
def test_the_touched_experts_path_takes_the_experts_own_streaming_rate(stack):
    """On an MI300X in fp8 the routed experts stream at their own measured rate (experts_streaming),
    not the dense GEMMs' (weight_streaming): the split path's gaps between a family's ends are read at
    it too, so its sums still equal each pass costed on its own and added up."""
    from dlmcost.engine import evaluation as engine
    from dlmcost.inputs.hardware import HardwareDB

    eff = HardwareDB.load().get("mi300x").efficiency
    assert eff.experts_rate("fp8") != eff.streaming("fp8")  # the case this tests
    m, grid, step, names, reference = _chunked_case(stack, 1, "mi300x", "fp8")
    got = engine._touched_experts_pass_by_pass(m, grid, step, names)
    for i, (values, time_s, bound, count) in enumerate(reference):
        assert got.data[-1, :, i] == pytest.approx(time_s, rel=1e-12, abs=1e-30)


def test_only_the_experts_go_pass_by_pass_exactly_where_nothing_else_bends():
    """The split path (closed form corrected pass by pass by the experts touched) is for an MoE
    model's bidirectional families with q + c fixed, no sliding window, no expert parallelism, on
    the bare roofline. Families by hand: q shrinking with c growing (the split), q shrinking over a
    fixed cache, a causal one, a single shape (closed form anyway)."""
    from dlmcost.engine import evaluation as engine
    from dlmcost.engine.schemes.base import family
    from dlmcost.inputs.stacks import load_stack

    def rows(model_id, stack=None, ep=1):
        m = load_bundled(model_id)
        cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=16, block=16))
        cols |= dict(batch=np.array([1.0, 2, 3, 4]), tp=float(ep), ep=float(ep))
        grid = frames.build_grid(cols, [_h100_rates()], np.zeros(4, int), load_stack(stack) if stack else None)
        fam = family("f", grid.knobs, n=np.array([4.0, 4, 4, 1]), q=64.0, dq=np.array([-16.0, -16, -16, 0]),
                     c=0.0, dc=np.array([16.0, 0, 16, 0]), causal=np.array([False, False, True, False]))
        return engine.touched_experts_rows(m, grid, fam, engine.closed_form_rows(m, grid, fam)).tolist()

    assert rows("inclusionAI/LLaDA2.0-mini") == [True, False, False, False]
    assert rows("inclusionAI/LLaDA2.0-mini", stack="sglang") == [True, False, False, False]
    assert rows("inclusionAI/LLaDA2.0-mini", ep=2) == [False] * 4  # the busiest rank bends the FLOPs too
    assert rows(LLADA) == [False] * 4  # dense: the closed form covers the first family already
    assert rows("google/diffusiongemma-26B-A4B-it") == [False] * 4  # MoE, but sliding layers bend as q moves


@pytest.mark.parametrize("quantize_head", [False, True])
def test_a_quantised_head_runs_at_the_weights_gemm_rate(quantize_head):
    """fp8 weights: the LM head is bf16 and runs at the bf16 peak unless --quantize-head, which
    stores it at 1 byte a weight and runs it at the fp8 peak. One mdm pass of 64 x 64 positions
    on the ideal H100 (989.5 / 1979 TFLOP/s, 3.35 TB/s): compute-bound either way, so its time is
    2 B l d V / peak; the optimistic bound reads the same peak."""
    B, ell, d, V = 64, 64, 4096, 126464
    r = api.analyze(LLADA, "h100", efficiency="ideal", stack="none", scheme="mdm", prompt=0, gen=ell, steps=1,
                    block=ell, batch=B, precision="fp8", quantize_head=quantize_head)["results"][0]
    head = next(o for o in r["ops"] if o["name"] == "lm_head")
    flops = 2 * B * ell * d * V
    peak = 1979e12 if quantize_head else 989.5e12
    assert head["flops"] == flops
    assert head["bytes"] == pytest.approx(V * d * (1 if quantize_head else 2) + B * ell * (d + V) * 2, rel=1e-12)
    assert head["time_s"] == pytest.approx(flops / peak, rel=1e-12)
    bf16 = api.analyze(LLADA, "h100", efficiency="ideal", stack="none", scheme="mdm", prompt=0, gen=ell, steps=1,
                       block=ell, batch=B, precision="fp8", quantize_head=False)["results"][0]
    # the bound: every op's FLOPs over its peak; only the head's share moves with its peak
    moved = flops / 989.5e12 - flops / peak
    assert r["time_bound_s"] == pytest.approx(bf16["time_bound_s"] - moved, rel=1e-9)


def test_ideal_time_of_one_pass_by_hand():
    r = run(scheme="mdm", prompt=0, gen=64, steps=1, block=64, efficiency="ideal")
    h100_bf16, h100_fp32, bw = 989.5e12, 67e12, 3.35e12
    peak = {"linear": h100_bf16, "attention": h100_bf16, "lm_head": h100_bf16, "elementwise": h100_fp32}
    expected = 0.0
    for op in r["ops"]:
        kind = "elementwise" if op["name"] == "elementwise" else "linear"
        expected += max(op["flops"] / peak[kind], op["bytes"] / bw)
    assert r["time_s"] == pytest.approx(expected, rel=1e-9)
    assert r["time_bound_s"] <= r["time_s"] + 1e-15


def test_the_ideal_profile_reads_the_stacks_curve_at_the_passs_rows():
    """hardware/nvidia-h100-sxm.yaml: gemm bf16 0.80, fp8 0.72, sustained_compute 0.68,
    gemm_rows_scale 0.25. The realistic profile takes them (the fp8 GEMMs at fp8's 0.72, attention at
    bf16's, both x 0.68 under load); the ideal one runs every GEMM at its peak and reads a stack's
    GEMM curve at the pass's own rows (scale 1)."""
    from dlmcost.engine.roofline import gpu_rates
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.precision import get_precision
    from dlmcost.inputs.profiles import Profile

    h100 = HardwareDB.load().get("h100")
    real = gpu_rates(h100, get_precision("fp8"), Profile("realistic"))
    assert (real["eff_linear"], real["eff_attention"], real["gemm_rows_scale"]) == pytest.approx((0.72 * 0.68, 0.80 * 0.68, 0.25))
    ideal = gpu_rates(h100, get_precision("fp8"), Profile("ideal"))
    assert (ideal["eff_linear"], ideal["eff_attention"], ideal["gemm_rows_scale"]) == (1.0, 1.0, 1.0)


def test_link_time_by_hand():
    """bytes / (link x eff_link) + collectives x latency, on the GPUs in a column: one byte is still
    link time; no bytes is none; bytes on a part without a scale-up link (link 0) take forever,
    quietly (no numpy warning on stderr)."""
    import warnings
    from dlmcost.engine.roofline import Rates, link_time
    three = np.ones(3)
    rates = Rates(peak={}, eff={}, bandwidth=three, eff_mem=three, overhead_s=0 * three, ridge=three,
                  link_bandwidth=np.array([450e9, 450e9, 0.0]), eff_link=np.array([0.8, 0.8, 0.8]),
                  collective_latency_s=np.array([5e-6, 5e-6, 5e-6]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = link_time(np.array([1.0, 0.0, 1e6]), np.array([0.0, 2.0, 0.0]), rates)
    assert t[0] == pytest.approx(1 / 360e9, rel=1e-12)
    assert t[1] == pytest.approx(2 * 5e-6, rel=1e-12)
    assert t[2] == np.inf


def test_realistic_is_slower_than_ideal_and_says_so():
    a = api.analyze(LLADA, "h100", efficiency="realistic")
    b = api.analyze(LLADA, "h100", efficiency="ideal")
    assert a["efficiency_profile"] == "realistic" and b["efficiency_profile"] == "ideal"
    assert a["results"][0]["time_s"] > b["results"][0]["time_s"]


def test_more_steps_never_cheaper():
    times = [run(scheme="dual-cache", gen=128, block=32, steps=s)["time_s"] for s in (4, 8, 32, 64, 128)]
    assert times == sorted(times)


def test_larger_block_raises_block_step_intensity():
    m = load_bundled("JetLM/SDAR-4B-Chat")
    ais = []
    for b in (1, 4, 16, 64):
        r = api.analyze(m, "h100", scheme="block", prompt=256, gen=256, block=b, steps=256 // b)["results"][0]
        ais.append([p for p in r["passes"] if p["name"] == "step"][0]["arithmetic_intensity"])
    assert ais == sorted(ais) and ais[-1] > 10 * ais[0]


def test_ar_decode_is_memory_bound_and_mdm_compute_bound_on_h100():
    assert run(scheme="ar")["verdict"] == "memory-bound"
    assert run(scheme="mdm", prompt=512, gen=256, steps=256)["verdict"] == "compute-bound"


def test_knee_is_the_last_memory_bound_block():
    r = run(scheme="dual-cache", gen=128, block=32, steps=128)
    b = r["knee"]["block"]
    assert 1 < b < 10_000
    # the pass AI crosses the ridge between b and b+1 (checked through the same engine)
    m = load_bundled(LLADA)
    from dlmcost.engine.cost import PassInput, pass_ops
    ctx = r["knee"]["context_tokens"]

    def ai(q):
        a = lambda x: np.array([float(x)])  # noqa: E731
        p = PassInput(B=a(1), q=a(q), c=a(ctx), kv_write=a(0), logits=a(q), causal=np.array([False]),
                      wbytes=a(2), kvbytes=a(2), all_experts=np.array([False]))
        ops = pass_ops(m, p)
        return sum(o.flops[0] for o in ops) / sum(o.bytes[0] for o in ops)

    from test_printed_numbers import h100_achievable_ridge_bf16 as ridge  # by hand from the files

    assert ai(b) < ridge(b) and ai(b + 1) >= ridge(b + 1)  # batch 1: b rows


def test_memory_fits_and_max_batch_by_hand():
    m = load_bundled(LLADA)
    r = run(scheme="ar", prompt=1000, gen=1000, batch=1)
    mem = r["memory"]
    assert mem["weights_bytes"] == 2 * m.params_total
    assert mem["kv_cache_bytes"] == 2000 * 524288
    usable = 80 * 2**30 * 0.9  # docs: usable = capacity · 0.9 (F8)
    assert mem["max_batch"] == int((usable - 2 * m.params_total) // mem["per_sequence_bytes"])
    assert mem["fits"]
    huge = run(scheme="ar", prompt=100_000, gen=1000, batch=64)
    assert not huge["memory"]["fits"]


def test_unsupported_precision_is_a_row_not_a_crash():
    a = api.analyze(LLADA, "a100,h100", precision="fp8")
    assert a["results"][0]["supported"] is False and "fp8" in a["results"][0]["error"]
    assert a["results"][1]["supported"] is True


def test_sweep_dedupes_ignored_knobs_and_counts_impossible():
    res = api.sweep(LLADA, gpus="h100", blocks=[1, 8, 32, 48], gens=[128])
    rows = api.sweep_rows(res)
    by_scheme = {}
    for r in rows:
        by_scheme.setdefault(r["scheme"], []).append(r)
    assert len(by_scheme["mdm"]) == 1 and by_scheme["mdm"][0]["block"] is None
    assert len(by_scheme["ar"]) == 1
    assert len(by_scheme["dual-cache"]) == 3  # 48 does not divide 128
    assert res["skipped_impossible"] == 2  # prefix-cache and dual-cache with b = 48


def test_each_scheme_checks_only_its_own_rows_of_a_sweep():
    """A 256-token block cannot tile a 128-token generation (block diffusion), but draft-verify
    may draft 256 tokens at a time: the block row is skipped, the draft-verify row kept."""
    res = api.sweep(LLADA, gpus="h100", schemes=["block", "draft-verify"], blocks=[256], gens=[128])
    assert [r["scheme"] for r in api.sweep_rows(res)] == ["draft-verify"] and res["skipped_impossible"] == 1


def test_sweep_rows_equal_analyze():
    res = api.sweep(LLADA, gpus="h100", schemes=["dual-cache"], blocks=[32], gens=[256], steps=[64], prompts=[128])
    row = api.sweep_rows(res)[0]
    r = run(scheme="dual-cache", block=32, gen=256, steps=64, prompt=128)
    assert row["time_s"] == pytest.approx(r["time_s"], rel=1e-12)
    assert row["speedup_vs_ar"] == pytest.approx(r["speedup_vs_ar"], rel=1e-12)


def test_generation_beyond_trained_context_is_a_warning():
    a = api.analyze(LLADA, "h100", prompt=4000, gen=256, steps=256)
    assert any("trained context of 4096" in w for w in a["warnings"])
    assert a["results"][0]["time_s"] > 0
    assert api.analyze(LLADA, "h100", prompt=100, gen=128)["warnings"] == []


# --- the roofline's rules at their edges ----------------------------------------------------------


def test_verdict_is_memory_bound_strictly_below_the_ridge():
    """docs/methodology.md: memory-bound if AI < ridge, else compute-bound (the ridge itself is
    compute-bound: the two roofs meet there)."""
    from dlmcost.engine.roofline import verdict

    got = verdict(np.array([294.0, 295.0, 296.0]), 295.0)
    assert list(got) == ["memory-bound", "compute-bound", "compute-bound"]


@pytest.mark.parametrize("gemm, eff", [
    ({"fp8": 0.6, "bf16": 0.5}, 0.6),  # the precision's own figure
    ({"bf16": 0.5}, 0.5),  # none for fp8: the bf16 figure
    ({}, 1.0),  # none at all: the dense peak
])
def test_efficiency_file_gemm_fractions_and_their_fallbacks(tmp_path, gemm, eff):
    """An efficiency file's `gemm:` fractions per precision; a precision it does not list runs at
    its bf16 fraction, and a file without one at the peak. fp8 LLaDA-8B full canvases of 2,048
    tokens at batch 4: the MLP is compute-bound, so its time is FLOPs / (fp8 peak x fraction)."""
    import oracle
    import yaml

    path = tmp_path / "eff.yaml"
    path.write_text(yaml.safe_dump(dict(memory_bandwidth=0.8, gemm=gemm, overhead_us_per_op=0)))
    r = api.analyze(LLADA, "h100", efficiency=str(path), stack="none", scheme="mdm", prompt=1024, gen=1024,
                    block=1024, steps=2, batch=4, precision="fp8")["results"][0]
    mlp = next(o for o in r["ops"] if o["name"] == "mlp")
    g = oracle.gpu_rates("nvidia-h100-sxm.yaml", "fp8")
    peak = g["peak"]["linear"]
    assert mlp["bytes"] / (g["bandwidth"] * 0.8) < mlp["flops"] / peak  # compute-bound even at the peak
    assert mlp["time_s"] == pytest.approx(mlp["flops"] / (peak * eff), rel=1e-12)


def test_a_gpu_without_a_scale_up_link(recwarn):
    """examples/generic-cpu.yaml lists no scale-up link: at tp 1 nothing crosses it (no link time,
    no 0/0 on the way, no warning on the user's terminal) and tp 2 is reported unsupported."""
    from pathlib import Path

    cpu = str(Path(__file__).resolve().parents[1] / "examples" / "generic-cpu.yaml")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = api.analyze("examples/tiny-dlm.yaml", "generic-cpu", hardware=[cpu], stack="none", scheme="ar",
                        prompt=16, gen=4)["results"][0]
        swept = api.sweep("examples/tiny-dlm.yaml", gpus="generic-cpu", hardware=[cpu], tps=[1, 2], schemes=["ar"],
                          gens=[4], prompts=[16])
    assert np.isfinite(r["time_s"]) and r["time_s"] > 0
    assert next(o for o in r["ops"] if o["name"] == "tp_collectives")["time_s"] == 0.0
    assert [row.tp for row in swept.rows] == [1] and swept.skipped_unsupported == 1


def test_first_pass_and_evaluate_take_a_model_or_a_dict_of_roles():
    from dlmcost.engine import evaluation as engine

    m = load_bundled(LLADA)
    _, grid = _one_config_grid(m, scheme="block", prompt=32, gen=64, steps=16, block=16)
    ev = engine.evaluate(m, grid)
    assert ev.total.time_s.tolist() == engine.evaluate({"main": m}, grid).total.time_s.tolist()
    first, prompt = engine.first_pass(m, grid, ev)
    assert (first.tolist(), prompt.tolist()) == tuple(x.tolist() for x in engine.first_pass({"main": m}, grid, ev))
    assert 0 < first[0] < ev.total.time_s[0] and prompt.tolist() == [1.0]  # block: the prefill sees the prompt


def test_generation_verdict_is_memory_bound_from_half_the_time_on():
    # docs/methodology.md: `memory-bound` when the memory-bound share of the time is at least 0.5
    from dlmcost.engine.verdict import generation_verdict

    got = generation_verdict(np.array([0.0, 0.4999, 0.5, 1.0]))
    assert got.tolist() == ["compute-bound", "compute-bound", "memory-bound", "memory-bound"]


def test_passes_of_one_configuration_are_costed_in_bounded_memory(monkeypatch):
    """One configuration can have millions of passes to cost one by one (an MoE model's
    prefix-cache steps with one-token blocks, under a stack): they are taken PASS_CHUNK at a time,
    so memory does not grow with them. 20,000 passes at 256 a time stay under 4 MB of numpy
    allocations; the same in one chunk take over 10 MB (what the bound guards against)."""
    import tracemalloc

    from dlmcost.engine import evaluation as engine
    from dlmcost.inputs.stacks import load_stack

    m = load_bundled("inclusionAI/LLaDA2.0-mini")
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=0, gen=20000, steps=40000, block=1))
    grid = frames.build_grid(cols, [_h100_rates()], np.zeros(1, int), load_stack("sglang"))
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    names = op_names([m]) + list(engine.STACK_OPS)
    assert step.n[0] == 20000

    def peak_bytes(chunk):
        monkeypatch.setattr(engine, "PASS_CHUNK", chunk)
        tracemalloc.start()
        try:
            cost = engine._pass_by_pass(m, grid, step, names)
            return tracemalloc.get_traced_memory()[1], cost.time_s[0]
        finally:
            tracemalloc.stop()

    (small, t_small), (whole, t_whole) = peak_bytes(256), peak_bytes(1 << 20)
    assert small < 4e6 < 10e6 < whole
    assert t_small == pytest.approx(t_whole, rel=1e-12)


@pytest.mark.parametrize("stack", [None, "sglang"])
def test_a_family_of_fixed_q_with_moving_logits_is_summed_whole(stack):
    """Only a family whose q and logits are both fixed costs its last pass from the ops that read
    the cache alone; one whose logits move (q fixed, the LM head over 32, 24, 16 then 8 positions,
    a family by hand) must cost the head at each end too. Its closed form (two configurations,
    the second repeated 3 times) equals every pass costed on its own and added up."""
    from dlmcost.engine import evaluation as engine
    from dlmcost.engine.schemes.base import family
    from dlmcost.inputs.stacks import load_stack

    m = load_bundled(LLADA)
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=16, block=16))
    cols |= dict(batch=np.array([1.0, 8.0]))
    grid = frames.build_grid(cols, [_h100_rates()], np.zeros(2, int), load_stack(stack) if stack else None)
    fam = family("f", grid.knobs, n=4.0, r=np.array([1.0, 3.0]), q=32.0, c=16.0, dc=32.0, logits=32.0, dlogits=-8.0)
    names = op_names([m]) + (list(engine.STACK_OPS) if stack else [])
    assert closed_form_rows(m, grid, fam).all()
    got = _closed_form(m, grid, fam, names)
    for i in range(2):
        g, f = grid.take([i]), fam.take([i])
        passes = [engine.pass_cost(m, g, f.at(float(j)), names) for j in range(4)]
        r = f.r[0]
        assert got.data[:-1, :, i] == pytest.approx(r * sum(p.values[:, :, 0] for p in passes), rel=1e-12, abs=1e-30)
        assert got.data[-1, :, i] == pytest.approx(r * sum(p.time_s[:, 0] for p in passes), rel=1e-12, abs=1e-30)
        assert got.bound_s[i] == pytest.approx(r * sum(max(p.bound_compute_s[0], p.bound_memory_s[0]) for p in passes),
                                               rel=1e-12)


def test_a_grid_mixing_quantised_and_bf16_heads_moves_only_the_head():
    """--quantize-head changes the LM head alone, per configuration: one grid of two mdm passes of
    8 x 1024 positions with fp8 weights on the ideal H100, the head quantised in the first only.
    Attention is compute-bound at its own (bf16) peak in both, 989.5 TFLOP/s, not the fp8 GEMM
    peak the quantised head takes (1979); every op but the head and the elementwise ops (which read
    the embedding's rows, quantised with the head) costs the same in both; the head runs at 1979
    and 989.5 TFLOP/s."""
    from dlmcost.engine import evaluation as engine
    from dlmcost.engine.evaluation import METRICS
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.precision import get_precision
    from dlmcost.inputs.profiles import Profile
    from dlmcost.engine.roofline import gpu_rates

    m = load_bundled(LLADA)
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("fp8"), Profile("ideal"))
    w = [api.workload_for(m, scheme="mdm", prompt=0, gen=1024, steps=1, block=1024, batch=8, precision="fp8",
                          quantize_head=q) for q in (True, False)]
    ev = engine.evaluate(m, frames.workloads_grid(w, [rates, rates]))
    names, flops, time_s = ev.op_names, METRICS.index("flops"), METRICS.index("time_s")
    quantised, plain = ev.ops(0), ev.ops(1)
    head, attention = names.index("lm_head"), names.index("attention")
    others = [k for k, name in enumerate(names) if name not in ("lm_head", "elementwise")]  # (the embedding's rows too)
    assert quantised[others].tolist() == plain[others].tolist()
    assert plain[attention, time_s] == pytest.approx(plain[attention, flops] / 989.5e12, rel=1e-12)
    assert quantised[head, time_s] == pytest.approx(quantised[head, flops] / 1979e12, rel=1e-12)
    assert plain[head, time_s] == pytest.approx(plain[head, flops] / 989.5e12, rel=1e-12)
