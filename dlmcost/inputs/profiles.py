"""Efficiency profiles: `ideal`, `realistic` (each GPU's published figures), or a user's file.

A profile file is a YAML mapping like the `efficiency:` block of a hardware file; it applies to
every GPU. It is read through the one bounded reader (`files.py`) and validated by the same
`Efficiency` model as the hardware files, so the same ranges hold.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pydantic import ValidationError

from . import files
from ..errors import UsageError
from .hardware import GPU, Efficiency
from ..safe_text import shown

PROFILES = ("realistic", "ideal")
IDEAL = Efficiency(memory_bandwidth=1.0, gemm={}, overhead_us_per_op=0.0, link=1.0, collective_latency_us=0.0)


@dataclass(frozen=True)
class Profile:
    """An efficiency profile: `ideal`, `realistic`, or `custom:<file name>` with its `Efficiency`."""

    name: str
    custom: Efficiency | None = None

    def efficiency(self, gpu: GPU) -> Efficiency:
        if self.name == "ideal":
            return IDEAL
        return self.custom or gpu.efficiency


def load_profile(spec: str) -> Profile:
    """A profile name or the path of an efficiency file (errors are usage errors, exit 2)."""
    if spec in PROFILES:
        return Profile(spec)
    what = "efficiency file"
    path = files.expand(spec, UsageError, what)
    if not os.path.lexists(path) and "/" not in spec and "." not in spec:  # a name, not a path
        raise UsageError(f"unknown efficiency profile '{shown(spec)}': use {', '.join(PROFILES)} or a YAML file")
    data = files.read_document(path, limit=files.HARDWARE_LIMIT, error=UsageError, what=what, fmt="yaml")
    if not isinstance(data, dict):
        raise UsageError(f"{what} {shown(spec)} must be a mapping like the `efficiency:` block of a hardware file")
    try:
        return Profile(f"custom:{path.name}", Efficiency.model_validate(data))
    except ValidationError as exc:
        raise UsageError(f"{what} {shown(spec)}: {files.validation_message(exc)}") from None
