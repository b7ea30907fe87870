"""Times under a software stack for an `api.analyze(...)` result, pass family by pass family.

Until the engine applies stacks itself, this rebuilds each pass family's ops from the public
result (its `passes` entries: q, c, per-pass bytes and LM-head FLOPs) with `cost.pass_ops`, and
times them with `stack_time`. A family whose shape changes across its passes (q or c affine in
the step) is timed at its first and last pass and averaged, exact for the linear parts.
"""

from __future__ import annotations

import numpy as np

from . import cost
from .hardware import HardwareDB
from .models import ModelSpec
from .precision import get_precision, kv_bytes
from .roofline import gpu_rates, link_time, load_profile, stack_rates
from .stack_time import host_time, kind_codes, op_gpu_time, pass_time, sampler_time
from .stacks import Stack


def pass_input(spec: ModelSpec, w: dict, entry: dict, q: float, c: float) -> cost.PassInput:
    tp, ep = float(w["tp"]), float(w["ep"])
    B = float(w["effective_batch"])
    kvb = kv_bytes(w["kv_dtype"])
    per_token = float(np.asarray(cost.kv_elements_per_token_per_gpu(spec, tp))) * kvb
    kv_write = entry["kv_write_bytes"] / (B * per_token) if per_token else 0.0
    logits = entry["flops_lm_head"] / (2 * B * spec.d_model * spec.vocab_size / tp)
    a = lambda x: np.array([float(x)])  # noqa: E731 - one configuration
    return cost.PassInput(B=a(B), q=a(q), c=a(c), kv_write=a(kv_write), logits=a(logits),
                          causal=np.array([w["scheme"] == "ar"]), wbytes=a(get_precision(w["precision"]).weight_bytes),
                          kvbytes=a(kvb), all_experts=np.array([w["expert_load"] == "all"]), tp=tp, ep=ep,
                          mla_absorbed=w["mla_form"] != "expanded")


def pass_seconds(spec: ModelSpec, pin: cost.PassInput, rates, stack: Stack) -> dict:
    """GPU, host and wall seconds of one pass shape (ops from cost.pass_ops)."""
    ops = [op for op in cost.pass_ops(spec, pin)]
    kind = kind_codes([op.kind for op in ops])
    col = lambda f: np.array([float(np.asarray(f(op)).ravel()[0]) for op in ops])  # noqa: E731
    flops, nbytes, kernels = col(lambda o: o.flops), col(lambda o: o.bytes), col(lambda o: o.kernels)
    link = np.array([float(np.asarray(link_time(np.asarray(o.link_bytes, float), np.asarray(o.collectives, float),
                                                 rates)).ravel()[0]) for o in ops])
    peak = np.array([rates.peak[o.kind if o.kind != "comm" else "linear"][0] for o in ops])
    eff = np.array([rates.eff[o.kind if o.kind != "comm" else "linear"][0] for o in ops])
    rows = float(pin.B[0] * pin.q[0])
    gpu_ops = op_gpu_time(flops, nbytes, rows, kind, kernels, peak, eff, rates.bandwidth[0], rates.eff_mem[0],
                          rates.overhead_s[0], stack, link)
    logit_count = float(pin.B[0] * pin.logits[0]) * spec.vocab_size / float(np.asarray(pin.tp))
    gpu = float(gpu_ops.sum() + sampler_time(logit_count, rates.bandwidth[0], rates.eff_mem[0], stack))
    host = float(host_time(spec.n_layers, stack))
    return dict(gpu_s=gpu, host_s=host, time_s=float(pass_time(gpu, host, stack)))


def predict(analysis: dict, spec: ModelSpec, stack: Stack, hardware: list[str] | None = None) -> list[dict]:
    """Per supported GPU of an analyze result: each family's seconds per pass, and the totals."""
    w = analysis["workload"]
    db = HardwareDB.load(hardware)
    profile = load_profile(analysis["efficiency_profile"])
    out = []
    for r in analysis["results"]:
        if not r.get("supported"):
            continue
        gpu = db.get(r["gpu_key"])
        rates = stack_rates([gpu_rates(gpu, get_precision(w["precision"]), profile)])
        families, total, count = [], 0.0, 0.0
        for entry in r["passes"]:
            ends = [pass_seconds(spec, pass_input(spec, w, entry, q, c), rates, stack)
                    for q, c in ((entry["q"], entry["c"]), (entry["q_last"], entry["c_last"]))]
            per = {k: (ends[0][k] + ends[1][k]) / 2 for k in ends[0]}
            families.append(dict(name=entry["name"], count=entry["count"], q=entry["q"], c=entry["c"], **per))
            total += entry["count"] * per["time_s"]
            count += entry["count"]
        tokens = w["batch"] * w["gen"]
        out.append(dict(gpu=r["gpu"], gpu_key=r["gpu_key"], stack=stack.name, passes=families, time_s=total,
                        nfe=count, ms_per_forward=1e3 * total / count, tokens_per_s=tokens / total,
                        roofline_time_s=r["time_s"]))
    return out
