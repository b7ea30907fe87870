"""The knee search and the engine's per-configuration views, on grids of several configurations.

The knee (docs/methodology.md, "Verdicts, knee, AR ratio") is the largest integer block b (or
batch B) whose cached step has AI < ridge. Here the ridge is placed by hand half-way between the
AI of b0 and of b0 + 1, so the right answer is b0 by construction, whatever search finds it; the
AI of one pass comes from cost.pass_ops (pinned op by op in test_cost.py). The edges are the
documented ones: 0 when compute-bound already at 1, -1 (no knee) when still memory-bound at the
limit 2^20.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine import frames
from dlmcost.engine.cost import PassInput, pass_ops
from dlmcost.engine.evaluation import evaluate
from dlmcost.engine.verdict import KNEE_LIMIT, knee
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.models import load_bundled
from dlmcost.inputs.precision import get_precision
from dlmcost.inputs.profiles import Profile
from dlmcost.engine.roofline import gpu_rates
from dlmcost.engine.schemes import REGISTRY

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
MOE = "inclusionAI/LLaDA2.0-mini"


def grid_of(m, rows: int, **workload):
    """`rows` copies of one workload on the H100 (columns may be overridden per row afterwards)."""
    w = api.workload_for(m, **workload)
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    return frames.build_grid(frames.workload_columns(w), [rates], np.zeros(rows, int))


def with_ridge(grid, ridges):
    """The grid with its achievable ridge (the GEMM rate the time model uses over the achievable
    bandwidth; no stack here) placed at `ridges`, by setting the linear ops' peak."""
    r = grid.rates
    peak = np.asarray(ridges, float) * r.bandwidth * r.eff_mem / r.eff["linear"]
    return replace(grid, rates=replace(r, peak={**r.peak, "linear": peak}))


def step_ai(m, B, q, c):
    """AI of a cached bidirectional step: q tokens per sequence over c cached, logits for all q."""
    a = lambda x: np.array([float(x)])  # noqa: E731
    p = PassInput(B=a(B), q=a(q), c=a(c), kv_write=a(0), logits=a(q), causal=np.array([False]),
                  wbytes=a(2), kvbytes=a(2), all_experts=np.array([False]))
    ops = pass_ops(m, p)
    return sum(float(o.flops[0]) for o in ops) / sum(float(o.bytes[0]) for o in ops)


@pytest.mark.parametrize("model", [LLADA, MOE])
def test_block_knee_is_the_last_integer_below_a_ridge_placed_by_hand(model):
    m = load_bundled(model)
    ctx = 300.0
    targets = [1, 2, 31, 32, 33, 34, 1000, 4097, 700_001, KNEE_LIMIT - 1]
    ridges = [(step_ai(m, 1, b, ctx) + step_ai(m, 1, b + 1, ctx)) / 2 for b in targets]
    expected = list(targets)
    ridges.append(step_ai(m, 1, 1, ctx) / 2)  # compute-bound already at b = 1
    expected.append(0)
    ridges.append(step_ai(m, 1, KNEE_LIMIT, ctx) * 1.01)  # still memory-bound at the limit
    expected.append(-1)
    n = len(ridges)
    grid = grid_of(m, n, scheme="block", prompt=200, gen=200, block=8, steps=200)
    grid = with_ridge(grid, np.array(ridges))
    got = knee(m, grid, np.full(n, ctx), np.full(n, 8.0), "block")
    assert got.tolist() == expected


def test_block_knee_search_runs_until_the_gap_is_one():
    """Block 1,017,793 alone in a grid: the 32-way rounds leave gaps of 31,745, 962 and then 2
    between the last candidate below the ridge and the first above it; the search must go on to a
    gap of 1 (in a grid, other rows' longer searches would hide an early stop)."""
    m = load_bundled(LLADA)
    ctx, b = 300.0, 1_017_793
    grid = grid_of(m, 1, scheme="block", prompt=200, gen=200, block=8, steps=200)
    ridge = (step_ai(m, 1, b, ctx) + step_ai(m, 1, b + 1, ctx)) / 2
    grid = with_ridge(grid, np.array([ridge]))
    assert knee(m, grid, np.full(1, ctx), np.full(1, 8.0), "block").tolist() == [b]


def test_batch_knee_is_the_last_integer_batch_below_a_ridge_placed_by_hand():
    m = load_bundled(LLADA)
    ctx, q = 300.0, 4.0
    targets = [1, 2, 5, 33, 100, 3000]
    ridges = [(step_ai(m, B, q, ctx) + step_ai(m, B + 1, q, ctx)) / 2 for B in targets]
    n = len(ridges)
    grid = grid_of(m, n, scheme="block", prompt=200, gen=200, block=4, steps=200)
    grid = with_ridge(grid, np.array(ridges))
    got = knee(m, grid, np.full(n, ctx), np.full(n, q), "batch")
    assert got.tolist() == targets


def test_each_configuration_sums_only_the_families_it_runs():
    """A grid where the store family runs in some rows only: every row's per-op sums, NFE and
    pass list equal those of the same configuration evaluated alone."""
    m = load_bundled(LLADA)
    store = np.array([True, False, True, False])
    grid = grid_of(m, len(store), scheme="block", prompt=40, gen=64, block=16, steps=16)
    grid = replace(grid, knobs=replace(grid.knobs, store_pass=store))
    ev = evaluate(m, grid)
    fam = ev.families["block", "store"]
    assert fam.rows.tolist() == [0, 2]
    assert [fam.index(i) for i in range(4)] == [0, None, 1, None]
    for i, with_store in enumerate(store):
        alone = evaluate(m, grid_of(m, 1, scheme="block", prompt=40, gen=64, block=16, steps=16,
                                    store_pass=bool(with_store)))
        np.testing.assert_allclose(ev.ops(i), alone.ops(0), rtol=1e-12, atol=0)
        assert ev.total.count[i] == 1 + 16 + (4 if with_store else 0)

    only_last = grid_of(m, 2, scheme="block", prompt=40, gen=64, block=16, steps=16)
    only_last = replace(only_last, knobs=replace(only_last.knobs, store_pass=np.array([False, True])))
    ev = evaluate(m, only_last)
    assert [ev.families["block", "store"].index(i) for i in range(2)] == [None, 0]
    assert ev.ops(0)[:, 0].sum() < ev.ops(1)[:, 0].sum()  # the store passes add FLOPs to row 1 only


def test_a_sweep_mixing_expert_parallel_layouts_matches_each_layout_alone():
    """Rows with ep = 1 and ep > 1 in one grid take different expert-load paths; each row must
    equal the same configuration analysed on its own."""
    res = api.sweep(MOE, gpus="h100", schemes=["block"], prompts=[32], gens=[64], blocks=[16], steps=[16],
                    batches=[4], tps=[2], eps=[1, 2])
    rows = api.sweep_rows(res)
    assert sorted(row["ep"] for row in rows) == [1, 2]
    for row in rows:
        alone = api.analyze(MOE, "h100", scheme="block", prompt=32, gen=64, block=16, steps=16, batch=4, tp=2,
                            ep=row["ep"])["results"][0]
        for key in ("time_s", "flops_per_token", "bytes_per_token", "nfe"):
            assert row[key] == pytest.approx(alone[key], rel=1e-12), (row["ep"], key)


def test_memory_bound_time_fraction_is_the_time_share_of_memory_bound_families():
    """Docs: the share of the generation's time spent in pass families whose average AI is below
    the ridge. Dual-cache: the per-block refresh is compute-bound, the cached steps memory-bound."""
    r = api.analyze(LLADA, "h100", scheme="dual-cache", prompt=256, gen=256, block=32, steps=64)["results"][0]
    verdicts = {p["name"]: p["verdict"] for p in r["passes"]}
    assert verdicts == {"refresh": "compute-bound", "step": "memory-bound"}
    memory_time = sum(p["count"] * p["time_s"] for p in r["passes"] if p["verdict"] == "memory-bound")
    assert r["memory_bound_time_fraction"] == pytest.approx(memory_time / r["time_s"], rel=1e-12)


def test_a_family_a_configuration_does_not_run_leaves_peak_memory_alone():
    """multi-block with R = 0 runs no full refresh: its largest pass is the window (A'*b tokens),
    not the canvas, so activations scale by q_max against mdm's full canvas (F8)."""
    kw = dict(prompt=64, gen=256, block=32, steps=64)
    mb = api.analyze(LLADA, "h100", scheme="multi-block", active_blocks=2, cache_delay=0, refresh_every=0,
                     **kw)["results"][0]
    mdm = api.analyze(LLADA, "h100", scheme="mdm", **kw)["results"][0]
    q_window, canvas = 2 * 32, 64 + 256
    assert max(p["q"] for p in mb["passes"]) == q_window
    assert mb["memory"]["activation_bytes"] / mdm["memory"]["activation_bytes"] == pytest.approx(
        q_window / canvas, rel=1e-12)


@pytest.mark.parametrize("workload", [dict(scheme="ar", prompt=64, gen=128),
                                      dict(scheme="block", prompt=64, gen=128, block=32, steps=64, store_pass=True)])
def test_memory_bound_time_adds_up_over_several_memory_bound_families(workload):
    # a short prompt's prefill, the decode steps (and block diffusion's store passes) are all
    # memory-bound at batch 1: each family's time counts, not only the last one's
    r = api.analyze(LLADA, "h100", **workload)["results"][0]
    memory = [p for p in r["passes"] if p["verdict"] == "memory-bound"]
    assert len(memory) >= 2
    memory_time = sum(p["count"] * p["time_s"] for p in memory)
    assert r["memory_bound_time_fraction"] == pytest.approx(memory_time / r["time_s"], rel=1e-12)


def test_a_family_summed_in_closed_form_for_some_rows_and_pass_by_pass_for_others():
    """Gemma 3 1B's sliding layers (W = 512) keep AR decode affine while the cache stays inside
    the window (prompt 100: c = 100..139) and bend when it crosses it (prompt 490: c = 490..529),
    so one grid sums the decode family both ways; each row must equal its configuration alone."""
    from dlmcost.engine.evaluation import closed_form_rows

    g3 = "google/gemma-3-1b-it"
    m = load_bundled(g3)
    grid = grid_of(m, 2, scheme="ar", prompt=100, gen=40)
    grid = replace(grid, knobs=replace(grid.knobs, prompt=np.array([100.0, 490.0])))
    decode = REGISTRY["ar"].passes(grid.knobs)[-1]
    assert closed_form_rows(m, grid, decode).tolist() == [True, False]
    ev = evaluate(m, grid)
    for i, prompt in enumerate((100, 490)):
        alone = api.analyze(g3, "h100", scheme="ar", prompt=prompt, gen=40, stack="none")["results"][0]
        assert ev.total.time_s[i] == pytest.approx(alone["time_s"], rel=1e-12)
        assert ev.total.flops[i] == pytest.approx(alone["flops"], rel=1e-12)


def test_mla_form_left_to_dlmcost_in_some_rows_and_given_in_others():
    """The engine takes the MLA form per configuration: a grid whose first row leaves it to
    dlmcost and whose others ask for absorbed and expanded gives each row what that configuration
    gets alone (the auto row the faster form)."""
    dsv3 = "deepseek-ai/DeepSeek-V3"
    m = load_bundled(dsv3)
    wl = dict(scheme="block", prompt=64, gen=64, block=16, steps=16, tp=8)
    grid = grid_of(m, 3, **wl)
    grid = replace(grid, mla_auto=np.array([True, False, False]), mla_absorbed=np.array([True, True, False]))
    ev = evaluate(m, grid)
    alone = {form: api.analyze(dsv3, "h100", mla_form=form, stack="none", **wl)["results"][0]["time_s"]
             for form in ("auto", "absorbed", "expanded")}
    assert alone["absorbed"] != pytest.approx(alone["expanded"], rel=1e-6)
    assert ev.total.time_s.tolist() == pytest.approx([alone["auto"], alone["absorbed"], alone["expanded"]], rel=1e-12)
