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
def list_stacks() -> list[dict]:
    """One record per bundled software stack: what it describes, which decodings run on it by
    default, its serving behaviour, the numbers fitted to published measurements (and on which
    validation points), its error band against measurements it was not fitted on, and its sources."""
    from ..inputs.error_bands import band_for, published_vendor_bands
    from ..inputs.stacks import DEFAULT_STACKS, bundled_stack_names, load_stack

    out = []
    for name in bundled_stack_names():
        s = load_stack(name)
        band = band_for(name)
        out.append(dict(name=s.name, description=s.description, version=s.version, as_of=s.as_of,
                        default_for=[kind for kind, n in DEFAULT_STACKS.items() if n == name],
                        max_running_requests=s.max_running_requests, release=s.release,
                        prefill_chunk_tokens=s.prefill_chunk_tokens, prefill_first=s.prefill_first,
                        max_running_by_gpu=[t.model_dump(exclude_none=True) for t in s.max_running_by_gpu],
                        prefill_chunk_by_memory=[t.model_dump(exclude_none=True) for t in s.prefill_chunk_by_memory],
                        api_servers=s.front_end.api_servers if s.front_end else None,
                        front_end_us_per_request=s.front_end.us_per_request if s.front_end else None,
                        first_token_us_per_layer=s.front_end.first_token_us_per_layer if s.front_end else None,
                        first_token_us_per_mla_layer=s.front_end.first_token_us_per_mla_layer if s.front_end else None,
                        fitted={field: list(points) for field, points in s.fitted.items()},
                        error_band=None if band is None else band.record(),
                        # its band on each vendor's parts that has one (the same engine runs other kernels there)
                        error_bands_by_vendor=[b.record() for b in published_vendor_bands(name)],
                        sources=dict(s.sources)))
    return out


def list_decodings(model: str | None = None, tasks: list[str] | None = None,
                   profiles: list[str] | None = None) -> list[dict]:
    """One record per published result (checkpoint x decoding setting x task): of the file that
    holds `model` (its architecture or one of its checkpoints), or of every file; only `tasks`
    when given. `profiles`: extra decoding-profile files or folders (a user's file for an
    architecture replaces the bundled one)."""
    from ..engine.schemes import SCHEMES
    from ..errors import UsageError
    from ..inputs.decoding_profiles import DecodingProfileError, ProfileDB, tpf_spread
    from ..safe_text import shown
    from .published import default_for

    db = ProfileDB.load(profiles)
    if model is None:
        chosen = db.profiles
    else:
        found = db.for_model(model)
        if found is None:
            raise UsageError(f"no published decodings for '{shown(model)}' (`dlmcost decodings` lists the models "
                             "and checkpoints that have them)")
        chosen = [found]
    records = []
    for p in chosen:
        # `*` marks what commands decode the model asked about with; the file's default otherwise
        default = default_for(p, model) if model is not None else (p.default.setting, p.default_task)
        for s in p.settings:
            if s.scheme not in SCHEMES:
                raise DecodingProfileError(f"decoding profile for {p.architecture}: setting '{s.key}' names scheme "
                                           f"'{s.scheme}', which dlmcost does not have ({', '.join(SCHEMES)})")
            for task, r in s.results.items():
                records.append(dict(
                    architecture=p.architecture, checkpoint=s.checkpoint, setting=s.key, name=s.name, label=s.label,
                    scheme=s.scheme, block=s.block, steps=s.steps, steps_per_block=s.steps_per_block,
                    threshold=s.threshold, mode=s.mode, gen_length=s.gen_length, task=task,
                    accuracy=r.accuracy, tpf=r.tpf, tpf_cv=tpf_spread(s, task), verified=r.verified,
                    default=(s.key, task) == default,
                    source=s.source.key, source_title=s.source.title, source_ref=s.source.ref,
                    source_url=s.source.url, tpf_counting=s.source.tpf_counting, location=r.location, note=r.note))
    if tasks:
        kept = [r for r in records if r["task"] in tasks]
        if not kept:
            known = sorted({r["task"] for r in records})
            raise UsageError(f"no published result for task {', '.join(map(shown, tasks))}; "
                             f"{'its' if model else 'the'} tasks: {', '.join(known)}")
        records = kept
    return records
