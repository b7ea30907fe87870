"""The first-done loop of its own for one kind of request (`_first_done_in_order`): one request
class whose requests all run the same passes, with or without a prefill budget, no prefix cache.
It needs neither heap nor segments and follows the general loop's arithmetic (first_done.py) to
the last bit: a serving behaviour added to one goes in the other. Also the checks that send a run
here (`_one_kind`, `_one_kind_on_demand`) and the memory room it runs under.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .front_end import _Desk
from .receiving import Receiver
from .tables import ClassTable, RequestPasses, SimResult, _check_prefill_first, held_as_each_joins, in_flight_cap


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
    pf = table.prefill_first  # prefills before the decodes: finishes counted in decode iterations (`dec`)
    if pf:
        _check_prefill_first([nfe], [first], ahead, [prompt] if budget else None)
    pending = 0  # under a budget: tokens of the prompt in its pieces not yet fed (they end before its last pass)
    fed: list[int] = []  # ... and the pieces fed in the coming iteration
    starved = False  # ... and whether the head of the queue waits for budget
    inf, ceil = math.inf, math.ceil
    done = [math.nan] * n
    start = [math.nan] * n
    first_block = [math.nan] * n
    finish = [-1] * (n + 1)  # each admitted request's finishing iteration; -1 (never reached) past them
    first_it = [1 << 62] * (n + 1)  # ... and its first block's (never reached past them)
    head = tail = b = it = dec = streamed = 0
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
        first_new = head
        opens_at = None  # ahead: the iteration at which the head of the queue may join
        if head < tail:  # some wait: admit them at this boundary, first come first served
            if budget:
                head, b, opens_at, starved, left, pending = _admit_in_pieces(
                    finish, first_it, start, fed, head, tail, b, room, it, now, nfe, first, ahead, batch_cap,
                    budget, prompt, left, pending, dec if pf else None)
            else:
                while head < tail and b < room:
                    if ahead and b >= batch_cap:
                        kth = finish[head - batch_cap]  # the batch_cap-th latest finish
                        if kth > it + first:
                            opens_at = kth - first
                            break
                    finish[head] = dec + nfe - 1 if pf else it + nfe  # (pf: in decode iterations)
                    first_it[head] = it + first
                    start[head] = now
                    head += 1
                    b += 1
        elif not b:
            now = arrival[tail]  # idle until the next request
            continue
        admitted = head - first_new
        prefill_only = pf and bool(fed if budget else admitted)
        # an iteration of prefills alone (the decodes waiting) is costed at the batch it prefills
        bb = (len(fed) if budget else admitted) if prefill_only else b
        tau = tau0 = pass0[bb]
        if admitted and not uniform:  # the admitted requests' first passes
            tau0 = tau + admitted * lift0[bb] / bb
        if admitted and step0 is not None and not budget:  # their prefill forward's own dispatch, once
            tau0 += step0[bb]
        m = finish[head - b] - dec  # iterations to the next completion (after a prefill iteration, one more)
        if prefill_only:
            m += 1
        if opens_at is not None and opens_at - it < m:
            m = opens_at - it
        prefills = admitted > 0
        if budget:  # the pieces prefilled in this iteration, then whole budgets of one prompt
            if fed:
                lifted = 0.0
                for t in fed:
                    lifted += t * per_token[bb]
                tau0 += lifted / bb
                if step0 is not None:  # each iteration that prefills is one prefill forward: its own dispatch once
                    tau0 += step0[bb]
            if pending and prefill_only:  # then its prompt's pieces alone, a whole budget each
                tau = pass0[1] + budget * per_token[1]
                if step0 is not None:
                    tau += step0[1]
                m = -(-pending // budget)  # to its last piece, which leaves budget to the queue
                if m > 1 and finish[head - b] == dec:
                    m = 1  # a request whose one output was its prefill's leaves after the coming iteration
            elif pending:
                tau += budget * per_token[b] / b
                if step0 is not None:
                    tau += step0[b]
                m = min(m, -(-pending // budget))  # its last piece leaves budget to the queue
            elif starved:
                m = 1  # the next iteration's budget is the waiting prompt's
            prefills = bool(fed)
        # prefills go on at the next boundary (a prompt's pieces, or one waiting for budget): no decode between
        chain = prefill_only and bool(pending or starved)
        if prefill_only and not chain:
            tau = pass0[b]  # the decodes after the prefill iteration, every request in flight
        # an arrival could join before then (not while a prompt's pieces fill the budget)
        if not chain and head == tail and b < cap_in_flight and arrival[tail] < inf:
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
        dec += 0 if chain else m - 1 if prefill_only else m
        while first_it[streamed] <= it:
            k = first_it[streamed] - it + m
            first_block[streamed] = now + k * tau0 if tau0 == tau else (now + tau0) + (k - 1) * tau
            streamed += 1
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        while finish[head - b] == dec:  # the oldest in flight first; finish[head] is -1 once b is 0
            if pf and pending and b == 1:
                break  # its one output comes with its prompt's last piece
            done[head - b] = now
            b -= 1
            if issued < n:  # a closed loop: the user thinks, then asks again
                arrival[issued] = now + think_s if desk is None else desk.send(issued, now + think_s)
                issued += 1
    return SimResult(np.array(arrival[:n], float), np.array(done, float), np.array(first_block, float),
                     np.asarray(request_class), busy, now, np.array(start, float), in_service)


def _admit_in_pieces(finish: list[int], first_it: list[int], start: list[float], fed: list[int], head: int, tail: int,
                     b: int, room: int, it: int, now: float, nfe: int, first: int, ahead: bool, batch_cap: int,
                     budget: int, prompt: int, left: int, pending: int, dec: int | None = None) -> tuple:
    """`_first_done_in_order`'s admission at boundary `it` under a prefill budget, `left` tokens of
    it free: each newcomer's prompt fed whole where it fits, else its first piece (the rest,
    `pending`, in the iterations after), and none while another prompt's piece fills it (`starved`).
    `dec`: the decode iterations run where prefills run before the decodes (its finish nfe - 1 of
    them after its prefill's, however many pieces that takes); None: they run beside the decodes.
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
        finish[head] = it + nfe + later if dec is None else dec + nfe - 1
        first_it[head], start[head] = it + first + later, now
        head, b = head + 1, b + 1
    return head, b, opens_at, starved, left, pending
