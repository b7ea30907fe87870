"""What a decoding scheme is to the rest of dlmcost: a function from knobs to pass families.

A pass *family* is `n` distinct pass shapes j = 0..n-1, each run `r` times (r may be fractional:
an average, e.g. S/nb steps per block), with every field affine in j:

    q(j) = q0 + dq*j          query tokens per sequence
    c(j) = c0 + dc*j          cached tokens whose K/V are read
    kv_write(j), logits(j)    likewise

All fields are numpy arrays over the configurations of one scheme, so one call builds the
schedule of a whole sweep. A scheme is registered with `@scheme(...)`, which records what the
rest of the program needs: the knobs it reads (sweep evaluates it once for the others), how many
tokens per sequence it keeps in the K/V cache (memory), its validity rules, and whether it stops
after the block that holds the end-of-sequence token. The peak pass shape for memory is derived
from the families themselves (`peak_shape`), so it cannot disagree with the schedule.

A scheme lists its families so that the first one a configuration uses holds that configuration's
first pass (j = 0): a prompt prefill, or the pass that opens the first block. Serving simulations
time that pass on its own (`engine.first_pass`); `prompt_passes` counts the passes that see only
the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable

import numpy as np

from ..columns import take

# Knobs a scheme may read, beyond the prompt and generation lengths every scheme uses.
SCHEME_KNOBS = ("steps", "block", "store_pass", "active_blocks", "cache_delay", "refresh_every", "window")


# eq=False on classes of arrays: == on arrays is elementwise, so a generated __eq__ (and
# __hash__) could only raise; identity is the only equality they have.
@dataclass(frozen=True, eq=False)
class Knobs:
    """The settings of N configurations of one scheme (arrays of length N)."""

    prompt: np.ndarray  # Lp
    gen: np.ndarray  # Lg
    steps: np.ndarray  # S: denoising passes (draft-verify: iterations)
    block: np.ndarray  # b (draft-verify: draft length k)
    store_pass: np.ndarray  # bool
    logits_committed: np.ndarray  # bool: logits only where tokens can commit
    active_blocks: np.ndarray  # multi-block: blocks in flight A
    cache_delay: np.ndarray  # multi-block: passes before a finished block's K/V is cached (d)
    refresh_every: np.ndarray  # passes between full refreshes R (0: never)
    window: np.ndarray  # windowed-refresh: tokens recomputed either side of the block (w)
    drafter: np.ndarray  # bool, draft-verify: a separate drafter model (else self-speculative)

    @property
    def n_blocks(self) -> np.ndarray:
        return self.gen / self.block

    @property
    def steps_per_block(self) -> np.ndarray:
        return self.steps / self.n_blocks

    @property
    def canvas(self) -> np.ndarray:
        """Lp + Lg: the sequence a full pass processes."""
        return self.prompt + self.gen

    def take(self, rows) -> "Knobs":
        return Knobs(**{f.name: take(getattr(self, f.name), rows) for f in fields(self)})


@dataclass(frozen=True, eq=False)
class PassFamily:
    name: str
    n: np.ndarray  # distinct shapes (0: family unused in that configuration)
    r: np.ndarray  # repeats of each shape
    q0: np.ndarray
    dq: np.ndarray
    c0: np.ndarray
    dc: np.ndarray
    kvw0: np.ndarray
    dkvw: np.ndarray
    logits0: np.ndarray
    dlogits: np.ndarray
    causal: np.ndarray  # bool: query i sees c + i keys (else all c + q)
    model: str = "main"  # which model runs it: "main", or "drafter" (draft-verify)
    self_condition: bool = False  # every pass feeds softmax(logits) @ embedding back (DiffusionGemma)

    def at(self, j) -> dict[str, np.ndarray]:
        """The shape of pass j of this family."""
        return dict(q=self.q0 + self.dq * j, c=self.c0 + self.dc * j, kv_write=self.kvw0 + self.dkvw * j,
                    logits=self.logits0 + self.dlogits * j, causal=self.causal, self_condition=self.self_condition)

    def take(self, rows) -> "PassFamily":
        return replace(self, **{f.name: take(getattr(self, f.name), rows) for f in fields(self)
                                if f.name not in ("name", "model", "self_condition")})

    @property
    def count(self) -> np.ndarray:
        """Forward passes this family contributes to NFE."""
        return self.n * self.r

    @property
    def constant_q(self) -> np.ndarray:
        return self.dq == 0

    @property
    def constant_keys(self) -> np.ndarray:
        """Bidirectional passes whose q + c is fixed: q*(c+q) keys is then affine in j too."""
        return (self.dq + self.dc == 0) & ~self.causal


def family(name: str, k: Knobs, *, n=1.0, r=1.0, q, dq=0.0, c=0.0, dc=0.0, kv_write=0.0, dkv_write=0.0,
           logits=None, dlogits=None, causal=False, model: str = "main", self_condition: bool = False) -> PassFamily:
    """A PassFamily with scalars broadcast to the configurations of `k`; logits default to every
    query position (what the reference implementations compute). A family that repeats zero
    times has n = 0."""
    shape = k.gen.shape
    arr = lambda x: np.broadcast_to(np.asarray(x, dtype=float), shape).astype(float)  # noqa: E731
    if logits is None:
        logits, dlogits = q, dq
    r, n = arr(r), arr(n)
    return PassFamily(
        name, np.where(r > 0, n, 0.0), r, arr(q), arr(dq), arr(c), arr(dc), arr(kv_write), arr(dkv_write),
        arr(logits), arr(0.0 if dlogits is None else dlogits),
        np.broadcast_to(np.asarray(causal, dtype=bool), shape).copy(), model, self_condition)


Check = tuple[np.ndarray, str]  # (ok mask, message with {placeholders} filled from the knobs)


@dataclass(frozen=True)
class Scheme:
    name: str
    passes: Callable[[Knobs], list[PassFamily]]
    summary: str  # one line for --help and the docs
    knobs: tuple[str, ...]  # the SCHEME_KNOBS its cost depends on
    cached_tokens: Callable[[Knobs], np.ndarray]  # K/V resident per sequence (memory)
    checks: Callable[[Knobs], list[Check]] = lambda k: []
    logit_knobs: tuple[str, ...] = ()  # knobs that matter only when logits are limited to committed tokens
    # What it runs when the answer ends before the generation length (end-of-sequence): "token"
    # stops right after it, "block" after the block that holds it, "never" runs the whole canvas.
    stops: str = "block"
    default_block: int | None = None  # block length when neither the user nor the model's sampler sets one
    # What the rest of the program asks of a scheme instead of comparing its name:
    autoregressive: bool = False  # one causal token per pass (the AR baseline; S = Lg, no block)
    needs_block: bool = False  # a block length must be given (or come from the model's sampler)
    takes_drafter: bool = False  # may run a separate drafter model (--drafter)
    block_divides_gen: bool = True  # its default block applies only to generations it divides

    def uses(self, knob: str, logits_committed: bool = False) -> bool:
        return knob in self.knobs or (logits_committed and knob in self.logit_knobs)

    def ignored(self, given, logits_committed: bool = False) -> list[str]:
        """The knobs among `given` (names) whose cost this scheme does not read; tokens per forward
        (`tpf`) sets the steps, so it goes where the steps go."""
        return [k for k in given if k in (*SCHEME_KNOBS, "tpf")
                and not self.uses("steps" if k == "tpf" else k, logits_committed)]

    @property
    def stops_at_eos(self) -> bool:
        return self.stops != "never"

    def tokens_run(self, answer, gen, block):
        """Generated positions the scheme computes for an answer of `answer` tokens (arrays)."""
        if self.stops == "token":
            return np.asarray(answer, float)
        if self.stops == "block":
            return np.minimum(np.ceil(np.asarray(answer, float) / block) * block, gen)
        return np.asarray(gen, float)


REGISTRY: dict[str, Scheme] = {}


def scheme(name: str, *, summary: str, knobs: tuple[str, ...], cached_tokens: Callable[[Knobs], np.ndarray],
           checks: Callable[[Knobs], list[Check]] | None = None, **flags) -> Callable:
    """Register a pass-building function as decoding scheme `name`."""
    unknown = set(knobs) - set(SCHEME_KNOBS)
    assert not unknown, f"scheme {name}: unknown knobs {unknown}"

    def register(fn: Callable[[Knobs], list[PassFamily]]):
        REGISTRY[name] = Scheme(name, fn, summary, knobs, cached_tokens, checks or (lambda k: []), **flags)
        return fn

    return register


# --- rules and shapes several schemes share -----------------------------------------------------


def block_checks(k: Knobs) -> list[Check]:
    """Blocks tile the generation and every block gets at least one step."""
    return [
        (k.block <= k.gen, "block length {block:g} is longer than the generation ({gen:g} tokens)"),
        (np.mod(k.gen, k.block) == 0, "block length {block:g} does not divide the generation length {gen:g}"),
        (k.steps >= k.n_blocks - 1e-9, "{steps:g} steps is fewer than the {n_blocks:g} blocks (at least one step per block)"),
    ]


def whole_sequence(k: Knobs) -> np.ndarray:
    """Schemes with a K/V cache keep every prompt and generated token resident by the end."""
    return k.canvas


def peak_shape(families: list[PassFamily]) -> tuple[np.ndarray, np.ndarray]:
    """Largest q and largest number of logit positions of any pass, per configuration (memory).
    Affine fields reach their maximum at j = 0 or j = n-1."""
    q_max = logits_max = 0.0
    for f in families:
        last = np.maximum(f.n - 1, 0.0)
        used = f.n > 0
        q_max = np.maximum(q_max, np.where(used, np.maximum(f.q0, f.q0 + f.dq * last), 0.0))
        logits_max = np.maximum(logits_max, np.where(used, np.maximum(f.logits0, f.logits0 + f.dlogits * last), 0.0))
    return q_max, logits_max


def later_peak_q(families: list[PassFamily], k: Knobs) -> np.ndarray:
    """Largest q of any pass that is not a prompt-only prefill (`prompt_passes`), per
    configuration: what each running sequence adds to a step once its prompt is in (AR: 1; a
    draft-verify's verify pass: its drafts + 1). Memory's budgeted serving share reads it."""
    q = np.zeros(k.gen.shape)
    for f in families:
        only_prompt = (f.q0 == k.prompt) & (f.dq == 0) & (f.c0 == 0) & (f.dc == 0) & (k.prompt > 0)
        peak = np.maximum(f.q0, f.q0 + f.dq * np.maximum(f.n - 1, 0.0))
        q = np.maximum(q, np.where((f.n > 0) & ~only_prompt, peak, 0.0))
    return q


def prompt_passes(families: list[PassFamily], k: Knobs) -> np.ndarray:
    """Passes per configuration that see only the prompt (q = Lp, no cache read): prefills of the
    prompt's K/V, run before any pass over the answer."""
    out = np.zeros(k.gen.shape)
    for f in families:
        only_prompt = (f.q0 == k.prompt) & (f.dq == 0) & (f.c0 == 0) & (f.dc == 0) & (k.prompt > 0)
        out += np.where(only_prompt, f.count, 0.0)
    return out
