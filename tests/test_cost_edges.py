"""Per-op costs at the edges the other tests do not reach, from the formulas in cost.py's
docstrings and docs/methodology.md: a self-conditioning pass with one logit position, soft-capped
logits counted as vector ("other") work, and the expected number of distinct experts (F4) when
every token runs every expert."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine.cost import PassInput, expected_experts, self_condition
from dlmcost.inputs.models import ModelSpec

TINY = ModelSpec(id="tiny", family="custom", n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, head_dim=8,
                 ffn_dim=128, vocab_size=1000)
DG = "google/diffusiongemma-26B-A4B-it"


def one(x):
    return np.array([float(x)])


def test_self_conditioning_a_single_logit_position():
    """softmax(previous logits) @ embedding for n = B*l positions: 2*n*V*d FLOPs, the V x d table
    read (bf16 head), two kernels; it runs whenever the pass has logits, even one."""
    p = PassInput(B=one(3), q=one(1), c=one(10), kv_write=one(1), logits=one(1), causal=np.array([True]),
                  wbytes=one(1), kvbytes=one(2), all_experts=np.array([False]), self_condition=np.array([True]))
    op = self_condition(TINY, p)
    n, V, d = 3 * 1, 1000, 64
    assert op.flops[0] == 2 * n * V * d
    assert op.weight_bytes[0] == V * d * 2  # the head and embedding stay bf16 under a 1-byte precision
    assert op.activation_bytes[0] == n * V * (4 + 2 * 2) + n * d * 2  # fp32 logits in, bf16 probs out and in, n x d out
    assert op.kernels[0] == 2
    off = self_condition(TINY, PassInput(**{**p.__dict__, "logits": one(0)}))
    assert off.flops[0] == 0 and off.weight_bytes[0] == 0 and off.kernels[0] == 0


def test_soft_capped_logits_count_as_vector_work():
    """The soft cap (divide, tanh, multiply in fp32) runs on the vector units: its FLOPs are in
    the `other` breakdown with the elementwise op's, not in the LM head's."""
    r = api.analyze(DG, "h100", prompt=32, gen=64)["results"][0]
    ops = {o["name"]: o for o in r["ops"]}
    assert ops["logit_softcap"]["flops"] > 0
    assert r["flops_breakdown"]["other"] == pytest.approx(ops["elementwise"]["flops"] + ops["logit_softcap"]["flops"],
                                                          rel=1e-12)
    assert ops["logit_softcap"]["time_s"] > 0


def test_every_expert_is_touched_when_each_token_runs_all_of_them():
    """(F4) with k = E: 1 - (1 - k/E)^T = 1 for any T >= 1."""
    T = np.array([1.0, 7.0, 1000.0])
    assert expected_experts(8, 8, T).tolist() == [8.0, 8.0, 8.0]
