"""The first-done release policy (the package docstring): the general event loop. A run of one
kind of request without a cache goes to the loop of its own (in_order.py, a prefill budget or
not), which follows the same arithmetic: a serving behaviour added to one goes in the other.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from functools import partial

import numpy as np

from .front_end import _arrival_list, _Desk
from .in_order import (MEMORY_LIMIT, _first_done_in_order, _fit_whole, _most_running, _one_kind, _one_kind_on_demand,
                       _one_stream)
from .on_demand import HeldKV
from .receiving import Receiver
from .tables import (ClassTable, RequestPasses, SimResult, _check_prefill_first, _prefill_stream, in_flight_cap,
                     uncached_prompt_tokens)
from .work import SimulationWork

def first_done(table: ClassTable, request_class: np.ndarray, batch_cap: int, arrivals_s: np.ndarray | None,
               users: int | None, think_s: float, passes: RequestPasses | None, first_block_outside_limit: bool,
               uncached: np.ndarray | None, desk: _Desk | None, recv_interval: int = 1,
               work: SimulationWork | None = None) -> SimResult:
    """The first-done policy (the package docstring), with the front end's desk (None: requests
    reach the engine as they are sent), the scheduler's receive interval (receiving.py) and the
    command's count of preemptions (work.py; None: no limit)."""
    stream = _prefill_stream(table)
    ahead = first_block_outside_limit
    n = len(request_class)
    # the plan's usual replica (one kind of request, no cache): a loop of its own, the same schedule
    alike = _one_kind(table, passes, in_flight_cap(batch_cap, ahead), n) if uncached is None else None
    if alike is not None:
        return _first_done_in_order(table, request_class, batch_cap, ahead, *alike,
                                    *_arrival_list(n, arrivals_s, users, desk), think_s, desk, recv_interval,
                                    _one_stream(table, stream))
    cap_in_flight = in_flight_cap(batch_cap, ahead)
    on_demand = _one_kind_on_demand(table, passes) if uncached is None else None
    if on_demand is not None:  # K/V on demand: the same schedule as no memory limit while so few run that none is asked
        nfe0, first0, never_over = on_demand
        try:
            result = _first_done_in_order(table, request_class, batch_cap, ahead, nfe0, first0, cap_in_flight,
                                          *_arrival_list(n, arrivals_s, users, desk), think_s, desk, recv_interval,
                                          _one_stream(table, stream), give_up_over=never_over)
        except IndexError:  # more ran at once: a schedule not kept, given up as soon as it was known
            result = None
        if result is not None and _most_running(result) <= never_over:
            return result
        if desk is not None:  # the run below sends every request through the front end again, anew (a
            desk.reset(n)     # closed loop's run gives up before an answer comes back: nothing sent since)
    cls = request_class.tolist()
    share, pass_s = table.mem_share, table.pass_s
    # what a request in its first pass adds to the iteration, over b: first_pass_s - pass_s
    lift = table.lift
    pending = 0  # under a budget: tokens of the prompt in its pieces not yet prefilled (at most one such prompt)
    if stream is None:
        base_nfe, base_first = table.nfe, table.first_passes
        prompt = [0] * len(share)  # no prompt waits for budget
    else:  # the passes and the lift of a prompt prefilled whole; the stream adds each request's pieces
        budget, prompt, lone_k = stream
        base_nfe = [x - k + 1 for x, k in zip(table.nfe, lone_k)]
        base_first = [f - k + 1 for f, k in zip(table.first_passes, lone_k)]
        # a token of a class-c prompt adds lift / P_c (over b) to the iteration that prefills it
        per_token = [[k * x / pc for x in row] if pc else row for row, k, pc in zip(lift, lone_k, prompt)]
        lift = [[0.0] * len(row) if pc else row for row, pc in zip(lift, prompt)]
        pending_c = pending_req = -1
    if passes is None:
        nfe = [base_nfe[c] for c in cls]
        first = [base_first[c] for c in cls]
    elif stream is None:
        nfe, first = passes.nfe.tolist(), passes.first.tolist()
    else:  # each request's own passes, less its class's lone prefill iterations past the first (as above)
        extra = np.asarray(lone_k, np.int64)[request_class] - 1
        nfe, first = (passes.nfe - extra).tolist(), (passes.first - extra).tolist()
    pf = table.prefill_first  # prefills before the decodes: finishes counted in decode iterations (`dec`)
    if pf:
        _check_prefill_first(nfe, first, ahead, prompt if stream is not None else None)
    uniform = not any(any(row) for row in lift)
    lift0 = lift[0]
    steps = table.prefill_step_s is not None  # an iteration that prefills adds its forward's dispatch once
    step_row = table.common_prefill_step if steps else None  # the same for every class: one lookup
    # a prompt partly in the prefix cache: its lift (no budget) or its tokens in the stream scale down
    part = None if uncached is None else uncached.tolist()
    own = None  # under a budget, each request's tokens in the stream where not its class's prompt's
    if part is not None and stream is not None:
        own = [uncached_prompt_tokens(prompt[c], u) for c, u in zip(cls, part)]
    done = [math.nan] * n
    start = [math.nan] * n
    first_it = [0] * n
    counts = [0] * len(share)
    # a decoding whose K/V grows as it runs, where memory can bind: K/V on demand, preemption and
    # recompute (the package docstring); the state it keeps is set up with it
    grow = table.held_from_admission is not None and cap_in_flight * max(share) > 1.0
    requeued: deque | tuple = ()  # preempted requests, at the front of the queue (oldest first)
    if grow:
        held = table.held_from_admission
        kv = HeldKV(n)  # the running requests' K/V, in the order they were admitted
        # so many requests hold less than the memory even at their whole shares: no question to ask below it
        never_over = _fit_whole(max(share))
        fin = kv.fin
        factor = [1.0] * n if part is None else list(part)  # its first pass's lift over its prompt's whole one
        rescaled = _recompute_rescaled(table)
        if stream is not None and own is None:
            own = [prompt[c] for c in cls]  # tokens it puts into the stream (its recompute's, once preempted)
        requeued = deque()
        preempted = [0] * n  # times each request was preempted
        requeued_s = [0.0] * n  # ... and the time it spent out of the batch (minus its leaving time while out)
        preemptions = 0  # in all, against what the command may still run
        allowed = work.left if work is not None else math.inf

    # requests arrive in id order (sorted arrivals; a closed loop's users ask again in the order
    # their answers come), so the queue is the ids head..tail - 1: those below `issued` have an
    # arrival time, the others (and the sentinel at n) math.inf
    open_loop = arrivals_s is not None
    arrival, issued = _arrival_list(n, arrivals_s, users, desk)
    single = len(share) == 1 and part is None  # with a cache the lifts differ request by request
    # in flight: (finish iteration, request), the earliest first; with one NFE for every request
    # they finish in the order they were admitted (a queue); else a heap, or, where newcomers wait
    # on the batch_cap-th latest finish (`ahead`), a sorted list that reads it off by index. Under a
    # prefill budget a prompt's pieces put off its finish: admission order is finish order only where
    # every request's prompt is in the stream (its pieces end after those admitted before it) or none
    # is (a request without a prompt pass admitted beside a prompt in its pieces can finish first)
    fifo = not grow and len(set(nfe)) <= 1 and (stream is None or len({prompt[c] > 0 for c in set(cls)}) <= 1)
    pass0 = pass_s[0]
    in_service = 0.0
    inflight: deque | list = deque() if fifo else []
    if fifo:
        push, pop = inflight.append, inflight.popleft
    elif ahead or grow:  # (a preempted request leaves a sorted list, found by bisection)
        push, pop = partial(bisect.insort, inflight), partial(inflight.pop, 0)
    else:
        push, pop = partial(heapq.heappush, inflight), partial(heapq.heappop, inflight)
    head = tail = b = 0
    share_used = 0.0
    limit = MEMORY_LIMIT
    it = 0
    dec = 0  # decode iterations run: `it` itself unless prefills run before the decodes (pf)
    now = 0.0
    busy = 0.0
    seg_it: list[int] = []
    seg_t: list[float] = []
    seg_tau: list[float] = []
    completed = 0
    recv = Receiver(recv_interval) if recv_interval > 1 else None
    while completed < n:
        while grow and b > never_over and b > 1 and kv.over(dec, limit):
            # the K/V grown on demand ran out: the latest admitted leaves for the front of the queue
            i = kv.newest()
            c = cls[i]
            del inflight[bisect.bisect_left(inflight, (fin[i], i))]
            u = kv.term(i, dec)
            # it prefills its prompt and its tokens so far again (where its class's lift can be scaled)
            kv.h0[i], factor[i] = u, u / (share[c] * held[c]) if rescaled[c] else 1.0
            nfe[i] = fin[i] - dec  # the passes it had left, the first of them that prefill
            first[i] = first_it[i] - it if first_it[i] > it else -1  # -1: its first output was streamed
            if stream is not None and prompt[c]:
                own[i] = max(1, round(prompt[c] * factor[i]))
                if pending and pending_req == i:
                    pending = 0  # its pieces stop with it
            counts[c] -= 1
            b -= 1
            requeued.appendleft(i)
            preempted[i] += 1
            requeued_s[i] -= now
            preemptions += 1
            if preemptions > allowed:
                work.refuse(share, cls)
        # arrivals up to now join the queue (under a receive interval: up to the last receiving boundary)
        seen = now if recv is None else recv.seen(it, now, b > 0 or head < tail or bool(requeued), arrival[tail])
        if arrival[tail] <= seen:
            tail = bisect.bisect_right(arrival, seen, tail, issued)
        next_t = arrival[tail]
        # admit at this boundary, first come first served
        first_new = head
        joined = [] if grow else None
        opens_at = None  # ahead: the iteration at which the head of the queue may join
        if stream is not None:  # the coming iteration's budget: the piece of a prompt in its pieces first
            if pending:
                piece = pending if pending < budget else budget
                fed, room, pending = [(pending_c, piece)], budget - piece, pending - piece
            else:
                fed, room = [], budget
            starved = False  # a prompt waits for budget
        while (head < tail or requeued) and b < cap_in_flight:
            i = requeued[0] if requeued else head
            c = cls[i]
            if grow:  # the K/V held now and its own (its prompt's; a preempted one's, its tokens so far) fit
                h = kv.h0[i] if requeued else share[c] * held[c]
                if b >= never_over and b and kv.over(dec, limit, h):
                    break
            elif share_used + share[c] > limit and b:
                break
            later = 0  # iterations its prompt's pieces run past the coming one
            pc = prompt[c] if own is None else own[i]
            if pc:
                if room <= 0:
                    starved = True  # the budget is another prompt's piece: the queue waits, first come first served
                    break
                later = -(-(pc - room) // budget) if pc > room else 0
            if ahead and b >= batch_cap:
                # the batch_cap-th latest finish must come by the end of the newcomer's first block
                kth = inflight[len(inflight) - batch_cap][0]
                to_first = first[i] if first[i] > 0 else 0  # (a preempted one's first output was streamed: its prefill)
                if kth > it + to_first + later:
                    opens_at = kth - to_first - later
                    break
            if pc:
                fed.append((c, pc if pc < room else room))
                if later:
                    pending, pending_c, pending_req = pc - room, c, i
                room -= pc
            share_used += share[c]
            counts[c] += 1
            # its finish: its pieces past the first put it off; where prefills run first, it is counted in
            # decode iterations, nfe - 1 after its prefill's (its first output), however many pieces that took
            fin_i = dec + nfe[i] - 1 if pf else it + nfe[i] + later
            push((fin_i, i))
            if first[i] >= 0:  # (-1: a preempted request's first output was streamed before)
                first_it[i] = it + first[i] + later
            b += 1
            if grow:
                kv.join(i, dec, fin_i if fin_i > dec else dec + 1, h, share[c])  # (one output: gone before it grows)
                joined.append(i)
                if requeued:
                    requeued.popleft()
                    requeued_s[i] += now
                    continue
            head += 1
        if b == 0:
            now = next_t  # idle until the next request
            continue
        new = head - first_new if joined is None else len(joined)
        if joined:
            for i in joined:
                if start[i] != start[i]:  # (NaN: its first admission)
                    start[i] = now
        elif new:
            start[first_new:head] = [now] * new
        prefill_only = pf and bool(fed if stream is not None else new)
        if prefill_only:  # an iteration of prefills alone, the decodes waiting: costed at the batch it prefills
            bb = len(fed) if stream is not None else new
            if single:
                tau = pass0[bb]
            elif stream is not None:
                tau = sum(pass_s[c][bb] for c, _ in fed) / bb
            else:
                tau = sum(pass_s[cls[i]][bb] for i in (range(first_new, head) if joined is None else joined)) / bb
        else:
            bb = b
            tau = pass0[b] if single else sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        # this iteration: the admitted requests run their first pass (a whole prefill, unless in pieces)
        if uniform or not new:
            tau0 = tau
        elif grow:  # each one's share of its prompt prefilled (a preempted one: its prompt and its tokens so far)
            tau0 = tau + sum(lift[cls[i]][bb] * factor[i] for i in joined) / bb
        elif single:
            tau0 = tau + new * lift0[bb] / bb
        elif part is not None:
            tau0 = tau + sum(lift[cls[i]][bb] * part[i] for i in range(first_new, head)) / bb
        else:
            tau0 = tau + sum(lift[cls[i]][bb] for i in range(first_new, head)) / bb
        if new and steps and stream is None:  # one prefill forward's own dispatch, once
            tau0 += step_row[bb] if step_row is not None else table.prefill_step(
                cls[first_new:head] if joined is None else [cls[i] for i in joined], bb)
        if prefill_only:  # then, unless it prefills again, every request's decodes to the next completion
            m = 1 + inflight[0][0] - dec
            tau_d = pass0[b] if single else sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        else:
            m = inflight[0][0] - dec  # iterations to the next completion
        if opens_at is not None:
            m = min(m, opens_at - it)
        if stream is not None:  # the pieces prefilled in this iteration, then whole budgets of one prompt
            if fed:
                lifted = 0.0
                for c, t in fed:
                    lifted += t * per_token[c][bb]
                tau0 += lifted / bb
                if steps:  # each iteration that prefills is one prefill forward: its own dispatch once
                    tau0 += step_row[bb] if step_row is not None else table.prefill_step([c for c, _ in fed], bb)
            if pending and prefill_only:  # then its prompt's pieces alone, a whole budget each
                tau = pass_s[pending_c][1] + budget * per_token[pending_c][1]
                if steps:
                    tau += step_row[1] if step_row is not None else table.prefill_step((pending_c,), 1)
                m = -(-pending // budget)  # to its last piece, which leaves budget to the queue
                if m > 1 and inflight[0][0] == dec:
                    m = 1  # a request whose one output was its prefill's leaves after the coming iteration
            elif pending:
                tau += budget * per_token[pending_c][b] / b
                if steps:
                    tau += step_row[b] if step_row is not None else table.prefill_step((pending_c,), b)
                # its last piece leaves budget to the queue: the iteration time changes there
                m = min(m, -(-pending // budget))
            elif starved:
                m = 1  # the next iteration's budget is the waiting prompt's
        # prefills go on at the next boundary (a prompt's pieces, or one waiting for budget): no decode between
        chain = prefill_only and stream is not None and bool(pending or starved)
        if prefill_only and not chain:
            tau = tau_d
        if recv is not None:
            prefills, every = bool(new or (stream is not None and fed)), bool(pending)
        # an arrival could join then (not while a prompt's pieces fill the budget)
        if not chain and head == tail and not requeued and b < cap_in_flight and next_t < math.inf:
            m_a = 1 + math.ceil((next_t - now - tau0) / tau - 1e-9)  # the first boundary at or after it
            if recv is not None and not every:  # ... that receives
                m_a = recv.first_at_or_after(it, it + (m_a if m_a > 1 else 1), prefills) - it
            if m_a < m:
                m = m_a if m_a > 1 else 1
        if grow and not chain and b > never_over and b > 1 and m > 1:  # the K/V grown on demand runs out before
            # then: a preemption there (after a prefill iteration the decode iterations' boundaries, one later)
            lag = 1 if prefill_only else 0
            over = kv.first_over(dec + 1, dec + m - 1 - lag, limit) if m - lag > 1 else None
            if over is not None:
                m = over - dec + lag
        if recv is not None:
            recv.passed(it, m, now, tau0, tau, prefills, every)
        seg_it.append(it)
        seg_t.append(now)
        seg_tau.append(tau0)
        if tau0 != tau and m > 1:  # the admission iteration, then m - 1 iterations of tau
            seg_it.append(it + 1)
            seg_t.append(now + tau0)
            seg_tau.append(tau)
        it += m
        dec += 0 if chain else m - 1 if prefill_only else m
        if pending:
            pending -= (m - 1) * budget  # whole budgets of it in the iterations after the coming one
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        while b and inflight[0][0] == dec:
            if pf and pending and inflight[0][1] == pending_req:
                break  # its one output comes with its prompt's last piece
            i = pop()[1]
            c = cls[i]
            if grow:
                kv.leave(i)
            done[i] = now
            counts[c] -= 1
            share_used -= share[c]
            completed += 1
            b -= 1
            if not open_loop and issued < n:  # the user thinks, then asks again
                arrival[issued] = now + think_s if desk is None else desk.send(issued, now + think_s)
                issued += 1
        if pending and done[pending_req] == done[pending_req]:
            pending = 0  # its request ended before its last piece (NFE < lift_passes): nothing left to feed
        if not b:
            share_used = 0.0  # no drift from float sums
        if grow and b < never_over:
            kv.rest()  # no K/V question until as many run again

    if grow and work is not None:
        work.spend(preemptions)
    # iteration number -> time, via the segment each boundary ends
    seg_it_arr, first_it_arr = np.asarray(seg_it), np.asarray(first_it)
    k = np.searchsorted(seg_it_arr, first_it_arr, side="left") - 1
    k = np.clip(k, 0, len(seg_it) - 1)
    first_block = np.asarray(seg_t)[k] + (first_it_arr - seg_it_arr[k]) * np.asarray(seg_tau)[k]
    return SimResult(np.array(arrival[:n], float), np.array(done, float), first_block, np.asarray(request_class),
                     busy, now, np.array(start, float), in_service,
                     np.array(preempted, np.int64) if grow else None, np.array(requeued_s, float) if grow else None)


def _recompute_rescaled(table: ClassTable) -> list[bool]:
    """Whether each class's recompute after a preemption scales its first pass's lift (and, under a
    prefill budget, its prompt's tokens) by what it held over its prompt's share. Not where the prompt
    holds nothing (no tokens to scale from) or the lift is negative at some batch size: a short
    prompt's first pass costs less than the class's mean pass, whose attention over a long answer
    outweighs the prefill, and scaling that lift up would make the recompute's iteration shorter
    than a plain pass, even negative. There the recompute is taken as its first pass was (an
    underestimate: the table holds no prefill cost per token to scale)."""
    return [h > 0 and all(x >= 0 for x in row[1:]) for row, h in zip(table.lift, table.held_from_admission)]

