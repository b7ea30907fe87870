"""The published error bands file (`error_bands.json`, beside this module, written by
`python scripts/validation.py`) as read: error_bands.py turns its entries into bands, and a stack
file's `held_out_error` (stacks.py) is checked against the names in it."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

BANDS_FILE = Path(__file__).with_name("error_bands.json")


@lru_cache(maxsize=1)
def published_bands() -> dict:
    """Each stack's entry in the file (the pooled one too); empty where it was not generated."""
    try:
        doc = json.loads(BANDS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a checkout without the generated file: no intervals
        return {}
    return doc.get("bands", {}) if isinstance(doc, dict) else {}


def published_names() -> dict[str, list[str]]:
    """Each stack with a published band and the vendors (lower case) it has a band on."""
    return {stack: sorted(v for v, band in (entry.get("vendors") or {}).items() if isinstance(band, dict))
            for stack, entry in published_bands().items() if isinstance(entry, dict)}
