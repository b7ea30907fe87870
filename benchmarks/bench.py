"""Speed targets of issue 2, measured as ratios within one run (machines here are shared).

1. Engine throughput: configurations per second through `engine.evaluate` on a grid of at least
   100,000 configurations (all five schemes, a spread of prompt/gen/steps/block/batch, two GPUs).
   Target: >= 100,000 configurations/s.
2. CLI wall time: `dlmcost analyze` (default model and GPUs) against the time Python takes to
   import the same dependencies (typer, rich, pydantic, yaml, numpy). Target: <= 1.5x that floor.

    python benchmarks/bench.py [--configs N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from dlmcost.api import build_grid
from dlmcost.engine import evaluate
from dlmcost.hardware import HardwareDB
from dlmcost.models import load_bundled
from dlmcost.precision import get_precision
from dlmcost.profiles import Profile
from dlmcost.roofline import gpu_rates

# The same third-party imports dlmcost's CLI makes, names included: pydantic resolves
# `BaseModel` & co. lazily, so `import pydantic` alone would leave most of it out.
FLOOR_IMPORTS = ("import typer, click, yaml, numpy; from rich.console import Console; from rich.table import Table; "
                 "from rich.text import Text; from rich import box; "
                 "from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator")


def make_grid(n: int):
    rng = np.random.default_rng(0)
    schemes = np.array(["ar", "mdm", "prefix-cache", "dual-cache", "block"])
    scheme = schemes[rng.integers(0, 5, n)]
    block = 2.0 ** rng.integers(0, 7, n)  # 1..64
    gen = block * 2.0 ** rng.integers(1, 6, n)  # 2..32 blocks
    nb = gen / block
    steps = nb * rng.integers(1, 9, n)
    db = HardwareDB.load()
    rates = [gpu_rates(db.get(g), get_precision("bf16"), Profile("realistic")) for g in ("h100", "mi300x")]
    cols = dict(scheme=scheme, prompt=rng.integers(0, 2048, n).astype(float), gen=gen, steps=steps, block=block,
                batch=2.0 ** rng.integers(0, 8, n), store_pass=rng.random(n) < 0.3, logits_committed=False,
                wbytes=2.0, kvbytes=2.0, all_experts=False)
    return build_grid(cols, rates, rng.integers(0, 2, n))


def bench_engine(n: int, repeats: int) -> None:
    for model_id in ("GSAI-ML/LLaDA-8B-Instruct", "inclusionAI/LLaDA2.0-mini"):
        m = load_bundled(model_id)
        grid = make_grid(n)
        evaluate(m, grid.take(np.arange(1000)))  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            ev = evaluate(m, grid)
            times.append(time.perf_counter() - t0)
        assert np.all(np.isfinite(ev.total.time_s)) and np.all(ev.total.time_s > 0)
        best = min(times)
        print(f"engine  {model_id:28s} {n:,} configs: best {best:.3f} s, median {statistics.median(times):.3f} s "
              f"-> {n / best:,.0f} configs/s (target >= 100,000)")


def walls(cmds: dict[str, list[str]], repeats: int) -> dict[str, list[float]]:
    """Wall times of each command, interleaved run by run so that load on a shared machine
    hits both sides of the ratio alike. Both sides run as a user's would: with bytecode caches
    (PYTHONDONTWRITEBYTECODE removed; one untimed warm-up run writes dlmcost's .pyc files, as
    `pip install` does for every installed package)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times = {name: [] for name in cmds}
    for cmd in cmds.values():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    for _ in range(repeats):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
            times[name].append(time.perf_counter() - t0)
    return times


def bench_cli(repeats: int) -> None:
    t = walls({"floor": [sys.executable, "-c", FLOOR_IMPORTS],
               "analyze": [sys.executable, "-m", "dlmcost", "analyze"]}, repeats)
    floor, analyze = statistics.median(t["floor"]), statistics.median(t["analyze"])
    print(f"cli     import floor (typer, click, rich, pydantic BaseModel & validators, yaml, numpy): "
          f"median {floor * 1e3:.0f} ms, min {min(t['floor']) * 1e3:.0f} ms")
    print(f"cli     dlmcost analyze (default model, 7 GPUs): median {analyze * 1e3:.0f} ms, "
          f"min {min(t['analyze']) * 1e3:.0f} ms -> {analyze / floor:.2f}x the floor by medians, "
          f"{min(t['analyze']) / min(t['floor']):.2f}x by minima (target <= 1.5x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    bench_engine(args.configs, args.repeats)
    bench_cli(args.repeats)


if __name__ == "__main__":
    main()
