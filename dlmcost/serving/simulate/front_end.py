"""The serving engine's front end: the API servers every request passes before the scheduler
sees it (`FrontEnd`), and the desk that times one run's requests through them."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

@dataclass(frozen=True)
class FrontEnd:
    """The serving engine's front end (its OpenAI-compatible API server: chat template,
    tokenization, per-request bookkeeping, streaming out): `servers` processes, each spending
    `service_s` of CPU time on a request, one request at a time. A request reaches the engine's
    scheduler only once a server has handled it: ready = max(sent, the earliest a server is free)
    + service_s, the servers taking the requests in the order they are sent."""

    servers: int
    service_s: float

    def __post_init__(self):
        if not (isinstance(self.servers, int) and self.servers >= 1 and math.isfinite(self.service_s)
                and self.service_s >= 0):
            raise ValueError(f"a front end needs at least one server and a service time >= 0, got {self}")

    def desk(self, n: int) -> "_Desk":
        return _Desk(self, n)


class _Desk:
    """n requests through a `FrontEnd`, in the order they are sent: each one's send time (`sent`)
    and the time it reaches the scheduler (what `send` returns). Sent in non-decreasing time,
    requests leave the servers in that order too, so the server free first is the one that took
    the request `servers` places before (its leaving time the oldest of the last `servers`)."""

    def __init__(self, front_end: FrontEnd, n: int):
        self.sent = [math.nan] * n
        self._service = front_end.service_s
        self._free = deque([0.0] * front_end.servers, maxlen=front_end.servers)  # sends are never before 0

    def send(self, i: int, t: float) -> float:
        self.sent[i] = t
        free = self._free[0]
        ready = (t if t > free else free) + self._service
        self._free.append(ready)
        return ready


def _arrival_list(n: int, arrivals_s: np.ndarray | None, users: int | None,
                  desk: _Desk | None = None) -> tuple[list[float], int]:
    """(each request's arrival time at the scheduler, then math.inf as a sentinel; the requests
    whose arrival is known): open loop, every one's; closed loop, the users' first requests sent at
    0, the others math.inf until an answer comes back. With a front end (`desk`), each known
    request's time of leaving it."""
    if arrivals_s is not None:
        sent, issued = arrivals_s.tolist(), n
    else:
        if not users or users < 1:
            raise ValueError(f"a closed loop needs at least one user, got {users}")
        issued = min(users, n)
        sent = [0.0] * issued
    if desk is not None:
        sent = [desk.send(i, t) for i, t in enumerate(sent)]
    return sent + [math.inf] * (n - issued + 1), issued
