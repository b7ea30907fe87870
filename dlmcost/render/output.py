"""Where a command's result goes: standard output, and a rich Console over it for what is drawn.

JSON, CSV, JSONL and Markdown are text written as it is (`write`): they never import rich. A
table, a header line or a caption is drawn by rich's Console, built the first time something
asks for it (`console`, `width`, `height`, `color`), so only the table path pays rich's import.

rich's Console decides the facts, from the environment it is given (the same rules dlmcost
documents in docs/scripting.md):
- width: $COLUMNS, else the terminal's size, else 80; when stdout is not a terminal, PIPE_WIDTH
  unless $COLUMNS says otherwise (rich would ask stdin's or stderr's terminal instead, and a
  file's tables would depend on the window the command ran in);
- colour: on a terminal (or FORCE_COLOR / TTY_COMPATIBLE=1), in the colours the terminal
  announces. Never under NO_COLOR (https://no-color.org) or TERM=dumb / unknown, which get no
  bold or dim either (rich's NO_COLOR drops colours but keeps bold);
- under TERM=dumb rich assumes 80 columns whatever the terminal reports: it gets the reported
  size here. A $COLUMNS or $LINES that is not a positive number is not passed on (rich's int()
  of '²' would end the command in a traceback); one below MIN_COLUMNS counts only on a terminal.
Text is printed as rich Text, never parsed for markup: a GPU named "[bold]x[/]" prints as is.
"""

from __future__ import annotations

import os
import re
import sys
from functools import lru_cache
from typing import IO

from ..safe_text import shown

PIPE_WIDTH = 100  # tables written to a pipe or file fit this many columns unless $COLUMNS says otherwise
MIN_COLUMNS = 20  # a smaller $COLUMNS is ignored when piped (it is more likely junk than a terminal)
UNLIMITED = 100_000  # the console width of Output(width=None): nothing wraps, no column is dropped


class Styled(str):
    """Text that a terminal shows in a rich style ("red bold", "cyan"); plain text everywhere else
    (JSON, CSV, Markdown, a pipe): it *is* the string."""

    style: str

    def __new__(cls, text: str, style: str = "") -> "Styled":
        self = super().__new__(cls, text)
        self.style = style
        return self


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _number(text: str) -> int:
    """A positive count from the environment, else 0 (isdecimal: '²' is a digit int() rejects)."""
    return int(text) if text.isdecimal() else 0


@lru_cache(maxsize=None)
def console_class():
    """rich's Console, except that a reader who leaves early (`| head`) raises BrokenPipeError as
    any write does, for the CLI to end quietly with success; rich's own answer is exit 1."""
    from rich.console import Console

    class Quiet(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return Quiet


def console_for(stream: IO[str], environ: dict):
    """A rich Console over `stream` that reads `environ` by the rules above."""
    Console = console_class()
    term = environ.get("TERM", "").strip().lower()
    plain = environ.get("NO_COLOR", "") != "" or term in ("dumb", "unknown")
    env = {k: v for k, v in environ.items() if k not in ("COLUMNS", "LINES", "TERM")}
    if term not in ("dumb", "unknown") and "TERM" in environ:
        env["TERM"] = environ["TERM"]
    tty = _isatty(stream)
    columns, lines = _number(environ.get("COLUMNS", "")), _number(environ.get("LINES", ""))
    width = None
    if columns >= MIN_COLUMNS or (tty and columns):
        env["COLUMNS"] = str(columns)
    elif not tty:
        width = PIPE_WIDTH
    if lines:
        env["LINES"] = str(lines)
    return Console(file=stream, width=width, color_system=None if plain else "auto", _environ=env,
                   **QUIET)


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.M)


def without_trailing_spaces(text: str) -> str:
    """Each line's trailing spaces removed, also those before the style codes that end it:
    line by line, the pattern only where a line ends in a style code (run over a whole table
    of thousands of lines, it would try every run of spaces between its columns)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.endswith(" "):
            lines[i] = line.rstrip(" ")
        elif line.endswith("m") and "\x1b" in line:
            lines[i] = _TRAILING.sub(r"\1", line)
    return "\n".join(lines)


def print_lines(console, renderable, width: int | None = None, laid_out: bool = False) -> None:
    """`renderable` drawn `width` wide (default: the console's) without trailing spaces (rich
    pads a table's last column; a file or a test reads lines as they end) and without cropping:
    a table wider than the terminal overflows it, as a long line would. `laid_out`: the
    renderable lays its lines out within the width itself, as a rich Table does, so rich need
    not go over every line again to crop it (a table of thousands of rows: tens of ms)."""
    if width is not None and width > console.width:
        from rich.segment import Segments

        lines = console.render_lines(renderable, console.options.update_width(width), pad=False, new_lines=True)
        with console.capture() as capture:
            console.print(Segments([s for line in lines for s in line]), crop=False)
    else:
        with console.capture() as capture:
            console.print(renderable, crop=not laid_out)
    console.file.write(without_trailing_spaces(capture.get()))


# Text goes out as it is: no markup, emoji codes or highlighted numbers; no Windows console API.
QUIET = dict(markup=False, emoji=False, highlight=False, soft_wrap=False, legacy_windows=False)


class _Held:
    """A stream's writes kept until they are released; what the terminal is, width and colour,
    is still asked of the stream it stands for."""

    def __init__(self, real: IO[str]):
        self.real, self.parts = real, []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return _isatty(self.real)

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.real, "encoding", None) or "utf-8"


class Output:
    """The sink of one command's result: `write` puts text as it is (JSON, CSV), `line` a line of
    prose and `console` a rich Console for tables, both within the width, styled when colour is on.

    Output(stream, width, height, color) states the facts (width None: never wrap, never drop a
    table column); Output.stdout() lets rich read them from the environment when first needed.

    `hold`: keep everything in memory until `release()`, for a result that is only complete
    when a later step succeeds (the table before `--plot FILE` is drawn): a run that fails before
    then leaves stdout empty."""

    def __init__(self, stream: IO[str], width: int | None = None, height: int = 25, color: bool = False,
                 hold: bool = False):
        self.stream = _Held(stream) if hold else stream
        self._given = (width, height, color)
        self._environ: dict | None = None
        self._console = None

    @classmethod
    def stdout(cls, environ=None, hold: bool = False) -> "Output":
        """Standard output; its width, height and colour as its environment asks."""
        out = cls(sys.stdout, hold=hold)
        out._environ = dict(os.environ if environ is None else environ)
        return out

    def release(self) -> None:
        """Write what was held, and write through from now on."""
        held = self.stream
        if not isinstance(held, _Held):
            return
        self.stream = held.real
        if self._console is not None:
            self._console.file = held.real
        if held.parts:
            held.real.write("".join(held.parts))

    @property
    def console(self):
        if self._console is None:
            if self._environ is not None:
                self._console = console_for(self.stream, self._environ)
            else:
                width, height, color = self._given
                self._console = console_class()(file=self.stream, width=width or UNLIMITED, height=height,
                                        color_system="standard" if color else None, _environ={}, **QUIET)
        return self._console

    @property
    def width(self) -> int | None:
        """Columns a table may take (None: any)."""
        if self._environ is None and self._given[0] is None:
            return None
        return self.console.width

    @property
    def height(self) -> int:
        return self.console.height

    @property
    def color(self) -> bool:
        return self.console.color_system is not None

    def write(self, text: str) -> None:
        self.stream.write(text)

    def line(self, text: str = "", style: str | None = None) -> None:
        """Prose (a header, a note, a caption): control characters shown escaped whatever the
        caller did, each line wrapped to the width at spaces, then styled."""
        from rich.text import Text

        safe = "\n".join(shown(part, None) for part in str(text).split("\n"))
        print_lines(self.console, Text(safe, style=style or ""))
