"""Totals of a pass list written out by hand: what schemes' tests compare the engine with.

Each pass is costed by cost.pass_ops (pinned on its own in test_cost.py and the golden tests) and
added up here by a plain loop, so a scheme test fails if the scheme builds the wrong passes or
the engine sums them wrongly."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost.engine.cost import PassInput, pass_ops


def one(x):
    return np.array([float(x)])


def totals(passes) -> tuple[float, float, float]:
    """FLOPs, bytes and NFE of passes (model, q, c, kv_write, logits, causal, count[, self_condition])."""
    flops = nbytes = nfe = 0.0
    for m, q, c, kvw, logits, causal, count, *sc in passes:
        p = PassInput(B=one(1), q=one(q), c=one(c), kv_write=one(kvw), logits=one(logits), causal=np.array([causal]),
                      wbytes=one(2), kvbytes=one(2), all_experts=np.array([False]),
                      self_condition=np.array([bool(sc and sc[0])]))
        ops = pass_ops(m, p)
        flops += count * sum(float(o.flops[0]) for o in ops)
        nbytes += count * sum(float(o.bytes[0]) for o in ops)
        nfe += count
    return flops, nbytes, nfe


def check(result, passes) -> None:
    """An analyze result's NFE, FLOPs and bytes equal the hand-written passes' totals."""
    flops, nbytes, nfe = totals(passes)
    assert result["nfe"] == pytest.approx(nfe, rel=1e-12)
    assert result["flops"] == pytest.approx(flops, rel=1e-12)
    assert result["bytes"] == pytest.approx(nbytes, rel=1e-12)
