"""One replica under load: a seeded discrete-event simulation at decoding-step granularity.

The server runs iterations back to back while any request is in flight. In one iteration every
in-flight request advances by one forward pass of its own schedule (an AR decode step; one
denoising step of a block-diffusion request's current block; one whole-canvas pass for the
full-canvas schemes). A new request joins only at an iteration boundary, and only if the batch
has room: at most `batch_cap` requests, and the sum of their memory shares (1 / the largest
batch of their length class that fits the GPU) at most 1. Waiting requests are served first come,
first served. An idle server starts a new arrival at once.

The iteration time is the sum over the requests in flight of each one's share of its current
pass at the batch size b: a request in its first pass (the iteration it was admitted in: a
prompt prefill, or the pass that opens its first block) costs first_pass_s[c][b] / b, any other
pass pass_s[c][b] / b, where first_pass_s[c][b] is the engine's time of the first pass for b
requests of class c and pass_s[c][b] the mean of their other passes. So

    tau = sum_i pass_s[c_i][b] / b + sum_(i admitted now) (first_pass_s[c_i][b] - pass_s[c_i][b]) / b.

When a pass costs a shared part (weights) plus a per-sequence part, this is exactly the cost of
the mixed batch: the shared part is counted once. The prefill runs whole in one iteration (no
chunked prefill), so it lengthens that iteration for every request in flight.

Because every request in flight advances one pass per iteration, a request admitted at
iteration k finishes at iteration k + NFE and streams its first block at k + first_passes, fixed
at admission; and iterations differ in length only where a request was admitted. The simulation
therefore only stops at arrivals and completions (O(requests) events, a heap each), records the
iteration times as segments (the admission iteration, then a run of equal ones), and converts
iteration numbers to times afterwards.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClassTable:
    """Per request class c: passes, passes until the first block is streamed (counting the
    first), memory share, and the seconds of an iteration in which b requests (all of class c)
    run a pass: pass_s[c][b] for their later passes (the mean), first_pass_s[c][b] for their
    first (None: the same as the later ones)."""

    nfe: list[int]
    first_passes: list[int]
    mem_share: list[float]
    pass_s: list[list[float]]  # index b = 0..batch_cap (b = 0 unused)
    first_pass_s: list[list[float]] | None = None

    def __post_init__(self):
        if self.first_pass_s is None:
            object.__setattr__(self, "first_pass_s", self.pass_s)


@dataclass(frozen=True)
class SimResult:
    arrival_s: np.ndarray
    done_s: np.ndarray
    first_block_s: np.ndarray  # time the first block was streamed (absolute)
    request_class: np.ndarray
    busy_s: float  # time the replica spent running iterations
    end_s: float

    @property
    def latency_s(self) -> np.ndarray:
        return self.done_s - self.arrival_s

    @property
    def ttfb_s(self) -> np.ndarray:
        return self.first_block_s - self.arrival_s


def simulate(table: ClassTable, request_class: np.ndarray, batch_cap: int, *,
             arrivals_s: np.ndarray | None = None, users: int | None = None, think_s: float = 0.0) -> SimResult:
    """Serve requests in order: open loop (`arrivals_s`, sorted) or closed loop (`users`)."""
    n = len(request_class)
    cls = request_class.tolist()
    nfe, first, share, pass_s = table.nfe, table.first_passes, table.mem_share, table.pass_s
    # what a request in its first pass adds to the iteration, over b: first_pass_s - pass_s
    lift = [[f - p for f, p in zip(fc, pc)] for fc, pc in zip(table.first_pass_s, pass_s)]
    uniform = not any(any(row) for row in lift)
    lift0 = lift[0]
    arrival = [math.inf] * n  # closed loop: filled in as users send
    done = [math.nan] * n
    first_it = [0] * n
    counts = [0] * len(nfe)

    # pending arrivals: a sorted list (open loop) or a heap of (time, request) (closed loop)
    open_loop = arrivals_s is not None
    pending: list = []
    if open_loop:
        arrival = arrivals_s.tolist() + [math.inf]  # sentinel: no more arrivals
        next_open = 0
    else:
        pending = [(0.0, i) for i in range(min(users, n))]
        for i in range(len(pending)):
            arrival[i] = 0.0
        issued = len(pending)
        arrival.append(math.inf)
    next_t = arrival[0] if open_loop else (pending[0][0] if pending else math.inf)
    single = len(nfe) == 1
    pass0 = pass_s[0]

    queue: deque = deque()
    inflight: list = []  # heap of (finish iteration, request)
    share_used = 0.0
    it = 0
    now = 0.0
    busy = 0.0
    seg_it: list[int] = []
    seg_t: list[float] = []
    seg_tau: list[float] = []
    completed = 0
    while completed < n:
        # arrivals up to now join the queue
        while next_t <= now:
            if open_loop:
                queue.append(next_open)
                next_open += 1
                next_t = arrival[next_open]
            else:
                queue.append(heapq.heappop(pending)[1])
                next_t = pending[0][0] if pending else math.inf
        # admit at this boundary, first come first served (requests queue in id order, so the
        # ones admitted here are ids first_new, first_new + 1, ...)
        waiting = len(queue)
        first_new = queue[0] if waiting else 0
        while queue and len(inflight) < batch_cap:
            i = queue[0]
            c = cls[i]
            if share_used + share[c] > 1.0 + 1e-9 and inflight:
                break
            queue.popleft()
            share_used += share[c]
            counts[c] += 1
            heapq.heappush(inflight, (it + nfe[c], i))
            first_it[i] = it + first[c]
        b = len(inflight)
        if b == 0:
            now = next_t  # idle until the next request
            continue
        tau = pass0[b] if single else sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        # this iteration: the admitted requests run their first pass (all of it: no chunked prefill)
        new = waiting - len(queue)
        if uniform or not new:
            tau0 = tau
        elif single:
            tau0 = tau + new * lift0[b] / b
        else:
            tau0 = tau + sum(lift[cls[i]][b] for i in range(first_new, first_new + new)) / b
        m = inflight[0][0] - it  # iterations to the next completion
        if not queue and b < batch_cap and next_t < math.inf:  # an arrival could join before then
            m_a = 1 + math.ceil((next_t - now - tau0) / tau - 1e-9)  # the first boundary at or after it
            if m_a < m:
                m = m_a if m_a > 1 else 1
        seg_it.append(it)
        seg_t.append(now)
        seg_tau.append(tau0)
        if tau0 != tau and m > 1:  # the admission iteration, then m - 1 iterations of tau
            seg_it.append(it + 1)
            seg_t.append(now + tau0)
            seg_tau.append(tau)
        it += m
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        while inflight and inflight[0][0] == it:
            i = heapq.heappop(inflight)[1]
            c = cls[i]
            done[i] = now
            counts[c] -= 1
            share_used -= share[c]
            completed += 1
            if not open_loop and issued < n:  # the user thinks, then asks again
                arrival[issued] = now + think_s
                heapq.heappush(pending, (now + think_s, issued))
                issued += 1
                next_t = pending[0][0]
        if not inflight:
            share_used = 0.0  # no drift from float sums

    # iteration number -> time, via the segment each boundary ends
    seg_it_arr = np.asarray(seg_it)
    k = np.searchsorted(seg_it_arr, np.asarray(first_it), side="left") - 1
    k = np.clip(k, 0, len(seg_it) - 1)
    first_block = np.asarray(seg_t)[k] + (np.asarray(first_it) - seg_it_arr[k]) * np.asarray(seg_tau)[k]
    return SimResult(np.asarray(arrival[:n]), np.asarray(done), first_block, np.asarray(request_class), busy, now)
