"""The simulator's shortcuts give the same schedule as the plain one: a synchronous round kept per
cohort (the requests admitted together) against a round that visits every request, on random
tables, classes, memory shares, spreads and loads, to the last bit."""

from __future__ import annotations

import copy
import heapq
import math
import sys
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from dlmcost.serving.simulate import ClassTable, FrontEnd, draw_passes, simulate
from dlmcost.serving.simulate.front_end import shared_departures

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers_reference import ServersByHeap  # noqa: E402


def rounds_request_by_request(table, request_class, batch_cap, passes, arrivals_s=None, users=None, think_s=0.0,
                              ahead=False, front_end=None):
    """The synchronous policy as the module docstring states it, each round visiting every
    request in the batch: it lasts the most passes any of them has left in its current block
    (a newcomer's prompt passes with its first), then every one moves to its next block.
    `ahead` (a first block outside the limit): the limit counts the members that go on past the
    round (not in their last block) and the newcomers. `front_end`: (servers, service) each request
    passes before the engine sees it: the sends known before the run share the servers
    (`shared_departures`, pinned against a plain reference in tests/test_front_end.py), a later one
    takes the server free first (`ServersByHeap`)."""
    desk = ServersByHeap(*front_end) if front_end else None
    seen = (lambda t: t) if desk is None else desk.ready  # the time the engine sees a request sent at t

    def seen_together(times):  # the engine's times for the sends known before the run
        if desk is None:
            return list(times)
        leaving = shared_departures(list(times), *front_end)
        desk.take_shared(leaving)
        return leaving
    n = len(request_class)
    cls = request_class.tolist()
    share, pass_s = table.mem_share, table.pass_s
    lift = [[f - p for f, p in zip(fc, pc)] for fc, pc in zip(table.first_pass_s, pass_s)]
    lead, flat, n_blocks = passes.lead.tolist(), passes.flat.tolist(), passes.n_blocks.tolist()
    offset = passes.offset.tolist()
    open_loop = arrivals_s is not None
    arrival = arrivals_s.tolist() if open_loop else [math.inf] * n  # sent
    engine_sees = seen_together(arrival) if open_loop else []
    done, start, first_block = [math.nan] * n, [math.nan] * n, [math.nan] * n
    pending, next_open, issued = [], 0, 0
    if not open_loop:
        first_round = seen_together([0.0] * min(users, n))
        for i, t in enumerate(first_round):
            arrival[i] = 0.0
            pending.append((t, i))
        heapq.heapify(pending)
        issued = len(pending)
    counts, block_of = [0] * len(share), [0] * n
    queue, members = deque(), []
    share_used, now, busy, in_service, completed = 0.0, 0.0, 0.0, 0.0, 0

    def next_arrival():
        if open_loop:
            return engine_sees[next_open] if next_open < n else math.inf
        return pending[0][0] if pending else math.inf

    while completed < n:
        while next_arrival() <= now:
            if open_loop:
                queue.append(next_open)
                next_open += 1
            else:
                queue.append(heapq.heappop(pending)[1])
        newcomers = []
        going_on = sum(block_of[i] < n_blocks[i] - 1 for i in members) if ahead else len(members)
        while queue and going_on + len(newcomers) < batch_cap:
            c = cls[queue[0]]
            if share_used + share[c] > 1.0 + 1e-9 and members:
                break
            i = queue.popleft()
            share_used += share[c]
            counts[c] += 1
            members.append(i)
            newcomers.append(i)
            start[i] = now
        b = len(members)
        if b == 0:
            now = next_arrival()
            continue
        tau = sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        tau0 = tau + sum(lift[cls[i]][b] for i in newcomers) / b
        m = max(flat[offset[i] + block_of[i]] + (lead[i] if i in newcomers else 0) for i in members)
        elapsed = tau0 + (max(m, 1) - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        staying = []
        for i in members:
            if i in newcomers:
                first_block[i] = now
            block_of[i] += 1
            if block_of[i] < n_blocks[i]:
                staying.append(i)
                continue
            done[i] = now
            counts[cls[i]] -= 1
            share_used -= share[cls[i]]
            completed += 1
            if not open_loop and issued < n:
                arrival[issued] = now + think_s
                heapq.heappush(pending, (seen(now + think_s), issued))
                issued += 1
        members = staying
        if not members:
            share_used = 0.0
    return np.asarray(arrival[:n]), np.asarray(done), np.asarray(first_block), np.asarray(start), busy, now, in_service


@pytest.mark.parametrize("seed", range(50))
def test_cohort_rounds_are_the_request_by_request_rounds(seed):
    """Seeds 40 on: one class whose passes split evenly over its blocks (every block after the
    first alike, the plan's usual case: its own shortcut)."""
    check_against_request_by_request(seed, ahead=False)


@pytest.mark.parametrize("seed", sorted({*range(0, 40, 3), *range(40, 50)}))
def test_cohort_rounds_with_first_blocks_outside_the_limit(seed):
    """The same with newcomers' first blocks beside a full batch (the sglang-dllm stack's
    `first_block_outside_limit`): the cohorts count who goes on past the round as the plain
    rounds count each member (seeds 40 on: one class, the one-kind rounds' own path)."""
    check_against_request_by_request(seed, ahead=True)


def check_against_request_by_request(seed: int, ahead: bool):
    rng = np.random.default_rng(seed)
    k, cap = (int(rng.choice([1, 1, 2, 4])), int(rng.integers(1, 40))) if seed < 40 else (1, int(rng.integers(2, 40)))
    blocks = [int(rng.integers(1, 6)) for _ in range(k)]
    lead = [int(rng.integers(0, 2)) for _ in range(k)]
    nfe = [max(int(rng.integers(2, 60)), ld + b) for ld, b in zip(lead, blocks)]
    if seed >= 40:
        nfe = [ld + b * int(rng.integers(1, 12)) for ld, b in zip(lead, blocks)]
    top = 2 * cap if ahead else cap  # in flight at most (the pass tables run to it)
    later = [[0.0] + [0.01 + 0.001 * b * (c + 1) for b in range(1, top + 1)] for c in range(k)]
    first = [[0.0] + [0.05 + 0.002 * b for b in range(1, top + 1)] for _ in range(k)]
    share = [float(rng.choice([0.0, 0.05, 0.3])) for _ in range(k)]
    table = ClassTable(nfe, [1] * k, share, later, first, lead=lead, blocks=blocks)
    n = int(rng.integers(1, 300))
    cls = rng.integers(0, k, n)
    spread = float(rng.choice([0.0, 0.5])) if seed < 40 else 0.0
    passes = draw_passes(table, cls, spread, np.random.default_rng(seed))
    if seed % 2:
        load = dict(arrivals_s=np.cumsum(rng.exponential(float(rng.choice([0.01, 0.1, 1.0])), n)))
    else:
        load = dict(users=int(rng.integers(1, 50)), think_s=float(rng.choice([0.0, 0.3])))
    # every third seed: a front end of 1 to 3 servers before the engine (drawn apart, the others' draws unchanged)
    fe_rng = np.random.default_rng(500 + seed)
    front = (int(fe_rng.integers(1, 4)), float(fe_rng.choice([0.002, 0.02]))) if seed % 3 == 1 else None
    r = simulate(table, cls, cap, passes=passes, release="synchronous", first_block_outside_limit=ahead,
                 front_end=FrontEnd(*front) if front else None, **load)
    arrival, done, first_block, start, busy, end, in_service = rounds_request_by_request(table, cls, cap, passes,
                                                                                         ahead=ahead, front_end=front,
                                                                                         **load)
    assert r.arrival_s.tolist() == arrival.tolist() and r.done_s.tolist() == done.tolist()
    assert r.first_block_s.tolist() == first_block.tolist() and r.start_s.tolist() == start.tolist()
    assert (r.busy_s, r.end_s, r.in_service_s) == (busy, end, in_service)


@pytest.mark.parametrize("seed", range(24))
def test_one_kind_first_done_loop_is_the_general_loop(seed, monkeypatch):
    """One class whose requests all run the same passes (the plan's usual replica) has a
    first-done loop of its own (`_first_done_in_order`: finishes kept by id, first blocks timed as
    the clock passes them); it gives the general loop's schedule to the last bit, open and closed
    loop, with and without first blocks outside the limit, memory that binds or not, a first pass
    dearer than the others or not."""
    rng = np.random.default_rng(1000 + seed)
    ahead = bool(seed % 2)
    cap = int(rng.integers(1, 24))
    top = 2 * cap if ahead else cap
    nfe = int(rng.integers(1, 40))
    later = [0.0] + [0.01 + 0.001 * b for b in range(1, top + 1)]
    first = later if seed % 3 == 0 else [0.0] + [0.03 + 0.002 * b for b in range(1, top + 1)]
    share = float(rng.choice([0.0, 1 / 8, 0.3]))
    table = ClassTable([nfe], [int(rng.integers(1, nfe + 1))], [share], [later], [first])
    n = int(rng.integers(1, 200))
    cls = np.zeros(n, int)
    passes = draw_passes(table, cls, 0.0, np.random.default_rng(seed)) if seed % 4 < 2 else None
    _assert_one_kind_loop_is_the_general_loop(monkeypatch, table, cls, cap, top, passes=passes,
                                              first_block_outside_limit=ahead, **_one_kind_load(rng, seed, n, top, 500))


def _one_kind_load(rng, seed: int, n: int, top: int, front_seeds: int) -> dict:
    """An open loop (seeds 0 and 3 mod 4) or a closed one, and every third seed a front end (drawn
    apart, from front_seeds + seed): `simulate`'s load arguments for the one-kind loop's tests."""
    if seed % 4 in (0, 3):
        load = dict(arrivals_s=np.cumsum(rng.exponential(float(rng.choice([0.005, 0.05, 0.5])), n)))
    else:
        load = dict(users=int(rng.integers(1, 3 * top + 2)), think_s=float(rng.choice([0.0, 0.2])))
    fe_rng = np.random.default_rng(front_seeds + seed)
    front = FrontEnd(int(fe_rng.integers(1, 4)), float(fe_rng.choice([0.002, 0.02]))) if seed % 3 == 1 else None
    return dict(front_end=front, **load)


def _assert_one_kind_loop_is_the_general_loop(monkeypatch, table, cls, cap, top, **kwargs):
    """The one-kind loop runs on these inputs, and the general loop (the one-kind loop turned off
    where `first_done` looks it up) gives its schedule to the last bit."""
    import importlib

    first_done = importlib.import_module("dlmcost.serving.simulate.first_done")
    assert first_done._one_kind(table, kwargs.get("passes"), top, len(cls)) is not None  # the loop of its own runs
    r = simulate(table, cls, cap, release="first-done", **kwargs)
    monkeypatch.setattr(first_done, "_one_kind", lambda *args: None)
    g = simulate(table, cls, cap, release="first-done", **kwargs)
    for name in ("arrival_s", "done_s", "first_block_s", "start_s"):
        assert getattr(r, name).tolist() == getattr(g, name).tolist(), name
    assert (r.busy_s, r.end_s, r.in_service_s) == (g.busy_s, g.end_s, g.in_service_s)


@pytest.mark.parametrize("seed", range(24))
def test_one_kind_loop_under_a_prefill_budget_is_the_general_loop(seed, monkeypatch):
    """The one-kind loop under a prefill budget (an AR stack's chunked prefill beside the decodes):
    a prompt's pieces fed before newcomers, a newcomer waiting while they fill the budget, the
    iterations with a piece dearer by its tokens' lift, a prefill forward's dispatch or not, a
    receive interval or not; the general loop's schedule to the last bit."""
    rng = np.random.default_rng(2000 + seed)
    ahead = bool(seed % 2)
    cap = int(rng.integers(1, 24))
    top = 2 * cap if ahead else cap
    budget = int(rng.choice([8, 64, 512]))
    prompt = int(rng.integers(1, 6 * budget))  # a prompt in one piece, or in several
    k = -(-prompt // budget)  # a lone prompt's iterations of prefill
    nfe = k + int(rng.integers(1, 40))
    later = [0.0] + [0.01 + 0.001 * b for b in range(1, top + 1)]
    first = [0.0] + [0.03 + 0.002 * b for b in range(1, top + 1)]
    step = [[0.0] + [0.004 + 0.0001 * b for b in range(1, top + 1)]] if seed % 3 == 0 else None
    share = float(rng.choice([0.0, 1 / 8, 0.3]))
    table = ClassTable([nfe], [k + int(rng.integers(0, 3))], [share], [later], [first], lift_passes=[k],
                       prompt_tokens=[prompt], prefill_budget=budget, prefill_step_s=step)
    n = int(rng.integers(1, 200))
    cls = np.zeros(n, int)
    _assert_one_kind_loop_is_the_general_loop(monkeypatch, table, cls, cap, top, first_block_outside_limit=ahead,
                                              recv_interval=1 if seed % 3 == 2 else 3,
                                              **_one_kind_load(rng, seed, n, top, 600))


def never_over(table) -> int:
    """The most requests of the table's one class that hold less than the memory at their whole shares."""
    return math.floor((1 - 1e-12) / table.mem_share[0])


def test_one_kind_loop_under_a_budget_with_kv_on_demand_is_the_general_loop(monkeypatch):
    """K/V on demand, memory able to bind, a prefill budget: the one-kind loop's run without a
    memory limit is the schedule where fewer requests ran at once than hold less than the memory
    at their whole shares (the general loop asks no K/V question), else the general loop runs;
    either way the general loop's schedule to the last bit, with first blocks outside the limit or
    not, and both ways are taken here, with a front end before the engine too (servers that take
    time a request or none, a first-token delay or none: the run given up sends every request again),
    and with prefills before the decodes (SGLang's) in a quarter of the runs."""
    import importlib

    first_done = importlib.import_module("dlmcost.serving.simulate.first_done")
    original, taken = first_done._first_done_in_order, {"kept": 0, "redone": 0}
    fronted, closed = {"kept": 0, "redone": 0}, {"kept": 0, "redone": 0}  # with a front end; and in a closed loop
    for seed in range(150):
        rng = np.random.default_rng(3000 + seed)
        cap, ahead = int(rng.integers(3, 8)), bool(seed % 2)
        top = 2 * cap if ahead else cap
        budget = int(rng.choice([8, 16]))
        prompt = int(rng.choice([budget, budget // 2, int(rng.integers(1, 4 * budget))]))  # (some fill it exactly)
        k = -(-prompt // budget)
        pass_s = [[0.0] + [0.5 + 0.1 * b for b in range(1, top + 1)]]
        first_s = [[0.0] + [p + 0.8 * b for b, p in enumerate(pass_s[0]) if b]]
        table = ClassTable([k + int(rng.integers(1, 12))], [k], [1.0 / rng.uniform(1.2, top - 0.5)], pass_s, first_s,
                           lift_passes=[k], prompt_tokens=[prompt], prefill_budget=budget,
                           held_from_admission=[rng.uniform(0.1, 0.6)], prefill_first=seed % 4 == 2)
        n = int(rng.integers(4, 30))
        load = dict(arrivals_s=np.sort(rng.uniform(0, n * rng.uniform(0.3, 20.0), n)), first_block_outside_limit=ahead)
        if seed % 4 == 1:  # a closed loop: each answer's user sends again, through the front end where there is one
            load = dict(users=int(rng.integers(2, 2 * top)), think_s=float(rng.choice([0.0, 1.5])),
                        first_block_outside_limit=ahead)
        if seed % 3:
            load["front_end"] = FrontEnd(int(rng.integers(1, 3)), float(rng.choice([0.0, 0.3])),
                                         float(rng.choice([0.0, 0.7])))
        calls = []

        def one_kind(*args, give_up_over=None, **kwargs):  # its whole run's most running, and whether it gave up
            assert give_up_over == never_over(table)
            # (on copies: a closed loop's run sends through the front end's desk and into its arrival list)
            calls.extend([first_done._most_running(original(*copy.deepcopy(args), **kwargs)), "gave up"])
            calls[1] = original(*args, **kwargs, give_up_over=give_up_over)  # (giving up: an IndexError)
            return calls[1]
        monkeypatch.setattr(first_done, "_first_done_in_order", one_kind)
        r = simulate(table, np.zeros(n, int), cap, **load)
        monkeypatch.setattr(first_done, "_one_kind_on_demand", lambda *args: None)
        g = simulate(table, np.zeros(n, int), cap, **load)
        monkeypatch.undo()
        for name in ("arrival_s", "done_s", "first_block_s", "start_s"):
            assert getattr(r, name).tolist() == getattr(g, name).tolist(), (seed, name)
        assert (r.busy_s, r.end_s, r.in_service_s, r.preemptions) == (g.busy_s, g.end_s, g.in_service_s, g.preemptions)
        if calls:  # (redone: the one-kind run gave up as soon as more ran than hold less than the memory whole)
            taken["kept" if r.preempted is None else "redone"] += 1
            if "front_end" in load:
                fronted["kept" if r.preempted is None else "redone"] += 1
                if "users" in load:
                    closed["kept" if r.preempted is None else "redone"] += 1
            assert (calls[1] == "gave up") == (r.preempted is not None) == (calls[0] > never_over(table)), seed
    assert taken["kept"] >= 10 and taken["redone"] >= 10, taken
    assert fronted["kept"] >= 5 and fronted["redone"] >= 5, fronted
    assert closed["kept"] >= 2 and closed["redone"] >= 2, closed  # a closed loop's sends through a front end too


def test_memory_room_is_the_float_sum_of_shares_whole():
    """The one-kind loop's memory limit, a whole number of requests: the float sum of shares
    decides it, where its rounding cannot (every j x share far enough from 1 + 1e-9)."""
    from dlmcost.serving.simulate import _memory_room

    assert _memory_room(0.0, 7, 100) == 7  # no memory to fill
    assert _memory_room(1 / 8, 64, 2000) == 8  # 8 x 1/8 = 1 exactly, within the limit's 1e-9
    assert _memory_room(0.3, 64, 2000) == 3
    assert _memory_room(1 / 8, 5, 2000) == 5  # the batch limit first
    assert _memory_room(2.5, 64, 2000) == 1  # an empty batch takes one whatever its share
    near = math.nextafter((1 + 1e-9) / 4, 1.0)  # 4 of them 2e-16 past the limit: rounding decides
    assert _memory_room(near, 64, 2000) is None and _memory_room(near, 3, 2000) == 3  # (unless 4 cannot be)
