"""Fit the numbers of hardware and stack files that published measurements set:

- a GPU's rows scale on the software stack's GEMM curve (`efficiency.gemm_rows_scale`: the curve is
  read at M / scale rows) and the share of its GEMM efficiency whole forwards sustain
  (`efficiency.sustained_compute`), together, to two full-canvas (compute-bound) points of one
  model on that GPU, at batch 1 and batch 4 (M = 512 and 2,048 rows);
- where a GPU's published decode speed says its kernels do not reach the generic share of its
  bandwidth, its achievable memory bandwidth (`efficiency.memory_bandwidth`);
- the host time of a reference MoE block's loop over its experts (a stack's `host.us_per_expert`).

    python scripts/fit_hardware_efficiency.py     # prints the fitted values

The points are FITS' below (validation/published.yaml ids; `serving:` ones from
validation/serving.yaml, through `dlmcost serve`); every other point stays out of sample
(docs/validation.md marks the fitted ones in-sample). Each value makes its point's predicted time
equal the measured one: predicted time is monotonic in each value, so bisections in log(value)
find them (two values: the second's bisection around the first's).
"""

from __future__ import annotations

import contextlib
import functools
import io
import importlib.util
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlmcost.calibration.measurements import analysis_for, compare, load_points  # noqa: E402
from dlmcost.inputs.yaml_loader import load_yaml  # noqa: E402 - refuses a repeated key

DATA = ROOT / "validation" / "published.yaml"
SERVING = ROOT / "validation" / "serving.yaml"


@dataclass(frozen=True)
class Fit:
    file: str  # hardware/<file> or stacks/<file>
    points: tuple[str, ...]  # one per field, in the same order
    fields: tuple[tuple[str, str, tuple[float, float]], ...]  # (part of the file, field, range searched)


# the rows scale searched below 1: above, the batch-1 point needs more than the whole GEMM efficiency
# (sustained_compute > 1) and the batch-4 point's ratio turns back (a second, invalid crossing)
COMPUTE = (("efficiency", "sustained_compute", (0.2, 1.0)), ("efficiency", "gemm_rows_scale", (0.05, 1.0)))
FITS = (
    # d3LLM-LLaDA under SGLang, the full 512-token canvas at batch 1 and batch 4
    Fit("hardware/nvidia-a100-80gb-sxm4.yaml", ("sglang-d3llm-llada-a100", "sglang-d3llm-llada-batch4-a100"), COMPUTE),
    Fit("hardware/nvidia-h100-sxm.yaml", ("sglang-d3llm-llada-h100", "sglang-d3llm-llada-batch4-h100"), COMPUTE),
    Fit("hardware/nvidia-b200.yaml", ("sglang-d3llm-llada-b200", "sglang-d3llm-llada-batch4-b200"), COMPUTE),
    # FluxServe's eager LLaDA-8B forward at batch 32 on the 250 W A100 PCIe (the A100's rows scale kept)
    Fit("hardware/nvidia-a100-40gb-pcie.yaml", ("serving:fluxserve-llada-a100-b32",), COMPUTE[:1]),
    # a weight-streaming (memory-bound) decode: Qwen3-8B under SGLang on an H20
    Fit("hardware/nvidia-h20.yaml", ("sglang-qwen3-8b-h20",), (("efficiency", "memory_bandwidth", (0.05, 1.0)),)),
    # an MoE decode under transformers: Qwen3-30B-A3B, whose block loops over all 128 experts
    Fit("stacks/hf-eager.yaml", ("hf-qwen3-30b-a3b-h20",), (("host", "us_per_expert", (0.1, 10_000.0)),)),
)


@functools.lru_cache(maxsize=1)
def _published():
    """validation/published.yaml's points, read once (every bisection step reads one)."""
    return load_points(DATA)


def _validation_script():
    spec = importlib.util.spec_from_file_location("validation_script", ROOT / "scripts" / "validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ratio(point_id: str, file: Path, values: dict[tuple[str, str], float]) -> float:
    """predicted / measured time of a point with the file's fields set to `values`."""
    data = load_yaml(file.read_text(encoding="utf-8"))
    for (part, field), value in values.items():
        data[part][field] = value
        data["sources"].setdefault(field, "being fitted")
    with tempfile.TemporaryDirectory() as d:
        changed = Path(d) / file.name
        changed.write_text(yaml.safe_dump(data), encoding="utf-8")
        if point_id.startswith("serving:"):
            return _serving_ratio(point_id.split(":", 1)[1], changed, d)
        points, base = _published()
        p = next(q for q in points if q.id == point_id)
        if file.parent.name == "stacks":
            analysis, _ = analysis_for(p, base, stack=str(changed))
        else:
            analysis, _ = analysis_for(p, base, hardware=[d], stack=p.stack)
        return compare(p, analysis)["ratio"]


def _serving_ratio(point_id: str, changed: Path, folder: str) -> float:
    validation = _validation_script()
    p = next(q for q in load_yaml(SERVING.read_text(encoding="utf-8"))["points"] if q["id"] == point_id)
    (metric, measured), = p["measured"].items()
    assert metric == "forward_ms", "a time: larger values of the fitted fields are slower"
    command = " ".join(p["command"].split()) + f" --hardware {folder}"
    with contextlib.redirect_stderr(io.StringIO()):
        return validation.METRICS[metric][1](validation.serve_json(command)) / measured


def bisect(f, bounds: tuple[float, float]) -> float:
    """The value in `bounds` where f (monotonic) crosses 1."""
    lo, hi = (math.log(b) for b in bounds)
    rising = f(bounds[1]) > f(bounds[0])
    for _ in range(24):
        mid = (lo + hi) / 2
        if (f(math.exp(mid)) > 1.0) == rising:
            hi = mid
        else:
            lo = mid
    return math.exp((lo + hi) / 2)


def solve(fit: Fit) -> dict[tuple[str, str], float]:
    file = ROOT / fit.file
    keys = [(part, field) for part, field, _ in fit.fields]
    if len(fit.fields) == 1:
        return {keys[0]: bisect(lambda v: ratio(fit.points[0], file, {keys[0]: v}), fit.fields[0][2])}

    def first_given(second: float) -> float:
        return bisect(lambda v: ratio(fit.points[0], file, {keys[0]: v, keys[1]: second}), fit.fields[0][2])

    second = bisect(lambda v: ratio(fit.points[1], file, {keys[0]: first_given(v), keys[1]: v}), fit.fields[1][2])
    return {keys[0]: first_given(second), keys[1]: second}


def main() -> int:
    for fit in FITS:
        file = ROOT / fit.file
        data = load_yaml(file.read_text(encoding="utf-8"))
        now = {(part, field): data[part].get(field) for part, field, _ in fit.fields}
        fitted = solve(fit)
        shown = ", ".join(f"{field} {fitted[part, field]:.3f} (file: {now[part, field]})" for part, field in fitted)
        check = ", ".join(f"{point} {ratio(point, file, fitted):.3f}" for point in fit.points)
        print(f"{fit.file}: {shown}; predicted/measured then: {check}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
