"""The simulation's inputs and output: each request class's pass times and counts (`ClassTable`),
each request's own passes (`RequestPasses`: `draw_passes` per block, `token_passes` for a
token-streaming answer) and what a run returns (`SimResult`); the policy-free arithmetic both
release loops share."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

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
    # [c][b]: what an iteration that prefills a class-c prompt adds once, however many prompts it
    # prefills (a prefill forward's own dispatch, where the engine's graphs cover decode only; the
    # largest of its classes'); first_pass_s then leaves it out (None: nothing)
    prefill_step_s: list[list[float]] | None = None
    # each class's K/V share held from admission, its prompt over its final length P_c / L_c: a
    # decoding whose K/V grows as it runs, allocated as tokens come (None: the whole final K/V
    # reserved from admission; a whole canvas). The first-done loop then preempts where it runs out.
    held_from_admission: list[float] | None = None
    # prefills run before the decodes (SGLang's scheduler, `prefill_first`): an iteration that
    # prefills any prompt, or a piece of one, holds only the requests it prefills, and the others'
    # decodes wait for the next iteration without one (the package docstring; token-streaming
    # classes whose first output is their prefill's)
    prefill_first: bool = False

    def __post_init__(self):
        if self.first_pass_s is None:
            object.__setattr__(self, "first_pass_s", self.pass_s)

    @property
    def prompt_steps(self) -> list[int]:
        """Each class's iterations of prefill when its request runs alone (`lift_passes`, else 1)."""
        return self.lift_passes or [1] * len(self.nfe)

    def prefill_step(self, classes, b: int) -> float:
        """What an iteration of b requests that prefills prompts of these classes adds once."""
        if self.prefill_step_s is None:
            return 0.0
        if self.common_prefill_step is not None:  # (the usual case: a lookup, not a max per iteration)
            return self.common_prefill_step[b] if classes else 0.0
        return max((self.prefill_step_s[c][b] for c in classes), default=0.0)

    @cached_property
    def common_prefill_step(self) -> list[float] | None:
        """prefill_step_s's row when every class has the same one (a forward's dispatch is the
        model's, whatever the prompt), else None."""
        rows = self.prefill_step_s
        if not rows or any(row != rows[0] for row in rows[1:]):
            return None
        return rows[0]

    @cached_property
    def lift(self) -> list[list[float]]:
        """What a request in its first pass adds to an iteration, times b: first_pass_s - pass_s."""
        return [[f - p for f, p in zip(fc, pc)] for fc, pc in zip(self.first_pass_s, self.pass_s)]


def scaled(table: ClassTable, factor: float) -> ClassTable:
    """The same table with every pass `factor` times as long (a deployment whose step times are off
    by that factor, as the validation's error bands say they may be)."""
    def times(rows):
        return None if rows is None else [[t * factor for t in row] for row in rows]
    return replace(table, pass_s=times(table.pass_s), first_pass_s=times(table.first_pass_s),
                   prefill_step_s=times(table.prefill_step_s))


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


MAX_BLOCKS = 20_000_000  # blocks over all simulated requests (the passes are drawn per block)


@dataclass(frozen=True, eq=False)
class RequestPasses:
    """Each request's passes: `lead` over the prompt alone (the first pass among them, if any),
    then one count per block, request after request in `flat` (request i's n_blocks[i] counts
    start at offset[i]). NFE_i = lead_i + its counts; the first block is final after lead_i +
    its first count, unless `first_output` gives each request's passes to its first output (a
    token-streaming request: one count, its passes after the lead, and its first token after
    its class's first passes)."""

    lead: np.ndarray
    flat: np.ndarray
    n_blocks: np.ndarray
    first_output: np.ndarray | None = None

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
        if self.first_output is not None:
            return _read_only(np.asarray(self.first_output, np.int64))
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
        first = None if self.first_output is None else self.first_output[index]
        return RequestPasses(self.lead[index], flat, self.n_blocks[index], first)


def class_passes(table: ClassTable, request_class: np.ndarray) -> RequestPasses:
    """Every request its class's passes, spread as evenly over its blocks as whole passes allow
    (block k gets round(s(k+1)) - round(sk) of the mean s = (NFE - lead) / blocks)."""
    return draw_passes(table, request_class, 0.0, np.random.default_rng(0))


def draw_passes(table: ClassTable, request_class: np.ndarray, spread: float, rng: np.random.Generator,
                max_per_block: list[int] | None = None, n_blocks: np.ndarray | None = None) -> RequestPasses:
    """Passes per block per request: gamma distributed with the class's mean s = (NFE - lead) /
    blocks and coefficient of variation `spread` (independent per request and block), rounded to
    a whole number at random so that the mean is kept (floor(x) + 1 with probability x - floor(x)),
    at least 1 and at most `max_per_block` (a block's length: one token per pass at least).
    spread 0: every request the class's passes (see class_passes). `n_blocks`: each request's own
    blocks (its answer's; None: its class's), each with its class's mean passes."""
    from ...errors import UsageError

    cls = np.asarray(request_class, int)
    n_cls = len(table.nfe)
    lead_c = np.asarray(table.lead if table.lead is not None else [0] * n_cls, np.int64)
    blocks_c = np.asarray(table.blocks if table.blocks is not None else [1] * n_cls, np.int64)
    mean_c = (np.asarray(table.nfe, float) - lead_c) / blocks_c
    n_blocks = blocks_c[cls] if n_blocks is None else np.asarray(n_blocks, np.int64)
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


def token_passes(table: ClassTable, request_class: np.ndarray, scale: np.ndarray) -> RequestPasses:
    """A token-streaming request's passes when its answer is `scale` times its class's (its own
    length over the class's): its class's passes over the prompt (lead), then the class's later
    passes times the scale, rounded (an AR answer of a tokens: a decode passes), at least as many
    as its first token needs; its first token after its class's first passes."""
    cls = np.asarray(request_class, int)
    n_cls = len(table.nfe)
    lead = np.asarray(table.lead if table.lead is not None else [0] * n_cls, np.int64)[cls]
    later = (np.asarray(table.nfe, np.int64)[cls] - lead) * np.asarray(scale, float)
    first = np.asarray(table.first_passes, np.int64)[cls]
    per = np.maximum(np.round(later).astype(np.int64), np.maximum(first - lead, 0))
    return RequestPasses(lead, per, np.ones(len(cls), np.int64), first)


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
    # times each request was preempted where the K/V grown on demand ran out (recomputed on
    # readmission; None: none was)
    preempted: np.ndarray | None = None
    requeued_s: np.ndarray | None = None  # ... and the time it then spent out of the batch (start_s: its first join)

    @property
    def latency_s(self) -> np.ndarray:
        return self.done_s - self.arrival_s

    @property
    def ttfb_s(self) -> np.ndarray:
        return self.first_block_s - self.arrival_s

    @property
    def preemptions(self) -> int:
        return 0 if self.preempted is None else int(self.preempted.sum())


def held_as_each_joins(start_s: np.ndarray, done_s: np.ndarray) -> np.ndarray:
    """The requests in the batch as each one joins it, itself counted: each in from its start to its
    last answer, one that leaves at the instant another joins counted out first."""
    n = len(done_s)
    times = np.concatenate([done_s, start_s])
    steps = np.concatenate([-np.ones(n), np.ones(n)])
    order = np.lexsort((steps, times))
    held = np.empty(2 * n)
    held[order] = np.cumsum(steps[order])
    return held[n:]


RELEASES = ("synchronous", "first-done")


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


def _check_prefill_first(nfe: list[int], first: list[int], ahead: bool, prompt: list[int] | None) -> None:
    """Prefills before the decodes (`ClassTable.prefill_first`) are simulated for requests whose
    first output is their prefill's (a token-streaming decoding) and whose last comes no earlier,
    each with a prompt pass under a budget, and not beside first blocks outside the limit (a
    diffusion path's). `nfe`, `first`: each request's passes, a prompt's pieces past the first not counted."""
    if ahead:
        raise ValueError("prefills before the decodes (prefill_first) are not simulated with first blocks outside the limit")
    if any(f != 1 for f in first) or any(x < 1 for x in nfe):
        raise ValueError("prefills before the decodes (prefill_first) need every first output after the prefill")
    if prompt is not None and not all(prompt):
        raise ValueError("prefills before the decodes (prefill_first) need every class's prompt in the prefill stream")


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
