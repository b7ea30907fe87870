"""dlmcost/output.py, the sink every command writes to, and textable's wrapped columns.

Output replaced rich's Console (issue #7), and its users must see what they saw before: the
expected values here come from rich itself (still installed, as typer's dependency), not from
dlmcost's code: the same line breaks, the same escape codes, the same width and colour rules."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlmcost.render import report, textable
from dlmcost.render.output import MIN_COLUMNS, PIPE_WIDTH, Output, Styled, cell_len, paint, wrap
from dlmcost.render.textable import Column


def rich_lines(text: str, width: int) -> list[str]:
    """What rich's Console.print wrote for one string at `width` (trailing spaces stripped)."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, soft_wrap=False, highlight=False,
                      markup=False, emoji=False)
    console.print(text)
    return [line.rstrip() for line in console.file.getvalue().split("\n")[:-1]]


@given(st.text(alphabet="ab ·-1.", max_size=80), st.integers(1, 30))
def test_wrap_breaks_lines_where_rich_did(text, width):
    assert wrap(text, width) == rich_lines(text, width)


@given(st.text(alphabet="a 测试ＧＰＵé·", max_size=60), st.integers(2, 30))
def test_wide_characters_take_two_columns(text, width):
    from rich.cells import cell_len as rich_cell_len

    assert cell_len(text) == rich_cell_len(text)
    assert wrap(text, width) == rich_lines(text, width)


def test_wrap_examples():
    assert wrap("one two three", 7) == ["one two", "three"]
    assert wrap("abcdefghij xy", 4) == ["abcd", "efgh", "ij", "xy"]  # a long word is cut, not elided
    assert all(len(line) <= 20 for line in wrap(report.ANALYZE_CAPTION, 20))


@pytest.mark.parametrize("style", ["bold", "dim", "yellow", "cyan", "magenta", "red bold", "bold red"])
def test_styles_are_the_escape_codes_rich_wrote(style):
    from rich.console import ColorSystem
    from rich.style import Style

    assert paint("x y", style) == Style.parse(style).render("x y", color_system=ColorSystem.STANDARD)


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("env, tty, width, color", [
    ({}, False, PIPE_WIDTH, False),  # piped: 100 columns, plain
    ({"COLUMNS": "80"}, False, 80, False),  # COLUMNS also when piped
    ({"COLUMNS": "7"}, False, PIPE_WIDTH, False),  # junk COLUMNS ignored when piped
    ({"COLUMNS": "7"}, True, 7, True),  # a narrow window is still a window
    ({"COLUMNS": "120", "TERM": "xterm-256color"}, True, 120, True),
    ({"COLUMNS": "120", "NO_COLOR": "1"}, True, 120, False),
    ({"COLUMNS": "120", "NO_COLOR": ""}, True, 120, True),  # NO_COLOR only when non-empty
    ({"COLUMNS": "120", "TERM": "dumb"}, True, 120, False),
    ({"COLUMNS": "120", "TERM": "unknown"}, True, 120, False),
    ({"FORCE_COLOR": "1"}, False, PIPE_WIDTH, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, PIPE_WIDTH, False),
    ({"FORCE_COLOR": ""}, True, None, False),
    ({"TTY_COMPATIBLE": "0"}, True, None, False),
    ({"TTY_COMPATIBLE": "1"}, False, PIPE_WIDTH, True),
])
def test_width_and_colour_follow_the_environment(monkeypatch, env, tty, width, color):
    """The rules rich applied (checked against rich's Console where it has an opinion)."""
    from rich.console import Console

    stream = Tty() if tty else io.StringIO()
    monkeypatch.setattr("sys.stdout", stream)
    base = {"TERM": "xterm-256color", **env}
    out = Output.stdout(base)
    if width is not None:
        assert out.width == width
    assert out.color == color
    rich = Console(file=stream, color_system="auto", _environ=base)
    plain = base.get("NO_COLOR", "") != "" or base.get("TERM") == "dumb"
    assert color == (rich.color_system is not None and not plain)


@pytest.mark.parametrize("tty", [False, True])
def test_columns_and_lines_that_are_not_numbers_are_ignored(monkeypatch, tty):
    # '²' passes str.isdigit but int() rejects it: the command used to end in an internal error
    monkeypatch.setattr("sys.stdout", Tty() if tty else io.StringIO())
    out = Output.stdout({"COLUMNS": "²", "LINES": "³", "TERM": "xterm-256color"})
    assert out.width >= MIN_COLUMNS if tty else out.width == PIPE_WIDTH
    assert out.height > 0
    assert Output.stdout({"COLUMNS": "١٢٠"}).width == 120  # Arabic-Indic digits are a number to int()


def test_lines_are_wrapped_escaped_and_styled_per_line():
    out = Output(io.StringIO(), width=20, color=True)
    out.line("evil\x1b]0;t\x07 name is here", style="dim")
    text = out.stream.getvalue()
    assert text == "\x1b[2mevil\\x1b]0;t\\x07\x1b[0m\n\x1b[2mname is here\x1b[0m\n"
    plain = Output(io.StringIO(), width=None)
    plain.line("a\nb", style="bold")
    assert plain.stream.getvalue() == "a\nb\n"


def test_styled_text_is_its_string():
    s = Styled("NO", "red bold")
    assert s == "NO" and s.style == "red bold" and report.plain(s) == "NO"
    assert report.to_markdown(["fits"], [[s]]).endswith("| NO |\n")


def _table(columns, rows, width, color=False):
    text, dropped = textable.draw(columns, rows, width, color)
    return text.splitlines(), dropped


def test_a_wrapped_column_takes_the_width_left():
    columns = [Column("name", 0, right=False), Column("n", 0), Column("what", 0, wrap=True)]
    rows = [["alpha", "12345", "word " * 20], ["b", "6", "short"]]
    lines, dropped = _table(columns, rows, 40)
    assert not dropped and max(map(len, lines)) <= 40
    assert lines[2].startswith("alpha  12345  word word") and lines[-1] == "b          6  short"
    assert sum(ln.count("word") for ln in lines) == 20  # every word shown, none cut


def test_a_wrapped_column_too_narrow_to_read_is_dropped():
    columns = [Column("name", 0, right=False), Column("n", 0), Column("what", 1, wrap=True, min_width=24)]
    rows = [["alpha" * 6, "12345", "word " * 20]]
    lines, dropped = _table(columns, rows, 50)
    assert dropped == ["what"] and all("word" not in ln for ln in lines)


def test_multi_line_cells_and_styles():
    columns = [Column("scheme", 0, right=False), Column("knobs", 0, right=False), Column("x", 0)]
    rows = [["block", ["steps", "block"], Styled("NO", "red bold")]]
    lines, _ = _table(columns, rows, 80, color=True)
    assert lines == ["\x1b[1mscheme  knobs   x\x1b[0m", "──────  ─────  ──", "block   steps  \x1b[1;31mNO\x1b[0m",
                     "        block"]
    plain, _ = _table(columns, rows, 80)
    assert plain[0] == "scheme  knobs   x" and plain[2] == "block   steps  NO"


def test_control_characters_in_cells_are_escaped():
    columns = [Column("name", 0, right=False), Column("what", 0, wrap=True)]
    rows = [["x\x1b[2J", ["a\x07"]], ["y", "evil\x9b31m text"]]
    lines, _ = _table(columns, rows, 40)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "x\\x1b[2J" in text


def test_a_name_in_wide_characters_keeps_the_columns_in_line():
    from rich.cells import cell_len as rich_cell_len

    columns = [Column("GPU", 0, right=False), Column("TB/s", 0), Column("status", 0, right=False, wrap=True)]
    rows = [["测试加速器", "3.35", "verified"], ["H100 SXM", "3.35", "新的 wide 测试 words " * 3]]
    lines, _ = _table(columns, rows, 44)
    assert all(rich_cell_len(ln) <= 44 for ln in lines) and len(lines) > 4, lines
    # "3.35" ends at the same terminal column in both rows
    ends = {rich_cell_len(ln[:ln.index("3.35") + 4]) for ln in lines if "3.35" in ln}
    assert len(ends) == 1 and len([ln for ln in lines if "3.35" in ln]) == 2
