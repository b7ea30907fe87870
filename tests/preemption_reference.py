"""A plain reference for the first-done loop with K/V allocated on demand (serving/simulate's
package docstring, "K/V on demand"), written from the rules, not from the loop's code: it walks
every iteration one by one and keeps every request's state, with no events, no heap and no
closed forms. It covers what the tests compare: several request classes, each request its own
passes, open and closed loads, a prefill budget (prompt tokens fed first come first served);
not a prefix cache, a prefill forward's own dispatch, a receive interval or first blocks outside
the limit.

Rules, per boundary k (time t), in this order:
1. requests whose last pass ended at k leave (done at t); a closed loop's user asks again;
2. while more than one runs and the K/V they hold exceeds the limit, the latest admitted leaves
   for the front of the queue, holding then what it held at k, with the passes it had left;
3. arrivals up to t join the queue's back;
4. first come first served, while fewer than batch_cap run, the budget (if any) has room, and
   (an empty batch aside) the K/V held plus the newcomer's fits: it joins. A request holds
   h + (s - h)(k - a)/(f - a) at boundary k (admitted at a, finishing at f, holding h at a: its
   prompt's share s P/L, or after a preemption what it held then), s its class's share.
5. the iteration runs: b requests, each pass_s[c][b] / b, plus the prefill each newcomer's first
   pass (no budget: lift x its tokens over its prompt's) or each piece fed (budget: tokens x
   lift / P) adds, over b.
"""

from __future__ import annotations

import math
from collections import deque


def _arrivals(n, arrivals, users):
    """Each request's arrival (a closed loop's later sends not yet known: inf) and how many are known."""
    if arrivals is not None:
        return list(arrivals), n
    return [0.0] * min(users, n) + [math.inf] * max(0, n - users), min(users, n)


def _held_at(r, k, share, cls):
    """What running request r holds at clock k: h + (s - h)(k - a)/(f - a)."""
    s = share[cls[r["i"]]]
    return r["h"] + (s - r["h"]) * (k - r["a"]) / (r["f"] - r["a"])


def _usage(running, k, share, cls, extra=()):
    return math.fsum([_held_at(r, k, share, cls) for r in running] + list(extra))


def _recompute_scale(u, c, share, held_p, lift):
    """A preempted request's (next) prefill over its prompt's: what it held over its prompt's
    share; a lift negative at any batch, or a prompt holding nothing, is not scaled (the recompute
    costs what its first pass did)."""
    rescaled = held_p[c] > 0 and min(lift[c][1:]) >= 0
    return u / (share[c] * held_p[c]) if rescaled else 1.0


def _feed_carried(carried, budget):
    """This iteration's piece of the prompt in its pieces ([request, tokens left]): (request, tokens
    fed, what is carried after: None once its last piece is fed)."""
    take = min(carried[1], budget)
    carried[1] -= take
    return carried[0], take, (carried if carried[1] else None)


def _take_arrivals(arrival, arrived, t, queue):
    for i in range(len(arrival)):
        if not arrived[i] and arrival[i] <= t:
            arrived[i] = True
            queue.append(i)


def simulate_by_iteration(table, request_class, batch_cap, nfe, first, arrivals=None, users=None, think=0.0,
                          limit=1.0 + 1e-9):
    """(done, first output, preemptions) for each request; `nfe`, `first`: each request's passes
    and passes to its first output."""
    n = len(request_class)
    cls = list(request_class)
    share, held_p = table.mem_share, table.held_from_admission
    budget = table.prefill_budget
    prompt = table.prompt_tokens if budget else None
    lift = [[f - p for f, p in zip(fr, pr)] for fr, pr in zip(table.first_pass_s, table.pass_s)]
    arrival, issued = _arrivals(n, arrivals, users)
    left = list(nfe)  # passes left
    to_first = list(first)  # passes to the first output left (None once streamed)
    tokens = [prompt[c] if prompt else 0 for c in cls]  # under a budget: tokens its (next) prefill feeds
    scale = [1.0] * n  # its (next) prefill's tokens over its prompt's
    hold = [share[c] * held_p[c] for c in cls]  # the K/V share it holds when it joins
    done, first_out = [math.nan] * n, [math.nan] * n
    running = []  # dicts, in admission order
    queue: deque = deque()
    arrived = [False] * n
    carried = None  # [request, tokens left] of a prompt in its pieces
    t, k, preemptions = 0.0, 0, 0

    def held_at(r, k):
        return _held_at(r, k, share, cls)

    def usage(k, extra=()):
        return _usage(running, k, share, cls, extra)

    while any(d != d for d in done):
        # 1. (completions were taken at the end of the last iteration)
        # 2. preemptions
        while len(running) > 1 and usage(k) > limit:
            r = running.pop()
            i = r["i"]
            c = cls[i]
            u = held_at(r, k)
            left[i] = r["f"] - k
            if to_first[i] is not None:
                to_first[i] = r["first_at"] - k if r["first_at"] > k else None
            hold[i] = u
            scale[i] = _recompute_scale(u, c, share, held_p, lift)  # it prefills its prompt and its tokens again
            if prompt:
                tokens[i] = max(1, round(prompt[c] * scale[i]))
            if carried is not None and carried[0] == i:
                carried = None
            queue.appendleft(i)
            preemptions += 1
        # 3. arrivals
        _take_arrivals(arrival, arrived, t, queue)
        if not running and not queue:
            t = min(arrival[i] for i in range(n) if not arrived[i])
            continue
        # 4. admissions, with this iteration's budget
        fed = []  # (class, tokens) prefilled this iteration
        room = budget
        if carried is not None:
            i, take, carried = _feed_carried(carried, budget)
            fed.append((cls[i], take))
            room -= take
        joined = []
        while queue and len(running) < batch_cap:
            i = queue[0]
            c = cls[i]
            if running and usage(k, [hold[i]]) > limit:
                break
            pieces_after = 0  # iterations its prompt runs past this one
            if budget and prompt[c]:
                if room <= 0 or carried is not None:
                    break
                take = min(tokens[i], room)
                fed.append((c, take))
                room -= tokens[i]
                rest = tokens[i] - take
                if rest:
                    carried = [i, rest]
                while rest > 0:
                    pieces_after += 1
                    rest -= budget
            queue.popleft()
            r = {"i": i, "a": k, "h": hold[i], "f": k + pieces_after + left[i]}
            r["first_at"] = k + pieces_after + to_first[i] if to_first[i] is not None else -1
            running.append(r)
            joined.append(i)
        # 5. the iteration
        b = len(running)
        tau = sum(table.pass_s[cls[r["i"]]][b] for r in running) / b
        for i in joined:
            c = cls[i]
            if not (budget and prompt[c]):
                tau += lift[c][b] * scale[i] / b
        for c, x in fed:
            tau += x * lift[c][b] / prompt[c] / b
        t += tau
        k += 1
        for r in running:
            if r["first_at"] == k:
                first_out[r["i"]] = t
        for r in sorted([r for r in running if r["f"] == k], key=lambda r: r["i"]):
            running.remove(r)
            done[r["i"]] = t
            if issued < n:
                arrival[issued] = t + think
                issued += 1
    return done, first_out, preemptions


def out_of_batch(r):
    """The time each request of a SimResult spent out of the batch after a preemption (0 where none
    was): what Little's law checks take off its stay from first joining to done."""
    return 0.0 if r.requeued_s is None else r.requeued_s


def prefill_first_by_iteration(table, request_class, batch_cap, nfe, arrivals=None, users=None, think=0.0,
                               limit=1.0 + 1e-9):
    """(done, first output, preemptions) for each request where prefills run before the decodes
    (SGLang's scheduler), walked iteration by iteration from the rules above, except:
    4. newcomers join as above (the budget, if any, shared with the rest of a prompt in pieces,
       fed first), and an iteration that prefills anything (a newcomer's prompt, a piece) holds
       only the requests it prefills: bp of them, each pass_s[c][bp] / bp, plus their prompts'
       lift at bp (no budget: lift x its tokens over its prompt's; a budget: tokens x lift / P), over bp;
       the others wait. A request's first output comes with its prompt's last token;
    5. otherwise every running request decodes: pass_s[c][b] / b each, one pass each, and its K/V
       grows: h + (s - h)(d - a)/(f - a) at d decode iterations run, admitted at a, its last
       output at f = a + (passes left - 1) (one more where that is a: it leaves before growing).
    `nfe`: each request's passes, its prefill one of them however many pieces it takes."""
    n = len(request_class)
    cls = list(request_class)
    share, held_p = table.mem_share, table.held_from_admission
    budget = table.prefill_budget
    prompt = table.prompt_tokens if budget else None
    lift = [[f - p for f, p in zip(fr, pr)] for fr, pr in zip(table.first_pass_s, table.pass_s)]
    arrival, issued = _arrivals(n, arrivals, users)
    left = list(nfe)  # passes left, the (next) prefill among them
    tokens = [prompt[c] if prompt else 0 for c in cls]
    scale = [1.0] * n
    hold = [share[c] * held_p[c] for c in cls]
    streamed = [False] * n
    done, first_out = [math.nan] * n, [math.nan] * n
    running = []
    queue: deque = deque()
    arrived = [False] * n
    carried = None  # [request, tokens left] of a prompt in its pieces
    t, d, preemptions = 0.0, 0, 0
    while any(x != x for x in done):
        while len(running) > 1 and _usage(running, d, share, cls) > limit:
            r = running.pop()
            i, c = r["i"], cls[r["i"]]
            u = _held_at(r, d, share, cls)
            left[i] = r["left"]  # its decodes left, and the recompute's prefill one more
            hold[i] = u
            scale[i] = _recompute_scale(u, c, share, held_p, lift)
            if prompt:
                tokens[i] = max(1, round(prompt[c] * scale[i]))
            queue.appendleft(i)
            preemptions += 1
        _take_arrivals(arrival, arrived, t, queue)
        if not running and not queue:
            t = min(arrival[i] for i in range(n) if not arrived[i])
            continue
        fed = []  # (request, tokens) prefilled this iteration
        room = budget
        if carried is not None:
            i, take, carried = _feed_carried(carried, budget)
            fed.append((i, take))
            room -= take
        while queue and len(running) < batch_cap:
            i = queue[0]
            c = cls[i]
            if running and _usage(running, d, share, cls, [hold[i]]) > limit:
                break
            take = None
            if budget:
                if room <= 0 or carried is not None:
                    break
                take = min(tokens[i], room)
                room -= tokens[i]
                if tokens[i] > take:
                    carried = [i, tokens[i] - take]
            queue.popleft()
            f = d + left[i] - 1
            running.append({"i": i, "a": d, "h": hold[i], "f": f if f > d else d + 1, "left": left[i], "prefilling": True})
            fed.append((i, take))
        if fed:  # prefills alone
            bp = len(fed)
            tau = sum(table.pass_s[cls[i]][bp] for i, _ in fed) / bp
            for i, x in fed:
                c = cls[i]
                tau += (lift[c][bp] * scale[i] if x is None else x * lift[c][bp] / prompt[c]) / bp
            t += tau
            ending = [i for i, _ in fed if carried is None or carried[0] != i]
            for r in running:
                if r["i"] in ending and r["prefilling"]:
                    r["prefilling"] = False
                    r["left"] -= 1
                    if not streamed[r["i"]]:
                        first_out[r["i"]], streamed[r["i"]] = t, True
        else:  # the decodes
            b = len(running)
            t += sum(table.pass_s[cls[r["i"]]][b] for r in running) / b
            d += 1
            for r in running:
                r["left"] -= 1
        for r in sorted([r for r in running if r["left"] == 0], key=lambda r: r["i"]):
            running.remove(r)
            done[r["i"]] = t
            if issued < n:
                arrival[issued] = t + think
                issued += 1
    return done, first_out, preemptions
