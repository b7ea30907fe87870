"""Speed targets, measured as ratios within one run (machines here are shared, so absolute times
are noise; CPU time per process is printed beside wall time because it suffers less from the
other users of the cores).

1. Engine throughput: configurations per second through `engine.evaluate` on a grid of 200,000
   random configurations (the five classic schemes, prompt/gen/steps/block/batch spread, two
   GPUs), for a dense and an MoE model, on the bare roofline and under the default software
   stack. Target: >= 1,000,000 configurations/s for both models on the bare roofline (the
   benchmark the target was set on); under a stack (which came later) for reference.
2. `dlmcost analyze` (default model and GPUs) against the time Python takes to import the
   third-party modules that analyze loads (found by running it, see FLOOR_PROBE: rich's console,
   text and segment modules among them, since rich's Console draws the table). Target: <= 1.25x
   that floor.
3. `dlmcost analyze` against `llm-analysis infer` for Llama-2-7B, side by side, when an
   interpreter with llm-analysis installed is given (`--llm-analysis PYTHON`; e.g.
   `python3 -m venv /tmp/lla && /tmp/lla/bin/pip install llm-analysis`). Target: <= 0.6x.

4. Drawing a table: a 4000-row sweep table rendered whole. Target: <= 1 s.

    python benchmarks/bench.py [--configs N] [--repeats R] [--llm-analysis PYTHON] [--part engine|cli|render]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from dlmcost.api import build_grid
from dlmcost.engine.evaluation import evaluate
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.models import load_bundled
from dlmcost.inputs.precision import get_precision
from dlmcost.inputs.profiles import Profile
from dlmcost.engine.roofline import gpu_rates
from dlmcost.inputs.stacks import load_stack

# The floor is found, not written down: run `dlmcost analyze` once in a child process, list every
# third-party module it ended up loading (whole dotted names: pydantic, for one, loads most of itself
# lazily, when the first model class is built; rich, the modules that drawing the table takes), and
# time a fresh interpreter importing exactly those. What dlmcost adds on top (its own modules, the stdlib modules only it needs, the work)
# is what the target bounds.
FLOOR_PROBE = """
import contextlib, io, json, sys
from dlmcost.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["analyze"])
ours = {"dlmcost", "__main__"}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] not in sys.stdlib_module_names
                        and m.split(".")[0] not in ours and not m.startswith("_"))))
"""
LLM_ANALYSIS = ["-m", "llm_analysis.analysis", "infer", "--model_name", "NousResearch_Llama-2-7b-hf",
                "--gpu_name", "h100-sxm-80gb"]


def make_grid(n: int, stack=None):
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
    return build_grid(cols, rates, rng.integers(0, 2, n), stack=stack)


def cpu_s() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def bench_engine(n: int, repeats: int) -> None:
    for stack_name in ("none", "sglang"):
        stack = None if stack_name == "none" else load_stack(stack_name)
        for model_id in ("GSAI-ML/LLaDA-8B-Instruct", "inclusionAI/LLaDA2.0-mini"):
            m = load_bundled(model_id)
            grid = make_grid(n, stack)
            evaluate(m, grid.take(np.arange(1000)))  # warm-up
            walls, cpus = [], []
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), cpu_s()
                ev = evaluate(m, grid)
                walls.append(time.perf_counter() - t0)
                cpus.append(cpu_s() - c0)
            assert np.all(np.isfinite(ev.total.time_s)) and np.all(ev.total.time_s > 0)
            print(f"engine  {model_id:28s} stack {stack_name:6s} {n:,} configs: best wall {min(walls):.3f} s "
                  f"-> {n / min(walls):,.0f} configs/s; best CPU {min(cpus):.3f} s -> {n / min(cpus):,.0f} "
                  f"configs/CPU-s" + (" (target >= 1,000,000)" if stack_name == "none" else ""))


def child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def walls(cmds: dict[str, list[str]], repeats: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU times of each command, interleaved run by run so that load on a shared
    machine hits every side of a ratio alike. Every side runs as a user's would: with bytecode
    caches (PYTHONDONTWRITEBYTECODE removed; one untimed warm-up run writes the .pyc files, as
    `pip install` does for every installed package)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times = {name: [] for name in cmds}
    cpus = {name: [] for name in cmds}
    for cmd in cmds.values():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(repeats):
        for name, cmd in cmds.items():
            t0, c0 = time.perf_counter(), child_cpu_s()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            times[name].append(time.perf_counter() - t0)
            cpus[name].append(child_cpu_s() - c0)
    return times, cpus


def floor_imports() -> tuple[str, list[str]]:
    """The import statement of the floor and the top-level libraries in it."""
    import json

    out = subprocess.run([sys.executable, "-c", FLOOR_PROBE], check=True, capture_output=True, text=True).stdout
    modules = json.loads(out)
    code = "import importlib\nfor m in %r:\n    importlib.import_module(m)\n" % (modules,)
    return code, sorted({m.split(".")[0] for m in modules})


def bench_cli(repeats: int, llm_analysis: str | None) -> None:
    floor, libraries = floor_imports()
    # dlmcost's command keeps numpy's BLAS to one thread and freezes the garbage collector before
    # it exits (dlmcost/__main__.py, cli.run), which saves a spinning thread's competition and the
    # interpreter's final collection; "floor, tuned" does the same, for the ratio on equal terms
    tuned = "import gc, os\nos.environ.setdefault('OPENBLAS_NUM_THREADS', '1')\n" + floor + "gc.freeze()\n"
    cmds = {"floor": [sys.executable, "-c", floor],
            "floor, tuned": [sys.executable, "-c", tuned],
            "analyze": [sys.executable, "-m", "dlmcost", "analyze"]}
    if llm_analysis:
        cmds["llm-analysis"] = [llm_analysis, *LLM_ANALYSIS]
    t, cpu = walls(cmds, repeats)
    med = {k: statistics.median(v) for k, v in t.items()}
    low = {k: min(v) for k, v in t.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}

    def line(name: str, what: str) -> str:
        return (f"cli     {what}: wall median {med[name] * 1e3:.0f} ms, min {low[name] * 1e3:.0f} ms; "
                f"CPU median {cmed[name] * 1e3:.0f} ms")

    def ratios(a: str, b: str) -> str:
        return (f"{med[a] / med[b]:.2f}x by wall medians, {low[a] / low[b]:.2f}x by wall minima, "
                f"{cmed[a] / cmed[b]:.2f}x by CPU medians")

    print(line("floor", f"import floor (every module of {', '.join(libraries)} that analyze loads)"))
    print(line("floor, tuned", "the same floor with dlmcost's process settings (one BLAS thread, the collector "
                               "frozen before exit)"))
    print(line("analyze", "dlmcost analyze (default model, 7 GPUs)") + f" -> {ratios('analyze', 'floor')} "
          f"(target <= 1.25x); against the tuned floor {ratios('analyze', 'floor, tuned')}")
    if llm_analysis:
        print(line("llm-analysis", "llm-analysis infer (Llama-2-7B, H100)") + " -> dlmcost analyze / llm-analysis = "
              f"{ratios('analyze', 'llm-analysis')} (target <= 0.6x)")
    else:
        print("cli     llm-analysis: not measured (give --llm-analysis PYTHON, an interpreter with llm-analysis)")


def bench_render(repeats: int) -> None:
    import io

    from dlmcost import api
    from dlmcost.render.sweep import render_sweep
    from dlmcost.render.output import Output

    result = api.sweep(gpus="all", blocks=[4, 8, 16, 32], batches=[1, 2, 4, 8, 16], gens=[128, 256, 512])
    rows = api.sweep_rows(result)[:4000]
    meta = result.model_dump(exclude={"rows"})
    times = []
    for _ in range(repeats):
        out = Output(io.StringIO(), width=120)
        t0 = time.perf_counter()
        render_sweep(meta, rows, "table", out, rows)
        times.append(time.perf_counter() - t0)
    print(f"render  a {len(rows):,}-row sweep table: wall median {statistics.median(times):.3f} s, "
          f"max {max(times):.3f} s (target <= 1 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--llm-analysis", metavar="PYTHON", help="an interpreter with llm-analysis installed")
    ap.add_argument("--part", choices=("engine", "cli", "render"), help="run only this part")
    args = ap.parse_args()
    if args.part in (None, "engine"):
        bench_engine(args.configs, args.repeats)
    if args.part in (None, "cli"):
        bench_cli(args.repeats, args.llm_analysis)
    if args.part in (None, "render"):
        bench_render(args.repeats)


if __name__ == "__main__":
    main()
