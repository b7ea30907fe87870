"""A brute-force reference of the serving simulation (dlmcost/serving/simulate), written from its
documented rules, not its code: iteration by iteration, every in-flight request's share of its
pass summed (a request's pass 0 is its first), no jumps over runs of equal iterations.

`interval`: SGLang's receive rule (--scheduler-recv-interval R): boundary k takes in the arrivals up
to its time where the iteration before it ran a request's first pass (a prefill), where R
iterations ran since the last boundary that received, or where the server is idle (nothing running
and nothing received waiting); at R = 1 every boundary receives. Received requests wait first
come, first served, for room in the batch."""

from __future__ import annotations

import math


def replay(nfe, first_passes, first, steady, cls, cap, arrivals=None, users=None, think_s=0.0, interval=1):
    """(completion times, first-token times) of requests of classes `cls`: open loop (`arrivals`) or
    closed loop (`users` who ask again `think_s` after each answer)."""
    n = len(cls)
    arrival = list(arrivals) if arrivals is not None else [0.0] * min(users, n) + [math.inf] * (n - min(users, n))
    issued = n if arrivals is not None else min(users, n)
    now, it, due, prefilled = 0.0, 0, 0, False
    waiting, inflight, done, ttfb, received = [], {}, {}, {}, set()
    while len(done) < n:
        if it >= due or prefilled or not (inflight or waiting):
            for i in range(n):
                if i not in received and arrival[i] <= now + 1e-12:
                    waiting.append(i)
                    received.add(i)
            due = it + interval
        waiting.sort(key=lambda i: (arrival[i], i))
        while waiting and len(inflight) < cap:
            inflight[waiting.pop(0)] = 0
        if not inflight:  # idle: the next arrival finds the server idle and is taken at once
            now = min(arrival[i] for i in range(n) if i not in received)
            continue
        b = len(inflight)
        prefilled = any(k == 0 for k in inflight.values())
        now += sum((first if k == 0 else steady)[cls[i]][b] / b for i, k in inflight.items())
        it += 1
        for i in list(inflight):
            inflight[i] += 1
            if inflight[i] == first_passes[cls[i]]:
                ttfb[i] = now
            if inflight[i] == nfe[cls[i]]:
                done[i] = now
                del inflight[i]
                if issued < n:  # closed loop: the user asks again after thinking
                    arrival[issued] = now + think_s
                    issued += 1
    return [done[i] for i in range(n)], [ttfb[i] for i in range(n)]
