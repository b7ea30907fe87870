"""A progress bar on a terminal's stderr for work that takes more than a second (the plan
search, large sweeps, calibrate's fit, measure's timings).

`Progress(what)` is called as `progress(done, total)` by the work and `clear()`ed at the end.
Nothing shows before one second (most runs are quicker: a bar flashing by is noise), nor when
stderr is not a terminal (a log or a pipe gets no control codes); from then on rich's bar with
the count ('planning ━━━━━━━━━━━━━━━━  12/80 0:00:03'), redrawn in place, and erased by
`clear()`. rich is imported when the bar first shows: a run that ends within the second, or
whose stderr is not a terminal, loads none of it.
"""

from __future__ import annotations

import sys
import time

DELAY_S = 1.0  # work shorter than this shows no bar
REDRAW_S = 0.1  # the bar is redrawn at most this often (a search calls back for every candidate)


class Progress:
    """`what` names the work ('planning'); `stream`: where to draw (default stderr, and only if it
    is a terminal; a stream given is drawn on as it is)."""

    def __init__(self, what: str, stream=None):
        self.what = what
        self._stream = stream
        self._start = time.monotonic()
        self._bar = None  # rich.progress.Progress, from the first call after DELAY_S
        self._task = None
        self._drawn = 0.0  # perf_counter of the last redraw

    def _shows(self) -> bool:
        if self._stream is not None:
            return True
        try:
            return bool(sys.stderr.isatty())
        except (AttributeError, ValueError):  # no stderr, or closed
            return False

    def __call__(self, done: int, total: int, what: str | None = None) -> None:
        """`what`: a new name for the work from now on (several models swept one after another)."""
        if what is not None:
            self.what = what
        if self._bar is None:
            if time.monotonic() - self._start < DELAY_S or not self._shows():
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            console = Console(file=self._stream or sys.stderr, force_terminal=True, markup=False, emoji=False,
                              highlight=False, legacy_windows=False, get_time=time.perf_counter)
            self._bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                            TimeRemainingColumn(), console=console, transient=True, auto_refresh=False, redirect_stdout=False, redirect_stderr=False,
                            get_time=time.perf_counter)
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=total, completed=done)  # its first frame: this count
        now = time.perf_counter()
        redraw = now - self._drawn >= REDRAW_S or done >= total
        self._bar.update(self._task, completed=done, total=total, description=self.what, refresh=redraw)
        if redraw:
            self._drawn = now

    def clear(self) -> None:
        """Erase the bar (nothing to do if it never showed)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
