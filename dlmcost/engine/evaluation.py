"""The vectorised pipeline: schedule -> per-op cost -> roofline time, summed exactly.

`evaluate(models, grid)` takes N configurations as arrays. Each configuration's scheme (the
registry in `schemes/`) turns its knobs into pass families; every family is costed op by op and
summed over its passes into one array `Cost.ops[configuration, op, metric]`, so that selecting,
adding and scattering results is plain numpy indexing. `analyze` and `sweep` (api.py, sweep.py)
both go through here: a sweep is the same formulas over a bigger grid.

A family's sums are exact. Where every per-op quantity is affine in the pass index j — q fixed
(any cache growth), or q + c fixed under a bidirectional mask for a model whose cost per token is
linear (no expected-distinct-experts term) — they have closed forms (sums.py). Elsewhere, e.g. an
MoE model's prefix-cache steps, whose q shrinks block by block, each pass's time is taken on its
own: from the chords of the closed form and the experts touched by that pass where only the
experts' weight bytes bend (no expert parallelism), else by evaluating the whole pass. Which path
a family takes follows from its declared shape law and the model; nothing is probed numerically.

With a software stack (`Grid.stack`, docs/stacks.md) each op's compute time is divided by the
stack's factor (GEMM curve at B x q rows, attention efficiency), elementwise traffic is scaled,
the sampler's logits traffic joins the LM head, and two more entries join the op axis:
`host_wait` (GPU idle while the host dispatches: max(host - GPU, 0) per pass, or all host time
when launches do not overlap) and `per_forward` (the fixed cost per forward, and the time of the
kernels the stack's release ran slow on the part: stack_time.slow_kernel_time). Closed-form
families take the GEMM factor at the family's mean q, and the host comparison against the GPU
time interpolated between the family's first and last pass (exact when no op changes roofline
side within the family); pass-by-pass families are exact.

`first_pass` costs a configuration's first pass alone (a prompt prefill, or the pass opening the
first block), which serving simulations time apart from the rest of the generation.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from .columns import take
from .cost import (CACHE_OPS, KINDS, OP_KINDS, OP_NAMES, PassInput, expected_experts, expected_experts_sum, gemm_depths,
                   op_functions, pass_ops, window_affine)
from ..inputs.models.spec import ModelSpec
from .roofline import Rates, compute_time, kernel_overhead_s, link_time, memory_time
from .schemes import REGISTRY, Knobs, PassFamily, later_peak_q, peak_shape, prompt_passes
from .schemes.ar import PREFILL
from .stack_time import (collective_dispatch, depth_factor, depth_k0, dispatch_time, host_wait, keys_term, op_depth_overhead,
                         op_factor, sampler_time, slow_kernel_time, step_overhead, traffic_factor)
from ..inputs.stacks import Stack
from .sums import sum_max_ends

# Entries a stack adds to the op axis (no FLOPs, no bytes: time only).
STACK_OPS = ("host_wait", "per_forward")
# What a stack's compute factor is read once per pass for: each op kind, and an MoE model's
# routed experts apart (their GEMMs see each expert's rows, stack_time.op_rows).
FACTOR_KEYS = (*KINDS, "experts")


def factor_key(op_name: str, kind: str) -> str:
    return "experts" if op_name == "experts" else kind

# The metric axis of a cost array; the first five add up over passes as they are.
METRICS = ("flops", "weight_bytes", "kv_read_bytes", "kv_write_bytes", "activation_bytes", "time_s")
ADDITIVE = len(METRICS) - 1
FLOPS, WEIGHT_BYTES, TIME = METRICS.index("flops"), METRICS.index("weight_bytes"), METRICS.index("time_s")


# eq=False on classes of arrays: == on arrays is elementwise, so a generated __eq__ (and
# __hash__) could only raise; identity is the only equality they have.
@dataclass(frozen=True, eq=False)
class Grid:
    """N configurations, one per array element (CFG already folded into `batch`)."""

    scheme: np.ndarray | None  # scheme name per configuration (None: a grid of single passes)
    knobs: Knobs | None
    batch: np.ndarray
    wbytes: np.ndarray
    kvbytes: np.ndarray
    all_experts: np.ndarray
    tp: np.ndarray
    ep: np.ndarray
    mla_absorbed: np.ndarray  # MLA: the form to use where not chosen automatically
    mla_auto: np.ndarray  # MLA: pick the faster form per pass family
    kv_single_tensor: np.ndarray  # K = V layers cache one tensor
    ring_buffer: np.ndarray  # sliding layers keep at most their window in the cache (memory)
    quantize_head: np.ndarray  # the LM head and embedding at the weights' precision (else bf16)
    rates: Rates
    stack: Stack | None = None  # software stack (one for the whole grid); None: the bare roofline

    def take(self, idx) -> "Grid":
        return replace(self.take_for_passes(idx), scheme=take(self.scheme, idx), knobs=self.knobs.take(idx))

    def take_for_passes(self, idx) -> "Grid":
        """`take` for costing passes one by one (one entry per pass): what `pass_cost` reads,
        without the schedule's knobs and scheme names (which it does not)."""
        skip = ("knobs", "rates", "stack", "scheme")
        arrays = {f.name: take(getattr(self, f.name), idx) for f in fields(self) if f.name not in skip}
        return Grid(**arrays, scheme=None, knobs=None, rates=self.rates.take(idx), stack=self.stack)

    def __len__(self) -> int:
        return len(self.batch)

    def depth_factors(self, m: ModelSpec) -> dict[str, np.ndarray]:
        """Each GEMM op's multiplier for the depth of its matrices under the stack
        (stack_time.depth_factor), per configuration; none without a stack or a depth term.
        The same for every pass of a model on this grid, so worked out once and kept with it."""
        cache = self.__dict__.setdefault("_depth_factors", {})  # a cache, not a field of the frozen grid
        if id(m) not in cache:
            factors = {}
            if self.stack is not None and self.stack.gemm_efficiency.reference_depth is not None:
                r = self.rates
                for name, matrices in gemm_depths(m, self.tp, self.ep, self.mla_absorbed).items():
                    k0 = depth_k0(self.stack, r.achievable_flops[OP_KINDS[name]], r.achievable_bandwidth,
                                  op_depth_overhead(name, self.stack))
                    factors[name] = depth_factor(matrices, self.stack, k0)
            cache[id(m)] = (m, factors)  # the model kept with its id, so that the id is not reused
        return cache[id(m)][1]

    def pass_input(self, shape: dict[str, np.ndarray]) -> PassInput:
        return PassInput(B=self.batch, wbytes=self.wbytes, kvbytes=self.kvbytes, all_experts=self.all_experts,
                         tp=self.tp, ep=self.ep, mla_absorbed=self.mla_absorbed,
                         kv_single_tensor=self.kv_single_tensor, quantize_head=self.quantize_head, **shape)


@dataclass(eq=False)
class Cost:
    """Sums over a set of passes, per configuration: `ops[i, op, metric]` (op axis: the models'
    ops in OP_NAMES order, `Evaluation.op_names`; metric axis METRICS), the forward passes, and
    the optimistic bound (ideal rates, ops overlapped).

    The array is stored metric-major (`data[metric, op, i]`, configurations contiguous, which is
    how the engine writes and adds it); `ops` is the (configuration, op, metric) view of it."""

    data: np.ndarray
    count: np.ndarray
    bound_s: np.ndarray

    @classmethod
    def zeros(cls, n: int, n_ops: int) -> "Cost":
        return cls(np.zeros((len(METRICS), n_ops, n)), np.zeros(n), np.zeros(n))

    @property
    def ops(self) -> np.ndarray:
        return self.data.transpose(2, 1, 0)

    def put(self, rows: np.ndarray, other: "Cost") -> None:
        self.data[:, :, rows], self.count[rows], self.bound_s[rows] = other.data, other.count, other.bound_s

    def metric(self, name: str) -> np.ndarray:
        """(N, ops) array of one metric."""
        return self.data[METRICS.index(name)].T

    @property
    def flops(self) -> np.ndarray:
        return self.data[FLOPS].sum(axis=0)

    @property
    def bytes(self) -> np.ndarray:
        return self.data[1:ADDITIVE].sum(axis=(0, 1))

    @property
    def time_s(self) -> np.ndarray:
        return self.data[TIME].sum(axis=0)

    def flops_of_kind(self, kind: str, op_names: list[str]) -> np.ndarray:
        mask = np.array([OP_KINDS.get(name) == kind for name in op_names])
        return self.data[FLOPS, mask].sum(axis=0)


@dataclass(eq=False)
class FamilyCost(Cost):
    """A family's sums over the configurations that run it (`rows` of the grid, ascending), plus
    its first and last pass shapes (for reports)."""

    rows: np.ndarray | None = None
    q_first: np.ndarray | None = None
    c_first: np.ndarray | None = None
    q_last: np.ndarray | None = None
    c_last: np.ndarray | None = None
    mla_absorbed: np.ndarray | None = None  # MLA models: the form each configuration used

    def index(self, row: int) -> int | None:
        """Position of grid row `row` in this family, or None if that configuration lacks it."""
        k = int(np.searchsorted(self.rows, row))
        return k if k < len(self.rows) and self.rows[k] == row else None


@dataclass(eq=False)
class Totals:
    """A configuration's whole generation: sums over every family it runs."""

    count: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    time_s: np.ndarray
    bound_s: np.ndarray


@dataclass(eq=False)
class Evaluation:
    families: dict[tuple[str, str], FamilyCost]  # by (scheme, family name)
    total: Totals
    family_order: dict[str, list[str]]  # scheme -> its family names, in schedule order
    q_max: np.ndarray  # largest pass and logits per sequence (memory)
    logits_max: np.ndarray
    cached_tokens: np.ndarray  # K/V resident per sequence at the end (memory)
    op_names: list[str]  # the ops the models have, in OP_NAMES order

    def ops(self, row: int) -> np.ndarray:
        """(op, metric) sums of one configuration's whole generation: its families added up."""
        out = np.zeros((len(self.op_names), len(METRICS)))
        for fam in self.families.values():
            k = fam.index(row)
            if k is not None:
                out += fam.data[:, :, k].T
        return out


# --- one pass -----------------------------------------------------------------------------------


@dataclass(eq=False)
class PassCost:
    """One pass per configuration: additive metrics (5, ops, N) and the parts of each op's time
    (ops: the op axis, or the ops of `op_rows` alone)."""

    values: np.ndarray
    compute_s: np.ndarray  # (ops, N): FLOPs over the achievable rate
    memory_s: np.ndarray  # (ops, N): bytes over the achievable bandwidth
    overhead_s: np.ndarray  # (ops, N): kernel launches and, for collectives, link time
    bound_compute_s: np.ndarray  # (N,): sum FLOPs / peak
    bound_memory_s: np.ndarray  # (N,): sum bytes / bandwidth
    # the ops held, as rows of the op axis, when not every op of it (pass_cost's `like`); the other
    # fields then have one row per held op (a family's `rows` are its configurations instead)
    op_rows: list[int] | None = None

    @property
    def time_s(self) -> np.ndarray:
        return np.maximum(self.compute_s, self.memory_s) + self.overhead_s


def pass_cost(m: ModelSpec, grid: Grid, shape: dict[str, np.ndarray], names: list[str],
              factor_q: np.ndarray | None = None, host_wait_of_pass: bool = True,
              factors: dict[str, np.ndarray] | None = None, like: PassCost | None = None) -> PassCost:
    """Each op of one pass per configuration, placed on the op axis `names`. Under a stack, the
    GEMM factor is read at B x `factor_q` rows (default: this pass's q); calls that read it at the
    same rows may share `factors` (per op kind, filled by the first). `host_wait_of_pass=False`
    leaves the host wait at zero for a caller that sums it over a family itself.

    `like`: a pass of the same q and logits costed the same way (the first pass of a family whose
    q and logits are fixed). Only the ops that read the cache (cost.CACHE_OPS) differ from it:
    just they are costed, and the pass returned holds their rows alone (`op_rows`; the others are
    like's), with the whole pass's bound totals and no host wait (the caller sums it)."""
    n = np.broadcast_shapes(*(np.shape(v) for v in shape.values()), (len(grid),))[0]
    r, st = grid.rates, grid.stack
    ops = pass_ops(m, grid.pass_input(shape), CACHE_OPS if like is not None else None)
    at = [names.index(op.name) for op in ops]  # each op's row on the axis
    size = len(names) if like is None else len(ops)
    values = np.empty((ADDITIVE, size, n))
    written = np.zeros(size, bool)
    compute, memory, overhead = (np.zeros((size, n)) for _ in range(3))
    if like is None:
        bound_compute, bound_bytes = np.zeros(n), np.zeros(n)
    else:  # like's totals, each op costed here taken out and put back
        bound_compute, bound_bytes = like.bound_compute_s.copy(), like.bound_memory_s * r.bandwidth
    if st is not None:
        tokens = grid.batch * (shape["q"] if factor_q is None else factor_q)
        factors = {} if factors is None else factors  # per FACTOR_KEYS: the GEMMs of a kind share their rows
        depth = grid.depth_factors(m)  # per op: the same in every pass, so applied here even without `factors`
    decode = np.asarray(shape["q"]) == 1  # one query a sequence: decode's attention kernel
    for k, op in enumerate(ops):
        i = at[k] if like is None else k
        written[i] = True
        if like is not None:
            before = like.values[:, at[k]]
            bound_bytes -= before[1:].sum(axis=0)
            bound_compute -= before[0] / _peak(grid, op.kind)
        v = values[:, i]
        v[0], v[1], v[2], v[3], v[4] = op.flops, op.weight_bytes, op.kv_read_bytes, op.kv_write_bytes, op.activation_bytes
        traffic = v[1:].sum(axis=0)
        bound_bytes += traffic
        if op.kind in KINDS:
            compute[i] = compute_time(op.flops, op.kind, r)
            if op.kind == "lm_head" and grid.quantize_head.any():  # a quantised head runs at the weights' rates
                compute[i] = np.where(grid.quantize_head, compute_time(op.flops, "linear", r), compute[i])
            bound_compute += op.flops / _peak(grid, op.kind)
            if st is not None:
                key = factor_key(op.name, op.kind)
                if key not in factors:
                    factors[key] = op_factor(op.name, op.kind, tokens, m, st, r.gemm_rows_scale, r.fp8_gemms)
                compute[i] /= factors[key]
                if op.name in depth:
                    compute[i] /= depth[op.name]
                if op.kind == "attention" and st.attention_keys_overhead:  # per pass: k moves with the cache
                    compute[i] *= keys_term(op.flops, op.flops_per_key, st)
                traffic *= traffic_factor(op.kind, st)
            overhead[i] = kernel_overhead_s(op.kernels, r, op.kind, decode, experts=op.name == "experts")
        else:  # collectives: no arithmetic, no HBM traffic; the link is their roofline
            overhead[i] = link_time(op.link_bytes, op.collectives, r)
            overhead[i] += op.kernels * r.overhead_s
            if st is not None and op.name == "tp_collectives":  # launched from Python without graphs
                overhead[i] += collective_dispatch(op.collectives, st)
        memory[i] = memory_time(traffic, r, op.kind, decode, experts=op.name == "experts")
        if st is not None and op.name == "lm_head":  # the sampler reads what the head wrote, all of
            # the vocabulary: tensor parallelism all-gathers the split logits before sampling
            overhead[i] += sampler_time(grid.batch * shape["logits"] * m.vocab_size, r.bandwidth, r.eff_mem, st)
    bound_memory = bound_bytes / r.bandwidth
    if like is not None:
        return PassCost(values, compute, memory, overhead, bound_compute, bound_memory, at)
    # no FLOPs or bytes on the rows of ops this pass lacks: the stack's time-only entries, and the
    # ops of another model on the axis (a drafter of another architecture: an MoE verifier's
    # experts, a dense drafter's MLP)
    values[:, ~written] = 0.0
    if st is not None and STACK_OPS[0] in names:
        h, f = names.index("host_wait"), names.index("per_forward")
        slow = _slow_time(m, grid, grid.batch * np.asarray(shape["q"], float))  # GPU time, on the per_forward row
        if host_wait_of_pass:
            gpu = (np.maximum(compute, memory) + overhead).sum(axis=0) + slow
            overhead[h] = host_wait(gpu, dispatch_time(m, st), st)
        overhead[f] = step_overhead(grid.batch, st) + slow
    return PassCost(values, compute, memory, overhead, bound_compute, bound_memory)


def _slow_time(m: ModelSpec, grid: Grid, tokens) -> np.ndarray:
    """The stack's slow kernels' GPU time in a pass of `tokens` tokens (batch x query tokens) on
    each configuration's part and precision (stack_time.slow_kernel_time; 0 where none apply)."""
    r = grid.rates
    return slow_kernel_time(m.n_layers, r.slow_layer_s, tokens, r.slow_token_layer_s)


def _peak(grid: Grid, kind: str):
    """The peak FLOP/s of an op kind, for the optimistic bound (a quantised head runs at the
    weights' rate); collectives do no arithmetic."""
    if kind not in KINDS:
        return np.inf
    if kind == "lm_head" and grid.quantize_head.any():
        return np.where(grid.quantize_head, grid.rates.peak["linear"], grid.rates.peak[kind])
    return grid.rates.peak[kind]


# --- a family, exactly --------------------------------------------------------------------------


def closed_form_rows(m: ModelSpec, grid: Grid, fam: PassFamily) -> np.ndarray:
    """Configurations whose per-op costs are affine in j (see the module docstring)."""
    # an MoE model's cost is linear in tokens only when every expert is read anyway and no
    # expert-parallel rank is the busiest (its share of the token copies depends on the batch)
    tokens_linear = np.ones(len(grid), bool) if m.moe is None else grid.all_experts & (grid.ep == 1)
    windowed = window_affine(m, fam.q0, fam.dq, fam.c0, fam.dc, fam.n)  # sliding layers bend at the window
    return (fam.constant_q | (fam.constant_keys & tokens_linear)) & windowed | (fam.n <= 1)


def _first_and_last(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str],
                    stack_factor: bool = True) -> tuple[PassCost, PassCost]:
    """The family's first (j = 0) and last (j = n - 1) pass; under a stack both read the GEMM
    factor at B x the family's mean q (`stack_factor=False`: none, for a caller that applies it
    pass by pass) and leave the host wait at zero (it is not affine in j: summed on its own).
    Where q and logits are fixed in every configuration the last pass holds only the ops that
    read the cache (`op_rows`, pass_cost's `like`); elsewhere it holds every op."""
    last = np.maximum(fam.n - 1, 0)
    mean_q = fam.q0 + fam.dq * last / 2
    factors: dict[str, np.ndarray] = {} if stack_factor else dict.fromkeys(FACTOR_KEYS, 1.0)  # read once for both
    a = pass_cost(m, grid, fam.at(0.0), names, mean_q, host_wait_of_pass=False, factors=factors)
    if np.all(fam.n <= 1):  # one shape everywhere (a prefill, mdm's full passes): the first pass is the last
        return a, a
    same_q = not (np.any(fam.dq) or np.any(fam.dlogits))  # the last pass differs in its cache alone
    z = pass_cost(m, grid, fam.at(last), names, mean_q, host_wait_of_pass=False, factors=factors,
                  like=a if same_q else None)
    return a, z


def _sums_of_first_and_last(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str], a: PassCost,
                            z: PassCost) -> np.ndarray:
    """The (metric, op, configuration) sums of a family whose per-op costs are affine in j, from
    its first and last pass (sums.py): the sum of an affine term is n (first + last) / 2, and of
    an op the same in every pass, n times it (z holding only the ops that differ: `z.op_rows`)."""
    n, r = fam.n, fam.r
    half = n * r / 2
    data = np.empty((len(METRICS), len(names), len(grid)))
    time_s = data[TIME]
    if z.op_rows is None:
        np.add(a.values, z.values, out=data[:ADDITIVE])  # the engine's largest arrays: two passes over them
        data[:ADDITIVE] *= half
        np.add(a.overhead_s, z.overhead_s, out=time_s)
        time_s *= half
        time_s += r * sum_max_ends(a.compute_s, z.compute_s, a.memory_s, z.memory_s, n)
    else:
        count = n * r
        np.multiply(a.values, count, out=data[:ADDITIVE])
        np.maximum(a.compute_s, a.memory_s, out=time_s)
        time_s += a.overhead_s
        time_s *= count
        k = z.op_rows
        data[:ADDITIVE, k] = (a.values[:, k] + z.values) * half
        data[TIME, k] = ((a.overhead_s[k] + z.overhead_s) * half
                         + r * sum_max_ends(a.compute_s[k], z.compute_s, a.memory_s[k], z.memory_s, n))
    if grid.stack is not None and "host_wait" in names:
        slow = [_slow_time(m, grid, grid.batch * (fam.q0 + fam.dq * np.maximum(n - 1, 0) * end)) for end in (0, 1)]
        time_s[names.index("host_wait")] = r * _closed_form_host_wait(m, grid.stack, a, z, n, names, *slow)
    return data


def _closed_form(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str]) -> Cost:
    """Sums of a family whose per-op costs are affine in j, from its first and last pass alone."""
    a, z = _first_and_last(m, grid, fam, names)
    bound = fam.r * sum_max_ends(a.bound_compute_s, z.bound_compute_s, a.bound_memory_s, z.bound_memory_s, fam.n)
    return Cost(_sums_of_first_and_last(m, grid, fam, names, a, z), fam.count, bound)


def _closed_form_host_wait(m: ModelSpec, st: Stack, first: PassCost, last: PassCost, n: np.ndarray,
                           names: list[str], slow_first=0.0, slow_last=0.0) -> np.ndarray:
    """Sum over the family of the GPU's wait for the host (the passes leave it at zero: it is not
    affine in j). The GPU time is taken linear between the first and the last pass, each with its
    slow kernels' time (on the per_forward row, GPU time all the same)."""
    host = dispatch_time(m, st)
    if not st.host.overlaps_gpu:
        return n * host
    ops = [k for k, name in enumerate(names) if name not in STACK_OPS]  # GPU work only
    if ops == list(range(len(ops))):  # the stack's ops come last (as evaluate lists them): a view
        ops = slice(0, len(ops))
    gpu_first = (np.maximum(first.compute_s[ops], first.memory_s[ops]) + first.overhead_s[ops]).sum(axis=0)
    if last.op_rows is None:
        gpu_last = (np.maximum(last.compute_s[ops], last.memory_s[ops]) + last.overhead_s[ops]).sum(axis=0)
    else:  # the first pass's, with the rows that differ swapped
        k = last.op_rows
        gpu_last = gpu_first + (last.time_s - (np.maximum(first.compute_s[k], first.memory_s[k])
                                               + first.overhead_s[k])).sum(axis=0)
    return sum_max_ends(host - gpu_first - slow_first, host - gpu_last - slow_last, 0.0, 0.0, n)


# Passes evaluated at once on the pass-by-pass path: the per-pass arrays (metrics x ops x passes)
# stay a few megabytes, in cache, however many passes a grid or one configuration has.
PASS_CHUNK = 1 << 15


def _pass_chunks(n: np.ndarray):
    """Every pass j < n[i] of every configuration i, PASS_CHUNK passes at a time (a configuration's
    run may span chunks): yields each pass's configuration and j, where each configuration's run
    starts within the chunk, and the configurations the chunk covers (a slice: they follow on)."""
    ends = np.cumsum(n)
    first = ends - n  # each configuration's first pass in the whole sequence
    for lo in range(0, int(ends[-1]), PASS_CHUNK):
        hi = min(lo + PASS_CHUNK, int(ends[-1]))
        configs = slice(int(np.searchsorted(ends, lo, side="right")), int(np.searchsorted(ends, hi - 1, side="right")) + 1)
        run_start = np.maximum(first[configs], lo)
        owner = np.repeat(np.arange(configs.start, configs.stop), np.minimum(ends[configs], hi) - run_start)
        yield owner, (np.arange(lo, hi) - np.take(first, owner)).astype(float), run_start - lo, configs


def _pass_by_pass(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str]) -> Cost:
    """Evaluate every pass j of the family (ragged over configurations), then add them up."""
    data = np.zeros((len(METRICS), len(names), len(grid)))
    bound = np.zeros(len(grid))
    for owner, j, start, configs in _pass_chunks(fam.n.astype(int)):
        p = pass_cost(m, grid.take_for_passes(owner), fam.take(owner).at(j), names)
        data[:ADDITIVE, :, configs] += np.add.reduceat(p.values, start, axis=2)
        data[TIME, :, configs] += np.add.reduceat(p.time_s, start, axis=1)
        bound[configs] += np.add.reduceat(np.maximum(p.bound_compute_s, p.bound_memory_s), start)
    data *= fam.r
    return Cost(data, fam.count, fam.r * bound)


def _touched_experts_pass_by_pass(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str]) -> Cost:
    """A family affine in j but for one quantity: an MoE model's passes whose q moves (q + c
    fixed, bidirectional) without expert parallelism. Every op's FLOPs and bytes are then affine
    in j except the experts' weight bytes, which follow the expected number of distinct experts
    touched, d(B q_j) (cost.expected_experts). So the family is summed in closed form from its
    first and last pass, and corrected by the gap between the experts' weight bytes and their
    chord (the straight line between the ends):

        gap_j = w d(B q_j) - (wb_first + (wb_last - wb_first) j / (n - 1)),  w = wb_first / d(B q_0)

    The gaps add up in closed form (cost.expected_experts_sum). Times are taken pass by pass from
    the chords: compute on its chord, memory on its chord (the experts' plus gap_j / achievable
    bandwidth), overhead on its chord; the optimistic bound likewise, with gap_j / bandwidth. On
    the bare roofline only the experts' time needs that (every other op's time is its own and
    affine), and only where an end is compute-bound: memory minus compute is concave in j (so is
    the gap: d is concave in the tokens, which are affine in j), so a family memory-bound at both
    ends is memory-bound throughout, and its time is the chords' plus the gaps'. Under a stack
    every op's compute is divided by its factor at B q_j, and the host wait compares the host
    time with the pass's GPU time. Exact, as evaluating each pass is."""
    st, rates = grid.stack, grid.rates
    # a stack's factor follows each pass; q moves in every configuration here (a fixed q is in
    # closed form), so z holds every op and is indexed on the op axis like a
    a, z = _first_and_last(m, grid, fam, names, stack_factor=False)
    data = _sums_of_first_and_last(m, grid, fam, names, a, z)
    e = names.index("experts")
    E, k, n, r = m.moe.n_experts, m.moe.experts_per_token, fam.n, fam.r
    tokens0, dtokens = grid.batch * fam.q0, grid.batch * fam.dq
    wb_first, wb_last = a.values[WEIGHT_BYTES, e], z.values[WEIGHT_BYTES, e]
    touched_first = expected_experts(E, k, tokens0)  # > 0: a pass of the family has tokens
    per_touched = np.divide(wb_first, touched_first, out=np.zeros_like(wb_first), where=touched_first > 0)
    gaps = per_touched * expected_experts_sum(E, k, tokens0, dtokens, n) - n * (wb_first + wb_last) / 2
    data[WEIGHT_BYTES, e] += r * gaps
    timed = [e] if st is None else [i for i, name in enumerate(names) if name not in STACK_OPS]
    op_time = np.empty((len(timed), len(grid)))
    bound, host = np.empty(len(grid)), np.zeros(len(grid))
    if st is None:
        memory_bound = ((a.memory_s[e] >= a.compute_s[e]) & (z.memory_s[e] >= z.compute_s[e])
                        & (a.bound_memory_s >= a.bound_compute_s) & (z.bound_memory_s >= z.bound_compute_s))
        op_time[0] = n * (a.memory_s[e] + z.memory_s[e] + a.overhead_s[e] + z.overhead_s[e]) / 2 \
            + gaps / rates.experts_bandwidth
        bound[:] = n * (a.bound_memory_s + z.bound_memory_s) / 2 + gaps / rates.bandwidth
        rows = np.flatnonzero(~memory_bound)
    else:
        rows = np.arange(len(grid))
    if rows.size:  # the rest, pass by pass
        span = np.maximum(n - 1, 1)
        # what is affine in j, on its chord: first + slope j, slope = (last - first) / (n - 1)
        first = np.concatenate([[wb_first, a.bound_compute_s, a.bound_memory_s, tokens0],
                                a.compute_s[timed], a.memory_s[timed], a.overhead_s[timed]])
        slope = (np.concatenate([[wb_last, z.bound_compute_s, z.bound_memory_s, tokens0 + dtokens * (n - 1)],
                                 z.compute_s[timed], z.memory_s[timed], z.overhead_s[timed]]) - first) / span
        first, slope = take(first, rows), take(slope, rows)
        rows_scale, fp8_gemms = (np.broadcast_to(np.asarray(v, float), (len(grid),))
                                 for v in (rates.gemm_rows_scale, rates.fp8_gemms))
        # GPU time per pass, affine in its tokens: slow_fixed + tokens x slow_per_token
        slow_fixed, slow_per_token = (np.broadcast_to(slow_kernel_time(m.n_layers, s), (len(grid),))
                                      for s in (rates.slow_layer_s, rates.slow_token_layer_s))
        per_config = take(np.stack([per_touched, rates.experts_bandwidth, rates.bandwidth, rows_scale, fp8_gemms,
                                    slow_fixed, slow_per_token]), rows)
        groups = {}  # ops that share a compute factor (pass_cost's FACTOR_KEYS), by their key
        for i, op in enumerate(timed):
            groups.setdefault(factor_key(names[op], OP_KINDS[names[op]]), []).append(i)
        t = len(timed)
        sums = np.zeros((t + 2, rows.size))  # each timed op's time, the bound, the host wait
        for owner, j, start, configs in _pass_chunks(take(n, rows).astype(int)):
            chord = take(first, owner) + take(slope, owner) * j
            wb, bound_compute, bound_memory, tokens = chord[:4]
            compute, memory, overhead = chord[4:4 + t], chord[4 + t:4 + 2 * t], chord[4 + 2 * t:]
            w, achievable_bandwidth, bandwidth, rows_scale, fp8_gemms, slow_fixed, slow_per_token = take(per_config, owner)
            slow_s = slow_fixed + tokens * slow_per_token
            gap = w * expected_experts(E, k, tokens) - wb
            memory[timed.index(e)] += gap / achievable_bandwidth
            if st is not None:
                for key, ops in groups.items():
                    kind = OP_KINDS[names[timed[ops[0]]]]
                    if kind in KINDS:
                        compute[ops] /= op_factor(key, kind, tokens, m, st, rows_scale, fp8_gemms)
            time_s = np.maximum(compute, memory) + overhead
            sums[:t, configs] += np.add.reduceat(time_s, start, axis=1)
            sums[t, configs] += np.add.reduceat(np.maximum(bound_compute, bound_memory + gap / bandwidth), start)
            if st is not None:
                dispatch_s = dispatch_time(m, st)
                sums[t + 1, configs] += np.add.reduceat(host_wait(time_s.sum(axis=0) + slow_s, dispatch_s, st), start)
        op_time[:, rows], bound[rows], host[rows] = sums[:t], sums[t], sums[t + 1]
    data[TIME, timed] = r * op_time
    if st is not None:
        data[TIME, names.index("host_wait")] = r * host
    return Cost(data, fam.count, r * bound)


def touched_experts_rows(m: ModelSpec, grid: Grid, fam: PassFamily, closed: np.ndarray) -> np.ndarray:
    """Configurations not in closed form only because of the experts' weight bytes: an MoE
    model's bidirectional passes with q + c fixed, without expert parallelism (whose busiest rank
    bends the FLOPs too), for a model without sliding-window layers (whose keys per query bend as
    q moves)."""
    sliding = any(kind.attention == "sliding" for _, kind in m.attention_groups)
    if m.moe is None or sliding:
        return np.zeros(len(grid), bool)
    return ~closed & fam.constant_keys & (grid.ep == 1)


def _family_sums(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str]) -> Cost:
    closed = closed_form_rows(m, grid, fam)
    if closed.all():
        return _closed_form(m, grid, fam, names)
    experts = touched_experts_rows(m, grid, fam, closed)
    out = Cost.zeros(len(grid), len(names))
    for rows, path in ((closed, _closed_form), (experts, _touched_experts_pass_by_pass),
                       (~closed & ~experts, _pass_by_pass)):
        rows = np.flatnonzero(rows)
        if rows.size:
            out.put(rows, path(m, grid.take(rows), fam.take(rows), names))
    return out


def both_mla_forms(m: ModelSpec, mla_auto: np.ndarray) -> bool:
    """Whether `family_cost` costs a family twice, in both MLA forms: an MLA model with the form
    left to dlmcost in any of the configurations costed together (`passes_one_by_one` counts so)."""
    return m.mla is not None and bool(mla_auto.any())


def family_cost(m: ModelSpec, grid: Grid, fam: PassFamily, names: list[str]) -> FamilyCost:
    """Sums of one family. For MLA models with the form left to dlmcost, both forms are costed
    and each configuration keeps the faster one for this family of passes."""
    if both_mla_forms(m, grid.mla_auto):
        absorbed = _family_sums(m, replace(grid, mla_absorbed=np.ones(len(grid), bool)), fam, names)
        expanded = _family_sums(m, replace(grid, mla_absorbed=np.zeros(len(grid), bool)), fam, names)
        use = np.where(grid.mla_auto, absorbed.time_s <= expanded.time_s, grid.mla_absorbed)
        cost = Cost(np.where(use, absorbed.data, expanded.data), absorbed.count,
                    np.where(use, absorbed.bound_s, expanded.bound_s))
    else:
        use = grid.mla_absorbed if m.mla else np.zeros(len(grid), bool)
        cost = _family_sums(m, grid, fam, names)
    last = np.maximum(fam.n - 1, 0.0)
    return FamilyCost(cost.data, cost.count, cost.bound_s, None, fam.q0, fam.c0, fam.q0 + fam.dq * last,
                      fam.c0 + fam.dc * last, use)


# --- a grid of configurations -----------------------------------------------------------------


def dispatched(grid: Grid, scheme, fam: PassFamily) -> Grid:
    """The grid a family is costed on: an autoregressive prompt prefill under a stack whose CUDA
    graphs do not cover it (`prefill_graphs: false`) is dispatched as the stack's `eager` block
    says; every other family as the stack's host block says."""
    st = grid.stack
    if st is None or st.prefill_graphs or fam.name != PREFILL or not scheme.autoregressive:
        return grid
    return replace(grid, stack=st.prefill_dispatch())


def _by_scheme(grid: Grid):
    """Each registered scheme the grid's configurations use: the scheme, their rows (ascending)
    and the grid of them. (Not np.unique: it imports numpy.ma, 10+ ms of start-up; and the search
    stops once every row is placed.)"""
    left = len(grid)
    for scheme in REGISTRY.values():
        if not left:
            return
        rows = np.flatnonzero(grid.scheme == scheme.name)
        if rows.size:
            left -= rows.size
            yield scheme, rows, grid if rows.size == len(grid) else grid.take(rows)


def evaluate(models: ModelSpec | dict[str, ModelSpec], grid: Grid) -> Evaluation:
    """Every family of every configuration in the grid, and their totals. `models` maps the
    role of a family ("main", or "drafter" for draft-verify) to its ModelSpec."""
    if isinstance(models, ModelSpec):
        models = {"main": models}
    n = len(grid)
    names = op_names(models.values()) + (list(STACK_OPS) if grid.stack is not None else [])
    families: dict[tuple[str, str], FamilyCost] = {}
    order: dict[str, list[str]] = {}
    total = Totals(*(np.zeros(n) for _ in range(5)))
    q_max, logits_max, cached = np.zeros(n), np.zeros(n), np.zeros(n)
    for scheme, rows, sub in _by_scheme(grid):
        schedule = scheme.passes(sub.knobs)
        order[scheme.name] = [f.name for f in schedule]
        q_max[rows], logits_max[rows] = peak_shape(schedule)
        cached[rows] = scheme.cached_tokens(sub.knobs)
        for fam in schedule:
            used = np.flatnonzero(fam.count > 0)
            if not used.size:  # most schemes use only some of their families in a given configuration
                continue
            whole = len(used) == len(rows)  # no copy when every configuration of the scheme runs it
            cost = family_cost(models[fam.model], dispatched(sub if whole else sub.take(used), scheme, fam),
                               fam if whole else fam.take(used), names)
            cost.rows = rows[used]
            families[scheme.name, fam.name] = cost
            for key in ("count", "flops", "bytes", "time_s", "bound_s"):  # rows are distinct in a family
                getattr(total, key)[cost.rows] += getattr(cost, key)
    return Evaluation(families, total, order, q_max, logits_max, cached, names)


def passes_one_by_one(models: ModelSpec | dict[str, ModelSpec], grid: Grid) -> np.ndarray:
    """Per configuration: at most how many passes `evaluate` costs one by one, the `n` of each
    family it runs outside closed form (`closed_form_rows`), twice where an MLA model's form is
    left to dlmcost (`family_cost` then costs both); on the bare roofline an MoE family
    memory-bound at both ends turns out to need none (`_touched_experts_pass_by_pass`). Schedules
    and masks only, nothing is costed: the API checks this against its limit before evaluating
    (a few million passes take seconds)."""
    if isinstance(models, ModelSpec):
        models = {"main": models}
    out = np.zeros(len(grid))
    for scheme, rows, sub in _by_scheme(grid):
        for fam in scheme.passes(sub.knobs):
            used = fam.count > 0
            if not used.any():
                continue
            m = models[fam.model]
            forms = 2 if both_mla_forms(m, sub.mla_auto[used]) else 1  # as family_cost decides
            one_by_one = used & ~closed_form_rows(m, sub, fam)
            out[rows] += np.where(one_by_one, fam.n.astype(int) * forms, 0)
    return out


def first_pass(models: ModelSpec | dict[str, ModelSpec], grid: Grid, ev: Evaluation,
               with_dispatch: bool = False) -> tuple[np.ndarray, ...]:
    """Per configuration of an evaluated grid: the time of its first pass (pass j = 0 of the first
    family of its schedule that it runs: a prompt prefill, or the pass that opens the first block),
    and how many of its passes see only the prompt (`schemes.prompt_passes`); `with_dispatch`: and
    the part of the first pass's time that is a prefill's own dispatch (`dispatched`: what the pass
    takes beyond the same pass under the stack's host block; 0 where that is the host it runs
    under), which an engine pays once per prefill forward however many prompts it holds.

    The pass is costed as `evaluate` costs its family (same stack, same MLA form); a caller takes
    the rest of the generation as `ev.total.time_s` minus it."""
    if isinstance(models, ModelSpec):
        models = {"main": models}
    n = len(grid)
    time_s, prompt, dispatch_s = np.full(n, np.nan), np.zeros(n), np.zeros(n)
    for scheme, rows, sub in _by_scheme(grid):
        schedule = scheme.passes(sub.knobs)
        prompt[rows] = prompt_passes(schedule, sub.knobs)
        open_rows = np.ones(len(rows), bool)  # configurations whose first family is not found yet
        for fam in schedule:
            pick = np.flatnonzero(open_rows & (fam.count > 0))
            if not pick.size:
                continue
            open_rows[pick] = False
            one = replace(fam.take(pick), n=np.ones(len(pick)), r=np.ones(len(pick)))
            g, m = sub.take(pick), models[fam.model]
            if m.mla:  # the form `evaluate` chose for the whole family
                chosen = ev.families[scheme.name, fam.name]
                form = chosen.mla_absorbed[np.searchsorted(chosen.rows, rows[pick])]
                g = replace(g, mla_absorbed=form, mla_auto=np.zeros(len(pick), bool))
            own = dispatched(g, scheme, fam)
            time_s[rows[pick]] = family_cost(m, own, one, ev.op_names).time_s
            if with_dispatch and own is not g:
                dispatch_s[rows[pick]] = time_s[rows[pick]] - family_cost(m, g, one, ev.op_names).time_s
    return (time_s, prompt, dispatch_s) if with_dispatch else (time_s, prompt)


def later_pass_q(grid: Grid) -> np.ndarray:
    """Per configuration: the largest q of its passes after the prompt's prefill
    (`schemes.later_peak_q`), what a running sequence adds to a serving step."""
    q = np.zeros(len(grid))
    for scheme, rows, sub in _by_scheme(grid):
        q[rows] = later_peak_q(scheme.passes(sub.knobs), sub.knobs)
    return q


def op_names(models) -> list[str]:
    """The ops of these models' passes, in OP_NAMES order (each cost function is named after its
    op: cost.op_functions)."""
    present = {f.__name__ for m in models for f in op_functions(m)}
    return [name for name in OP_NAMES if name in present]
