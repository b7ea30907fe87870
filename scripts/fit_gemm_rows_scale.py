"""Fit each GPU's rows scale on the software stack's GEMM curve (`efficiency.gemm_rows_scale` in the
hardware file: the curve is read at M / scale rows) to published per-forward times, one
compute-bound point per GPU.

    python scripts/fit_gemm_rows_scale.py     # prints the fitted factor of each GPU

The points fitted are FITTED below (validation/published.yaml ids); every other point of that
file stays out of sample (docs/validation.md marks the fitted ones in-sample). For each GPU the
scale is the one at which the point's predicted time per forward equals the measured one: the
predicted time rises monotonically with the scale, so a bisection in log(scale) finds it.
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlmcost.calibration.measurements import analysis_for, compare, load_points  # noqa: E402
from dlmcost.inputs.hardware import HardwareDB  # noqa: E402

DATA = ROOT / "validation" / "published.yaml"
# one full-canvas (compute-bound) point per GPU: d3LLM-LLaDA under SGLang on A100, H100 and B200
FITTED = ("sglang-d3llm-llada-a100", "sglang-d3llm-llada-h100", "sglang-d3llm-llada-b200")


def predicted_ratio(point, base, gpu_file: Path, factor: float, spec) -> float:
    """predicted / measured time per forward with the GPU's rows scale set to `factor`."""
    data = yaml.safe_load(gpu_file.read_text(encoding="utf-8"))
    data["efficiency"]["gemm_rows_scale"] = factor
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / gpu_file.name).write_text(yaml.safe_dump(data), encoding="utf-8")
        analysis, _ = analysis_for(point, base, hardware=[d], stack=point.stack, spec=spec)
    return compare(point, analysis)["ratio"]


def fit(point, base, gpu_file: Path, spec) -> float:
    lo, hi = math.log(0.05), math.log(20.0)
    for _ in range(40):
        mid = (lo + hi) / 2
        if predicted_ratio(point, base, gpu_file, math.exp(mid), spec) > 1.0:
            hi = mid  # too slow: fewer rows needed
        else:
            lo = mid
    return math.exp((lo + hi) / 2)


def main() -> int:
    points, base = load_points(DATA)
    db = HardwareDB.load()
    files = {p.stem: p for p in (ROOT / "hardware").glob("*.yaml")}
    for p in points:
        if p.id not in FITTED:
            continue
        gpu = db.get(p.gpu)
        gpu_file = next(f for f in files.values() if yaml.safe_load(f.read_text(encoding="utf-8"))["name"] == gpu.name)
        analysis, spec = analysis_for(p, base, stack=p.stack)
        before = compare(p, analysis)["ratio"]
        factor = fit(p, base, gpu_file, spec)
        print(f"{p.id}: {gpu.name} ({gpu_file.name}): predicted/measured {before:.3f} at the file's factor "
              f"{gpu.efficiency.gemm_rows_scale:g}; fitted gemm_rows_scale {factor:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
