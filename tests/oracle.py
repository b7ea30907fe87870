"""A brute-force, scalar reference of dlmcost's cost model, for the golden tests.

Written from the documented model (README "How the numbers are computed", the docstrings of
the cost and schedule modules), NOT from dlmcost's code: nothing here imports dlmcost's
cost, schedule, engine, roofline or memory modules. Where dlmcost is vectorised and sums a pass
family in closed form, this file walks every forward pass of the generation one by one (Python
loops over blocks and steps), costs every op of each pass from the per-op formulas, and adds up
FLOPs, bytes and time. Plain floats only; speed does not matter, obviousness does.

Inputs: a model's architecture numbers (the fields of a ModelSpec: parsing configs is tested
elsewhere, and only raw fields are read here, never its derived weight counts), a workload, and
a GPU read straight from its YAML file in hardware/.

Conventions taken from the docs:
  * 2 FLOPs per multiply-accumulate; each weight matrix is read once per pass; activations move
    in and out of every op at 2 bytes; the K/V of a pass's own tokens come from the projection.
  * T = B*q tokens per pass; B is the batch doubled by CFG.
  * A pass family repeats each of its shapes r times, r possibly fractional (an average): here a
    shape repeated r times is walked as floor(r) passes of weight 1 plus one of weight r-floor(r).
  * Time per op: max(FLOPs / (peak * eff), bytes / (bandwidth * eff_mem)) + kernels * overhead, a
    GEMM's (linear) eff_mem and overhead its weights' precision's weight_streaming where the file has one
    (the routed experts' its experts_streaming, where it has one),
    and decode's attention (one query a sequence) the file's decode_attention where it has one;
    collectives: link bytes / (link * eff_link) + collectives * latency. A pass is the sum of its
    ops; the bound is max(sum FLOPs / peak, sum bytes / bandwidth) per pass.
  * The LM head and the embedding table stay bf16 whatever the precision (checkpoints keep them
    unquantised): the head's weights and the gathered embedding rows at 2 bytes per element, and
    the head's GEMM at the bf16 peak and bf16 GEMM efficiency (as attention).
  * Under a software stack (docs/stacks.md, "The time of a pass"; pass_times): compute time
    divided by the GEMM curve at B*q rows (linear, LM head) or the attention efficiency,
    elementwise bytes times the stack's factor, the sampler's B*positions*V logits (the whole
    vocabulary: tensor parallelism gathers them first) streamed at its bytes per logit on the
    LM head, and per pass max(GPU, host) or GPU + host, plus the fixed cost (entries host_wait
    and per_forward).
  * Expert parallelism (ep = M > 1) is costed at the busiest GPU: of the d distinct experts a
    pass touches, it holds the most, E[max | d] (busiest_given_touched), reads those and computes
    E[max] * T*k/d token copies, which are what its all-to-all sends.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HARDWARE_DIR = ROOT / "hardware"

ACT_BYTES = 2.0  # bytes per activation element between kernels
# precision -> (bytes per weight, which tensor-core peak its GEMMs run at)
PRECISIONS = {"bf16": (2.0, "bf16"), "fp8": (1.0, "fp8"), "fp4": (0.5, "fp4"),
              "w8a16": (1.0, "bf16"), "w4a16": (0.5, "bf16")}
HEAD_BYTES = 2.0  # the LM head and the embedding table: bf16 whatever the precision
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}
BYTE_KINDS = ("weights", "kv_read", "kv_write", "activations")
FLOP_KINDS = ("linear", "attention", "lm_head", "other")


# --- hardware ---------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _hardware_file(yaml_name: str) -> dict:
    """One GPU file, parsed once per test process (read-only below; pure-Python YAML parsing of
    the same files for every oracle call was a third of the golden tests' time)."""
    return yaml.safe_load((HARDWARE_DIR / yaml_name).read_text(encoding="utf-8"))


def gpu_rates(yaml_name: str, precision: str, profile: str = "realistic") -> dict:
    """Peaks, bandwidth and efficiencies of one GPU file for one precision and profile."""
    data = _hardware_file(yaml_name)
    peaks = {k: float(v) * 1e12 for k, v in data["peak_tflops"].items()}
    gemm_key = PRECISIONS[precision][1]
    eff = data["efficiency"]
    ideal = profile == "ideal"
    gemm = eff.get("gemm", {})
    sustained = float(eff.get("sustained_compute", 1.0))  # tensor-core work at the board's sustained clocks
    # elementwise work runs on the vector FP32 units; a part that lists none falls back to bf16
    vector_peak = peaks.get("fp32", peaks["bf16"])
    streaming = eff.get("weight_streaming", {}).get(precision, {})
    # a fused MoE block's expert GEMMs where the file measured them apart (else the GEMMs' own rate)
    experts = eff.get("experts_streaming", {}).get(precision, streaming)
    decode_attention = eff.get("decode_attention", {})
    return dict(
        # the LM head is a bf16 GEMM whatever the precision (its weights stay bf16)
        peak={"linear": peaks[gemm_key], "lm_head": peaks["bf16"], "attention": peaks["bf16"],
              "other": vector_peak},
        eff={"linear": 1.0 if ideal else gemm.get(gemm_key, gemm.get("bf16", 1.0)) * sustained,
             "lm_head": 1.0 if ideal else gemm.get("bf16", 1.0) * sustained,
             "attention": 1.0 if ideal else gemm.get("bf16", 1.0) * sustained,
             "other": 1.0},
        bandwidth=float(data["bandwidth_tb_s"]) * 1e12,
        eff_mem=1.0 if ideal else float(eff["memory_bandwidth"]),
        overhead_s=0.0 if ideal else float(eff["overhead_us_per_op"]) * 1e-6,
        # a GEMM (linear op) streams its weights at its precision's measured rate, where the file gives one
        eff_mem_linear=1.0 if ideal else float(streaming.get("memory_bandwidth", eff["memory_bandwidth"])),
        overhead_linear_s=0.0 if ideal else float(streaming.get("overhead_us_per_op", eff["overhead_us_per_op"])) * 1e-6,
        eff_mem_experts=1.0 if ideal else float(experts.get("memory_bandwidth", eff["memory_bandwidth"])),
        overhead_experts_s=0.0 if ideal else float(experts.get("overhead_us_per_op", eff["overhead_us_per_op"])) * 1e-6,
        # decode's attention (one query a sequence) reads the K/V cache at its measured rate, where given
        eff_mem_decode_attention=1.0 if ideal else float(decode_attention.get("memory_bandwidth", eff["memory_bandwidth"])),
        overhead_decode_attention_s=0.0 if ideal else float(
            decode_attention.get("overhead_us_per_op", eff["overhead_us_per_op"])) * 1e-6,
        link=float(data.get("scale_up_gb_s", 0.0)) * 1e9,
        eff_link=1.0 if ideal else float(eff.get("link", 0.8)),
        latency_s=0.0 if ideal else float(eff.get("collective_latency_us", 10.0)) * 1e-6,
        # a stack's GEMM curve is read at M / rows_scale rows on this GPU
        rows_scale=1.0 if ideal else float(eff.get("gemm_rows_scale", 1.0)),
        # NCCL's bandwidth falls with the message size on NVIDIA links (collective_bandwidth.json)
        link_by_size=not ideal and data["vendor"] == "NVIDIA",
        fp8=gemm_key == "fp8",  # the GEMMs run at the fp8 peak (a stack's fused MoE kernel has its own fp8 rate)
    )


def link_share(sent_bytes: float) -> float:
    """The collective-bandwidth curve by hand: its points joined by straight lines in
    log(bytes sent per GPU), flat outside them."""
    curve = json.loads((ROOT / "dlmcost" / "inputs" / "collective_bandwidth.json").read_text(encoding="utf-8"))
    points = list(zip(curve["sent_bytes"], curve["share_of_link"]))
    if sent_bytes <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if sent_bytes <= x1:
            return y0 + (y1 - y0) * (math.log(sent_bytes) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return points[-1][1]


# --- the schedule: every forward pass ---------------------------------------------------------


@dataclass
class Pass:
    family: str  # prefill | refresh | step | store
    q: float  # query tokens per sequence
    c: float  # cached tokens whose K/V are read
    kv_write: float  # tokens per sequence whose K/V go into the cache
    logits: float  # positions per sequence that get logits
    causal: bool
    weight: float = 1.0  # 1 for a real pass; < 1 for the fractional tail of a repeat count
    model: str = "main"  # which model runs it: "main", or "drafter" (draft-verify)


def repeat(r: float) -> list[float]:
    """A shape run r times (r may be fractional, an average): floor(r) whole passes and the rest."""
    whole = math.floor(r + 1e-12)
    tail = r - whole
    return [1.0] * whole + ([tail] if tail > 1e-12 else [])


def passes(scheme: str, Lp: int, Lg: int, S: float, b: int, store_pass: bool = False,
           committed: bool = False, active_blocks: float = 2, cache_delay: float = 1, refresh_every: int = 0,
           window: int = 16, drafter: bool = False) -> list[Pass]:
    """Every forward pass of one generation (for the three newer schemes grouped by family
    rather than in running order, which the totals do not depend on; but every list starts with
    the generation's first pass)."""
    out: list[Pass] = []
    nb = Lg // b
    s = S / nb  # denoising steps per block (an average when fractional)
    full = Lp + Lg

    def step_logits(q):
        return min(b, q) if committed else q

    if scheme == "ar":
        # answer tokens 0..Lg-1; each is sampled from the logits of the pass that feeds the token
        # before it (the prefill's last position for token 0), and every token but the last is
        # fed back once, over everything before it. Without a prompt token 0 has a pass of its own.
        fed = []  # (tokens cached when the pass runs) for every decode pass
        if Lp > 0:
            out.append(Pass("prefill", Lp, 0, Lp, 1, True))  # samples token 0
            first_position = Lp
        else:
            fed.append(0)  # a start slot over nothing cached, its K/V at position 0, samples token 0
            first_position = 1
        # feeding token i (at first_position + i) samples token i + 1; the last is never fed
        fed += [first_position + i for i in range(Lg - 1)]
        for cached in fed:
            out.append(Pass("step", 1, cached, 1, 1, True))
    elif scheme == "mdm":
        for w in repeat(S):  # every step is the whole canvas, no cache
            out.append(Pass("step", full, 0, 0, step_logits(full), False, w))
    elif scheme == "prefix-cache":
        for i in range(nb):
            # a full pass at the start of each block rewrites the cache of the prompt and the
            # finished blocks; then s-1 steps run the current block and everything after it
            out.append(Pass("refresh", full, 0, Lp + i * b, step_logits(full), False))
            q = Lg - i * b
            for w in repeat(s - 1):
                out.append(Pass("step", q, Lp + i * b, 0, step_logits(q), False, w))
    elif scheme == "dual-cache":
        for i in range(nb):
            # the refresh caches everything but the current block (prefix and suffix)
            out.append(Pass("refresh", full, 0, full - b, step_logits(full), False))
            for w in repeat(s - 1):
                out.append(Pass("step", b, full - b, 0, b, False, w))
    elif scheme == "block":
        if Lp > 0:
            out.append(Pass("prefill", Lp, 0, Lp, 1, True))
        for i in range(nb):
            # without a store pass the block's K/V are written by its last step: b/s per step
            # on average (the documented convention)
            kvw = 0.0 if store_pass else b / s
            for w in repeat(s):
                out.append(Pass("step", b, Lp + i * b, kvw, b, False, w))
            if store_pass:
                out.append(Pass("store", b, Lp + i * b, b, 0, False))
    elif scheme == "multi-block":
        # S passes; every R-th is a full-canvas refresh (R = 0: none; R = 1: all, and no cache at
        # all); the rest, s' per block, run the window of blocks in flight over the exact cache.
        R = refresh_every
        refreshes = math.floor(S / R) if R > 0 else 0
        cached = R != 1
        s_c = (S - refreshes) / nb
        if cached and Lp > 0:  # the prompt's K/V, written once (no logits)
            out.append(Pass("prefill", Lp, 0, Lp, 0, False))
        if cached:
            # A blocks in flight plus the d/s' finished ones still waiting to be cached
            in_flight = min(active_blocks + cache_delay / s_c, nb)
            for i in range(nb):  # i: the first block not yet cached
                blocks = min(in_flight, nb - i)
                fam = "step" if nb - i >= in_flight else "tail"  # window full, or draining
                q = b * blocks
                for w in repeat(s_c):
                    out.append(Pass(fam, q, Lp + i * b, b / s_c, q, False, w))  # a block enters per s'
        for _ in range(refreshes):  # passes R, 2R, ...: after the first cached ones (all passes when R = 1)
            # rewrites the cache: the prompt and, on average over the generation, (nb-1)/2 blocks
            out.append(Pass("refresh", full, 0, Lp + (nb - 1) * b / 2 if cached else 0, full, False))
    elif scheme == "windowed-refresh":
        # per block: a full refresh (as the dual cache), then s-1 steps over the block and w
        # tokens either side, every R-th of them a full refresh instead
        q = min(b + 2 * window, full)
        later = s - 1
        whole = math.floor(later + 1e-12)
        for i in range(nb):
            refresh = Pass("refresh", full, 0, full - b, step_logits(full), False)
            out.append(refresh)
            for t in range(1, whole + 1):
                if refresh_every > 0 and t % refresh_every == 0:
                    out.append(refresh)
                else:
                    out.append(Pass("step", q, full - q, 0, min(b, q), False))
            if later - whole > 1e-12:
                out.append(Pass("step", q, full - q, 0, min(b, q), False, later - whole))
    elif scheme == "draft-verify":
        # S = Lg / accepted, where accepted is the mean number of tokens one verify pass adds (its
        # accepted drafts and the bonus token). Answer token 0 comes from the prefill's last-position
        # logits, as in ar, so the verify passes must add the tokens after it: Lg - 1 of them at
        # `accepted` each. Without a prompt there is no prefill and they add all Lg. Each drafts
        # k = b tokens and verifies them causally; spread over ceil(iterations) shapes whose
        # context grows by an equal share of the added tokens, each run iterations/shapes times.
        k = b
        accepted = Lg / S  # K/V kept per iteration
        to_add = Lg - 1 if Lp > 0 else Lg
        iterations = to_add / accepted
        n = math.ceil(iterations - 1e-9)
        each = iterations / n if n else 0.0
        if Lp > 0:
            out.append(Pass("prefill", Lp, 0, Lp, 1, True))
            if drafter:
                out.append(Pass("draft-prefill", Lp, 0, Lp, 0, False, model="drafter"))
        for j in range(n):
            ctx = Lp + j * to_add / n
            if drafter:  # the drafter's bidirectional pass over k slots, then the verifier's k + 1
                out.append(Pass("draft", k, ctx, accepted, k, False, each, model="drafter"))
                out.append(Pass("verify", k + 1, ctx, accepted, k + 1, True, each))
            else:  # self-speculative: k drafts verified plus k mask slots drafting the next
                out.append(Pass("verify", 2 * k, ctx, accepted, 2 * k, True, each))
    else:
        raise ValueError(scheme)
    return out


# --- expert parallelism: the busiest GPU -------------------------------------------------------


@lru_cache(maxsize=None)
def busiest_given_touched(E: int, M: int) -> tuple[float, ...]:
    """E[experts on the busiest of M GPUs | d distinct experts touched], for d = 0..E, each GPU
    holding s = E/M. Given d, the touched set is a uniform d-subset of the E experts, so the
    number of d-subsets with at most x-1 on every GPU is the coefficient of z^d in
    (sum_{j<x} C(s, j) z^j)^M: P(max < x | d) is that over C(E, d), and
    E[max | d] = sum_{x=1}^{s} P(max >= x | d). Exact integer arithmetic, one float at the end."""
    s = E // M
    assert s * M == E
    above = [0] * (E + 1)  # sum over x of the d-subsets whose max is >= x
    for x in range(1, s + 1):
        part = [math.comb(s, j) for j in range(x)]  # one GPU with fewer than x touched
        power = [1]
        for _ in range(M):
            prod = [0] * (len(power) + len(part) - 1)
            for i, u in enumerate(power):
                for j, v in enumerate(part):
                    prod[i + j] += u * v
            power = prod
        for dd in range(E + 1):
            below = power[dd] if dd < len(power) else 0
            above[dd] += math.comb(E, dd) - below
    return tuple(above[dd] / math.comb(E, dd) for dd in range(E + 1))


def expected_busiest(E: int, M: int, d: float) -> float:
    """E[max | d] at a real d (the expected distinct count), linear between integers."""
    table = busiest_given_touched(E, M)
    lo = min(math.floor(d), E)
    frac = d - lo
    return table[lo] + (table[lo + 1] - table[lo]) * frac if frac > 0 else table[lo]


# --- the ops of one pass ----------------------------------------------------------------------


@dataclass
class Op:
    name: str
    kind: str  # linear | attention | lm_head | other | comm
    flops: float = 0.0
    weights: float = 0.0
    kv_read: float = 0.0
    kv_write: float = 0.0
    activations: float = 0.0
    kernels: float = 0.0
    link_bytes: float = 0.0
    collectives: float = 0.0
    rows_per_expert: float | None = None  # routed experts: the rows each touched expert receives
    depths: tuple = ()  # a GEMM op's matrices on this GPU: (weights, inner dimension K) each
    decode: bool = False  # attention with one query a sequence: decode's kernel, at its measured rate
    flops_per_key: float = 0.0  # attention: its FLOPs were every query to read one key

    @property
    def bytes(self) -> float:
        return self.weights + self.kv_read + self.kv_write + self.activations


@dataclass
class Setup:
    """Per-workload settings that every pass shares."""

    B: int  # sequences in a pass (CFG doubled)
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    all_experts: bool = False
    tp: int = 1
    ep: int = 1
    mla_absorbed: bool = True

    @property
    def w(self) -> float:
        return PRECISIONS[self.precision][0]

    @property
    def kv(self) -> float:
        return KV_BYTES[self.kv_dtype]


def pass_ops(m, p: Pass, st: Setup) -> list[Op]:
    """Every op of one forward pass, totals over the layers, per GPU of the TP group."""
    a = ACT_BYTES
    B, q, c, N, ep = st.B, p.q, p.c, st.tp, st.ep
    T = B * q
    L, d = m.n_layers, m.d_model
    H = m.n_heads / N  # query heads on this GPU
    mla = m.mla
    moe = m.moe
    L_moe = moe.n_moe_layers if moe else 0
    L_dense = L - L_moe
    nmat = 3 if m.gated_mlp else 2
    # keys each query sees, summed over the pass's queries of one sequence
    if p.causal:
        keys = 0.0
        for i in range(1, int(q) + 1):  # query i sees the cache and the first i new tokens
            keys += c + i
    else:
        keys = q * (c + q)
    ops: list[Op] = []

    def gemm(name, weights_per_layer, d_in, d_out, layers, tokens=T, depths=None):
        return Op(name, "linear", flops=layers * 2 * tokens * weights_per_layer,
                  weights=layers * weights_per_layer * st.w,
                  activations=layers * tokens * (d_in + d_out) * a, kernels=layers,
                  depths=depths or ((weights_per_layer, d_in),))

    def ffn_depths(width):  # gate and up read d, down reads the width on this GPU
        return (((nmat - 1) * d * width, d), (d * width, width))

    # Q/K/V projections
    if mla:
        q_down = d * mla.q_lora_rank + mla.q_lora_rank if mla.q_lora_rank else 0  # + the q latent's norm
        q_in = mla.q_lora_rank or d
        q_width = m.n_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        latent = mla.kv_lora_rank + mla.qk_rope_head_dim  # cached per token per layer
        kv_down = d * latent + mla.kv_lora_rank  # + the latent's norm
        w = q_down + kv_down + q_in * q_width / N  # down-projections replicated, Q up split by heads
        ops.append(gemm("qkv_proj", w, d, q_width / N + latent, L,
                        depths=((q_down + kv_down, d), (q_in * q_width / N, q_in))))
        # W_kvb: latent -> per-head K_nope and V
        w_kvb = mla.kv_lora_rank * m.n_heads * (mla.qk_nope_head_dim + mla.v_head_dim) / N
        nope_v = mla.qk_nope_head_dim + mla.v_head_dim
        # W_UK (latent x qk_nope per head) and W_UV (latent x v): applied to the latent they read
        # kv_lora; absorbed, W_UK multiplies the queries' qk_nope part instead
        uk, uv = mla.kv_lora_rank * H * mla.qk_nope_head_dim, mla.kv_lora_rank * H * mla.v_head_dim
        if st.mla_absorbed:  # folded into the queries and the output: the new tokens only
            act = T * H * (mla.qk_nope_head_dim + 2 * mla.kv_lora_rank + mla.v_head_dim)
            ops.append(Op("mla_kv_up", "linear", flops=L * 2 * T * w_kvb, weights=L * w_kvb * st.w,
                          activations=L * act * a, kernels=L,
                          depths=((uk, mla.qk_nope_head_dim), (uv, mla.kv_lora_rank))))
        else:  # every key (cached and new) up-projected; the expanded K/V go through memory
            n_keys = B * (c + q)
            act = n_keys * (mla.kv_lora_rank + H * nope_v)
            ops.append(Op("mla_kv_up", "linear", flops=L * 2 * n_keys * w_kvb, weights=L * w_kvb * st.w,
                          activations=L * act * a, kernels=L, depths=((uk + uv, mla.kv_lora_rank),)))
        if st.mla_absorbed:  # MQA over the latent
            qk, av = mla.kv_lora_rank + mla.qk_rope_head_dim, mla.kv_lora_rank
            keys_act = T * latent
        else:
            qk, av = mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim
            keys_act = B * (c + q) * H * nope_v
        ops.append(Op("attention", "attention", flops=L * 2 * B * keys * H * (qk + av),
                      kv_read=L * B * c * latent * st.kv, kv_write=L * B * p.kv_write * latent * st.kv,
                      activations=L * (T * H * (qk + av) + keys_act) * a, kernels=L, decode=q == 1,
                      flops_per_key=L * 2 * B * q * H * (qk + av)))
        v_dim = mla.v_head_dim
    else:
        h = m.head_dim
        kvh = max(m.n_kv_heads / N, 1.0)  # K/V heads per GPU, replicated beyond n_kv_heads GPUs
        q_w = m.n_heads * h * (d + (1 if m.qkv_bias else 0)) + (h if m.qk_norm else 0)
        kv_w = 2 * m.n_kv_heads * h * (d + (1 if m.qkv_bias else 0)) + (h if m.qk_norm else 0)
        w = q_w / N + kv_w * kvh / m.n_kv_heads
        ops.append(gemm("qkv_proj", w, d, (H + 2 * kvh) * h, L))
        kv_elems = 2 * kvh * h
        ops.append(Op("attention", "attention", flops=L * 4 * B * keys * H * h,
                      kv_read=L * B * c * kv_elems * st.kv, kv_write=L * B * p.kv_write * kv_elems * st.kv,
                      activations=L * T * (2 * H * h + kv_elems) * a, kernels=L, decode=q == 1,
                      flops_per_key=L * 4 * B * q * H * h))
        v_dim = h
    ops.append(gemm("o_proj", m.n_heads * v_dim * d / N, H * v_dim, d, L))

    if L_dense:
        w = nmat * d * m.ffn_dim / N
        ops.append(Op("mlp", "linear", flops=L_dense * 2 * T * w, weights=L_dense * w * st.w,
                      activations=L_dense * 2 * T * (d + nmat * m.ffn_dim / N) * a, kernels=L_dense,
                      depths=ffn_depths(m.ffn_dim / N)))
    if moe:
        E, k, fe = moe.n_experts, moe.experts_per_token, moe.expert_ffn_dim
        router_w = d * E + (E if moe.router_bias else 0)
        ops.append(Op("router", "linear", flops=L_moe * 2 * T * d * E, weights=L_moe * router_w * st.w,
                      activations=L_moe * T * (d + E) * a, kernels=L_moe, depths=((router_w, d),)))
        # uniform routing: an expert is missed by a token with probability 1 - k/E
        distinct = E * (1 - (1 - k / E) ** T)
        expert_w = nmat * d * fe
        share = ep / N  # each GPU holds E/ep whole experts, each a (tp/ep)-way slice of it
        if ep == 1:
            # every GPU holds a 1/N slice of all E experts: it reads the d touched, computes all T*k copies
            read = E if st.all_experts else distinct
            copies = T * k
        else:
            # the pass waits for the GPU holding the most touched experts: it reads those (all of
            # its E/ep under --expert-load all) and computes their copies, T*k/d per touched expert
            busiest = expected_busiest(E, ep, distinct)
            read = E / ep if st.all_experts else busiest
            copies = busiest * T * k / distinct
        ops.append(Op("experts", "linear", flops=L_moe * 2 * copies * expert_w * share,
                      weights=L_moe * read * expert_w * share * st.w,
                      # a fused MoE block's two grouped GEMMs (w13 and w2)
                      activations=L_moe * 2 * copies * (d + nmat * fe * share) * a, kernels=2 * L_moe,
                      rows_per_expert=T * k / distinct, depths=ffn_depths(fe * share)))
        if moe.shared_ffn_dim:
            w = nmat * d * moe.shared_ffn_dim / N
            ops.append(Op("shared_experts", "linear", flops=L_moe * 2 * T * w, weights=L_moe * w * st.w,
                          activations=L_moe * 2 * T * (d + nmat * moe.shared_ffn_dim / N) * a, kernels=L_moe,
                          depths=ffn_depths(moe.shared_ffn_dim / N)))
        # dispatch and combine of the busiest GPU's copies, (ep-1)/ep of them to or from other GPUs
        a2a = L_moe * 2 * copies * (ep - 1) / ep * d * a
        ops.append(Op("ep_all_to_all", "comm", link_bytes=a2a, collectives=L_moe * 2 if ep > 1 else 0))

    # norms, residual adds, rope, SiLU*mul, softmax
    if moe:
        ffn_width = L_dense * m.ffn_dim + L_moe * (moe.experts_per_token * moe.expert_ffn_dim + moe.shared_ffn_dim)
    else:
        ffn_width = L * m.ffn_dim
    if mla:
        rope = (H + 1) * mla.qk_rope_head_dim  # the shared rope key
    else:
        rope = (H + max(m.n_kv_heads / N, 1.0)) * m.head_dim
    per_layer = T * (2 * 4 * d + 2 * d + 3 * rope)  # 2 norms at 4 FLOP/element, 2 adds, rope
    ew_flops = (L * per_layer + 4 * T * ffn_width / N + L * 5 * B * keys * H
                + 4 * T * d)  # + the final norm
    ew_weights = (L * 2 * d + d) * a + T * d * HEAD_BYTES  # norm weights, the gathered bf16 embedding rows
    ew_act = (L * 10 * T * d + T * d + 2 * T * d) * a  # per layer 10*T*d; embedding out, final norm
    # a launch a layer, and a fused MoE block's four small kernels (top-k, align, activation, reduce)
    ops.append(Op("elementwise", "other", flops=ew_flops, weights=ew_weights, activations=ew_act,
                  kernels=L + (4 * L_moe if moe else 0)))

    V = m.vocab_size / N
    n_log = B * p.logits
    runs = 1 if p.logits > 0 else 0
    ops.append(Op("lm_head", "lm_head", flops=2 * n_log * d * V, weights=runs * V * d * HEAD_BYTES,
                  activations=n_log * (d + V) * a, kernels=runs, depths=((V * d, d),)))

    if N > 1:
        # all-reduce after attention and after every FFN (MoE layers under EP combine by
        # all-to-all instead), ring: 2(N-1)/N of the message; the logits all-gather
        reduces = L + L_dense + (L_moe if ep == 1 else 0)
        gathers = 1 if p.logits > 0 else 0
        link = reduces * 2 * (N - 1) / N * T * d * a + gathers * (N - 1) / N * B * p.logits * m.vocab_size * a
        ops.append(Op("tp_collectives", "comm", link_bytes=link, collectives=reduces + gathers))
    else:
        ops.append(Op("tp_collectives", "comm"))
    return ops


# --- time -------------------------------------------------------------------------------------


def op_time(op: Op, g: dict) -> float:
    if op.kind == "comm":
        share = link_share(op.link_bytes / op.collectives) if g.get("link_by_size") and op.collectives else 1.0
        t = op.link_bytes / (g["link"] * g["eff_link"] * share) if op.link_bytes > 0 else 0.0
        return t + op.collectives * g["latency_s"]
    compute = op.flops / (g["peak"][op.kind] * g["eff"][op.kind])
    memory = op.bytes / (g["bandwidth"] * eff_mem(op, g))
    return max(compute, memory) + op.kernels * overhead(op, g)


def eff_mem(op: Op, g: dict) -> float:
    """The share of the bandwidth an op streams at: a GEMM's (linear) at its weights' precision (the
    routed experts' at the file's experts_streaming rate where it has one), decode's attention at the
    file's decode_attention rate."""
    if op.name == "experts":
        return g["eff_mem_experts"]
    if op.kind == "linear":
        return g["eff_mem_linear"]
    return g["eff_mem_decode_attention"] if op.decode else g["eff_mem"]


def overhead(op: Op, g: dict) -> float:
    if op.name == "experts":
        return g["overhead_experts_s"]
    if op.kind == "linear":
        return g["overhead_linear_s"]
    return g["overhead_decode_attention_s"] if op.decode else g["overhead_s"]


def pass_bound(ops: list[Op], g: dict) -> float:
    compute = sum(op.flops / g["peak"][op.kind] for op in ops if op.kind != "comm")
    memory = sum(op.bytes for op in ops) / g["bandwidth"]
    return max(compute, memory)


# --- a software stack (docs/stacks.md, "The time of a pass") --------------------------------------
#
# A stack is a plain dict here: us_per_layer, overlaps_gpu, fixed_us (host), us_per_sequence,
# us_per_sequence_squared and us_per_expert (host, optional), gemm (a list of (rows, efficiency)
# points), attention, elementwise (bytes factor), sampler_bytes (per logit held), sampler_traffic
# (optional: per logit streamed; sampler_bytes without it), expert_rows ("routed" unless "pass"),
# depth (optional: (overhead, reference K) of the GEMM depth term), keys_overhead (optional: k0,
# attention at k / (k + k0) of its rate for k keys per query), fused_moe (optional: (depth overhead,
# fp8 rate) of the routed experts' fused MoE kernel: its GEMMs' depth term with that overhead in place of
# the curve's, and its rate at fp8 that share of the fp8 GEMM rate).


def stack_gemm_factor(stack: dict, rows: float) -> float:
    """The GEMM curve at M rows: linear in log M between its points, flat beyond its ends."""
    points = [(math.log(r), e) for r, e in stack["gemm"]]
    x = math.log(max(rows, 1.0))
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def depth_multiplier(op: Op, g: dict, stack: dict) -> float:
    """A GEMM op under a stack with a depth term (stack["depth"] = (overhead, reference K)): a
    matrix of inner dimension K takes its FLOPs' time x (1 + K0/K) / (1 + K0/K_ref), K0 the
    overhead x the achievable GEMM FLOP/s over the achievable bytes/s; the op's FLOPs split over
    its matrices by weight. 1 without the term."""
    if "depth" not in stack or not op.depths:
        return 1.0
    overhead, reference = stack["depth"]
    if op.rows_per_expert is not None and "fused_moe" in stack:  # the routed experts' own kernel
        overhead = stack["fused_moe"][0]
    k0 = overhead * g["peak"][op.kind] * g["eff"][op.kind] / (g["bandwidth"] * g["eff_mem"])
    slowdown = sum(w * (1 + k0 / k) / (1 + k0 / reference) for w, k in op.depths) / sum(w for w, _ in op.depths)
    return 1.0 / slowdown


def stacked_op_time(op: Op, g: dict, stack: dict, rows: float) -> float:
    """max(FLOPs / (peak * eff * f_stack), bytes' / (bandwidth * eff_mem)) + kernels * overhead."""
    if op.kind == "comm":
        return op_time(op, g)
    if op.rows_per_expert is not None and stack.get("expert_rows", "routed") == "routed":
        rows = op.rows_per_expert  # a grouped GEMM: each expert's own rows
    rows /= g["rows_scale"]
    factor = {"linear": stack_gemm_factor(stack, rows), "lm_head": stack_gemm_factor(stack, rows),
              "attention": stack["attention"], "other": 1.0}[op.kind] * depth_multiplier(op, g, stack)
    if op.rows_per_expert is not None and "fused_moe" in stack and g["fp8"]:
        factor *= stack["fused_moe"][1]
    nbytes = op.bytes * (stack["elementwise"] if op.kind == "other" else 1.0)
    compute = op.flops / (g["peak"][op.kind] * g["eff"][op.kind] * factor)
    if op.kind == "attention" and op.flops > 0:  # k0 more keys' worth of work per query row
        compute *= 1.0 + stack.get("keys_overhead", 0.0) * op.flops_per_key / op.flops
    memory = nbytes / (g["bandwidth"] * eff_mem(op, g))
    return max(compute, memory) + op.kernels * overhead(op, g)


def pass_times(m, p: Pass, st: Setup, g: dict, stack: dict | None) -> dict[str, float]:
    """Seconds of every op of one pass; under a stack also the sampler (on the LM head: B x
    positions x the whole vocabulary logits at sampler_bytes each, streamed: the split logits are
    all-gathered before sampling), `host_wait` (GPU idle
    while the host dispatches L layers) and `per_forward` (the fixed cost)."""
    ops = pass_ops(m, p, st)
    if stack is None:
        return {op.name: op_time(op, g) for op in ops}
    times = {op.name: stacked_op_time(op, g, stack, st.B * p.q) for op in ops}
    logits = st.B * p.logits * m.vocab_size
    streamed = stack.get("sampler_traffic", stack["sampler_bytes"])
    times["lm_head"] += logits * streamed / (g["bandwidth"] * g["eff_mem"])
    gpu = sum(times.values())
    # a reference MoE loop visits every expert of every MoE layer (us_per_expert each)
    loops = m.moe.n_moe_layers * m.moe.n_experts if m.moe else 0
    host = (m.n_layers * stack["us_per_layer"] + loops * stack.get("us_per_expert", 0.0)) * 1e-6
    times["host_wait"] = max(host - gpu, 0.0) if stack["overlaps_gpu"] else host
    times["per_forward"] = (stack["fixed_us"] + stack.get("us_per_sequence", 0.0) * st.B
                            + stack.get("us_per_sequence_squared", 0.0) * st.B ** 2) * 1e-6
    return times


# --- a whole generation -----------------------------------------------------------------------


@dataclass
class Totals:
    count: float = 0.0
    flops: dict = field(default_factory=lambda: dict.fromkeys(FLOP_KINDS, 0.0))
    bytes: dict = field(default_factory=lambda: dict.fromkeys(BYTE_KINDS, 0.0))
    time_s: float = 0.0
    bound_s: float = 0.0
    op_flops: dict = field(default_factory=dict)
    op_bytes: dict = field(default_factory=dict)
    op_time_s: dict = field(default_factory=dict)
    first: Pass | None = None
    last: Pass | None = None
    mla_form: str | None = None

    def add(self, other: "Totals") -> None:
        self.count += other.count
        for k in FLOP_KINDS:
            self.flops[k] += other.flops[k]
        for k in BYTE_KINDS:
            self.bytes[k] += other.bytes[k]
        self.time_s += other.time_s
        self.bound_s += other.bound_s
        for name in other.op_time_s:
            for mine, theirs in ((self.op_flops, other.op_flops), (self.op_bytes, other.op_bytes),
                                 (self.op_time_s, other.op_time_s)):
                mine[name] = mine.get(name, 0.0) + theirs[name]


def walk(m, schedule: list[Pass], st: Setup, g: dict, drafter=None, stack: dict | None = None) -> dict[str, Totals]:
    """Cost every pass (a drafter's passes with the drafter's architecture); totals per family."""
    fams: dict[str, Totals] = {}
    for p in schedule:
        t = fams.setdefault(p.family, Totals())
        if t.first is None:
            t.first = p
        t.last = p
        wgt = p.weight
        t.count += wgt
        model = drafter if p.model == "drafter" else m
        ops = pass_ops(model, p, st)
        times = pass_times(model, p, st, g, stack)
        # a stack's time-only entries: no FLOPs, no bytes
        entries = ops + [Op(name, "host") for name in ("host_wait", "per_forward") if name in times]
        for op in entries:
            if op.kind in FLOP_KINDS:
                t.flops[op.kind] += wgt * op.flops
            t.bytes["weights"] += wgt * op.weights
            t.bytes["kv_read"] += wgt * op.kv_read
            t.bytes["kv_write"] += wgt * op.kv_write
            t.bytes["activations"] += wgt * op.activations
            secs = times[op.name]
            t.time_s += wgt * secs
            t.op_flops[op.name] = t.op_flops.get(op.name, 0.0) + wgt * op.flops
            t.op_bytes[op.name] = t.op_bytes.get(op.name, 0.0) + wgt * op.bytes
            t.op_time_s[op.name] = t.op_time_s.get(op.name, 0.0) + wgt * secs
        t.bound_s += wgt * pass_bound(ops, g)
    return fams


def generation(m, gpu_yaml: str, *, scheme: str, prompt: int, gen: int, steps: float | None = None,
               block: int | None = None, batch: int = 1, cfg: bool = False, precision: str = "bf16",
               kv_dtype: str = "bf16", store_pass: bool = False, logits: str = "all",
               expert_load: str = "expected", tp: int = 1, ep: int = 1, mla_form: str = "auto",
               active_blocks: float = 2, cache_delay: float = 1, refresh_every: int = 0, window: int = 16,
               drafter=None, profile: str = "realistic", stack: dict | None = None) -> dict:
    """The expected JSON-level numbers of one result (one GPU) of `dlmcost analyze`; `drafter`
    is the drafter's ModelSpec (draft-verify), None for self-speculative; `stack` a software
    stack as a plain dict (see pass_times), None for the bare roofline."""
    schedule = _schedule(scheme, prompt, gen, steps, block, store_pass, logits, active_blocks, cache_delay,
                         refresh_every, window, drafter)
    g = gpu_rates(gpu_yaml, precision, profile)
    base = dict(B=batch * (2 if cfg else 1), precision=precision, kv_dtype=kv_dtype,
                all_experts=expert_load == "all", tp=tp, ep=ep)
    if m.mla and mla_form == "auto":
        # both forms costed for every pass family; each family keeps the faster (absorbed on a tie)
        absorbed = walk(m, schedule, Setup(**base, mla_absorbed=True), g, drafter, stack)
        expanded = walk(m, schedule, Setup(**base, mla_absorbed=False), g, drafter, stack)
        fams = {}
        for name in absorbed:
            use_abs = absorbed[name].time_s <= expanded[name].time_s
            fams[name] = absorbed[name] if use_abs else expanded[name]
            fams[name].mla_form = "absorbed" if use_abs else "expanded"
    else:
        fams = walk(m, schedule, Setup(**base, mla_absorbed=mla_form != "expanded"), g, drafter, stack)
        if m.mla:
            for t in fams.values():
                t.mla_form = "expanded" if mla_form == "expanded" else "absorbed"
    total = Totals()
    for t in fams.values():
        total.add(t)
    out = dict(
        nfe=total.count,
        flops=sum(total.flops.values()),
        bytes=sum(total.bytes.values()),
        flops_breakdown=dict(total.flops),
        bytes_breakdown=dict(total.bytes),
        time_s=total.time_s,
        time_bound_s=total.bound_s,
        ops={name: dict(flops=total.op_flops[name], bytes=total.op_bytes[name], time_s=total.op_time_s[name])
             for name in total.op_time_s},
        passes={},
    )
    for name, t in fams.items():
        per = 1.0 / t.count
        entry = dict(count=t.count, flops=sum(t.flops.values()) * per, bytes=sum(t.bytes.values()) * per,
                     q=t.first.q, c=t.first.c, q_last=t.last.q, c_last=t.last.c,
                     flops_linear=t.flops["linear"] * per, flops_attention=t.flops["attention"] * per,
                     flops_lm_head=t.flops["lm_head"] * per, flops_other=t.flops["other"] * per,
                     weight_bytes=t.bytes["weights"] * per, kv_read_bytes=t.bytes["kv_read"] * per,
                     kv_write_bytes=t.bytes["kv_write"] * per, activation_bytes=t.bytes["activations"] * per,
                     time_s=t.time_s * per)
        if t.mla_form:
            entry["mla_form"] = t.mla_form
        out["passes"][name] = entry
    return out


def _schedule(scheme, prompt, gen, steps, block, store_pass, logits, active_blocks, cache_delay, refresh_every,
              window, drafter) -> list[Pass]:
    b = block or gen
    S = float(gen) if scheme == "ar" or steps is None else float(steps)
    return passes(scheme, prompt, gen, S, b, store_pass=store_pass and scheme == "block",
                  committed=logits == "committed", active_blocks=active_blocks, cache_delay=cache_delay,
                  refresh_every=refresh_every, window=window, drafter=drafter is not None)


def first_pass(m, gpu_yaml: str, *, scheme: str, prompt: int, gen: int, steps: float | None = None,
               block: int | None = None, batch: int = 1, cfg: bool = False, precision: str = "bf16",
               kv_dtype: str = "bf16", store_pass: bool = False, logits: str = "all",
               expert_load: str = "expected", tp: int = 1, ep: int = 1, mla_form: str = "auto",
               active_blocks: float = 2, cache_delay: float = 1, refresh_every: int = 0, window: int = 16,
               drafter=None, profile: str = "realistic") -> dict:
    """The generation's first pass (the head of its pass list), costed alone at the MLA form its
    family gets in `generation`, and how many passes see only the prompt (q = Lp, nothing cached)."""
    schedule = _schedule(scheme, prompt, gen, steps, block, store_pass, logits, active_blocks, cache_delay,
                         refresh_every, window, drafter)
    whole = generation(m, gpu_yaml, scheme=scheme, prompt=prompt, gen=gen, steps=steps, block=block, batch=batch,
                       cfg=cfg, precision=precision, kv_dtype=kv_dtype, store_pass=store_pass, logits=logits,
                       expert_load=expert_load, tp=tp, ep=ep, mla_form=mla_form, active_blocks=active_blocks,
                       cache_delay=cache_delay, refresh_every=refresh_every, window=window, drafter=drafter,
                       profile=profile)
    head = schedule[0]
    head = Pass(head.family, head.q, head.c, head.kv_write, head.logits, head.causal, 1.0, head.model)
    form = whole["passes"][head.family].get("mla_form", "absorbed")
    st = Setup(B=batch * (2 if cfg else 1), precision=precision, kv_dtype=kv_dtype, all_experts=expert_load == "all",
               tp=tp, ep=ep, mla_absorbed=form == "absorbed")
    alone = walk(m, [head], st, gpu_rates(gpu_yaml, precision, profile), drafter)[head.family]
    only_prompt = sum(p.weight for p in schedule if prompt > 0 and p.q == prompt and p.c == 0)
    return dict(time_s=alone.time_s, prompt_passes=only_prompt, nfe=whole["nfe"], total_s=whole["time_s"])


# --- memory ---------------------------------------------------------------------------------------

def qwen7b_memory_terms(kv_bytes_per_element: float, prompt: int, answer: int) -> tuple[int, float]:
    """Qwen2.5-7B's bf16 weights and one AR request's bytes (prompt + answer tokens), per GPU at
    tp 1, worked from its config by hand (docs/methodology.md's memory formula, no stack: bf16
    logits + fp32 probabilities)."""
    d, ffn, layers, kv_heads, head_dim, vocab = 3584, 18944, 28, 4, 128, 152064
    per_layer = 2 * d * d + 2 * d * kv_heads * head_dim + 3 * d * ffn + (d + 2 * kv_heads * head_dim) + 2 * d
    weights = 2 * (2 * vocab * d + layers * per_layer + d)  # untied embedding and head, q/k/v biases, norms
    kv = 2 * layers * kv_heads * head_dim * (prompt + answer) * kv_bytes_per_element  # K and V of every token
    activations = prompt * (2 * d + 3 * ffn) * 2  # the prompt's pass: residual in/out + the gated MLP's widest
    logits = 1 * vocab * (2 + 4)  # AR: the last position's logits
    return weights, kv + activations + logits


def qwen7b_requests_in_memory(kv_bytes_per_element: float, prompt: int, answer: int, mem_fraction: float = 0.9) -> int:
    """Qwen2.5-7B's requests that fit on an 80 GiB H100 beside its bf16 weights:
    floor((F x 80 GiB - weights) / a request's bytes), F the engine's share of the memory (0.9: vLLM's default)."""
    weights, request = qwen7b_memory_terms(kv_bytes_per_element, prompt, answer)
    return math.floor((mem_fraction * 80 * 2**30 - weights) / request)
