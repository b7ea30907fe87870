"""`dlmcost plan`: from traffic and latency targets to GPUs, replicas and dollars.

    traffic.py   arrivals (Poisson or closed loop) and prompt / answer lengths
    steptime.py  first-pass and later-pass times from the cost engine (the one adapter to the API)
    simulate.py  one replica: continuous batching at step granularity, discrete events
    search.py    the fewest replicas per candidate deployment, ranking, AR baseline
    results.py   result types, target checks, $/hour, $/Mtok, J/token, Pareto front
    scenario.py  the scenario YAML and command-line options
"""

from __future__ import annotations

from typing import Callable

from .results import Deployment
from .search import PlanResult


def run(scenario_path: str | None, overrides: dict, *, model: str | None = None, prices: list[str] = (),
        hardware: list[str] | None = None, efficiency: str = "realistic", stack: str | None = None,
        baseline: bool = True, progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Read the scenario, search the deployments, return the ranked result."""
    from ..inputs.hardware import HardwareDB
    from ..analysis.prepare import resolve_spec
    from .scenario import (build_decodings, build_space_and_pricing, build_targets, build_traffic, parse_price,
                           read_scenario)
    from .search import plan

    price_overrides = dict(parse_price(p) for p in prices)
    spec = read_scenario(scenario_path, overrides)
    if price_overrides:
        spec = spec.model_copy(update={"prices": {**spec.prices, **price_overrides}})
    model_id = model or spec.model or "GSAI-ML/LLaDA-8B-Instruct"
    model_spec = resolve_spec(model_id)
    traffic = build_traffic(spec, model_spec)
    targets = build_targets(spec)
    db = HardwareDB.load(hardware)
    space, pricing = build_space_and_pricing(spec, build_decodings(spec, model_spec, traffic), db)
    result = plan(model_spec, traffic, targets, space, pricing, requests=spec.simulation.requests,
                  seed=spec.simulation.seed, efficiency=efficiency, stack=stack, hardware=hardware, baseline=baseline,
                  progress=progress)
    result.model = model_spec.id
    result.traffic = spec.traffic.model_dump() | dict(answer=spec.traffic.answer if spec.traffic.answer is not None
                                                       else (model_spec.sampler.gen if model_spec.sampler else 256))
    result.search = dict(gpus=[g.name for g in space.gpus], tp=space.tps, precisions=space.precisions,
                         decodings=[d.label for d in space.decodings], max_batch=space.max_batches,
                         requests=spec.simulation.requests, seed=spec.simulation.seed,
                         power_utilisation=pricing.power_utilisation)
    return result


def to_record(result: PlanResult) -> dict:
    """Plain data for --format json (units in the key names)."""
    return dict(model=result.model, traffic=result.traffic, targets=result.targets, search=result.search,
                evaluated=result.evaluated, skipped=result.skipped,
                deployments=[d.record() for d in result.deployments],
                pareto=[d.record() for d in result.deployments if d.pareto],
                ar_baseline=[d.record() for d in result.baseline],
                nearest_miss=result.nearest_miss.record() if result.nearest_miss else None)


__all__ = ["run", "to_record", "Deployment", "PlanResult"]


# the names dlmcost.api exports them by
run_plan, plan_record = run, to_record
