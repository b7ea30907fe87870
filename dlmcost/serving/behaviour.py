"""How a deployment serves its requests, the one definition `plan` and `serve` both simulate.

A deployment's serving behaviour is its release policy (a synchronous batch that advances block
by block, or first-done-first-out release), its limit on running requests per replica, and each
request's passes per block (the engine's count spread over the blocks; a tokens-per-forward
spread draws them at random), and two stack properties of SGLang's dLLM path: a waiting
request's first block beside a full batch (`first_block_outside_limit`) and a prompt prefilled
one block per forward (`prompt_prefill: block-chunks`), and one of vLLM's and SGLang's usual path:
autoregressive prompts prefilled under a token budget a step beside the running decodes
(`prefill_chunk_tokens`); and the API servers every request passes before the engine sees it
(the stack's `front_end`, its number of servers an option); and how often SGLang's scheduler
takes in new arrivals while only decodes run (`recv_interval`, its --scheduler-recv-interval; an
option, 1 by default). The option wins, then the stack profile's field, then the default:
`policy`. `request_table` builds a deployment's per-class table (pass times, passes, blocks and
streamed pieces) from a pass table, `request_passes` each request's passes, and `run` simulates
one replica with them. `serve` (deployment/) and `plan`'s search (search.py) call only these,
so that a plan row and a `serve` of the same deployment at the same load cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..engine.schemes import get_scheme
from ..errors import DlmcostWarning, UsageError
from ..inputs.stacks import MAX_API_SERVERS, default_stack, stack_label
from .simulate import (ClassTable, FrontEnd, RequestPasses, SimResult, SimulationWork, draw_passes, in_flight_cap,
                       simulate, token_passes)
from .simulate.receiving import MAX_RECV_INTERVAL
from . import memory_binding
from .loads import in_order
from .steptime import Decoding, PassTable, passes_to_first_output

DEFAULT_REQUESTS = 2000  # simulated requests per load (plan's search and serve alike)
DEFAULT_MAX_RUNNING = 256  # when neither the option nor the stack gives one (plan's batch limit)
DEFAULT_RELEASE = "synchronous"  # when the stack does not say (SGLang's dLLM batches before PR #17770)
MAX_PREFILL_CHUNK = 10_000_000  # as a stack's prefill_chunk_tokens
WARMUP_FRACTION = 0.10  # requests of a synthetic load left out at the start (empty server) ...
COOLDOWN_FRACTION = 0.05  # ... and at the end (arrivals have stopped)


@dataclass(frozen=True)
class Policy:
    """The release policy and the limit on running requests, each with where it came from
    ("option", "stack", "default", or "token-streaming scheme")."""

    release: str
    release_source: str
    max_running: int
    max_running_source: str
    first_block_outside_limit: bool = False  # the stack's: newcomers' first blocks beside a full batch
    prompt_prefill: str = "one-pass"  # or "block-chunks": the prompt one block per forward (the stack's)
    prefill_chunk: int | None = None  # token-streaming prompts' budget a step beside the decodes (None: one pass each)
    prefill_chunk_source: str = "default"
    front_end: FrontEnd | None = None  # the API servers before the engine (None: the stack has no front-end cost)
    api_servers_source: str = "none"  # where their number came from: option, stack, or none
    recv_interval: int = 1  # the scheduler receives arrivals every this many decode iterations (1: every one)
    recv_interval_source: str = "default"
    prefill_first: bool = False  # the stack's: an iteration that prefills runs no decodes (token-streaming schemes)
    prefill_chunk_tiers: tuple = ()  # the stack's chunk by GPU, where the chunk is the stack's (`on_gpu`)
    max_running_tiers: tuple = ()  # the stack's running limit by GPU, where the limit is the stack's

    def on_gpu(self, memory_bytes: float, names: tuple[str, ...] = ()) -> "Policy":
        """The policy on a GPU with this much memory, known by these names: the stack's prefill chunk
        and running limit for it, where each is the stack's own and it sets one by GPU (SGLang's
        chunk by memory, `prefill_chunk_by_memory`; vLLM's chunk and running limit by memory and
        name, `max_running_by_gpu`)."""
        if not (self.prefill_chunk_tiers or self.max_running_tiers):
            return self
        gib = memory_bytes / 2**30
        chunk = next((t.tokens for t in self.prefill_chunk_tiers if t.holds(gib, names)), self.prefill_chunk)
        running = next((t.requests for t in self.max_running_tiers if t.holds(gib, names)), self.max_running)
        return replace(self, prefill_chunk=chunk, max_running=running, prefill_chunk_tiers=(), max_running_tiers=())

    def widest_on(self, gpus) -> "Policy":
        """The policy with the largest running limit it takes on any of these GPUs (`on_gpu`): the
        batches a pass table shared by them must reach."""
        widest = max((self.on_gpu(g.memory_bytes, g.names).max_running for g in gpus), default=self.max_running)
        return replace(self, max_running=widest)

    def in_flight_cap(self, max_running: int | None = None) -> int:
        """Requests a replica may hold at once under a running limit (this policy's by default):
        twice the limit where newcomers' first blocks run beside a full batch. Pass tables run to it."""
        return in_flight_cap(self.max_running if max_running is None else max_running,
                             self.first_block_outside_limit)


def choose(given, from_stack, default) -> tuple:
    """(value, source): the option, else the stack's field, else the default."""
    if given is not None:
        return given, "option"
    if from_stack is not None:
        return from_stack, "stack"
    return default, "default"


def stack_name(given: str | None, decoding: Decoding, eager: bool = False) -> str:
    """The stack a decoding is served on: the one given, else its kind's default (SGLang's dLLM
    path for a diffusion decoding, its usual path for an autoregressive one: stacks.DEFAULT_STACKS);
    `eager`: run without CUDA graphs, `NAME (eager)` (a name `stacks.load_stack` reads as such)."""
    name = given if given is not None else default_stack(get_scheme(decoding.scheme).autoregressive)
    return stack_label(name, eager)


def stack_field(stack, name: str):
    """A stack profile's field, None without a stack or where the profile has no such field."""
    return getattr(stack, name, None) if stack is not None else None


def streams_tokens(decoding: Decoding) -> bool:
    """The scheme streams tokens (AR, draft-verify): iteration-level batching, no blocks."""
    return get_scheme(decoding.scheme).stops == "token"


def policy(stack, decoding: Decoding, *, release: str | None = None, max_running: int | None = None,
           prefill_chunk: int | None = None, prefill_chunk_given_as: str = "option",
           api_servers: int | None = None, api_servers_given_as: str = "option", layers: int = 0,
           recv_interval: int | None = None, mla_layers: int = 0) -> Policy:
    """The deployment's release policy and running-request limit. A scheme that streams tokens
    always releases first-done (a request leaves at its last token). `prefill_chunk`: the option's
    token budget of a chunked prefill, 0 for none. `api_servers`: the option's API servers.
    `layers`: the model's decoder layers, `mla_layers` of them MLA ones (its front end's first-token
    delay is per layer).
    `recv_interval`: the option's receive interval (`recv_interval_of`)."""
    rel, rel_source = choose(release, stack_field(stack, "release"), DEFAULT_RELEASE)
    if streams_tokens(decoding):
        rel, rel_source = "first-done", "token-streaming scheme"
    cap, cap_source = running_limit(stack, max_running)
    ahead = bool(stack_field(stack, "first_block_outside_limit"))
    prefill = stack_field(stack, "prompt_prefill") or "one-pass"
    if not (decoding.block and not streams_tokens(decoding)):
        prefill = "one-pass"  # no blocks to cut the prompt into
    chunk, chunk_source = prefill_chunk_of(stack, decoding, prefill_chunk, prefill_chunk_given_as)
    front, front_source = front_end_of(stack, api_servers, api_servers_given_as, layers, mla_layers)
    tiers = tuple(stack_field(stack, "prefill_chunk_by_memory") or ()) if chunk and chunk_source == "stack" else ()
    running_tiers = tuple(stack_field(stack, "max_running_by_gpu") or ()) if cap_source == "stack" else ()
    return Policy(rel, rel_source, cap, cap_source, ahead, prefill, chunk, chunk_source, front, front_source,
                  *recv_interval_of(decoding, recv_interval, stack),
                  prefill_first=bool(stack_field(stack, "prefill_first")) and streams_tokens(decoding),
                  prefill_chunk_tiers=tiers, max_running_tiers=running_tiers)


STACK_WITHOUT_RECV_INTERVAL = "stack without one"


def recv_interval_of(decoding: Decoding, given: int | None = None, stack=None) -> tuple[int, str]:
    """(the scheduler's receive interval, its source): the option, else 1 (SGLang's default: every
    iteration). Only a scheme that streams tokens has one above 1: SGLang's receive skipper counts
    a decode (or verify) iteration 1 and any other 1,000, and its dLLM path runs every pass of a
    diffusion decoding as an extend (DLLM_EXTEND), so it receives after each one whatever R is. A
    stack whose scheduler has no such setting (`scheduler_recv_interval` false: vLLM's engine takes
    in its queue every step) receives every iteration whatever is given."""
    if not streams_tokens(decoding):
        return 1, "diffusion decoding"
    if given is not None and not stack_field(stack, "scheduler_recv_interval"):
        return 1, STACK_WITHOUT_RECV_INTERVAL
    return (given, "option") if given is not None else (1, "default")


def check_recv_interval(given: int | None, name: str = "--recv-interval") -> None:
    """The scheduler's receive interval as given: a whole number in 1..MAX_RECV_INTERVAL; None: not given."""
    if given is not None and not (isinstance(given, int) and not isinstance(given, bool)
                                  and 1 <= given <= MAX_RECV_INTERVAL):
        raise UsageError(f"{name}: decode iterations between the scheduler's receives, a whole number in "
                         f"1..{MAX_RECV_INTERVAL:,} (1: every iteration), got {given!r}")


def warn_if_no_recv_interval(given: int | None, intervals, sources=(), name: str = "--recv-interval") -> None:
    """The warning when an interval above 1 was given and no deployment served takes it (`intervals`,
    `sources`: each one's policy's `recv_interval` and `recv_interval_source`): diffusion decodings
    receive every iteration, and so does a stack whose scheduler has no such setting."""
    if given is not None and given > 1 and not any(i > 1 for i in intervals):
        import warnings

        if STACK_WITHOUT_RECV_INTERVAL in sources:
            why = ("the stack's scheduler has no receive interval (SGLang's --scheduler-recv-interval; a stack "
                   "file's `scheduler_recv_interval: true`): it takes in new requests every iteration")
        else:
            why = ("SGLang's scheduler receives after every diffusion pass (an extend, not a decode); only "
                   "autoregressive and draft-verify decodings skip receives")
        warnings.warn(f"{name} does nothing here: {why}", DlmcostWarning, stacklevel=3)


def warn_if_no_spread(given: float, spreads) -> None:
    """The warning when a --tpf-spread above 0 was given and no deployment served takes it (`spreads`:
    each one's): a decoding that streams tokens (AR, draft-verify) has no passes per block to spread."""
    if given > 0 and not any(spreads):
        import warnings

        warnings.warn("--tpf-spread does nothing here: a decoding that streams tokens (AR, draft-verify) runs "
                      "its answer's passes with no blocks to spread them over", DlmcostWarning, stacklevel=3)


def front_end_of(stack, given: int | None = None, given_as: str = "option",
                 layers: int = 0, mla_layers: int = 0) -> tuple[FrontEnd | None, str]:
    """(the API servers every request passes before the engine sees it, where their number came
    from): the stack's `front_end` (its CPU time per request, and its first-token delay per layer
    over the model's `layers`, `mla_layers` of them MLA ones) with the servers given (`given`, from `given_as`: the option or a
    plan scenario's field), else the stack's; (None, "none") for a stack without a front-end cost,
    whatever is given."""
    cost = stack_field(stack, "front_end")
    if cost is None:
        return None, "none"
    servers, source = choose(given, cost.api_servers, None)
    delay_s = first_token_delay_s(cost, layers, mla_layers)
    return FrontEnd(int(servers), cost.us_per_request * 1e-6, delay_s), given_as if source == "option" else source


def first_token_delay_s(cost, layers: int, mla_layers: int = 0) -> float:
    """Each request's first-token delay under a stack's front end (`cost`) for a model of `layers`
    decoder layers, `mla_layers` of them MLA ones: d x (L - L_mla) + d_mla x L_mla, d_mla being d
    where the stack sets none."""
    per_mla = cost.first_token_us_per_layer if cost.first_token_us_per_mla_layer is None \
        else cost.first_token_us_per_mla_layer
    return ((layers - mla_layers) * cost.first_token_us_per_layer + mla_layers * per_mla) * 1e-6


def check_api_servers(given: int | None, name: str = "--api-servers") -> None:
    """API server processes as given (serve's option, plan's option or scenario field `name`): a
    whole number in 1..MAX_API_SERVERS; None: not given (the stack's)."""
    if given is not None and not (isinstance(given, int) and not isinstance(given, bool)
                                  and 1 <= given <= MAX_API_SERVERS):
        raise UsageError(f"{name}: API server processes per replica, a whole number in 1..{MAX_API_SERVERS:,}, "
                         f"got {given}")


def warn_if_no_front_end(given: int | None, times_per_request, name: str = "--api-servers") -> None:
    """The warning when API servers were given (`name`: where) and no stack served has a front-end
    cost (`times_per_request`: each served stack's front end's time a request, None without a front
    end; one whose servers take no time, only a first-token delay, is none): the number changed nothing."""
    if given is not None and not any(times_per_request):
        import warnings

        warnings.warn(f"{name} does nothing here: no stack served has a front-end cost (a `front_end:` with a "
                      "CPU time per request; `dlmcost stacks` lists them)", DlmcostWarning, stacklevel=3)


def prefill_chunk_of(stack, decoding: Decoding, given: int | None = None,
                     given_as: str = "option") -> tuple[int | None, str]:
    """(a chunked prefill's token budget per step, its source): the option (0: none), else the
    stack's `prefill_chunk_tokens`, else none. Only a scheme that streams tokens has one: the
    engines with a prefill budget per step (vLLM V1, SGLang) apply it to autoregressive prompts, while a
    block-diffusion prompt is cut into blocks by its own path (`prompt_prefill: block-chunks`) or
    prefilled whole (docs/methodology.md)."""
    if not streams_tokens(decoding):
        return None, "diffusion decoding"
    chunk, source = choose(given, stack_field(stack, "prefill_chunk_tokens"), None)
    source = given_as if source == "option" else source  # the option, or a plan scenario's field
    return (int(chunk) if chunk else None), source


def check_prefill_chunk(given: int | None, name: str = "--prefill-chunk") -> None:
    """A chunked prefill's token budget as given (serve's option, plan's option or scenario field
    `name`): a whole number in 0..MAX_PREFILL_CHUNK, 0 for none (each admitted prompt in one pass);
    None: not given."""
    if given is not None and not (isinstance(given, int) and not isinstance(given, bool)
                                  and 0 <= given <= MAX_PREFILL_CHUNK):
        raise UsageError(f"{name}: tokens per step in 0..{MAX_PREFILL_CHUNK:,} (0: each admitted prompt in one pass), "
                         f"got {given}")


def warn_if_no_chunks(given: int | None, chunks, name: str = "--prefill-chunk") -> None:
    """The warning when a chunk was given (not 0; `name`: where) and no decoding served takes one
    (`chunks`: each one's policy's `prefill_chunk`): only a token-streaming prompt is chunked, so it
    changed nothing."""
    if given and not any(chunks):
        import warnings

        warnings.warn(f"{name} does nothing here: only autoregressive prompts are prefilled under a token budget "
                      "beside the decodes (a diffusion decoding's prompt runs as its stack's prompt_prefill says)",
                      DlmcostWarning, stacklevel=3)


def running_limit(stack, given: int | None = None) -> tuple[int, str]:
    """(requests per replica at once, its source): the option, the stack's `max_running_requests`,
    else DEFAULT_MAX_RUNNING."""
    cap, source = choose(given, stack_field(stack, "max_running_requests"), DEFAULT_MAX_RUNNING)
    return int(cap), source


def canvases(decoding: Decoding, answers: list[int]) -> list[int]:
    """The canvas each answer length runs: a whole number of blocks for a block-streaming scheme
    (the padding costs time but yields no tokens), the answer itself for a token-streaming one."""
    if decoding.block and not streams_tokens(decoding):
        return [int(math.ceil(a / decoding.block) * decoding.block) for a in answers]
    return [int(a) for a in answers]


@dataclass(frozen=True)
class RequestTable:
    """A deployment's request classes (prompt class x answer class, in that order): the
    simulation's table, the most requests it runs at once (`batch_limit`), the most of the
    longest that memory holds at their final lengths, and each class's most passes per block (a
    pass commits a token at least)."""

    table: ClassTable
    batch_limit: int
    max_per_block: list[int]
    block_streaming: bool
    answers: list[int] | None = None  # each class's answer tokens (None: a request runs its class's passes)
    block: int | None = None  # the tokens of a block a block-streaming canvas is cut into (None: one canvas)
    memory_fits: int = 0  # the longest requests memory holds at their final lengths


def batch_limit(max_running: int, memory_fits: float, decoding: Decoding, release: str) -> int:
    """The most requests a replica runs at once: the running limit, and no more than memory holds
    of the longest at their final lengths where each is held at its final length from admission (a
    canvas, or a synchronous release's rounds). K/V allocated as tokens come under a first-done
    release runs the whole limit and preempts where memory runs out (simulate/first_done.py)."""
    on_demand = memory_binding.grows_as_it_runs(decoding.scheme) and release != "synchronous"
    return int(max_running if on_demand else min(max_running, memory_fits))


def request_table(pt: PassTable, gi: int, pi: int, ti: int, decoding: Decoding, prompts: list[int],
                  answers: list[int], max_running: int, pol: Policy) -> RequestTable | None:
    """The table of pass table entry [gi, pi, ti] for every (prompt, answer) class under a running
    limit and the policy's stack properties; None if the deployment cannot run it or it does not
    fit. The pass table's answer axis holds the distinct canvases (`canvases`) in increasing order,
    its batch axis runs to `pol.in_flight_cap(max_running)`. Each class's memory share is 1 / the
    most of its requests that fit (`PassTable.memory_fits`: under a prefill token budget, one
    workspace of the budget's tokens beside each request's K/V)."""
    nfe, mem = pt.nfe[gi, pi, ti], pt.memory_fits(gi, pi, ti, pol.prefill_chunk)
    if np.isnan(nfe).any() or (mem < 1).any():
        return None
    token_streaming = streams_tokens(decoding)
    canvas = canvases(decoding, answers)
    distinct = sorted(set(canvas))
    col = [distinct.index(c) for c in canvas]
    b = np.arange(pol.in_flight_cap(max_running) + 1)
    grid = pt.batches
    rows = dict(nfe=[], first=[], share=[], first_s=[], pass_s=[], lead=[], blocks=[], units=[], per_block=[],
                step=[])
    for lp in range(len(prompts)):
        for answer, cv, k in zip(answers, canvas, col):
            n = float(nfe[lp, k])
            prompt_passes = float(pt.prompt_passes[gi, pi, ti, lp, k])
            blocks = 1 if token_streaming else (cv // decoding.block if decoding.block else 1)
            lead = int(round(prompt_passes))
            rows["nfe"].append(int(round(n)))
            rows["first"].append(passes_to_first_output(decoding, n, prompt_passes, cv))
            rows["share"].append(1.0 / float(mem[lp, k]))
            # the prefill forward's own dispatch, paid once an iteration: out of the per-request first pass
            step = np.interp(b, grid, pt.first_dispatch_s[gi, pi, ti, lp, k])
            rows["step"].append(step.tolist())
            rows["first_s"].append((np.interp(b, grid, pt.first_s[gi, pi, ti, lp, k]) - step).tolist())
            rows["pass_s"].append(np.interp(b, grid, pt.pass_s[gi, pi, ti, lp, k]).tolist())
            rows["lead"].append(lead)
            rows["blocks"].append(blocks)
            rows["units"].append(int(answer) if token_streaming else blocks)
            block_len = decoding.block or cv
            rows["per_block"].append(max(block_len, int(math.ceil((int(round(n)) - lead) / blocks))))
    table = ClassTable(rows["nfe"], rows["first"], rows["share"], rows["pass_s"], rows["first_s"],
                       lead=rows["lead"], blocks=rows["blocks"], units=rows["units"],
                       prefill_step_s=rows["step"] if any(any(r) for r in rows["step"]) else None)
    if pol.prompt_prefill == "block-chunks":  # per_block above is unchanged: NFE and lead move together
        table = prompt_in_block_chunks(table, [p for p in prompts for _ in answers], decoding.block)
    if pol.prefill_chunk:  # a token-streaming scheme: no per_block
        table = prompt_in_token_chunks(table, [p for p in prompts for _ in answers], pol.prefill_chunk)
    if memory_binding.grows_as_it_runs(decoding.scheme):  # K/V allocated as tokens come: the prompt's from admission
        table = replace(table, held_from_admission=[p / (p + cv) for p in prompts for cv in canvas])
    if pol.prefill_first and token_streaming and all(table.lead or [0]):
        # the engine's prefills before its decodes, where every request has a prompt to prefill (a
        # request without one would start decoding in the next decode batch, a time no admission fixes)
        table = replace(table, prefill_first=True)
    fits = float(mem.min())
    block = decoding.block if decoding.block and not token_streaming else None
    return RequestTable(table, batch_limit(max_running, fits, decoding, pol.release), rows["per_block"],
                        not token_streaming, [int(a) for _ in prompts for a in answers], block,
                        int(min(fits, 2**31 - 1)))


def prompt_in_block_chunks(table: ClassTable, prompts: list[int], block: int) -> ClassTable:
    """The prompt prefilled one block per forward (the stack's `prompt_prefill: block-chunks`):
    each class's passes over the prompt alone become ceil(P / block) passes of at most a block's
    tokens, each costed as one of the class's block steps (the same q = block rows over the
    cache), in place of its prefill pass; its NFE and its passes to the first block change by
    as many."""
    old = table.lead or [0] * len(prompts)
    # only a class that prefills its prompt on its own (not a full-canvas scheme) changes
    chunks = [math.ceil(p / block) if ld > 0 else 0 for p, ld in zip(prompts, old)]
    nfe = [n - ld + k for n, ld, k in zip(table.nfe, old, chunks)]
    first = [f - ld + k for f, ld, k in zip(table.first_passes, old, chunks)]
    first_s = [p if k else f for p, f, k in zip(table.pass_s, table.first_pass_s, chunks)]
    return ClassTable(nfe, first, table.mem_share, table.pass_s, first_s, lead=chunks, blocks=table.blocks,
                      units=table.units, prefill_step_s=table.prefill_step_s)


def prompt_in_token_chunks(table: ClassTable, prompts: list[int], chunk: int) -> ClassTable:
    """The prompts prefilled under a token budget of `chunk` per step, shared with the running
    decodes (the stack's `prefill_chunk_tokens`, vLLM's max_num_batched_tokens): the classes whose
    prompt P is prefilled in one pass of its own (lead 1) become one stream of prompt tokens the
    simulation feeds `chunk` a step (`prefill_budget`, `prompt_tokens`: several short prompts to a
    step, a long one cut into pieces). Alone, such a prompt longer than a chunk takes
    k = ceil(P / chunk) passes in its place, its first token after the k-th; each of them costs a
    later pass's share plus 1/k of what the prefill pass adds to its step (first_pass_s - pass_s),
    so the k steps together carry the whole prefill's work (`lift_passes`: k, what a lone request
    runs; the simulation cuts each prompt where the stream puts it)."""
    old = table.lead or [0] * len(prompts)
    tokens = [int(p) if ld == 1 else 0 for p, ld in zip(prompts, old)]
    if not any(tokens):
        return table
    chunks = [math.ceil(t / chunk) if t > chunk else 1 for t in tokens]
    if all(k == 1 for k in chunks):
        return replace(table, prompt_tokens=tokens, prefill_budget=chunk)
    nfe = [n - 1 + k for n, k in zip(table.nfe, chunks)]
    first = [f - 1 + k for f, k in zip(table.first_passes, chunks)]
    first_s = [[p + (f - p) / k for f, p in zip(fr, pr)] if k > 1 else fr
               for fr, pr, k in zip(table.first_pass_s, table.pass_s, chunks)]
    lead = [k if k > 1 else ld for ld, k in zip(old, chunks)]
    return ClassTable(nfe, first, table.mem_share, table.pass_s, first_s, lead=lead, blocks=table.blocks,
                      units=table.units, lift_passes=chunks, prompt_tokens=tokens, prefill_budget=chunk,
                      prefill_step_s=table.prefill_step_s)


def request_passes(rt: RequestTable, request_class: np.ndarray, spread: float = 0.0,
                   rng: np.random.Generator | None = None, answers: np.ndarray | None = None) -> RequestPasses | None:
    """Each request's passes per block (spread: their coefficient of variation; 0: the engine's
    passes spread evenly over the blocks). `answers`: each request's own answer tokens, so that
    requests of one class do not all finish after the same passes: a block-streaming request runs
    its own answer's blocks (ceil(a / block)), each with its class's mean passes; a token-streaming
    one its class's passes over the prompt and its later passes times a / its class's answer
    (`token_passes`). None for a token-streaming scheme whose requests run their class's passes."""
    own = answers is not None and rt.answers is not None
    if not rt.block_streaming:
        if not own:
            return None
        class_answer = np.asarray(rt.answers, float)[request_class]
        answers = np.asarray(answers, float)
        if np.array_equal(answers, class_answer):
            return None
        return token_passes(rt.table, request_class, answers / class_answer)
    n_blocks = None
    if own and rt.block:  # a canvas cut into blocks: each request its own answer's (a full canvas: its class's)
        n_blocks = np.ceil(np.asarray(answers, float) / rt.block).astype(np.int64)
    return draw_passes(rt.table, request_class, spread, rng if rng is not None else np.random.default_rng(0),
                       rt.max_per_block, n_blocks)


def run(table: ClassTable, request_class: np.ndarray, max_running: int, release: str,
        passes: RequestPasses | None, first_block_outside_limit: bool = False,
        uncached: np.ndarray | None = None, front_end: FrontEnd | None = None, recv_interval: int = 1,
        work: SimulationWork | None = None, **load) -> SimResult:
    """One replica serving these requests (`load`: arrivals_s=..., or users=... and think_s=...)
    with a `request_table`'s table and `request_passes`; `uncached`: `uncached_shares`;
    `front_end`: the policy's (its API servers, before the engine); `recv_interval`: the policy's;
    `work`: the command's count of preemptions (simulate/work.py; None: no limit)."""
    return simulate(table, request_class, max_running, passes=passes, release=release,
                    first_block_outside_limit=first_block_outside_limit, uncached=uncached, front_end=front_end,
                    recv_interval=recv_interval, work=work, **load)


MAX_CACHED_SHARES = 2_000_000  # shares (one a request sent): a --cached-prompt file's, or a trace's rows


def check_cached_prompt(shares, name: str = "--cached-prompt") -> None:
    """Shares of a prompt found in the prefix cache: finite, 0..1, at least one, at most
    MAX_CACHED_SHARES; or 'trace' (the replayed trace's own)."""
    if shares == "trace":
        return
    if isinstance(shares, str) or not 1 <= len(shares) <= MAX_CACHED_SHARES:
        raise UsageError(f"{name}: between 1 and {MAX_CACHED_SHARES:,} shares, got {len(shares):,}")
    bad = next((v for v in shares if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= 1)), None)
    if bad is not None:
        raise UsageError(f"{name}: a share of the prompt in 0..1, got {bad!r}")


def cache_applies(prompt_prefill: str, release: str) -> bool:
    """Whether a prefix cache shortens this decoding's prefill (`check_cache_applies`)."""
    return prompt_prefill not in ("none", "block-chunks") and release != "synchronous"


def check_cache_applies(prompt_prefill: str, release: str, stack: str) -> None:
    """A cached prefix shortens a prompt's prefill pass or its tokens under a budget; a decoding with
    no pass over the prompt alone (`prompt_prefill` "none": the prompt in every pass), a stack that
    prefills the prompt a block per forward, or one that releases a batch together, is not modelled
    with one."""
    if prompt_prefill == "none":
        raise UsageError("--cached-prompt: this decoding runs no pass over the prompt alone (the prompt is in every "
                         "pass), so a prefix cache does not shorten a prefill")
    if prompt_prefill == "block-chunks" or release == "synchronous":
        raise UsageError(f"--cached-prompt: a prefix cache is modelled for stacks that prefill a prompt in one pass "
                         f"or under a token budget, with first-done release; the {stack} stack prefills "
                         f"{'a block per forward' if prompt_prefill == 'block-chunks' else 'and releases in rounds'}")


def uncached_shares(cached, n: int) -> np.ndarray | None:
    """Each of n requests' share of its prompt outside the prefix cache: 1 - the cached share given
    for it (`Setup.cached_prompt`, cycled in the order requests are sent); None where nothing is cached."""
    if not cached or isinstance(cached, str) or not any(cached):
        return None
    shares = np.asarray(cached, float)
    return 1.0 - in_order(shares, n)


def measured_window(n: int) -> slice:
    """The requests of a synthetic load its statistics are taken over (in arrival order): the
    first WARMUP_FRACTION and the last COOLDOWN_FRACTION left out."""
    lo = int(n * WARMUP_FRACTION)
    return slice(lo, max(int(n * (1 - COOLDOWN_FRACTION)), lo + 1))


def completion_rate(done_s: np.ndarray, window: slice, end_s: float) -> float:
    """Completions per second: those in (t0, t1] over t1 - t0, where t0 and t1 are the first and
    last of the window's share of the completion times in order. Exact for requests finishing one
    by one at a steady rate or in waves, as a synchronous batch's do. When the window's all finish
    together: every completion over the run's length `end_s`. When they span less time than the
    earliest completion of the run (no request completes before its own whole life has passed, so
    that is at least one request's life) they are one wave of the batch, whose spread says nothing
    of the rate (a few hundred requests a replica at overload: the first wave's finishing times
    spread like their arrivals): every completion up to t1 over t1."""
    done = np.sort(done_s)
    inside = done[window]
    t0, t1 = float(inside[0]), float(inside[-1])
    if not t1 > t0:
        return len(done) / end_s if end_s > 0 else 0.0
    if t1 - t0 < float(done[0]):
        return float(np.count_nonzero(done <= t1) / t1)
    return float(np.count_nonzero((done > t0) & (done <= t1)) / (t1 - t0))


def batch_grid(cap: int) -> list[int]:
    """Batch sizes the engine is evaluated at (every size to 16, then ~24 geometric points);
    the pass time between them is interpolated linearly."""
    small = list(range(1, min(cap, 16) + 1))
    if cap <= 16:
        return small
    return sorted(set(small) | {int(round(x)) for x in np.geomspace(16, cap, 24)})
