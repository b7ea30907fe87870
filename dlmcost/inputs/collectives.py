"""How a collective's achievable link bandwidth falls with its message size: the curve in
`collective_bandwidth.json` (beside this module, with its published source). A hardware file's
`efficiency.link` is the large-message figure (NCCL's bus bandwidth at gigabytes); a tensor-parallel
all-reduce of a few megabytes reaches well under it, and the engine reads this curve at the bytes
each GPU sends in one collective (docs/methodology.md, "Collectives")."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

CURVE_FILE = Path(__file__).with_name("collective_bandwidth.json")


@lru_cache(maxsize=1)
def link_share_curve() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(bytes each GPU sends in one collective, share of the link efficiency it reaches), ascending."""
    data = json.loads(CURVE_FILE.read_text(encoding="utf-8"))
    return tuple(map(float, data["sent_bytes"])), tuple(map(float, data["share_of_link"]))
