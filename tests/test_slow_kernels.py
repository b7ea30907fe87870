"""A stack's `slow_kernels`: the kernels its releases ran untuned on some parts (SGLang 0.5.x's FP8
GEMM and fused-MoE kernels on gfx942, the MI300X and MI325X), GPU time per decoder layer added to
every pass there, a fixed part and a part for each token the pass runs, at the precisions named and
nowhere else. Expected values by hand: the layer counts from the models' config.json files, 242.61
and 0.55 us from the stack files, L x (242.61 + B x q x 0.55) us a pass."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from dlmcost.inputs.stacks import StackFileError, load_stack, validate_stack

ROOT = Path(__file__).resolve().parent.parent
DSV3_LAYERS = 61  # deepseek-ai/DeepSeek-V3 config.json: num_hidden_layers 61 (58 of them MoE)
LLADA_LAYERS = 32  # GSAI-ML/LLaDA-8B-Instruct config.json: n_layers 32
MINIMAX_LAYERS = 62  # MiniMaxAI/MiniMax-M2.5 config.json: num_hidden_layers 62
US = 242.61e-6  # stacks/sglang.yaml slow_kernels: us_per_layer
TOKEN_US = 0.55e-6  # and us_per_token_layer
FIT_RUNS = ("sgcm2-minimax-m2-fp8-mi300xtp4-sglang-1k1k-c1", "sgcm2-minimax-m2-fp8-mi300xtp4-sglang-1k1k-c16",
            "sgcm2-minimax-m2-fp8-mi300xtp4-sglang-1k1k-c100")
FIT_POINTS = [f"serving:{run}" for run in FIT_RUNS]


def stack_data(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"{name}.yaml").read_text(encoding="utf-8"))


def without_slow_kernels(tmp_path, name: str = "sglang") -> str:
    """The stack file as it is but for its slow kernels (the same engine on tuned kernels)."""
    data = stack_data(name)
    del data["slow_kernels"], data["sources"]["slow_kernels"], data["fitted"]["slow_kernels"]
    data["name"] = f"{name}-tuned"
    path = tmp_path / f"{name}-tuned.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def analyze(run, stack: str, *args: str, model="deepseek-ai/DeepSeek-V3", gpu="mi300x", tp="8",
            precision="fp8") -> tuple[dict, dict]:
    rc, out, err = run("analyze", model, "--gpu", gpu, "--tp", tp, "--precision", precision, "--batch", "1",
                       "--stack", stack, "-f", "json", *args)
    assert rc == 0, err
    result = json.loads(out)["results"][0]
    return result, {p["name"]: p for p in result["passes"]}


def test_the_sglang_stacks_name_gfx942_at_fp8_fitted_on_one_point():
    for name in ("sglang", "sglang-dllm"):
        data = stack_data(name)
        assert data["slow_kernels"] == [dict(gpus=["MI300X", "MI325X"], precisions=["fp8"], us_per_layer=242.61,
                                             us_per_token_layer=0.55)]
        assert data["fitted"]["slow_kernels"] == FIT_POINTS
        assert data["sources"]["slow_kernels"].strip()
    # sglang-pcg extends sglang: the same releases' kernels unless it says otherwise
    assert "slow_kernels" not in stack_data("sglang-pcg")
    assert load_stack("sglang-pcg").slow_layer_us("MI300X", "fp8") == 242.61
    assert load_stack("sglang-pcg").slow_token_layer_us("MI300X", "fp8") == 0.55


@pytest.mark.parametrize("batch,prompt,prefill_ms,step_ms", [
    # 61 x (242.61 + 256 x 0.55) us and 61 x (242.61 + 1 x 0.55) us
    (1, 256, 23.38801, 14.83276),
    # 61 x (242.61 + 4 x 1,000 x 0.55) us and 61 x (242.61 + 4 x 0.55) us: the prompts of the batch together
    (4, 1000, 148.99921, 14.93341),
])
def test_every_pass_on_an_mi300x_at_fp8_takes_longer_by_its_layers_and_tokens(run, tmp_path, batch, prompt,
                                                                              prefill_ms, step_ms):
    """DeepSeek-V3 on 8 MI300Xs at fp8: its prefill (B x prompt tokens) and each of its 255 decode
    steps (B tokens) take L x (242.61 + tokens x 0.55) us longer than on the same stack without the
    slow kernels."""
    args = ("--scheme", "ar", "--batch", str(batch), "--prompt", str(prompt))
    slow, slow_passes = analyze(run, "sglang", *args)
    tuned, tuned_passes = analyze(run, without_slow_kernels(tmp_path), *args)
    assert DSV3_LAYERS * (US + batch * prompt * TOKEN_US) == pytest.approx(prefill_ms / 1e3, rel=1e-12)
    assert DSV3_LAYERS * (US + batch * TOKEN_US) == pytest.approx(step_ms / 1e3, rel=1e-12)
    for name, extra_ms in (("prefill", prefill_ms), ("step", step_ms)):
        assert slow_passes[name]["time_s"] - tuned_passes[name]["time_s"] == pytest.approx(extra_ms / 1e3, rel=1e-9)
    assert slow["nfe"] == tuned["nfe"] == 256
    assert slow["time_s"] - tuned["time_s"] == pytest.approx((prefill_ms + 255 * step_ms) / 1e3, rel=1e-9)
    # time only: the same FLOPs and bytes
    assert slow["flops"] == tuned["flops"] and slow["bytes"] == tuned["bytes"]


def test_a_diffusion_models_passes_on_the_dllm_path_too(run, tmp_path):
    """LLaDA-8B at fp8 on one MI300X under sglang-dllm (dual-cache, block 32, a 256-token prompt): its
    64 forward passes (64 steps) take 32 x (242.61 + q x 0.55) us longer each, q the tokens a pass
    runs: each block's refresh pass the whole sequence, 256 + 64 = 320 tokens, the other 62 the
    block's 32."""
    args = ("--scheme", "dual-cache", "--block", "32", "--gen", "64", "--steps", "64")
    slow, _ = analyze(run, "sglang-dllm", *args, model="GSAI-ML/LLaDA-8B-Instruct", tp="1")
    tuned, _ = analyze(run, without_slow_kernels(tmp_path, "sglang-dllm"), *args, model="GSAI-ML/LLaDA-8B-Instruct",
                       tp="1")
    passes = sum(p["count"] for p in slow["passes"])
    assert passes == sum(p["count"] for p in tuned["passes"]) == 64  # one forward a step
    tokens = sum(p["count"] * (p["q"] + p["q_last"]) / 2 for p in slow["passes"])
    assert tokens == 2 * 320 + 62 * 32
    assert slow["time_s"] - tuned["time_s"] == pytest.approx(LLADA_LAYERS * (passes * US + tokens * TOKEN_US),
                                                            rel=1e-9)


@pytest.mark.parametrize("gpu,precision", [("mi300x", "bf16"), ("h100", "fp8"), ("mi355x", "fp8")])
def test_other_parts_and_precisions_keep_the_tuned_times(run, tmp_path, gpu, precision):
    slow, _ = analyze(run, "sglang", "--scheme", "ar", gpu=gpu, precision=precision)
    tuned, _ = analyze(run, without_slow_kernels(tmp_path), "--scheme", "ar", gpu=gpu, precision=precision)
    assert slow["time_s"] == tuned["time_s"]


def test_a_part_is_named_in_any_case_and_entries_add():
    data = stack_data("sglang")
    data["slow_kernels"] = [dict(gpus=[" mi300x "], precisions=["fp8"], us_per_layer=100),
                            dict(gpus=["MI300X"], precisions=["fp8", "bf16"], us_per_layer=20)]
    stack = validate_stack(data)
    assert stack.slow_layer_us("MI300X", "fp8") == 120
    assert stack.slow_layer_us("MI300X", "bf16") == 20
    assert stack.slow_layer_us("MI325X", "fp8") == 0


def _served(run, run_id: str, stack: str) -> tuple[dict, dict]:
    """A validation run of the fit's publication on another stack file: (the point, serve's JSON point)."""
    points = yaml.safe_load((ROOT / "validation" / "serving.yaml").read_text(encoding="utf-8"))["points"]
    (point,) = [p for p in points if p["id"] == run_id]
    command = point["command"].split()[1:]
    command[command.index("--stack") + 1] = stack
    rc, out, err = run(*command, "-f", "json")
    assert rc == 0, err
    (p,) = json.loads(out)["deployments"][0]["points"]
    return point, p


def _tpot_s(p: dict) -> float:
    """bench_serving's mean TPOT from serve's means: (E2E - TTFT) / (answer - 1), every request of a
    run alike in its mean answer (output tok/s over requests/s)."""
    answer = p["output_tokens_per_s"] / p["requests_per_s"]
    return (p["latency_s"]["mean"] - p["ttfb_s"]["mean"]) / (answer - 1)


def test_the_fixed_part_from_the_one_request_run(run, tmp_path):
    """The SGLang cookbook's MiniMax-M2 run on 4 MI300Xs: 22.21 ms a token measured at one request;
    the same stack on tuned kernels predicts t; (22.21 ms - t) / 62 layers is the slow time of a pass
    of one token, 243.16 us, and less that token's 0.55 us it is the 242.61 us set."""
    point, p = _served(run, FIT_RUNS[0], without_slow_kernels(tmp_path))
    one_token_pass_s = (point["measured"]["tpot_mean_ms"] / 1000 - _tpot_s(p)) / MINIMAX_LAYERS
    assert round(one_token_pass_s * 1e6, 2) == 243.16
    assert round((one_token_pass_s - TOKEN_US) * 1e6, 2) == 242.61


def test_the_token_part_from_the_loaded_runs(run, tmp_path):
    """The same page's runs at 16 and 100 in flight: the sum of squared log ratios (predicted /
    measured) of their six speed numbers (output throughput, mean E2E, mean TPOT) is least at 0.55 us
    a token among its neighbours 0.45 and 0.65, the fixed part refitted on the one-request run at
    each (243.16 - t): the fit as the stack file states it."""
    def misfit(token_us: float) -> float:
        data = stack_data("sglang")
        data["slow_kernels"][0].update(us_per_layer=243.16 - token_us, us_per_token_layer=token_us)
        data["name"] = f"sglang-token-{token_us}"
        path = tmp_path / f"{data['name']}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        total = 0.0
        for run_id in FIT_RUNS[1:]:
            point, p = _served(run, run_id, str(path))
            predicted = {"output_tokens_per_s": p["output_tokens_per_s"], "e2e_mean_s": p["latency_s"]["mean"],
                         "tpot_mean_ms": 1000 * _tpot_s(p)}
            total += sum(math.log(v / point["measured"][k]) ** 2 for k, v in predicted.items())
        return total

    best = misfit(0.55)
    assert best < misfit(0.45) and best < misfit(0.65)


@pytest.mark.parametrize("entry,says", [
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=-1), "greater than or equal to 0"),
    (dict(gpus=[], precisions=["fp8"], us_per_layer=10), "at least 1 item"),
    (dict(gpus=[""], precisions=["fp8"], us_per_layer=10), "at least 1 character"),
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=10, per_kernel=True), "per_kernel"),
    (dict(gpus=["MI300X"], precisions=["fp8"]), "us_per_layer"),
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=10, us_per_token_layer=-1), "greater than or equal to 0"),
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=10, us_per_token_layer=float("nan")), "finite"),
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=10, us_per_token_layer=2e6), "less than or equal"),
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=10, us_per_token_layer=True), "valid number"),
])
def test_bad_slow_kernels_are_refused(entry, says):
    data = stack_data("sglang")
    data["slow_kernels"] = [entry]
    with pytest.raises(StackFileError, match=says):
        validate_stack(data)


def test_slow_kernels_need_a_source():
    data = stack_data("sglang")
    del data["sources"]["slow_kernels"]
    with pytest.raises(StackFileError, match="needs a source for: slow_kernels"):
        validate_stack(data)


def test_a_bad_stack_file_is_one_line_exit_5(run, tmp_path):
    data = stack_data("sglang")
    data["name"] = "mine"
    data["slow_kernels"] = [dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer="fast")]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    rc, out, err = run("analyze", "--gpu", "mi300x", "--stack", str(path))
    assert rc == 5 and out == ""
    assert len(err.strip().splitlines()) == 1 and "slow_kernels" in err


def test_a_precision_is_named_in_any_case_and_a_part_by_any_of_its_names(run, tmp_path):
    """`--precision` takes FP8 for fp8 and `--gpu` takes h200 for the H200 SXM: an entry written as
    the command line spells them applies (it used to apply to nothing, silently)."""
    data = stack_data("sglang")
    data["slow_kernels"] = [dict(gpus=["h200"], precisions=[" FP8 "], us_per_layer=100)]
    stack = validate_stack(data)
    assert stack.slow_layer_us(("H200 SXM", "h200-sxm", "h200"), "fp8") == 100
    assert stack.slow_layer_us(("H200 NVL", "h200-nvl", "h200nvl"), "fp8") == 0
    data["name"] = "mine"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    args = ("--scheme", "ar", "--prompt", "64", "--gen", "8")
    slow, _ = analyze(run, str(path), *args, model="GSAI-ML/LLaDA-8B-Instruct", gpu="h200", tp="1")
    tuned, _ = analyze(run, without_slow_kernels(tmp_path), *args, model="GSAI-ML/LLaDA-8B-Instruct", gpu="h200",
                       tp="1")
    assert slow["time_s"] - tuned["time_s"] == pytest.approx(8 * LLADA_LAYERS * 100e-6, rel=1e-9)


@pytest.mark.parametrize("entry,says", [
    (dict(gpus=["MI300X"], precisions=["fp9"], us_per_layer=10), "fp9"),
    (dict(gpus=["   "], precisions=["fp8"], us_per_layer=10), "gpus"),
])
def test_names_that_could_never_apply_are_refused(entry, says):
    data = stack_data("sglang")
    data["slow_kernels"] = [entry]
    with pytest.raises(StackFileError, match=says):
        validate_stack(data)


@pytest.mark.parametrize("model,args", [
    ("deepseek-ai/DeepSeek-V3", ("--scheme", "ar", "--tp", "8")),  # a prefill and a decode family
    ("inclusionAI/LLaDA-MoE-7B-A1B-Instruct", ("--scheme", "prefix-cache", "--block", "32", "--gen", "64",
                                                "--steps", "64")),  # the touched-experts family path
    ("GSAI-ML/LLaDA-8B-Instruct", ("--scheme", "mdm", "--gen", "64", "--steps", "16")),  # a closed-form family
    ("google/gemma-2-9b", ("--scheme", "ar", "--prompt", "4000", "--gen", "256")),  # decode past the window: pass by pass
])
def test_slow_kernels_are_gpu_time_that_a_slower_host_hides(run, tmp_path, model, args):
    """A stack whose overlapped host takes 5 ms a layer, far over any pass's GPU time here: each pass
    takes its host time, max(GPU + slow kernels, host) = host, so the same with the slow kernels as
    without them (counted as host time they would add 243 us a layer to every pass)."""
    times = []
    for slow in (True, False):
        data = stack_data("sglang")
        data["host"] = dict(data["host"], us_per_layer=5000, overlaps_gpu=True)
        data["prefill_graphs"] = True
        data["name"] = f"slow-host-{slow}"
        if not slow:
            del data["slow_kernels"], data["fitted"]["slow_kernels"]
        path = tmp_path / f"{data['name']}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        tp = () if "--tp" in args else ("--tp", "1")
        rc, out, err = run("analyze", model, "--gpu", "mi300x", "--precision", "fp8", "--batch", "1",
                           "--stack", str(path), "-f", "json", *tp, *args)
        assert rc == 0, err
        times.append(json.loads(out)["results"][0])
    with_slow, without = times
    assert with_slow["time_s"] == pytest.approx(without["time_s"], rel=1e-12)
    host = {p["name"]: p["time_s"] for p in without["passes"]}
    assert all(t > 0 for t in host.values())


def _token_slow_case(model: str, host_us: float, flat_gemm_curve: bool = False):
    """Prefix-cache steps whose query tokens shrink across a block (64 to 8 a sequence, batches 1, 4
    and 16) on an MI300X at fp8, under a stack whose slow kernels take 20 us a layer for each token
    and whose overlapped host takes `host_us` a layer: the model, grid, step family, op names and
    each configuration's passes costed one by one."""
    from dlmcost import api
    from dlmcost.engine import evaluation as engine, frames
    from dlmcost.engine.roofline import gpu_rates
    from dlmcost.engine.schemes import REGISTRY
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.models import load_bundled
    from dlmcost.inputs.precision import get_precision
    from dlmcost.inputs.profiles import Profile

    data = stack_data("sglang")
    data["host"] = dict(data["host"], us_per_layer=host_us, overlaps_gpu=True)
    data["prefill_graphs"] = True
    if flat_gemm_curve:  # the same GEMM rate at every row count: the ops' times affine along the family
        data["gemm_efficiency"] = dict(data["gemm_efficiency"], efficiency=[1.0] * 6)
    data["slow_kernels"] = [dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=0, us_per_token_layer=20)]
    m = load_bundled(model)
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=16, block=8))
    cols |= dict(batch=np.array([1.0, 4, 16]))
    rates = gpu_rates(HardwareDB.load().get("mi300x"), get_precision("fp8"), Profile("realistic"))
    grid = frames.build_grid(cols, [rates], np.zeros(3, int), validate_stack(data))
    assert grid.rates.slow_token_layer_s == pytest.approx([20e-6] * 3)
    (step,) = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"]
    assert (step.q0 == 64).all() and (step.dq == -8).all() and (step.n == 8).all()
    names = engine.op_names([m]) + list(engine.STACK_OPS)
    passes = [[engine.pass_cost(m, grid.take([i]), step.take([i]).at(float(j)), names) for j in range(8)]
              for i in range(3)]
    return m, grid, step, names, passes


@pytest.mark.parametrize("path", ["_touched_experts_pass_by_pass", "_pass_by_pass"])
@pytest.mark.parametrize("host_us", [0.0, 1000.0, 5000.0])
def test_a_passes_token_part_is_gpu_time_pass_by_pass(path, host_us):
    """An MoE model's family (LLaDA2.0-mini, 20 layers) on the paths that take passes one by one: the
    sums equal each pass costed on its own and added up, each pass's host wait against its own GPU
    time with its own tokens' slow time (hosts from none to one over most passes' GPU time, and
    between, where some passes wait on it and some do not)."""
    from dlmcost.engine import evaluation as engine

    m, grid, step, names, passes = _token_slow_case("inclusionAI/LLaDA2.0-mini", host_us)
    got = getattr(engine, path)(m, grid, step, names)
    waits = []
    for i in range(3):
        reference = step.r[i] * sum(p.time_s[:, 0] for p in passes[i])
        assert got.data[-1, :, i] == pytest.approx(reference, rel=1e-12, abs=1e-30)
        waits += [p.overhead_s[names.index("host_wait"), 0] > 0 for p in passes[i]]
    if host_us == 1000.0:
        assert any(waits) and not all(waits)


@pytest.mark.parametrize("host_us", [0.0, 5000.0])
def test_a_passes_token_part_is_gpu_time_in_closed_form(host_us):
    """A dense model's family in closed form (LLaDA-8B, 32 layers; a flat GEMM curve, so that every
    op's time is affine along it): each op and the per-forward row (the slow time of 64 down to 8
    tokens a sequence, summed exactly) equal the passes added up; the host wait, which the closed
    form takes against GPU times linear between the family's ends, each end with its own tokens'
    slow time, within 0.2% (the ends' slow times differ by 32 x 20 us x 56 tokens a sequence, which
    the same for both would put about 10% off)."""
    from dlmcost.engine import evaluation as engine

    m, grid, step, names, passes = _token_slow_case("GSAI-ML/LLaDA-8B-Instruct", host_us, flat_gemm_curve=True)
    assert engine.closed_form_rows(m, grid, step).all()
    got = engine._closed_form(m, grid, step, names)
    wait = names.index("host_wait")
    for i in range(3):
        reference = step.r[i] * sum(p.time_s[:, 0] for p in passes[i])
        others = [k for k in range(len(names)) if k != wait]
        assert got.data[-1, others, i] == pytest.approx(reference[others], rel=1e-12, abs=1e-30)
        assert got.data[-1, wait, i] == pytest.approx(reference[wait], rel=2e-3, abs=1e-30)
    if host_us:
        assert (got.data[-1, wait] > 0).all()
