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
                issued = _done(i, now, done, inflight, arrival, issued, think_s)
    return [done[i] for i in range(n)], [ttfb[i] for i in range(n)]


def _done(i, now, done, inflight, arrival, issued, think_s) -> int:
    """Request i leaves at `now`; in a closed loop its user asks again after thinking. The requests sent."""
    done[i] = now
    del inflight[i]
    if issued < len(arrival):
        arrival[issued] = now + think_s
        issued += 1
    return issued


def replay_prefill_first(answers, prompts, steady, whole_lift, cls, cap, budget=None, arrivals=None, users=None,
                         think_s=0.0, step=None):
    """(completion times, first-token times) of token-streaming requests of classes `cls` on an
    engine that runs prefills before decodes (SGLang's scheduler), written from the rule: at each
    boundary, if the prompt in pieces has tokens left or a waiting request fits (fewer than `cap`
    in flight), the iteration prefills alone: first the rest of the prompt in pieces (up to the
    `budget` of tokens; None: no limit), then waiting prompts first come, first served, while
    budget is left, the last one cut where it runs out; the requests in flight that are not
    prefilling wait. Its time: over the bp requests it prefills, each one's steady[c][bp] / bp
    plus t / P_c of its class's whole prefill work whole_lift[c][bp], over bp, for the t tokens it
    prefills, plus step[bp] once (None: nothing). A request's first token comes at the end of the
    iteration with its prompt's last token; it is done after answers[c] tokens. Otherwise every
    request in flight decodes one token, an iteration of sum steady[c_i][b] / b."""
    n = len(cls)
    arrival = list(arrivals) if arrivals is not None else [0.0] * min(users, n) + [math.inf] * (n - min(users, n))
    issued = n if arrivals is not None else min(users, n)
    now = 0.0
    waiting, inflight, done, ttfb, received = [], {}, {}, {}, set()
    prompt_left, tokens = {}, {}
    while len(done) < n:
        for i in range(n):
            if i not in received and arrival[i] <= now + 1e-12:
                waiting.append(i)
                received.add(i)
        waiting.sort(key=lambda i: (arrival[i], i))
        left = math.inf if budget is None else budget
        batch = []  # (request, tokens it prefills now)
        for i in inflight:
            if prompt_left[i] > 0:  # the prompt in pieces goes on first
                t = min(prompt_left[i], left)
                batch.append((i, t))
                left -= t
        while waiting and len(inflight) < cap and left > 0:
            i = waiting.pop(0)
            inflight[i], prompt_left[i], tokens[i] = True, prompts[cls[i]], 0
            t = min(prompts[cls[i]], left)
            batch.append((i, t))
            left -= t
        if batch:
            bp = len(batch)
            now += sum(steady[cls[i]][bp] + t / prompts[cls[i]] * whole_lift[cls[i]][bp] for i, t in batch) / bp
            now += step[bp] if step is not None else 0.0
            ended = []
            for i, t in batch:
                prompt_left[i] -= t
                if prompt_left[i] == 0:
                    ttfb[i], tokens[i] = now, 1
                    ended.append(i)
        elif inflight:
            b = len(inflight)
            now += sum(steady[cls[i]][b] for i in inflight) / b
            ended = list(inflight)
            for i in ended:
                tokens[i] += 1
        else:  # idle until the next arrival
            now = min(arrival[i] for i in range(n) if i not in received)
            continue
        for i in ended:
            if tokens[i] == answers[cls[i]]:
                issued = _done(i, now, done, inflight, arrival, issued, think_s)
    return [done[i] for i in range(n)], [ttfb[i] for i in range(n)]
