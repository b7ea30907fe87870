"""How far each software stack's predictions have been from published measurements it was not
fitted on: the error bands `serve` and `plan` turn into intervals.

`error_bands.json` (beside this module) is written by `python scripts/validation.py` from the
validation's out-of-source numbers (docs/validation.md, "Error bands"); nothing here is typed in.
A band is the 10th, 50th and 90th percentile of predicted speed / measured speed: above 1 the
prediction was optimistic. A stack without enough out-of-source numbers of its own carries the
band of all stacks together, and says so (`basis`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

BANDS_FILE = Path(__file__).with_name("error_bands.json")
POOLED = "pooled"


@dataclass(frozen=True)
class ErrorBand:
    """Predicted / measured speed at the 10th, 50th and 90th percentile, over `numbers` numbers."""

    stack: str
    low: float
    median: float
    high: float
    numbers: int
    basis: str

    def speed_interval(self, predicted: float) -> tuple[float, float]:
        """Where a predicted speed (tokens/s, requests/s) is likely to land: predicted / high to
        predicted / low (an optimistic band moves it down)."""
        return predicted / self.high, predicted / self.low

    def time_interval(self, predicted: float) -> tuple[float, float]:
        """The same for a time or a cost per token (inverse to speed): predicted x low to x high."""
        return predicted * self.low, predicted * self.high


@lru_cache(maxsize=1)
def _bands() -> dict:
    try:
        doc = json.loads(BANDS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a checkout without the generated file: no intervals
        return {}
    return doc.get("bands", {}) if isinstance(doc, dict) else {}


def band_for(stack: str | None) -> ErrorBand | None:
    """The band of a bundled stack by name; a user's stack file (or an unknown name) takes the
    pooled band of every stack; None when no band was generated."""
    bands = _bands()
    entry = bands.get(stack or "") or bands.get(POOLED)
    if not isinstance(entry, dict):
        return None
    name = stack if stack in bands else POOLED
    basis = entry.get("basis", "") if name != POOLED or stack in (None, POOLED) else \
        f"pooled band of every stack ({stack} has no validation of its own)"
    return ErrorBand(name, float(entry["low"]), float(entry["median"]), float(entry["high"]),
                     int(entry["numbers"]), basis)
