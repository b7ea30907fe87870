"""The engine under a software stack (`--stack`), against hand-computed and brute-force values."""

import json
import os

import pytest

from dlmcost import api
from dlmcost.cli import main
from dlmcost.inputs.stacks import validate_stack

SOURCES = {k: "test" for k in ("host", "fixed", "gemm_efficiency", "attention_efficiency",
                                "elementwise_bytes_factor", "sampler_logits_bytes")}
# hardware/nvidia-h100-sxm.yaml: the GEMM efficiency is gemm (0.80) x sustained_compute (0.68)
H100_PEAK, H100_GEMM_EFF, H100_BW, H100_MEM_EFF = 989.5e12, 0.80 * 0.68, 3.35e12, 0.80
H100_ROWS_SCALE = 0.25  # the same file's gemm_rows_scale: a stack's curve is read at M / 0.25 on an H100


def neutral(**over):
    """A stack that changes nothing: the bare roofline."""
    host = dict(us_per_layer=0, overlaps_gpu=True, fixed_us_per_forward=0)
    host.update(over.pop("host", {}))
    data = dict(name="t", host=host, gemm_efficiency=dict(rows=[1], efficiency=[1.0]), attention_efficiency=1.0,
                elementwise_bytes_factor=1.0, sampler_logits_bytes=0.0, sources=SOURCES)
    data.update(over)
    return validate_stack(data)


WORKLOADS = [dict(scheme="ar", prompt=256, gen=64), dict(scheme="mdm", prompt=256, gen=256, steps=64),
             dict(scheme="block", prompt=256, gen=256, block=32, steps=64),
             dict(scheme="prefix-cache", prompt=256, gen=256, block=32, steps=64)]


def run(stack, **wl):
    return api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", stack=stack, **wl)["results"][0]


def op(result, name):
    return next(o for o in result["ops"] if o["name"] == name)


@pytest.mark.parametrize("wl", WORKLOADS)
def test_neutral_stack_is_the_bare_roofline(wl):
    assert run(neutral(), **wl)["time_s"] == pytest.approx(run("none", **wl)["time_s"], rel=1e-12)


@pytest.mark.parametrize("wl", WORKLOADS)
def test_fixed_cost_per_forward(wl):
    base, r = run("none", **wl), run(neutral(host=dict(fixed_us_per_forward=500)), **wl)
    assert r["time_s"] == pytest.approx(base["time_s"] + base["nfe"] * 500e-6, rel=1e-12)
    assert op(r, "per_forward")["time_s"] == pytest.approx(base["nfe"] * 500e-6)


def test_host_bound_passes_take_the_host_time():
    # 10 ms per layer x 32 layers = 0.32 s per pass, far above the GPU time of any pass here
    r = run(neutral(host=dict(us_per_layer=10_000, fixed_us_per_forward=100)), **WORKLOADS[0])
    assert r["time_s"] == pytest.approx(r["nfe"] * (32 * 10e-3 + 100e-6), rel=1e-12)
    serial = run(neutral(host=dict(us_per_layer=10_000, overlaps_gpu=False)), **WORKLOADS[0])
    assert serial["time_s"] == pytest.approx(run("none", **WORKLOADS[0])["time_s"] + r["nfe"] * 0.32, rel=1e-12)


def test_host_wait_summed_in_closed_form_matches_pass_by_pass():
    """AR decode at batch 64: each step reads more K/V, so its GPU time rises through the host
    time mid-generation. Brute force: a one-token answer is the prefill alone (it samples that
    token); step j's GPU time = T(gen=j+2) - T(gen=j+1) on the bare roofline; the stack's total is
    prefill + sum_j max(step_j, host)."""
    wl = dict(scheme="ar", prompt=256, batch=64)
    T = [run("none", gen=g, **wl)["time_s"] for g in range(1, 34)]
    prefill = run("none", gen=1, **wl)["passes"][0]["time_s"]
    assert T[0] == pytest.approx(prefill, rel=1e-12)
    steps = [b - a for a, b in zip(T, T[1:])]
    host = (steps[0] + steps[-1]) / 2  # crossed halfway
    assert steps[0] < host < steps[-1]
    s = neutral(host=dict(us_per_layer=host / 32 * 1e6))
    want = max(prefill, host) + sum(max(t, host) for t in steps)
    assert run(s, gen=33, **wl)["time_s"] == pytest.approx(want, rel=1e-9)


def test_host_wait_of_each_configuration_in_a_sweep_is_its_own():
    """The closed-form host wait per configuration of a grid: every row of a sweep whose AR steps
    cross the host time (batch 64), or stay host-bound (batch 1), equals the configuration run
    alone (a host wait compared with the whole grid's GPU time would differ)."""
    wl = dict(scheme="ar", prompt=256)
    s = neutral(host=dict(us_per_layer=303.0))  # 9.7 ms a pass: batch 64 steps rise through it
    swept = api.sweep_rows(api.sweep("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", schemes=["ar"], prompts=[256],
                                     gens=[16, 32], batches=[1, 64], stack=s))
    assert len(swept) == 4
    for row in swept:
        alone = run(s, gen=row["gen"], batch=row["batch"], **wl)
        assert row["time_s"] == pytest.approx(alone["time_s"], rel=1e-12), row
    bare = run("none", gen=32, batch=1, **wl)
    assert run(s, gen=32, batch=1, **wl)["time_s"] > bare["time_s"] * 1.01  # the host shows at batch 1


def test_gemm_factor_divides_compute():
    # full-canvas passes of 512 tokens: the MLP is compute-bound with or without the factor 0.5,
    # so its time grows by exactly its compute time FLOPs / (peak x hardware efficiency)
    wl = WORKLOADS[1]
    half = neutral(gemm_efficiency=dict(rows=[1], efficiency=[0.5]))
    base, r = op(run("none", **wl), "mlp"), op(run(half, **wl), "mlp")
    assert r["time_s"] - base["time_s"] == pytest.approx(base["flops"] / (H100_PEAK * H100_GEMM_EFF), rel=1e-9)


def test_gemm_curve_is_read_at_batch_times_q_rows():
    # a curve that is 1 up to 511 rows' worth and 0.5 from 512 (on an H100, whose GEMMs need 0.25x
    # the curve's rows: 511 / 0.25 and 512 / 0.25): a 512-token canvas at batch 1 reads 0.5
    curve = neutral(gemm_efficiency=dict(rows=[511 / H100_ROWS_SCALE, 512 / H100_ROWS_SCALE], efficiency=[1.0, 0.5]))
    small = neutral(gemm_efficiency=dict(rows=[1], efficiency=[0.5]))
    assert op(run(curve, **WORKLOADS[1]), "mlp")["time_s"] == pytest.approx(op(run(small, **WORKLOADS[1]), "mlp")["time_s"])


@pytest.mark.parametrize("tp", [1, 4])
def test_sampler_and_elementwise_traffic(tp):
    wl = dict(WORKLOADS[1], tp=tp)  # 64 passes, logits for all 512 positions of the canvas
    base = run("none", **wl)
    r = run(neutral(sampler_logits_bytes=10), **wl)
    # the whole vocabulary on every GPU, whatever the TP size: the split logits are all-gathered
    # before sampling (SGLang's logits processor; vLLM gathers to the rank that samples)
    extra = 64 * 512 * 126464 * 10 / (H100_BW * H100_MEM_EFF)
    assert op(r, "lm_head")["time_s"] - op(base, "lm_head")["time_s"] == pytest.approx(extra, rel=1e-9)
    e = run(neutral(elementwise_bytes_factor=3.0), **wl)
    ew = op(base, "elementwise")  # memory-bound: time = bytes / bandwidth (+ kernel overheads)
    assert op(e, "elementwise")["time_s"] - ew["time_s"] == pytest.approx(2 * ew["bytes"] / (H100_BW * H100_MEM_EFF),
                                                                          rel=1e-9)


def test_default_stack_named_and_ideal_has_none(capsys):
    """Without --stack a decoding runs on its kind's engine path: LLaDA's diffusion decoding on
    SGLang's dLLM path, its AR baseline (and an AR model) on SGLang's usual one."""
    a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100")
    assert (a["stack"], a["ar_stack"], a["stack_default"]) == ("sglang-dllm", "sglang", True)
    assert any(o["name"] == "host_wait" for o in a["results"][0]["ops"])
    assert api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", scheme="ar")["stack"] == "sglang"
    assert api.analyze("Qwen/Qwen3-8B", gpus="h100")["stack"] == "sglang"
    given = api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", stack="compiled")
    assert (given["stack"], given["ar_stack"], given["stack_default"]) == ("compiled", "compiled", False)
    assert api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", efficiency="ideal")["stack"] == "none"
    assert main(["analyze", "--gpu", "h100", "--stack", "hf-eager", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"] == "hf-eager"
    assert main(["analyze", "--gpu", "h100", "--stack", "none"]) == 0
    assert "stack: none" in capsys.readouterr().out
    assert main(["sweep", "--gpu", "h100", "--batch", "1,2", "--stack", "compiled", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"] == "compiled"


def test_bad_stack_is_one_line_exit_5(tmp_path, capsys):
    assert main(["analyze", "--gpu", "h100", "--stack", "nope"]) == 5
    err = capsys.readouterr().err
    assert err.startswith("error: unknown stack 'nope'") and err.count("\n") == 1
    f = tmp_path / "s.yaml"
    f.write_text("name: [")
    assert main(["analyze", "--gpu", "h100", "--stack", str(f)]) == 5
    assert capsys.readouterr().err.startswith("error: stack file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_stack_path_that_is_not_a_readable_file_says_what_it_is(tmp_path, capsys):
    """A .yaml path is a file meant as one: a missing one, a folder or a FIFO is named for what it
    is (exit 5), not taken for an unknown stack name; the FIFO is never opened for reading."""
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    (tmp_path / "dir.yaml").mkdir()
    for path, says in [(fifo, "is a named pipe (FIFO), not a regular file"), (tmp_path / "dir.yaml", "is a folder"),
                       (tmp_path / "missing.yml", "does not exist")]:
        assert main(["analyze", "--gpu", "h100", "--stack", str(path)]) == 5
        err = capsys.readouterr().err
        assert err.startswith("error: stack file") and says in err and err.count("\n") == 1, err


def test_logits_buffer_follows_the_stacks_sampler():
    """The reference LLaDA sampler holds bf16 logits, an fp64 copy and an fp64 softmax: 18 bytes
    per logit (hf-eager); a serving stack 2 + 4 = 6. mdm at Lp 256, Lg 128 computes logits for
    all 384 positions over LLaDA's 126,464-token vocabulary."""
    from dlmcost import api

    kw = dict(scheme="mdm", prompt=256, gen=128, steps=128)
    eager = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", stack="hf-eager", **kw)["results"][0]["memory"]
    served = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", stack="sglang", **kw)["results"][0]["memory"]
    assert eager["logits_bytes"] == 384 * 126_464 * 18
    assert served["logits_bytes"] == 384 * 126_464 * 6
    assert eager["max_batch"] < served["max_batch"]
    # under tensor parallelism too: the gathered logits are the whole vocabulary on each GPU
    tp4 = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", stack="sglang", tp=4, **kw)["results"][0]["memory"]
    assert tp4["logits_bytes"] == 384 * 126_464 * 6


def test_a_closed_form_family_reads_the_gemm_curve_at_its_mean_rows():
    """docs/stacks.md: a closed-form family takes the GEMM factor at B x its mean q. prefix-cache,
    Lp 0, Lg 128, block 32: the step family's q shrinks 128, 96, 64, 32 over the blocks (mean 80),
    so at batch 64 it reads the curve at 64 x 80 = 5,120 rows (/ 0.25 on an H100: 20,480). A curve
    that falls steeply around there and a flat one at the value it has there must give that family
    the same time."""
    import math

    import numpy as np

    rows, eff = [5000 / H100_ROWS_SCALE, 5300 / H100_ROWS_SCALE], [1.0, 0.25]
    at_mean = float(np.interp(math.log(64 * 80 / H100_ROWS_SCALE), [math.log(r) for r in rows], eff))
    wl = dict(scheme="prefix-cache", prompt=0, gen=128, block=32, steps=64, batch=64)
    steep = run(neutral(gemm_efficiency=dict(rows=rows, efficiency=eff)), **wl)
    flat = run(neutral(gemm_efficiency=dict(rows=[1], efficiency=[at_mean])), **wl)
    step = lambda r: next(p for p in r["passes"] if p["name"] == "step")  # noqa: E731
    assert (step(steep)["q"], step(steep)["q_last"]) == (128, 32)
    assert step(steep)["time_s"] == pytest.approx(step(flat)["time_s"], rel=1e-12)
    # and the curve matters here: at the first pass's rows alone (8,192) it would be 0.25
    slow = run(neutral(gemm_efficiency=dict(rows=[1], efficiency=[0.25])), **wl)
    assert step(slow)["time_s"] > 1.2 * step(flat)["time_s"]


@pytest.mark.parametrize("gen", [1024, 256])
def test_closed_form_host_wait_interpolates_between_the_first_and_last_pass(gen):
    """docs/stacks.md: a closed-form family compares the host time with the GPU time interpolated
    linearly between its first and last pass. prefix-cache, Lp 0, block 128, 3 steps per block:
    the step family's n = Lg/128 passes shrink q = Lg - 128 j at c = 128 j, each repeated r = 2
    times. Lg 1024 (n = 8): its GEMMs cross the ridge on the way (T from 1,024 to 128 rows), so the
    GPU time is not linear in j and moving either end point of the interpolation changes the sum.
    Lg 256 (n = 2): the two end points are the family, and the sum is exact. The end points come
    from single passes of the same shapes on the bare roofline: mdm's one canvas pass (q = Lg,
    c = 0, every position's logits) and a dual-cache step (q = 128 over c = Lg - 128 cached)."""
    n = gen // 128
    wl = dict(scheme="prefix-cache", prompt=0, gen=gen, block=128, steps=3 * n)
    first = run("none", scheme="mdm", prompt=0, gen=gen, steps=1, block=gen)["passes"][0]
    last = next(p for p in run("none", scheme="dual-cache", prompt=0, gen=gen, block=128, steps=3 * n)["passes"]
                if p["name"] == "step")
    assert (first["q"], first["c"], last["q"], last["c"]) == (gen, 0, 128, gen - 128)
    if n == 8:
        assert (first["verdict"], last["verdict"]) == ("compute-bound", "memory-bound")
    g0, g_last = first["time_s"], last["time_s"]  # a pass entry's time is per pass
    host = (g0 + g_last) / 2  # the interpolated GPU time falls below it half-way
    want = 2 * sum(max(host - (g0 + (g_last - g0) * j / (n - 1)), 0.0) for j in range(n))
    step = lambda r: next(p for p in r["passes"] if p["name"] == "step")  # noqa: E731
    bare = step(run(neutral(), **wl))
    hosted = step(run(neutral(host=dict(us_per_layer=host / 32 * 1e6)), **wl))
    assert (bare["count"], bare["q_last"]) == (2 * n, 128)
    assert (hosted["time_s"] - bare["time_s"]) * 2 * n == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("model", ["inclusionAI/LLaDA2.0-mini", "google/gemma-3-1b-it"])
@pytest.mark.parametrize("gen", [32, 64])
def test_a_prefix_cache_family_summed_pass_by_pass_reads_the_gemm_curve_at_each_passs_rows(gen, model):
    """docs/stacks.md: families summed pass by pass (prefix-cache steps of an MoE model, whose
    expected distinct experts are not affine in q, or of a model with sliding layers, whose q
    changes) read the GEMM curve at each pass's own B x q; a one-pass family (Lg 32 = one block)
    reads it at its q. Batch 64, block 32, Lp 0: step passes q = 64 (rows 4,096, factor 1) then
    q = 32 over c = 32 (rows 2,048, 0.5); the curve keeps falling below (0.2 at 1,024 rows), so any
    other reading point changes the time.
    Each pass alone, under the same stack: an mdm canvas pass (q = Lg, c = 0) and a dual-cache
    step (q = 32 over c = 32), both with logits for every query position."""
    curve = neutral(gemm_efficiency=dict(rows=[1024, 2048, 4096], efficiency=[0.2, 0.5, 1.0]))
    alone = lambda **wl: api.analyze(model, "h100", stack=curve, batch=64, prompt=0, **wl)["results"][0]  # noqa: E731
    step = lambda r: next(p for p in r["passes"] if p["name"] == "step")  # noqa: E731
    passes = [step(alone(scheme="mdm", gen=gen, steps=1, block=gen))]
    if gen == 64:
        passes.append(step(alone(scheme="dual-cache", gen=64, block=32, steps=4)))
        assert (passes[1]["q"], passes[1]["c"]) == (32, 32)
    fam = step(alone(scheme="prefix-cache", gen=gen, block=32, steps=2 * gen // 32))
    assert (fam["count"], fam["q"], fam["q_last"]) == (len(passes), gen, 32)
    assert fam["time_s"] == pytest.approx(sum(p["time_s"] for p in passes) / len(passes), rel=1e-12)
