"""Speed targets of `dlmcost plan`.

Issue 22 (in-process, after one warm-up run, `-f json`): the default search (the default GPU set:
every priced data-centre GPU; tp 1/2/4/8, bf16 and fp8, the model's own decodings, batch limit
256, 2000 simulated requests) at most 3 s; every priced GPU (--consumer) with four decodings at
most 5 s; `ten`: the first ten priced GPUs, under 10 s.

Issue 30 (the whole command in a fresh process, drawn as a table, as a new user runs it):
`pair`, two models side by side over the default GPUs, at most 3 s; `pair-tpf`, the same with
three tokens-per-forward settings (768 candidates), at most 3 s; `sglang`, LLaDA2.0-mini under
the sglang-dllm stack on two GPUs (batch limit 1, a first block outside it), at most 2 s.

    python benchmarks/plan_bench.py [--case NAME] [--repeats R] [--against DIR]

`--against DIR` times another checkout's `dlmcost` (its package directory on PYTHONPATH) on the
same command, run for run, interleaved with this one's: on a shared machine absolute times are
noise, their ratio is the measurement. Prints medians and minima of wall and CPU time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS_S = {"default": 3.0, "wide": 5.0, "ten": 10.0, "pair": 3.0, "pair-tpf": 3.0, "sglang": 2.0}
WIDE_DECODINGS = ["--scheme", "block", "--block", "32", "--tpf", "1,2,3,4"]  # four decodings
PAIR = ["plan", "inclusionAI/LLaDA2.0-mini,Qwen/Qwen3-30B-A3B", "--rate", "20", "--prompt", "1000", "--answer", "500",
        "--p95", "10"]
FRESH = {  # issue 30's commands, as a user types them
    "pair": PAIR,
    "pair-tpf": [*PAIR, "--tpf", "1,2.5,3"],
    "sglang": ["plan", "inclusionAI/LLaDA2.0-mini", "--rate", "20", "--prompt", "1000", "--answer", "500", "--p95",
               "10", "--stack", "sglang-dllm", "--gpu", "h100,mi300x"],
}


def ten_priced_gpus() -> list[str]:
    """The first ten GPUs with a bundled price (AMD, TPU, Trainium, Gaudi and NVIDIA parts)."""
    from dlmcost.inputs.hardware import HardwareDB

    return [g.name for g in HardwareDB.load().gpus.values() if g.price_per_hour][:10]


def run_once(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): on a shared machine the CPU time shows what
    the command costs when it has a core to itself."""
    from dlmcost.cli import main

    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(args)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    if rc not in (0, 8):
        raise SystemExit(f"dlmcost plan failed with exit code {rc}")
    return elapsed, cpu


def run_process(args: list[str], package_root: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `python -m dlmcost ARGS` in a fresh process, its output piped."""
    env = dict(os.environ, PYTHONPATH=str(package_root), HF_HUB_OFFLINE="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dlmcost", *args], env=env, cwd=package_root,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 8):
        raise SystemExit(f"dlmcost {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def report(label: str, runs: list[tuple[float, float]], target: float | None = None) -> float:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    med = statistics.median(walls)
    verdict = f" (target <= {target:g} s): {'PASS' if med <= target else 'FAIL'}" if target else ""
    print(f"  {label}: wall median {med:.2f} s, min {min(walls):.2f} s; CPU median {statistics.median(cpus):.2f} s, "
          f"min {min(cpus):.2f} s over {len(runs)} runs{verdict}")
    return med


def bench_fresh(case: str, repeats: int, against: Path | None) -> None:
    args = FRESH[case]
    print(f"dlmcost {' '.join(args[0:1] + args[1:])}  (case {case}, a fresh process, {os.cpu_count()} CPUs)")
    sides = {"this checkout": ROOT, **({f"against {against}": against} if against else {})}
    for root in sides.values():
        run_process(args, root)  # warm-up: bytecode caches written, files in the page cache
    runs = {name: [] for name in sides}
    for _ in range(repeats):
        for name, root in sides.items():
            runs[name].append(run_process(args, root))
    med = {name: report(name, r, TARGETS_S[case] if root == ROOT else None)
           for (name, r), root in zip(runs.items(), sides.values())}
    if against:
        other = f"against {against}"
        cpu = {n: statistics.median(c for _, c in r) for n, r in runs.items()}
        print(f"  ratio this / against: {med['this checkout'] / med[other]:.2f} by wall medians, "
              f"{cpu['this checkout'] / cpu[other]:.2f} by CPU medians")


def bench_in_process(case: str, repeats: int, model: str, rate: str, gpus: str | None) -> None:
    args = ["plan", model, "--rate", rate, "--p95", "5", "-f", "json"]
    if gpus or case == "ten":
        args += ["--gpu", ",".join(gpus.split(",") if gpus else ten_priced_gpus())]
    elif case == "wide":
        args += ["--consumer", *WIDE_DECODINGS]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run_once(args)  # warm-up
    print(" ".join(["dlmcost", *args]) + f"  (case {case}, in-process after a warm-up)")
    report("this checkout", [run_once(args) for _ in range(repeats)], TARGETS_S[case])


def main_bench() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="GSAI-ML/LLaDA-8B-Instruct")
    ap.add_argument("--rate", default="20")
    ap.add_argument("--case", choices=sorted(TARGETS_S), default="default")
    ap.add_argument("--gpus", help="comma list instead of the case's GPUs (in-process cases)")
    ap.add_argument("--against", type=Path, help="another checkout to time on the same command (fresh cases)")
    a = ap.parse_args()
    if a.case in FRESH:
        bench_fresh(a.case, a.repeats, a.against.resolve() if a.against else None)
    else:
        bench_in_process(a.case, a.repeats, a.model, a.rate, a.gpus)


if __name__ == "__main__":
    main_bench()
