"""`dlmcost measure`: the numpy backend runs the schedule's pass shapes, and the whole path
measure -> calibrate -> predict with the calibrated stack works on the CPU."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from dlmcost.cli import main
from dlmcost.errors import UsageError
from dlmcost.calibration.measure import NumpyBackend, RandomModel, get_backend, measure_workload
from dlmcost.calibration.measurements import load_points
from dlmcost.inputs.models import resolve_model
from dlmcost.inputs.stacks import load_stack

ROOT = Path(__file__).resolve().parent.parent
CPU = str(ROOT / "examples" / "generic-cpu.yaml")
MICRO = dict(schema="dlmcost.model/v1", id="test/micro", family="custom", n_layers=2, d_model=128, n_heads=4,
             n_kv_heads=2, head_dim=32, ffn_dim=256, gated_mlp=True, vocab_size=512, tie_embeddings=True)


@pytest.fixture()
def micro(tmp_path):
    f = tmp_path / "micro.yaml"
    f.write_text(yaml.safe_dump(MICRO))
    return f


def test_forward_matches_a_direct_computation(micro):
    """One layer, bidirectional, no cache: compare with attention written out by hand."""
    spec = resolve_model(str(micro))
    be = NumpyBackend()
    m = RandomModel(spec, be, layers=1)
    x = be.randn(1, 3, 128, scale=0.1)
    caches = m.caches(1, 0, 3)
    probs = m.forward(x.copy(), caches, 0, False, 3, 3)
    L = m.layers[0]
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    qkv = h @ L["wqkv"]
    Q = qkv[0, :, :128].reshape(3, 4, 32)
    K = qkv[0, :, 128:192].reshape(3, 2, 32)
    V = qkv[0, :, 192:].reshape(3, 2, 32)
    out = np.zeros((3, 4, 32), np.float32)
    for head in range(4):
        kv = head // 2  # GQA: two query heads per K/V head
        s = Q[:, head] @ K[:, kv].T / np.sqrt(32)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, head] = (p / p.sum(-1, keepdims=True)) @ V[:, kv]
    y = x[0] + out.reshape(3, 128) @ L["wo"]
    g = (y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-6)) @ L["wup"]
    y = y + (g[:, :256] / (1 + np.exp(-g[:, :256])) * g[:, 256:]) @ L["wdown"]
    logits = (y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-6)) @ m.head
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    assert np.allclose(probs[0], want, atol=1e-5)


def test_random_weights_are_the_pool_scaled_and_leave_it_unchanged():
    be = NumpyBackend()
    pool = be.pool.copy()
    for shape in [(5,), (3, 4), (be.POOL,), (2, be.POOL // 2 + 3)]:
        w = be.randn(*shape, scale=0.5)
        flat = np.concatenate([pool] * 3)[:w.size]  # the pool repeated, then scaled
        assert w.shape == shape and w.dtype == np.float32 and np.array_equal(w.reshape(-1), flat * np.float32(0.5))
    assert np.array_equal(be.pool, pool)


def test_the_model_without_layers_shares_its_head(micro):
    spec = resolve_model(str(micro))
    be = NumpyBackend()
    m = RandomModel(spec, be, layers=2)
    bare = m.without_layers()
    assert bare.n_layers == 0 and bare.layers == [] and bare.caches(1, 0, 3) == []
    assert bare.head is m.head and bare.norm is m.norm and len(m.layers) == m.n_layers == 2
    x = be.randn(1, 3, 128, scale=0.1)
    logits = (x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)) @ m.head
    want = np.exp(logits - logits.max(-1, keepdims=True))
    assert np.allclose(bare.forward(x, [], 0, False, 3, 3), want / want.sum(-1, keepdims=True), atol=1e-6)


def test_causal_mask_hides_later_tokens():
    be = NumpyBackend()
    m = be.mask(2, 5, True)  # 3 cached keys, 2 queries
    assert np.isinf(m[0, 4]) and m[0, 3] == 0 and m[1, 4] == 0 and be.mask(2, 5, False) is None


def test_measure_reports_each_family_and_the_prediction(micro):
    spec = resolve_model(str(micro))
    res = measure_workload(spec, "generic-cpu", dict(scheme="block", prompt=16, gen=32, block=16, batch=2),
                           load_stack("compiled"), get_backend("numpy"), warmup=1, repeats=3, hardware=[CPU])
    names = [f["name"] for f in res["families"]]
    assert names == ["prefill", "step"] or set(names) >= {"step"}
    assert all(f["measured_ms"] > 0 and f["predicted_ms"] > 0 for f in res["families"])
    assert res["nfe"] == sum(f["count"] for f in res["families"])


def test_whole_path_measure_calibrate_predict(micro, tmp_path, capsys):
    out, prof = tmp_path / "m.yaml", tmp_path / "s.yaml"
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "block",
                 "--prompt", "16", "--gen", "32", "--block", "16", "--batch", "1,4", "--stack", "compiled",
                 "--repeats", "3", "-o", str(out), "--profile-out", str(prof), "-f", "json"])
    assert code == 0, capsys.readouterr().err
    points, base = load_points(out)
    assert len(points) == 2
    stack = load_stack(str(prof))
    assert "fitted by" in " ".join(stack.sources.values())
    # the calibrated stack predicts the measurements it was fitted to better than the one it started from
    from dlmcost.calibration.measurements import analysis_for, compare

    # (least squares: in total, not necessarily point by point; CPU timings of tiny passes are noisy)
    import math

    before = after = 0.0
    for p in points:
        after += math.log(compare(p, analysis_for(p, base, [CPU], stack)[0])["error"]) ** 2
        before += math.log(compare(p, analysis_for(p, base, [CPU], "compiled")[0])["error"]) ** 2
    assert after <= before + 1e-9


def test_examples_tiny_model_runs_on_numpy(tmp_path):
    spec = resolve_model(str(ROOT / "examples" / "tiny-dlm.yaml"))
    res = measure_workload(spec, "generic-cpu", dict(scheme="block", prompt=16, gen=16, block=16, batch=1),
                           load_stack("hf-eager"), get_backend("numpy"), warmup=0, repeats=1, layers=1,
                           hardware=[CPU])
    assert res["layers_built"] == 1 and res["measured_ms_per_forward"] > 0


def test_refusals(micro):
    with pytest.raises(UsageError, match="numpy backend runs on the CPU"):
        get_backend("numpy", "cuda")
    with pytest.raises(UsageError, match="unknown backend"):
        get_backend("jax")
    moe = resolve_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    with pytest.raises(UsageError, match="MoE"):
        RandomModel(moe, NumpyBackend())
    spec = resolve_model(str(micro))
    with pytest.raises(UsageError, match="--repeats"):
        measure_workload(spec, "generic-cpu", dict(scheme="ar", prompt=4, gen=4), load_stack("compiled"),
                         get_backend("numpy"), repeats=0, hardware=[CPU])


def test_torch_backend_agrees_with_numpy(micro):
    torch = pytest.importorskip("torch")
    spec = resolve_model(str(micro))
    nb, tb = NumpyBackend(), get_backend("torch", "cpu")
    mn, mt = RandomModel(spec, nb), RandomModel(spec, tb)
    for a, b in zip(mn.layers, mt.layers):  # same weights in both
        for k in a:
            b[k] = torch.from_numpy(a[k].copy())
    mt.head, mt.norm = torch.from_numpy(mn.head.copy()), torch.from_numpy(mn.norm.copy())
    x = nb.randn(2, 5, 128, scale=0.1)
    cn, ct = mn.caches(2, 3, 5), [(torch.from_numpy(k.copy()), torch.from_numpy(v.copy())) for k, v in mn.caches(2, 3, 5)]
    for causal in (False, True):
        pn = mn.forward(x.copy(), cn, 3, causal, 2, 5)
        pt = mt.forward(torch.from_numpy(x.copy()), ct, 3, causal, 2, 5)
        assert np.allclose(pn, pt.numpy(), atol=1e-5)


def test_measured_and_predicted_numbers_by_hand(micro, monkeypatch):
    """With the clock replaced by a known pass time (1 ms per layer built + 0.01 ms per query
    token + 0.001 ms per cached key), every measure number follows from docs/stacks.md's rule by
    hand: a family is timed at its first and last shape and averaged; with --layers 1 of the
    model's 2, time = head-only pass + (1-layer pass - head-only pass) x 2 / 1; measured ms per
    forward is the count-weighted mean over families; predicted ms is analyze's pass time."""
    import dlmcost.calibration.measure as measure
    from dlmcost import api

    def fake_time(model, B, q, c, causal, logits, kv_write, warmup, repeats):
        return 1e-3 * model.n_layers + 1e-5 * q + 1e-6 * c

    monkeypatch.setattr(measure, "time_pass", fake_time)
    spec = resolve_model(str(micro))
    wl = dict(scheme="block", prompt=16, gen=32, block=16, batch=2)
    res = measure_workload(spec, "generic-cpu", wl, load_stack("compiled"), get_backend("numpy"), layers=1,
                           hardware=[CPU])
    a = api.analyze(spec, "generic-cpu", hardware=[CPU], stack="compiled", **wl)["results"][0]
    prefill, step = res["families"]

    def by_hand(q, c):  # 2 layers' worth of the 1 built, plus the head-only part
        return 2 * 1e-3 + 1e-5 * q + 1e-6 * c

    assert prefill["measured_ms"] == pytest.approx(1e3 * by_hand(16, 0))
    # block steps: q = 16 over the prompt (16 keys), then over the prompt and the first block (32)
    assert step["measured_ms"] == pytest.approx(1e3 * (by_hand(16, 16) + by_hand(16, 32)) / 2)
    counts = {p["name"]: p["count"] for p in a["passes"]}
    assert (prefill["count"], step["count"]) == (counts["prefill"], counts["step"]) == (1, 32)
    assert res["measured_ms_per_forward"] == pytest.approx(
        (1 * prefill["measured_ms"] + 32 * step["measured_ms"]) / 33)
    for fam, p in zip(res["families"], a["passes"]):
        assert fam["predicted_ms"] == pytest.approx(1e3 * p["time_s"], rel=1e-12)
    step_pred = a["passes"][1]["time_s"]
    assert res["predicted_ms_per_forward"] == pytest.approx(1e3 * a["time_s"] / 33, rel=1e-12)
    # the table's ratio column is predicted / measured
    import csv
    import io

    from dlmcost.render.output import Output
    from dlmcost.render.report_stacks import render_measure

    buf = io.StringIO()
    render_measure(res, "csv", Output(buf))
    shown = [row["ratio pred/meas"] for row in csv.DictReader(io.StringIO(buf.getvalue()))]
    assert shown == [f"{f['predicted_ms'] / f['measured_ms']:.3g}" for f in (prefill, step)]
    assert shown[1] == f"{1e3 * step_pred / (1e3 * (by_hand(16, 16) + by_hand(16, 32)) / 2):.3g}"
