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
