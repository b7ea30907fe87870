"""`dlmcost measure`: the layers and head it builds compute what a decoder computes (masks by
hand, sliding windows, MoE), it times the shapes the scheme's pass families run (by hand, per
scheme), every part of a pass is inside the timed region (known sleeps injected), the timer
itself measures (a known sleep, GEMMs of known FLOPs, growth with the batch), the memory bound
is stated and enforced, and the whole path measure -> calibrate -> predict works on the CPU.

Timing tests compare ratios with generous bounds and take the best of three attempts, so a
loaded two-core machine cannot make them fail; a broken timer fails every attempt."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import dlmcost.calibration.measure as measure
from dlmcost.calibration.backends import NumpyBackend, get_backend
from dlmcost.calibration.layers import Head, Layer
from dlmcost.calibration.measure import Shape, family_shapes, measure_workload, time_call, time_pass
from dlmcost.cli import main
from dlmcost.engine.workload import Workload
from dlmcost.errors import UsageError
from dlmcost.inputs.models import ModelSpec, resolve_model
from dlmcost.inputs.models.spec import LayerKind, MoESpec
from dlmcost.inputs.stacks import load_stack

ROOT = Path(__file__).resolve().parent.parent
CPU = str(ROOT / "examples" / "generic-cpu.yaml")
MICRO = dict(schema="dlmcost.model/v1", id="test/micro", family="custom", n_layers=2, d_model=128, n_heads=4,
             n_kv_heads=2, head_dim=32, ffn_dim=256, gated_mlp=True, vocab_size=512, tie_embeddings=True)
SPEC = ModelSpec(**{k: v for k, v in MICRO.items() if k != "schema"})


@pytest.fixture()
def micro(tmp_path):
    f = tmp_path / "micro.yaml"
    f.write_text(yaml.safe_dump(MICRO))
    return f


def rms(x):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)


def softmax(s):
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def by_hand_layer(L: Layer, x, seen):
    """One layer written out head by head; seen[i, j]: query i sees key j (no cache)."""
    q = x.shape[1]
    qkv = rms(x[0]) @ L.wqkv
    Q, K, V = qkv[:, :128].reshape(q, 4, 32), qkv[:, 128:192].reshape(q, 2, 32), qkv[:, 192:].reshape(q, 2, 32)
    out = np.zeros((q, 4, 32), np.float32)
    for head in range(4):
        kv = head // 2  # GQA: two query heads per K/V head
        s = np.where(seen, Q[:, head] @ K[:, kv].T / np.sqrt(32), -np.inf)
        out[:, head] = softmax(s) @ V[:, kv]
    y = x[0] + out.reshape(q, 128) @ L.wo
    up, down = L.mlp
    g = rms(y) @ up
    return y + (g[:, :256] / (1 + np.exp(-g[:, :256])) * g[:, 256:]) @ down


@pytest.mark.parametrize("causal", [False, True])
def test_a_layer_matches_a_direct_computation(causal):
    be = NumpyBackend()
    L = Layer(SPEC, SPEC.layer_groups[0][1], be)
    x = be.randn(1, 5, 128, scale=0.1)
    got = L.forward(x.copy(), L.cache(1, 0, 5), 0, causal)
    seen = np.tril(np.ones((5, 5), bool)) if causal else np.ones((5, 5), bool)
    assert np.allclose(got[0], by_hand_layer(L, x, seen), atol=1e-5)


def test_a_sliding_layer_sees_only_its_window():
    """Window 3 (|i - j| < 3, transformers' masks), bidirectional, 6 new tokens, no cache."""
    kind = LayerKind(attention="sliding", window=3, head_dim=32, n_kv_heads=2)
    spec = SPEC.model_copy(update=dict(layers=((2, kind),)))
    be = NumpyBackend()
    L = Layer(spec, kind, be)
    x = be.randn(1, 6, 128, scale=0.1)
    i, j = np.arange(6)[:, None], np.arange(6)[None, :]
    got = L.forward(x.copy(), L.cache(1, 0, 6), 0, False)
    assert np.allclose(got[0], by_hand_layer(L, x, np.abs(i - j) < 3), atol=1e-5)


def test_masks_by_hand():
    be = NumpyBackend()
    # 3 cached keys (positions 0-2), 2 queries at positions 3 and 4; causal: query 3 does not see key 4
    want = np.array([[0, 0, 0, 0, -np.inf], [0, 0, 0, 0, 0]])
    assert np.array_equal(be.mask(2, 3, 3, True, None), want)
    assert be.mask(2, 3, 3, False, None) is None
    # window 2, causal, 1 cached key kept of c = 10 (positions 9; queries at 10, 11)
    want = np.array([[0, 0, -np.inf], [-np.inf, 0, 0]])
    assert np.array_equal(be.mask(2, 1, 10, True, 2), want)


def test_a_sliding_layer_keeps_the_window_of_cached_keys():
    """A pass over c = 100 cached tokens reads W - 1 = 7 of them in a sliding layer, all 100 in a
    full one (the cache the layer attends over: its keys axis)."""
    sliding = LayerKind(attention="sliding", window=8, head_dim=32, n_kv_heads=2)
    full = LayerKind(head_dim=32, n_kv_heads=2)
    spec = SPEC.model_copy(update=dict(n_layers=3, layers=((2, sliding), (1, full))))
    be = NumpyBackend()
    s = Shape(B=1, q=4, c=100, kv_write=0, logits=4, causal=False, self_condition=False)
    kept = {}
    for part in measure.parts(spec, be, 1, 4):
        if isinstance(part, measure.LayersPart):
            _, caches = part.setup(s)
            kept[part.kind.attention] = caches[0][0].shape[2] - s.q
            assert part.scale == {"sliding": 2, "full": 1}[part.kind.attention]
    assert kept == {"sliding": 7, "full": 100}


def test_the_head_is_embedding_norm_lm_head_softcap_and_sampler():
    spec = SPEC.model_copy(update=dict(logit_softcap=30.0))
    be = NumpyBackend()
    h = Head(spec, be)
    tokens = np.array([[3, 7, 9]])
    x = h.embed(tokens)
    assert np.array_equal(x[0], h.embedding[[3, 7, 9]])
    conf, tok = h.sample(h.logits(x, 2))
    logits = 30.0 * np.tanh(rms(x[0, 1:]) @ h.embedding.T / 30.0)
    p = softmax(logits)
    assert np.allclose(conf[0], p.max(-1), atol=1e-6) and np.array_equal(tok[0], p.argmax(-1))
    prev = be.randn(1, 3, 512)
    assert np.allclose(h.embed(tokens, prev)[0], x[0] + softmax(prev[0]) @ h.embedding, atol=1e-5)


def test_an_moe_layer_routes_each_token_to_its_top_k_experts():
    moe = MoESpec(n_experts=8, experts_per_token=2, expert_ffn_dim=64, n_moe_layers=2)
    kind = LayerKind(head_dim=32, n_kv_heads=2, dense_mlp=False, moe=True)
    spec = SPEC.model_copy(update=dict(ffn_dim=0, moe=moe, layers=((2, kind),)))
    be = NumpyBackend()
    L = Layer(spec, kind, be, experts=measure.experts_to_build(spec, 3))
    assert len(L.experts) == 6  # 3 tokens x 2: no more can be touched
    h = be.randn(3, 128, scale=0.1)
    logits = h @ L.router
    want, slots = np.zeros_like(h), {}
    for t in range(3):
        top = sorted(np.argsort(logits[t])[-2:])  # the 2 highest router scores; built experts in order of first use
        for e, g in zip(top, softmax(logits[t, top])):
            up, down = L.experts[slots.setdefault(int(e), len(slots))]
            u = h[t] @ up
            want[t] += g * ((u[:64] / (1 + np.exp(-u[:64])) * u[64:]) @ down)
    assert np.allclose(L._moe(h), want, atol=1e-5)


# --- the shapes measure times: from the scheme's pass families, by hand ------------------------


def shapes_of(spec, **wl):
    return {f["name"]: (f["count"], f["shapes"]) for f in family_shapes(spec, Workload(**wl))}


def S(q, c, kv, logits, causal, sc=False, B=1):
    return Shape(B=B, q=q, c=c, kv_write=kv, logits=logits, causal=causal, self_condition=sc)


def test_shapes_come_from_the_pass_families_ar_and_block():
    # AR: a causal prefill of the prompt (its K/V, the last position's logits: the first token),
    # then one causal token per step over the Lp + t tokens before it (t = 0..2: the 4th token is
    # sampled by the last step, never fed)
    assert shapes_of(SPEC, scheme="ar", prompt=8, gen=4, batch=2) == {
        "prefill": (1, [S(8, 0, 8, 1, True, B=2)]),
        "step": (3, [S(1, 8, 1, 1, True, B=2), S(1, 10, 1, 1, True, B=2)])}
    # without a prompt the first token needs a pass of its own, over nothing cached: 4 steps, t = 0..3
    assert shapes_of(SPEC, scheme="ar", prompt=0, gen=4) == {"step": (4, [S(1, 0, 1, 1, True), S(1, 3, 1, 1, True)])}
    # block: causal prefill; per block of 16, 16 bidirectional steps over the prompt and the
    # finished blocks (c = 16, then 32), each writing 16 / 16 = 1 token's K/V, logits for all 16
    assert shapes_of(SPEC, scheme="block", prompt=16, gen=32, block=16, steps=32) == {
        "prefill": (1, [S(16, 0, 16, 1, True)]),
        "step": (32, [S(16, 16, 1, 16, False), S(16, 32, 1, 16, False)])}
    # mdm with CFG: the whole canvas, bidirectional, no cache, batch doubled
    assert shapes_of(SPEC, scheme="mdm", prompt=8, gen=8, steps=4, cfg=True) == {
        "step": (4, [S(16, 0, 0, 16, False, B=2)])}


def test_shapes_of_diffusion_gemma_self_condition_and_a_causal_store():
    spec = SPEC.model_copy(update=dict(self_conditioning=True))
    # prefill without logits; per canvas of 16 (2 canvases, 4 steps each): 1 step, 3 self-conditioned
    # steps, bidirectional; a causal store pass for every canvas but the last
    assert shapes_of(spec, scheme="diffgemma", prompt=8, gen=32, block=16, steps=8) == {
        "prefill": (1, [S(8, 0, 8, 0, True)]),
        "step": (2, [S(16, 8, 0, 16, False), S(16, 24, 0, 16, False)]),
        "step-sc": (6, [S(16, 8, 0, 16, False, sc=True), S(16, 24, 0, 16, False, sc=True)]),
        "store": (1, [S(16, 8, 16, 0, True)])}


def test_measure_times_exactly_the_family_shapes(micro, monkeypatch):
    """Every (part, shape) measure times, recorded: the head and the layers see each distinct
    shape of the schedule once, with the family's mask."""
    seen = []

    def spy(part, s, warmup, repeats):
        seen.append((type(part).__name__, s))
        return 1e-3

    monkeypatch.setattr(measure, "time_pass", spy)
    spec = resolve_model(str(micro))
    measure_workload(spec, "generic-cpu", dict(scheme="ar", prompt=8, gen=4), load_stack("compiled"),
                     get_backend("numpy"), hardware=[CPU])
    layers = [s for name, s in seen if name == "LayersPart"]
    assert layers == [S(8, 0, 8, 1, True), S(1, 8, 1, 1, True), S(1, 10, 1, 1, True)]
    assert all(s.causal for s in layers)


# --- what is inside the timed region --------------------------------------------------------


def slow(monkeypatch, cls, name, seconds, calls):
    original = getattr(cls, name)

    def wrapped(self, *args, **kw):
        calls.append(name)
        time.sleep(seconds)
        return original(self, *args, **kw)

    monkeypatch.setattr(cls, name, wrapped)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_lm_head_sampler_and_every_layer_run_inside_the_timed_region(micro, monkeypatch, backend):
    """Known sleeps in the LM head (30 ms), the sampler (20 ms) and each layer's forward (10 ms):
    a pass that runs them all takes at least 30 + 20 + 2 x 10 ms (the model's 2 layers; 1 built,
    scaled x 2); the forward is called once per warm-up and timed run, no more, no less."""
    calls = []
    slow(monkeypatch, Head, "logits", 0.03, calls)
    slow(monkeypatch, Head, "sample", 0.02, calls)
    slow(monkeypatch, Layer, "forward", 0.01, calls)
    monkeypatch.setattr(measure, "ENOUGH_S", 1e9)  # every repeat runs, so the calls can be counted
    if backend == "torch":
        pytest.importorskip("torch")
    spec = resolve_model(str(micro))
    res = measure_workload(spec, "generic-cpu", dict(scheme="mdm", prompt=8, gen=8, steps=2), load_stack("compiled"),
                           get_backend(backend, "cpu"), warmup=2, repeats=3, hardware=[CPU])
    (step,) = res["families"]
    assert step["measured_ms"] >= 30 + 20 + 2 * 10
    assert calls.count("forward") == calls.count("logits") == calls.count("sample") == 2 + 3


def test_time_call_calls_once_per_run_and_times_a_known_sleep():
    be, calls = NumpyBackend(), []

    def nap():
        calls.append(1)
        time.sleep(0.02)

    t = time_call(nap, be, 2, 5)
    assert len(calls) == 7 and 0.02 <= t < 1.0  # a sleep never ends early; a loaded machine only delays it


def test_time_call_stops_once_the_timed_runs_add_up(monkeypatch):
    """A clock that advances 20 ms per reading pair: runs of 20 ms; with enough_s = 50 ms the
    third run brings the total to 60 ms and the fourth and fifth are not run."""
    clock, calls = iter(0.02 * i for i in range(100)), []
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(clock))
    assert time_call(lambda: calls.append(1), NumpyBackend(), 1, 5, enough_s=0.05) == pytest.approx(0.02)
    assert len(calls) == 1 + 3


def test_time_call_stops_the_warm_up_once_it_adds_up(monkeypatch):
    """`--warmup 1000000000` ran until killed. A clock that advances 125 ms per reading: runs of
    125 ms; with enough_s = 0.5 s the warm-up stops after 4 runs (0.5 s), then the timed runs
    after 4 more, whatever the counts asked for; without enough_s the counts hold (2 + 3)."""
    clock, calls = iter(0.125 * i for i in range(1000)), []
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(clock))
    assert time_call(lambda: calls.append(1), NumpyBackend(), 10**9, 10**9, enough_s=0.5) == pytest.approx(0.125)
    assert len(calls) == 4 + 4
    calls.clear()
    time_call(lambda: calls.append(1), NumpyBackend(), 2, 3)
    assert len(calls) == 2 + 3


def test_a_huge_warm_up_ends(micro, capsys, monkeypatch):
    """Through the command: a billion warm-up and timed runs per shape end (after 10 ms of each
    here, instead of ENOUGH_S's half a second, to keep the test short)."""
    import time as clock

    monkeypatch.setattr(measure, "ENOUGH_S", 0.01)
    t0 = clock.perf_counter()
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "ar", "--prompt", "8",
                 "--gen", "4", "--warmup", "1000000000", "--repeats", "1000000000", "-f", "json"])
    assert code == 0, capsys.readouterr().err
    assert clock.perf_counter() - t0 < 60
    assert json.loads(capsys.readouterr().out)["measurements"][0]["warmup"] == 10**9


def test_a_batch_list_of_thousands_is_refused_before_any_timing(micro, capsys, monkeypatch):
    """--batch 1,...,10000 once timed every one (about a second each here): hours, not one line."""
    monkeypatch.setattr(measure, "measure_workload", lambda *a, **k: pytest.fail("timed before the list was checked"))
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "ar", "--prompt", "8",
                 "--gen", "4", "--batch", ",".join(map(str, range(1, 10_001)))])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "10,000 batch sizes" in err and "at most 64" in err


def test_a_batch_size_given_twice_is_measured_once(micro, capsys, monkeypatch):
    monkeypatch.setattr(measure, "ENOUGH_S", 0.01)
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "ar", "--prompt", "8",
                 "--gen", "4", "--batch", "2,1,2", "-f", "json"])
    assert code == 0, capsys.readouterr().err
    assert [m["workload"]["batch"] for m in json.loads(capsys.readouterr().out)["measurements"]] == [2, 1]


def test_random_weights_are_the_pool_tiled_and_scaled():
    """numpy's weights: the backend's pool of random numbers repeated over the shape (2.5 pools
    here, so the last copy is cut) and scaled, as float32."""
    be = NumpyBackend()
    n = be.POOL
    w = be.randn(5, n // 2, scale=0.5)
    expected = np.concatenate([be.pool, be.pool, be.pool[: n // 2]]) * np.float32(0.5)
    assert w.dtype == np.float32 and w.shape == (5, n // 2)
    assert np.array_equal(w.reshape(-1), expected)


def best_of_three(check):
    """A timing comparison passes if any of three attempts does (load on the machine only slows
    things; a broken timer fails all three). The attempts stop at the first that passes."""
    results = []
    for _ in range(3):
        results.append(check())
        if results[-1][0]:
            return
    assert False, [why for _, why in results]


def test_time_grows_with_gemm_flops():
    """An n x n GEMM at n = 512 has 8x the FLOPs of n = 256: it takes more than twice as long."""
    be = NumpyBackend()
    a, b = be.randn(512, 512), be.randn(512, 512)
    small, big = a[:256, :256].copy(), b[:256, :256].copy()

    def check():
        t_small = time_call(lambda: small @ big, be, 1, 7)
        t_big = time_call(lambda: a @ b, be, 1, 7)
        return t_big > 2 * t_small, (t_small, t_big)

    best_of_three(check)


def test_a_pass_takes_longer_with_more_sequences():
    """One layer (d = 512, FFN 2048) at q = 16: batch 1 < 4 < 16 (4x the FLOPs each step), each
    step more than 1.5x."""
    spec = SPEC.model_copy(update=dict(d_model=512, n_heads=8, n_kv_heads=2, head_dim=64, ffn_dim=2048))
    be = NumpyBackend()
    part = measure.LayersPart(spec, spec.layer_groups[0][1], 2, 1, be, 0)

    def check():
        t = [time_pass(part, S(16, 16, 16, 0, False, B=B), 1, 5) for B in (1, 4, 16)]
        return t[1] > 1.5 * t[0] and t[2] > 1.5 * t[1], t

    best_of_three(check)


def test_measured_time_follows_the_pass_flops(micro):
    """block at prompt 256: the prefill (q = 256 tokens) has ~16x the layer FLOPs of a step
    (q = 16): it is measured more than 3x as long."""
    spec = resolve_model(str(micro)).model_copy(update=dict(d_model=512, n_heads=8, head_dim=64, ffn_dim=2048))

    def check():
        res = measure_workload(spec, "generic-cpu", dict(scheme="block", prompt=256, gen=16, block=16, steps=1),
                               load_stack("compiled"), get_backend("numpy"), warmup=1, repeats=5, hardware=[CPU])
        prefill, step = res["families"]
        return prefill["measured_ms"] > 3 * step["measured_ms"], (prefill["measured_ms"], step["measured_ms"])

    best_of_three(check)


# --- the numbers, by hand ---------------------------------------------------------------------


def test_measured_and_predicted_numbers_by_hand(micro, monkeypatch):
    """With the clock replaced by known times (head: 0.1 ms + 1 us per logit position; a built
    layer: 1 ms + 10 us per query token + 1 us per cached key), every measure number follows by
    hand: pass = head + 2 layers (the micro model's 2, one built and scaled x 2); a family is timed
    at its first and last shape and averaged; measured ms per forward is the count-weighted mean;
    predicted ms is analyze's pass time."""
    from dlmcost import api

    def fake_time(part, s, warmup, repeats):
        if isinstance(part, measure.HeadPart):
            return 1e-4 + 1e-6 * s.logits
        return len(part.layers) * (1e-3 + 1e-5 * s.q + 1e-6 * s.c)

    monkeypatch.setattr(measure, "time_pass", fake_time)
    spec = resolve_model(str(micro))
    wl = dict(scheme="block", prompt=16, gen=32, block=16, batch=2)
    res = measure_workload(spec, "generic-cpu", wl, load_stack("compiled"), get_backend("numpy"), hardware=[CPU])
    a = api.analyze(spec, "generic-cpu", hardware=[CPU], stack="compiled", **wl)["results"][0]
    prefill, step = res["families"]

    def by_hand(q, c, logits):
        return 1e-4 + 1e-6 * logits + 2 * (1e-3 + 1e-5 * q + 1e-6 * c)

    assert prefill["measured_ms"] == pytest.approx(1e3 * by_hand(16, 0, 1))
    assert step["measured_ms"] == pytest.approx(1e3 * (by_hand(16, 16, 16) + by_hand(16, 32, 16)) / 2)
    assert (prefill["count"], step["count"]) == (1, 32)
    assert res["measured_ms_per_forward"] == pytest.approx((prefill["measured_ms"] + 32 * step["measured_ms"]) / 33)
    for fam, p in zip(res["families"], a["passes"]):
        assert fam["predicted_ms"] == pytest.approx(1e3 * p["time_s"], rel=1e-12)
    assert res["predicted_ms_per_forward"] == pytest.approx(1e3 * a["time_s"] / 33, rel=1e-12)
    import csv
    import io

    from dlmcost.render.output import Output
    from dlmcost.render.report_stacks import render_measurements

    buf = io.StringIO()
    render_measurements([res], "csv", Output(buf))
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert [r["batch"] for r in rows] == ["2", "2"]  # the workload's batch, on every row
    assert [r["ratio pred/meas"] for r in rows] == [f"{f['predicted_ms'] / f['measured_ms']:.3g}" for f in (prefill, step)]
    assert [r["mask"] for r in rows] == ["causal", "bidirectional"]


# --- memory -------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["GSAI-ML/LLaDA-8B-Instruct", "Qwen/Qwen2.5-7B", "mistralai/Mixtral-8x7B-Instruct-v0.1"])
def test_full_size_models_need_one_layer_and_the_head_not_the_model(model):
    """A 512-token pass at batch 1 needs the largest of the head (the LM head, V x d, and the 512
    rows of an untied embedding the lookup reads) and one layer, plus that part's activations: far
    less than the model's weights, and at least that part's weights (fp32 bytes)."""
    spec = resolve_model(model)
    s = [S(512, 0, 512, 512, False)]
    need = max(e for _, e in measure.part_elements(spec, s, 1)) * 4
    head = (spec.vocab_size + (0 if spec.tie_embeddings else 512)) * spec.d_model * 4
    assert head <= need < 0.5 * spec.params_total * 4


def test_over_the_memory_bound_is_one_clear_error(micro, monkeypatch, capsys):
    monkeypatch.setattr(measure, "available_bytes", lambda be: (1e5, "a test bound"))
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "ar",
                 "--prompt", "8", "--gen", "4"])
    err = capsys.readouterr().err
    assert code == 2 and "needs about" in err and "a test bound" in err and len(err.strip().splitlines()) == 1


def test_the_bound_is_the_least_of_the_machine_the_address_space_limit_and_the_cgroup(monkeypatch):
    """80% of each: MemAvailable 10 GB, what `ulimit -v` leaves 5 GB, what the cgroup leaves 2 GB
    -> 1.6 GB, said to be the cgroup's; without the cgroup's, 4 GB from the address-space limit."""
    from dlmcost.calibration import backends

    monkeypatch.setattr(backends, "_proc_kib", lambda path, key: {"MemAvailable:": 10e9}.get(key))
    monkeypatch.setattr(backends, "address_space_left", lambda: 5e9)
    monkeypatch.setattr(backends, "cgroup_memory_left", lambda: 2e9)
    be = NumpyBackend()
    limit, why = backends.available_bytes(be)
    assert limit == pytest.approx(1.6e9) and "memory cgroup" in why
    monkeypatch.setattr(backends, "cgroup_memory_left", lambda: None)
    limit, why = backends.available_bytes(be)
    assert limit == pytest.approx(4e9) and "address-space limit (ulimit -v)" in why
    monkeypatch.setattr(backends, "address_space_left", lambda: None)
    assert backends.available_bytes(be) == (pytest.approx(8e9), "80% of the memory available")


def test_what_an_address_space_limit_and_a_cgroup_leave(monkeypatch, tmp_path):
    """RLIMIT_AS 3 GiB with 1 GiB mapped (VmSize) leaves 2 GiB; cgroup v2 `max` is no limit, a
    v2 or v1 limit less its usage is what is left, and v1's largest int64 is no limit."""
    import resource

    from dlmcost.calibration import backends

    monkeypatch.setattr(resource, "getrlimit", lambda which: (3 << 30, resource.RLIM_INFINITY))
    monkeypatch.setattr(backends, "_proc_kib", lambda path, key: float(1 << 30) if key == "VmSize:" else None)
    assert backends.address_space_left() == 2 << 30
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert backends.address_space_left() is None

    def cgroup(limit: str, usage: str):
        (tmp_path / "limit").write_text(limit)
        (tmp_path / "usage").write_text(usage)
        monkeypatch.setattr(backends, "_cgroup_files", lambda: [(str(tmp_path / "none"), str(tmp_path / "none")),
                                                                 (str(tmp_path / "limit"), str(tmp_path / "usage"))])
        return backends.cgroup_memory_left()

    assert cgroup("max\n", "123\n") is None
    assert cgroup("2147483648\n", "536870912\n") == 1536 << 20
    assert cgroup("9223372036854771712\n", "1\n") is None
    assert cgroup("100\n", "200\n") == 0


def test_an_address_space_limit_is_a_clear_error_not_a_memory_error():
    """LLaDA-8B's largest part (its LM head, about 2.1 GB at this shape) under an address-space
    limit 1.5 GB above what the process has mapped: refused up front with the limit named (before
    this bound, numpy's MemoryError ended in an internal error, exit 70). In a process of its own,
    forked (tests/forkrun.py), since the limit cannot be lifted once lowered."""
    import os
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import forkrun

    code = """
import resource, sys
vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))
resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 29), resource.RLIM_INFINITY))
from dlmcost.cli import main
sys.exit(main(sys.argv[1:]))
"""
    args = ["measure", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--scheme", "block", "--prompt", "32", "--gen",
            "32", "--block", "32", "--steps", "8"]
    result = forkrun.run({"m": forkrun.script(code, args)}, dict(os.environ), limit_s=60)["m"]
    assert result is not None, "still running at the deadline"
    rc, out, err = result
    assert rc == 2 and out == "" and err.count("\n") == 1, (rc, err)
    assert err.startswith("error: measuring GSAI-ML/LLaDA-8B-Instruct needs about") and "ulimit -v" in err, err


def test_running_out_of_memory_within_the_bound_is_a_clear_error(micro, monkeypatch, capsys):
    def refused(*args, **kwargs):
        raise MemoryError("Unable to allocate 1.93 GiB for an array with shape (126464, 4096)")

    monkeypatch.setattr(measure, "time_shapes", refused)
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "ar",
                 "--prompt", "8", "--gen", "4"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: measuring test/micro ran out of memory (Unable to allocate 1.93 GiB"), err


# --- the whole path and the refusals ----------------------------------------------------------


def test_whole_path_measure_calibrate_predict(micro, tmp_path, capsys):
    out, prof = tmp_path / "m.yaml", tmp_path / "s.yaml"
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--scheme", "block",
                 "--prompt", "16", "--gen", "32", "--block", "16", "--batch", "1,4", "--stack", "compiled",
                 "--repeats", "3", "-o", str(out), "--profile-out", str(prof), "-f", "json"])
    out_text, err = capsys.readouterr()
    assert code == 0, err
    printed = json.loads(out_text)  # one JSON document: both batches and the fit to them
    assert [m["workload"]["batch"] for m in printed["measurements"]] == [1, 4]
    assert printed["calibrated"]["written"] == str(prof) and len(printed["calibrated"]["points"]) == 2
    from dlmcost.calibration.measurements import analysis_for, compare, load_points

    points, base = load_points(out)
    assert len(points) == 2
    stack = load_stack(str(prof))
    assert "fitted by" in " ".join(stack.sources.values())
    import math

    before = after = 0.0  # least squares: in total, not point by point
    for p in points:
        after += math.log(compare(p, analysis_for(p, base, [CPU], stack)[0])["error"]) ** 2
        before += math.log(compare(p, analysis_for(p, base, [CPU], "compiled")[0])["error"]) ** 2
    assert after <= before + 1e-9


def test_built_layers_stand_for_their_kind_s_count_by_hand(monkeypatch):
    """6 sliding-window and 2 full-attention layers, --layers 3: 3 sliding and 2 full layers are
    built (at most the kind's count), and a pass is the head plus each kind's built layers' time x
    count / built. With the timer replaced (the head 0.25 s; a built sliding layer 1 s, a full one
    0.5 s): 0.25 + (3 x 1) x 6/3 + (2 x 0.5) x 2/2 = 7.25 s for every pass. Scaling by --layers
    instead would give 12.25 s; by the layers built, 11.25 s."""
    sliding = LayerKind(attention="sliding", window=8, head_dim=32, n_kv_heads=2)
    full = LayerKind(head_dim=32, n_kv_heads=2)
    spec = SPEC.model_copy(update=dict(id="test/eight", n_layers=8, layers=((6, sliding), (2, full))))

    def fake_time(part, s, warmup, repeats):
        if isinstance(part, measure.HeadPart):
            return 0.25
        return len(part.layers) * (1.0 if part.kind.attention == "sliding" else 0.5)

    monkeypatch.setattr(measure, "time_pass", fake_time)
    res = measure_workload(spec, "generic-cpu", dict(scheme="ar", prompt=8, gen=4), load_stack("compiled"),
                           get_backend("numpy"), layers=3, hardware=[CPU])
    assert [(k["count"], k["built"]) for k in res["layer_kinds"]] == [(6, 3), (2, 2)]
    assert [f["measured_ms"] for f in res["families"]] == pytest.approx([7250.0] * len(res["families"]))
    assert res["measured_ms_per_forward"] == pytest.approx(7250.0)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_moe_and_hybrid_models_run(backend):
    """A dense + MoE model with sliding and full layers (DiffusionGemma's layout, micro sizes):
    each kind is built and timed, self-conditioned steps included."""
    moe = MoESpec(n_experts=8, experts_per_token=2, expert_ffn_dim=64, n_moe_layers=3)
    sliding = LayerKind(attention="sliding", window=8, head_dim=32, n_kv_heads=2, moe=True)
    full = LayerKind(head_dim=64, n_kv_heads=1, k_eq_v=True, moe=True)
    spec = SPEC.model_copy(update=dict(id="test/hybrid", n_layers=3, moe=moe, layers=((2, sliding), (1, full)),
                                       self_conditioning=True, norms_per_layer=4, qk_norm=True, logit_softcap=30.0))
    if backend == "torch":
        pytest.importorskip("torch")
    res = measure_workload(spec, "generic-cpu", dict(scheme="diffgemma", prompt=8, gen=32, block=16, steps=4),
                           load_stack("compiled"), get_backend(backend, "cpu"), warmup=0, repeats=1, hardware=[CPU])
    assert [f["name"] for f in res["families"]] == ["prefill", "step", "step-sc", "store"]
    assert [(k["count"], k["built"]) for k in res["layer_kinds"]] == [(2, 1), (1, 1)]
    assert all(f["measured_ms"] > 0 for f in res["families"])


def test_refusals(micro):
    with pytest.raises(UsageError, match="numpy backend runs on the CPU"):
        get_backend("numpy", "cuda")
    with pytest.raises(UsageError, match="unknown backend"):
        get_backend("jax")
    with pytest.raises(UsageError, match="MLA"):
        measure_workload(resolve_model("deepseek-ai/DeepSeek-V3"), "generic-cpu", dict(scheme="ar", prompt=4, gen=4),
                         load_stack("compiled"), get_backend("numpy"), hardware=[CPU])
    spec = resolve_model(str(micro))
    with pytest.raises(UsageError, match="--repeats"):
        measure_workload(spec, "generic-cpu", dict(scheme="ar", prompt=4, gen=4), load_stack("compiled"),
                         get_backend("numpy"), repeats=0, hardware=[CPU])


class _BrokenImport:
    """A finder that fails the import of one module as a broken install does."""

    def __init__(self, name: str, error: Exception):
        self.name, self.error = name, error

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            raise self.error
        return None


@pytest.mark.parametrize("error, needle", [
    (OSError("libcudart.so.12: cannot open shared object file: No such file or directory"),
     "failed to load (OSError: libcudart.so.12: cannot open shared object file"),
    (ModuleNotFoundError("No module named 'sympy'", name="sympy"), "failed to load (ModuleNotFoundError"),
    (RuntimeError("\x1b[2Jhalf upgraded"), "failed to load (RuntimeError: \\x1b[2Jhalf upgraded)"),
    (ModuleNotFoundError("No module named 'torch'", name="torch"), "needs PyTorch: pip install"),
])
def test_torch_that_fails_to_import_is_exit_9_with_its_reason(micro, monkeypatch, capsys, error, needle):
    """As `--plot` with a matplotlib that fails to load: the extra's failure, exit 9, one line
    with the reason (escaped), not an internal error (exit 70)."""
    import sys

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenImport("torch", error), *sys.meta_path])
    capsys.readouterr()
    code = main(["measure", str(micro), "--hardware", CPU, "--gpu", "generic-cpu", "--backend", "torch"])
    out, err = capsys.readouterr()
    assert code == 9 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
    assert "\x1b" not in err


def test_torch_backend_agrees_with_numpy():
    """The same weights on both backends (torch on the CPU, float32): the same layer outputs
    (causal and bidirectional, over a cache, sliding too) and the same sampler output."""
    torch = pytest.importorskip("torch")
    nb, tb = NumpyBackend(), get_backend("torch", "cpu")
    for kind in (SPEC.layer_groups[0][1], LayerKind(attention="sliding", window=4, head_dim=32, n_kv_heads=2)):
        ln, lt = Layer(SPEC, kind, nb), Layer(SPEC, kind, tb)
        for name in ("wqkv", "wo", "cos", "sin"):
            setattr(lt, name, torch.from_numpy(getattr(ln, name).copy()))
        lt.mlp = tuple(torch.from_numpy(w.copy()) for w in ln.mlp)
        x = nb.randn(2, 5, 128, scale=0.1)
        cache = ln.cache(2, 3, 5)
        for causal in (False, True):
            pn = ln.forward(x.copy(), cache, 3, causal)
            pt = lt.forward(torch.from_numpy(x.copy()), tuple(torch.from_numpy(c.copy()) for c in cache), 3, causal)
            assert np.allclose(pn, pt.numpy(), atol=1e-5)
    hn, ht = Head(SPEC, nb), Head(SPEC, tb)
    ht.embedding = ht.head = torch.from_numpy(hn.embedding.copy())
    x = nb.randn(2, 5, 128)
    (cn, _), (ct, _) = hn.sample(hn.logits(x, 3)), ht.sample(ht.logits(torch.from_numpy(x), 3))
    assert np.allclose(cn, ct.numpy(), atol=1e-5)


def test_examples_tiny_model_runs_on_numpy():
    spec = resolve_model(str(ROOT / "examples" / "tiny-dlm.yaml"))
    res = measure_workload(spec, "generic-cpu", dict(scheme="block", prompt=16, gen=16, block=16, batch=1),
                           load_stack("hf-eager"), get_backend("numpy"), warmup=0, repeats=1, hardware=[CPU])
    assert res["layers_built"] == 1 and res["measured_ms_per_forward"] > 0
