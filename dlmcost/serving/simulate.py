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
the mixed batch: the shared part is counted once. The prefill runs whole in one iteration, so it
lengthens that iteration for every request in flight; except under a prefill budget (a token
budget per step, `prefill_budget` C: vLLM's max_num_batched_tokens, behaviour.prompt_in_token_chunks),
where the prompts of the classes with a prompt pass of their own (`prompt_tokens` P_c) are one
stream of tokens, first come first served, and each iteration prefills the next C of them beside
the decodes: a prompt that fits what is left of the budget is prefilled in that iteration, a longer
one is cut, its rest taking the budget of the iterations that follow (whole chunks of C) until its
last piece, whose leftover budget the next prompts in the queue take. A prompt admitted where the
budget had room r before it runs k = 1 + ceil((P_c - r) / C) iterations of prefill (1 where P_c <= r),
its passes and its first output k - 1 iterations later than in one pass; an iteration that prefills
t tokens of a class-c prompt adds t / P_c of its lift (first_pass_s - pass_s: the whole prefill's
work), so a prompt's pieces carry its whole prefill. No prompt starts while another's piece fills
the budget: prompts arriving together are prefilled in turn, several to an iteration where they
fit, not side by side over a budget each.

A prompt whose first tokens are in the engine's prefix cache (vLLM's automatic prefix caching,
SGLang's radix cache; `uncached`: each request's share u_i of its prompt that is not) prefills
only the rest: under a budget it puts max(1, round(u_i P_c)) tokens into the stream (the last
token always runs: its logits are the first answer token), each still adding lift / P_c; without
one its first pass adds u_i times the class's lift. A cached token's K/V is read, not computed:
the attention of the tokens that are prefilled over it is counted as in the whole prompt's pass.

Because every request in flight advances one pass per iteration, a request admitted at iteration k
finishes at iteration k + NFE and streams its first block at k + first_passes (under a prefill
budget, both later than in one pass by the iterations its prompt's pieces run past the first),
fixed at admission; and iterations differ in length only where a request was admitted or, under a
budget, where a prompt's last piece leaves its budget. The simulation therefore only stops at
arrivals, completions and those last pieces (O(requests) events, a heap each), records the
iteration times as segments (the admission iteration, then a run of equal ones), and converts
iteration numbers to times afterwards. One request class whose requests all run the same passes,
without a budget (most of a plan's simulations), has a loop of its own that needs neither heap
nor segments (`_first_done_in_order`), with the same arithmetic: a serving behaviour added to
one loop goes in the other, or `_one_kind` sends its tables to the general one.

Two release policies (`release`):

* "first-done" (first-done-first-out, SGLang PR #17770, #25280): the above. A request leaves the
  batch, and a waiting one may join, at the end of the iteration that resolves its own last pass.
* "synchronous": the batch advances block by block. A round runs until every request in it has
  resolved its current block (a newcomer: its prompt passes and its first block), so it lasts
  max_i passes_i iterations; a request whose block resolved early stays in the batch, its rows
  still in every pass (the batch keeps its shape), and its block is streamed at the round's end.
  Requests join and leave only between rounds. Each round is one event.

A request's first block outside the limit (`first_block_outside_limit`, a stack property:
SGLang's dLLM path, docs/stacks.md): a waiting request may join while the batch is full, so that
its prompt passes and first block run beside the running requests' last passes, when by the end
of that first block fewer than `batch_cap` of the others are still running. The limit then counts
the requests past their first block; at most 2 x batch_cap are in flight (pass tables run to that).
"first-done": request i may join at iteration k when fewer than batch_cap requests in flight
finish after k + first_passes_i. "synchronous": it may join a round when fewer than batch_cap
members go on past the round (are not in their last block), counting the newcomers.

Per-request pass counts (`passes`, `RequestPasses`): each request's passes over the prompt alone,
and its passes per block, drawn by `draw_passes` from a distribution of steps per block with the
class's mean (the engine's NFE) and a given spread. Without them every request of class c runs
the class's NFE, first block after first_passes[c], and the synchronous policy needs them.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass
from dataclasses import replace
from functools import cached_property, lru_cache, partial

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

    lead: list[int] | None = None  # passes over the prompt alone (None: 0)
    blocks: list[int] | None = None  # blocks of the canvas (None: 1)
    units: list[int] | None = None  # pieces streamed: blocks, or tokens for a token-streaming scheme
    lift_passes: list[int] | None = None  # a lone prompt's iterations of prefill under the budget (None: 1)
    prompt_tokens: list[int] | None = None  # under a prefill budget: each class's prompt tokens (0: no prompt pass)
    prefill_budget: int | None = None  # prompt tokens an iteration prefills (None: every admitted prompt whole)

    def __post_init__(self):
        if self.first_pass_s is None:
            object.__setattr__(self, "first_pass_s", self.pass_s)

    @property
    def prompt_steps(self) -> list[int]:
        """Each class's iterations of prefill when its request runs alone (`lift_passes`, else 1)."""
        return self.lift_passes or [1] * len(self.nfe)

    @cached_property
    def lift(self) -> list[list[float]]:
        """What a request in its first pass adds to an iteration, times b: first_pass_s - pass_s."""
        return [[f - p for f, p in zip(fc, pc)] for fc, pc in zip(self.first_pass_s, self.pass_s)]


def scaled(table: ClassTable, factor: float) -> ClassTable:
    """The same table with every pass `factor` times as long (a deployment whose step times are off
    by that factor, as the validation's error bands say they may be)."""
    return replace(table, pass_s=[[t * factor for t in row] for row in table.pass_s],
                   first_pass_s=[[t * factor for t in row] for row in table.first_pass_s])


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


MAX_BLOCKS = 20_000_000  # blocks over all simulated requests (the passes are drawn per block)


@dataclass(frozen=True, eq=False)
class RequestPasses:
    """Each request's passes: `lead` over the prompt alone (the first pass among them, if any),
    then one count per block, request after request in `flat` (request i's n_blocks[i] counts
    start at offset[i]). NFE_i = lead_i + its counts; the first block is final after lead_i +
    its first count."""

    lead: np.ndarray
    flat: np.ndarray
    n_blocks: np.ndarray

    @classmethod
    def from_rows(cls, lead, rows) -> "RequestPasses":
        """From one list of per-block counts per request."""
        return cls(np.asarray(lead, np.int64), np.asarray([x for r in rows for x in r], np.int64),
                   np.asarray([len(r) for r in rows], np.int64))

    # kept once worked out (read-only): a plan simulates the same requests' passes many times
    @cached_property
    def offset(self) -> np.ndarray:
        return _read_only(np.concatenate([[0], np.cumsum(self.n_blocks)[:-1]]).astype(np.int64))

    @cached_property
    def nfe(self) -> np.ndarray:
        return _read_only(self.lead + np.add.reduceat(self.flat, self.offset) * (self.n_blocks > 0))

    @cached_property
    def first(self) -> np.ndarray:
        return _read_only(self.lead + self.flat[self.offset])

    @cached_property
    def alike(self) -> tuple[int, int] | None:
        """(NFE, passes to the first block) where every request runs the same, else None."""
        nfe, first = self.nfe, self.first
        if not len(nfe) or nfe.min() != nfe.max() or first.min() != first.max():
            return None
        return int(nfe[0]), int(first[0])

    def block(self, k: int) -> np.ndarray:
        """Every request's count for block k (requests with k + 1 blocks or more)."""
        return self.flat[self.offset[self.n_blocks > k] + k]

    @cached_property
    def rows(self) -> tuple[list[list[int]], list[int]]:
        """(distinct rows, each request's row): a request's row is its passes per block with its
        prompt passes added to the first block's, what a synchronous round waits for."""
        n = len(self.lead)
        if not n:
            return [], []
        width = int(self.n_blocks.max())
        grid = np.full((n, width + 1), -1, np.int64)  # padded with -1; the last column holds the length
        owner = np.repeat(np.arange(n), self.n_blocks)
        k = np.arange(len(self.flat)) - np.repeat(self.offset, self.n_blocks)
        grid[owner, k] = self.flat
        grid[:, width] = self.n_blocks
        has = self.n_blocks > 0
        grid[has, 0] += self.lead[has]
        if (grid == grid[0]).all():  # every request alike (one length class, no spread)
            return [grid[0, :width].tolist()], [0] * n
        order = np.lexsort(grid.T[::-1])
        ordered = grid[order]
        first = np.ones(n, bool)
        first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        index = np.empty(n, np.int64)
        index[order] = np.cumsum(first) - 1
        return [row[:row[-1]] for row in ordered[first].tolist()], index.tolist()

    def subset(self, index: np.ndarray) -> "RequestPasses":
        pieces = [self.flat[o:o + n] for o, n in zip(self.offset[index], self.n_blocks[index])]
        flat = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        return RequestPasses(self.lead[index], flat, self.n_blocks[index])


def class_passes(table: ClassTable, request_class: np.ndarray) -> RequestPasses:
    """Every request its class's passes, spread as evenly over its blocks as whole passes allow
    (block k gets round(s(k+1)) - round(sk) of the mean s = (NFE - lead) / blocks)."""
    return draw_passes(table, request_class, 0.0, np.random.default_rng(0))


def draw_passes(table: ClassTable, request_class: np.ndarray, spread: float, rng: np.random.Generator,
                max_per_block: list[int] | None = None) -> RequestPasses:
    """Passes per block per request: gamma distributed with the class's mean s = (NFE - lead) /
    blocks and coefficient of variation `spread` (independent per request and block), rounded to
    a whole number at random so that the mean is kept (floor(x) + 1 with probability x - floor(x)),
    at least 1 and at most `max_per_block` (a block's length: one token per pass at least).
    spread 0: every request the class's passes (see class_passes)."""
    from ..errors import UsageError

    cls = np.asarray(request_class, int)
    n_cls = len(table.nfe)
    lead_c = np.asarray(table.lead if table.lead is not None else [0] * n_cls, np.int64)
    blocks_c = np.asarray(table.blocks if table.blocks is not None else [1] * n_cls, np.int64)
    mean_c = (np.asarray(table.nfe, float) - lead_c) / blocks_c
    n_blocks = blocks_c[cls]
    total = int(n_blocks.sum())
    if total > MAX_BLOCKS:
        raise UsageError(f"{total:,} blocks to simulate (more than {MAX_BLOCKS:,}): choose larger blocks, "
                         "shorter answers or fewer requests")
    owner = np.repeat(np.arange(len(cls)), n_blocks)
    k = np.arange(total) - np.repeat(np.cumsum(n_blocks) - n_blocks, n_blocks)
    mean = mean_c[cls][owner]
    if spread <= 0:
        per = np.round(mean * (k + 1)) - np.round(mean * k)
    else:
        shape = 1.0 / spread ** 2
        x = rng.gamma(shape, mean / shape)
        per = np.floor(x) + (rng.random(total) < x - np.floor(x))
        hi = np.asarray(max_per_block, float)[cls][owner] if max_per_block is not None else np.inf
        per = np.clip(per, 1, hi)
    return RequestPasses(lead_c[cls], per.astype(np.int64), n_blocks.astype(np.int64))


@dataclass(frozen=True)
class SimResult:
    arrival_s: np.ndarray
    done_s: np.ndarray
    first_block_s: np.ndarray  # time the first block was streamed (absolute)
    request_class: np.ndarray
    busy_s: float  # time the replica spent running iterations
    end_s: float
    start_s: np.ndarray | None = None  # time each request joined the batch
    in_service_s: float = 0.0  # integral over time of the requests in the batch (request-seconds)

    @property
    def latency_s(self) -> np.ndarray:
        return self.done_s - self.arrival_s

    @property
    def ttfb_s(self) -> np.ndarray:
        return self.first_block_s - self.arrival_s


RELEASES = ("synchronous", "first-done")


@dataclass(frozen=True)
class FrontEnd:
    """The serving engine's front end (its OpenAI-compatible API server: chat template,
    tokenization, per-request bookkeeping, streaming out): `servers` processes, each spending
    `service_s` of CPU time on a request, one request at a time. A request reaches the engine's
    scheduler only once a server has handled it: ready = max(sent, the earliest a server is free)
    + service_s, the servers taking the requests in the order they are sent."""

    servers: int
    service_s: float

    def __post_init__(self):
        if not (isinstance(self.servers, int) and self.servers >= 1 and math.isfinite(self.service_s)
                and self.service_s >= 0):
            raise ValueError(f"a front end needs at least one server and a service time >= 0, got {self}")

    def desk(self, n: int) -> "_Desk":
        return _Desk(self, n)


class _Desk:
    """n requests through a `FrontEnd`, in the order they are sent: each one's send time (`sent`)
    and the time it reaches the scheduler (what `send` returns). Sent in non-decreasing time,
    requests leave the servers in that order too, so the server free first is the one that took
    the request `servers` places before (its leaving time the oldest of the last `servers`)."""

    def __init__(self, front_end: FrontEnd, n: int):
        self.sent = [math.nan] * n
        self._service = front_end.service_s
        self._free = deque([0.0] * front_end.servers, maxlen=front_end.servers)  # sends are never before 0

    def send(self, i: int, t: float) -> float:
        self.sent[i] = t
        free = self._free[0]
        ready = (t if t > free else free) + self._service
        self._free.append(ready)
        return ready


def _prefill_stream(table: ClassTable) -> tuple[int, list[int], list[int]] | None:
    """(budget C, each class's prompt tokens P_c (0: no prompt pass), a lone prompt's iterations of
    prefill k_c) of a table with a prefill budget; None without one. `lift_passes` (what a lone
    request runs) only means something beside a budget: a table with one and not the other is refused."""
    k = table.prompt_steps
    if table.prefill_budget:
        return table.prefill_budget, list(table.prompt_tokens or [0] * len(k)), list(k)
    if max(k) > 1:
        raise ValueError("lift_passes without a prefill_budget and prompt_tokens: the pieces' lift has no budget to follow")
    return None


def uncached_prompt_tokens(prompt_tokens: int, uncached: float) -> int:
    """The tokens of a P-token prompt an engine prefills when a share 1 - u of it is in its prefix
    cache: round(P * u), but at least one (a prompt's last token is always run: its logits give the
    first answer token) and none for a request without a prompt pass (P = 0)."""
    if not prompt_tokens:
        return 0
    return max(1, min(prompt_tokens, round(prompt_tokens * uncached)))


def in_flight_cap(batch_cap: int, first_block_outside_limit: bool = False) -> int:
    """Requests a replica holds at once under a limit of batch_cap running: twice the limit where
    newcomers' first blocks run beside a full batch (the module docstring). Pass tables run to it."""
    return 2 * batch_cap if first_block_outside_limit else batch_cap


def simulate(table: ClassTable, request_class: np.ndarray, batch_cap: int, *,
             arrivals_s: np.ndarray | None = None, users: int | None = None, think_s: float = 0.0,
             passes: RequestPasses | None = None, release: str = "first-done",
             first_block_outside_limit: bool = False, uncached: np.ndarray | None = None,
             front_end: FrontEnd | None = None) -> SimResult:
    """Serve requests in order: open loop (`arrivals_s`, sorted) or closed loop (`users`).
    `uncached`: each request's share of its prompt that is not in the prefix cache (None: all of
    every prompt is prefilled; see `uncached_prompt_tokens`). `front_end`: the API servers every
    request passes first (None: none); the result's `arrival_s` are then the send times, which its
    latencies count from, and the engine sees each request at its leaving the front end."""
    desk = front_end.desk(len(request_class)) if front_end is not None else None
    r = _serve(table, request_class, batch_cap, arrivals_s, users, think_s, passes, release,
               first_block_outside_limit, uncached, desk)
    return r if desk is None else replace(r, arrival_s=np.array(desk.sent, float))


def _serve(table: ClassTable, request_class: np.ndarray, batch_cap: int, arrivals_s: np.ndarray | None,
           users: int | None, think_s: float, passes: RequestPasses | None, release: str,
           first_block_outside_limit: bool, uncached: np.ndarray | None, desk: "_Desk | None") -> SimResult:
    """`simulate` with the front end's desk (None: requests reach the engine as they are sent)."""
    if release not in RELEASES:
        raise ValueError(f"release must be one of {RELEASES}, got {release!r}")
    stream = _prefill_stream(table)
    if release == "synchronous":
        if stream is not None:
            raise ValueError("a prefill budget (prefill_budget) is simulated for first-done release only")
        if uncached is not None:
            raise ValueError("a prefix cache (uncached) is simulated for first-done release only")
        return _simulate_rounds(table, request_class, batch_cap, passes or class_passes(table, request_class),
                                arrivals_s, users, think_s, first_block_outside_limit, desk)
    ahead = first_block_outside_limit
    n = len(request_class)
    # the plan's usual replica (one kind of request, no budget, no cache): a loop of its own, the same schedule
    alike = _one_kind(table, passes, in_flight_cap(batch_cap, ahead), n) if stream is None and uncached is None else None
    if alike is not None:
        return _first_done_in_order(table, request_class, batch_cap, ahead, *alike,
                                    *_arrival_list(n, arrivals_s, users, desk), think_s, desk)
    cap_in_flight = in_flight_cap(batch_cap, ahead)
    cls = request_class.tolist()
    share, pass_s = table.mem_share, table.pass_s
    # what a request in its first pass adds to the iteration, over b: first_pass_s - pass_s
    lift = table.lift
    pending = 0  # under a budget: tokens of the prompt in its pieces not yet prefilled (at most one such prompt)
    if stream is None:
        base_nfe, base_first = table.nfe, table.first_passes
        prompt = [0] * len(share)  # no prompt waits for budget
    else:  # the passes and the lift of a prompt prefilled whole; the stream adds each request's pieces
        if passes is not None:
            raise ValueError("a prefill budget is simulated for token-streaming requests (no per-request passes)")
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
    else:
        nfe, first = passes.nfe.tolist(), passes.first.tolist()
    uniform = not any(any(row) for row in lift)
    lift0 = lift[0]
    # a prompt partly in the prefix cache: its lift (no budget) or its tokens in the stream scale down
    part = None if uncached is None else uncached.tolist()
    if part is not None and stream is not None:
        own = [uncached_prompt_tokens(prompt[c], u) for c, u in zip(cls, part)]
    done = [math.nan] * n
    start = [math.nan] * n
    first_it = [0] * n
    counts = [0] * len(share)

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
    fifo = len(set(nfe)) <= 1 and (stream is None or len({prompt[c] > 0 for c in set(cls)}) <= 1)
    pass0 = pass_s[0]
    in_service = 0.0
    inflight: deque | list = deque() if fifo else []
    if fifo:
        push, pop = inflight.append, inflight.popleft
    elif ahead:
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
    while completed < n:
        # arrivals up to now join the queue
        if arrival[tail] <= now:
            tail = bisect.bisect_right(arrival, now, tail, issued)
        next_t = arrival[tail]
        # admit at this boundary, first come first served
        first_new = head
        opens_at = None  # ahead: the iteration at which the head of the queue may join
        if stream is not None:  # the coming iteration's budget: the piece of a prompt in its pieces first
            if pending:
                piece = pending if pending < budget else budget
                fed, room, pending = [(pending_c, piece)], budget - piece, pending - piece
            else:
                fed, room = [], budget
            starved = False  # a prompt waits for budget
        while head < tail and b < cap_in_flight:
            c = cls[head]
            if share_used + share[c] > limit and b:
                break
            later = 0  # iterations its prompt's pieces run past the coming one
            pc = prompt[c] if part is None or stream is None else own[head]
            if pc:
                if room <= 0:
                    starved = True  # the budget is another prompt's piece: the queue waits, first come first served
                    break
                later = -(-(pc - room) // budget) if pc > room else 0
            if ahead and b >= batch_cap:
                # the batch_cap-th latest finish must come by the end of the newcomer's first block
                kth = inflight[len(inflight) - batch_cap][0]
                if kth > it + first[head] + later:
                    opens_at = kth - first[head] - later
                    break
            if pc:
                fed.append((c, pc if pc < room else room))
                if later:
                    pending, pending_c, pending_req = pc - room, c, head
                room -= pc
            share_used += share[c]
            counts[c] += 1
            push((it + nfe[head] + later, head))
            first_it[head] = it + first[head] + later
            head += 1
            b += 1
        if b == 0:
            now = next_t  # idle until the next request
            continue
        new = head - first_new
        if new:
            start[first_new:head] = [now] * new
        tau = pass0[b] if single else sum(k * pass_s[c][b] for c, k in enumerate(counts) if k) / b
        # this iteration: the admitted requests run their first pass (a whole prefill, unless in pieces)
        if uniform or not new:
            tau0 = tau
        elif single:
            tau0 = tau + new * lift0[b] / b
        elif part is not None:
            tau0 = tau + sum(lift[cls[i]][b] * part[i] for i in range(first_new, head)) / b
        else:
            tau0 = tau + sum(lift[cls[i]][b] for i in range(first_new, head)) / b
        m = inflight[0][0] - it  # iterations to the next completion
        if opens_at is not None:
            m = min(m, opens_at - it)
        if stream is not None:  # the pieces prefilled in this iteration, then whole budgets of one prompt
            if fed:
                lifted = 0.0
                for c, t in fed:
                    lifted += t * per_token[c][b]
                tau0 += lifted / b
            if pending:
                tau += budget * per_token[pending_c][b] / b
                # its last piece leaves budget to the queue: the iteration time changes there
                m = min(m, -(-pending // budget))
            elif starved:
                m = 1  # the next iteration's budget is the waiting prompt's
        if head == tail and b < cap_in_flight and next_t < math.inf:  # an arrival could join before then
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
        if pending:
            pending -= (m - 1) * budget  # whole budgets of it in the iterations after the coming one
        elapsed = tau0 + (m - 1) * tau
        now += elapsed
        busy += elapsed
        in_service += b * elapsed
        while b and inflight[0][0] == it:
            i = pop()[1]
            c = cls[i]
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

    # iteration number -> time, via the segment each boundary ends
    seg_it_arr, first_it_arr = np.asarray(seg_it), np.asarray(first_it)
    k = np.searchsorted(seg_it_arr, first_it_arr, side="left") - 1
    k = np.clip(k, 0, len(seg_it) - 1)
    first_block = np.asarray(seg_t)[k] + (first_it_arr - seg_it_arr[k]) * np.asarray(seg_tau)[k]
    return SimResult(np.array(arrival[:n], float), np.array(done, float), first_block, np.asarray(request_class),
                     busy, now, np.array(start, float), in_service)


def _arrival_list(n: int, arrivals_s: np.ndarray | None, users: int | None,
                  desk: "_Desk | None" = None) -> tuple[list[float], int]:
    """(each request's arrival time at the scheduler, then math.inf as a sentinel; the requests
    whose arrival is known): open loop, every one's; closed loop, the users' first requests sent at
    0, the others math.inf until an answer comes back. With a front end (`desk`), each known
    request's time of leaving it."""
    if arrivals_s is not None:
        sent, issued = arrivals_s.tolist(), n
    else:
        if not users or users < 1:
            raise ValueError(f"a closed loop needs at least one user, got {users}")
        issued = min(users, n)
        sent = [0.0] * issued
    if desk is not None:
        sent = [desk.send(i, t) for i, t in enumerate(sent)]
    return sent + [math.inf] * (n - issued + 1), issued


def _one_kind(table: ClassTable, passes: RequestPasses | None, cap_in_flight: int,
              n: int) -> tuple[int, int, int] | None:
    """(NFE, passes to the first block, the most requests in flight) where there is one request
    class, every request runs the same passes, its first block after one pass at least, and the
    memory's limit is a whole number of requests (`_memory_room`): what `_first_done_in_order`
    needs; else None."""
    if len(table.nfe) != 1:
        return None
    alike = (table.nfe[0], table.first_passes[0]) if passes is None else passes.alike
    if alike is None or alike[1] < 1:
        return None
    room = _memory_room(table.mem_share[0], cap_in_flight, n)
    return None if room is None else (*alike, room)


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
                         desk: "_Desk | None" = None) -> SimResult:
    """`simulate`'s first-done loop for one request class whose requests all run the same passes
    (`nfe`, the first block after `first` >= 1), without a prefill budget: the plan's usual
    replica, where most of a plan's time goes. The requests then finish, and stream their first
    blocks, in the order they were admitted: those in flight are the ids head - b .. head - 1, each
    one's finishing iteration is kept by id (no heap, no queue), and the first blocks' times are
    read off as the clock passes them (no segments to search afterwards). The memory admits
    `room` requests at once (`_memory_room`: no float sum of shares to keep), and the iteration
    time is the class's pass time at b. Otherwise the same arithmetic in the same order as the
    general loop, so the same schedule to the last bit (tests/test_plan_speed.py)."""
    n = len(request_class)
    cap_in_flight = in_flight_cap(batch_cap, ahead)
    pass0, lift0 = table.pass_s[0], table.lift[0]
    uniform = not any(lift0)
    inf, ceil = math.inf, math.ceil
    done = [math.nan] * n
    start = [math.nan] * n
    first_block = [math.nan] * n
    finish = [-1] * (n + 1)  # each admitted request's finishing iteration; -1 (never reached) past them
    first_it = [1 << 62] * (n + 1)  # ... and its first block's (never reached past them)
    head = tail = b = it = streamed = 0
    now = busy = in_service = 0.0
    while head < n or b:
        while arrival[tail] <= now:  # arrivals up to now join the queue (arrival[issued] is inf)
            tail += 1
        if head < tail:  # some wait: admit them at this boundary, first come first served
            first_new = head
            opens_at = None  # ahead: the iteration at which the head of the queue may join
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
            if head > first_new and not uniform:  # the admitted requests' first passes
                tau0 = tau + (head - first_new) * lift0[b] / b
            m = finish[head - b] - it  # iterations to the next completion
            if opens_at is not None and opens_at - it < m:
                m = opens_at - it
        elif b:
            tau = tau0 = pass0[b]
            m = finish[head - b] - it
        else:
            now = arrival[tail]  # idle until the next request
            continue
        if head == tail and b < cap_in_flight and arrival[tail] < inf:  # an arrival could join before then
            m_a = 1 + ceil((arrival[tail] - now - tau0) / tau - 1e-9)  # the first boundary at or after it
            if m_a < m:
                m = m_a if m_a > 1 else 1
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

def _simulate_rounds(table: ClassTable, request_class: np.ndarray, batch_cap: int, passes: RequestPasses,
                     arrivals_s: np.ndarray | None, users: int | None, think_s: float,
                     ahead: bool = False, desk: "_Desk | None" = None) -> SimResult:
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
    if single and alike:
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
                     ahead: bool = False, desk: "_Desk | None" = None) -> tuple:
    """`_simulate_rounds` where every request is of one class and runs the same passes per block
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


def _asked_again(t: float, first: int, count: int, desk: "_Desk | None") -> list[float]:
    """The arrival times at the scheduler of `count` requests sent at t (ids first...): t, or their
    leaving the front end."""
    if desk is None:
        return [t] * count
    return [desk.send(i, t) for i in range(first, first + count)]


def _columns(rows: list[list[int]]) -> list[list[int]]:
    """The columns of rows of unequal lengths (column k: the rows longer than k)."""
    width = max(len(r) for r in rows)
    return [[r[k] for r in rows if len(r) > k] for k in range(width)]
