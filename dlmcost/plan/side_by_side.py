"""A plan's rows worked out on the machine's cores (`map_rows`): once the deployments are found,
each row's sustained load and error-band ends are searches of their own, independent of every
other row's and seeded as they are, so they run in forked worker processes and come back the same
as run one after another (tests/test_plan_cores.py).

Only where the operating system forks (Linux, the BSDs; macOS and Windows run them in turn) and
the rows are enough to pay for the workers. The workers inherit the rows, so nothing but a row's
index goes to them and only its small result comes back; a warning a row's search raises is
raised again here, and the simulated preemptions they spent count against the command's limit
(`SimulationWork`) as if they had run here.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence, TypeVar

Row = TypeVar("Row")
Out = TypeVar("Out")

MIN_ROWS_PER_WORKER = 4  # fewer rows than this a worker: starting the workers costs more than they save
MAX_WORKERS = 8  # the searches are short; more workers than this mostly wait for the first to fork
CHUNKS_PER_WORKER = 4  # rows differ in cost: each worker takes several smaller shares, as it comes free

_TASK: tuple[Callable, Sequence, Callable | None] | None = None  # what the forked workers read


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity where the system says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(rows: int, jobs: int | None = None) -> int:
    """How many worker processes `map_rows` starts for this many rows (1: none, the rows in turn).
    `jobs`: at most so many (None: the usable cores)."""
    jobs = usable_cores() if jobs is None else jobs
    if "fork" not in multiprocessing.get_all_start_methods() or multiprocessing.current_process().daemon:
        return 1  # no fork (macOS, Windows), or a daemonic worker, which may not start processes
    return max(1, min(jobs, MAX_WORKERS, rows // MIN_ROWS_PER_WORKER))


def map_rows(fn: Callable[[Row], Out], rows: Sequence[Row], jobs: int | None = None,
             spent: Callable[[], int] | None = None) -> tuple[list[Out], int]:
    """[fn(row) for row in rows], on up to `jobs` cores, and the units of `spent` (a counter the
    rows' searches raise, such as the preemptions their simulations run) the workers spent, which
    the caller adds to its own (0 where they ran here, having counted it themselves)."""
    n = workers_for(len(rows), jobs)
    if n <= 1:
        return [fn(row) for row in rows], 0
    global _TASK
    _TASK = (fn, rows, spent)
    size = max(1, -(-len(rows) // (n * CHUNKS_PER_WORKER)))
    shares = [(lo, min(lo + size, len(rows))) for lo in range(0, len(rows), size)]
    sys.stdout.flush(), sys.stderr.flush()  # (a worker starts with none of this process's output pending)
    try:
        with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_quiet) as pool:
            done = list(pool.map(_share, shares))
    finally:
        _TASK = None
    out, total = [], 0
    for results, caught, used in done:
        out += results
        total += used
        for message, category in caught:
            warnings.warn(message, category, stacklevel=2)
    return out, total


def _quiet() -> None:
    """A worker's own streams: nowhere. It writes nothing (its warnings come back as values), and the
    streams it inherited may be mid-write in another thread of this process (a progress bar's), whose
    lock it would wait on for ever when it flushes them at exit."""
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")


def _share(bounds: tuple[int, int]) -> tuple[list, list[tuple[str, type]], int]:
    """A worker's share of the rows: their results, the warnings they raised, what they spent."""
    fn, rows, spent = _TASK
    before = spent() if spent else 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [fn(rows[i]) for i in range(*bounds)]
    used = (spent() - before) if spent else 0
    return results, [(str(w.message), w.category) for w in caught], used
