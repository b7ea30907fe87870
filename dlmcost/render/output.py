"""Where a command's result goes: standard output, how wide it is, whether it takes colour.

Every table is plain text from textable.py and every other line is a string, so no rendering
library is needed: this object holds the facts about the terminal, wraps lines at word
boundaries to its width, and adds the few ANSI styles dlmcost uses (bold, dim and four
colours). Importing it costs nothing, which keeps `dlmcost analyze -f json` fast to start.

The facts, read once when a command starts (the same rules rich applies, which dlmcost used
before):
- width: $COLUMNS when it is a number of at least 20 (also when piped); else PIPE_WIDTH when
  stdout is not a terminal; else the terminal's width ($COLUMNS, the size it reports, or 80).
  (One change: under TERM=dumb rich assumed 80 columns whatever the terminal reported; the
  reported size is used now.)
- height (how many sweep rows a terminal shows): $LINES, else the terminal's, else 25.
- colour: only on a terminal (or with FORCE_COLOR / TTY_COMPATIBLE=1), and never under
  NO_COLOR (https://no-color.org) or TERM=dumb / unknown, which get no bold or dim either.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from typing import IO

from ..safe_text import shown

PIPE_WIDTH = 100  # tables written to a pipe or file fit this many columns unless $COLUMNS says otherwise
MIN_COLUMNS = 20  # a smaller $COLUMNS is ignored (it is more likely junk than a terminal)

# ANSI SGR parameters of the styles dlmcost uses; the same codes rich wrote ("red bold": 1;31).
_SGR = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "magenta": "35", "cyan": "36"}
_ATTRIBUTES = ("bold", "dim")  # written before the colour, as rich does


class Styled(str):
    """Text that a terminal shows in a style ("red bold", "cyan"); plain text everywhere else
    (JSON, CSV, Markdown, a pipe): it *is* the string."""

    style: str

    def __new__(cls, text: str, style: str = "") -> "Styled":
        self = super().__new__(cls, text)
        self.style = style
        return self


def sgr(style: str | None) -> str:
    """'red bold' -> '\\x1b[1;31m' ('' for no style); an unknown word is a programming error."""
    if not style:
        return ""
    words = style.split()
    codes = [_SGR[w] for w in _ATTRIBUTES if w in words] + [_SGR[w] for w in words if w not in _ATTRIBUTES]
    return f"\x1b[{';'.join(codes)}m"


def paint(text: str, style: str | None) -> str:
    """`text` in `style` (the caller has checked that the output takes colour)."""
    start = sgr(style)
    return f"{start}{text}\x1b[0m" if start and text else text


def cell_len(text: str) -> int:
    """Terminal columns `text` takes: East Asian wide and full-width characters two, combining
    marks none, anything else one (a GPU name in Chinese must not push the table out of line)."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int, right: bool = False) -> str:
    """`text` padded with spaces to `width` terminal columns, on the left when `right`."""
    fill = " " * (width - cell_len(text))
    return fill + text if right else text + fill


def _chop(word: str, width: int) -> list[str]:
    """`word` in pieces of at most `width` terminal columns."""
    if word.isascii():
        return [word[k:k + width] for k in range(0, len(word), width)]
    pieces, piece, used = [], "", 0
    for c in word:
        n = cell_len(c)
        if used + n > width and piece:
            pieces.append(piece)
            piece, used = "", 0
        piece, used = piece + c, used + n
    return pieces + [piece]


_WORD = re.compile(r"\s*\S+\s*")


def wrap(text: str, width: int) -> list[str]:
    """One line of text as lines of at most `width` terminal columns, broken at spaces; a word
    longer than a line is cut into pieces (rich's rule, so that the output did not change)."""
    if width <= 0 or cell_len(text) <= width:
        return [text.rstrip()]
    lines, start, used = [], 0, 0
    for m in _WORD.finditer(text):
        word, begin = m.group(), m.start()
        length = cell_len(word.rstrip())
        if length <= width - used:
            used += cell_len(word)
            continue
        if length > width:  # fold: whole pieces of `width`, the last one continues the line
            if begin:
                lines.append(text[start:begin])
            pieces = _chop(word, width)
            lines += pieces[:-1]
            start, used = begin + len(word) - len(pieces[-1]), cell_len(pieces[-1])
        elif used and begin:
            lines.append(text[start:begin])
            start, used = begin, cell_len(word)
    lines.append(text[start:])
    return [line.rstrip() for line in lines]


def _terminal_size() -> tuple[int, int] | None:
    for fd in (0, 1, 2):  # stdin, stdout, stderr in turn, as rich asked
        try:
            return tuple(os.get_terminal_size(fd))
        except (AttributeError, ValueError, OSError):
            continue
    return None


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class Output:
    """The sink of one command's result: `write` puts text as it is (tables, JSON, CSV),
    `line` puts a line of prose, wrapped to the width and styled when colour is on.

    `hold`: keep everything in memory until `release()`, for a result that is only complete
    when a later step succeeds (the table before `--plot FILE` is drawn): a run that fails before
    then leaves stdout empty."""

    def __init__(self, stream: IO[str], width: int | None = None, height: int = 25, color: bool = False,
                 hold: bool = False):
        self.stream = stream
        self.width = width  # None: never wrap, never drop a table column
        self.height = height
        self.color = color
        self._held: list[str] | None = [] if hold else None

    def _put(self, text: str) -> None:
        if self._held is None:
            self.stream.write(text)
        else:
            self._held.append(text)

    def release(self) -> None:
        """Write what was held, and write through from now on."""
        held, self._held = self._held, None
        if held:
            self.stream.write("".join(held))

    @classmethod
    def stdout(cls, environ=None, hold: bool = False) -> "Output":
        """Standard output with the width, height and colour its environment asks for."""
        env = os.environ if environ is None else environ
        stream = sys.stdout
        tty = _isatty(stream)
        no_color = env.get("NO_COLOR", "") != "" or env.get("TERM", "").strip().lower() in ("dumb", "unknown")

        compatible = env.get("TTY_COMPATIBLE", "")
        force = env.get("FORCE_COLOR")
        terminal = compatible == "1" or (compatible != "0" and (force != "" if force is not None else tty))

        # isdecimal, not isdigit: '²' is a digit that int() rejects (a traceback, exit 70)
        columns, lines = env.get("COLUMNS", ""), env.get("LINES", "")
        size = _terminal_size() if tty else None
        if columns.isdecimal() and int(columns) >= MIN_COLUMNS:
            width = int(columns)
        elif not tty:
            width = PIPE_WIDTH
        else:  # a terminal: a small $COLUMNS is still taken there (a narrow window, as rich did)
            width = (int(columns) if columns.isdecimal() else 0) or (size[0] if size else 0) or 80
        height = (int(lines) if lines.isdecimal() else 0) or (size[1] if size else 0) or 25
        return cls(stream, width, height, color=terminal and not no_color, hold=hold)

    def write(self, text: str) -> None:
        self._put(text)

    def line(self, text: str = "", style: str | None = None) -> None:
        """Prose (a header, a note, a caption): control characters shown escaped whatever the
        caller did, each line wrapped to the width, then styled."""
        out = []
        for part in str(text).split("\n"):
            part = shown(part, None)
            out += wrap(part, self.width) if self.width else [part]
        self._put("".join((paint(s, style) if self.color else s) + "\n" for s in out))
