"""Results as pandas DataFrames, for a notebook (the optional `pandas` extra): one row per GPU
(analyze), per configuration (sweep), per load point (serve), per deployment (plan), per entry
(gpus, models, schemes). Nested records become dotted columns (`memory.total_bytes`,
`latency_s.p99`), built by pandas from the records (a sweep's from its columns): no loop for the
caller to write. `result.to_pandas()` on each result, or `dlmcost.api.to_frame(result)` for any.
"""

from __future__ import annotations

from .errors import MissingExtraError, install_hint


def pandas():
    """The pandas module; one clear error (exit 9 from the CLI) when the extra is missing."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingExtraError(f"a DataFrame needs pandas, which is not installed: {install_hint('pandas')}") from None
    return pd


def from_records(records: list[dict], drop: tuple[str, ...] = (), **constant):
    """One row per record, nested dicts as dotted columns, `drop`ped keys left out (lists of
    records a row cannot hold: passes, ops, misses), `constant` columns first (the model...)."""
    pd = pandas()
    frame = pd.json_normalize([{k: v for k, v in r.items() if k not in drop} for r in records])
    for i, (name, value) in enumerate(constant.items()):
        frame.insert(i, name, [value] * len(frame))
    return frame


def from_columns(columns: dict):
    """One row per index of equal-length columns (a sweep's)."""
    return pandas().DataFrame(columns)
