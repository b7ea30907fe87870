"""`dlmcost plan`: from traffic and latency targets to GPUs, replicas and dollars.

A search on top of the serving simulation (dlmcost/serving/): each candidate deployment is
served as `dlmcost serve` serves it, and the search finds its fewest replicas.

    search.py    the candidates, searched cheapest first and pruned; ranking, AR baseline
    replicas.py  one candidate's fewest replicas and the load it sustains, by simulation
    results.py   result types, target checks, Pareto front, ranking
    scenario.py  the scenario YAML and command-line options
"""

from __future__ import annotations

from typing import Callable

from .results import Deployment
from .search import PlanResult


def run(scenario_path: str | None, overrides: dict, *, model: str | list[str] | None = None, prices: list[str] = (),
        hardware: list[str] | None = None, efficiency: str = "realistic", stack: str | None = None,
        baseline: bool = False, absurd: bool = False, progress: Callable[[int, int], None] | None = None,
        ranked: int | None = None, prune: bool = True) -> PlanResult:
    """Read the scenario, search the deployments of each model (several: side by side, at the same
    traffic and targets), return the ranked result. `ranked`: the sustained load of the first so
    many deployments only (an output that shows no more; search.plan); `prune=False`: the
    exhaustive search, the reference the pruned one is held to."""
    from ..inputs.hardware import HardwareDB
    from ..analysis.prepare import resolve_spec
    from .results import pareto_front, rank_key
    from .scenario import (build_decodings, build_space_and_pricing, build_targets, build_traffic, parse_price,
                           read_scenario)
    from ..serving import behaviour
    from .search import default_max_batch, plan, stack_profile

    price_overrides = dict(parse_price(p) for p in prices)
    spec = read_scenario(scenario_path, overrides)
    if price_overrides:
        spec = spec.model_copy(update={"prices": {**spec.prices, **price_overrides}})
    model_ids = _model_ids(model if model is not None else spec.model)
    model_specs = [resolve_spec(m) for m in model_ids]
    first = model_specs[0]  # its answer length is every model's when none is given: the same traffic
    traffic = build_traffic(spec, first)
    targets = build_targets(spec)
    db = HardwareDB.load(hardware)
    cap = default_max_batch(stack, efficiency)
    profile = stack_profile(stack, efficiency)
    parts, decodings, release = [], [], {}
    for m in model_specs:
        own = build_decodings(spec, m, traffic, side_by_side=len(model_specs) > 1)
        space, pricing = build_space_and_pricing(spec, own, db, default_max_batch=cap)
        decodings += [d.label for d in space.decodings]
        release.update({d.label: behaviour.policy(profile, d).release for d in space.decodings})
        parts.append(plan(m, traffic, targets, space, pricing, requests=spec.simulation.requests,
                          seed=spec.simulation.seed, efficiency=efficiency, stack=stack, hardware=hardware,
                          baseline=baseline, absurd=absurd, progress=progress, ranked=ranked, prune=prune))
    result = parts[0]
    if len(parts) > 1:
        result = _side_by_side(parts, pareto_front, rank_key)
    result.model = ", ".join(m.id for m in model_specs)
    result.models = [m.id for m in model_specs]
    result.traffic = spec.traffic.model_dump() | dict(answer=spec.traffic.answer if spec.traffic.answer is not None
                                                       else (first.sampler.gen if first.sampler else 256))
    result.search = dict(gpus=[g.name for g in space.gpus], tp=space.tps, precisions=space.precisions,
                         decodings=list(dict.fromkeys(decodings)), max_batch=space.max_batches,
                         release=release,  # each decoding's batch release policy, as serve's
                         requests=spec.simulation.requests, seed=spec.simulation.seed,
                         power_utilisation=pricing.power_utilisation, absurd_shown=absurd,
                         ar_baseline=baseline)
    return result


def _model_ids(given) -> list[str]:
    """A model id, a comma list of them, or a list; LLaDA-8B-Instruct when none."""
    if not given:
        return ["GSAI-ML/LLaDA-8B-Instruct"]
    items = given if isinstance(given, list) else [given]
    ids = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    return list(dict.fromkeys(ids)) or ["GSAI-ML/LLaDA-8B-Instruct"]


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
                      evaluated=sum(p.evaluated for p in parts), skipped=skipped)


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
                pareto=[d.record() for d in result.deployments if d.pareto],
                ar_baseline=[d.record() for d in result.baseline],
                nearest_miss=result.nearest_miss.record() if result.nearest_miss else None)


__all__ = ["run", "to_record", "Deployment", "PlanResult"]


# the names dlmcost.api exports them by
run_plan, plan_record = run, to_record
