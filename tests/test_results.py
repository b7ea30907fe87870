"""The typed results hold exactly what their schema says.

dlmcost builds its result records without validating them (`model_construct`, so that a table
never pays for validators it does not use). These tests are the validation: every kind of
result, dumped to JSON and validated back in strict mode (no int/float/str coercion), must come
back equal, so a float where the schema says int, a numpy scalar, a missing or misspelt key fails
here rather than in a user's parser.
"""

from __future__ import annotations

import pytest

from dlmcost import api
from dlmcost.results import AnalyzeResult, SweepResult

CASES = [
    ("GSAI-ML/LLaDA-8B-Instruct", dict()),
    ("GSAI-ML/LLaDA-8B-Instruct", dict(scheme="block", block=32, store_pass=True, cfg=True, batch=4)),
    ("GSAI-ML/LLaDA-8B-Instruct", dict(scheme="dual-cache", tpf=3, tp=2)),
    ("GSAI-ML/LLaDA-8B-Instruct", dict(scheme="multi-block", block=32)),
    ("GSAI-ML/LLaDA-8B-Instruct", dict(scheme="windowed-refresh", block=32)),
    ("GSAI-ML/LLaDA-8B-Instruct", dict(scheme="draft-verify", block=8, tpf=3)),
    ("meta-llama/Meta-Llama-3-8B", dict(scheme="ar", precision="fp8")),
    ("inclusionAI/LLaDA2.0-mini", dict(scheme="prefix-cache", tp=2, ep=2)),
    ("deepseek-ai/DeepSeek-V3", dict(scheme="ar", tp=8, precision="fp8")),
    ("google/diffusiongemma-26B-A4B-it", dict()),
]


@pytest.mark.parametrize("model, workload", CASES, ids=[f"{m.split('/')[1]}-{w.get('scheme', 'default')}" for m, w in CASES])
def test_analyze_result_survives_a_strict_round_trip(model, workload):
    # a10g and tpu-v5e have no fp8 tensor cores: an `Unsupported` entry rides along
    result = api.analyze(model, ["h100", "mi300x", "a10g"], **workload)
    back = AnalyzeResult.model_validate_json(result.model_dump_json(), strict=True)
    assert back == result
    assert back.model_dump() == result.model_dump()
    # what the tables and gates read instead of model_dump(): the same data, the same key order
    assert result.plain() == result.model_dump()
    assert list(result.plain()["results"][0]) == list(result.model_dump()["results"][0])


def test_sweep_result_survives_a_strict_round_trip():
    result = api.sweep("GSAI-ML/LLaDA-8B-Instruct", gpus="h100,a10g", schemes=["ar", "mdm", "block", "dual-cache"],
                       blocks=[8, 32], batches=[1, 4], precisions=["bf16", "fp8"])
    assert len(result.rows) > 10
    back = SweepResult.model_validate_json(result.model_dump_json(), strict=True)
    assert back == result
    assert result.plain() == result.model_dump()


def test_a_result_built_without_validation_still_dumps_to_json():
    # the point of model_construct: nothing validates a table; a JSON dump builds the serializer
    result = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100")
    assert '"tokens_per_s"' in result.model_dump_json()
