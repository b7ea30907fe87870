"""A value repeated in a comma list (or in a scenario's list), directly or under another name that
resolves to the same thing (two aliases of one GPU, two spellings of one precision, K/V format or
model id), is searched, simulated and listed once, in the order first given."""

from __future__ import annotations

import json

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
LLADA_LOWER = LLADA.lower()  # the same bundled model, typed in lower case


def test_plan_space_holds_each_resolved_value_once():
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.plan.scenario import build_space_and_pricing, read_scenario
    from dlmcost.serving.steptime import Decoding

    search = {"gpus": "h100,h100-sxm,mi300x,H100", "tp": [2, 1, 2], "precisions": ["fp8", "FP8", "bf16"],
              "kv_dtype": ["fp8", "FP8", "bf16"], "max_batch": [8, 8]}
    db = HardwareDB.load()
    space, _ = build_space_and_pricing(read_scenario(None, {"search": search}), [Decoding("block", 32, 2.0)], db)
    assert space.gpus == [db.get("h100"), db.get("mi300x")]
    assert space.tps == [1, 2]
    assert space.precisions == ["fp8", "bf16"]
    assert space.kv_dtypes == ["fp8", "bf16"]
    assert space.max_batches == [8]


def test_plan_models_named_twice_are_planned_once(run):
    rc, out, err = run("plan", f"{LLADA},{LLADA_LOWER}", "--rate", "1", "-g", "h100", "--tp", "1", "--precision",
                       "bf16", "--scheme", "dual-cache", "--requests", "100", "-f", "json")
    assert rc == 0, err
    record = json.loads(out)
    assert record["models"] == [LLADA]
    assert len({(d["model"], d["gpu"], d["scheme"]) for d in record["deployments"]}) == len(record["deployments"])


def test_serve_lists_each_deployment_model_and_load_once(run):
    rc, out, err = run("serve", f"{LLADA},{LLADA_LOWER}", "-g", "h100,h100-sxm", "--precision", "fp8,FP8",
                       "--kv-dtype", "fp8,FP8", "--tp", "1,1", "--scheme", "dual-cache,dual-cache", "--concurrency", "1,1",
                       "--requests", "100", "-f", "json")
    assert rc == 0, err
    deployments = json.loads(out)["deployments"]
    assert len(deployments) == 1
    assert deployments[0]["deployment"]["precision"] == "fp8"  # the name it resolves to, as plan prints it
    assert len(deployments[0]["points"]) == 1
