"""`dlmcost plan`: from traffic and latency targets to GPUs, replicas and dollars.

A search on top of the serving simulation (dlmcost/serving/): each candidate deployment is
served as `dlmcost serve` serves it, and the search finds its fewest replicas.

    search.py    the candidates and the search's steps, AR baseline beside them
    bounds.py    a candidate's throughput and cost bounds, read before it is simulated
    turns.py     the candidates searched cheapest first, pruned, in turn and ahead of it
    ranking.py   the deployments ranked: each row's sustained load and band ends
    side_by_side.py  the searches (candidates', rows') on the machine's cores
    replicas/    one candidate's fewest replicas and the load it sustains, by simulation
    results.py   result types, target checks, Pareto front, ranking
    scenario.py  the scenario YAML and command-line options
"""

from __future__ import annotations

from typing import Callable

from .results import Deployment
from .search import PlanResult


_LIMIT = object()  # run's default max_candidates: limits.MAX_PLAN_CANDIDATES as it is when run is called


def run(scenario_path: str | None, overrides: dict, *, model: str | list[str] | None = None, prices: list[str] = (),
        hardware: list[str] | None = None, efficiency: str = "realistic", stack: str | None = None, eager: bool = False,
        baseline: bool = False, absurd: bool = False, progress: Callable[[int, int], None] | None = None,
        max_candidates: int | None | object = _LIMIT, ranked: int | None = None, prune: bool = True,
        jobs: int | None = None) -> PlanResult:
    """Read the scenario, search the deployments of each model (several: side by side, at the same
    traffic and targets), return the ranked result. A search of more than `max_candidates`
    candidate deployments in all, or of more than `limits.MAX_SIMULATED_REQUESTS` candidates x
    simulated requests, is refused before any is costed, and one whose simulations preempt more
    than `limits.MAX_PREEMPTIONS` requests in all is ended when they do (None: none of the three). `ranked`: the
    sustained load and the error band's ends of the first so many deployments only (an output
    that shows no more; search.plan); `prune=False`: the exhaustive search, the reference the
    pruned one is held to. `eager`: every decoding's stack run without CUDA graphs (refused where
    one has no eager profile). `jobs`: the worker processes the candidates' searches and the rows'
    sustained loads and band ends may use (None: the usable cores; 1: none; the answer is the same:
    side_by_side.py)."""
    from ..analysis import limits
    from ..engine.memory import check_mem_fraction
    from ..errors import NoDeploymentError
    from ..inputs.error_bands import band_for
    from ..inputs.hardware import HardwareDB
    from ..inputs.stacks import DEFAULT_STACK_BY_VENDOR
    from ..analysis.prepare import resolve_spec
    from .results import pareto_front, rank_key
    from .scenario import (build_decodings, build_space_and_pricing, build_targets, build_traffic, choose_stack,
                           merge_prices, parse_price, quality_floor, read_scenario, warn_off_stack)
    from ..inputs.stacks import default_stack, stack_label
    from ..serving import behaviour
    from ..serving.loads import REQUESTS_PER_USER, loop_requests
    from ..serving.simulate import SimulationWork
    from ..serving.decodings import check_floor_task
    from .ranking import rank_rows
    from .search import baseline_decoding, candidate_count, decoding_policy, plan, stack_profile

    price_overrides = [parse_price(p) for p in prices]
    fraction_given = ((overrides or {}).get("search") or {}).get("mem_fraction")
    if fraction_given is not None:  # checked as serve's option before the scenario's fields (nan too)
        check_mem_fraction(fraction_given)
    spec = read_scenario(scenario_path, overrides)
    # the chunk's name where it was given: the option, else the scenario file's field
    from_option = ((overrides or {}).get("search") or {}).get("prefill_chunk") is not None
    chunk_name = "--prefill-chunk" if from_option else "search.prefill_chunk"
    chunk_given_as = "option" if from_option else "scenario"
    behaviour.check_prefill_chunk(spec.search.prefill_chunk, chunk_name)
    servers_given_as = "option" if ((overrides or {}).get("search") or {}).get("api_servers") is not None else "scenario"
    servers_name = "--api-servers" if servers_given_as == "option" else "search.api_servers"
    behaviour.check_api_servers(spec.search.api_servers, servers_name)
    if spec.search.mem_fraction is not None:  # the option's was checked before: the scenario's
        check_mem_fraction(spec.search.mem_fraction, "search.mem_fraction")
    recv_given = spec.search.recv_interval
    recv_name = ("--recv-interval" if ((overrides or {}).get("search") or {}).get("recv_interval") is not None
                 else "search.recv_interval")
    behaviour.check_recv_interval(recv_given, recv_name)
    model_ids = _model_ids(model if model is not None else spec.model)
    model_specs = []
    for spec_of_id in map(resolve_spec, model_ids):  # a model named twice (two spellings of one id) is planned once
        if spec_of_id not in model_specs:
            model_specs.append(spec_of_id)
    floor = quality_floor(spec)
    if floor is not None:
        check_floor_task(model_specs, floor[0])
    first = model_specs[0]  # its answer length is every model's when none is given: the same traffic
    traffic = build_traffic(spec, first)
    targets = build_targets(spec)
    db = HardwareDB.load(hardware)
    if price_overrides:
        spec = spec.model_copy(update={"prices": merge_prices(spec.prices, price_overrides, db)})
    stack = choose_stack(stack, spec, db)  # None: each decoding its kind's default (TPUs alone: their own)
    # the stack that decides which GPUs a default plan searches (the diffusion and the AR defaults
    # run on the same parts) and that is warned about when asked to run where it does not
    profile = stack_profile(stack if stack is not None else default_stack(False), efficiency, eager)
    spaces, quality = [], []
    for m in model_specs:
        own, note = build_decodings(spec, m, traffic, side_by_side=len(model_specs) > 1)
        if note is not None:
            quality.append(note)
        if not own:
            continue  # nothing published reaches the quality floor: the model is left out (`quality` says why)
        space, pricing = build_space_and_pricing(spec, own, db, stack=profile)
        if not spaces:
            warn_off_stack(space, profile)
        spaces.append((m, space, pricing))
    if not spaces:
        raise NoDeploymentError("no model has a published decoding that meets the quality floor: " + "; ".join(quality))
    counted = [candidate_count(space, baseline) for _, space, _ in spaces]
    candidates = sum(n for n, _ in counted)
    limits.check_candidates(candidates, limits.MAX_PLAN_CANDIDATES if max_candidates is _LIMIT
                            else max_candidates, " + ".join(what for _, what in counted))
    # the candidate limit holds at the default requests; --requests up to 1,000,000 scales each one's work
    # (a closed loop's runs at one replica take at least REQUESTS_PER_USER a user, as serve's do)
    requests = spec.simulation.requests
    users = traffic.users if traffic.closed_loop else 0
    per_run = loop_requests(requests, users)
    limits.check_simulated(candidates * per_run, None if max_candidates is None else limits.MAX_SIMULATED_REQUESTS,
                           f"{candidates:,} candidate deployments x {per_run:,} simulated requests"
                           + (f" ({REQUESTS_PER_USER} a user of {users:,} on one replica)" if per_run > requests else ""),
                           "fewer --requests" + (" or --users" if users else "") + ", or fewer candidates (GPUs, TP "
                           "sizes, precisions, K/V formats, decodings, batch limits)")
    # one count of preemptions for every model's search, and the rows ranked after them all
    work = SimulationWork(None if max_candidates is None else limits.MAX_PREEMPTIONS)
    parts, decodings, release, running, stacks, published, chunks, fronts = [], [], {}, {}, {}, {}, {}, {}
    intervals = {}  # each decoding's (receive interval, its source): the one given where its stack's scheduler
    # has one and the decoding streams tokens, else 1
    prefills_first: dict[str, bool] = {}  # each decoding's stack runs its prefills before its decodes (SGLang) or not
    chunk_by_gpu: dict[str, dict[str, int | None]] = {}
    running_by_gpu: dict[str, dict[str, int]] = {}
    for m, space, pricing in spaces:
        decodings += [d.label for d in space.decodings]
        policies = {d.label: decoding_policy(stack, efficiency, d, eager, space.prefill_chunk, chunk_given_as,
                                             space.api_servers, servers_given_as, m.n_layers, space.recv_interval,
                                             m.n_mla_layers)
                    for d in space.decodings}
        intervals.update({label: (pol.recv_interval, pol.recv_interval_source) for label, pol in policies.items()})
        fronts.update({label: (pol.front_end, pol.api_servers_source) for label, pol in policies.items()})
        release.update({label: pol.release for label, pol in policies.items()})
        chunks.update({label: (pol.prefill_chunk, pol.prefill_chunk_source) for label, pol in policies.items()})
        prefills_first.update({label: pol.prefill_first for label, pol in policies.items()})
        # the GPUs on which the stack's chunk differs (SGLang's by memory)
        chunk_by_gpu.update({label: _other_chunks(pol, space.gpus) for label, pol in policies.items()})
        # ... and its running limit (vLLM's by GPU), where none is given
        running_by_gpu.update({label: {} if space.max_batches else _other_running(pol, space.gpus)
                               for label, pol in policies.items()})
        running.update({label: space.max_batches or [pol.max_running] for label, pol in policies.items()})
        stacks.update({label: behaviour.stack_name(stack, d, eager) for label, d in zip(policies, space.decodings)})
        published.update({f"{m.id} {d.label}": d.published.record() for d in space.decodings if d.published})
        parts.append(plan(m, traffic, targets, space, pricing, requests=spec.simulation.requests,
                          seed=spec.simulation.seed, efficiency=efficiency, stack=stack, eager=eager, hardware=hardware,
                          baseline=baseline, absurd=absurd, progress=progress, ranked=ranked, prune=prune,
                          defer=len(spaces) > 1, work=work, jobs=jobs))
    if baseline and any(not d.autoregressive for _, space, _ in spaces for d in space.decodings):
        ar = baseline_decoding()  # the AR baseline's engine, as the header names it
        policy = decoding_policy(stack, efficiency, ar, eager, spec.search.prefill_chunk, chunk_given_as,
                                 spec.search.api_servers, servers_given_as, spaces[0][0].n_layers, recv_given,
                                 spaces[0][0].n_mla_layers)
        intervals.setdefault(ar.label, (policy.recv_interval, policy.recv_interval_source))
        fronts.setdefault(ar.label, (policy.front_end, policy.api_servers_source))
        release.setdefault(ar.label, policy.release)
        chunks.setdefault(ar.label, (policy.prefill_chunk, policy.prefill_chunk_source))
        prefills_first.setdefault(ar.label, policy.prefill_first)
        chunk_by_gpu.setdefault(ar.label, _other_chunks(policy, spaces[0][1].gpus))
        running_by_gpu.setdefault(ar.label, {} if spaces[0][1].max_batches else _other_running(policy, spaces[0][1].gpus))
        running.setdefault(ar.label, spaces[0][1].max_batches or [policy.max_running])
        stacks.setdefault(ar.label, behaviour.stack_name(stack, ar, eager))
    behaviour.warn_if_no_chunks(spec.search.prefill_chunk, [chunk for chunk, _ in chunks.values()], chunk_name)
    behaviour.warn_if_no_front_end(spec.search.api_servers, [front and front.service_s for front, _ in fronts.values()],
                                   servers_name)
    from ..serving.decodings import warn_if_task_unread

    warn_if_task_unread(spec.search.task, [(rec or {}).get("tpf_task") for rec in published.values()])
    behaviour.warn_if_no_recv_interval(recv_given, [i for i, _ in intervals.values()],
                                       [source for _, source in intervals.values()], recv_name)
    result = parts[0]
    if len(parts) > 1:  # the rows shown of all the models' rankings searched again, then ranked together
        rank_rows([row for p in parts for row in p.pending], ranked, jobs)
        result = _side_by_side(parts, pareto_front, rank_key)
    _warn_if_memory_binds(result)
    _warn_if_band_is_slower(result)
    result.model = ", ".join(m.id for m in model_specs)
    result.models = [m.id for m in model_specs]
    result.traffic = spec.traffic.model_dump() | dict(answer=spec.traffic.answer if spec.traffic.answer is not None
                                                       else (first.sampler.gen if first.sampler else 256))
    result.search = dict(gpus=[g.name for g in space.gpus], tp=space.tps, precisions=space.precisions,
                         # the K/V cache formats searched (each candidate has one), and the first of them
                         # under the name a search of one format has always had
                         kv_dtypes=space.kv_dtypes, kv_dtype=space.kv_dtypes[0],
                         mem_fraction=space.mem_fraction,  # and share of each GPU's memory
                         # the scheduler's receive interval given (1: every iteration), which the decodings
                         # that stream tokens take (the AR baseline's too); the diffusion ones receive every pass
                         recv_interval=space.recv_interval or 1,
                         decodings=list(dict.fromkeys(decodings)),
                         max_batch=sorted({b for bs in running.values() for b in bs}),
                         max_running=running,  # each decoding's running limits searched (its stack's own unless given), the AR baseline's too
                         stacks=stacks, stack_default=stack is None,  # each decoding's stack
                         release=release,  # each decoding's batch release policy, as serve's
                         # each decoding's AR prompts' budget a step beside the decodes (None: none) and
                         # where it came from, as serve's prefill_chunk_tokens and prefill_chunk_source
                         prefill_chunk_tokens={label: chunk for label, (chunk, _) in chunks.items()},
                         prefill_chunk_source={label: source for label, (_, source) in chunks.items()},
                         prefill_first=prefills_first,  # each decoding's prefills before its decodes or beside them
                         # the searched GPUs on which its stack's chunk is another (SGLang's by GPU memory)
                         prefill_chunk_by_gpu={label: by for label, by in chunk_by_gpu.items() if by},
                         # ... and its running limit (vLLM's by GPU), where no limit is given
                         max_running_by_gpu={label: by for label, by in running_by_gpu.items() if by},
                         # each decoding's receive interval as its stack takes it, and where it came from
                         recv_intervals={label: i for label, (i, _) in intervals.items()},
                         recv_interval_source={label: source for label, (_, source) in intervals.items()},
                         # each decoding's front end (None: its stack has none), as serve's api_servers,
                         # front_end_us_per_request, first_token_delay_us and api_servers_source
                         api_servers={label: f.servers if f else None for label, (f, _) in fronts.items()},
                         front_end_us_per_request={label: f.service_s * 1e6 if f else None
                                                   for label, (f, _) in fronts.items()},
                         first_token_delay_us={label: f.first_token_delay_s * 1e6 if f else None
                                               for label, (f, _) in fronts.items()},
                         api_servers_source={label: source for label, (_, source) in fronts.items()},
                         # where a searched stack's release ran a GPU's kernels at a precision slower than
                         # tuned: what it adds to every pass there, as serve's slow_kernels
                         slow_kernels=_slow_kernels(set(stacks.values()), efficiency, [g for _, s, _ in spaces for g in s.gpus],
                                                    [p for _, s, _ in spaces for p in s.precisions]),
                         # the decodings whose prefill a prefix cache shortens (traffic.cached_prompt > 0)
                         cached_prompt_decodings=result.cached,
                         requests=spec.simulation.requests, seed=spec.simulation.seed,
                         power_utilisation=pricing.power_utilisation, absurd_shown=absurd,
                         ar_baseline=baseline,
                         # the stack each decoding runs on (a default plan: the diffusion decodings on
                         # sglang-dllm, the AR ones on sglang), and the one named, if any
                         stack=stack_label(stack, eager) if stack is not None else "default",
                         eager=eager,  # every decoding's stack run without CUDA graphs
                         # every candidate searched at its stack's error band's slower end (--conservative)
                         conservative=space.conservative,
                         # the default GPUs the stack does not run on, and the stack each one's
                         # vendor has of its own (None: none bundled)
                         left_out=[dict(gpu=g.name, vendor=g.vendor, stack=DEFAULT_STACK_BY_VENDOR.get(g.vendor.lower()))
                                   for g in space.left_out],
                         # the vendors it runs on, as the hardware files spell them
                         runs_on=sorted({g.vendor for g in db.gpus.values() if profile.runs(g.vendor)})
                         if profile is not None and profile.runs_on is not None else None,
                         published=published,  # model + decoding -> the published decoding it comes from
                         task=spec.search.task, min_accuracy=spec.search.min_accuracy,
                         quality=quality,  # with a floor: per model, what published data kept
                         # each stack's band on each searched vendor's parts: the one its deployments'
                         # intervals come from (search.py; their band_stack is its label)
                         error_bands={name if band.vendor is None else f"{name} on {band.vendor} parts": band.record()
                                      for name in dict.fromkeys(stacks.values())
                                      for vendor in dict.fromkeys(g.vendor for g in space.gpus)
                                      if (band := band_for(name, vendor)) is not None})
    return result


def _model_ids(given) -> list[str]:
    """A model id, a comma list of them, or a list; LLaDA-8B-Instruct when none is given (None). An
    empty or blank name given (a scenario's `model: ''`, an API call's '' or []) is refused, not the
    default model planned in its place, as the command line refuses it."""
    from ..errors import UsageError
    from ..safe_text import shown

    if given is None:
        return ["GSAI-ML/LLaDA-8B-Instruct"]
    items = given if isinstance(given, list) else [given]
    ids = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    if not ids:
        raise UsageError(f"model: an empty model name, got {shown(repr(given), 60)}")
    return list(dict.fromkeys(ids))


def _side_by_side(parts: list[PlanResult], pareto_front, rank_key) -> PlanResult:
    """One ranked table of several models' deployments (each model's absurd ones judged against
    its own best), one Pareto front over them, the nearest miss of them all when none meets the
    targets."""
    deployments = sorted((d for p in parts for d in p.deployments), key=rank_key)
    for d in deployments:
        d.pareto = False
    pareto_front([d for d in deployments if not d.absurd])
    misses = [p.nearest_miss for p in parts if p.nearest_miss is not None]
    nearest = None if deployments else min(misses, key=lambda d: max(m.ratio for m in d.misses), default=None)
    skipped: dict[str, int] = {}
    for p in parts:
        for k, v in p.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
    return PlanResult(model="", traffic={}, targets=parts[0].targets, deployments=deployments,
                      baseline=[d for p in parts for d in p.baseline], nearest_miss=nearest,
                      evaluated=sum(p.evaluated for p in parts), skipped=skipped,
                      unlisted=sum(p.unlisted for p in parts),
                      cached=sorted({label for p in parts for label in p.cached}))


def to_record(result: PlanResult) -> dict:
    """Plain data for --format json (units in the key names)."""
    from ..engine.schemes import REGISTRY

    deployed = {d.scheme for d in result.deployments}
    return dict(model=result.model, models=result.models or [result.model], traffic=result.traffic,
                targets=result.targets, search=result.search,
                # whether every deployment decodes autoregressively (then no AR baseline is missed)
                all_autoregressive=all(REGISTRY[s].autoregressive for s in deployed),
                evaluated=result.evaluated, skipped=result.skipped,
                deployments=[d.record() for d in result.deployments],
                deployments_unlisted=result.unlisted,
                pareto=[d.record() for d in result.deployments if d.pareto],
                ar_baseline=[d.record() for d in result.baseline],
                nearest_miss=result.nearest_miss.record() if result.nearest_miss else None)


__all__ = ["run", "to_record", "Deployment", "PlanResult"]


# the names dlmcost.api exports them by
run_plan, plan_record = run, to_record


def _warn_if_memory_binds(result: PlanResult) -> None:
    """serve's warning for the recommended deployment (the first ranked) where memory binds its
    simulated replica (Deployment.memory_binds): its K/V allocated as tokens come and preempted where it
    runs out (first-done release), or reserved at the final length (synchronous: upper bounds)."""
    import warnings

    from ..errors import DlmcostWarning

    top = result.deployments[0] if result.deployments else None
    if top is not None and top.memory_binds:
        warnings.warn(f"memory binds for the recommended {top.replicas} x {top.gpu} (TP{top.tp}, {top.precision}, "
                      f"K/V {top.kv_dtype}, {top.decoding}): its requests' K/V is allocated as tokens come and, where "
                      f"it runs out, the latest admitted is preempted and recomputed, as in vLLM and SGLang "
                      f"({top.preemptions:,} preemptions of its simulated replica's measured requests; first-done "
                      f"release; the growth and the recompute are approximate: methodology, 'When memory binds'; a "
                      f"synchronous release holds each at its final length, and its first-token times and GPU count "
                      f"are then upper bounds)", DlmcostWarning, stacklevel=2)


def _warn_if_band_is_slower(result: PlanResult) -> None:
    """A warning where the recommended deployment's error band lies above 1 at both ends (nine in
    ten or more of the published measurements it rests on ran slower than predicted) and more GPUs
    than it has meet the targets even at the band's faster end, or none at its slower end: the
    GPU count is optimistic, and the band's ends say by how much."""
    import warnings

    from ..errors import DlmcostWarning
    from ..safe_text import shown

    top = result.deployments[0] if result.deployments else None
    iv = top.intervals if top is not None else {}
    if "band" not in iv or iv["band"][0] <= 1:
        return
    low, high = iv["band"]
    fast, slow = (list(iv.get("gpus") or []) + [None, None])[:2]  # (None: no replica count meets them there)
    if fast is not None and slow is not None and fast <= top.gpus:  # its GPUs at the faster end: nothing to add
        return
    if slow is not None:
        at_ends = f"{fast}–{slow} GPUs at its ends" if fast != slow else f"{fast} GPUs at its ends"
        at_ends += f", not {top.gpus}"
    elif fast is not None:  # (the faster end's count may be its own: the slower end is what is said)
        at_ends = (f"{fast} GPUs at its faster end{'' if fast == top.gpus else f' (not {top.gpus})'} and no "
                   "replica count meeting the targets at its slower end")
    else:
        at_ends = "no replica count meets the targets at either end"
    warnings.warn(f"the recommended {top.replicas} x {top.gpu} (TP{top.tp}, {top.precision}, {top.decoding}) is likely "
                  f"optimistic: its error band ({shown(iv.get('band_stack', ''))}, {low:.2f}–{high:.2f}×) lies above 1, "
                  f"nine in ten of the published measurements it rests on or more ran slower than predicted: {at_ends} "
                  "(--conservative plans at the bands' slower ends)", DlmcostWarning, stacklevel=2)



def _slow_kernels(stack_names, efficiency: str, gpus: list, precisions: list[str]) -> list[dict]:
    """Each searched stack, GPU and precision where the stack's release ran slower kernels than the
    hardware file's tuned times, with what they add to every pass (`Stack.slow_kernels_on`)."""
    from .search import stack_profile

    out = []
    parts = {g.name: g for g in gpus}
    for name in sorted(stack_names):
        st = stack_profile(name, efficiency, False)  # a name may carry its ' (eager)': the same kernels
        if st is None or not st.slow_kernels:
            continue
        for gpu in parts.values():
            for precision in dict.fromkeys(precisions):
                on = st.slow_kernels_on(gpu.names, precision)
                if on:
                    out.append(dict(stack=name, gpu=gpu.name, precision=precision, **on))
    return out


def _other_chunks(pol, gpus) -> dict[str, int | None]:
    """GPU name -> the prefill chunk the decoding runs with there, for the GPUs where it is not the
    policy's own (a stack that sets its chunk by the GPU, `Policy.on_gpu`)."""
    return _on_other_gpus(pol, gpus, "prefill_chunk")


def _other_running(pol, gpus) -> dict[str, int]:
    """GPU name -> the running limit the decoding runs with there, for the GPUs where it is not the
    policy's own (a stack that sets its limit by the GPU: vLLM's max_num_seqs, `Policy.on_gpu`)."""
    return _on_other_gpus(pol, gpus, "max_running")


def _on_other_gpus(pol, gpus, field: str) -> dict:
    out = {}
    for g in gpus:
        value = getattr(pol.on_gpu(g.memory_bytes, g.names), field)
        if value != getattr(pol, field):
            out[g.name] = value
    return out
