"""How far each software stack's predictions have been from published measurements it was not
fitted on: the error bands `serve` and `plan` turn into intervals.

`error_bands.json` (beside this module) is written by `python scripts/validation.py` from the
validation's out-of-source numbers (docs/validation.md, "Error bands"); nothing here is typed in.
A band is the 10th, 50th and 90th percentile of predicted speed / measured speed: above 1 the
prediction was optimistic. A stack without enough out-of-source numbers of its own carries the
band of all stacks together, and says so (`basis`). Each band has a second one for the time to
the first token (`first_token`, a speed being 1 / TTFT): a fixed cost per request that no step
time describes moves it alone, so its errors are kept out of the throughputs' intervals.

A stack file `dlmcost calibrate` wrote carries a band of its own instead (`held_out_error`: each
of the user's measurements predicted by a fit that did not see it, calibration/held_out.py); the
published band it stands in for travels with it, so that the output can say how much narrower it is.
Its first-token band is the published one's excess over the published speed band, on its own band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .published_bands import BANDS_FILE  # noqa: F401 (the file its bands come from)
from .published_bands import published_bands as _bands

POOLED = "pooled"
# A band of its own needs this many numbers: a stack's out-of-source validation numbers
# (scripts/validation.py), a calibration's held-out measurements (calibration/held_out.py).
MIN_NUMBERS = 6
VALIDATION, CALIBRATION = "validation", "calibration"  # where a band comes from


@dataclass(frozen=True)
class ErrorBand:
    """Predicted / measured speed at the 10th, 50th and 90th percentile, over `numbers` numbers."""

    stack: str
    low: float
    median: float
    high: float
    numbers: int
    basis: str
    source: str = VALIDATION
    # a calibration's band: the published band of the stack it was calibrated from (None otherwise)
    published: "ErrorBand | None" = None
    # the band of the times to the first token (None: this band serves them too)
    first_token: "ErrorBand | None" = None
    # the vendor whose parts the band was taken on (None: every vendor's)
    vendor: str | None = None

    @property
    def label(self) -> str:
        """How the output names the band: the stack's name, and the vendor's parts where the band
        is one vendor's ('sglang on AMD parts')."""
        return self.stack if self.vendor is None else f"{self.stack} on {self.vendor} parts"

    @property
    def width(self) -> float:
        """ln(high / low): how far apart the interval's two ends are, in log terms (an interval
        runs from predicted / high to predicted / low, a factor high / low)."""
        return math.log(self.high / self.low)

    @property
    def narrowing(self) -> float | None:
        """The published band's width / this band's: above 1, narrower. None for a published band,
        or a calibration's band of no width (every held-out ratio the same)."""
        if self.published is None or self.width <= 0:
            return None
        return self.published.width / self.width

    def first_token_scales(self) -> tuple[float, float]:
        """How much further than the step times a time to the first token moves at the band's low
        and high end: the first-token band's end / this band's (1, 1 without a first-token band).
        At light load, where the first token is one pass, it then moves by the first-token band."""
        first = self.first_token or self
        return first.low / self.low, first.high / self.high

    def record(self) -> dict:
        """The band as the JSON prints it (documents.ErrorBand)."""
        published, first = self.published, self.first_token
        return dict(stack=self.stack, vendor=self.vendor, label=self.label, low=self.low, median=self.median,
                    high=self.high, numbers=self.numbers, basis=self.basis, source=self.source,
                    published=None if published is None else dict(stack=published.stack, vendor=published.vendor,
                                                                  low=published.low,
                                                                  median=published.median, high=published.high,
                                                                  numbers=published.numbers),
                    narrowing=self.narrowing,
                    first_token=None if first is None else dict(low=first.low, median=first.median, high=first.high,
                                                                numbers=first.numbers, basis=first.basis))


def band_for(stack: str | None, vendor: str | None = None) -> ErrorBand | None:
    """The band a stack's ranges are drawn from on a vendor's parts (None: every vendor's): a
    calibrated stack file's own held-out band, else `published_band_for`'s."""
    return calibrated_band(stack) or published_band_for(stack, vendor)


def calibrated_band(stack: str | None) -> ErrorBand | None:
    """The band `dlmcost calibrate` wrote into a stack file (`held_out_error`); None for a bundled
    stack's name or a stack file without one."""
    from .stacks import load_stack, stack_file_named

    if stack is None or not stack_file_named(stack):
        return None
    calibrated = load_stack(stack)
    held = calibrated.held_out_error
    if held is None:
        return None
    p = held.published
    published = None if p is None else ErrorBand(p.stack, p.low, p.median, p.high, p.numbers, "published",
                                                 vendor=p.vendor)
    band = ErrorBand(calibrated.name, held.low, held.median, held.high, len(held.ratios), held.basis,
                     CALIBRATION, published)
    start = published_band_for(p.stack if p is not None else None, p.vendor if p is not None else None)
    return band if start is None else replace(band, first_token=first_token_beyond(band, start))


def first_token_beyond(band: ErrorBand, published: ErrorBand) -> ErrorBand | None:
    """A calibrated band's first-token band: the published first-token band's excess over the
    published speed band (`first_token_scales`), on the calibrated band. A calibration measures
    passes, not first tokens, so the excess stays; but the published first-token ratios were taken
    against the uncalibrated predictions, whose step times the calibration has already corrected:
    the published first-token band on the calibrated prediction would count that correction twice."""
    first = published.first_token
    if first is None:
        return None
    (low, high), median = published.first_token_scales(), first.median / published.median
    return ErrorBand(first.stack, band.low * low, band.median * median, band.high * high, first.numbers,
                     f"{published.stack}'s published first-token band {first.low:.2f}–{first.high:.2f}× over its "
                     f"speed band {published.low:.2f}–{published.high:.2f}×, on this band (a calibration measures "
                     f"passes, not first tokens)")


def published_band_for(stack: str | None, vendor: str | None = None) -> ErrorBand | None:
    """The published band of a bundled stack by name, on a vendor's parts where the validation
    has a band there (`vendors`; else the band on every vendor's parts); a user's stack file (or
    an unknown name) takes the pooled band of every stack; None when no band was generated."""
    bands = _bands()
    entry = bands.get(stack or "") or bands.get(POOLED)
    if not isinstance(entry, dict):
        return None
    name = stack if stack in bands else POOLED
    own = name != POOLED or stack in (None, POOLED)
    on_vendor = (entry.get("vendors") or {}).get((vendor or "").lower())
    if isinstance(on_vendor, dict):
        entry, vendor = on_vendor, on_vendor.get("vendor", vendor)
    else:
        vendor = None
    basis = entry.get("basis", "") if own else f"pooled band of every stack ({stack} has no validation of its own)"
    first = entry.get("first_token")
    first_band = None if not isinstance(first, dict) else ErrorBand(
        name, float(first["low"]), float(first["median"]), float(first["high"]), int(first["numbers"]),
        first.get("basis", "") if own else f"pooled first-token band of every stack ({stack} has no validation of its own)",
        vendor=vendor)
    return ErrorBand(name, float(entry["low"]), float(entry["median"]), float(entry["high"]),
                     int(entry["numbers"]), basis, first_token=first_band, vendor=vendor)


def published_vendor_bands(stack: str | None) -> list[ErrorBand]:
    """The published bands of a stack on each vendor's parts that has one (none where the
    validation has no band per vendor)."""
    entry = _bands().get(stack or "") or _bands().get(POOLED)
    vendors = entry.get("vendors") if isinstance(entry, dict) else None
    if not isinstance(vendors, dict):
        return []
    return [band for vendor in vendors if (band := published_band_for(stack, vendor)) is not None]
