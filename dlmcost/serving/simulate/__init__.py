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

Prefills before the decodes (`prefill_first`, SGLang's scheduler: a prefill batch whenever one can
be formed, the decode batch only when none can; token-streaming requests, whose first output is
their prefill's). An iteration that admits a request (its prompt whole, or under a budget its first
piece) or feeds a piece of a prompt holds only the b_p requests it prefills: it costs
sum_i pass_s[c_i][b_p] / b_p plus their prefills' lift at b_p (under a budget, t / P_c of it for t
tokens), plus the dispatch below, and the other requests in flight wait; the next iteration that
prefills nothing runs every request's decode. A prompt's pieces then run in iterations of their
own, back to back, each pass_s[c][1] + C x its lift / P_c. So a request's finish is counted in
decode iterations, not iterations: admitted when D decode iterations have run, it finishes at the
end of decode iteration D + NFE - 1 (its prefill's pieces, however many, count as one pass), or of
its prefill's last piece where NFE is 1; its first output comes at the end of its prompt's last
piece, as above. The K/V grown on demand (below) grows with decode iterations. A lone request's
times are unchanged.

A prefill forward's own dispatch (`prefill_step_s`, an engine whose CUDA graphs cover decode only:
SGLang's eager prefill) is no share of a pass: an iteration that prefills any prompt, or a piece of
one under a budget, adds it once, however many prompts it holds and however many requests run
beside them (the largest of its prompts' classes'); first_pass_s then leaves it out.

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
without a cache (most of a plan's simulations; under a budget, a class with a prompt pass), has
a loop of its own that needs neither heap nor segments (`in_order._first_done_in_order`: a
newcomer waits while a prompt's pieces fill the budget, so admission order is finishing order
there too), with the same arithmetic: a serving behaviour
added to one loop goes in the other, or `_one_kind` sends its tables to the general one. With K/V
on demand (below) and memory able to bind, that loop runs first without a memory limit, and its
schedule stands where no more requests ran at once than hold less than the memory at their whole
shares (the general loop would have asked no K/V question); else the general loop runs.

K/V on demand (`held_from_admission`, a decoding whose K/V grows as it runs: autoregressive,
draft-verify, block diffusion with a cache; first-done release only). The batch's memory rule
above reserves each request's whole final K/V (prompt and answer) from admission; vLLM and SGLang
instead admit a request when its prompt fits, allocate K/V as tokens come, and when the pool runs
out preempt the latest admitted running request (vLLM V1's scheduler pops the last of its running
list, preemption by recompute; SGLang's retract_decode takes those with the fewest output tokens,
in practice the latest admitted too): its K/V is freed and it goes back to the front of the queue.
So here a request of class c holds h + (s_c - h)(k - a)/(f - a) of the memory at boundary k,
admitted at iteration a, finishing at f: its prompt's share h = s_c P_c / L_c at its admission
(L_c its class's final length, `held_from_admission` P_c / L_c), growing linearly to its whole
share s_c by its last pass (for a block or draft-verify decoding, whose tokens come in blocks or
bursts, the growth is spread evenly over its passes). A newcomer joins, first come first served,
while the batch limit allows and the memory held now plus its own h is at most 1 (an empty batch
always takes one). Between events the memory held is linear in the iteration number, so the
iteration at which it would first exceed 1 is found in closed form (then checked against the exact
sum: on_demand.py) and is an event; there the latest admitted running requests are preempted,
one by one until the rest fit, never the last one running, each to the front of the queue (the
earlier preempted ahead) holding what it held then. On readmission it runs a prefill of its
prompt and the tokens it had generated, its first pass's lift scaled by h / (s_c P_c / L_c)
(under a prefill budget, that many times its prompt's tokens enter the stream; unscaled where the
prompt holds nothing or the lift is negative: first_done._recompute_rescaled), and then the rest
of its passes: f - k at its preemption, the first of them that prefill. Its first output's time
stays the first one (unless it came after the preemption); its completion moves. A whole canvas
(masked diffusion) does hold its final length from its first pass and keeps the reservation; so
does the synchronous policy, whose rounds are not preempted (its first-token times are an upper
bound where memory binds). The loop for one kind of request keeps the runs where memory cannot
bind (batch_cap x s_c <= 1); `_one_kind` sends the others to the general loop.

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
class's mean (the engine's NFE) and a given spread, over its own answer's blocks; or, for a
token-streaming request, its class's passes scaled to its own answer (`token_passes`), its first
token after its class's first passes. Without them every request of class c runs the class's NFE,
first block after first_passes[c], and the synchronous policy needs them.

The scheduler's receive interval (`recv_interval` R, SGLang's --scheduler-recv-interval;
receiving.py): the scheduler takes in new arrivals only at some boundaries, those after an
iteration that prefilled, those of an idle server, and otherwise every R-th boundary since the
last one that received; an arrival that would join at boundary k joins at the first receiving
boundary at or after k (where the batch has room), so with R = 1 nothing changes. Both first-done
loops follow it. The synchronous policy does not: it serves diffusion decodings, whose SGLang
batches (DLLM_EXTEND, every pass) weigh as prefills, so that engine receives at every boundary
there whatever R is; `simulate` refuses R > 1 with it.

The modules: tables.py (the classes' tables, the requests' passes, the result), front_end.py (the
API servers), receiving.py (the receive interval), on_demand.py (the K/V held on demand), work.py
(the command's limit on preemptions), first_done.py and rounds.py (the two release policies'
loops); `simulate` below picks the loop.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .first_done import first_done
from .in_order import MEMORY_LIMIT, _memory_room, _one_kind  # noqa: F401  (tests read the private two)
from .front_end import FrontEnd
from .rounds import synchronous_rounds
from .work import SimulationWork
from .tables import (MAX_BLOCKS, RELEASES, ClassTable, RequestPasses, SimResult, _prefill_stream,  # noqa: F401
                     class_passes, draw_passes, in_flight_cap, scaled, token_passes, uncached_prompt_tokens)

__all__ = ["MAX_BLOCKS", "RELEASES", "ClassTable", "FrontEnd", "RequestPasses", "SimResult", "class_passes",
           "SimulationWork", "draw_passes", "in_flight_cap", "scaled", "simulate", "token_passes",
           "uncached_prompt_tokens"]


def simulate(table: ClassTable, request_class: np.ndarray, batch_cap: int, *,
             arrivals_s: np.ndarray | None = None, users: int | None = None, think_s: float = 0.0,
             passes: RequestPasses | None = None, release: str = "first-done",
             first_block_outside_limit: bool = False, uncached: np.ndarray | None = None,
             front_end: FrontEnd | None = None, recv_interval: int = 1,
             work: SimulationWork | None = None) -> SimResult:
    """Serve requests in order: open loop (`arrivals_s`, sorted) or closed loop (`users`).
    `uncached`: each request's share of its prompt that is not in the prefix cache (None: all of
    every prompt is prefilled; see `uncached_prompt_tokens`). `front_end`: the API servers every
    request passes first (None: none); the result's `arrival_s` are then the send times, which its
    latencies count from, and the engine sees each request at its leaving the front end.
    `recv_interval`: the scheduler's receive interval (receiving.py; 1: every boundary receives).
    `work`: the command's count of preemptions, shared by its simulations (work.py; None: no limit)."""
    if release not in RELEASES:
        raise ValueError(f"release must be one of {RELEASES}, got {release!r}")
    desk = front_end.desk(len(request_class)) if front_end is not None else None
    if release == "synchronous":
        if _prefill_stream(table) is not None:
            raise ValueError("a prefill budget (prefill_budget) is simulated for first-done release only")
        if uncached is not None:
            raise ValueError("a prefix cache (uncached) is simulated for first-done release only")
        if recv_interval != 1:
            raise ValueError("a receive interval (recv_interval) is simulated for first-done release only")
        if table.prefill_first:
            raise ValueError("prefills before the decodes (prefill_first) are simulated for first-done release only")
        r = synchronous_rounds(table, request_class, batch_cap, passes or class_passes(table, request_class),
                               arrivals_s, users, think_s, first_block_outside_limit, desk)
    else:
        r = first_done(table, request_class, batch_cap, arrivals_s, users, think_s, passes,
                       first_block_outside_limit, uncached, desk, recv_interval, work)
    return r if desk is None else replace(r, arrival_s=np.array(desk.sent, float))
