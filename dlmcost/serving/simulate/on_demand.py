"""The K/V the running requests hold where it is allocated as tokens come (the package docstring,
"K/V on demand"): a request admitted at iteration a, finishing at f, holding h then, holds
h + (s - h)(k - a)/(f - a) at boundary k (s: its class's whole share). The first-done loop asks
whether that sum, plus a newcomer's, exceeds the limit at a boundary, and where it first will.

The answer is the correctly rounded sum (math.fsum) of those terms, so that it does not hang on
the order they are summed in (the tests' reference sums them its own way). Summing every running
request at every question costs O(b); instead the sum is kept as a line A + B (k - base), updated
as requests join and leave, and the exact sum is taken only where the line lies within its own
rounding bound of the limit (the standard bound on a float sum: the operations since the line
was last rebuilt, times the unit roundoff, times the magnitudes summed), so the decisions are
those of the exact sums.
"""

from __future__ import annotations

import math

EPS = 2.0 ** -52
REBUILD_AFTER = 256  # updates of the line before it is summed again from the terms (its error stays small)


class HeldKV:
    """The running requests' K/V, in the order they were admitted (a preemption takes the last)."""

    __slots__ = ("running", "h0", "adm", "fin", "whole", "base", "level", "slope", "updates", "size", "idle")

    def __init__(self, n: int):
        self.running: dict[int, tuple[float, float]] = {}  # request -> (its term at `base`, its slope)
        self.h0 = [0.0] * n
        self.adm = [0] * n
        self.fin = [0] * n
        self.whole = [0.0] * n  # its class's whole share s
        self.base = 0
        self.level = self.slope = 0.0  # the line: level + slope (k - base)
        self.updates = 0
        self.size = 0.0  # the magnitudes summed into the line since it was rebuilt
        # no line kept (joins and leaves only recorded) until a question is asked: most runs, and most
        # stretches of a run, hold too few requests to ask any (`rest`)
        self.idle = True

    def term(self, i: int, k: int) -> float:
        h = self.h0[i]
        return h + (self.whole[i] - h) * (k - self.adm[i]) / (self.fin[i] - self.adm[i])

    def exact(self, k: int, extra: float = 0.0) -> float:
        held = [self.term(i, k) for i in self.running]
        held.append(extra)
        return math.fsum(held)

    def _rebuild(self, k: int) -> None:
        self.base = k
        self.running = {i: self._piece(i) for i in self.running}
        self.level = math.fsum(p[0] for p in self.running.values())
        self.slope = math.fsum(p[1] for p in self.running.values())
        self.updates = 0
        self.size = abs(self.level) + self.slope

    def _piece(self, i: int) -> tuple[float, float]:
        g = (self.whole[i] - self.h0[i]) / (self.fin[i] - self.adm[i])
        return self.h0[i] + g * (self.base - self.adm[i]), g

    def join(self, i: int, k: int, f: int, h: float, s: float) -> None:
        self.adm[i], self.fin[i], self.h0[i], self.whole[i] = k, f, h, s
        if self.idle:
            self.running[i] = (0.0, 0.0)  # its piece is taken when the line is next built
            return
        if self.updates >= REBUILD_AFTER or k - self.base > REBUILD_AFTER:
            self.running[i] = (0.0, 0.0)
            self._rebuild(k)
            return
        piece = self._piece(i)
        self.running[i] = piece
        self._add(piece, 1.0)

    def leave(self, i: int) -> None:
        piece = self.running.pop(i)
        if not self.idle:
            self._add(piece, -1.0)

    def rest(self) -> None:
        """Stop keeping the line while too few run to ask about it (the next question rebuilds it)."""
        self.idle = True

    def newest(self) -> int:
        i = next(reversed(self.running))
        self.leave(i)
        return i

    def _add(self, piece: tuple[float, float], sign: float) -> None:
        self.level += sign * piece[0]
        self.slope += sign * piece[1]
        self.size += abs(piece[0]) + abs(piece[1])
        self.updates += 1

    def over(self, k: int, limit: float, extra: float = 0.0) -> bool:
        """Whether the K/V held at boundary k, plus `extra`, exceeds `limit` (as the exact sum says)."""
        if not self.running:
            return extra > limit
        if self.idle:
            self.idle = False
            self._rebuild(k)
        d = k - self.base
        line = self.level + self.slope * d + extra
        # the line's error: the updates' and this evaluation's roundings, over the magnitudes involved
        bound = (self.updates + len(self.running) + 8) * EPS * (self.size * (1 + abs(d)) + abs(line) + extra)
        if line > limit + bound:
            return True
        if line < limit - bound:
            return False
        return self.exact(k, extra) > limit

    def first_over(self, lo: int, hi: int, limit: float) -> int | None:
        """The first boundary k in lo..hi at which the K/V held exceeds `limit` (it only grows while
        no request joins or leaves), else None: the line's crossing, then the boundary where the
        exact sum crosses, next to it."""
        if not self.over(hi, limit):
            return None
        k = hi if self.slope <= 0 else min(hi, max(lo, self.base + math.ceil((limit - self.level) / self.slope)))
        while k > lo and self.over(k - 1, limit):
            k -= 1
        while not self.over(k, limit):
            k += 1
        return k
