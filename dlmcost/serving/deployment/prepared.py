"""The deployment as given (`Setup`) and as costed for its request length classes (`Prepared`).

`Setup` holds the options of `dlmcost serve`, checked; `prepare` chooses the decoding and costs
its passes once through the engine (steptime.py) for the load's length classes; `describe` is
what the deployment's record says of it. Every load's simulation reads a `Prepared`; nothing
here simulates.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ...analysis import limits
from ...engine.memory import DEFAULT_MEM_FRACTION, check_mem_fraction
from ...errors import DlmcostWarning, NoDeploymentError, UsageError, WorkloadError
from ...inputs.hardware import MAX_USD_PER_HOUR, MIN_USD_PER_HOUR
from ...inputs.precision import get_precision, kv_bytes
from ...inputs.stacks import MAX_RUNNING_REQUESTS
from ...safe_text import shown
from .. import behaviour
from ..costs import IDLE_POWER_FRACTION, price_range
from ..simulate import RELEASES, ClassTable, FrontEnd, SimulationWork
from ..steptime import Decoding, pass_table, table_passes
from ..traffic import LengthDist, RequestSample, length_classes


@dataclass(frozen=True)
class Setup:
    """The fixed deployment, as given (None: the model's, the stack's or the default)."""

    gpu: str = "h100"
    tp: int = 1
    ep: int = 1
    replicas: int = 1
    precision: str = "bf16"
    kv_dtype: str = "bf16"  # the K/V cache's number format (vLLM's and SGLang's --kv-cache-dtype)
    # the share of each GPU's memory the engine may fill with weights, K/V cache and activations
    # (vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static)
    mem_fraction: float = DEFAULT_MEM_FRACTION
    scheme: str | None = None
    block: int | None = None
    tpf: float | None = None
    steps: float | None = None
    tpf_spread: float | None = None  # coefficient of variation of a request's passes per block (None: the
    # published decoding's spread across its mix of tasks, else 0)
    task: str | None = None  # the task whose published tokens per forward the decoding takes
    min_accuracy: tuple[str, float] | None = None  # (task, fraction): the published decoding must reach it
    max_running: int | None = None
    release: str | None = None
    prefill_chunk: int | None = None  # token-streaming prompts' budget a step beside the decodes (0: none)
    api_servers: int | None = None  # the front end's API server processes per replica (None: the stack's)
    recv_interval: int | None = None  # the scheduler receives every this many decode iterations (None: 1)
    # the share of each prompt found in the prefix cache, request after request in the order they are
    # sent (cycled); one value: every request's (None or 0: no prompt token is cached)
    cached_prompt: tuple[float, ...] | None = None
    stack: str | None = None
    eager: bool = False  # the stack run without CUDA graphs (its `eager:` host dispatch)
    efficiency: str = "realistic"
    price: float | None = None  # USD per GPU-hour; None: the hardware file's list price, if any
    power_utilisation: float = 1.0

    def __post_init__(self):
        for name, hi in (("tp", 1024), ("ep", 1024), ("replicas", 100_000)):
            v = getattr(self, name)
            if not (isinstance(v, int) and 1 <= v <= hi):
                raise UsageError(f"--{name}: a whole number in 1..{hi:,}, got {v}")
        if self.kv_dtype is None:  # not given (an API caller's None): the engines' default
            object.__setattr__(self, "kv_dtype", "bf16")
        if not isinstance(self.kv_dtype, str):
            raise UsageError(f"--kv-dtype: a K/V cache number format's name, got {shown(repr(self.kv_dtype), 40)}")
        kv_bytes(self.kv_dtype)  # a one-line error for an unknown name, before any costing
        if not isinstance(self.precision, str):
            raise UsageError(f"--precision: a number format's name, got {shown(repr(self.precision), 40)}")
        # the name it resolves to (FP8 is fp8): what the record says, and what tells two setups apart
        object.__setattr__(self, "precision", get_precision(self.precision).name)
        object.__setattr__(self, "kv_dtype", self.kv_dtype.lower())  # as --precision: FP8 is fp8
        check_mem_fraction(self.mem_fraction)
        if self.max_running is not None and not (isinstance(self.max_running, int)
                                                 and 1 <= self.max_running <= MAX_RUNNING_REQUESTS):
            raise UsageError(f"--max-running: a whole number in 1..{MAX_RUNNING_REQUESTS}, got {self.max_running}")
        for name in ("tpf", "steps"):  # 0 was read as not given (the model's own), -5 blamed on --tpf
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                                  or not (math.isfinite(v) and v > 0)):
                raise UsageError(f"--{name}: a positive number, got {shown(repr(v), 40)}")
        if self.tpf_spread is not None and not (math.isfinite(self.tpf_spread) and 0 <= self.tpf_spread <= 4):
            raise UsageError(f"--tpf-spread: a coefficient of variation in 0..4, got {self.tpf_spread}")
        behaviour.check_prefill_chunk(self.prefill_chunk)
        behaviour.check_api_servers(self.api_servers)
        behaviour.check_recv_interval(self.recv_interval)
        if self.cached_prompt is not None:
            behaviour.check_cached_prompt(self.cached_prompt)
        if self.release is not None and self.release not in RELEASES:
            raise UsageError(f"--release: choose {' or '.join(RELEASES)}, got '{self.release}'")
        if self.price is not None and not (MIN_USD_PER_HOUR <= self.price <= MAX_USD_PER_HOUR):  # (plan's range)
            raise UsageError(f"--price: USD per GPU-hour in [{MIN_USD_PER_HOUR:g}, {MAX_USD_PER_HOUR:g}], got {self.price}")
        if not (math.isfinite(self.power_utilisation) and 0 < self.power_utilisation <= 1.5):
            raise UsageError(f"--power-utilisation: in (0, 1.5], got {self.power_utilisation}")


ServeSetup = Setup  # the name the API exports


@dataclass(frozen=True, eq=False)
class Prepared:
    """A deployment costed for some length classes: what every load's simulation needs."""

    model: str
    gpu_name: str
    unit: str  # what one accelerator is called: GPU, chip...
    gpus: int  # per deployment: replicas x TP
    setup: Setup
    decoding: Decoding
    release: str
    max_running: int
    first_block_outside_limit: bool  # the stack's: newcomers' first blocks beside a full batch
    # "one-pass", or "block-chunks": the prompt one block per forward (the stack's); "none" where the
    # decoding runs no pass over the prompt alone (mdm, an uncached block: the prompt is in every pass)
    prompt_prefill: str
    prefill_chunk: int | None  # AR prompts' budget a step beside the decodes, tokens (None: one pass each)
    prefill_chunk_source: str
    prefill_first: bool  # the stack's: an iteration that prefills runs no decodes (SGLang)
    front_end: FrontEnd | None  # the API servers every request passes before the engine (the stack's)
    api_servers_source: str
    recv_interval: int  # decode iterations between the scheduler's receives (1: every iteration)
    recv_interval_source: str
    release_source: str
    max_running_source: str
    requests: behaviour.RequestTable  # the request classes' passes and pass times
    sample: RequestSample
    answer_tokens: np.ndarray  # useful tokens per class
    prompt_tokens: np.ndarray  # per class
    price: float | None
    price_source: str | None
    power_w: float | None
    price_low: float | None = None  # the ends of the price's range (costs.price_range)
    price_high: float | None = None
    stack: str = ""  # the stack's name (or file) the passes were costed under
    # what the stack's slow kernels add on this GPU at this precision ({us_per_layer, us_per_token_layer}; None: none)
    slow_kernels: dict | None = None
    vendor: str | None = None  # the GPU's vendor (its stack's error band may be one vendor's)
    stack_default: bool = False  # no --stack: the decoding's kind's default
    # the preemptions its simulations may still run, shared by the command's (None: no limit)
    work: SimulationWork | None = None

    @property
    def spread(self) -> float:
        """The spread of a request's passes per block: the option, else the published decoding's; 0
        for a decoding that streams tokens (AR, draft-verify), whose requests run their answers' passes
        with no blocks to spread them over (the option there changed no number, while the record and
        the header said it was applied)."""
        if behaviour.streams_tokens(self.decoding):
            return 0.0
        return self.setup.tpf_spread if self.setup.tpf_spread is not None else self.decoding.spread

    @property
    def table(self) -> ClassTable:
        return self.requests.table

    @property
    def block_streaming(self) -> bool:
        return self.requests.block_streaming

    def classes(self) -> np.ndarray:
        return self.sample.prompt_class * len(self.sample.answer_values) + self.sample.answer_class


def _decoding(spec, setup: Setup, answers: np.ndarray) -> Decoding:
    from ..decodings import choose_decodings, floor_decodings

    given = None
    if any(v is not None for v in (setup.scheme, setup.block, setup.tpf, setup.steps)):
        if setup.min_accuracy is not None:
            raise UsageError("--min-accuracy chooses among the model's published decodings: give it without "
                             "--scheme, --block, --tpf or --steps (`dlmcost decodings MODEL` lists them)")
        scheme = setup.scheme or (spec.sampler.scheme if spec.sampler else "ar")  # plan's default for no sampler
        given = [Setup(scheme=scheme, block=setup.block, tpf=setup.tpf, steps=setup.steps)]
    if setup.min_accuracy is not None:
        found, note = floor_decodings(spec, setup.min_accuracy, setup.task)
        if not found:
            raise NoDeploymentError(f"no published decoding meets --min-accuracy: {note}")
        return max(found, key=lambda d: d.tpf)  # the fastest that is good enough
    median = None
    if given and setup.steps is not None:  # steps over the median answer, drawn as plan draws it
        dist = LengthDist("file", tuple(float(a) for a in answers[:10_001]))
        median = float(np.median(dist.sample(np.random.default_rng(0), 1001)))
    return choose_decodings(spec, given, median_answer=median, task=setup.task)[0]


def prepare(model, lengths: tuple[np.ndarray, np.ndarray], setup: Setup, *, hardware: list[str] | None = None,
            work: SimulationWork | None = None) -> Prepared:
    """Cost the deployment's passes for requests of these (prompt, answer) lengths; `work`: the
    preemptions its simulations may run, shared with the command's others (None: no limit)."""
    from ...analysis.prepare import resolve_stack
    from ...inputs.hardware import HardwareDB
    from ...inputs.models import resolve_model
    from ...inputs.profiles import load_profile
    from ...inputs.stacks import default_stack_for, off_stack_message

    spec = resolve_model(model) if isinstance(model, str) else model
    db = HardwareDB.load(hardware)
    gpu = db.get(setup.gpu)
    prompts, answers = lengths
    sample = length_classes(prompts, answers)
    decoding = _decoding(spec, setup, np.asarray(answers, float))
    # no --stack: the part's own engine where the default does not run on it (a TPU's jax-tpu), as plan's
    given = setup.stack if setup.stack is not None else default_stack_for({gpu.vendor})
    stack = resolve_stack(behaviour.stack_name(given, decoding), load_profile(setup.efficiency), eager=setup.eager)
    stack_name = behaviour.stack_name(given, decoding, setup.eager)  # what the passes are costed under
    if (off := off_stack_message(stack, [gpu])) is not None:
        warnings.warn(off, DlmcostWarning, stacklevel=2)
    pol = behaviour.policy(stack, decoding, release=setup.release, max_running=setup.max_running,
                           prefill_chunk=setup.prefill_chunk, api_servers=setup.api_servers, layers=spec.n_layers,
                           recv_interval=setup.recv_interval, mla_layers=spec.n_mla_layers).on_gpu(gpu.memory_bytes, gpu.names)
    prompt_vals = [int(v) for v in sample.prompt_values]
    answer_vals = [int(v) for v in sample.answer_values]
    distinct = sorted(set(behaviour.canvases(decoding, answer_vals)))
    args = (decoding, [gpu.name], [setup.precision], [setup.tp], prompt_vals, distinct, behaviour.batch_grid(pol.in_flight_cap()))
    opts = dict(efficiency=setup.efficiency, stack=stack_name, hardware=hardware, ep=setup.ep, kv_dtype=setup.kv_dtype,
                mem_fraction=setup.mem_fraction)
    limits.check_passes(table_passes(spec, *args, **opts), limits.MAX_PASSES_ONE_BY_ONE,
                        "choose larger blocks, shorter answers, or a smaller --max-running")
    pt = pass_table(spec, *args, **opts, max_passes=None)
    rt = behaviour.request_table(pt, 0, 0, 0, decoding, prompt_vals, answer_vals, pol.max_running, pol)
    if rt is None:
        where = f"{spec.id} cannot run on {gpu.name} at tp {setup.tp}, ep {setup.ep}, {setup.precision} with {decoding.label}"
        unfit = np.argwhere(pt.memory_fits(0, 0, 0, pol.prefill_chunk) < 1)
        weights_fit = pt.free_bytes is not None and (pt.free_bytes[0, 0, 0] > 0).all()
        if len(unfit) and weights_fit and not np.isnan(pt.nfe[0, 0, 0]).any():  # a long request fits nowhere
            # (a trace's or --prompt's million-token prompts were put down to the precision or the layout)
            shortest = min(prompt_vals[i] for i in unfit[:, 0])
            raise WorkloadError(f"{where}: one request of {shortest:,} prompt tokens and its answer does not fit in "
                                f"{setup.mem_fraction:.0%} of its memory beside the weights; shorten the prompts, or "
                                "give it more memory (--tp, --kv-dtype fp8, --mem-fraction)")
        raise WorkloadError(f"{where} (unsupported precision, a layout that does not split, or weights that do not "
                            f"fit in {setup.mem_fraction:.0%} of its memory, --mem-fraction)")
    n_p = len(prompt_vals)
    price, price_source = setup.price, "user" if setup.price is not None else None
    if price is None and gpu.price_per_hour is not None:
        price, price_source = gpu.price_per_hour.usd, f"list price as of {gpu.price_per_hour.as_of} (estimate)"
    price_low, price_high = price_range(price, price_source, gpu.price_per_hour)
    return Prepared(model=spec.id, gpu_name=gpu.name, unit=gpu.unit, vendor=gpu.vendor, gpus=setup.replicas * setup.tp,
                    setup=setup,
                    decoding=decoding,
                    release=pol.release, max_running=pol.max_running,
                    first_block_outside_limit=pol.first_block_outside_limit,
                    prompt_prefill=pol.prompt_prefill if any(rt.table.lead or []) else "none",
                    prefill_chunk=pol.prefill_chunk, prefill_chunk_source=pol.prefill_chunk_source,
                    prefill_first=rt.table.prefill_first,
                    front_end=pol.front_end, api_servers_source=pol.api_servers_source,
                    recv_interval=pol.recv_interval, recv_interval_source=pol.recv_interval_source,
                    release_source=pol.release_source,
                    max_running_source=pol.max_running_source, requests=rt, sample=sample,
                    answer_tokens=np.tile(sample.answer_values.astype(float), n_p),
                    prompt_tokens=np.repeat(sample.prompt_values.astype(float), len(answer_vals)),
                    price=price, price_source=price_source, power_w=gpu.board_power_w,
                    price_low=price_low, price_high=price_high, stack=stack_name, stack_default=setup.stack is None,
                    work=work, slow_kernels=stack.slow_kernels_on(gpu.names, setup.precision) if stack else None)


def memory_limit(table: ClassTable) -> int | None:
    """The most requests of the longest class that fit in memory (None: no memory limit)."""
    shares = [x for x in table.mem_share if x > 0]
    return int(round(1 / max(shares))) if shares else None


def _cached_share(s: Setup) -> float | None:
    """The mean share of a prompt in the prefix cache over the shares given (None: none given)."""
    return float(np.mean(s.cached_prompt)) if s.cached_prompt else None


def describe(prep: Prepared) -> dict:
    s = prep.setup
    return dict(model=prep.model, gpu=prep.gpu_name, unit=prep.unit, tp=s.tp, ep=s.ep, replicas=s.replicas, gpus=prep.gpus,
                precision=s.precision, kv_dtype=s.kv_dtype, mem_fraction=s.mem_fraction, decoding=prep.decoding.label, scheme=prep.decoding.scheme,
                block=prep.decoding.block, tpf=prep.decoding.tpf, tpf_spread=prep.spread,
                published=prep.decoding.published.record() if prep.decoding.published else None,
                max_running=prep.max_running, max_running_source=prep.max_running_source,
                first_block_outside_limit=prep.first_block_outside_limit, prompt_prefill=prep.prompt_prefill,
                prefill_chunk_tokens=prep.prefill_chunk, prefill_chunk_source=prep.prefill_chunk_source,
                prefill_first=prep.prefill_first,
                api_servers=prep.front_end.servers if prep.front_end else None,
                front_end_us_per_request=prep.front_end.service_s * 1e6 if prep.front_end else None,
                first_token_delay_us=prep.front_end.first_token_delay_s * 1e6 if prep.front_end else None,
                api_servers_source=prep.api_servers_source,
                recv_interval=prep.recv_interval, recv_interval_source=prep.recv_interval_source,
                cached_prompt_share=_cached_share(s), cached_prompt_given=len(s.cached_prompt or ()),
                memory_limit=memory_limit(prep.table),
                release=prep.release, release_source=prep.release_source, stack=prep.stack, stack_default=prep.stack_default,
                slow_kernels=prep.slow_kernels,
                eager=s.eager,
                price_per_gpu_hour=prep.price, price_source=prep.price_source,
                price_per_gpu_hour_low=prep.price_low, price_per_gpu_hour_high=prep.price_high, board_power_w=prep.power_w,
                idle_power_fraction=IDLE_POWER_FRACTION, power_utilisation=s.power_utilisation)
