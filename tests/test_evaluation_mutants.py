"""Edges of the verdict's per-configuration views that mutation testing found unpinned
(CONTRIBUTING.md, "Mutation testing": dlmcost/engine/verdict.py).

The analyze table's `AI` and `ridge` are those of the pass family the generation spends the most
time in (docs/methodology.md, "Verdicts, knee, AR ratio"). The search for that family must keep
the longest one seen so far across every family, not only compare each family with the one
before it.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine import evaluation as engine, frames
from dlmcost.engine.roofline import gpu_rates
from dlmcost.engine.schemes import REGISTRY
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.models import load_bundled
from dlmcost.inputs.precision import get_precision
from dlmcost.inputs.profiles import Profile
from test_printed_numbers import h100_achievable_ridge_bf16


def test_the_dominant_family_is_found_after_a_shorter_one():
    """draft-verify with a separate drafter lists its families prefill, draft-prefill, draft,
    verify. Llama-3.1-70B verifying Meta-Llama-3-8B's drafts: the verifier's prefill takes longer
    than the drafter's (a larger model over the same prompt), and the verify steps longest of all
    (255 passes of the 70B model). So the longest family comes after one shorter than the first:
    the table's ridge is the verify family's, at its rows B x q = 1 x (4 + 1) = 5 (F6a, by hand
    from the hardware and stack files: test_printed_numbers.h100_achievable_ridge_bf16), not the
    prefill's at 2048 rows; and its AI is the verify family's own."""
    r = api.analyze("meta-llama/Llama-3.1-70B-Instruct", "h100", scheme="draft-verify", prompt=2048, gen=256,
                    block=4, steps=256, drafter="meta-llama/Meta-Llama-3-8B")["results"][0]
    passes = {p["name"]: p for p in r["passes"]}
    assert list(passes) == ["prefill", "draft-prefill", "draft", "verify"]
    total = {name: p["count"] * p["time_s"] for name, p in passes.items()}
    # the case this pins: the first family longer than the second, the last the longest of all
    assert total["draft-prefill"] < total["prefill"] < total["verify"] == max(total.values())
    assert passes["verify"]["q"] == 5 and passes["prefill"]["q"] == 2048
    assert h100_achievable_ridge_bf16(5) != pytest.approx(h100_achievable_ridge_bf16(2048), rel=1e-3)
    assert r["achievable_ridge_flops_per_byte"] == pytest.approx(h100_achievable_ridge_bf16(5), rel=1e-9)
    assert r["dominant_pass_arithmetic_intensity"] == pytest.approx(passes["verify"]["arithmetic_intensity"],
                                                                    rel=1e-12)


BATCHES = [1.0, 16, 64, 128, 160, 256, 1024]


def test_the_touched_experts_path_where_one_end_of_a_family_is_compute_bound():
    """The split path (evaluation._touched_experts_pass_by_pass) takes an MoE family's time from
    its chords alone only where the routed experts and the optimistic bound are memory-bound at
    both ends (docs/methodology.md: memory minus compute is concave in j); every other
    configuration goes pass by pass. Prefix-cache steps of LLaDA2.0-mini (q shrinks from 64 to 4
    tokens per sequence, bidirectional, q + c fixed) on the bare H100 roofline, batches 1 to 1024.
    At batch 160 the routed experts are memory-bound at both ends at the achievable rates, while
    the optimistic bound (peak rates, every op) is compute-bound at the first pass (64 tokens a
    sequence) and memory-bound at the last: a test on the experts alone, or on one end of the
    bound, takes the bound's chord there (the ideal time, too low). Expected: brute
    force, every pass of every configuration costed on its own (evaluation.pass_cost) and added up."""
    m = load_bundled("inclusionAI/LLaDA2.0-mini")
    n = len(BATCHES)
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=64, block=4))
    cols |= dict(batch=np.array(BATCHES))
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    grid = frames.build_grid(cols, [rates], np.zeros(n, int))
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    names = engine.op_names([m])
    assert engine.touched_experts_rows(m, grid, step, engine.closed_form_rows(m, grid, step)).all()
    got = engine._touched_experts_pass_by_pass(m, grid, step, names)
    e = names.index("experts")
    sides = {}
    for i in range(n):
        g, fam = grid.take([i]), step.take([i])
        passes = [engine.pass_cost(m, g, fam.at(float(j)), names) for j in range(int(fam.n[0]))]
        sides[BATCHES[i]] = [(p.memory_s[e, 0] >= p.compute_s[e, 0], p.bound_memory_s[0] >= p.bound_compute_s[0])
                             for p in (passes[0], passes[-1])]
        r = fam.r[0]
        assert got.data[-1, :, i] == pytest.approx(r * sum(p.time_s[:, 0] for p in passes), rel=1e-12, abs=1e-30)
        assert got.bound_s[i] == pytest.approx(r * sum(max(p.bound_compute_s[0], p.bound_memory_s[0]) for p in passes),
                                               rel=1e-12)
    # the case this pins: (experts memory-bound, bound memory-bound) at the first and the last pass
    assert sides[160] == [(True, False), (True, True)]
    assert sides[1] == [(True, True), (True, True)] and sides[1024][0] == (False, False)


def test_the_first_pass_of_a_generation_without_a_prompt_is_its_first_step():
    """evaluation.first_pass takes pass 0 of the first family a configuration runs. With no prompt
    the prefill family has no pass (count 0): AR's first pass is its first decode step, one token
    over an empty cache. Expected: the whole time of the generation that is that one pass alone
    (prompt 0, gen 1), from evaluate's totals, not a zero-token prefill's overheads."""

    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))

    def grid(**w):
        return frames.build_grid(frames.workload_columns(api.workload_for(m, scheme="ar", prompt=0, **w)), [rates],
                                 np.zeros(1, int))

    g = grid(gen=64)
    time_s, _ = engine.first_pass(m, g, engine.evaluate(m, g))
    ev = engine.evaluate(m, grid(gen=1))
    assert ev.total.count[0] == 1
    assert time_s[0] == pytest.approx(ev.total.time_s[0], rel=1e-12)
