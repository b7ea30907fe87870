"""A calibration's own held-out error: each of the user's measurements predicted by a fit that did
not see it, and the error band `serve` and `plan` draw their ranges from for the calibrated stack.

For measurement i of N, the stack is fitted again (the same parameters, starting from the full
fit's values) to the measurements outside i's fold and predicts i:

    r_i = measured / predicted time per forward  (= predicted / measured speed, the published
          bands' ratio: above 1 the prediction was optimistic)

Up to MAX_FOLDS measurements, each is its own fold (leave-one-out); beyond, measurement i is in
fold i mod MAX_FOLDS, so that the refits stay MAX_FOLDS however long the file. A measurement whose
refit is refused (too few points left to pin the parameters, or a parameter they do not depend on)
has no r_i. The band, as the published bands are made (scripts/validation.py):

    MIN_NUMBERS r_i or more: low, median, high = the 10th, 50th, 90th percentile of the r_i
                              (numpy's linear interpolation)
    fewer:                    the stack's published band, widened to take in every r_i:
                              low = min(published low, min r_i), high = max(published high, max r_i),
                              median = the published median

so that a handful of measurements never narrows what was published on more.
"""

from __future__ import annotations

import numpy as np

from ..inputs.error_bands import CALIBRATION, MIN_NUMBERS, POOLED, ErrorBand

MAX_FOLDS = 10  # refits a calibration runs at most (leave-one-out up to this many measurements): ten-fold beyond


def folds(n: int) -> list[np.ndarray]:
    """The points each refit leaves out: one each up to MAX_FOLDS points, else i mod MAX_FOLDS."""
    count = min(n, MAX_FOLDS)
    return [np.arange(f, n, count) for f in range(count)]


def held_out_band(ratios: list[float], published: ErrorBand | None, measurements: int) -> dict | None:
    """The `held_out_error` a calibrated stack file carries (inputs/stacks.HeldOutError), from the
    held-out ratios there are; None with too few of them and no published band to widen."""
    n = len(ratios)
    each = "a fit without it" if measurements <= MAX_FOLDS else f"a fit without its fold ({MAX_FOLDS} folds)"
    missing = "" if n == measurements else f"; {measurements - n} of {measurements} could not be left out"
    said = f"held out: each of your measurements predicted by {each}{missing}"
    pub = None if published is None else dict(stack=published.stack, vendor=published.vendor, low=published.low,
                                              median=published.median, high=published.high, numbers=published.numbers)
    if n >= MIN_NUMBERS:
        low, median, high = (float(v) for v in np.percentile(ratios, [10, 50, 90]))
        return dict(ratios=ratios, low=low, median=median, high=high, basis=said, published=pub)
    if published is None:
        return None
    low, high = min([published.low, *ratios]), max([published.high, *ratios])
    widened = "" if (low, high) == (published.low, published.high) else ", widened to take in every held-out ratio"
    whose = ("the pooled" if published.stack == POOLED else f"{published.stack}'s") + (
        "" if published.vendor is None else f" on {published.vendor} parts")
    basis = (f"{whose} published band{widened}: the calibration has {n} held-out measurement"
             f"{'' if n == 1 else 's'}, fewer than {MIN_NUMBERS}{missing}")
    return dict(ratios=ratios, low=low, median=published.median, high=high, basis=basis, published=pub)


def summary(band: dict) -> dict:
    """The held-out error as `calibrate` prints it: the band, how many ratios it rests on, and its
    width against the published band's (ErrorBand.narrowing)."""
    p = band["published"]
    published = None if p is None else ErrorBand(p["stack"], p["low"], p["median"], p["high"], p["numbers"], "",
                                                 vendor=p.get("vendor"))
    as_band = ErrorBand("", band["low"], band["median"], band["high"], len(band["ratios"]), band["basis"],
                        CALIBRATION, published)
    return dict(ratios=len(band["ratios"]), low=band["low"], median=band["median"], high=band["high"],
                basis=band["basis"], published=p, narrowing=as_band.narrowing)
