"""Fit the numbers of hardware and stack files that published measurements set, one point each: a
GPU's rows scale on the software stack's GEMM curve (`efficiency.gemm_rows_scale`: the curve is
read at M / scale rows); where a GPU's published decode speed says its kernels do not reach the
generic share of its bandwidth, its achievable memory bandwidth (`efficiency.memory_bandwidth`);
and the host time of a reference MoE block's loop over its experts (a stack's `host.us_per_expert`).

    python scripts/fit_hardware_efficiency.py     # prints the fitted value of each

The points fitted are FITTED below (validation/published.yaml ids); every other point of that
file stays out of sample (docs/validation.md marks the fitted ones in-sample). For each, the value
is the one at which the point's predicted time per forward equals the measured one: the predicted
time is monotonic in the value, so a bisection in log(value) finds it.
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
# point id: (the file's part ("efficiency" of the GPU's hardware file, "host" of the point's
# stack file), the field, the range searched)
FITTED = {
    # one full-canvas (compute-bound) point per GPU: d3LLM-LLaDA under SGLang on A100, H100 and B200
    "sglang-d3llm-llada-a100": ("efficiency", "gemm_rows_scale", (0.05, 20.0)),
    "sglang-d3llm-llada-h100": ("efficiency", "gemm_rows_scale", (0.05, 20.0)),
    "sglang-d3llm-llada-b200": ("efficiency", "gemm_rows_scale", (0.05, 20.0)),
    # a weight-streaming (memory-bound) decode: Qwen3-8B under SGLang on an H20
    "sglang-qwen3-8b-h20": ("efficiency", "memory_bandwidth", (0.05, 1.0)),
    # an MoE decode under transformers: Qwen3-30B-A3B, whose block loops over all 128 experts
    "hf-qwen3-30b-a3b-h20": ("host", "us_per_expert", (0.1, 10_000.0)),
}


def predicted_ratio(point, base, file: Path, part: str, field: str, value: float, spec) -> float:
    """predicted / measured time per forward with `field` of `part` of `file` set to `value`."""
    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    data[part][field] = value
    with tempfile.TemporaryDirectory() as d:
        changed = Path(d) / file.name
        changed.write_text(yaml.safe_dump(data), encoding="utf-8")
        if part == "host":  # a stack file
            analysis, _ = analysis_for(point, base, stack=str(changed), spec=spec)
        else:
            analysis, _ = analysis_for(point, base, hardware=[d], stack=point.stack, spec=spec)
    return compare(point, analysis)["ratio"]


def fit(point, base, file: Path, part: str, field: str, bounds: tuple[float, float], spec) -> float:
    lo, hi = (math.log(b) for b in bounds)
    rising = predicted_ratio(point, base, file, part, field, bounds[1], spec) > \
        predicted_ratio(point, base, file, part, field, bounds[0], spec)  # a larger value predicts slower
    for _ in range(40):
        mid = (lo + hi) / 2
        if (predicted_ratio(point, base, file, part, field, math.exp(mid), spec) > 1.0) == rising:
            hi = mid
        else:
            lo = mid
    return math.exp((lo + hi) / 2)


def main() -> int:
    points, base = load_points(DATA)
    db = HardwareDB.load()
    hardware_files = list((ROOT / "hardware").glob("*.yaml"))
    for p in points:
        if p.id not in FITTED:
            continue
        part, field, bounds = FITTED[p.id]
        if part == "host":
            file = ROOT / "stacks" / f"{p.stack}.yaml"
            now = yaml.safe_load(file.read_text(encoding="utf-8"))["host"].get(field, 0)
        else:
            gpu = db.get(p.gpu)
            file = next(f for f in hardware_files if yaml.safe_load(f.read_text(encoding="utf-8"))["name"] == gpu.name)
            now = getattr(gpu.efficiency, field)
        analysis, spec = analysis_for(p, base, stack=p.stack)
        before = compare(p, analysis)["ratio"]
        value = fit(p, base, file, part, field, bounds, spec)
        print(f"{p.id}: {file.name}: predicted/measured {before:.3f} at the file's {field} {now:g}; "
              f"fitted {field} {value:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
