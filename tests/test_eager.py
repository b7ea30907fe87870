"""`--eager`: a stack run without CUDA graphs (its `eager:` host dispatch), on every command that
costs passes, against numbers computed by hand from the stack files."""

import json
from pathlib import Path

import pytest
import yaml

from dlmcost.inputs.stacks import StackFileError, load_stack, validate_stack

ROOT = Path(__file__).resolve().parent.parent
LLADA_LAYERS = 32  # GSAI-ML/LLaDA-8B-Instruct config.json: n_layers 32


def eager_block(name: str) -> dict:
    """The stack file's own `eager:` block, read as YAML (not through the loader)."""
    return yaml.safe_load((ROOT / "stacks" / f"{name}.yaml").read_text(encoding="utf-8"))["eager"]


def analyze_json(run, *args, model="GSAI-ML/LLaDA-8B-Instruct") -> dict:
    rc, out, err = run("analyze", model, "--gpu", "h100", "--batch", "1", "-f", "json", *args)
    assert rc == 0, err
    return json.loads(out)


@pytest.mark.parametrize("stack, scheme", [("sglang-dllm", "mdm"), ("vllm", "ar"), ("sglang", "ar"),
                                           ("compiled", "ar")])
def test_eager_adds_the_layers_dispatch_to_every_pass(run, stack, scheme):
    """The eager profiles' dispatch is the GPU's measured wait (overlaps_gpu false): every pass of
    a batch-1 generation takes n_layers x us_per_layer longer, whatever the graphed stack overlapped.
    sglang-dllm: 32 x 28 us = 0.896 ms; vllm: 32 x 47 us = 1.504 ms; compiled: 32 x 933 us = 29.856 ms.
    sglang's AR prefill waits so with graphs too (prefill_graphs false): its other passes alone do."""
    block = eager_block(stack)
    assert block["overlaps_gpu"] is False
    graphed = analyze_json(run, "--stack", stack, "--scheme", scheme)
    eager = analyze_json(run, "--stack", stack, "--scheme", scheme, "--eager")
    g, e = graphed["results"][0], eager["results"][0]
    assert e["nfe"] == g["nfe"]
    graphed_passes = g["nfe"] - (stack == "sglang" and scheme == "ar")  # its prefill: eager already
    per_pass = (e["time_s"] - g["time_s"]) / graphed_passes
    assert per_pass == pytest.approx(LLADA_LAYERS * block["us_per_layer"] * 1e-6, rel=1e-9)
    assert (graphed["stack"], graphed["eager"]) == (stack, False)
    assert (eager["stack"], eager["eager"]) == (f"{stack} (eager)", True)


def test_the_hand_numbers_the_files_hold():
    # the sources' arithmetic: (8.23 - 7.35) ms / 32 layers (SGLang PR #1401); 150 ms / 100 tokens / 32 layers (vLLM PR #1440)
    assert eager_block("sglang")["us_per_layer"] == round((8.23 - 7.35) * 1000 / 32)
    assert eager_block("sglang-dllm") == eager_block("sglang")
    assert eager_block("vllm")["us_per_layer"] == round((1.2 - 1.05) * 1e6 / 100 / 32)
    assert eager_block("vllm-dllm") == eager_block("vllm")
    # gpt-fast: 25.5 tok/s eager, 107.0 compiled, Llama-2-7B's 32 layers (pytorch.org blog, GPT, Fast)
    assert eager_block("compiled")["us_per_layer"] == round((1 / 25.5 - 1 / 107.0) * 1e6 / 32) == 933
    # SGLang PR #1401, DeepSeek-Coder-V2-Lite (27 layers, 26 MoE): 6.22 ms graphed, "4x" that eager, less 27 x the
    # Triton backend's (9.28 - 7.06) ms / 32 per layer, over the 26 MoE layers: 646 us, to the nearest 10 us (vLLM's)
    dense_us = (9.28 - 7.06) * 1000 / 32
    assert eager_block("vllm")["us_per_moe_layer"] == round(((4 - 1) * 6220 - 27 * dense_us) / 26, -1) == 650
    # SGLang PR #12160, DeepSeek-V3 prefill of 1 new token: 82.6406 ms eager, 23.0978 ms graphed; less 61 layers x
    # 28 us and 2 x 61 + 1 collectives x 15 us, over its 58 MoE layers: 965.3 us, to the nearest us
    assert eager_block("sglang")["us_per_moe_layer"] == round(((82.6406 - 23.0978) * 1000 - 61 * 28 - 123 * 15) / 58) == 965
    assert eager_block("compiled").get("us_per_moe_layer", 0) == 0  # a gpt-fast loop's MoE: not measured


def test_each_collective_waits_for_its_launch_eagerly(run):
    """SGLang's eager all-reduce (aiconfigurator, SGLang 0.5.10: 20.3 us eager against 4.8 us graphed
    on the H100 system, 20.1 against 4.8 on the H200's: 15.1 and 14.1 us apart, medians over sizes
    and GPU counts): at TP2 every LLaDA-8B pass also launches 32 + 32 all-reduces and the logits'
    all-gather, 65 x 15 us = 0.975 ms beside the layers' 32 x 28 us."""
    assert eager_block("sglang")["us_per_collective"] == round((15.1 + 14.1) / 2) == 15
    assert eager_block("sglang-dllm") == eager_block("sglang")
    args = ("--stack", "sglang-dllm", "--scheme", "mdm", "--tp", "2")
    g = analyze_json(run, *args)["results"][0]
    e = analyze_json(run, *args, "--eager")["results"][0]
    per_pass = (e["time_s"] - g["time_s"]) / g["nfe"]
    assert per_pass == pytest.approx((LLADA_LAYERS * 28 + 65 * 15) * 1e-6, rel=1e-9)


@pytest.mark.parametrize("stack", ["vllm-dllm", "sglang-dllm"])
def test_an_moe_layer_waits_longer_eagerly(run, stack):
    """An MoE layer launches its router, top-k, sort and fused-expert kernels from Python too: each
    pass of LLaDA2.0-mini (config.json: 20 layers, first_k_dense_replace 1, so 19 MoE layers) waits
    20 x us_per_layer + 19 x us_per_moe_layer longer: vllm-dllm 20 x 47 + 19 x 650 us = 13.29 ms,
    sglang-dllm 20 x 28 + 19 x 965 us = 18.895 ms."""
    expected_ms = {"vllm-dllm": 13.29, "sglang-dllm": 18.895}[stack]
    args = ("--stack", stack, "--prompt", "64", "--gen", "64", "--block", "32", "--steps", "64")
    graphed = analyze_json(run, *args, model="inclusionAI/LLaDA2.0-mini")["results"][0]
    eager = analyze_json(run, *args, "--eager", model="inclusionAI/LLaDA2.0-mini")["results"][0]
    assert eager["nfe"] == graphed["nfe"]
    assert (eager["time_s"] - graphed["time_s"]) / graphed["nfe"] == pytest.approx(expected_ms * 1e-3, rel=1e-9)


def test_without_a_stack_every_default_runs_eagerly(run):
    a = analyze_json(run, "--eager")  # LLaDA's default decoding on sglang-dllm, its AR baseline on sglang
    assert (a["stack"], a["ar_stack"], a["stack_default"]) == ("sglang-dllm (eager)", "sglang (eager)", True)


def test_the_eager_name_reads_back_as_the_eager_stack():
    eager = load_stack("vllm", eager=True)
    assert load_stack("vllm (eager)") == eager
    assert load_stack(eager, eager=True) == eager  # idempotent
    assert (eager.name, eager.host.us_per_layer, eager.host.overlaps_gpu) == ("vllm (eager)", 47, False)
    assert eager.host.fixed_us_per_forward == load_stack("vllm").host.fixed_us_per_forward


def test_sweep_takes_eager(run):
    rc, out, err = run("sweep", "--gpu", "h100", "--batch", "1", "--scheme", "mdm,ar", "--eager", "-f", "json")
    assert rc == 0, err
    d = json.loads(out)
    assert (d["stack"], d["ar_stack"], d["eager"]) == ("sglang-dllm (eager)", "sglang (eager)", True)


def test_serve_takes_eager_and_says_so(run):
    args = ("serve", "--gpu", "h100", "--scheme", "ar", "--stack", "vllm", "-c", "1", "--requests", "100",
            "--answer", "16", "-f", "json")
    rc, out, err = run(*args, "--eager")
    assert rc == 0, err
    eager = json.loads(out)["deployments"][0]
    rc, out, err = run(*args)
    graphed = json.loads(out)["deployments"][0]
    assert (eager["deployment"]["stack"], eager["deployment"]["eager"]) == ("vllm (eager)", True)
    # no validation of its own: the pooled band, named as such
    assert eager["deployment"]["error_band"]["stack"] == "pooled"
    assert "vllm (eager)" in eager["deployment"]["error_band"]["basis"]
    # one request at a time, each of its passes 32 x 47 us = 1.504 ms longer: its first token after
    # the prompt's pass (which samples it), its answer after 1 + 15 passes
    e, g = eager["points"][0], graphed["points"][0]
    per_pass = LLADA_LAYERS * eager_block("vllm")["us_per_layer"] * 1e-6
    assert e["ttfb_s"]["median"] - g["ttfb_s"]["median"] == pytest.approx(per_pass, rel=1e-6)
    assert e["latency_s"]["median"] - g["latency_s"]["median"] == pytest.approx(16 * per_pass, rel=1e-6)
    rc, out, err = run(*args[:-2], "--eager")
    assert rc == 0 and "stack vllm (eager)" in out.replace("\n", " ")


def test_plan_takes_eager(run):
    args = ("plan", "--rate", "1", "--p95", "100", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
            "--requests", "100", "--scheme", "ar", "-f", "json")
    rc, out, err = run(*args, "--eager")
    assert rc == 0, err
    eager = json.loads(out)
    rc, out, err = run(*args)
    graphed = json.loads(out)
    assert eager["search"]["eager"] is True and graphed["search"]["eager"] is False
    assert eager["search"]["stacks"] == {"ar": "sglang (eager)"}
    # its ranges: the pooled band (the eager engine has no validation of its own), not sglang's
    assert eager["deployments"][0]["intervals"]["band_stack"] == "pooled on NVIDIA parts"
    assert graphed["deployments"][0]["intervals"]["band_stack"] == "sglang on NVIDIA parts"
    # its candidates costed eagerly: each request's 1 + 127 passes (128 answer tokens, the first
    # sampled by the prefill) 0.9 ms longer, a little more under load
    slower = eager["deployments"][0]["p50_latency_s"] - graphed["deployments"][0]["p50_latency_s"]
    assert slower > 128 * LLADA_LAYERS * eager_block("sglang")["us_per_layer"] * 1e-6


@pytest.mark.parametrize("command", [
    ("analyze", "--gpu", "h100"),
    ("sweep", "--gpu", "h100", "--batch", "1"),
    ("serve", "--gpu", "h100", "-c", "1", "--requests", "100"),
    ("plan", "--rate", "1", "--p95", "100", "--gpu", "h100", "--requests", "100"),
])
def test_a_stack_without_an_eager_profile_refuses_it(run, command):
    rc, out, err = run(*command, "--stack", "hf-eager", "--eager")
    assert rc == 2 and not out
    assert err.startswith("error: --eager: the hf-eager stack has no eager profile")
    assert "sglang, sglang-dllm, sglang-pcg, vllm, vllm-dllm" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("given, named", [(("--stack", "none"), "--stack none"),
                                          (("--efficiency", "ideal"), "--efficiency ideal")])
def test_the_bare_roofline_has_no_host_to_run_eagerly(run, given, named):
    rc, out, err = run("analyze", "--gpu", "h100", *given, "--eager")
    assert rc == 2 and not out
    assert err.startswith("error: --eager costs a stack's host dispatch") and named in err


def test_a_plan_on_tpus_has_no_eager_engine(run):
    rc, _, err = run("plan", "--rate", "1", "--p95", "100", "--gpu", "tpu-v6e", "--requests", "100", "--eager")
    assert rc == 2 and "the jax-tpu stack has no eager profile" in err


def test_a_stack_files_eager_block_is_sourced_and_complete():
    data = yaml.safe_load((ROOT / "stacks" / "vllm.yaml").read_text(encoding="utf-8"))
    del data["sources"]["eager"]
    with pytest.raises(StackFileError, match="needs a source for: eager"):
        validate_stack(data)
    data = yaml.safe_load((ROOT / "stacks" / "vllm.yaml").read_text(encoding="utf-8"))
    del data["eager"]["overlaps_gpu"]
    with pytest.raises(StackFileError, match="overlaps_gpu"):
        validate_stack(data)
