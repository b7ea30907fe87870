"""Issue 3: tensor/expert parallelism, MLA's two attention forms, per-GPU capacity."""

import numpy as np
import pytest

from dlmcost import api
from dlmcost.cli import main
from dlmcost.engine.cost import OP_NAMES, PassInput, attention, busiest_rank_experts, ep_all_to_all, experts, mla_kv_up, tp_collectives, weight_bytes_per_gpu
from dlmcost.errors import WorkloadError
from dlmcost.inputs.models import bundled_ids, load_bundled

MINI = "inclusionAI/LLaDA2.0-mini"  # 16 heads, 4 KV heads, 256 experts (k = 8)
DSV3 = "deepseek-ai/DeepSeek-V3"


def inp(B=1, q=4, c=100, tp=1, ep=1, absorbed=True, kvbytes=2.0, all_experts=False, logits=None):
    a = lambda x: np.array([float(x)])  # noqa: E731
    return PassInput(B=a(B), q=a(q), c=a(c), kv_write=a(0), logits=a(q if logits is None else logits),
                     causal=np.array([False]), wbytes=a(2.0), kvbytes=a(kvbytes), all_experts=np.array([all_experts]),
                     tp=a(tp), ep=a(ep), mla_absorbed=np.array([absorbed]))


@pytest.mark.parametrize("model_id", bundled_ids())
def test_resident_weights_at_tp1_equal_the_parameter_count(model_id):
    m = load_bundled(model_id)
    assert weight_bytes_per_gpu(m, 2.0, 1.0, 1.0) == pytest.approx(2 * m.params_total, rel=1e-12)


def test_weights_per_gpu_under_tp_by_hand():
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")  # MHA, 32 heads: everything splits
    d, f, L, V = 4096, 12288, 32, 126464
    per_gpu = L * (4 * d * d / 2 + 3 * d * f / 2 + 2 * d) + d + 2 * V * d / 2
    assert weight_bytes_per_gpu(m, 2.0, 2.0, 1.0) == pytest.approx(2 * per_gpu)


def test_kv_heads_are_replicated_beyond_their_count():
    m = load_bundled(MINI)
    kv4 = attention(m, inp(tp=4)).kv_read_bytes[0]
    kv8 = attention(m, inp(tp=8)).kv_read_bytes[0]
    kv1 = attention(m, inp(tp=1)).kv_read_bytes[0]
    assert kv4 == kv8 == kv1 / 4  # one K/V head per GPU from tp = 4 on
    # the cost of replication is visible: per-GPU K/V memory stops shrinking
    a4 = api.analyze(m, "h100", tp=4, scheme="block", block=32, prompt=1000, gen=256)["results"][0]
    a8 = api.analyze(m, "h100", tp=8, scheme="block", block=32, prompt=1000, gen=256)["results"][0]
    assert a4["memory"]["kv_cache_bytes"] == a8["memory"]["kv_cache_bytes"]


def test_invalid_splits_are_clear_errors(capsys):
    with pytest.raises(WorkloadError, match="attention heads do not split"):
        api.analyze(MINI, "h100", tp=3)
    with pytest.raises(WorkloadError, match="ep dividing tp"):
        api.analyze(MINI, "h100", tp=4, ep=8)
    with pytest.raises(WorkloadError, match="needs an MoE model"):
        api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", tp=2, ep=2)
    assert main(["analyze", MINI, "--gpu", "h100", "--tp", "6"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1


@pytest.mark.parametrize("model_id,scheme,block", [
    ("GSAI-ML/LLaDA-8B-Instruct", "mdm", 32), ("GSAI-ML/LLaDA-8B-Instruct", "ar", None),
    (MINI, "block", 32), ("mistralai/Mixtral-8x7B-Instruct-v0.1", "ar", None)])
@pytest.mark.parametrize("profile", ["ideal", "realistic"])
def test_tp_is_never_faster_than_one_nth(model_id, scheme, block, profile):
    base = api.analyze(model_id, "h100", scheme=scheme, block=block, gen=128, batch=4, efficiency=profile)
    t1 = base["results"][0]["time_s"]
    for n in (2, 4, 8):
        r = api.analyze(model_id, "h100", scheme=scheme, block=block, gen=128, batch=4, efficiency=profile, tp=n)
        assert r["results"][0]["time_s"] >= t1 / n
        assert r["results"][0]["gpus"] == n
        assert r["workload"]["tp"] == n


def test_tp_all_reduce_ring_bytes_by_hand():
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")
    op = tp_collectives(m, inp(B=2, q=16, tp=8, logits=16))
    T, d, V = 32, 4096, 126464
    reduces = 2 * 32  # after attention and after the FFN, every layer
    expected = reduces * 2 * 7 / 8 * T * d * 2 + 7 / 8 * T * V * 2  # + the logits all-gather
    assert op.link_bytes[0] == pytest.approx(expected)
    assert op.collectives[0] == reduces + 1
    assert tp_collectives(m, inp(tp=1)).link_bytes[0] == 0


def test_expert_parallel_all_to_all_and_expert_weights_by_hand():
    m = load_bundled(MINI)
    T, k, d = 64, 8, 2048
    op = ep_all_to_all(m, inp(B=16, q=4, tp=8, ep=8))
    # The step waits for the busiest of 8 ranks (32 experts each): it holds max-rank experts of the
    # d touched, each receiving T*k/d copies. 64 tokens touch d = 256(1 - (248/256)^64) experts.
    touched = 256 * (1 - (1 - 8 / 256) ** 64)
    busiest = busiest_rank_experts(256, 8, np.array([64.0]), 8)[0]
    assert touched / 8 < busiest < 32  # above the average rank, below a full one
    copies = busiest * T * k / touched
    assert op.link_bytes[0] == pytest.approx(19 * 2 * copies * (7 / 8) * d * 2)
    full = experts(m, inp(B=16, q=4, tp=8, ep=8, all_experts=True))
    assert full.weight_bytes[0] == pytest.approx(19 * (256 / 8) * m.expert_weights * 2)
    sliced = experts(m, inp(B=16, q=4, tp=8, ep=1, all_experts=True))
    assert sliced.weight_bytes[0] == pytest.approx(full.weight_bytes[0])  # same bytes, sliced instead of placed
    assert ep_all_to_all(m, inp(tp=8, ep=1)).link_bytes[0] == 0


def test_mla_forms_by_hand():
    m = load_bundled(DSV3)  # H = 128, kv_lora 512, rope 64, nope 128, v 128, 61 layers
    B, q, c, L, H = 1, 4, 100, 61, 128
    kbar = c + q
    absorbed = attention(m, inp(B=B, q=q, c=c, absorbed=True))
    expanded = attention(m, inp(B=B, q=q, c=c, absorbed=False))
    assert absorbed.flops[0] == L * 2 * B * q * kbar * H * ((512 + 64) + 512)
    assert expanded.flops[0] == L * 2 * B * q * kbar * H * ((128 + 64) + 128)
    assert absorbed.kv_read_bytes[0] == expanded.kv_read_bytes[0] == L * B * c * 576 * 2
    kv_up = 512 * H * (128 + 128)
    assert mla_kv_up(m, inp(B=B, q=q, c=c, absorbed=True)).flops[0] == L * 2 * B * q * kv_up
    assert mla_kv_up(m, inp(B=B, q=q, c=c, absorbed=False)).flops[0] == L * 2 * B * (c + q) * kv_up
    assert mla_kv_up(m, inp(absorbed=True)).weight_bytes[0] == mla_kv_up(m, inp(absorbed=False)).weight_bytes[0]


def test_mla_auto_picks_the_faster_form_per_pass_and_says_so():
    kw = dict(scheme="ar", prompt=4000, gen=64, batch=8, tp=8, precision="fp8")
    auto = api.analyze(DSV3, "h200", **kw)["results"][0]
    forced = {f: api.analyze(DSV3, "h200", mla_form=f, **kw)["results"][0] for f in ("absorbed", "expanded")}
    forms = {p["name"]: p["mla_form"] for p in auto["passes"]}
    assert forms == {"prefill": "expanded", "step": "absorbed"}  # compute-bound prefill vs latent-bound decode
    assert auto["time_s"] <= min(r["time_s"] for r in forced.values()) + 1e-12
    assert {p["mla_form"] for p in forced["absorbed"]["passes"]} == {"absorbed"}


def test_capacity_per_gpu_fits_and_max_batch_by_hand():
    m = load_bundled(MINI)
    r = api.analyze(m, "h100", tp=2, scheme="block", block=32, prompt=1000, gen=256, batch=1)["results"][0]
    mem = r["memory"]
    weights = weight_bytes_per_gpu(m, 2.0, 2.0, 1.0)
    assert mem["weights_bytes"] == pytest.approx(weights)
    kv_per_seq = 1256 * m.n_layers * 2 * 2 * 128 * 2  # 4 KV heads / tp 2 = 2 per GPU
    assert mem["kv_cache_bytes"] == pytest.approx(kv_per_seq)
    usable = 80 * 2**30 * 0.9  # docs: usable = capacity · 0.9 (F8)
    assert mem["max_batch"] == int((usable - weights) // mem["per_sequence_bytes"])
    flash = api.analyze("inclusionAI/LLaDA2.0-flash", "h100", scheme="block", block=32)["results"][0]
    assert not flash["memory"]["fits"] and flash["memory"]["max_batch"] == 0  # 206 GB of weights on one 80 GiB GPU
    flash8 = api.analyze("inclusionAI/LLaDA2.0-flash", "h100", scheme="block", block=32, tp=8, ep=8)["results"][0]
    assert flash8["memory"]["fits"]


def test_sweep_takes_tp_and_ep_lists_and_skips_bad_splits():
    res = api.sweep(MINI, gpus="h100", schemes=["block"], blocks=[32], tps=[1, 3, 8], eps=[1, 8])
    rows = api.sweep_rows(res)
    layouts = {(r["tp"], r["ep"]) for r in rows}
    assert layouts == {(1, 1), (8, 1), (8, 8)}
    assert res["skipped_impossible"] == 3  # tp=3 twice, (tp=1, ep=8)


def test_cli_tp_json_records_layout(capsys):
    assert main(["analyze", MINI, "--gpu", "h100", "--tp", "4", "--ep", "4", "--format", "json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert (out["workload"]["tp"], out["workload"]["ep"]) == (4, 4)
    assert out["results"][0]["tokens_per_s_per_gpu"] == pytest.approx(out["results"][0]["tokens_per_s"] / 4)


def test_kv_replication_is_called_out():
    a = api.analyze(MINI, "h100", tp=8)
    assert any("replicated on 2 GPUs" in w for w in a["warnings"])
    assert not any("replicated" in w for w in api.analyze(MINI, "h100", tp=4)["warnings"])


@pytest.mark.parametrize("model_id", bundled_ids())
@pytest.mark.parametrize("absorbed", [True, False])
def test_every_op_runs_at_the_rate_of_its_declared_kind(model_id, absorbed):
    """The time model reads each op's kind from the op itself; the per-kind FLOP breakdown reads
    OP_KINDS. The two must agree for every op every bundled model has (an MoE expert costed as
    `other` would run at the vector rate and drop out of the linear FLOPs)."""
    from dlmcost.engine.cost import OP_KINDS, pass_ops

    ops = pass_ops(load_bundled(model_id), inp(tp=2, ep=2, absorbed=absorbed))
    assert {op.name: op.kind for op in ops} == {op.name: OP_KINDS[op.name] for op in ops}


@pytest.mark.parametrize("model_id", bundled_ids())
def test_each_cost_function_is_named_after_its_op(model_id):
    """engine.op_names and pass_ops' `only` (the cache ops) go by the cost functions' names: each
    is the name of the op it returns, in the order pass_ops returns them."""
    from dlmcost.engine.cost import op_functions, pass_ops
    from dlmcost.engine.evaluation import op_names

    m = load_bundled(model_id)
    ops = pass_ops(m, inp(tp=2, ep=2))
    assert [f.__name__ for f in op_functions(m)] == [op.name for op in ops]
    assert op_names([m]) == [name for name in OP_NAMES if name in {op.name for op in ops}]


MOE_IDS = [i for i in bundled_ids() if load_bundled(i).moe is not None]


@pytest.mark.parametrize("model_id", MOE_IDS)
def test_without_expert_parallelism_only_the_experts_weight_bytes_bend_with_the_tokens(model_id):
    """The engine sums an MoE model's families whose q shrinks while q + c stays fixed (prefix-cache
    steps) in closed form, corrected pass by pass for the experts' weight bytes alone, which it
    takes as proportional to the expected distinct experts touched (F4). Checked by differences at
    q = 64, 48, 32, 16 (c = 192 - q), B = 3: second differences vanish for every other field of
    every op, and the experts' weight bytes divided by E (1 - (1 - k/E)^(B q)), computed here,
    are the same at every q."""
    from dlmcost.engine.cost import pass_ops

    m = load_bundled(model_id)
    E, k = m.moe.n_experts, m.moe.experts_per_token
    qs = (64, 48, 32, 16)
    passes = [pass_ops(m, inp(B=3, q=q, c=192 - q, tp=1 if m.mla else 2, ep=1)) for q in qs]
    fields = ("flops", "weight_bytes", "kv_read_bytes", "kv_write_bytes", "activation_bytes", "link_bytes",
              "collectives", "kernels")
    for i, op in enumerate(passes[0]):
        for f in fields:
            v = np.array([float(getattr(p[i], f)[0]) for p in passes])
            second = v[2:] - 2 * v[1:-1] + v[:-2]
            linear = np.allclose(second, 0.0, rtol=0, atol=1e-9 * max(np.abs(v).max(), 1.0))
            assert linear == ((op.name, f) != ("experts", "weight_bytes")), (op.name, f)
    per_touched = [float(p[i].weight_bytes[0]) / (E * (1 - (1 - k / E) ** (3 * q)))
                   for p, q in zip(passes, qs) for i, op in enumerate(passes[0]) if op.name == "experts"]
    assert per_touched == pytest.approx([per_touched[0]] * 4, rel=1e-12)


@pytest.mark.parametrize("model_id", bundled_ids())
@pytest.mark.parametrize("absorbed", [True, False])
def test_only_the_declared_ops_read_the_cache(model_id, absorbed):
    """Along a family whose q and logits are fixed the engine costs the ops outside
    cost.CACHE_OPS once, for the first pass, and reuses them for the last. Checked: changing the
    cached tokens, the K/V written and the mask (q = 24, 32 logits, B = 3, under TP and EP where
    the model allows) changes no field of any other op, and does change the attention's."""
    from dataclasses import replace

    from dlmcost.engine.cost import CACHE_OPS, pass_ops

    m = load_bundled(model_id)
    tp, ep = (1, 1) if m.mla else (2, 2 if m.moe else 1)
    base = inp(B=3, q=24, c=100, tp=tp, ep=ep, absorbed=absorbed, logits=32)
    other = replace(base, c=np.array([7000.0]), kv_write=np.array([24.0]), causal=np.array([True]))
    fields = ("flops", "weight_bytes", "kv_read_bytes", "kv_write_bytes", "activation_bytes", "link_bytes",
              "collectives", "kernels")
    for a, b in zip(pass_ops(m, base), pass_ops(m, other)):
        same = all(np.array_equal(np.broadcast_to(getattr(a, f), (1,)), np.broadcast_to(getattr(b, f), (1,)))
                   for f in fields)
        if a.name not in CACHE_OPS:
            assert same, a.name
        if a.name == "attention":
            assert not same


def test_softcapped_logits_are_split_across_the_tensor_parallel_group():
    # Gemma 2 9B: vocabulary 256,128 (its config.json); B 2 x 8 logit positions; tp 4 -> each GPU caps a quarter
    from dlmcost.engine.cost import logit_softcap

    m = load_bundled("google/gemma-2-9b")
    op = logit_softcap(m, inp(B=2, q=8, tp=4))
    n = 2 * 8 * 256_128 / 4
    assert op.flops[0] == pytest.approx(3 * n) and op.activation_bytes[0] == pytest.approx(n * (2 + 4))


def test_mla_cache_per_token_is_the_replicated_latent():
    # DeepSeek-V3 (its config.json): 61 layers of kv_lora_rank 512 + rope 64 cached elements, the
    # same on every GPU of the TP group (the latent is not split by heads)
    from dlmcost.engine.cost import kv_cache_elements_per_gpu

    m = load_bundled(DSV3)
    for tp in (1.0, 8.0):
        assert kv_cache_elements_per_gpu(m, 1, tp) == 61 * (512 + 64)  # one token's, every layer's


def test_layouts_that_do_not_split_a_dense_model_are_refused_by_name():
    """One dense layer of FFN width 100: it splits over 4 GPUs, not 8 (8 heads split over either);
    a dense model has no experts to place, whatever ep."""
    from dlmcost.engine.workload import check_parallel
    from dlmcost.inputs.models import ModelSpec

    m = ModelSpec(id="odd-ffn", family="custom", n_layers=1, d_model=64, n_heads=8, n_kv_heads=8, head_dim=8,
                  ffn_dim=100, vocab_size=1000)
    assert check_parallel(m, 4, 1) is None
    assert check_parallel(m, 8, 1) == "FFN width 100 does not split over tp=8 GPUs"
    assert check_parallel(m, 4, 2) == "expert parallelism needs an MoE model and ep dividing tp (ep=2, tp=4)"
