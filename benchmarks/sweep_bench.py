"""Sweep speed targets (issue 21, item 3), measured as ratios within one run where the machine is
shared (CPU time per process is printed beside wall time: it suffers less from the other users of
the cores).

1. A 21,800-row CSV sweep end to end (`dlmcost sweep ... -f csv`, a fresh process, start-up
   included) against the engine alone, two ways: the same sweep's evaluated chunks in this
   process (warm, no start-up, no output), and in a fresh process that imports the api, evaluates
   and writes nothing (the start-up included, as the command pays it). Target: >= 40,000 rows/s
   end to end, i.e. within 2x of the engine alone.
2. A 128,620-row sweep drawn as a table (`--limit 28`: the top rows, as a terminal shows them).
   Target: <= 1 s end to end.
3. Issue 30: a 71,875-row sweep (every GPU, eight blocks, eleven batches, four step counts, three
   generation lengths, three schemes) piped, so drawn whole as a table, as `--limit` promises when
   piped (100 columns). Target: <= 2 s end to end.

    python benchmarks/sweep_bench.py [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

GRID = ["--gpu", "h100,h200,b200,mi300x,mi355x", "--steps", "32,64,128,256,512", "--gen", "256,512,1024,2048",
        "--block", "1,2,4,8,16,32,64,128", "--precision", "bf16,fp8", "--scheme", "block,dual-cache"]
CSV_BATCHES = "1,2,4,8,16,32,64,128,256,512"  # 21,800 rows
PIPED = ["sweep", "--gpu", "all", "--block", "1,2,4,8,16,32,64,128", "--batch", "1,2,4,8,16,32,64,128,256,512,1024",
         "--steps", "32,64,128,256", "--gen", "256,512,1024", "--scheme", "block,dual-cache,prefix-cache"]
TABLE_BATCHES = ",".join(str(b) for b in range(1, 60))  # 128,620 rows (188,800 configurations asked)


def _options(batches: str) -> dict:
    """The grid as api.sweep's keyword arguments."""
    lists = dict(zip(GRID[::2], GRID[1::2]), **{"--batch": batches})
    ints = {"--steps": "steps", "--gen": "gens", "--block": "blocks", "--batch": "batches"}
    out = {v: [int(x) for x in lists[k].split(",")] for k, v in ints.items()}
    return dict(out, gpus=lists["--gpu"], precisions=lists["--precision"].split(","),
                schemes=lists["--scheme"].split(","))


def engine_alone(batches: str) -> tuple[float, float, int]:
    """Wall and CPU seconds to evaluate the sweep's chunks in this process (columns, no output)."""
    from dlmcost import api

    wall, cpu = time.perf_counter(), time.process_time()
    _, chunks = api.iter_sweep_columns(**_options(batches))
    n = sum(len(c["gpu"]) for c in chunks)
    return time.perf_counter() - wall, time.process_time() - cpu, n


ENGINE_PROCESS = """
import sys
from benchmarks.sweep_bench import _options
from dlmcost import api
_, chunks = api.iter_sweep_columns(**_options(sys.argv[1]))
print("\\n" * sum(len(c["gpu"]) for c in chunks), end="")
"""


def command(args: list[str], columns: str | None = "120") -> tuple[float, float, int]:
    """Wall and CPU seconds of `dlmcost ARGS` in a fresh process, and the lines it printed
    (`columns`: its $COLUMNS; None: none, a pipe's 100)."""
    return _child([sys.executable, "-m", "dlmcost", *args], columns)


def _child(argv: list[str], columns: str | None = "120") -> tuple[float, float, int]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{' '.join(argv)} failed: {done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.count("\n")


def _median(runs: list[tuple]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats

    engine_alone(CSV_BATCHES)  # warm: imports and caches, which the command pays in its start-up
    engine = [engine_alone(CSV_BATCHES) for _ in range(repeats)]
    rows = engine[0][2]
    e_wall, e_cpu = _median(engine)
    process = [_child([sys.executable, "-c", ENGINE_PROCESS, CSV_BATCHES]) for _ in range(repeats)]
    assert process[0][2] == rows, (process[0][2], rows)
    p_wall, p_cpu = _median(process)
    end = [command(["sweep", *GRID, "--batch", CSV_BATCHES, "-f", "csv"]) for _ in range(repeats)]
    assert end[0][2] == rows + 1, (end[0][2], rows)  # the rows and a header
    c_wall, c_cpu = _median(end)
    print(f"csv sweep, {rows:,} rows (medians of {repeats}; rows/s by wall time, by CPU time in brackets):")
    print(f"  engine alone, warm in this process: {rows / e_wall:,.0f} ({rows / e_cpu:,.0f})")
    print(f"  engine alone, a fresh process (start-up, no output): {rows / p_wall:,.0f} ({rows / p_cpu:,.0f})")
    print(f"  end to end, dlmcost sweep -f csv: {rows / c_wall:,.0f} ({rows / c_cpu:,.0f}); "
          f"{c_wall / p_wall:.2f}x ({c_cpu / p_cpu:.2f}x) the fresh engine process's time, "
          f"{c_wall / e_wall:.2f}x ({c_cpu / e_cpu:.2f}x) the warm engine's")
    print("  target: >= 40,000 rows/s end to end, within 2x of the engine alone")

    table = [command(["sweep", *GRID, "--batch", TABLE_BATCHES, "--limit", "28"]) for _ in range(repeats)]
    t_wall, t_cpu = _median(table)
    _, _, n = engine_alone(TABLE_BATCHES)
    print(f"table of a {n:,}-row sweep (top 28 shown), end to end: wall median {t_wall:.3f} s "
          f"(CPU {t_cpu:.3f} s); target <= 1 s")

    piped = [command(PIPED, columns=None) for _ in range(repeats)]
    p_wall, p_cpu = _median(piped)
    print(f"the 71,874-row sweep piped, drawn whole as a table ({piped[0][2]:,} lines): wall median "
          f"{p_wall:.3f} s, min {min(r[0] for r in piped):.3f} s (CPU median {p_cpu:.3f} s); target <= 2 s")


if __name__ == "__main__":
    main()
