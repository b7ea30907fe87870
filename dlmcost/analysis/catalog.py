"""What `dlmcost schemes` and `dlmcost gpus` list: the decoding schemes of the registry and the
accelerators of the database, as plain records and GPU entries."""

from __future__ import annotations

from ..engine.schemes import REGISTRY
from ..inputs.hardware import GPU, HardwareDB


def list_schemes() -> list[dict]:
    """One record per registered scheme, in the registry's order."""
    return [dict(name=s.name, summary=s.summary, knobs=", ".join(s.knobs) or "-", stops_at_eos=s.stops_at_eos)
            for s in REGISTRY.values()]


def list_gpus(hardware: list[str] | None = None) -> list[GPU]:
    """The bundled GPUs and those of `hardware` files, in the database's order."""
    return list(HardwareDB.load(hardware).gpus.values())


def list_stacks() -> list[dict]:
    """One record per bundled software stack: what it describes, which decodings run on it by
    default, its serving behaviour, the numbers fitted to published measurements (and on which
    validation points), its error band against measurements it was not fitted on, and its sources."""
    from ..inputs.error_bands import band_for
    from ..inputs.stacks import DEFAULT_STACKS, bundled_stack_names, load_stack

    out = []
    for name in bundled_stack_names():
        s = load_stack(name)
        band = band_for(name)
        out.append(dict(name=s.name, description=s.description, version=s.version, as_of=s.as_of,
                        default_for=[kind for kind, n in DEFAULT_STACKS.items() if n == name],
                        max_running_requests=s.max_running_requests, release=s.release,
                        fitted={field: list(points) for field, points in s.fitted.items()},
                        error_band=None if band is None else dict(low=band.low, median=band.median, high=band.high,
                                                                  numbers=band.numbers, basis=band.basis),
                        sources=dict(s.sources)))
    return out
