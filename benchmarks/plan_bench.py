"""Speed targets of `dlmcost plan` (issue 22): the default search (the default GPU set: every
priced data-centre GPU; tp 1/2/4/8, bf16 and fp8, the model's own decodings, batch limit 256,
2000 simulated requests) at most 3 s; every priced GPU (--consumer) with four decodings at most 5 s.
`--case ten` is issue 9's: the first ten priced GPUs, under 10 s.

    python benchmarks/plan_bench.py [--case default|wide|ten] [--repeats R] [--model ID] [--rate RPS]

Times the whole command in-process after one warm-up run (imports and the bundled hardware and
model files are then loaded, as on a second invocation), and prints the median and minimum.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import time

from dlmcost.cli import main
from dlmcost.inputs.hardware import HardwareDB

TARGETS_S = {"default": 3.0, "wide": 5.0, "ten": 10.0}
WIDE_DECODINGS = ["--scheme", "block", "--block", "32", "--tpf", "1,2,3,4"]  # four decodings


def ten_priced_gpus() -> list[str]:
    """The first ten GPUs with a bundled price (AMD, TPU, Trainium, Gaudi and NVIDIA parts)."""
    return [g.name for g in HardwareDB.load().gpus.values() if g.price_per_hour][:10]


def run_once(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): on a shared machine the CPU time shows what
    the command costs when it has a core to itself."""
    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(args)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    if rc not in (0, 8):
        raise SystemExit(f"dlmcost plan failed with exit code {rc}")
    return elapsed, cpu


def main_bench() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="GSAI-ML/LLaDA-8B-Instruct")
    ap.add_argument("--rate", default="20")
    ap.add_argument("--case", choices=sorted(TARGETS_S), default="default")
    ap.add_argument("--gpus", help="comma list instead of the case's GPUs")
    a = ap.parse_args()
    args = ["plan", a.model, "--rate", a.rate, "--p95", "5", "-f", "json"]
    if a.gpus or a.case == "ten":
        gpus = a.gpus.split(",") if a.gpus else ten_priced_gpus()
        args += ["--gpu", ",".join(gpus)]
    elif a.case == "wide":
        args += ["--consumer", *WIDE_DECODINGS]
    target = TARGETS_S[a.case]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run_once(args)  # warm-up
    runs = [run_once(args) for _ in range(a.repeats)]
    times, cpus = [w for w, _ in runs], [c for _, c in runs]
    med, best = statistics.median(times), min(times)
    print(" ".join(["dlmcost", *args]) + f"  (case {a.case})")
    print(f"wall time: median {med:.2f} s, min {best:.2f} s over {a.repeats} runs on {os.cpu_count()} CPUs "
          f"(target <= {target:g} s): {'PASS' if med <= target else 'FAIL'}; CPU time median "
          f"{statistics.median(cpus):.2f} s")


if __name__ == "__main__":
    main_bench()
