"""The vectorised pipeline: schedule -> per-op cost -> roofline time, summed exactly.

`evaluate(model, grid)` takes N configurations as arrays and returns arrays; `analyze` and
`sweep` (api.py) both go through it, so a sweep is the same formulas over a bigger grid.

Sums over a family's j = 0..n-1 pass shapes are exact. Every per-op FLOP and byte count of the
built-in schemes is affine in j (the cache grows by b per block while q stays fixed, or q
shrinks by b while q + c stays fixed), so sums, and sums of the per-op max() of the time model,
have closed forms (roofline.sum_max_affine). Configurations where some op is not affine in j
(the expected number of distinct MoE experts when q changes per block) are detected and summed
by evaluating every pass.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from .cost import KINDS, OpCost, PassInput, pass_ops
from .models.spec import ModelSpec
from .roofline import Rates, compute_time, link_time, memory_time, sum_affine, sum_max_affine
from .schedule import FAMILY_NAMES, PassFamily, build_schedule

BYTE_KINDS = ("weight_bytes", "kv_read_bytes", "kv_write_bytes", "activation_bytes")


@dataclass(frozen=True)
class Grid:
    """N configurations, one per array element (CFG already folded into `batch`)."""

    scheme: np.ndarray
    prompt: np.ndarray
    gen: np.ndarray
    steps: np.ndarray
    block: np.ndarray
    batch: np.ndarray
    store_pass: np.ndarray
    logits_committed: np.ndarray
    wbytes: np.ndarray
    kvbytes: np.ndarray
    all_experts: np.ndarray
    tp: np.ndarray
    ep: np.ndarray
    mla_absorbed: np.ndarray  # MLA: the form to use where not chosen automatically
    mla_auto: np.ndarray  # MLA: pick the faster form per pass family
    rates: Rates

    def take(self, idx: np.ndarray) -> "Grid":
        arrays = {f.name: getattr(self, f.name)[idx] for f in fields(self) if f.name != "rates"}
        return Grid(**arrays, rates=self.rates.take(idx))

    def __len__(self) -> int:
        return len(self.gen)


@dataclass
class Sums:
    """Totals of a set of passes, per configuration. Op-level dicts are keyed by op name."""

    count: np.ndarray
    flops: dict[str, np.ndarray]  # by kind (linear/attention/lm_head/other)
    bytes: dict[str, np.ndarray]  # by BYTE_KINDS
    time_s: np.ndarray
    bound_s: np.ndarray  # optimistic roofline bound at peak rates, ops overlapped
    op_flops: dict[str, np.ndarray]
    op_bytes: dict[str, np.ndarray]
    op_time_s: dict[str, np.ndarray]
    mla_absorbed: np.ndarray | None = None  # MLA models: the form each row's family used
    q_first: np.ndarray | None = None
    c_first: np.ndarray | None = None
    q_last: np.ndarray | None = None
    c_last: np.ndarray | None = None

    @property
    def total_flops(self) -> np.ndarray:
        return sum(self.flops.values())

    @property
    def total_bytes(self) -> np.ndarray:
        return sum(self.bytes.values())


@dataclass
class Evaluation:
    families: dict[str, Sums]
    total: Sums


# --- one pass ---------------------------------------------------------------------------------


@dataclass
class PassMetrics:
    ops: list[OpCost]
    compute_s: list[np.ndarray]  # per op: FLOPs over the achievable rate
    memory_s: list[np.ndarray]  # per op: bytes over the achievable bandwidth
    overhead_s: list[np.ndarray]  # per-kernel launch latency and, for collectives, link time
    bound_compute_s: np.ndarray  # sum FLOPs / peak
    bound_memory_s: np.ndarray  # sum bytes / bandwidth


def pass_metrics(m: ModelSpec, grid: Grid, shape: dict[str, np.ndarray]) -> PassMetrics:
    p = PassInput(B=grid.batch, q=shape["q"], c=shape["c"], kv_write=shape["kv_write"], logits=shape["logits"],
                  causal=shape["causal"], wbytes=grid.wbytes, kvbytes=grid.kvbytes, all_experts=grid.all_experts,
                  tp=grid.tp, ep=grid.ep, mla_absorbed=grid.mla_absorbed)
    ops = pass_ops(m, p)
    r = grid.rates
    return PassMetrics(
        ops=ops,
        compute_s=[compute_time(op.flops, op.kind, r) for op in ops],
        memory_s=[memory_time(op.bytes, r) for op in ops],
        overhead_s=[op.kernels * r.overhead_s + (link_time(op.link_bytes, op.collectives, r) if op.kind == "comm" else 0.0)
                    for op in ops],
        bound_compute_s=sum(op.flops / r.peak[op.kind] for op in ops if op.kind in KINDS),
        bound_memory_s=sum(op.bytes for op in ops) / r.bandwidth,
    )


def _empty_sums(n: int, ops: list[OpCost]) -> Sums:
    z = lambda: np.zeros(n)  # noqa: E731
    return Sums(z(), {k: z() for k in KINDS}, {k: z() for k in BYTE_KINDS}, z(), z(),
                {o.name: z() for o in ops}, {o.name: z() for o in ops}, {o.name: z() for o in ops})


# --- a family, exactly -------------------------------------------------------------------------


def _affine_rows(at0: PassMetrics, at1: PassMetrics, atn: PassMetrics, n: np.ndarray) -> np.ndarray:
    """Rows where every op's FLOPs and bytes at j = n-1 match the line through j = 0 and 1."""
    ok = np.ones_like(n, dtype=bool)
    for o0, o1, on in zip(at0.ops, at1.ops, atn.ops):
        for name in ("flops", "weight_bytes", "kv_read_bytes", "kv_write_bytes", "activation_bytes",
                     "link_bytes", "collectives"):
            v0, v1, vn = getattr(o0, name), getattr(o1, name), getattr(on, name)
            predicted = v0 + (v1 - v0) * (n - 1)
            ok &= np.abs(predicted - vn) <= 1e-9 * np.maximum(np.abs(vn), 1.0)
    return ok


def _family_affine(m: ModelSpec, grid: Grid, fam: PassFamily) -> tuple[Sums, np.ndarray]:
    n, r = fam.n, fam.r
    at0 = pass_metrics(m, grid, fam.at(0.0))
    at1 = pass_metrics(m, grid, fam.at(1.0))
    atn = pass_metrics(m, grid, fam.at(np.maximum(n - 1, 0.0)))
    out = _empty_sums(len(grid), at0.ops)
    out.count = n * r
    for i, op in enumerate(at0.ops):
        op1 = at1.ops[i]
        if op.kind in KINDS:  # collectives carry no FLOPs
            out.flops[op.kind] = out.flops[op.kind] + r * sum_affine(op.flops, op1.flops, n)
        out.op_flops[op.name] = r * sum_affine(op.flops, op1.flops, n)
        for b in BYTE_KINDS:
            out.bytes[b] = out.bytes[b] + r * sum_affine(getattr(op, b), getattr(op1, b), n)
        out.op_bytes[op.name] = r * sum_affine(op.bytes, op1.bytes, n)
        t = sum_max_affine(at0.compute_s[i], at1.compute_s[i], at0.memory_s[i], at1.memory_s[i], n)
        out.op_time_s[op.name] = r * (t + n * at0.overhead_s[i])
        out.time_s = out.time_s + out.op_time_s[op.name]
    out.bound_s = r * sum_max_affine(at0.bound_compute_s, at1.bound_compute_s,
                                     at0.bound_memory_s, at1.bound_memory_s, n)
    return out, _affine_rows(at0, at1, atn, n)


def _family_explicit(m: ModelSpec, grid: Grid, fam: PassFamily, rows: np.ndarray) -> Sums:
    """Evaluate every pass j of the family for the given rows (ragged), then add them up."""
    sub = grid.take(rows)
    n = fam.n[rows].astype(int)
    owner = np.repeat(np.arange(len(rows)), n)
    j = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    g = sub.take(owner)
    f = replace(fam, **{x.name: getattr(fam, x.name)[rows][owner] for x in fields(fam) if x.name != "name"})
    pm = pass_metrics(m, g, f.at(j.astype(float)))
    r = fam.r[rows]
    add = lambda v: r * np.bincount(owner, weights=v, minlength=len(rows))  # noqa: E731
    out = _empty_sums(len(rows), pm.ops)
    out.count = n * r
    for i, op in enumerate(pm.ops):
        if op.kind in KINDS:
            out.flops[op.kind] = out.flops[op.kind] + add(op.flops)
        out.op_flops[op.name] = add(op.flops)
        for b in BYTE_KINDS:
            out.bytes[b] = out.bytes[b] + add(getattr(op, b))
        out.op_bytes[op.name] = add(op.bytes)
        out.op_time_s[op.name] = add(np.maximum(pm.compute_s[i], pm.memory_s[i]) + pm.overhead_s[i])
        out.time_s = out.time_s + out.op_time_s[op.name]
    out.bound_s = add(np.maximum(pm.bound_compute_s, pm.bound_memory_s))
    return out


def _assign(dst: Sums, src: Sums, rows: np.ndarray) -> None:
    for name in ("count", "time_s", "bound_s"):
        getattr(dst, name)[rows] = getattr(src, name)
    for name in ("flops", "bytes", "op_flops", "op_bytes", "op_time_s"):
        for k, v in getattr(src, name).items():
            getattr(dst, name)[k][rows] = v


def _family_sums(m: ModelSpec, grid: Grid, fam: PassFamily) -> Sums:
    sums, affine = _family_affine(m, grid, fam)
    bad = np.flatnonzero(~affine & (fam.n > 1))
    if bad.size:
        _assign(sums, _family_explicit(m, grid, fam, bad), bad)
    return sums


def evaluate_family(m: ModelSpec, grid: Grid, fam: PassFamily) -> Sums:
    """Sums of one family. For MLA models with the form left to dlmcost, both forms are costed
    and each row keeps the faster one for this family of passes."""
    if m.mla and grid.mla_auto.any():
        absorbed = _family_sums(m, replace(grid, mla_absorbed=np.ones(len(grid), bool)), fam)
        expanded = _family_sums(m, replace(grid, mla_absorbed=np.zeros(len(grid), bool)), fam)
        use = np.where(grid.mla_auto, absorbed.time_s <= expanded.time_s, grid.mla_absorbed)
        sums = expanded
        _assign(sums, _take_sums(absorbed, np.flatnonzero(use)), np.flatnonzero(use))
        sums.mla_absorbed = use
    else:
        sums = _family_sums(m, grid, fam)
        sums.mla_absorbed = grid.mla_absorbed.copy() if m.mla else None
    last = np.maximum(fam.n - 1, 0.0)
    sums.q_first, sums.c_first = fam.q0 + 0 * fam.n, fam.c0 + 0 * fam.n
    sums.q_last, sums.c_last = fam.q0 + fam.dq * last, fam.c0 + fam.dc * last
    return sums


def _take_sums(s: Sums, rows: np.ndarray) -> Sums:
    pick = lambda d: {k: v[rows] for k, v in d.items()}  # noqa: E731
    return Sums(s.count[rows], pick(s.flops), pick(s.bytes), s.time_s[rows], s.bound_s[rows],
                pick(s.op_flops), pick(s.op_bytes), pick(s.op_time_s))


def _add(a: Sums, b: Sums) -> Sums:
    merge = lambda x, y: {k: x.get(k, 0) + y.get(k, 0) for k in {**x, **y}}  # noqa: E731
    return Sums(a.count + b.count, merge(a.flops, b.flops), merge(a.bytes, b.bytes), a.time_s + b.time_s,
                a.bound_s + b.bound_s, merge(a.op_flops, b.op_flops), merge(a.op_bytes, b.op_bytes),
                merge(a.op_time_s, b.op_time_s))


def evaluate(m: ModelSpec, grid: Grid) -> Evaluation:
    """All families of every configuration in the grid, and their totals."""
    schedule = build_schedule(grid.scheme, grid.prompt, grid.gen, grid.steps, grid.block,
                              grid.store_pass, grid.logits_committed)
    families = {fam.name: _evaluate_used(m, grid, fam) for fam in schedule}
    total = families[FAMILY_NAMES[0]]
    for name in FAMILY_NAMES[1:]:
        total = _add(total, families[name])
    return Evaluation(families, total)


def _evaluate_used(m: ModelSpec, grid: Grid, fam: PassFamily) -> Sums:
    """A family evaluated only where a scheme uses it (n > 0), scattered back into zeros: most
    schemes use two or three of the four families."""
    rows = np.flatnonzero(fam.n > 0)
    if len(rows) == len(grid):
        return evaluate_family(m, grid, fam)
    sub = evaluate_family(m, grid.take(rows), fam.take(rows))
    n = len(grid)
    z = lambda: np.zeros(n)  # noqa: E731
    zeros = lambda d: {k: z() for k in d}  # noqa: E731
    out = Sums(z(), zeros(sub.flops), zeros(sub.bytes), z(), z(), zeros(sub.op_flops), zeros(sub.op_bytes),
               zeros(sub.op_time_s))
    _assign(out, sub, rows)
    for name in ("q_first", "c_first", "q_last", "c_last", "mla_absorbed"):
        values = getattr(sub, name)
        if values is not None:
            full = np.zeros(n, dtype=values.dtype)
            full[rows] = values
            setattr(out, name, full)
    return out


def memory_bound_time_fraction(ev: Evaluation, ridge: np.ndarray) -> np.ndarray:
    """The generation's verdict, time-weighted: the share of its time spent in pass families
    whose average arithmetic intensity is below the ridge."""
    mem_time = np.zeros_like(ev.total.time_s)
    for fam in ev.families.values():
        ai = np.divide(fam.total_flops, fam.total_bytes, out=np.zeros_like(mem_time), where=fam.total_bytes > 0)
        mem_time += np.where((fam.count > 0) & (ai < ridge), fam.time_s, 0.0)
    return mem_time / ev.total.time_s


def generation_verdict(memory_bound_fraction) -> np.ndarray:
    """memory-bound when at least half the generation's time is in memory-bound passes."""
    return np.where(np.asarray(memory_bound_fraction) >= 0.5, "memory-bound", "compute-bound")


KNEE_LIMIT = 1 << 20  # search ceiling for the block/batch knee


def knee(m: ModelSpec, grid: Grid, context: np.ndarray, block: np.ndarray, vary: str) -> np.ndarray:
    """Largest block (vary='block') or batch (vary='batch') whose cached block-decoding step
    (q = b tokens per sequence over `context` cached tokens) stays below the ridge.
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
    zero = np.zeros(len(rows))
    while np.any(hi - lo > 1):
        step = np.maximum(np.ceil((hi - lo) / (ways + 1)), 1.0)
        cand = np.minimum(lo[:, None] + step[:, None] * np.arange(1, ways + 1), hi[:, None] - 1).ravel()
        cand = np.maximum(cand, 1.0)
        q, gg = (cand, g) if vary == "block" else (blk, replace(g, batch=cand))
        pm = pass_metrics(m, gg, dict(q=q, c=ctx, kv_write=zero, logits=q, causal=zero.astype(bool)))
        ai = sum(op.flops for op in pm.ops) / sum(op.bytes for op in pm.ops)
        below = (ai < g.rates.ridge).reshape(n, ways)
        cand = cand.reshape(n, ways)
        last_below = np.where(below.any(axis=1), np.max(np.where(below, cand, 0.0), axis=1), lo)
        first_above = np.min(np.where(~below & (cand > last_below[:, None]), cand, np.inf), axis=1)
        lo = np.maximum(lo, last_below)
        hi = np.minimum(hi, first_above)
    return np.where(lo >= KNEE_LIMIT, -1.0, lo)
