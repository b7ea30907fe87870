"""The first-done release policy (the package docstring): the general event loop, and the loop of
its own for one kind of request without a cache (`_first_done_in_order`, a prefill budget or
not), which follows the same arithmetic: a serving behaviour added to one goes in the other.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from functools import lru_cache, partial

import numpy as np

from .front_end import _arrival_list, _Desk
from .on_demand import HeldKV
from .receiving import Receiver
from .tables import (ClassTable, RequestPasses, SimResult, _prefill_stream, held_as_each_joins, in_flight_cap,
                     uncached_prompt_tokens)

def first_done(table: ClassTable, request_class: np.ndarray, batch_cap: int, arrivals_s: np.ndarray | None,
               users: int | None, think_s: float, passes: RequestPasses | None, first_block_outside_limit: bool,
               uncached: np.ndarray | None, desk: _Desk | None, recv_interval: int = 1) -> SimResult:
    """The first-done policy (the package docstring), with the front end's desk (None: requests
    reach the engine as they are sent) and the scheduler's receive interval (receiving.py)."""
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
    on_demand = _one_kind_on_demand(table, passes) if uncached is None and desk is None else None
    if on_demand is not None:  # K/V on demand: the same schedule as no memory limit while so few run that none is asked
        nfe0, first0, never_over = on_demand
        try:
            result = _first_done_in_order(table, request_class, batch_cap, ahead, nfe0, first0, cap_in_flight,
                                          *_arrival_list(n, arrivals_s, users, None), think_s, None, recv_interval,
                                          _one_stream(table, stream), give_up_over=never_over)
        except IndexError:  # more ran at once: a schedule not kept, given up as soon as it was known
            result = None
        if result is not None and _most_running(result) <= never_over:
            return result
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
    now = 0.0
    busy = 0.0
    seg_it: list[int] = []
    seg_t: list[float] = []
    seg_tau: list[float] = []
    completed = 0
    recv = Receiver(recv_interval) if recv_interval > 1 else None
    while completed < n:
        while grow and b > never_over and b > 1 and kv.over(it, limit):
            # the K/V grown on demand ran out: the latest admitted leaves for the front of the queue
            i = kv.newest()
            c = cls[i]
            del inflight[bisect.bisect_left(inflight, (fin[i], i))]
            u = kv.term(i, it)
            # it prefills its prompt and its tokens so far again (where its class's lift can be scaled)
            kv.h0[i], factor[i] = u, u / (share[c] * held[c]) if rescaled[c] else 1.0
            nfe[i] = fin[i] - it  # the passes it had left, the first of them that prefill
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
                if b >= never_over and b and kv.over(it, limit, h):
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
            push((it + nfe[i] + later, i))
            if first[i] >= 0:  # (-1: a preempted request's first output was streamed before)
                first_it[i] = it + first[i] + later
            b += 1
            if grow:
                kv.join(i, it, it + nfe[i] + later, h, share[c])
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
        tau = pass0[b] if single else sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        # this iteration: the admitted requests run their first pass (a whole prefill, unless in pieces)
        if uniform or not new:
            tau0 = tau
        elif grow:  # each one's share of its prompt prefilled (a preempted one: its prompt and its tokens so far)
            tau0 = tau + sum(lift[cls[i]][b] * factor[i] for i in joined) / b
        elif single:
            tau0 = tau + new * lift0[b] / b
        elif part is not None:
            tau0 = tau + sum(lift[cls[i]][b] * part[i] for i in range(first_new, head)) / b
        else:
            tau0 = tau + sum(lift[cls[i]][b] for i in range(first_new, head)) / b
        if new and steps and stream is None:  # one prefill forward's own dispatch, once
            tau0 += step_row[b] if step_row is not None else table.prefill_step(
                cls[first_new:head] if joined is None else [cls[i] for i in joined], b)
        m = inflight[0][0] - it  # iterations to the next completion
        if opens_at is not None:
            m = min(m, opens_at - it)
        if stream is not None:  # the pieces prefilled in this iteration, then whole budgets of one prompt
            if fed:
                lifted = 0.0
                for c, t in fed:
                    lifted += t * per_token[c][b]
                tau0 += lifted / b
                if steps:  # each iteration that prefills is one prefill forward: its own dispatch once
                    tau0 += step_row[b] if step_row is not None else table.prefill_step([c for c, _ in fed], b)
            if pending:
                tau += budget * per_token[pending_c][b] / b
                if steps:
                    tau += step_row[b] if step_row is not None else table.prefill_step((pending_c,), b)
                # its last piece leaves budget to the queue: the iteration time changes there
                m = min(m, -(-pending // budget))
            elif starved:
                m = 1  # the next iteration's budget is the waiting prompt's
        if recv is not None:
            prefills, every = bool(new or (stream is not None and fed)), bool(pending)
        if head == tail and not requeued and b < cap_in_flight and next_t < math.inf:  # an arrival could join then
            m_a = 1 + math.ceil((next_t - now - tau0) / tau - 1e-9)  # the first boundary at or after it
            if recv is not None and not every:  # ... that receives
                m_a = recv.first_at_or_after(it, it + (m_a if m_a > 1 else 1), prefills) - it
            if m_a < m:
                m = m_a if m_a > 1 else 1
        if grow and b > never_over and b > 1 and m > 1:  # the K/V grown on demand runs out before then: a preemption there
            over = kv.first_over(it + 1, it + m - 1, limit)
            if over is not None:
                m = over - it
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
        if pending:
            pending -= (m - 1) * budget  # whole budgets of it in the iterations after the coming one
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        while b and inflight[0][0] == it:
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

    # iteration number -> time, via the segment each boundary ends
    seg_it_arr, first_it_arr = np.asarray(seg_it), np.asarray(first_it)
    k = np.searchsorted(seg_it_arr, first_it_arr, side="left") - 1
    k = np.clip(k, 0, len(seg_it) - 1)
    first_block = np.asarray(seg_t)[k] + (first_it_arr - seg_it_arr[k]) * np.asarray(seg_tau)[k]
    return SimResult(np.array(arrival[:n], float), np.array(done, float), first_block, np.asarray(request_class),
                     busy, now, np.array(start, float), in_service,
                     np.array(preempted, np.int64) if grow else None, np.array(requeued_s, float) if grow else None)


def _one_kind(table: ClassTable, passes: RequestPasses | None, cap_in_flight: int,
              n: int) -> tuple[int, int, int] | None:
    """(NFE, passes to the first block, the most requests in flight) where there is one request
    class, every request runs the same passes, its first block after one pass at least, and the
    memory's limit is a whole number of requests (`_memory_room`): what `_first_done_in_order`
    needs; else None."""
    alike = _same_passes(table, passes)
    if alike is None:
        return None
    if table.held_from_admission is not None and cap_in_flight * table.mem_share[0] > 1.0:
        return None  # K/V on demand, where memory can bind: preemptions, which the general loop keeps
    room = _memory_room(table.mem_share[0], cap_in_flight, n)
    return None if room is None else (*alike, room)


def _one_kind_on_demand(table: ClassTable, passes: RequestPasses | None) -> tuple[int, int, int] | None:
    """(NFE, passes to the first block, the most requests that hold less than the memory even at
    their whole shares) where `_one_kind` sent a run with K/V on demand to the general loop only
    because memory could bind: that loop asks no K/V question while no more than the last number
    run, so a run of `_first_done_in_order` without a memory limit whose most running stayed there
    is its schedule; else None. (Where the general loop's K/V answer stops a newcomer at that many
    running, before it looks at the budget or the first-block rule, the one-kind loop, held back
    by one of those instead, admits it at its next event, which the general loop shares unless
    the one-kind loop's most running then passes the number: kept only where it does not.)"""
    alike = _same_passes(table, passes) if table.held_from_admission is not None else None
    return None if alike is None else (*alike, _fit_whole(table.mem_share[0]))


def _same_passes(table: ClassTable, passes: RequestPasses | None) -> tuple[int, int] | None:
    """(NFE, passes to the first block) where there is one request class and every request runs the
    same passes, its first block and its last pass after one pass at least; else None. Under a
    prefill budget, those of a prompt prefilled in one iteration (the general loop's: the stream
    adds each prompt's pieces past its first, which so end before its last pass), where the class
    has a prompt pass (else None)."""
    if len(table.nfe) != 1:
        return None
    alike = (table.nfe[0], table.first_passes[0]) if passes is None else passes.alike
    if alike is not None and table.prefill_budget:
        if not (table.prompt_tokens or [0])[0]:
            return None
        alike = tuple(x - table.prompt_steps[0] + 1 for x in alike)
    return None if alike is None or min(alike) < 1 else alike


def _one_stream(table: ClassTable, stream: tuple[int, list[int], list[int]] | None) -> tuple | None:
    """The one class's prefill stream, as `_first_done_in_order` takes it: (budget C, prompt tokens P,
    what a prompt token adds to an iteration of b, times b: k lift_b / P, the general loop's
    per_token row); None without a budget."""
    if stream is None:
        return None
    budget, (prompt,), (k,) = stream
    return budget, prompt, [k * x / prompt for x in table.lift[0]]


def _recompute_rescaled(table: ClassTable) -> list[bool]:
    """Whether each class's recompute after a preemption scales its first pass's lift (and, under a
    prefill budget, its prompt's tokens) by what it held over its prompt's share. Not where the prompt
    holds nothing (no tokens to scale from) or the lift is negative at some batch size: a short
    prompt's first pass costs less than the class's mean pass, whose attention over a long answer
    outweighs the prefill, and scaling that lift up would make the recompute's iteration shorter
    than a plain pass, even negative. There the recompute is taken as its first pass was (an
    underestimate: the table holds no prefill cost per token to scale)."""
    return [h > 0 and all(x >= 0 for x in row[1:]) for row, h in zip(table.lift, table.held_from_admission)]


def _fit_whole(share: float) -> int:
    """How many requests of this share hold less than the memory even at their whole shares: no K/V
    question is asked while no more run."""
    return math.floor((1.0 - 1e-12) / share)


def _most_running(result: SimResult) -> int:
    """The most requests in the batch at once over a run."""
    return int(held_as_each_joins(result.start_s, result.done_s).max()) if len(result.done_s) else 0


MEMORY_LIMIT = 1.0 + 1e-9  # the sum of the memory shares in flight at most this (float sums, a little slack)


@lru_cache(maxsize=1024)  # a plan asks it for each candidate's every simulation
def _memory_room(share: float, cap: int, n: int) -> int | None:
    """The most requests of one class in flight (at most `cap`) that the general loop's memory
    check lets in, as a whole number: a request joins an empty batch, or one whose float sum of
    shares plus its own is at most MEMORY_LIMIT. That sum is built by n requests' joins and leaves
    at most (it restarts at 0 whenever the batch empties), each a float addition or subtraction of
    values below 2 (error 2**-53 each), and one more addition for the check, so it is within
    (n + 1) 2**-52 of j x share for the j-th request in flight: where every j x share (j = 2..cap)
    lies further than that from the limit, the check decides as exact arithmetic does, the same
    for every history. None where one lies nearer (the general loop then runs)."""
    from fractions import Fraction

    if share <= 0:
        return cap
    exact, limit = Fraction(share), Fraction(MEMORY_LIMIT)
    slack = 2 * (n + 1) * Fraction(2) ** -52  # twice the rounding bound
    most = math.floor(limit / exact)  # the most j with j x share <= limit
    if any(2 <= j <= cap and abs(j * exact - limit) <= slack for j in (most, most + 1)):
        return None
    return min(cap, max(most, 1))


def _first_done_in_order(table: ClassTable, request_class: np.ndarray, batch_cap: int, ahead: bool, nfe: int,
                         first: int, room: int, arrival: list[float], issued: int, think_s: float,
                         desk: _Desk | None = None, recv_interval: int = 1, stream: tuple | None = None,
                         give_up_over: int | None = None) -> SimResult:
    """`simulate`'s first-done loop for one request class whose requests all run the same passes
    (`nfe`, the first block after `first` >= 1): the plan's usual replica, where most of a plan's
    time goes. The requests then finish, and stream their first blocks, in the order they were
    admitted: those in flight are the ids head - b .. head - 1, each one's finishing iteration is
    kept by id (no heap, no queue), and the first blocks' times are read off as the clock passes
    them (no segments to search afterwards). The memory admits `room` requests at once
    (`_memory_room`: no float sum of shares to keep), and the iteration time is the class's pass
    time at b. `stream`: a prefill budget (`_one_stream`), whose prompts' pieces are fed as the
    general loop feeds them; a newcomer waits while a prompt's pieces fill the budget, so that
    admission order is still finishing order. Otherwise the same arithmetic in the same order as
    the general loop, so the same schedule to the last bit (tests/test_plan_speed.py).
    `give_up_over`: an IndexError as soon as more than so many run at once (a schedule the caller
    would not keep: `_one_kind_on_demand`'s), from the pass times cut there, so that the loop
    checks nothing for it."""
    n = len(request_class)
    cap_in_flight = in_flight_cap(batch_cap, ahead)
    pass0, lift0 = table.pass_s[0], table.lift[0]
    if give_up_over is not None:  # a batch past it finds no iteration time
        pass0 = pass0[:give_up_over + 1]
    uniform = not any(lift0) or stream is not None  # (under a budget a prompt's lift is in its pieces)
    step0 = table.prefill_step_s[0] if table.prefill_step_s is not None else None
    budget, prompt, per_token = stream if stream is not None else (0, 0, None)
    pending = 0  # under a budget: tokens of the prompt in its pieces not yet fed (they end before its last pass)
    fed: list[int] = []  # ... and the pieces fed in the coming iteration
    starved = False  # ... and whether the head of the queue waits for budget
    inf, ceil = math.inf, math.ceil
    done = [math.nan] * n
    start = [math.nan] * n
    first_block = [math.nan] * n
    finish = [-1] * (n + 1)  # each admitted request's finishing iteration; -1 (never reached) past them
    first_it = [1 << 62] * (n + 1)  # ... and its first block's (never reached past them)
    head = tail = b = it = streamed = 0
    now = busy = in_service = 0.0
    recv = Receiver(recv_interval) if recv_interval > 1 else None
    while head < n or b:
        seen = now if recv is None else recv.seen(it, now, b > 0 or head < tail, arrival[tail])
        while arrival[tail] <= seen:  # arrivals up to then join the queue (arrival[issued] is inf)
            tail += 1
        if budget:  # the coming iteration's budget: the piece of a prompt in its pieces first
            if pending:
                pending -= (m - 1) * budget  # whole budgets of it in the iterations after the last one's
                piece = pending if pending < budget else budget
                fed, left, pending = [piece], budget - piece, pending - piece
            else:
                fed, left = [], budget
            starved = False
        prefills = head < tail
        if prefills:  # some wait: admit them at this boundary, first come first served
            first_new = head
            opens_at = None  # ahead: the iteration at which the head of the queue may join
            if budget:
                head, b, opens_at, starved, left, pending = _admit_in_pieces(
                    finish, first_it, start, fed, head, tail, b, room, it, now, nfe, first, ahead, batch_cap,
                    budget, prompt, left, pending)
            else:
                while head < tail and b < room:
                    if ahead and b >= batch_cap:
                        kth = finish[head - batch_cap]  # the batch_cap-th latest finish
                        if kth > it + first:
                            opens_at = kth - first
                            break
                    finish[head] = it + nfe
                    first_it[head] = it + first
                    start[head] = now
                    head += 1
                    b += 1
            tau = tau0 = pass0[b]
            prefills = head > first_new
            if prefills and not uniform:  # the admitted requests' first passes
                tau0 = tau + (head - first_new) * lift0[b] / b
            if prefills and step0 is not None and not budget:  # their prefill forward's own dispatch, once
                tau0 += step0[b]
            m = finish[head - b] - it  # iterations to the next completion
            if opens_at is not None and opens_at - it < m:
                m = opens_at - it
        elif b:
            tau = tau0 = pass0[b]
            m = finish[head - b] - it
        else:
            now = arrival[tail]  # idle until the next request
            continue
        if budget:  # the pieces prefilled in this iteration, then whole budgets of one prompt
            if fed:
                lifted = 0.0
                for t in fed:
                    lifted += t * per_token[b]
                tau0 += lifted / b
                if step0 is not None:  # each iteration that prefills is one prefill forward: its own dispatch once
                    tau0 += step0[b]
            if pending:
                tau += budget * per_token[b] / b
                if step0 is not None:
                    tau += step0[b]
                m = min(m, -(-pending // budget))  # its last piece leaves budget to the queue
            elif starved:
                m = 1  # the next iteration's budget is the waiting prompt's
            prefills = bool(fed)
        if head == tail and b < cap_in_flight and arrival[tail] < inf:  # an arrival could join before then
            m_a = 1 + ceil((arrival[tail] - now - tau0) / tau - 1e-9)  # the first boundary at or after it
            if recv is not None and not pending:  # ... that receives
                m_a = recv.first_at_or_after(it, it + (m_a if m_a > 1 else 1), prefills) - it
            if m_a < m:
                m = m_a if m_a > 1 else 1
        if recv is not None:
            recv.passed(it, m, now, tau0, tau, prefills, bool(pending))
        # the first blocks streamed in the coming m iterations, the first of them tau0 long and the
        # others tau, timed as the general loop's segments time them
        it += m
        while first_it[streamed] <= it:
            k = first_it[streamed] - it + m
            first_block[streamed] = now + k * tau0 if tau0 == tau else (now + tau0) + (k - 1) * tau
            streamed += 1
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        while finish[head - b] == it:  # the oldest in flight first; finish[head] is -1 once b is 0
            done[head - b] = now
            b -= 1
            if issued < n:  # a closed loop: the user thinks, then asks again
                arrival[issued] = now + think_s if desk is None else desk.send(issued, now + think_s)
                issued += 1
    return SimResult(np.array(arrival[:n], float), np.array(done, float), np.array(first_block, float),
                     np.asarray(request_class), busy, now, np.array(start, float), in_service)


def _admit_in_pieces(finish: list[int], first_it: list[int], start: list[float], fed: list[int], head: int, tail: int,
                     b: int, room: int, it: int, now: float, nfe: int, first: int, ahead: bool, batch_cap: int,
                     budget: int, prompt: int, left: int, pending: int) -> tuple:
    """`_first_done_in_order`'s admission at boundary `it` under a prefill budget, `left` tokens of
    it free: each newcomer's prompt fed whole where it fits, else its first piece (the rest,
    `pending`, in the iterations after), and none while another prompt's piece fills it (`starved`).
    (head, b, opens_at, starved, left, pending) after it."""
    opens_at, starved = None, False
    while head < tail and b < room:
        if left <= 0:
            starved = True  # the budget is another prompt's piece: the queue waits
            break
        later = -(-(prompt - left) // budget) if prompt > left else 0  # iterations its pieces run past the coming one
        if ahead and b >= batch_cap and finish[head - batch_cap] > it + first + later:
            opens_at = finish[head - batch_cap] - first - later  # the batch_cap-th latest finish comes too late
            break
        fed.append(prompt if prompt < left else left)
        if later:
            pending = prompt - left
        left -= prompt
        finish[head], first_it[head], start[head] = it + nfe + later, it + first + later, now
        head, b = head + 1, b + 1
    return head, b, opens_at, starved, left, pending
