"""A plan's searches worked out on the machine's cores: the candidates' (`Ahead`: started before
their turn, taken in it) and, once the deployments are found, the rows' (`map_rows`): each row's
sustained load and error-band ends are searches of their own, independent of every other row's and
seeded as they are, so they run in forked worker processes and come back the same as run one after
another (tests/test_plan_cores.py).

Only where the operating system forks (Linux, the BSDs; macOS and Windows run them in turn) and
the rows are enough to pay for the workers. The workers inherit the rows, so nothing but a row's
index (a candidate's, and the few numbers its search is started on) goes to them and only its small
result comes back; a warning a row's search raises is
raised again here, and the simulated preemptions they spent count against the command's limit
(`SimulationWork`) as if they had run here.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from concurrent import futures
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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
    pool = _forked_pool(n)
    try:
        done = list(pool.map(_share, shares))
    except BrokenProcessPool:  # a worker lost (killed for its memory, say): the rows run here, in turn
        pool.shutdown(wait=False, cancel_futures=True)
        return [fn(row) for row in rows], 0
    except BaseException:  # an error or Ctrl-C: the shares not started are not waited for
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        _TASK = None
    out, total = [], 0
    for results, caught, used in done:
        out += results
        total += used
        for message, category in caught:
            warnings.warn(message, category, stacklevel=2)
    return out, total


def _forked_pool(workers: int) -> ProcessPoolExecutor:
    """`workers` forked worker processes (`_worker_start`), this process's output written first (a
    worker starts with none of it pending)."""
    _flush_streams()
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_start, initargs=(os.getpid(),))


def _flush_streams() -> None:
    """This process's output written before it forks (a stream closed or gone: nothing to write)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # (closed: what it could not take, the command's output step says)
            pass


PARENT_POLL_S = 0.25  # how often a worker looks whether the command that started it still runs


def _worker_start(parent: int) -> None:
    """A worker's own streams: nowhere. It writes nothing (its warnings come back as values), and the
    streams it inherited may be mid-write in another thread of this process (a progress bar's), whose
    lock it would wait on for ever when it flushes them at exit. It leaves Ctrl-C to the command
    (below). And it ends with the command that
    started it (`parent`): a command killed (SIGTERM, SIGKILL, a timeout's) cannot shut its pool
    down, and its workers, waiting for work that never comes, would live on and hold its output
    pipe open, so a reader of `dlmcost plan | ...` would wait for ever."""
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")
    # Ctrl-C reaches the whole process group: only the command handles it. A worker interrupted
    # while it sent a result back would hold the result queue's lock, and the command, shutting
    # its pool down, would wait on it for ever; it finishes its search, and the command exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with, args=(parent,), daemon=True).start()


def _end_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _share(bounds: tuple[int, int]) -> tuple[list, list[tuple[str, type]], int]:
    """A worker's share of the rows: their results, the warnings they raised, what they spent."""
    fn, rows, spent = _TASK
    before = spent() if spent else 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [fn(rows[i]) for i in range(*bounds)]
    used = (spent() - before) if spent else 0
    return results, [(str(w.message), w.category) for w in caught], used


MAX_AHEAD_PER_WORKER = 3  # searches started past the oldest not yet taken, a worker: more read staler pruning


class Ahead:
    """Searches started on the machine's cores before their turn and taken in it: plan's candidate
    loop (search.py), where each candidate's search reads what the searches before it found (the
    cheapest deployment, the rows shown) only to skip or stop work whose answer could not change
    the output. A search started ahead reads what was found before it started, less than its turn
    would have read: the caller decides it again in its turn, drops it where the turn rules it out
    and has it run again where the turn's arguments could have changed its path, so the answers are
    those of the searches in turn (tests/test_plan_pruning.py, tests/test_plan_cores.py).

    `fn(*args)` runs in a forked worker (where `start` returns a handle) or here (where it returns
    the answer: no fork, one job, or too few searches to pay for the workers); `take(handle, args,
    same)` is its answer in its turn, its warnings raised again here then, and `drop(handle)` leaves
    out one its turn rules out. The command's `work` (the preemptions its simulations may run) is
    counted as in turn: a search starts with what was left when it started, `take` counts what it
    spent, and one that spent more than is left at its turn, or whose arguments its turn changed in
    a way that could have changed its path, is run again here, where it stops at the preemption it
    would have stopped at in turn (with the same message); a dropped search's are not counted."""

    def __init__(self, fn: Callable, searches: int, jobs: int | None = None, work=None):
        self.fn, self.work = fn, work
        n = workers_for(searches, jobs)
        self.workers = n if n > 1 else 0
        self._pool = None
        self._running: list = []  # handles started and not taken, oldest first

    def __enter__(self) -> "Ahead":
        return self

    def __exit__(self, kind, *exc) -> None:
        if self._pool is not None:  # (on an error or Ctrl-C, the searches not started are not waited for)
            self._pool.shutdown(wait=kind is None, cancel_futures=True)
            self._pool = None
        global _AHEAD
        _AHEAD = None

    def start(self, *args):
        """The search's handle (a worker's), or its answer where it runs here."""
        if not self.workers:
            return _Done(self.fn(*args))
        if self._pool is None:
            global _AHEAD
            _AHEAD = (self.fn, self.work)
            self._pool = _forked_pool(self.workers)
        try:
            future = self._pool.submit(_ahead, args, _left(self.work))
        except BrokenProcessPool:  # a worker lost (killed for its memory, say): the rest run here, each in turn
            self.workers = 0
            return _Started(None, args)
        handle = _Started(future, args)
        self._running.append(handle)
        return handle

    def full(self) -> bool:
        """Whether another search would wait: every worker has one running, or as many searches as
        the staleness allows wait for their turn (`backlogged`)."""
        if not self.workers:
            return False
        return self.backlogged() or sum(not h.future.done() for h in self._running) >= self.workers

    def backlogged(self) -> bool:
        """Whether as many searches as the staleness allows wait for their turn: the caller takes the
        oldest before it starts another."""
        return len(self._running) >= self.workers * MAX_AHEAD_PER_WORKER

    def wait(self) -> None:
        """Until one of the searches running ends."""
        running = [h.future for h in self._running if not h.future.done()]
        if running:
            futures.wait(running, return_when=futures.FIRST_COMPLETED)

    @staticmethod
    def ready(handle) -> bool:
        """Whether taking the handle (None: no search started) would not wait for a worker."""
        return not isinstance(handle, _Started) or handle.future is None or handle.future.done()

    def take(self, handle, args: tuple | None = None, same: Callable[[object], bool] | None = None):
        """The search's answer in its turn. `args`: its arguments as its turn gives them (None: those
        it started with). Where they differ from those it started with and `same(answer)` does not
        vouch that they would have given the same search, where it spent more preemptions than are
        left now, or where it failed, it runs here with them: as it would have in turn."""
        if not isinstance(handle, _Started):
            return handle.value
        args = handle.args if args is None else args
        if handle.future is None:  # (started after a worker was lost: it runs now, in its turn)
            return self.fn(*args)
        self._running.remove(handle)
        try:
            value, caught, spent = handle.future.result()
        except Exception:  # (a worker's error, or a worker lost: the search in turn raises it, or answers)
            return self.fn(*args)
        left = _left(self.work)
        if (args != handle.args and not (same is not None and same(value))) or (left is not None and spent > left):
            return self.fn(*args)
        if spent:
            self.work.spend(spent)
        for message, category in caught:
            warnings.warn(message, category, stacklevel=2)
        return value

    def drop(self, handle) -> None:
        """A search its turn rules out (None: none was started): its answer, warnings and preemptions
        are not taken (it may still be running: its worker comes free when it ends)."""
        if isinstance(handle, _Started) and handle.future is not None:
            self._running.remove(handle)


_AHEAD: tuple[Callable, object] | None = None  # what the forked workers of `Ahead` read


class _Done:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Started:
    """A search started in a worker (`future`), or to run in its turn where no worker is left (None)."""

    __slots__ = ("future", "args")

    def __init__(self, future, args):
        self.future, self.args = future, args


def _left(work) -> int | None:
    """The preemptions the command's simulations may still run (None: no count kept)."""
    return None if work is None or work.limit is None else work.left


def _ahead(args: tuple, left) -> tuple:
    """A worker's search: its answer, the warnings it raised, the preemptions it spent (starting
    from what was left when it was started)."""
    fn, work = _AHEAD
    if left is not None:
        work.left = left
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args)
    spent = left - work.left if left is not None else 0
    return value, [(str(w.message), w.category) for w in caught], spent
