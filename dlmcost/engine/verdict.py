"""The verdict of an evaluation: memory- or compute-bound, against the achievable ridge.

The ridge is where the time model's compute and memory times meet: the GEMM rate a pass reaches
at its rows over the achievable bandwidth (`achievable_ridge`; the bare ridge, peak / bandwidth,
is `Rates.ridge`). A generation is memory-bound when at least half its time is spent in pass
families whose arithmetic intensity is below their ridge (`memory_bound_time_fraction`,
`generation_verdict`). The knee is the largest block or batch whose cached decoding step stays
below the ridge (`knee`, `knees`), found by a vectorised search over the engine's pass costs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .columns import take
from .evaluation import Evaluation, FamilyCost, Grid, op_names, pass_cost
from ..inputs.models.spec import ModelSpec
from ..inputs.stacks import Stack
from .roofline import Rates
from .stack_time import compute_factor


def achievable_ridge(rates: Rates, stack: Stack | None, rows) -> np.ndarray:
    """The ridge of the rates the time model uses, FLOP/byte: the GEMM rate a pass of `rows`
    token rows reaches (peak x the profile's efficiency x, under a stack, its efficiency curve at
    those rows) over the achievable bandwidth. Below it a pass takes longer to move its bytes than
    to do its arithmetic at the speeds its latency is computed with, so the verdict and the knee
    say what the times say (the bare ridge, peak / bandwidth, is `rates.ridge`)."""
    rate = rates.achievable_flops["linear"]
    if stack is not None:
        rate = rate * compute_factor("linear", rows, stack, rates.gemm_rows_scale)
    return rate / rates.achievable_bandwidth


def family_ridge(grid: Grid, fam: FamilyCost) -> np.ndarray:
    """`achievable_ridge` of each configuration that runs the family, at its mean pass's rows."""
    rows = fam.rows
    q = (fam.q_first + fam.q_last) / 2
    return achievable_ridge(grid.rates.take(rows), grid.stack, take(grid.batch, rows) * q)


def memory_bound_time_fraction(ev: Evaluation, grid: Grid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The generation's verdict, time-weighted: the share of its time spent in pass families
    whose average arithmetic intensity is below their achievable ridge; and, per configuration,
    the achievable ridge and the arithmetic intensity of the family it spends the most time in
    (what a table shows: the two numbers the verdict of most of the time compares)."""
    mem_time = np.zeros_like(ev.total.count)
    longest, ridge_of_longest = np.full_like(mem_time, -1.0), np.zeros_like(mem_time)
    ai_of_longest = np.zeros_like(mem_time)
    for fam in ev.families.values():
        flops, nbytes = fam.flops, fam.bytes
        ai = np.divide(flops, nbytes, out=np.zeros_like(flops), where=nbytes > 0)
        ridge = family_ridge(grid, fam)
        mem_time[fam.rows] += np.where(ai < ridge, fam.time_s, 0.0)
        longer = fam.time_s > longest[fam.rows]
        longest[fam.rows] = np.where(longer, fam.time_s, longest[fam.rows])
        ridge_of_longest[fam.rows] = np.where(longer, ridge, ridge_of_longest[fam.rows])
        ai_of_longest[fam.rows] = np.where(longer, ai, ai_of_longest[fam.rows])
    return mem_time / ev.total.time_s, ridge_of_longest, ai_of_longest


def generation_verdict(memory_bound_fraction) -> np.ndarray:
    """memory-bound when at least half the generation's time is in memory-bound passes."""
    return np.where(np.asarray(memory_bound_fraction) >= 0.5, "memory-bound", "compute-bound")


KNEE_LIMIT = 1 << 20  # search ceiling for the block/batch knee


def knee(m: ModelSpec, grid: Grid, context: np.ndarray, block: np.ndarray, vary) -> np.ndarray:
    """Largest block (vary='block') or batch (vary='batch') whose cached block-decoding step
    (q = b tokens per sequence over `context` cached tokens) stays below its achievable ridge; `vary` may
    also be a boolean per row (True: batch), so that both searches share one vectorised call.
    0: compute-bound already at 1; -1: still memory-bound at KNEE_LIMIT.

    AI grows monotonically with b and with B, so this is a search for the last integer below the
    ridge: a 32-way search (every round evaluates 32 candidates per row in one vectorised call)
    needs 4 rounds where bisection needs 21."""
    n, ways = len(grid), 32
    lo = np.zeros(n)  # AI(lo) < ridge (lo = 0: nothing to test)
    hi = np.full(n, float(KNEE_LIMIT + 1))  # AI(hi) >= ridge, or beyond the limit
    rows = np.repeat(np.arange(n), ways)
    g = grid.take(rows)
    ctx, blk = context[rows], block[rows]
    by_batch = np.repeat(np.broadcast_to((vary == "batch") if isinstance(vary, str) else vary, (n,)), ways)
    zero = np.zeros(len(rows))
    names = op_names([m])
    while np.any(hi - lo > 1):
        step = np.maximum(np.ceil((hi - lo) / (ways + 1)), 1.0)
        cand = np.minimum(lo[:, None] + step[:, None] * np.arange(1, ways + 1), hi[:, None] - 1).ravel()
        cand = np.maximum(cand, 1.0)
        q, gg = np.where(by_batch, blk, cand), replace(g, batch=np.where(by_batch, cand, g.batch))
        p = pass_cost(m, gg, dict(q=q, c=ctx, kv_write=zero, logits=q, causal=zero.astype(bool)), names)
        ai = p.values[0].sum(axis=0) / p.values[1:].sum(axis=(0, 1))
        below = (ai < achievable_ridge(g.rates, g.stack, gg.batch * q)).reshape(n, ways)
        cand = cand.reshape(n, ways)
        last_below = np.where(below.any(axis=1), np.max(np.where(below, cand, 0.0), axis=1), lo)
        first_above = np.min(np.where(~below & (cand > last_below[:, None]), cand, np.inf), axis=1)
        lo = np.maximum(lo, last_below)
        hi = np.minimum(hi, first_above)
    return np.where(lo >= KNEE_LIMIT, -1.0, lo)


def knees(m: ModelSpec, grid: Grid, context: np.ndarray, decode_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each configuration's block knee and its batch knee (the batch search at `decode_q` tokens
    per sequence), searched together in one `knee` call: half the calls, each twice as wide."""
    n = len(grid)
    both = knee(m, grid.take(np.r_[np.arange(n), np.arange(n)]), np.r_[context, context], np.r_[decode_q, decode_q],
                np.r_[np.zeros(n, bool), np.ones(n, bool)])
    return both[:n], both[n:]
