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
from dlmcost.inputs.stacks import load_stack
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


def test_a_family_whose_q_moves_while_its_logits_do_not_is_summed_from_whole_passes():
    """evaluation._first_and_last costs the last pass of a family from the first pass's ops, with
    only the ops that read the cache recosted, only where neither q nor the logits move. Fast-dLLM's
    prefix-cache steps under `--logits committed` keep their logits fixed (one block, b = 16) while
    q shrinks block by block (64, 48, 32, 16 tokens a sequence; q + c fixed, bidirectional): a dense
    model (LLaDA-8B) is in closed form there, and its last pass must be costed whole (its
    projections and MLP see 16 tokens, not the first pass's 64). Expected: brute force, every pass
    of the family costed on its own (evaluation.pass_cost) and added up, times its repeats."""
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=16, block=16))
    cols |= dict(logits_committed=True, batch=np.array([1.0, 8.0]))
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    grid = frames.build_grid(cols, [rates], np.zeros(2, int))
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    # the case this pins: q moves, the logits do not, and the family is in closed form
    assert (step.dq == -16).all() and (step.dlogits == 0).all() and (step.n == 4).all()
    assert engine.closed_form_rows(m, grid, step).all()
    names = engine.op_names([m])
    got = engine.family_cost(m, grid, step, names)
    for i in range(2):
        g, fam = grid.take([i]), step.take([i])
        passes = [engine.pass_cost(m, g, fam.at(float(j)), names) for j in range(4)]
        r = fam.r[0]
        assert got.data[:engine.ADDITIVE, :, i] == pytest.approx(r * sum(p.values[:, :, 0] for p in passes), rel=1e-12)
        assert got.data[-1, :, i] == pytest.approx(r * sum(p.time_s[:, 0] for p in passes), rel=1e-12)
        assert got.bound_s[i] == pytest.approx(r * sum(max(p.bound_compute_s[0], p.bound_memory_s[0]) for p in passes),
                                               rel=1e-12)


def test_the_bare_roofline_has_no_stack_entries_on_its_op_axis():
    """The stack adds two time-only entries to the op axis, `host_wait` and `per_forward`
    (evaluation.STACK_OPS); without a stack (`--stack none`) there are none, and the ops a result
    lists are the model's own. Expected, by hand from docs/methodology.md (F1): a dense model with
    standard attention (LLaDA-8B) has qkv_proj, attention, o_proj, mlp, elementwise and lm_head, and
    every model the tensor-parallel collectives (docs/methodology.md, "Parallelism"; none at tp 1)."""
    dense = ["qkv_proj", "attention", "o_proj", "mlp", "elementwise", "lm_head", "tp_collectives"]
    r = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="dual-cache", gen=64, block=32,
                    stack="none")["results"][0]
    assert [op["name"] for op in r["ops"]] == dense
    r = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="dual-cache", gen=64, block=32,
                    stack="sglang-dllm")["results"][0]
    assert [op["name"] for op in r["ops"]] == dense + ["host_wait", "per_forward"]


@pytest.mark.parametrize("gen,steps", [(64, 16), (16, 4)])
def test_the_slow_kernels_count_in_a_closed_form_familys_wait_for_the_host(tmp_path, gen, steps):
    """Under a stack whose host overlaps the GPU, a pass waits max(host - GPU, 0) for the host, the
    GPU's time including the stack's slow kernels, L x (242.61 + B q x 0.55) us on an MI300X at fp8
    (docs/methodology.md, "Time"). A closed-form family takes its GPU time linear between its first
    and last pass, each with its own slow kernels (evaluation._sums_of_first_and_last). The bundled
    stacks that overlap the host replay graphs (no host time a layer), so a stack file extending
    sglang with 500 us a layer makes the wait: LLaDA-8B's prefix-cache steps at batch 1 after a
    512-token prompt, blocks of 16, 4 steps a block (q 64, 48, 32, 16; 3 repeats each; every op
    memory-bound throughout, so the GPU time is affine in j and the closed form exact), 32 x 500 us
    = 16 ms of host against 4.2 to 4.4 ms of GPU and 8.05 to 8.89 ms of slow kernels; and one block
    alone (one shape, q 16, though q moves by -16 a shape: both ends are that one pass, the case
    tests/test_slow_kernels.py leaves out). Expected: brute force, each pass costed on its own
    (evaluation.pass_cost, the GEMM factor at the family's mean q, 40 or 16, as the closed form
    reads it), its wait by hand: max(32 x 500 us - GPU - 32 x (242.61 + q x 0.55) us, 0), added up
    times the repeats."""
    path = tmp_path / "slow-host.yaml"
    path.write_text("extends: sglang\nname: sglang-slow-host\nhost:\n  us_per_layer: 500\n", encoding="utf-8")
    stack = load_stack(str(path))
    assert stack.host.overlaps_gpu and stack.slow_layer_us("MI300X", "fp8") == 242.61
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")
    assert m.n_layers == 32 and m.moe is None
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=512, gen=gen, steps=steps,
                                                    block=16, precision="fp8"))
    rates = gpu_rates(HardwareDB.load().get("mi300x"), get_precision("fp8"), Profile("realistic"))
    grid = frames.build_grid(cols, [rates], np.zeros(1, int), stack)
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    n = gen // 16
    assert engine.closed_form_rows(m, grid, step).all() and step.n[0] == n and step.r[0] == 3 and step.dq[0] == -16
    names = engine.op_names([m]) + list(engine.STACK_OPS)
    got = engine.family_cost(m, grid, step, names).data[-1, names.index("host_wait"), 0]
    gpu_ops = [k for k, name in enumerate(names) if name not in engine.STACK_OPS]
    host, waits = 32 * 500e-6, []
    for j in range(n):
        q = gen - 16 * j
        p = engine.pass_cost(m, grid, step.at(float(j)), names, factor_q=np.array([gen - 8 * (n - 1.0)]),
                             host_wait_of_pass=False)
        assert (p.memory_s[gpu_ops, 0] >= p.compute_s[gpu_ops, 0]).all()
        gpu = p.time_s[gpu_ops, 0].sum()
        waits.append(max(host - gpu - 32 * (242.61e-6 + q * 0.55e-6), 0.0))
    # the case this pins: the host waits at every pass, by an amount the slow kernels' tokens move
    assert min(waits) > 0
    assert got == pytest.approx(3 * sum(waits), rel=1e-9)


def test_an_moe_model_reading_every_expert_is_in_closed_form_only_without_expert_parallelism():
    """docs/methodology.md, "Exact sums over a family": a family whose q + c is fixed under a
    bidirectional mask is in closed form for an MoE model only under `--expert-load all` without
    expert parallelism (every expert read in every pass: the cost is linear in the tokens); with
    `ep > 1` the busiest GPU's share of the token copies depends on the batch, and every pass is
    costed on its own. LLaDA2.0-mini's prefix-cache steps (q 64 down to 4, batch 16, every expert
    read) at tp 1 and at tp = ep = 2. Expected: which path, from that rule; the sums by brute force,
    every pass costed on its own (evaluation.pass_cost) and added up, times its repeats."""
    m = load_bundled("inclusionAI/LLaDA2.0-mini")
    cols = frames.workload_columns(api.workload_for(m, scheme="prefix-cache", prompt=16, gen=64, steps=64, block=4))
    cols |= dict(batch=np.array([16.0, 16.0]), tp=np.array([1.0, 2.0]), ep=np.array([1.0, 2.0]), all_experts=True)
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    grid = frames.build_grid(cols, [rates], np.zeros(2, int))
    step = [f for f in REGISTRY["prefix-cache"].passes(grid.knobs) if f.name == "step"][0]
    assert (step.dq == -4).all() and step.constant_keys.all()
    assert engine.closed_form_rows(m, grid, step).tolist() == [True, False]
    names = engine.op_names([m])
    got = engine.family_cost(m, grid, step, names)
    for i in range(2):
        g, fam = grid.take([i]), step.take([i])
        passes = [engine.pass_cost(m, g, fam.at(float(j)), names) for j in range(int(fam.n[0]))]
        r = fam.r[0]
        assert got.data[:engine.ADDITIVE, :, i] == pytest.approx(r * sum(p.values[:, :, 0] for p in passes), rel=1e-9)
        assert got.data[-1, :, i] == pytest.approx(r * sum(p.time_s[:, 0] for p in passes), rel=1e-9)


def test_a_fixed_q_familys_optimistic_bound_over_a_grid_where_it_turns_compute_bound():
    """A family whose q and logits are fixed costs its last pass from its first, only the ops that
    read the cache recosted, and its bound totals (sum FLOPs / peak, sum bytes / bandwidth, per
    configuration) taken from the first pass's with those ops' own taken out and put back
    (evaluation.pass_cost's `like`). Meta-Llama-3-8B's AR decode steps (q 1, the cache growing
    from 16 to 78 tokens) at batches 1 and 1024 on the bare H100 roofline: at batch 1 the bound
    is memory-bound, at 1024 compute-bound (about 2 x 1024 x 7.5e9 = 15.4e12 FLOPs at 989.5
    TFLOP/s, 15.6 ms, against 28 to 37 GB at 3.35 TB/s, 8.5 to 10.9 ms), so both of its totals
    show, in a grid of more than one configuration. Expected: brute force, every pass of each
    configuration costed on its own (evaluation.pass_cost, whole) and max(compute, memory) added
    up; the time and the sums too."""
    m = load_bundled("meta-llama/Meta-Llama-3-8B")
    cols = frames.workload_columns(api.workload_for(m, scheme="ar", prompt=16, gen=64))
    cols |= dict(batch=np.array([1.0, 1024.0]))
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    grid = frames.build_grid(cols, [rates], np.zeros(2, int))
    fams = [f for f in REGISTRY["ar"].passes(grid.knobs) if (f.n > 1).all()]
    assert len(fams) == 1
    (step,) = fams
    # the case this pins: q and logits fixed (the like path), the cache not
    assert (step.dq == 0).all() and (step.dlogits == 0).all() and (step.dc == 1).all()
    names = engine.op_names([m])
    got = engine.family_cost(m, grid, step, names)
    sides = []
    for i in range(2):
        g, fam = grid.take([i]), step.take([i])
        passes = [engine.pass_cost(m, g, fam.at(float(j)), names) for j in range(int(fam.n[0]))]
        r = fam.r[0]
        sides.append([p.bound_compute_s[0] > p.bound_memory_s[0] for p in (passes[0], passes[-1])])
        assert got.bound_s[i] == pytest.approx(r * sum(max(p.bound_compute_s[0], p.bound_memory_s[0]) for p in passes),
                                               rel=1e-12)
        assert got.data[:engine.ADDITIVE, :, i] == pytest.approx(r * sum(p.values[:, :, 0] for p in passes), rel=1e-12)
        assert got.data[-1, :, i] == pytest.approx(r * sum(p.time_s[:, 0] for p in passes), rel=1e-12)
    assert sides == [[False, False], [True, True]]


def test_a_drafter_of_another_architecture_puts_its_ops_on_their_own_rows():
    """draft-verify with a drafter of another architecture: the op axis is the union of both
    models' ops in OP_NAMES order (evaluation.op_names), and each pass places each of its ops on
    that op's row, the rows of ops it lacks left at zero. Qwen3-30B-A3B (MoE: router, experts, no
    dense MLP) verifying the drafts of Qwen3-8B (dense). Expected: the drafter's family sums are
    those of the same family costed on the drafter's own op axis (where each op's row is its
    place in the pass), and its rows of the verifier's MoE ops zero (a dense model has none,
    docs/methodology.md (F1)); likewise the verifier's dense MLP row."""
    verifier, drafter = load_bundled("Qwen/Qwen3-30B-A3B"), load_bundled("Qwen/Qwen3-8B")
    w = api.workload_for(verifier, scheme="draft-verify", prompt=64, gen=64, block=4, steps=64,
                         drafter="Qwen/Qwen3-8B")
    rates = gpu_rates(HardwareDB.load().get("h100"), get_precision("bf16"), Profile("realistic"))
    grid = frames.build_grid(frames.workload_columns(w), [rates], np.zeros(1, int))
    ev = engine.evaluate({"main": verifier, "drafter": drafter}, grid)
    names = ev.op_names
    assert {"router", "experts", "mlp"} <= set(names)
    own = engine.op_names([drafter])
    assert "experts" not in own and own != names
    for fam in REGISTRY["draft-verify"].passes(grid.knobs):
        if fam.count[0] == 0 or fam.model != "drafter":
            continue
        got = ev.families["draft-verify", fam.name].data[:, :, 0]
        alone = engine.family_cost(drafter, grid, fam, own).data[:, :, 0]
        for k, name in enumerate(own):
            assert got[:, names.index(name)] == pytest.approx(alone[:, k], rel=1e-12), name
        assert not got[:, [names.index(n) for n in names if n not in own]].any()
    for (_, name), fam in ev.families.items():
        if name in ("prefill", "verify"):
            assert not fam.data[:, names.index("mlp"), 0].any()
