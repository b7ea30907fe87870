"""A stack's `slow_kernels`: the kernels its releases ran untuned on some parts (SGLang 0.5.x's FP8
GEMM and fused-MoE kernels on gfx942, the MI300X and MI325X), GPU time per decoder layer added to
every pass there, at the precisions named and nowhere else. Expected values by hand: the layer
counts from the models' config.json files, 243 us from the stack files."""

import json
from pathlib import Path

import pytest
import yaml

from dlmcost.inputs.stacks import StackFileError, load_stack, validate_stack

ROOT = Path(__file__).resolve().parent.parent
DSV3_LAYERS = 61  # deepseek-ai/DeepSeek-V3 config.json: num_hidden_layers 61 (58 of them MoE)
LLADA_LAYERS = 32  # GSAI-ML/LLaDA-8B-Instruct config.json: n_layers 32
MINIMAX_LAYERS = 62  # MiniMaxAI/MiniMax-M2.5 config.json: num_hidden_layers 62
US = 243e-6  # stacks/sglang.yaml slow_kernels: us_per_layer
FIT_POINT = "serving:sgcm2-minimax-m2-fp8-mi300xtp4-sglang-1k1k-c1"


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
        assert data["slow_kernels"] == [dict(gpus=["MI300X", "MI325X"], precisions=["fp8"], us_per_layer=243)]
        assert data["fitted"]["slow_kernels"] == [FIT_POINT]
        assert data["sources"]["slow_kernels"].strip()
    # sglang-pcg extends sglang: the same releases' kernels unless it says otherwise
    assert "slow_kernels" not in stack_data("sglang-pcg")
    assert load_stack("sglang-pcg").slow_layer_us("MI300X", "fp8") == 243


def test_every_pass_on_an_mi300x_at_fp8_takes_243_us_a_layer_longer(run, tmp_path):
    """DeepSeek-V3 on 8 MI300Xs at fp8: its prefill and each of its 255 decode steps take
    61 x 243 us = 14.823 ms longer than on the same stack without the slow kernels."""
    slow, slow_passes = analyze(run, "sglang", "--scheme", "ar")
    tuned, tuned_passes = analyze(run, without_slow_kernels(tmp_path), "--scheme", "ar")
    extra = DSV3_LAYERS * US
    for name in ("prefill", "step"):
        assert slow_passes[name]["time_s"] - tuned_passes[name]["time_s"] == pytest.approx(extra, rel=1e-9)
    assert slow["nfe"] == tuned["nfe"] == 256
    assert slow["time_s"] - tuned["time_s"] == pytest.approx(256 * extra, rel=1e-9)
    # time only: the same FLOPs and bytes
    assert slow["flops"] == tuned["flops"] and slow["bytes"] == tuned["bytes"]


def test_a_diffusion_models_passes_on_the_dllm_path_too(run, tmp_path):
    """LLaDA-8B at fp8 on one MI300X under sglang-dllm (dual-cache, block 32): every forward pass
    32 x 243 us = 7.776 ms longer, its 64 passes (64 steps) 64 x that."""
    args = ("--scheme", "dual-cache", "--block", "32", "--gen", "64", "--steps", "64")
    slow, _ = analyze(run, "sglang-dllm", *args, model="GSAI-ML/LLaDA-8B-Instruct", tp="1")
    tuned, _ = analyze(run, without_slow_kernels(tmp_path, "sglang-dllm"), *args, model="GSAI-ML/LLaDA-8B-Instruct",
                       tp="1")
    passes = sum(p["count"] for p in slow["passes"])
    assert passes == sum(p["count"] for p in tuned["passes"]) == 64  # one forward a step
    assert slow["time_s"] - tuned["time_s"] == pytest.approx(passes * LLADA_LAYERS * US, rel=1e-9)


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


def test_the_fitted_number_from_its_point(run, tmp_path):
    """The SGLang cookbook's MiniMax-M2 run on 4 MI300Xs: 22.21 ms a token measured at one request;
    the same stack on tuned kernels predicts t; (22.21 ms - t) / 62 layers rounds to the 243 us set."""
    points = yaml.safe_load((ROOT / "validation" / "serving.yaml").read_text(encoding="utf-8"))["points"]
    (point,) = [p for p in points if f"serving:{p['id']}" == FIT_POINT]
    command = point["command"].split()[1:]
    command[command.index("--stack") + 1] = without_slow_kernels(tmp_path)
    rc, out, err = run(*command, "-f", "json")
    assert rc == 0, err
    (p,) = json.loads(out)["deployments"][0]["points"]
    answer = p["output_tokens_per_s"] / p["requests_per_s"]  # every request of the job alike in mean
    tpot_s = (p["latency_s"]["mean"] - p["ttfb_s"]["mean"]) / (answer - 1)
    measured_s = point["measured"]["tpot_mean_ms"] / 1000
    assert round((measured_s - tpot_s) / MINIMAX_LAYERS * 1e6) == 243


@pytest.mark.parametrize("entry,says", [
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=-1), "greater than or equal to 0"),
    (dict(gpus=[], precisions=["fp8"], us_per_layer=10), "at least 1 item"),
    (dict(gpus=[""], precisions=["fp8"], us_per_layer=10), "at least 1 character"),
    (dict(gpus=["MI300X"], precisions=["fp8"], us_per_layer=10, per_kernel=True), "per_kernel"),
    (dict(gpus=["MI300X"], precisions=["fp8"]), "us_per_layer"),
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
