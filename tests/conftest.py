"""Suite-wide settings.

BLAS: one thread per process. The suite runs one pytest worker per core plus the subprocesses some
tests start; OpenBLAS's default of a thread per core then has its threads spin-waiting for each
other on tiny matrices (tests/test_measure.py took 16 s of CPU instead of 3). Set before numpy is
imported (here, before any test module); inherited by the subprocesses; a value the caller set
wins.

Hypothesis: one profile for every property test (tests/test_properties.py). Deterministic and
modest by default, so the suite meets its time budget (issue 7: the whole suite in 40 s on two
cores); DLMCOST_FUZZ_SCALE=10 runs ten times as many random examples, not derandomized.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

FUZZ_SCALE = float(os.environ.get("DLMCOST_FUZZ_SCALE", "1"))
EXAMPLES = 25  # per property at scale 1; each example of the CLI properties is a full command

settings.register_profile(
    "dlmcost",
    max_examples=max(1, int(EXAMPLES * FUZZ_SCALE)),
    deadline=None,
    derandomize=FUZZ_SCALE == 1,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("dlmcost")


@pytest.fixture(autouse=True)
def _no_terminal_size_from_the_caller(monkeypatch):
    """Tables follow $COLUMNS: a test that needs a width sets it. Without this, output depended on
    the caller's environment (pytest-xdist workers, for one, run with COLUMNS=80 LINES=24)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
