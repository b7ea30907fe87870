"""Any result as a pandas DataFrame (the `pandas` extra, in the test extra so CI runs these), with
no loop for the caller to write; without pandas, one clear error naming what to install."""

from __future__ import annotations

import sys

import pytest

from dlmcost import api
from dlmcost.errors import MissingExtraError

pd = pytest.importorskip("pandas")

MODEL = "GSAI-ML/LLaDA-8B-Instruct"


def test_analyze_as_a_frame():
    a = api.analyze(MODEL, "h100,mi300x,tpu-v5e", precision="fp8")  # an unsupported GPU rides along
    df = a.to_pandas()
    assert list(df["gpu"]) == [r.gpu for r in a.results]
    supported = [r for r in a.results if r.supported]
    rows = df[df["supported"]]
    assert list(rows["tokens_per_s"]) == [r.tokens_per_s for r in supported]
    assert list(rows["memory.total_bytes"]) == [r.memory.total_bytes for r in supported]
    assert list(rows["speedup_vs_ar"]) == [r.speedup_vs_ar for r in supported]
    assert set(df["model"]) == {MODEL}
    passes = api.to_frame(a, what="passes")
    assert len(passes) == sum(len(r.passes) for r in supported)
    assert list(passes[passes["gpu"] == "H100 SXM"]["name"]) == [p.name for p in supported[0].passes]


def test_sweep_as_a_frame():
    s = api.sweep(MODEL, gpus="h100", schemes=["ar", "dual-cache"], blocks=[8, 32], batches=[1, 4])
    df = api.to_frame(s)
    rows = api.sweep_rows(s)
    assert len(df) == len(rows) and list(df.columns) == list(rows[0])
    assert list(df["time_s"]) == [r["time_s"] for r in rows]
    assert df["block"].isna().sum() == sum(r["block"] is None for r in rows)  # AR ignores the block


def test_serve_and_plan_as_frames():
    c = api.serve_many([MODEL], [api.ClosedLoop(2), api.ClosedLoop(8)], [api.ServeSetup(gpu="h100")], requests=200)
    df = api.to_frame(c)
    points = c.results[0].points
    assert list(df["concurrency"]) == [2, 8]
    assert list(df["latency_s.p99"]) == [p.latency_s["p99"] for p in points]
    assert set(df["deployment.gpu"]) == {"H100 SXM"}
    p = api.run_plan(None, dict(traffic=dict(rate=1.0), search=dict(gpus="h100", tp=[1], precisions=["bf16"]),
                                simulation=dict(requests=200)), model=MODEL)
    df = api.to_frame(p)
    assert list(df["usd_per_mtok"]) == [d.usd_per_mtok for d in p.deployments]
    assert list(df["max_running"]) == [d.max_batch for d in p.deployments]


def test_catalogs_as_frames():
    gpus = api.to_frame(api.list_gpus())
    assert "H100 SXM" in set(gpus["name"]) and "peak_tflops.bf16" in gpus.columns
    models = api.to_frame(api.list_models())
    assert set(models["id"]) == set(m["id"] for m in api.list_models())
    info = api.to_frame(api.model_info(api.resolve_model("deepseek-ai/DeepSeek-V3")))
    assert len(info) == 1 and info["moe.n_experts"][0] == 256


def test_without_pandas_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError) as e:
        api.analyze(MODEL, "h100").to_pandas()
    assert "pip install 'pandas>=2.0'" in e.value.message and "'.[pandas]'" in e.value.message
