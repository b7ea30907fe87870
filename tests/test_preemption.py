"""K/V on demand with preemption and recompute (serving/simulate's package docstring): the
first-done loop against a plain iteration-by-iteration reference (tests/preemption_reference.py)
on random small cases, and schedules worked by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dlmcost.serving.simulate import ClassTable, RequestPasses, _one_kind, simulate

from preemption_reference import simulate_by_iteration


def _random_case(seed: int, budget: bool):
    rng = np.random.default_rng(seed)
    n_cls = int(rng.integers(1, 4))
    cap = int(rng.integers(2, 6))
    nfe_c = rng.integers(2, 14, n_cls).tolist()
    share = (1.0 / rng.uniform(1.1, cap * 0.9, n_cls)).tolist()
    held = rng.uniform(0.05, 0.6, n_cls).tolist()
    w, x = rng.uniform(0.5, 1.5, n_cls), rng.uniform(0.0, 0.3, n_cls)
    pass_s = [[0.0] + [w[c] + x[c] * b for b in range(1, cap + 1)] for c in range(n_cls)]
    lift = rng.uniform(0.0, 2.0, n_cls) * (rng.random(n_cls) < 0.8)
    first_s = [[0.0] + [p + lift[c] * b for b, p in enumerate(row) if b] for c, row in enumerate(pass_s)]
    extra = {}
    if budget:
        extra = dict(prefill_budget=int(rng.integers(6, 30)),
                     prompt_tokens=[int(v) if rng.random() < 0.85 else 0 for v in rng.integers(1, 50, n_cls)])
    table = ClassTable(nfe_c, [1] * n_cls, share, pass_s, first_s, held_from_admission=held, **extra)
    n = int(rng.integers(3, 14))
    cls = rng.integers(0, n_cls, n)
    nfe = np.array([max(1, nfe_c[c] + int(rng.integers(-1, 3))) for c in cls])
    if budget:  # every request runs past its prompt's pieces (a shorter one is the loop's own edge)
        nfe = np.maximum(nfe, [-(-table.prompt_tokens[c] // table.prefill_budget) + 2 for c in cls])
    first = np.array([int(rng.integers(1, v + 1)) for v in nfe])
    passes = RequestPasses(np.zeros(n, np.int64), nfe.astype(np.int64), np.ones(n, np.int64), first)
    if rng.random() < 0.5:
        load = dict(arrivals_s=np.sort(rng.uniform(0, n * rng.uniform(0.2, 3.0), n)))
    else:
        load = dict(users=int(rng.integers(1, cap + 3)), think_s=float(rng.uniform(0, 3)))
    return table, cls, cap, passes, nfe, first, load


@pytest.mark.parametrize("budget", [False, True])
def test_the_loop_is_the_iteration_by_iteration_reference(budget):
    preempted = 0
    for seed in range(150):
        table, cls, cap, passes, nfe, first, load = _random_case(seed, budget)
        r = simulate(table, cls, cap, passes=passes, **load)
        ref_done, ref_first, ref_pre = simulate_by_iteration(
            table, cls, cap, nfe.tolist(), first.tolist(), load.get("arrivals_s"), load.get("users"),
            load.get("think_s", 0.0))
        assert r.preemptions == ref_pre, seed
        np.testing.assert_allclose(r.done_s, ref_done, rtol=1e-9, err_msg=str(seed))
        np.testing.assert_allclose(r.first_block_s, ref_first, rtol=1e-9, err_msg=str(seed))
        preempted += ref_pre > 0
    assert preempted > 30  # the cases do preempt


def _two_requests(**extra) -> ClassTable:
    """One class: 4 passes, its first output after the first; memory for 1.5 requests at final
    length (share 2/3); the prompt a quarter of the final length; 1 s a pass at any batch, a
    prefill adding 0.4 s."""
    return ClassTable([4], [1], [2 / 3], [[0.0, 1.0, 1.0]], [[0.0, 1.4, 1.4]], held_from_admission=[0.25], **extra)


def test_two_requests_in_memory_for_one_and_a_half_by_hand():
    # Both join at 0, holding 1/6 each; each grows by (2/3 - 1/6)/4 = 1/8 a pass, so together they
    # hold 1/3 + k/4 at boundary k: 13/12 > 1 at k = 3 (t = 1.4 + 2 = 3.4). The latest admitted
    # (request 1) leaves, holding 1/6 + 3/8 = 13/24, with one pass left. Request 0 ends at 4.4;
    # request 1 rejoins then and prefills its prompt and its 3/4 of the answer again: 13/4 of
    # the prompt's tokens, 0.4 x 13/4 = 1.3 s over its pass: it ends at 4.4 + 2.3 = 6.7. Both
    # first tokens at 1.4 (request 1's stays the first one).
    r = simulate(_two_requests(), np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 1
    np.testing.assert_allclose(r.done_s, [4.4, 6.7])
    np.testing.assert_allclose(r.first_block_s, [1.4, 1.4])


def test_reserving_the_final_length_would_run_them_one_after_the_other_by_hand():
    # the same requests with each one's whole final K/V reserved at admission: 2 x 2/3 > 1
    r = simulate(replace(_two_requests(), held_from_admission=None), np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 0
    np.testing.assert_allclose(r.done_s, [4.4, 8.8])
    np.testing.assert_allclose(r.first_block_s, [1.4, 5.8])


def test_a_preempted_prompt_s_recompute_is_fed_in_pieces_by_hand():
    # The same, with 8-token prompts under a budget of 16 (each token 0.4 / 8 = 0.05 s): both
    # prompts fit iteration 0. Request 1, preempted at 3 as above, rejoins at 4.4 with
    # round(8 x 13/4) = 26 tokens: 16 in iteration 4 (1 + 0.8 s) and 10 in iteration 5
    # (1 + 0.5 s), its last pass: it ends at 4.4 + 1.8 + 1.5 = 7.7.
    r = simulate(_two_requests(prompt_tokens=[8], prefill_budget=16), np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 1
    np.testing.assert_allclose(r.done_s, [4.4, 7.7])
    np.testing.assert_allclose(r.first_block_s, [1.4, 1.4])


def test_a_prefix_cached_prompt_s_first_pass_and_its_recompute_by_hand():
    # The two requests above with half of each prompt in the prefix cache: iteration 0 is
    # 1 + (0.4 x 0.5 + 0.4 x 0.5) / 2 = 1.2 s, the K/V the same, so request 1 leaves at boundary 3
    # (t = 3.2) holding 13/24 and request 0 ends at 4.2; request 1's recompute prefills its prompt
    # and its tokens whatever the cache held (the package docstring): 1 + 0.4 x 13/4 = 2.3 s, to 6.5.
    r = simulate(_two_requests(), np.zeros(2, int), 2, arrivals_s=np.zeros(2), uncached=np.array([0.5, 0.5]))
    assert r.preemptions == 1
    np.testing.assert_allclose(r.done_s, [4.2, 6.5])
    np.testing.assert_allclose(r.first_block_s, [1.2, 1.2])


def test_a_recompute_s_prefill_forward_adds_its_dispatch_by_hand():
    # The two requests above, each prefill forward adding its dispatch once: 0.1 s for their class
    # (another class, unused, 0.3 s: no common row, so the dispatch is looked up by the classes
    # prefilled). Iteration 0: 1 + 0.8 / 2 + 0.1 = 1.5 s; request 1 leaves at boundary 3 (3.5),
    # request 0 ends at 4.5; request 1's recompute runs alone: 1 + 0.4 x 13/4 + 0.1 = 2.4 s, to 6.9.
    two = _two_requests()
    table = ClassTable([4, 4], [1, 1], two.mem_share * 2, two.pass_s * 2, two.first_pass_s * 2,
                       held_from_admission=[0.25, 0.25], prefill_step_s=[[0.0, 0.1, 0.1], [0.0, 0.3, 0.3]])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 1
    np.testing.assert_allclose(r.done_s, [4.5, 6.9])
    np.testing.assert_allclose(r.first_block_s, [1.5, 1.5])


def test_the_last_request_running_is_never_preempted_by_hand():
    # Share 3/2 (more than the memory at its final length), its prompt 3/8: both join at 0
    # (3/4 held), each growing 9/32 a pass: 21/16 > 1 at boundary 1 (t = 1.4), where request 1
    # leaves holding 21/32 (its first block streamed there). Request 0, alone, holds more than the
    # memory from boundary 3 (39/32) and runs on to 4.4; request 1 rejoins then with 3 passes left, its
    # first pass 1 + 0.4 x (21/32) / (3/8) = 1.7 s: it ends at 4.4 + 1.7 + 2 = 8.1.
    table = replace(_two_requests(), mem_share=[1.5])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 1 and r.preempted.tolist() == [0, 1]
    np.testing.assert_allclose(r.done_s, [4.4, 8.1])
    np.testing.assert_allclose(r.first_block_s, [1.4, 1.4])
    # request 1 sent at 2.5 instead: request 0 runs alone, over the memory at boundary 3 (t = 3.4),
    # where request 1 is seen and waits (39/32 + 3/8 > 1); it joins at 4.4 and ends at 8.8
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.array([0.0, 2.5]))
    assert r.preemptions == 0
    np.testing.assert_allclose(r.done_s, [4.4, 8.8])
    np.testing.assert_allclose(r.first_block_s, [1.4, 5.8])
    empty = simulate(table, np.zeros(0, int), 2, arrivals_s=np.zeros(0))  # (no requests: nothing runs)
    assert len(empty.done_s) == 0 and empty.busy_s == 0


@pytest.mark.parametrize("seed", range(20))
def test_where_memory_does_not_bind_k_v_on_demand_changes_nothing(seed):
    # memory for more than batch_cap - 1 requests at final length but fewer than batch_cap, and
    # batch_cap - 1 users: the loop keeps K/V on demand, and never runs out of it
    table, cls, cap, passes, _, _, load = _random_case(seed, seed % 2 == 1)
    table = replace(table, mem_share=[1.0 / (cap - 0.5)] * len(table.nfe))
    load = dict(users=cap - 1, think_s=0.5)
    grown = simulate(table, cls, cap, passes=passes, **load)
    reserved = simulate(replace(table, held_from_admission=None), cls, cap, passes=passes, **load)
    assert grown.preemptions == 0
    for a, b in zip((grown.done_s, grown.first_block_s, grown.start_s), (reserved.done_s, reserved.first_block_s,
                                                                        reserved.start_s)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_only_a_run_where_memory_can_bind_leaves_the_one_kind_loop():
    table = ClassTable([4], [1], [0.25], [[0.0] + [1.0] * 8], held_from_admission=[0.25])
    assert _one_kind(table, None, 4, 10) is not None  # 4 x 0.25: never more than the memory
    assert _one_kind(table, None, 5, 10) is None
    assert _one_kind(replace(table, held_from_admission=None), None, 5, 10) is not None  # reserved: room 4


def test_the_kept_line_decides_as_the_exact_sum_does():
    # HeldKV answers from a line it updates as requests join and leave, and sums exactly only near
    # the limit: its answers are those of the exact sum, here with limits set at the exact sums
    # themselves and a hair either side (where the line alone could not tell), over long runs
    from dlmcost.serving.simulate.on_demand import HeldKV

    rng = np.random.default_rng(7)
    n = 3000
    kv = HeldKV(n)
    k = 0
    for i in range(n):
        k += int(rng.integers(0, 40))
        if kv.running and rng.random() < 0.45:
            kv.leave(list(kv.running)[int(rng.integers(len(kv.running)))])
        s = 1 / rng.choice([3, 7, 48, 250])
        kv.join(i, k, k + int(rng.integers(1, 9000)), s * rng.choice([0.1, 1 / 9, 0.5]), s)
        probe = k + int(rng.integers(0, 30))
        if probe > min(kv.fin[j] for j in kv.running):
            continue
        exact = kv.exact(probe)
        for limit in (exact, np.nextafter(exact, 0), np.nextafter(exact, 9), exact + 1e-12, exact - 1e-12, 1.0):
            assert kv.over(probe, limit) == (kv.exact(probe) > limit)


@pytest.mark.parametrize("seed", range(12))
def test_preemptions_beside_first_blocks_outside_the_limit_and_a_receive_interval_keep_the_books(seed):
    # the reference covers neither: every request is served once, in order of its own events, and
    # the time integral of the batch is the requests' time in it (less their time out after a preemption)
    table, cls, cap, passes, _, _, load = _random_case(seed, seed % 2 == 1)
    # (first blocks outside a limit of cap // 2: at most cap in flight, what the pass tables run to)
    for limit, extra in ((cap // 2, dict(first_block_outside_limit=True)), (cap, dict(recv_interval=3))):
        r = simulate(table, cls, limit, passes=passes, **load, **extra)
        assert np.isfinite(r.done_s).all() and (r.done_s >= r.first_block_s - 1e-9).all()
        assert (r.first_block_s >= r.start_s - 1e-9).all() and (r.start_s >= r.arrival_s - 1e-9).all()
        assert r.in_service_s == pytest.approx(float(np.sum(r.done_s - r.start_s - r.requeued_s)), rel=1e-9)


def test_one_kind_runs_below_the_memory_take_the_fast_loop_and_match_the_reference(monkeypatch):
    """One class whose requests all run the same passes, memory able to bind (batch limit x share
    > 1): the fast loop without a memory limit is the schedule wherever no more requests run than
    hold less than the memory at their whole shares (no K/V question is asked), else the general
    loop runs; either way the reference's schedule, and both ways are taken here."""
    import importlib

    first_done = importlib.import_module("dlmcost.serving.simulate.first_done")
    taken = {"kept": 0, "redone": 0}
    most, original = first_done._most_running, first_done._first_done_in_order
    for seed in range(120):
        rng = np.random.default_rng(1000 + seed)
        cap = int(rng.integers(3, 7))
        nfe_c, share, held = int(rng.integers(3, 12)), 1.0 / rng.uniform(1.2, cap - 0.5), rng.uniform(0.1, 0.6)
        w, x = rng.uniform(0.5, 1.5), rng.uniform(0.0, 0.3)
        pass_s = [[0.0] + [w + x * b for b in range(1, cap + 1)]]
        first_s = [[0.0] + [p + rng.uniform(0, 2) * b for b, p in enumerate(pass_s[0]) if b]]
        table = ClassTable([nfe_c], [1], [share], pass_s, first_s, held_from_admission=[held])
        n = int(rng.integers(4, 14))
        cls = np.zeros(n, np.int64)
        spread = rng.uniform(0.3, 4.0) if seed % 2 else rng.uniform(6.0, 20.0)  # (odd seeds: heavier loads)
        load = dict(arrivals_s=np.sort(rng.uniform(0, n * spread, n)))
        never_over = int(np.floor((1 - 1e-12) / share))
        calls = []
        monkeypatch.setattr(first_done, "_first_done_in_order", lambda *a, **k: calls.append(1) or original(*a, **k))
        r = simulate(table, cls, cap, **load)
        ref_done, ref_first, ref_pre = simulate_by_iteration(
            table, cls, cap, [nfe_c] * n, [1] * n, load["arrivals_s"], None, 0.0)
        np.testing.assert_allclose(r.done_s, ref_done, rtol=1e-9, err_msg=str(seed))
        np.testing.assert_allclose(r.first_block_s, ref_first, rtol=1e-9, err_msg=str(seed))
        assert r.preemptions == ref_pre
        if calls and r.preempted is None:
            taken["kept"] += 1
            assert most(r) <= never_over
        elif calls:
            taken["redone"] += 1
    assert taken["kept"] >= 10 and taken["redone"] >= 10, taken


def test_a_recompute_whose_first_pass_costs_less_than_a_pass_is_not_scaled_below_it_by_hand():
    # _two_requests with a first pass of 0.6 s, less than a plain pass (a short prompt before a
    # long answer): lift -0.4. Iteration 0: 1 + (-0.4 - 0.4) / 2 = 0.6 s; boundary 3 at 2.6, where
    # request 1 is preempted as above. Request 0 ends at 3.6. Request 1 rejoins alone: its
    # recompute is taken as its first pass (1 - 0.4 = 0.6 s), not the lift x 13/4 (-0.3 s: it
    # would end at 3.3, before it rejoined). It ends at 4.2.
    table = ClassTable([4], [1], [2 / 3], [[0.0, 1.0, 1.0]], [[0.0, 0.6, 0.6]], held_from_admission=[0.25])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 1
    np.testing.assert_allclose(r.done_s, [3.6, 4.2])
    np.testing.assert_allclose(r.first_block_s, [0.6, 0.6])
    for budget in (dict(prompt_tokens=[8], prefill_budget=16), {}):  # its 8 tokens again, not 26 (-1.3 s)
        table_b = replace(table, **budget)
        ref = simulate_by_iteration(table_b, [0, 0], 2, [4, 4], [1, 1], [0.0, 0.0])
        np.testing.assert_allclose(simulate(table_b, np.zeros(2, int), 2, arrivals_s=np.zeros(2)).done_s, ref[0])
        np.testing.assert_allclose(ref[0], [3.6, 4.2])


def test_a_prompt_of_no_tokens_recomputes_as_its_first_pass_by_hand():
    # _two_requests with a prompt holding nothing (0 tokens): each holds k/6 at boundary k, both
    # 2k/6 > 1 first at k = 4, after both end (4 passes): no preemption at 2 users. With memory for
    # 1.2 requests (share 1/1.2), 2k/(4 x 1.2) > 1 at k = 3 (t = 1.4 + 2 = 3.4): request 1 leaves
    # holding 3/4.8 and rejoins at 4.4, its lift 0.4 unscaled (its prompt's share, 0, has nothing
    # to scale it by): 1.4 s, ending at 5.8.
    table = ClassTable([4], [1], [1 / 1.2], [[0.0, 1.0, 1.0]], [[0.0, 1.4, 1.4]], held_from_admission=[0.0])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.preemptions == 1
    np.testing.assert_allclose(r.done_s, [4.4, 5.8])


@pytest.mark.parametrize("near_whole", [False, True])
def test_the_first_boundary_over_the_limit_is_the_exact_sums_by_brute_force(near_whole):
    # HeldKV.first_over against the exact sum at every boundary of lo..hi (the K/V held only grows
    # there: hi is the first finish), with limits at those sums, a hair either side, and below lo
    # (the answer is then lo); where requests join holding nearly their whole shares the line's slope
    # is so small that its rounding moves its crossing many boundaries off. And `over` with a
    # newcomer's K/V (`extra`) at the exact sums with it.
    from dlmcost.serving.simulate.on_demand import HeldKV

    rng = np.random.default_rng(11 + near_whole)
    n = 300
    kv = HeldKV(n)
    k = 0
    for i in range(n):
        k += int(rng.integers(0, 5))
        for j in [j for j in kv.running if kv.fin[j] < k + 3]:  # (those ending by then leave)
            kv.leave(j)
        while len(kv.running) > 12 or (kv.running and rng.random() < 0.3):
            kv.leave(list(kv.running)[int(rng.integers(len(kv.running)))])
        s = 1 / rng.choice([3, 7, 48, 250])
        held = 1 - rng.choice([1e-9, 1e-13]) if near_whole else rng.choice([0.1, 1 / 9, 0.5])
        kv.join(i, k, k + int(rng.integers(20, 400)), s * held, s)
        if i % 6:
            continue
        lo = k + 1
        hi = min(lo + 40, min(kv.fin[j] for j in kv.running))
        sums = [kv.exact(j) for j in range(lo - 3, hi + 1)]
        for at in (0, 2, len(sums) // 2, len(sums) - 2):
            for limit in (sums[at], np.nextafter(sums[at], 0), np.nextafter(sums[at], 9)):
                expect = next((j for j, x in zip(range(lo - 3, hi + 1), sums) if j >= lo and x > limit), None)
                assert kv.first_over(lo, hi, limit) == expect, (i, at)
        extra = s * 0.25
        exact = kv.exact(lo, extra)
        for limit in (exact, np.nextafter(exact, 0), np.nextafter(exact, 9)):
            assert kv.over(lo, limit, extra) == (exact > limit)


def test_with_no_request_running_only_the_newcomer_s_k_v_counts():
    from dlmcost.serving.simulate.on_demand import HeldKV

    kv = HeldKV(1)
    assert not kv.over(0, 0.5, 0.5) and kv.over(0, 0.5, 0.75) and not kv.over(0, 0.5)
