"""`prefill_graphs: false`: an engine whose CUDA graphs cover decode only (SGLang 0.5) runs each
autoregressive prompt prefill eagerly, dispatched as its `prefill_eager:` block says (its `eager:`
block's where it has none); its decode passes, and a diffusion model's passes, keep the graphed host.
Expected values by hand from the published measurements the file's numbers come from."""

import json
from pathlib import Path

import pytest
import yaml

from dlmcost.inputs.stacks import StackFileError, validate_stack

ROOT = Path(__file__).resolve().parent.parent
LLADA_LAYERS = 32  # GSAI-ML/LLaDA-8B-Instruct config.json: n_layers 32
DSV3_LAYERS, DSV3_MOE_LAYERS = 61, 58  # deepseek-ai/DeepSeek-V3 config.json: 61 layers, first_k_dense_replace 3
# sglang's prefill_eager block, us a layer: dense, an MoE layer's extra, an MLA layer's extra, a collective
DENSE_US, MOE_US, MLA_US, COLLECTIVE_US = 292, 346, 325, 15


def stack_data(name: str = "sglang") -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"{name}.yaml").read_text(encoding="utf-8"))


def graphed_prefill_stack(tmp_path) -> str:
    """The sglang stack as if its CUDA graphs covered prefills too (the rest of the file the same)."""
    data = stack_data()
    data["prefill_graphs"] = True
    data["name"] = "sglang-prefill-graphed"
    path = tmp_path / "graphed.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def passes(run, stack, *args, model="GSAI-ML/LLaDA-8B-Instruct", gpu=("--gpu", "h100")) -> tuple[dict, dict]:
    rc, out, err = run("analyze", model, *gpu, "--batch", "1", "-f", "json", "--stack", stack, *args)
    assert rc == 0, err
    result = json.loads(out)["results"][0]
    return result, {p["name"]: p for p in result["passes"]}


def test_the_sglang_file_says_its_prefills_run_without_graphs():
    data = stack_data()
    assert data["prefill_graphs"] is False and data["eager"]["overlaps_gpu"] is False
    assert "forward_batch_info.py" in data["sources"]["prefill_graphs"]


def test_a_stack_whose_graphs_cover_prefills_dispatches_them_as_its_host_says():
    """vllm captures its prefills too: its prefill dispatch is itself; sglang's is its prefill_eager
    host, not its `eager:` (decode) one; a stack with no prefill_eager block falls back to `eager:`."""
    from dlmcost.inputs.stacks import load_stack

    vllm, sglang = load_stack("vllm"), load_stack("sglang")
    assert vllm.prefill_dispatch() is vllm
    host = sglang.prefill_dispatch().host
    assert (host.us_per_layer, host.us_per_moe_layer, host.us_per_mla_layer) == (DENSE_US, MOE_US, MLA_US)
    assert host.us_per_layer != sglang.eager.us_per_layer != sglang.host.us_per_layer
    data = stack_data()
    del data["prefill_eager"], data["sources"]["prefill_eager"], data["fitted"]["prefill_eager"]
    assert validate_stack(data).prefill_dispatch().host.us_per_layer == sglang.eager.us_per_layer


def test_an_ar_prefill_waits_the_eager_dispatch_and_decode_does_not(run, tmp_path):
    """LLaDA-8B's AR baseline on sglang: the prefill pass takes 32 x 292 us = 9.344 ms longer than on
    the same stack with graphed prefills; the 128 decode steps take exactly as long."""
    eager, eager_passes = passes(run, "sglang", "--scheme", "ar")
    graphed, graphed_passes = passes(run, graphed_prefill_stack(tmp_path), "--scheme", "ar")
    wait = LLADA_LAYERS * DENSE_US * 1e-6
    assert eager_passes["prefill"]["time_s"] - graphed_passes["prefill"]["time_s"] == pytest.approx(wait, rel=1e-9)
    assert eager_passes["step"]["time_s"] == pytest.approx(graphed_passes["step"]["time_s"], rel=1e-12)
    assert eager["time_s"] - graphed["time_s"] == pytest.approx(wait, rel=1e-9)


def test_an_moe_prefill_waits_for_its_moe_layers_too(run, tmp_path):
    """DeepSeek-V3 fp8 on 8 H200s: 61 latent-attention layers x (292 + 325) us + 58 MoE layers x 346 us
    = 57.705 ms more for its prefill, and its 61 + 61 all-reduces (attention, then the dense or
    sliced-expert FFN) and the logits' all-gather launched from Python, 123 x 15 us = 1.845 ms: 59.550 ms."""
    args = ("--scheme", "ar", "--precision", "fp8", "--tp", "8", "--prompt", "1024", "--gen", "8")
    gpu = ("--gpu", "h200")
    eager, _ = passes(run, "sglang", *args, model="deepseek-ai/DeepSeek-V3", gpu=gpu)
    graphed, _ = passes(run, graphed_prefill_stack(tmp_path), *args, model="deepseek-ai/DeepSeek-V3", gpu=gpu)
    expected = (DSV3_LAYERS * (DENSE_US + MLA_US) + DSV3_MOE_LAYERS * MOE_US + (2 * DSV3_LAYERS + 1) * COLLECTIVE_US) * 1e-6
    assert expected == pytest.approx(0.059550)
    assert eager["time_s"] - graphed["time_s"] == pytest.approx(expected, rel=1e-9)


def test_a_prefill_over_gpus_waits_for_each_collectives_launch(run, tmp_path):
    """At TP2 the eager prefill also launches its all-reduces from Python: LLaDA-8B's AR prefill has
    32 + 32 all-reduces and the logits' all-gather, 65 x 15 us, beside 32 x 292 us: 10.319 ms in all."""
    args = ("--scheme", "ar", "--tp", "2")
    eager, _ = passes(run, "sglang", *args)
    graphed, _ = passes(run, graphed_prefill_stack(tmp_path), *args)
    assert eager["time_s"] - graphed["time_s"] == pytest.approx((LLADA_LAYERS * DENSE_US + 65 * COLLECTIVE_US) * 1e-6, rel=1e-9)


def test_a_diffusion_models_passes_keep_the_graphed_host(run, tmp_path):
    """SGLang's dLLM passes (DLLM_EXTEND) replay graphs: a block decoding's prompt prefill is not
    charged the eager dispatch, on either SGLang stack."""
    args = ("--scheme", "block", "--block", "32", "--steps", "128")
    eager, _ = passes(run, "sglang", *args)
    graphed, _ = passes(run, graphed_prefill_stack(tmp_path), *args)
    assert eager["time_s"] == graphed["time_s"]


def test_first_token_waits_the_eager_prefill(run, tmp_path):
    """serve at one request: the time to the first token is the prefill's, 36 x 292 us = 10.512 ms longer."""
    def ttft(stack):
        rc, out, err = run("serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--stack", stack, "--prompt", "200",
                           "--answer", "20", "--job", "4", "--parallel", "1", "-f", "json")
        assert rc == 0, err
        return json.loads(out)["deployments"][0]["points"][0]["ttfb_s"]["mean"]
    qwen3_8b_layers = 36  # Qwen/Qwen3-8B config.json: num_hidden_layers 36
    assert ttft("sglang") - ttft(graphed_prefill_stack(tmp_path)) == pytest.approx(qwen3_8b_layers * DENSE_US * 1e-6, rel=1e-6)


def test_prefills_without_graphs_need_an_eager_profile_and_a_source():
    data = stack_data()
    del data["eager"], data["sources"]["eager"], data["fitted"]["eager"]
    validate_stack(data)  # its prefill_eager block is enough
    del data["prefill_eager"], data["sources"]["prefill_eager"], data["fitted"]["prefill_eager"]
    with pytest.raises(StackFileError, match=r"prefill_graphs: false needs the `prefill_eager:` \(or `eager:`\) block"):
        validate_stack(data)
    data = stack_data()
    del data["sources"]["prefill_eager"]
    with pytest.raises(StackFileError, match="needs a source for: prefill_eager"):
        validate_stack(data)
    data = stack_data()
    del data["sources"]["prefill_graphs"]
    with pytest.raises(StackFileError, match="needs a source for: prefill_graphs"):
        validate_stack(data)


def test_the_first_pass_names_its_prefill_dispatch(tmp_path):
    """What a serving simulation charges once a prefill iteration: LLaDA-8B's AR prefill on sglang,
    32 x 292 us = 9.344 ms at batch 1 and at batch 4 alike; none on a graphed prefill or a block decoding."""
    from dlmcost import api
    cols = api.sweep_first_pass("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", schemes=["ar"], prompts=[256], gens=[16],
                                batches=[1, 4], stack="sglang")
    assert cols["first_pass_dispatch_s"].tolist() == pytest.approx([LLADA_LAYERS * DENSE_US * 1e-6] * 2, rel=1e-9)
    graphed = api.sweep_first_pass("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", schemes=["ar"], prompts=[256], gens=[16],
                                   stack=graphed_prefill_stack(tmp_path))
    block = api.sweep_first_pass("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", schemes=["block"], prompts=[256],
                                 gens=[32], blocks=[32], stack="sglang")
    assert graphed["first_pass_dispatch_s"].tolist() == block["first_pass_dispatch_s"].tolist() == [0.0]


def test_the_prefill_dispatch_numbers_are_the_published_differences():
    """Each of sglang's prefill_eager numbers, from the eager-minus-graphed prefill it cites: PR #13094's
    Llama-3.1-8B (32 layers, 32 x 2 + 1 collectives at TP8) mean first token 29.97 ms eager, 19.66 ms
    graphed; PR #13081's Qwen3-Next-80B-A3B (48 MoE layers, 48 x 2 + 1 collectives at TP2) 99.17 / 67.83
    ms at 1,024 tokens and 101.52 / 68.72 ms at 2,048, beyond the dense layer; PR #12160's DeepSeek-V3
    (61 MLA layers, 58 of them MoE, 123 collectives) 82.6406 / 23.0978 ms, beyond both."""
    block = stack_data()["prefill_eager"]
    dense = ((29.97 - 19.66) * 1000 - 65 * COLLECTIVE_US) / 32
    assert block["us_per_layer"] == round(dense) == DENSE_US
    moe = (((99.17 - 67.83) + (101.52 - 68.72)) / 2 * 1000 - 97 * COLLECTIVE_US) / 48 - DENSE_US
    assert block["us_per_moe_layer"] == round(moe) == MOE_US
    mla = ((82.6406 - 23.0978) * 1000 - 61 * DENSE_US - 58 * MOE_US - 123 * COLLECTIVE_US) / 61
    assert block["us_per_mla_layer"] == round(mla) == MLA_US
    assert block["us_per_collective"] == stack_data()["eager"]["us_per_collective"] == COLLECTIVE_US
    assert block["overlaps_gpu"] is False


def test_an_eager_run_dispatches_its_prefills_as_prefill_eager_says(run):
    """--eager on sglang: the decode steps take the `eager:` block's 28 us a layer, the prompt prefill
    prefill_eager's 292 (both against the graphed run: LLaDA-8B's AR baseline, 32 layers)."""
    args = ("--scheme", "ar")
    graphed, graphed_passes = passes(run, "sglang", *args)
    eager, eager_passes = passes(run, "sglang", *args, "--eager")
    assert eager_passes["step"]["time_s"] - graphed_passes["step"]["time_s"] == pytest.approx(LLADA_LAYERS * 28e-6,
                                                                                             rel=1e-9)
    assert eager_passes["prefill"]["time_s"] == pytest.approx(graphed_passes["prefill"]["time_s"], rel=1e-12)
    assert eager["time_s"] - graphed["time_s"] == pytest.approx((eager["nfe"] - 1) * LLADA_LAYERS * 28e-6, rel=1e-9)


def test_an_eager_run_of_a_graphed_prefill_stack_dispatches_its_prefills_as_prefill_eager_says(run):
    """sglang-pcg graphs its prefills; with --eager nothing is graphed: its prefill takes prefill_eager's
    32 x 292 us more, its decode steps the `eager:` block's 32 x 28 us more (LLaDA-8B's AR baseline)."""
    graphed, graphed_passes = passes(run, "sglang-pcg", "--scheme", "ar")
    eager, eager_passes = passes(run, "sglang-pcg", "--scheme", "ar", "--eager")
    assert eager_passes["prefill"]["time_s"] - graphed_passes["prefill"]["time_s"] == pytest.approx(
        LLADA_LAYERS * DENSE_US * 1e-6, rel=1e-9)
    assert eager_passes["step"]["time_s"] - graphed_passes["step"]["time_s"] == pytest.approx(LLADA_LAYERS * 28e-6,
                                                                                             rel=1e-9)
