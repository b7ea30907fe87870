"""The synchronous release policy (the package docstring): the batch advances block by block, one
event per round; and its loop for one kind of request (`_rounds_one_kind`). Its memory rule is the
reservation at admission (each request's whole final K/V, `mem_share`) whatever the decoding: a
round is not preempted, so `held_from_admission` (K/V on demand) is left to the first-done loop,
and where memory binds a synchronous run's first-token times are an upper bound."""

from __future__ import annotations

import bisect
import math
from collections import deque

import numpy as np

from .front_end import _arrival_list, _Desk
from .tables import ClassTable, RequestPasses, SimResult

def _leaving_this_round(cohorts: list[list]) -> int:
    """Members of the batch in their last block in the coming round (a cohort: [block index, most
    passes per block, finishing ids per block or None (all at the last), first id, end id])."""
    out = 0
    for j, most, finishing, lo, hi in cohorts:
        if finishing is None:
            out += hi - lo if j + 1 == len(most) else 0
        else:
            out += len(finishing[j])
    return out


def synchronous_rounds(table: ClassTable, request_class: np.ndarray, batch_cap: int, passes: RequestPasses,
                     arrivals_s: np.ndarray | None, users: int | None, think_s: float,
                     ahead: bool = False, desk: _Desk | None = None) -> SimResult:
    """The synchronous policy: one event per round (see the module docstring).

    The requests admitted in one round (a cohort) advance one block per round together until each
    has run its blocks, so a round lasts the largest, over the cohorts in the batch, of the
    cohort's most passes at its current block (prompt passes included in its first): kept per
    cohort (`RequestPasses.rows`), a round costs one step per cohort, not per request. Requests
    arrive in id order (open loop: sorted arrivals; closed loop: a user asks again think_s after
    an answer, and answers come in time order), so the queue is the ids head..tail - 1 and a
    cohort a range of ids."""
    n = len(request_class)
    cls = request_class.tolist()
    share, pass_s, lift = table.mem_share, table.pass_s, table.lift
    rows, row_of = passes.rows
    n_blocks = passes.n_blocks.tolist()
    single, pass0, lift0, share0 = len(share) == 1, pass_s[0], lift[0], share[0]
    alike = len(rows) == 1
    open_loop = arrivals_s is not None
    arrival, issued = _arrival_list(n, arrivals_s, users, desk)  # closed loop: the others when an answer comes back
    if single and alike and table.prefill_step_s is None:
        done, start, first_block, busy, now, in_service = _rounds_one_kind(
            rows[0], pass0, lift0, share0, n, batch_cap, arrival, issued, not open_loop, think_s, ahead, desk)
        return SimResult(np.array(arrival[:n], float), np.array(done, float), np.array(first_block, float),
                         np.asarray(request_class), busy, now, np.array(start, float), in_service)
    done, start, first_block = [math.nan] * n, [math.nan] * n, [math.nan] * n
    counts = [0] * len(share)
    head = tail = 0  # waiting: head..tail - 1; arrived: below tail
    cohorts: list[list] = []  # [block index, most passes per block, finishing ids per block (None: all at
    #                            the last), first id, end id], oldest first
    b = 0  # requests in the batch
    share_used, now, busy, in_service, completed = 0.0, 0.0, 0.0, 0.0, 0
    limit = 1.0 + 1e-9

    while completed < n:
        if arrival[tail] <= now:
            tail = bisect.bisect_right(arrival, now, tail, issued)
        a = head
        # ahead: the limit counts the members that go on past this round (and the newcomers)
        cap = batch_cap + _leaving_this_round(cohorts) if ahead else batch_cap
        if single:
            while head < tail and b < cap and (b == 0 or share_used + share0 <= limit):
                share_used += share0
                b += 1
                head += 1
            counts[0] = b
        else:
            while head < tail and b < cap:
                c = cls[head]
                if share_used + share[c] > limit and b:
                    break
                share_used += share[c]
                counts[c] += 1
                b += 1
                head += 1
        if b == 0:
            now = arrival[tail]
            continue
        new = head - a
        tau = b * pass0[b] / b if single else sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        if new:
            start[a:head] = [now] * new
            if single:
                tau0 = tau + sum([lift0[b]] * new) / b
            else:
                tau0 = tau + sum(lift[cls[i]][b] for i in range(a, head)) / b
            tau0 += table.prefill_step(cls[a:head], b)  # their prefill forward's own dispatch, once
            if alike:
                cohorts.append([0, rows[0], None, a, head])
            else:
                kinds = {row_of[i] for i in range(a, head)}
                most = rows[kinds.pop()] if len(kinds) == 1 else \
                    [max(col) for col in _columns([rows[k] for k in kinds])]
                finishing = [[] for _ in most]
                for i in range(a, head):
                    finishing[n_blocks[i] - 1].append(i)
                cohorts.append([0, most, finishing, a, head])
        else:
            tau0 = tau
        m = 1
        for co in cohorts:
            if co[1][co[0]] > m:
                m = co[1][co[0]]
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        if new:
            first_block[a:head] = [now] * new
        staying = []
        for co in cohorts:
            j = co[0]
            last = j + 1 == len(co[1])
            if co[2] is None:  # all of the cohort, at its last block
                ids = range(co[3], co[4]) if last else ()
            else:
                ids = co[2][j]
            if ids:
                k = len(ids)
                if co[2] is None:
                    done[co[3]:co[4]] = [now] * k
                else:
                    for i in ids:
                        done[i] = now
                if single:
                    for _ in ids:
                        share_used -= share0
                    counts[0] -= k
                else:
                    for i in ids:
                        c = cls[i]
                        counts[c] -= 1
                        share_used -= share[c]
                b -= k
                completed += k
                if not open_loop and issued < n:  # each user thinks, then asks again
                    more = min(k, n - issued)
                    arrival[issued:issued + more] = _asked_again(now + think_s, issued, more, desk)
                    issued += more
            if not last:
                co[0] = j + 1
                staying.append(co)
        cohorts = staying
        if not b:
            share_used = 0.0
    return SimResult(np.asarray(arrival[:n]), np.asarray(done), np.asarray(first_block), np.asarray(request_class),
                     busy, now, np.asarray(start), in_service)


def _rounds_one_kind(row: list[int], pass0: list[float], lift0: list[float], share0: float, n: int,
                     batch_cap: int, arrival: list[float], issued: int, closed: bool, think_s: float,
                     ahead: bool = False, desk: _Desk | None = None) -> tuple:
    """`synchronous_rounds` where every request is of one class and runs the same passes per block
    (`row`): the cohorts then all finish at their last block, oldest first, one per round at most.
    `ahead` (a first block outside the limit): the limit counts the members that go on past the
    round, i.e. all but the oldest cohort when it is in its last block."""
    done, start, first_block = [math.nan] * n, [math.nan] * n, [math.nan] * n
    last = len(row) - 1
    # every block after the first alike (the usual case): a round lasts the newest cohort's first
    # block or the others' one, whichever is longer
    later = row[1] if last and all(x == row[1] for x in row[1:]) else None
    head = tail = b = completed = rnd = 0
    cohorts: deque = deque()  # (round admitted, first id, end id), oldest first
    share_used, now, busy, in_service = 0.0, 0.0, 0.0, 0.0
    limit = 1.0 + 1e-9
    while completed < n:
        if arrival[tail] <= now:
            tail = bisect.bisect_right(arrival, now, tail, issued)
        a = head
        cap = batch_cap
        if ahead and cohorts and rnd - cohorts[0][0] == last:
            cap += cohorts[0][2] - cohorts[0][1]
        while head < tail and b < cap and (b == 0 or share_used + share0 <= limit):
            share_used += share0
            b += 1
            head += 1
        if b == 0:
            now = arrival[tail]
            continue
        new = head - a
        tau = b * pass0[b] / b
        if new == 1:  # (sum([x]) is x)
            start[a] = now
            tau0 = tau + lift0[b] / b
            cohorts.append((rnd, a, head))
        elif new:
            start[a:head] = [now] * new
            tau0 = tau + sum([lift0[b]] * new) / b
            cohorts.append((rnd, a, head))
        else:
            tau0 = tau
        m = 1
        if later is None:
            for admitted, _, _ in cohorts:
                if row[rnd - admitted] > m:
                    m = row[rnd - admitted]
        else:
            if new and row[0] > m:
                m = row[0]
            if len(cohorts) > (1 if new else 0) and later > m:
                m = later
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        if new:
            first_block[a:head] = [now] * new
        admitted, a0, e0 = cohorts[0]
        if rnd - admitted == last:
            cohorts.popleft()
            k = e0 - a0
            if k == 1:
                done[a0] = now
                share_used -= share0
            else:
                done[a0:e0] = [now] * k
                for _ in range(k):
                    share_used -= share0
            b -= k
            completed += k
            if closed and issued < n:  # each user thinks, then asks again
                more = min(k, n - issued)
                arrival[issued:issued + more] = _asked_again(now + think_s, issued, more, desk)
                issued += more
        rnd += 1
        if not b:
            share_used = 0.0
            continue
        # quiet rounds: nobody joins (the batch is full, or nobody is waiting and the next arrival
        # comes after the round starts) and nobody leaves (before the oldest cohort's last block):
        # the same members run a round of their later blocks again, so only the clock moves, by
        # the same sums as a round's (to the last bit)
        until = cohorts[0][0] + last
        if later is None or rnd >= until:
            continue
        full = b >= batch_cap or share_used + share0 > limit
        if not full and head < tail:  # the waiting ones join the next round
            continue
        tau = b * pass0[b] / b
        elapsed = tau + ((later if later > 1 else 1) - 1) * tau
        held = b * elapsed
        if full:
            for rnd in range(rnd, until):
                now += elapsed
                busy += elapsed
                in_service += held
            rnd = until
        else:
            next_arrival = arrival[tail]
            while rnd < until and next_arrival > now:
                now += elapsed
                busy += elapsed
                in_service += held
                rnd += 1
    return done, start, first_block, busy, now, in_service


def _asked_again(t: float, first: int, count: int, desk: _Desk | None) -> list[float]:
    """The arrival times at the scheduler of `count` requests sent at t (ids first...): t, or their
    leaving the front end."""
    if desk is None:
        return [t] * count
    return [desk.send(i, t) for i in range(first, first + count)]


def _columns(rows: list[list[int]]) -> list[list[int]]:
    """The columns of rows of unequal lengths (column k: the rows longer than k)."""
    width = max(len(r) for r in rows)
    return [[r[k] for r in rows if len(r) > k] for k in range(width)]
