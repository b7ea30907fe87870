"""Which decodings a deployment runs: the ones asked for (scheme, block, tokens per forward or
steps), checked against the model, or the model's own: its published decoding on a task (its
tokens per forward and their spread across a mix of benchmarks; analysis/published.py), else its
sampler settings. With a quality floor, the model's published settings that reach it. `serve`
takes one, `plan` searches several.

A decoding asked for is any object with `scheme`, `block`, `tpf` and `steps` (None: not given);
`steps`, total steps over an answer, becomes tokens per forward at the median answer length; a
scheme given without either runs at the model's published tokens per forward where that scheme
is the published one.
"""

from __future__ import annotations

import warnings

from ..analysis.published import Published, accuracy_tasks, default_decoding, meeting_floor
from ..engine.schemes import autoregressive_scheme, get_scheme, scheme_name
from ..engine.workload import SCHEMES
from ..errors import DlmcostWarning, UsageError
from ..inputs.models import ModelSpec
from ..safe_text import shown
from ..analysis.records import ignored_knobs_warning
from .steptime import Decoding


def model_schemes(model: ModelSpec) -> tuple[str, ...]:
    """The schemes the model was published with (its sampler's list), the diffusion ones when it
    has any: a dLLM's autoregressive decoding is a baseline (`--ar-baseline`), not its own."""
    s = model.sampler
    if s is None:
        return (autoregressive_scheme(),)
    listed = tuple(dict.fromkeys((s.scheme, *s.schemes)))
    own = tuple(n for n in listed if not get_scheme(n).autoregressive)
    return own or listed


def _block(model: ModelSpec, name: str, published: Published | None = None) -> int | None:
    """A diffusion scheme's block: the published decoding's, the model's sampler's, the scheme's own."""
    s = model.sampler
    return (published.block if published else None) or (s.block if s else None) or get_scheme(name).default_block


def from_published(model: ModelSpec, p: Published) -> Decoding:
    """A published decoding as the simulation runs it."""
    if get_scheme(p.scheme).autoregressive:
        return Decoding(p.scheme, None, 1.0, published=p)
    return Decoding(p.scheme, _block(model, p.scheme, p), p.tpf, p.spread, published=p)


def _own_decoding(model: ModelSpec, name: str, task: str | None = None) -> Decoding:
    """Scheme `name` as the model was published with it: its published decoding on `task` where
    that is this scheme, else its sampler settings (block, tokens per forward gen / steps)."""
    if get_scheme(name).autoregressive:
        return Decoding(name, None, 1.0)
    p = default_decoding(model, name, task)
    if p is not None:
        return from_published(model, p)
    s = model.sampler
    tpf = s.gen / s.steps if s and s.steps else 1.0
    return Decoding(name, _block(model, name), tpf)


def floor_decodings(model: ModelSpec, floor: tuple[str, float], task: str | None = None) -> tuple[list[Decoding], str]:
    """The model's published settings whose accuracy on the floor's task reaches it (each at its
    tokens per forward on `task`, else on the floor's task), and a sentence saying what was kept."""
    found, note = meeting_floor(model, floor[0], floor[1], task)
    # settings that decode alike (one label: scheme, block, tokens per forward) cost alike: the
    # most accurate of them stands for the rest, so that none is searched twice
    best: dict[str, Decoding] = {}
    for d in (from_published(model, p) for p in found):
        kept = best.get(d.label)
        if kept is None or (d.published.accuracy or 0) > (kept.published.accuracy or 0):
            best[d.label] = d
    return list(best.values()), note


def check_floor_task(models: list[ModelSpec], task: str) -> None:
    """A quality floor on a task that none of the models has a published accuracy on, while they
    have some on others, is a typo (exit 2, naming theirs), not a floor that no decoding reaches
    (exit 8: the run worked, the targets were missed); a model with nothing published says so later."""
    published = sorted({t for m in models for t in accuracy_tasks(m) or ()})
    if published and task not in published:
        names = ", ".join(shown(m.id) for m in models)
        raise UsageError(f"--min-accuracy: no published accuracy on '{shown(task)}' for {names}; published for: "
                         f"{', '.join(published)} (`dlmcost decodings MODEL` lists them)")


def choose_decodings(model: ModelSpec, given: list | None, *, median_answer: float | None = None,
                     side_by_side: bool = False, task: str | None = None) -> list[Decoding]:
    """The decodings to consider: given, or the model's own schemes as published (on `task`). A
    decoding without a scheme takes the model's default one. `steps` (total steps at the median
    answer length) becomes tokens per forward = median answer / steps. A scheme the model was not
    published with is used with a warning; planned side by side with other models it is left to
    the models that list it (a model listing none of the given ones runs its own)."""
    own = model_schemes(model)
    if not given:
        return [_own_decoding(model, name, task) for name in own]
    default = model.sampler.scheme if model.sampler else autoregressive_scheme()
    schemes = list(dict.fromkeys(scheme_name(d.scheme or default) for d in given))
    knobs = [k for k in ("block", "tpf", "steps") if any(getattr(d, k) is not None for d in given)]
    if knobs and all(s in SCHEMES and get_scheme(s).autoregressive for s in schemes):  # one token per pass
        warnings.warn(ignored_knobs_warning(schemes[0], knobs), DlmcostWarning, stacklevel=2)
    out, foreign = [], []
    for d in given:
        scheme = scheme_name(d.scheme or default)  # in any case, as --precision takes its names
        if scheme not in SCHEMES:
            raise UsageError(f"decoding: unknown scheme '{scheme}'; choose from: {', '.join(SCHEMES)}")
        if model.sampler and scheme not in (model.sampler.scheme, *model.sampler.schemes):
            foreign.append(scheme)
            if side_by_side:
                continue
        if d.tpf is not None and d.steps is not None:
            raise UsageError("decoding: give steps or tpf, not both")
        if get_scheme(scheme).autoregressive:
            out.append(Decoding(scheme, None, 1.0))
            continue
        published = default_decoding(model, scheme, task) if d.tpf is None and d.steps is None else None
        tpf = d.tpf if d.tpf is not None else (median_answer / d.steps if d.steps and median_answer else
                                               published.tpf if published else 1.0)
        if tpf < 1 and not get_scheme(scheme).takes_drafter:
            warnings.warn(f"{scheme} at {tpf:.3g} tokens per forward: more passes than tokens, so some steps commit "
                          f"no token", DlmcostWarning, stacklevel=2)
        elif tpf < 1:
            raise UsageError(f"decoding: {tpf:g} accepted tokens per iteration is fewer than the one every "
                             f"iteration of {scheme} accepts (the verifier's own token)")
        block = d.block
        if block is None and (scheme not in foreign or get_scheme(scheme).uses("block")):
            # the published decoding's, the model's own (LLaDA's semi-autoregressive mdm too), else the scheme's
            block = _block(model, scheme, published)
            if block is None and get_scheme(scheme).uses("block"):
                raise UsageError(f"decoding: the {scheme} scheme needs a block length (--block)")
        if block is not None and tpf > block:
            raise UsageError(f"decoding: {tpf:g} tokens per forward exceeds the block of {block} "
                             "(at least one step per block)")
        if published is not None and published.block in (None, block):  # the published decoding itself
            out.append(Decoding(scheme, block, tpf, published.spread, published=published))
        else:
            out.append(Decoding(scheme, block, tpf))
    if foreign:
        names = ", ".join(dict.fromkeys(foreign))
        if side_by_side and not out:
            warnings.warn(f"{model.id} was not published with {names}: it runs its own ({', '.join(own)})",
                          DlmcostWarning, stacklevel=2)
            return [_own_decoding(model, name, task) for name in own]
        if not side_by_side:
            warnings.warn(f"{model.id} was not published with {names} (its config lists {', '.join(own)}): "
                          "the answers' quality there is not known", DlmcostWarning, stacklevel=2)
    return list(dict.fromkeys(out))


def warn_if_task_unread(task: str | None, tpf_tasks) -> None:
    """The warning when --task was given and no deployment served took its tokens per forward from
    it (`tpf_tasks`: each one's published decoding's `tpf_task`, None without one): --tpf or --steps
    set them, or the decoding is autoregressive, so the task changed nothing."""
    from ..inputs.names import task_key

    if task is not None and task_key(task) not in tpf_tasks:
        warnings.warn(f"--task {shown(task, 40)} does nothing here: no deployment takes its tokens per forward from "
                      "a published decoding on it (--tpf or --steps given, or an autoregressive decoding)",
                      DlmcostWarning, stacklevel=3)
