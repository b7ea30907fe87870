"""Plain references for a front end's API servers (serving/simulate/front_end.py), written from
its docstring, not from its code: servers kept as a heap of the times each is free (first come
first served), and servers whose time the requests inside share evenly, walked event by event
with every request's own remaining work."""

from __future__ import annotations

import heapq
import math


class ServersByHeap:
    """A front end's servers kept as a heap of the times each is free: a request sent at t takes
    the one free first (FIFO), and reaches the engine at max(t, free) + service."""

    def __init__(self, servers: int, service: float):
        self.free, self.service = [0.0] * servers, service

    def ready(self, t: float) -> float:
        r = max(t, heapq.heappop(self.free)) + self.service
        heapq.heappush(self.free, r)
        return r

    def take_shared(self, leaving: list[float]) -> None:
        """After requests that shared the servers left at `leaving`: each server is free from one
        of the last of them to leave (or from 0, if fewer came)."""
        latest = sorted([0.0] * len(self.free) + list(leaving))[-len(self.free):]
        self.free = latest
        heapq.heapify(self.free)


def shared_by_remaining_work(sent: list[float], servers: int, service: float) -> list[float]:
    """Requests sent at `sent` through `servers` servers that share their time evenly: between two
    events (a send, a request done) each of the m requests inside runs at min(1, servers / m),
    its remaining work falling by that rate times the time; a request leaves when its remaining
    work is nothing. Every request's remaining work is kept and updated at every event."""
    remaining: dict[int, float] = {}
    ready = [math.nan] * len(sent)
    t, upcoming = 0.0, sorted(range(len(sent)), key=lambda i: sent[i])
    while upcoming or remaining:
        for i in [i for i, w in remaining.items() if w <= 1e-15]:
            ready[i] = t
            del remaining[i]
        while upcoming and sent[upcoming[0]] <= t:
            remaining[upcoming.pop(0)] = service
        if not remaining:
            if upcoming:
                t = sent[upcoming[0]]
            continue
        rate = min(1.0, servers / len(remaining))
        to_next_done = min(remaining.values()) / rate
        to_next_send = sent[upcoming[0]] - t if upcoming else math.inf
        step = min(to_next_done, to_next_send)
        for i in remaining:
            remaining[i] -= step * rate
        t += step
    return ready
