"""`dlmcost measure`: time the forward passes a schedule runs, on this machine, with random
weights and the ModelSpec's real shapes (nothing is downloaded).

Shapes come from the scheme itself: the registry's pass families for the workload (q, c, K/V
writes, logit positions, causal or bidirectional, self-conditioning), the same families `analyze`
costs. A family is timed at its first and last pass (once when they coincide) and averaged.

A pass is timed in parts, one part built at a time, so that a 7-70B model fits: the head (the
embedding lookup, self-conditioning, final norm, LM head, soft-cap and sampler) once, then for
each kind of layer (ModelSpec.layer_groups: full or sliding attention with its window, head_dim,
K/V heads, dense MLP and/or MoE) `--layers` layers of that kind (default 1), built, timed and freed
before the next kind is built. Pass time = head + sum over kinds of (time of the built layers x
layers of that kind / layers built). Before building anything the peak memory of the largest
part is estimated (its weights, its K/V cache and one pass's activations); over the bound
(backends.available_bytes: the machine's free memory, the process's address-space limit and its
memory cgroup's, the least of them) the run stops with one line saying how much it needs; an
allocation that fails all the same is the same kind of error.

Timing (`time_call`): up to `warmup` warm-up runs, then up to `repeats` timed runs with the device
synchronised before and after each (each kind fewer once it adds up to ENOUGH_S); the median is
reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UsageError
from ..inputs.models import ModelSpec
from ..safe_text import shown
from .backends import NumpyBackend, TorchBackend, available_bytes, get_backend  # noqa: F401 (the measure API)
from .layers import Head, Layer, experts_to_build, kept_keys


@dataclass(frozen=True)
class Shape:
    """One pass: B sequences of q query tokens at positions c..c+q-1 over c cached tokens."""

    B: int
    q: int
    c: int
    kv_write: int  # tokens whose K/V the pass keeps in the cache
    logits: int  # positions the LM head and sampler run on
    causal: bool
    self_condition: bool


# --- the shapes the scheme runs -------------------------------------------------------------


def family_shapes(spec: ModelSpec, workload) -> list[dict]:
    """Each pass family the workload runs, from the scheme registry: its name, its passes (count)
    and its first and last shapes (one when they coincide). `workload`: a validated Workload."""
    from ..engine.schemes import get_scheme
    from ..engine.workload import make_knobs

    knobs = make_knobs(**workload.knobs())
    B = int(workload.effective_batch)
    out = []
    for fam in get_scheme(workload.scheme).passes(knobs):
        count = float(fam.count[0])
        if count <= 0:
            continue
        if fam.model != "main":
            raise UsageError(f"measure builds the main model only; the '{fam.name}' passes run a drafter")
        n = int(round(float(fam.n[0])))
        shapes = []
        for j in dict.fromkeys((0, max(n - 1, 0))):
            at = {k: v for k, v in fam.at(j).items()}
            q = max(int(round(float(at["q"][0]))), 1)
            shapes.append(Shape(B=B, q=q, c=int(round(float(at["c"][0]))),
                                kv_write=min(int(round(float(at["kv_write"][0]))), q),
                                logits=min(int(round(float(at["logits"][0]))), q), causal=bool(at["causal"][0]),
                                self_condition=bool(at["self_condition"]) and spec.self_conditioning))
        out.append(dict(name=fam.name, count=count, shapes=list(dict.fromkeys(shapes))))
    return out


def layer_kinds(spec: ModelSpec) -> list[tuple[int, object]]:
    """(count, LayerKind) for each distinct kind of layer, counts added."""
    counts: dict = {}
    for n, kind in spec.layer_groups:
        counts[kind] = counts.get(kind, 0) + n
    return [(n, kind) for kind, n in counts.items()]


# --- memory -----------------------------------------------------------------------------------


def layer_weights(spec: ModelSpec, kind, experts: int) -> int:
    """Elements of one built layer (with `experts` routed experts)."""
    w = spec.attn_in_weights(kind) + spec.attn_out_weights(kind) + spec.norm_weights_per_layer
    if kind.dense_mlp:
        w += spec.dense_mlp_weights
    if kind.moe:
        w += experts * spec.expert_weights + spec.shared_expert_weights + spec.router_weights
    return w


def part_elements(spec: ModelSpec, shapes: list[Shape], per_kind: int) -> list[tuple[str, int]]:
    """Peak elements of each part measure builds (the head, then each layer kind): weights, K/V
    cache and the largest pass's activations (scores and logits counted twice: softmax temporaries)."""
    d, V = spec.d_model, spec.vocab_size
    experts = experts_to_build(spec, max(s.B * s.q for s in shapes))
    head_act = max(s.B * s.q * d * 3 + 2 * s.B * s.logits * V + (2 * s.B * s.q * V if s.self_condition else 0)
                   for s in shapes)
    lookup = V if spec.tie_embeddings else V if spec.self_conditioning else min(V, max(s.B * s.q for s in shapes))
    parts = [("embedding and LM head", V * d + (0 if spec.tie_embeddings else lookup * d) + head_act)]
    for count, kind in layer_kinds(spec):
        n = min(per_kind, count)
        width = (spec.n_heads + kind.kv_tensors * kind.n_kv_heads) * kind.head_dim
        ffn = max(spec.ffn_dim if kind.dense_mlp else 0, spec.moe.expert_ffn_dim if kind.moe else 0,
                  spec.moe.shared_ffn_dim if kind.moe else 0)
        act = max(n * kind.kv_tensors * s.B * kind.n_kv_heads * (kept_keys(kind, s.c) + s.q) * kind.head_dim
                  + 2 * s.B * spec.n_heads * s.q * (kept_keys(kind, s.c) + s.q)
                  + s.B * s.q * (width + 6 * d + 3 * ffn) for s in shapes)
        parts.append((f"one layer ({kind.describe()})", n * layer_weights(spec, kind, experts) + act))
    return parts


def check_memory(spec: ModelSpec, shapes: list[Shape], per_kind: int, be) -> int:
    """The peak bytes measure will hold (its largest part); a clear error when over the bound."""
    name, elements = max(part_elements(spec, shapes, per_kind), key=lambda p: p[1])
    need = elements * 4  # activations are fp32 on every backend (softmax, sampler); weights at most that
    limit, why = available_bytes(be)
    if need > limit:
        raise UsageError(f"measuring {spec.id} needs about {need / 1e9:.3g} GB at once ({name}: weights, K/V "
                         f"cache and one pass's activations); the bound here is {limit / 1e9:.3g} GB ({why}). "
                         f"Use a smaller batch or shorter sequences, or a machine with more memory")
    return need


# --- timing -----------------------------------------------------------------------------------


ENOUGH_S = 0.5  # timed runs stop early once they add up to this: runs that long vary by a few percent


def time_call(fn, be, warmup: int, repeats: int, enough_s: float | None = None) -> float:
    """Median seconds of fn() over `repeats` runs after `warmup` untimed ones, the device
    synchronised before and after each timed run. fn is called exactly warmup + repeats times,
    or (with `enough_s`) fewer: the warm-up runs stop once they add up to enough_s seconds, and so
    do the timed ones, at least one of each (when asked for), so that neither count can make a
    run endless."""
    spent = 0.0
    for i in range(warmup):
        if enough_s is not None and i and spent >= enough_s:
            break
        t0 = time.perf_counter()
        fn()
        spent += time.perf_counter() - t0
    times: list[float] = []
    spent = 0.0
    for _ in range(repeats):
        if enough_s is not None and times and spent >= enough_s:
            break
        be.sync()
        t0 = time.perf_counter()
        fn()
        be.sync()
        times.append(time.perf_counter() - t0)
        spent += times[-1]
    return statistics.median(times)


class HeadPart:
    """The part of a pass outside the layers (layers.Head), run at a pass shape."""

    def __init__(self, spec: ModelSpec, be, max_tokens: int | None = None):
        self.be, self.head, self.scale = be, Head(spec, be, max_tokens), 1.0
        self.key = HeadPart.shape_key

    @staticmethod
    def shape_key(s: Shape) -> tuple:
        """What of a shape the head's time depends on: shapes with the same key are timed once."""
        return (s.B, s.q, s.logits, s.self_condition)

    def setup(self, s: Shape):
        be, V = self.be, self.head.spec.vocab_size
        previous = be.randn(s.B, s.q, V) if s.self_condition else None
        return be.tokens(s.B, s.q, self.head.embedding.shape[0]), previous

    def run(self, state, s: Shape):
        tokens, previous = state
        x = self.head.embed(tokens, previous)
        return self.head.sample(self.head.logits(x, s.logits)) if s.logits > 0 else x


class LayersPart:
    """`built` layers of one kind, run one after the other; they stand for `count` layers."""

    def __init__(self, spec: ModelSpec, kind, count: int, built: int, be, experts: int):
        self.be, self.kind = be, kind
        self.layers = [Layer(spec, kind, be, experts) for _ in range(built)]
        self.scale = count / built
        self.key = LayersPart.shape_key
        self.d = spec.d_model

    @staticmethod
    def shape_key(s: Shape) -> tuple:
        """What of a shape a layer's time depends on: shapes with the same key are timed once."""
        return (s.B, s.q, s.c, s.causal)

    def setup(self, s: Shape):
        kept = kept_keys(self.kind, s.c)
        return self.be.randn(s.B, s.q, self.d), [layer.cache(s.B, kept, s.q) for layer in self.layers]

    def run(self, state, s: Shape):
        x, caches = state
        for layer, cache in zip(self.layers, caches):
            x = layer.forward(x, cache, s.c, s.causal)
        return x


def time_pass(part, s: Shape, warmup: int, repeats: int) -> float:
    """Median seconds of one part of a pass (the head, or one kind's built layers) at shape s."""
    state = part.setup(s)
    return time_call(lambda: part.run(state, s), part.be, warmup, repeats, ENOUGH_S)


def parts(spec: ModelSpec, be, per_kind: int, max_tokens: int):
    """The head, then each kind's layers: built one part at a time (the caller drops the previous
    part before asking for the next)."""
    yield HeadPart(spec, be, max_tokens)
    experts = experts_to_build(spec, max_tokens)
    for count, kind in layer_kinds(spec):
        yield LayersPart(spec, kind, count, min(per_kind, count), be, experts)


def timings(spec: ModelSpec, shapes: list[Shape]) -> int:
    """How many times `time_shapes` times a part: the head once per distinct head key, and each
    kind of layer once per distinct layer key."""
    head = len({HeadPart.shape_key(s) for s in shapes})
    return head + len(layer_kinds(spec)) * len({LayersPart.shape_key(s) for s in shapes})


def time_shapes(spec: ModelSpec, shapes: list[Shape], be, per_kind: int, warmup: int, repeats: int,
                progress: Callable[[int, int], None] | None = None) -> dict:
    """Seconds of each pass shape: the sum of its parts, each scaled to the layers it stands for.
    A part is timed once per distinct shape it sees. `progress(done, total)`, if given, is called
    after each part is timed at a shape (total: `timings`)."""
    total = dict.fromkeys(shapes, 0.0)
    done, todo = 0, timings(spec, shapes)
    for part in parts(spec, be, per_kind, max(s.B * s.q for s in shapes)):
        seen: dict = {}
        for s in shapes:
            key = part.key(s)
            if key not in seen:
                seen[key] = time_pass(part, s, warmup, repeats)
                done += 1
                if progress:
                    progress(done, todo)
            total[s] += part.scale * seen[key]
        del part  # free this part's weights before the next is built
    return total


# --- the command ------------------------------------------------------------------------------


def measure_workload(spec: ModelSpec, gpu: str, workload: dict, stack, backend, *, warmup: int = 1,
                     repeats: int = 3, layers: int | None = None, hardware: list[str] | None = None,
                     progress: Callable[[int, int], None] | None = None) -> dict:
    """Measured seconds per pass family of one workload, and the predicted (the family's average
    pass under `stack`). `layers`: layers of each kind built and timed together (default 1).
    `progress(done, total)`: the parts of passes timed so far and in all (`time_shapes`)."""
    from ..analysis.analyze import analyze
    from ..engine.workload import Workload

    if warmup < 0 or repeats < 1:
        raise UsageError("--warmup must be >= 0 and --repeats >= 1")
    if layers is not None and not 1 <= layers <= spec.n_layers:
        raise UsageError(f"--layers must be between 1 and {spec.n_layers}")
    if spec.mla:
        raise UsageError(f"measure builds GQA/MHA attention; {spec.id} uses MLA, which is not built")
    a = analyze(spec, gpus=gpu, hardware=hardware, stack=stack, **workload)
    r = next((x for x in a["results"] if x.get("supported")), None)
    if r is None:
        raise UsageError(f"{gpu} cannot run this workload")
    w = a["workload"]
    wl = Workload(**{f: w[f] for f in Workload.model_fields if f in w})  # steps resolved: no tpf
    per_kind = layers or 1
    fams = family_shapes(spec, wl)
    predicted = {p["name"]: p for p in r["passes"]}
    if [f["name"] for f in fams] != list(predicted):  # the registry and analyze read the same schedule
        raise RuntimeError(f"families {[f['name'] for f in fams]} differ from analyze's {list(predicted)}")
    shapes = list(dict.fromkeys(s for f in fams for s in f["shapes"]))
    need = check_memory(spec, shapes, per_kind, backend)
    try:
        seconds = time_shapes(spec, shapes, backend, per_kind, warmup, repeats, progress)
    except backend.out_of_memory as exc:  # the estimate was within the bound, the allocator said no
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise UsageError(f"measuring {spec.id} ran out of memory ({shown(reason)}), although its estimate of "
                         f"{need / 1e9:.3g} GB at once was within the bound here: use a smaller batch or shorter "
                         "sequences, or a machine with more memory") from None
    families, total_meas, total_pred, count = [], 0.0, 0.0, 0.0
    for f in fams:
        p = predicted[f["name"]]
        m = sum(seconds[s] for s in f["shapes"]) / len(f["shapes"])
        first, last = f["shapes"][0], f["shapes"][-1]
        families.append(dict(name=f["name"], q=first.q, c=first.c, q_last=last.q, c_last=last.c, count=f["count"],
                             causal=first.causal, logits=first.logits, kv_write=first.kv_write,
                             self_condition=first.self_condition, measured_ms=1e3 * m, predicted_ms=1e3 * p["time_s"]))
        total_meas += f["count"] * m
        total_pred += f["count"] * p["time_s"]
        count += f["count"]
    kinds = [dict(kind=k.describe(), count=n, built=min(per_kind, n)) for n, k in layer_kinds(spec)]
    return dict(model=spec.id, gpu=r["gpu"], device=backend.device, backend=backend.name, stack=a["stack"],
                workload={k: v for k, v in workload.items() if v is not None}, warmup=warmup, repeats=repeats,
                layers_built=per_kind, layer_kinds=kinds, memory_bytes=need, families=families, nfe=count,
                measured_ms_per_forward=1e3 * total_meas / count, predicted_ms_per_forward=1e3 * total_pred / count)


def as_points(results: list[dict], model_ref: str, gpu: str) -> dict:
    """Measurement results -> a measurements file (for `dlmcost calibrate`)."""
    pts = []
    for i, res in enumerate(results):
        wl = dict(res["workload"])
        pts.append(dict(id=f"measured-{i}-b{wl.get('batch', 1)}", model=model_ref, gpu=gpu, stack=res["stack"],
                        workload=wl, measured=dict(ms_per_forward=res["measured_ms_per_forward"]),
                        source=f"dlmcost measure, {res['backend']} backend on {res['device']}, median of "
                               f"{res['repeats']} runs after {res['warmup']} warm-up",
                        assumes=f"random weights; {res['layers_built']} layer(s) of each kind built, time scaled "
                                "to the model's layers of that kind"))
    return dict(points=pts)
