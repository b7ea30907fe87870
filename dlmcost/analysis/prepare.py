"""What `analyze` and `sweep` check before they evaluate: the model and its drafter, a workload
with the model's sampler defaults, the GPUs that can run it and the software stack.

`prepare` is analyze's whole validation, for callers that evaluate many workloads in one grid
(calibrate); `sweep` validates its lists with the same `Workload` fields (sweep.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from ..errors import ConfigError, UsageError, WorkloadError
from ..inputs.files import validation_message
from ..inputs.hardware import GPU, DEFAULT_GPUS, HardwareDB
from ..inputs.models import ModelSpec, resolve_model
from ..inputs.precision import get_precision, kv_bytes
from ..inputs.profiles import Profile, load_profile
from ..engine.roofline import gpu_rates
from ..engine.schemes import REGISTRY, SCHEMES, scheme_name
from ..inputs.stacks import EAGER_SUFFIX, STACK_NONE, Stack, default_stack, default_stack_for, load_stack
from ..safe_text import shown
from ..engine.workload import Workload, check_parallel, scheme_problem

DEFAULT_MODEL = "GSAI-ML/LLaDA-8B-Instruct"


def rates_or_none(gpu: GPU, precision: str, profile: Profile, tp: int = 1) -> dict | None:
    """The GPU's rates at this precision, or None where it cannot run it (`unsupported_reason`)."""
    if tp > 1 and gpu.link_bytes_per_s <= 0:
        return None
    return gpu_rates(gpu, get_precision(precision), profile)


def unsupported_reason(gpu: GPU, precision: str, tp: int = 1) -> str:
    """Why `rates_or_none` gave None: no tensor cores for the precision, or no link for tp > 1."""
    compute = get_precision(precision).compute
    if not gpu.supports(compute):
        units = "tensor cores" if gpu.unit == "GPU" else "matrix units"  # a TPU's MXUs, Trainium's engines
        return f"{gpu.name} has no {compute} {units} (precision {precision} unsupported)"
    return f"{gpu.name} has no scale-up link in its hardware file (tp={tp} needs one)"


def resolve_spec(model: str | ModelSpec, revision: str | None = None, hub: bool = False) -> ModelSpec:
    """A parsed model as is, or the model of this id or path (`models.resolve_model`), its
    sampler's schemes checked against the registry."""
    spec = model if isinstance(model, ModelSpec) else resolve_model(model, revision=revision, hub=hub)
    if spec.sampler:
        unknown = [s for s in (spec.sampler.scheme, *spec.sampler.schemes) if s not in REGISTRY]
        if unknown:
            raise ConfigError(f"model {shown(spec.id)}: its sampler names the unknown scheme {shown(unknown[0])}; "
                              f"choose from: {', '.join(SCHEMES)}")
    return spec


def resolve_drafter(w: Workload, spec: ModelSpec) -> ModelSpec | None:
    """The workload's drafter model (None without one), checked against its verifier `spec`."""
    if w.drafter is None:
        return None
    if not REGISTRY[w.scheme].takes_drafter:
        takers = ", ".join(s.name for s in REGISTRY.values() if s.takes_drafter)
        raise UsageError(f"--drafter applies to the {takers} scheme only")
    drafter = resolve_model(w.drafter)
    if drafter.vocab_size != spec.vocab_size:
        raise WorkloadError(f"the drafter's vocabulary ({drafter.vocab_size}) differs from the verifier's "
                            f"({spec.vocab_size}): it cannot propose the verifier's tokens")
    return drafter


def resolve_stack(stack: str | Stack | None, profile: Profile, *, scheme: str | None = None,
                  eager: bool = False) -> Stack | None:
    """The stack to apply: a name or file (None: the default of the decoding's kind,
    `stacks.default_stack`: `scheme`'s, autoregressive when no scheme is named); `none`, or the
    `ideal` efficiency profile (an upper bound), give the bare roofline. `eager`: the stack run
    without CUDA graphs (`Stack.run_eagerly`; the bare roofline has no host to run eagerly)."""
    if isinstance(stack, str) and stack.endswith(EAGER_SUFFIX):  # `NAME (eager)`, as the outputs print it
        stack, eager = stack[:-len(EAGER_SUFFIX)], True
    if profile.name == "ideal" or stack == STACK_NONE:
        if eager:
            raise UsageError(f"--eager costs a stack's host dispatch without CUDA graphs; "
                             f"{'--efficiency ideal' if profile.name == 'ideal' else '--stack ' + STACK_NONE} "
                             "costs the bare roofline, which has none")
        return None
    if stack is None:
        stack = default_stack(scheme is None or REGISTRY[scheme].autoregressive)
    return load_stack(stack, eager=eager)


def stack_for_parts(stack: str | Stack | None, gpus: list[GPU]) -> str | Stack | None:
    """The stack named; else the parts' own engine where the default runs on none of them and they
    share one (`stacks.default_stack_for`: TPUs alone run jax-tpu, as plan and serve take them);
    else None (each decoding its kind's default)."""
    return stack if stack is not None else default_stack_for({g.vendor for g in gpus})


@dataclass
class Prepared:
    """One workload validated as `analyze` validates it, and the GPUs asked for: what evaluating
    it needs, for callers that evaluate many workloads in one grid (calibrate)."""

    spec: ModelSpec
    workload: Workload
    drafter: ModelSpec | None
    selected: list[GPU]  # the GPUs asked for, in order
    profile: Profile
    stack: Stack | None
    supported: list[tuple[GPU, dict]]  # those that can run it, with their rates
    ar_stack: Stack | None = None  # the AR decode baseline's: the stack given, else the AR default
    published: object | None = None  # published.Published: where the default tokens per forward came from


def prepare(model: str | ModelSpec = DEFAULT_MODEL, gpus: str | list[str] | None = None, *,
            efficiency: str = "realistic", stack: str | Stack | None = None, eager: bool = False,
            hardware: list[str] | None = None, revision: str | None = None, hub: bool = False, **workload) -> Prepared:
    """Everything `analyze` checks before it evaluates (same arguments, same errors), but the
    limit on passes costed one by one: that depends on how often the caller evaluates (calibrate's
    fit many times), so each caller checks its own."""
    spec = resolve_spec(model, revision, hub)
    w = workload_for(spec, **workload)
    chose_speed = any(workload.get(k) is not None for k in ("steps", "tpf"))
    found = None if chose_speed or REGISTRY[w.scheme].autoregressive else \
        published_default(spec, w.scheme, workload.get("task"))
    drafter = resolve_drafter(w, spec)
    selected = HardwareDB.load(hardware).select(gpus, DEFAULT_GPUS)
    profile = load_profile(efficiency)
    stack = stack_for_parts(stack, selected)
    st = resolve_stack(stack, profile, scheme=w.scheme, eager=eager)
    ar_st = st if stack is not None else resolve_stack(None, profile, eager=eager)
    problem = scheme_problem(w) or check_parallel(spec, w.tp, w.ep)
    if problem:
        raise WorkloadError(problem)
    supported = [(g, r) for g in selected if (r := rates_or_none(g, w.precision, profile, w.tp)) is not None]
    return Prepared(spec, w, drafter, selected, profile, st, supported, ar_st,
                    found if found is not None and w.tpf == found.tpf else None)


def sampler_defaults(spec: ModelSpec, task: str | None = None, **given) -> dict:
    """`given` (None: unset) with the fields the model's sampler fills in: the scheme and the
    generation length; without steps or tokens per forward, the tokens per forward of the model's
    published decoding on `task` (published.py; the model's default task when None) and its block;
    else the block (a scheme with a reference engine of its own, a `default_block`, takes its block
    from there instead), only where it divides the generation; the block scheme's store pass; the
    sampler's steps, at the sampler's own generation length only. `workload_for` builds analyze's
    Workload from it, and sweep asks it once per scheme and length of its grid."""
    given = {k: v for k, v in given.items() if v is not None}
    if isinstance(given.get("scheme"), str):  # the registered name, whatever the case it came in (its defaults too)
        given["scheme"] = scheme_name(given["scheme"])
    sampler = spec.sampler
    if sampler:
        given.setdefault("scheme", sampler.scheme)
        given.setdefault("gen", sampler.gen)
    scheme = REGISTRY.get(given.get("scheme", Workload.model_fields["scheme"].default))
    own_block = scheme.default_block if scheme else None
    gen = given.get("gen", Workload.model_fields["gen"].default)
    if "steps" not in given and "tpf" not in given and scheme and not scheme.autoregressive:
        found = published_default(spec, scheme.name, task)
        if found is not None:
            given["tpf"] = found.tpf
            if found.block and "block" not in given and isinstance(gen, int) and gen % found.block == 0:
                given["block"] = found.block
    elif task is not None:
        published_default(spec, given.get("scheme"), task)  # an unknown task is still an error
    if own_block and "block" not in given and isinstance(gen, int) and (not scheme.block_divides_gen or gen % own_block == 0):
        given["block"] = own_block
    elif sampler and not own_block:
        if sampler.block and "block" not in given and gen % sampler.block == 0:
            given["block"] = sampler.block
        if scheme and scheme.needs_block:  # the sampler's store pass belongs to its block decoding
            given.setdefault("store_pass", sampler.store_pass)
        if sampler.steps and "steps" not in given and "tpf" not in given and gen == sampler.gen:
            given["steps"] = sampler.steps
    return given


def published_default(spec: ModelSpec, scheme: str | None, task: str | None):
    """The model's published decoding on `task` for this scheme (published.default_decoding)."""
    from .published import default_decoding

    return default_decoding(spec, scheme, task)


def workload_for(spec: ModelSpec, task: str | None = None, **given) -> Workload:
    """A Workload whose unset fields come from the model's sampler defaults (`sampler_defaults`)."""
    given = sampler_defaults(spec, task, **given)
    scheme = REGISTRY.get(given.get("scheme", Workload.model_fields["scheme"].default))
    if scheme and scheme.needs_block and "block" not in given:
        raise WorkloadError(f"the {scheme.name} scheme needs --block")
    try:
        w = Workload(**given)
    except ValidationError as exc:  # -> one readable line, by the shared formatter
        raise UsageError(f"invalid workload: {validation_message(exc, top='workload')}") from None
    get_precision(w.precision)  # unknown names -> one clear UsageError each
    kv_bytes(w.kv_dtype)
    if w.total_steps > 10_000_000:
        raise UsageError(f"{w.total_steps:.3g} steps is absurd (tokens per forward too small?); at most 10,000,000")
    return w

