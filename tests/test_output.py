"""dlmcost/render/output.py and tables.py: rich's Console and Table draw what a terminal shows,
under dlmcost's rules for width and colour; machine formats never import rich; the numbers
and words the tables print (no exponent notation, the plan's search in words).

Expected values come from rich itself where rich has an opinion (its escape codes, its cell
widths, a table drawn cell by cell), and from the rules written out again here otherwise."""

from __future__ import annotations

import io
import json
import os
import sys

import pytest

from dlmcost.render import analyze, cells, formats, page, plan, tables
from dlmcost.render.output import MIN_COLUMNS, PIPE_WIDTH, Output, Styled
from dlmcost.render.tables import Column

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forkrun  # noqa: E402

ESC = "\x1b"


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
    """The rules (docs/scripting.md); where rich's Console decides colour by itself it agrees."""
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
    # '²' passes str.isdigit but int() rejects it: rich's own reading would end in a traceback
    monkeypatch.setattr("sys.stdout", Tty() if tty else io.StringIO())
    out = Output.stdout({"COLUMNS": "²", "LINES": "³", "TERM": "xterm-256color"})
    assert out.width >= MIN_COLUMNS if tty else out.width == PIPE_WIDTH
    assert out.height > 0
    assert Output.stdout({"COLUMNS": "١٢٠"}).width == 120  # Arabic-Indic digits are a number to int()


def test_a_dumb_terminal_gets_its_reported_width(monkeypatch):
    """rich assumes 80 columns under TERM=dumb; the terminal's own size is used."""
    monkeypatch.setattr("os.get_terminal_size", lambda fd=0: os.terminal_size((132, 40)))
    monkeypatch.setattr("sys.stdout", Tty())
    out = Output.stdout({"TERM": "dumb"})
    assert out.width == 132 and out.height == 40 and not out.color


def test_lines_are_wrapped_escaped_and_styled_per_line():
    out = Output(io.StringIO(), width=20, color=True)
    out.line("evil\x1b]0;t\x07 name is here", style="dim")
    lines = out.stream.getvalue().splitlines()
    assert lines == ["\x1b[2mevil\\x1b]0;t\\x07\x1b[0m", "\x1b[2mname is here\x1b[0m"]
    plain = Output(io.StringIO(), width=None)
    plain.line("a\nb", style="bold")
    assert plain.stream.getvalue() == "a\nb\n"


def test_markup_in_a_name_is_shown_as_it_is():
    """A GPU or model named like rich markup prints literally, in prose and in a table."""
    out = Output(io.StringIO(), width=80, color=True)
    out.line("[bold]x[/] and [red]y[/red]")
    tables.print_fitted(out, [Column("GPU", 0, right=False), Column("n", 0)], [["[bold]H100[/]", "1"]])
    text = out.stream.getvalue()
    assert "[bold]x[/] and [red]y[/red]" in text and "[bold]H100[/]" in text
    assert "\x1b[31m" not in text  # nothing turned red


def test_styled_text_is_its_string():
    s = Styled("NO", "red bold")
    assert s == "NO" and s.style == "red bold" and page.plain(s) == "NO"
    assert formats.to_markdown(["fits"], [[s]]).endswith("| NO |\n")


def _table(columns, rows, width, color=False, by_column=None):
    out = Output(io.StringIO(), width=width, color=color)
    table, dropped, need = tables.build(columns, rows, width, by_column=by_column)
    from dlmcost.render.output import print_lines

    print_lines(out.console, table, max(out.console.width, need))
    return out.stream.getvalue().splitlines(), dropped


def test_one_cell_a_column_draws_what_rich_draws_cell_by_cell():
    """The big tables go to rich as whole columns (speed); rich's own cell-by-cell drawing of the
    same table is the expected text, colours included."""
    columns = [Column("GPU", 0, right=False), Column("latency\nms", 0), Column("bound", 0, right=False),
               Column("wide 测试", 0)]
    rows = [["H100 SXM", "1,572", Styled("compute", "magenta"), "3.35"], ["测试加速器", "12", Styled("memory", "cyan"), "x"]]
    for color in (False, True):
        assert _table(columns, rows, 80, color, by_column=True) == _table(columns, rows, 80, color, by_column=False)


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


def test_multi_line_cells_styles_and_the_rule():
    columns = [Column("scheme", 0, right=False), Column("knobs", 0, right=False), Column("x", 0)]
    rows = [["block", ["steps", "block"], Styled("NO", "red bold")]]
    plain, _ = _table(columns, rows, 80)
    # two spaces between columns; the rule under the header one piece per column
    assert plain == ["scheme  knobs   x", "──────  ─────  ──", "block   steps  NO", "        block"]
    lines, _ = _table(columns, rows, 80, color=True)
    assert "\x1b[1mscheme" in lines[0] and "\x1b[1;31mNO\x1b[0m" in lines[2]


def test_control_characters_in_cells_are_escaped():
    columns = [Column("name", 0, right=False), Column("what", 0, wrap=True)]
    rows = [["x\x1b[2J", ["a\x07"]], ["y", "evil\x9b31m text"]]
    lines, _ = _table(columns, rows, 40)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "x\\x1b[2J" in text
    one_line, _ = _table([Column("name", 0, right=False)], [["x\x1b[2J"]], 40)  # the column-at-once path
    assert one_line[-1] == "x\\x1b[2J"


def test_a_name_in_wide_characters_keeps_the_columns_in_line():
    from rich.cells import cell_len as rich_cell_len

    columns = [Column("GPU", 0, right=False), Column("TB/s", 0), Column("status", 0, right=False, wrap=True)]
    rows = [["测试加速器", "3.35", "verified"], ["H100 SXM", "3.35", "新的 wide 测试 words " * 3]]
    lines, _ = _table(columns, rows, 44)
    assert all(rich_cell_len(ln) <= 44 for ln in lines) and len(lines) > 4, lines
    # "3.35" ends at the same terminal column in both rows
    ends = {rich_cell_len(ln[:ln.index("3.35") + 4]) for ln in lines if "3.35" in ln}
    assert len(ends) == 1 and len([ln for ln in lines if "3.35" in ln]) == 2


def test_columns_that_never_drop_overflow_rather_than_lose_digits():
    columns = [Column("GPU", 0, right=False), Column("number", 0)]
    lines, dropped = _table(columns, [["RTX PRO 6000 Blackwell", "123,456,789"]], 20)
    assert not dropped and lines[-1] == "RTX PRO 6000 Blackwell  123,456,789"


# --- what a new user tripped over (issue 21) ------------------------------------------------


@pytest.mark.parametrize("x, digits, text", [
    (10920.4, 4, "10,920"), (1234.5, 3, "1,234"), (999.4, 3, "999"), (85.333, 4, "85.33"), (0.5872, 3, "0.587"),
    (123456.0, 4, "123,456"), (5837.2, 3, "5,837"),
    (1000.0, 3, "1,000"), (10000.0, 4, "10,000"),  # exactly the first whole number past the digits asked
])
def test_numbers_are_never_in_exponent_notation(x, digits, text):
    """More whole digits than the significant digits asked for: whole, with thousands
    separators ('1.092e+04' was what the tables showed)."""
    assert cells.num(x, digits) == text
    assert "e+" not in cells.count(x) and "e+" not in cells.ms(x) and "e+" not in cells.gb(x * 1e9)
    assert cells.ms(10.0) == "10,000"  # 10 s to 4 digits in ms


def test_a_big_pass_shows_its_numbers_whole():
    """LLaDA-8B, one pass over a 3,072-token sequence: thousands of GFLOP a pass, printed with
    separators: every cell of the passes table is free of exponent notation."""
    from dlmcost import api

    a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", prompt=2048, gen=1024, steps=64).plain()
    rows = analyze.pass_rows(a["results"][0])
    flops = a["results"][0]["passes"][0]["flops"] / 1e9
    assert flops > 1e4 and rows[0][4] == f"{flops:,.0f}"
    assert not any("e+" in page.plain(c) for r in rows for c in r)
    assert not any("e+" in page.plain(c) for r in analyze.analyze_rows(a) for c in r)


PLAN = dict(model="M", traffic=dict(rate=None, users=1, think_s=0.0, prompt=256, answer=128),
            targets={"p95_latency_s": 30.0}, evaluated=8, skipped={"unsupported_or_not_fitting": 0},
            search=dict(gpus=["H100 SXM", "B200"], tp=[1], precisions=["bf16", "fp8"], kv_dtype="fp8", mem_fraction=0.925,
                        decodings=["mdm/32/1"], max_batch=[256], requests=200, seed=0))


def test_plan_header_says_what_was_searched_in_words():
    """2 GPUs × 1 TP size × 2 precisions × 1 decoding × 1 batch limit = 4 candidates; the 8
    evaluated are those and the AR baseline's 4, every one with an fp8 K/V cache in 92.5% of each
    GPU's memory. No Python list syntax; '1 user', not '1 users'."""
    text = plan.plan_header(PLAN)
    assert "searched 4 candidates (2 GPUs (H100 SXM, B200) × 1 TP size (1) × 2 precisions (bf16, fp8) × " \
           "1 decoding (mdm/32/1) × 1 batch limit (256)) and 4 for the AR baseline; K/V cache fp8, 92.5% of memory;" in text
    assert "[" not in text and "'" not in text
    assert "1 user (think 0 s)" in text and "users" not in text
    many = dict(PLAN, traffic=dict(PLAN["traffic"], users=12), evaluated=4,
                search=dict(PLAN["search"], decodings=["ar"]))
    assert "12 users" in plan.plan_header(many) and "AR baseline" not in plan.plan_header(many)


def test_plan_header_of_a_real_plan(capsys):
    from dlmcost.cli import main

    assert main(["plan", "--rate", "2", "--p95", "30", "--gpu", "h100,b200", "--tp", "1", "--requests", "100",
                 "-f", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    s = record["search"]
    product = len(s["gpus"]) * len(s["tp"]) * len(s["precisions"]) * len(s["decodings"]) * len(s["max_batch"])
    assert f"searched {product} candidates" in plan.plan_header(record)


# --- rich only where a table is drawn ---------------------------------------------------------


# Each command in a process forked from an interpreter that has run just `import dlmcost.__main__,
# dlmcost.cli` (tests/forkrun.py): it starts from the modules a fresh `python -c "from dlmcost.cli
# import main"` has at that point, runs the command and reports rich's modules.
PROBE = r"""
import contextlib, io, json, sys
from dlmcost.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "rich")))
"""
RICH_CASES = [
    (["analyze", "-f", "json"], False), (["analyze", "-f", "csv"], False), (["analyze", "-f", "markdown"], False),
    (["sweep", "--block", "8,32", "-f", "jsonl"], False), (["analyze"], True),
]


@pytest.fixture(scope="module")
def rich_probe():
    return forkrun.run({" ".join(args): forkrun.script(PROBE, args) for args, _ in RICH_CASES}, dict(os.environ),
                       limit_s=120)


@pytest.mark.parametrize("args, rich", RICH_CASES)
def test_rich_is_imported_only_to_draw_a_table(args, rich, rich_probe):
    assert rich_probe[" ".join(args)] is not None, "still running after 120 s"
    code, stdout, stderr = rich_probe[" ".join(args)]
    assert code == 0, stderr
    loaded = json.loads(stdout.splitlines()[-1])
    assert bool(loaded) == rich, loaded
    if rich:  # the Console (a table of one-line cells is laid out in tables.py), not rich's progress bars or markdown
        assert "rich.console" in loaded and "rich.progress" not in loaded and "rich.markdown" not in loaded


def test_plan_labels_name_only_the_knobs_a_scheme_reads(capsys):
    """Masked diffusion reads no block: its plan label must not carry one ('mdm/32/1')."""
    from dlmcost.cli import main

    assert main(["plan", "--rate", "1", "--p95", "30", "--gpu", "h100", "--tp", "1", "--requests", "100",
                 "--scheme", "mdm", "--block", "32", "--tpf", "1", "-f", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert all("/32/" not in d for d in record["search"]["decodings"])
    assert all("/32/" not in r["decoding"] for r in record["deployments"])


def test_progress_shows_only_on_a_terminal_and_only_after_a_second(monkeypatch):
    """A pipe or a log never sees the bar; a terminal sees it from the first second on."""
    from dlmcost.render import progress

    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    p = progress.Progress("planning")
    p._start -= 5  # long past the first second
    p(3, 10)
    p.clear()
    assert piped.getvalue() == ""
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    p = progress.Progress("planning")
    p(1, 10)
    assert tty.getvalue() == ""  # within the first second
    p._start -= 5
    p(3, 10)
    assert "planning" in tty.getvalue() and "3/10" in tty.getvalue()
    p.clear()
    assert tty.getvalue().endswith("\x1b[2K")


def test_trailing_spaces_go_line_by_line_as_the_whole_text_pattern_removes_them():
    """print_lines strips each line's trailing spaces, those before closing style codes too: line
    by line (fast on a table of thousands of lines), the same text as one pass of the pattern."""
    import re

    from dlmcost.render.output import without_trailing_spaces

    text = ("a  b   \n  \x1b[1mx\x1b[0m   \x1b[0m\nplain\n   \n\x1b[36mmemory\x1b[0m  \ny  \x1b[0m   \n"
            "ends in m   m\n\x1b[2m(note)\x1b[0m\n\nlast   ")
    pattern = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.M)
    assert without_trailing_spaces(text) == pattern.sub(r"\1", text)
    assert without_trailing_spaces(text).splitlines()[1] == "  \x1b[1mx\x1b[0m\x1b[0m"
