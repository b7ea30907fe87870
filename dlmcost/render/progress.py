"""Progress on a terminal's stderr for work longer than a second; erased at the end."""

import sys


class Progress:
    """'planning: 12/80 candidate deployments simulated' from the first second on."""

    def __init__(self, what: str = "planning"):
        import time

        self._what = what
        self._clock = time.monotonic
        self._start = self._clock()
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        if self._clock() - self._start >= 1.0:
            sys.stderr.write(f"\r{self._what}: {done}/{total} candidate deployments simulated")
            sys.stderr.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
