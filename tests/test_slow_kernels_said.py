"""Where a stack's release ran a part's kernels slower than tuned (its slow_kernels), serve and plan
say so, with what it adds to every pass, in their headers and JSON; nowhere else. Expected values
from the stack file: sglang and sglang-dllm on the MI300X and MI325X at fp8, 242.61 us a decoder
layer and 0.55 us a layer for each token a pass runs."""

import json

import pytest

SAID = "untuned kernels: {stack} on MI300X at fp8, 242.61 µs a decoder layer + 0.55 µs a layer for each token a pass runs"


@pytest.mark.parametrize("gpu,precision,applies", [("mi300x", "fp8", True), ("mi300x", "bf16", False),
                                                    ("h100", "fp8", False)])
def test_serve_says_what_the_release_adds_where_it_applies(run, gpu, precision, applies):
    args = ("serve", "Qwen/Qwen3-8B", "--gpu", gpu, "--precision", precision, "--rate", "1", "--requests", "200")
    rc, out, err = run(*args, "-f", "json")
    assert rc == 0, err
    (d,) = json.loads(out)["deployments"]
    assert d["deployment"]["slow_kernels"] == (dict(us_per_layer=242.61, us_per_token_layer=0.55) if applies else None)
    rc, out, err = run(*args, "--format", "table")
    assert rc == 0, err
    text = " ".join(out.split())  # the header wraps at the terminal's width
    assert (SAID.format(stack="sglang") in text) == applies
    assert ("untuned kernels" in text) == applies


def test_plan_lists_each_searched_stack_part_and_precision_it_applies_to(run):
    args = ("plan", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100,mi300x", "--tp", "1", "--rate", "2",
            "--requests", "200", "--jobs", "1")
    rc, out, err = run(*args, "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["search"]["slow_kernels"] == [
        dict(stack="sglang-dllm", gpu="MI300X", precision="fp8", us_per_layer=242.61, us_per_token_layer=0.55)]
    rc, out, err = run(*args)
    assert rc == 0, err
    assert SAID.format(stack="sglang-dllm") in " ".join(out.split())
    rc, out, err = run(*args[:3], "h100", *args[4:], "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["search"]["slow_kernels"] == []


def test_analyze_says_it_for_the_gpus_it_applies_to_parts_alike_together(run):
    """MI300X and MI325X take the same numbers (one phrase naming both); the H100 none (null)."""
    args = ("analyze", "Qwen/Qwen3-8B", "--gpu", "mi300x,h100,mi325x", "--precision", "fp8")
    rc, out, err = run(*args, "-f", "json")
    assert rc == 0, err
    said = {r["gpu"]: r["slow_kernels"] for r in json.loads(out)["results"]}
    on = dict(us_per_layer=242.61, us_per_token_layer=0.55)
    assert said == {"MI300X": on, "H100 SXM": None, "MI325X": on}
    rc, out, err = run(*args)
    assert rc == 0, err
    assert ("untuned kernels: sglang on MI300X and MI325X at fp8, 242.61 µs a decoder layer + 0.55 µs a layer for "
            "each token a pass runs") in " ".join(out.split())
    rc, out, err = run(*args[:5], "bf16")
    assert rc == 0, err
    assert "untuned kernels" not in out


def test_stacks_with_the_same_numbers_on_the_same_parts_are_named_together():
    """sglang-dllm extends sglang and carries its slow_kernels: a plan of both on MI300X and MI325X
    names them in one phrase; a stack on other parts, or with other numbers, keeps its own."""
    from dlmcost.render.evidence import slow_kernels_phrase

    def entry(stack, gpu, fixed=242.61, per_token=0.55):
        return dict(stack=stack, gpu=gpu, precision="fp8", us_per_layer=fixed, us_per_token_layer=per_token)

    tail = " (the release's slow_kernels: `dlmcost stacks`)"
    both = [entry(s, g) for s in ("sglang", "sglang-dllm") for g in ("MI300X", "MI325X")]
    assert slow_kernels_phrase(both) == ("untuned kernels: sglang and sglang-dllm on MI300X and MI325X at fp8, 242.61 µs "
                                         "a decoder layer + 0.55 µs a layer for each token a pass runs" + tail)
    apart = [entry("sglang", "MI300X"), entry("sglang", "MI325X"), entry("sglang-dllm", "MI300X"),
             entry("vllm", "MI300X", 100.0, 0)]
    assert slow_kernels_phrase(apart) == (
        "untuned kernels: sglang on MI300X and MI325X at fp8, 242.61 µs a decoder layer + 0.55 µs a layer for each "
        "token a pass runs; sglang-dllm on MI300X at fp8, 242.61 µs a decoder layer + 0.55 µs a layer for each token "
        "a pass runs; vllm on MI300X at fp8, 100 µs a decoder layer" + tail)
    assert slow_kernels_phrase([]) == ""
