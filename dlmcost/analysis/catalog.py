"""What `dlmcost schemes` and `dlmcost gpus` list: the decoding schemes of the registry and the
accelerators of the database, as plain records and GPU entries, and how old each list price is."""

from __future__ import annotations

import datetime
import warnings

from ..engine.schemes import REGISTRY
from ..errors import DlmcostWarning
from ..inputs.hardware import GPU, HardwareDB
from ..safe_text import shown

STALE_PRICE_DAYS = 365  # a list price older than this is warned about: prices moved 2x within 2025-2026


def today() -> datetime.date:
    """The date prices are aged against (tests set a fixed one)."""
    return datetime.date.today()


def list_schemes() -> list[dict]:
    """One record per registered scheme, in the registry's order."""
    return [dict(name=s.name, summary=s.summary, knobs=", ".join(s.knobs) or "-", stops_at_eos=s.stops_at_eos)
            for s in REGISTRY.values()]


def list_gpus(hardware: list[str] | None = None) -> list[GPU]:
    """The bundled GPUs and those of `hardware` files, in the database's order."""
    return list(HardwareDB.load(hardware).gpus.values())


def price_ages(gpus: list[GPU], on: datetime.date | None = None) -> dict[str, dict]:
    """By GPU key: `days` from its list price's date (`Price.dated`) to `on` (default: today;
    None without a price or a date), and whether it is `stale` (older than STALE_PRICE_DAYS),
    which also gets a warning naming its date."""
    on = on or today()
    ages: dict[str, dict] = {}
    for g in gpus:
        dated = g.price_per_hour.dated if g.price_per_hour is not None else None
        days = None if dated is None else (on - dated).days
        ages[g.key] = dict(days=days, stale=days is not None and days > STALE_PRICE_DAYS)
        if ages[g.key]["stale"]:
            warnings.warn(f"the list price of {shown(g.name)} (${g.price_per_hour.usd:g}/h) is dated "
                          f"{shown(g.price_per_hour.as_of)}, {days:,} days before {on.isoformat()}: list "
                          f"prices move, check it (`dlmcost plan --price {g.key}=USD` plans with yours)",
                          DlmcostWarning, stacklevel=2)
    return ages
