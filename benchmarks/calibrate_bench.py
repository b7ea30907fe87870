"""Speed of `dlmcost calibrate validation/published.yaml`: a residual evaluation (every point's
predicted time under one trial stack) as calibrate does it, one vectorised engine call per model,
against a whole `analyze` of each point (how it was first done), and the whole fit.

    python benchmarks/calibrate_bench.py [--repeats R]

The two residual evaluations alternate within the run, so the ratio holds on a shared machine;
times are CPU seconds of this process (medians).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from dlmcost.calibration.calibrate import Problem, calibrate, parse_fit
from dlmcost.calibration.measurements import analysis_for, compare, load_points
from dlmcost.inputs.stacks import load_stack

PUBLISHED = Path(__file__).resolve().parent.parent / "validation" / "published.yaml"


def cpu_seconds(fn) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    points, base_dir = load_points(PUBLISHED)
    fit = parse_fit("fixed,gemm")
    problem = Problem(points, base_dir, load_stack(None), fit)
    theta = problem.theta0

    def point_by_point():
        s = problem.stack(theta)
        return [compare(p, analysis_for(p, base_dir, None, s, spec)[0]) for p, spec in zip(points, problem.specs)]

    vectorised, analyze_each, whole = [], [], []
    for _ in range(args.repeats):
        vectorised.append(cpu_seconds(lambda: problem.rows(theta)))
        analyze_each.append(cpu_seconds(point_by_point))
        whole.append(cpu_seconds(lambda: calibrate(points, base_dir, load_stack(None), fit, "bench")))
    v, a = statistics.median(vectorised), statistics.median(analyze_each)
    print(f"{len(points)} points; one residual evaluation: vectorised {v * 1e3:.1f} ms, "
          f"analyze per point {a * 1e3:.1f} ms ({a / v:.1f}x); whole fit {statistics.median(whole):.2f} s")


if __name__ == "__main__":
    main()
