"""When the scheduler takes in new arrivals: SGLang's `--scheduler-recv-interval R` (the package
docstring). Both first-done loops keep one `Receiver` where R > 1 and none at R = 1 (every
boundary receives: no bookkeeping in the hot loops).

SGLang's scheduler calls recv_requests() at the top of each loop iteration; with R > 1 its
SchedulerRecvSkipper (sgl-project/sglang, python/sglang/srt/managers/scheduler_recv_skipper.py)
first adds a weight for the last batch's forward mode to a counter (DECODE, TARGET_VERIFY and no
batch: 1; any other mode, a prefill among them: 1000) and receives only when the counter reaches
R, then sets it to 0. So a boundary receives when the iteration before it prefilled, when the
server is idle (its loop spins, counting 1 a turn in microseconds: at once), or when R iterations
ran since the last receive; requests that arrived meanwhile wait unseen, and are then taken in
together. A received request waits in the queue as before (until the batch has room).
"""

from __future__ import annotations

MAX_RECV_INTERVAL = 1000  # a prefill's weight: any R above it would receive after prefills only


class Receiver:
    """The receiving boundaries of one replica's loop under an interval R > 1. Boundary k is the
    one before iteration k. `next_at`: the next boundary that receives if no iteration before it
    prefills; `seen_t`: the time of the last boundary that received (the arrivals up to it are in
    the scheduler's queue)."""

    __slots__ = ("interval", "next_at", "seen_t")

    def __init__(self, interval: int):
        self.interval = interval
        self.next_at = 0
        self.seen_t = 0.0

    def seen(self, it: int, now: float, busy: bool, next_arrival: float) -> float:
        """At boundary `it` (time `now`), before admitting: the latest arrival time the scheduler has
        received. This boundary receives where `it` is due or the server is idle: no request runs
        (`busy`: some run, or wait in the queue) and none received waits (`next_arrival`: the
        first not yet in the queue, received at a boundary the loop jumped over if not later than
        `seen_t`). A server whose batch just emptied with requests still queued is not idle: it
        prefills them before it receives again."""
        if it < self.next_at and (busy or next_arrival <= self.seen_t):
            return self.seen_t
        self.seen_t, self.next_at = now, it + self.interval
        return now

    def _first_after(self, it: int, prefills: bool) -> int:
        """The first receiving boundary after `it`, where the coming iteration `it` prefills or not."""
        return it + 1 if prefills else self.next_at

    def first_at_or_after(self, it: int, k: int, prefills: bool) -> int:
        """The first boundary at or after k (> it) that receives, where only the coming iteration
        `it` may prefill: the receiving ones then come every R iterations."""
        r0 = self._first_after(it, prefills)
        if k <= r0:
            return r0
        return r0 + -(-(k - r0) // self.interval) * self.interval

    def passed(self, it: int, m: int, now: float, tau0: float, tau: float, prefills: bool, every: bool) -> None:
        """The loop jumps from boundary `it` (time `now`) over m iterations, the first tau0 long and
        the others tau: the boundaries it + 1 .. it + m - 1 it passes that receive do so unseen (the
        last of them sets `seen_t`). `every`: each of the m iterations prefills (a prompt's pieces
        under a budget), so every boundary receives, it + m among them."""
        end = it + m
        if every:
            self.next_at = end
            return
        r0 = self._first_after(it, prefills)
        if r0 >= end:
            self.next_at = r0
            return
        last = r0 + (end - r0) // self.interval * self.interval
        if last == end:
            self.next_at = end
            return
        self.seen_t = now + tau0 + (last - it - 1) * tau
        self.next_at = last + self.interval
