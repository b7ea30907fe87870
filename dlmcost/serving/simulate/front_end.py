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
    `service_s` of CPU time on a request. A request reaches the engine's scheduler only once its
    `service_s` is done. Each server is one asyncio event loop that takes every request it holds a
    step at a time (the loop runs its ready callbacks in the order they were queued, and a request
    handler yields at each await between parsing, templating, tokenizing and handing the request to
    the engine), so the requests inside share the servers' time evenly (processor sharing): with m
    inside, each progresses at min(1, servers / m) of full speed. A burst of N sent at once
    therefore leaves together, at N x service_s / servers, not one service apart. The requests
    whose send times are known before the run (an open loop's, a closed loop's first round) share
    the servers so; one sent later, when an answer comes back, is served after the work it finds
    there (ready = max(sent, the earliest a server is free) + service_s).

    `first_token_delay_s`: a latency every request then waits before the scheduler sees it, one
    that holds neither a server nor the GPU (the engine's host-side dispatch of a new request, which
    GPU timings do not contain): it lengthens each request's time to first token and, with it, the
    request's whole latency (a closed loop's user sends the next one that much later), as NVIDIA's
    aiconfigurator adds its vLLM dispatch overhead to each request's first token and its request
    latency, and leaves the servers' and the GPU's occupancy, and so a full server's rate, as they were."""

    servers: int
    service_s: float
    first_token_delay_s: float = 0.0

    def __post_init__(self):
        if not (isinstance(self.servers, int) and self.servers >= 1 and math.isfinite(self.service_s)
                and self.service_s >= 0 and math.isfinite(self.first_token_delay_s)
                and self.first_token_delay_s >= 0):
            raise ValueError(f"a front end needs at least one server and a service time >= 0, got {self}")

    def scaled(self, factor: float) -> "FrontEnd":
        """The same front end with its times `factor` times as long (a deployment at its error band's
        end: every time the prediction has, its servers' and its first-token delay too)."""
        return FrontEnd(self.servers, self.service_s * factor, self.first_token_delay_s * factor)

    def desk(self, n: int) -> "_Desk":
        return _Desk(self, n)


class _Desk:
    """n requests through a `FrontEnd`: each one's send time (`sent`) and the time it reaches the
    scheduler (its leaving the servers, plus the front end's first-token delay, which holds no
    server). `send_together` times the requests whose sends are known before the run, sharing the
    servers (`shared_departures`); `send` one sent later, behind the work it finds. Requests of
    equal service leave in the order they are sent, under either rule, so the server free first is
    the one that took the request `servers` places before (its leaving time the oldest of the last
    `servers`)."""

    def __init__(self, front_end: FrontEnd, n: int):
        self._servers = front_end.servers
        self._service = front_end.service_s
        self._delay = front_end.first_token_delay_s
        self.reset(n)

    def reset(self, n: int) -> None:
        """No request sent yet (a run given up and started again from the beginning)."""
        self.sent = [math.nan] * n
        self._free = deque([0.0] * self._servers, maxlen=self._servers)  # sends are never before 0

    def send_together(self, times: list[float]) -> list[float]:
        """Requests 0..len(times) - 1, sent at `times` (non-decreasing), before any other."""
        self.sent[:len(times)] = times
        leaves = shared_departures(times, self._servers, self._service)
        self._free.extend(leaves)
        return [t + self._delay for t in leaves]

    def send(self, i: int, t: float) -> float:
        self.sent[i] = t
        free = self._free[0]
        leaves = (t if t > free else free) + self._service
        self._free.append(leaves)
        return leaves + self._delay


def shared_departures(sent: list[float], servers: int, service_s: float) -> list[float]:
    """When each of requests sent at `sent` (non-decreasing) leaves `servers` servers that share
    their time evenly among the requests inside (each at min(1, servers / m) of full speed with m
    inside), every request needing `service_s`. Kept in the servers' virtual time `v`, the service
    every request inside has had since the run began: it grows at that rate, a request entering at
    v is done at v + service_s, and so requests leave in the order they came (a deque). Servers that
    take no time a request (a front end known by its first-token delay alone) let each leave as sent."""
    if not service_s:
        return list(sent)
    ready = [0.0] * len(sent)
    inside: deque[tuple[int, float]] = deque()  # (request, the virtual time it is done at)
    t = v = 0.0
    i, n = 0, len(sent)
    while i < n or inside:
        if not inside:
            t = max(t, sent[i])
            inside.append((i, v + service_s))
            i += 1
            continue
        rate = min(1.0, servers / len(inside))
        leaves_at = t + (inside[0][1] - v) / rate
        if i < n and sent[i] < leaves_at:
            v += (sent[i] - t) * rate
            t = sent[i]
            inside.append((i, v + service_s))
            i += 1
        else:
            j, v = inside.popleft()
            t = ready[j] = leaves_at
    return ready


def _arrival_list(n: int, arrivals_s: np.ndarray | None, users: int | None,
                  desk: _Desk | None = None) -> tuple[list[float], int]:
    """(each request's arrival time at the scheduler, then math.inf as a sentinel; the requests
    whose arrival is known): open loop, every one's; closed loop, the users' first requests sent at
    0, the others math.inf until an answer comes back. With a front end (`desk`), each known
    request's time of leaving it, the known requests sharing its servers."""
    if arrivals_s is not None:
        sent, issued = arrivals_s.tolist(), n
    else:
        if not users or users < 1:
            raise ValueError(f"a closed loop needs at least one user, got {users}")
        issued = min(users, n)
        sent = [0.0] * issued
    if desk is not None:
        sent = desk.send_together(sent)
    return sent + [math.inf] * (n - issued + 1), issued
