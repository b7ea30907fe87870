"""Sweeps written from columns (render/columns.py) against the row-by-row path they replace, used
here as the oracle: csv.DictWriter and json.dumps over `SweepRow.plain()` dictionaries (strings
through cells.safe), the per-row `cli.output.check_finite`, and Python's stable `list.sort`."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from dlmcost import api, errors
from dlmcost.cli.output import check_finite as check_rows
from dlmcost.render import columns
from dlmcost.render.cells import safe

ODD_GPU = r"""
name: "Odd, \"quoted\" GPU \e[31m é"
aliases: [oddgpu]
vendor: Testco
status: estimated
memory_gb: 16
bandwidth_tb_s: 2.0
peak_tflops: {bf16: 1000, fp8: 2000, fp32: 50}
efficiency:
  memory_bandwidth: 0.8
  gemm: {bf16: 0.8, fp8: 0.7}
  overhead_us_per_op: 3
sources: {memory: test, bandwidth: test, peak_tflops: test, efficiency: test}
"""


def oracle_csv(rows: list[dict], header: bool = True) -> str:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        if header:
            writer.writeheader()
        writer.writerows({k: safe(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows)
    return buf.getvalue()


def oracle_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps({k: safe(v) if isinstance(v, str) else v for k, v in r.items()}, allow_nan=False)
                   + "\n" for r in rows)


def written(write, cols, *args) -> str:
    buf = io.StringIO()
    write(cols, buf, *args)
    return buf.getvalue()


@pytest.fixture(scope="module")
def varied(tmp_path_factory):
    """A sweep with every kind of cell: schemes that ignore steps and block (None), several GPUs and
    precisions (one GPU's name with a comma, quotes, an escape and a non-ASCII letter), tp 1 and 2."""
    path = tmp_path_factory.mktemp("hw") / "odd.yaml"
    path.write_text(ODD_GPU)
    options = dict(gpus="h100,mi300x,oddgpu", hardware=[str(path)], schemes=["ar", "mdm", "block", "dual-cache"],
                   gens=[64, 256], steps=[32, 64], blocks=[8, 32], batches=[1, 16], precisions=["bf16", "fp8"],
                   tps=[1, 2])
    rows = api.sweep_rows(api.sweep(**options))
    _, chunks = api.iter_sweep_columns(**options)
    return rows, columns.concatenate(list(chunks))


def test_the_varied_sweep_has_every_kind_of_cell(varied):
    rows, cols = varied
    assert len(rows) == len(cols["gpu"]) > 100
    assert any(r["steps"] is None for r in rows) and any(r["block"] is None for r in rows)
    assert any("," in r["gpu"] for r in rows) and {r["fits"] for r in rows} == {True, False}


def test_csv_from_columns_is_the_row_writer_s_byte_for_byte(varied):
    rows, cols = varied
    assert written(columns.write_csv, cols, True) == oracle_csv(rows)
    assert written(columns.write_csv, cols, False) == oracle_csv(rows, header=False)


def test_jsonl_from_columns_is_json_dumps_byte_for_byte(varied):
    rows, cols = varied
    assert written(columns.write_jsonl, cols) == oracle_jsonl(rows)


def test_rows_from_columns_are_the_records_plain_rows(varied):
    rows, cols = varied
    assert columns.rows(cols) == rows
    assert columns.ColumnRows(cols)[3:5] == rows[3:5] and columns.ColumnRows(cols)[-1] == rows[-1]
    assert columns.ColumnRows(cols).distinct("block") == {r["block"] for r in rows}


def test_table_cells_from_columns_are_the_row_by_row_cells(varied):
    """A table's cells made column by column (each distinct value formatted once) are the cells
    made row by row from the same rows as dictionaries, styles included; and the first rows of
    the columns are the first rows."""
    from dlmcost.render import sweep as report

    rows, cols = varied
    several = {"model": np.array(["a", "b"] * (len(rows) // 2) + ["a"] * (len(rows) % 2)), **cols}
    for held in (cols, several):
        plain = columns.rows(held)
        by_column = report.sweep_table(columns.ColumnRows(held), plain)
        by_row = report.sweep_table(plain, plain)
        assert by_column == by_row
        assert [[getattr(c, "style", None) for c in r] for r in by_column[1]] == \
            [[getattr(c, "style", None) for c in r] for r in by_row[1]]
    assert report.sweep_table(columns.ColumnRows(cols).head(5), rows) == report.sweep_table(rows[:5], rows)
    assert columns.ColumnRows(cols).head(0) is not None and len(columns.ColumnRows(cols).head(0)) == len(rows)


EDGE = {"name": np.array(["a,b", 'say "hi"', "line\nbreak", "\x1b[2J", "", "é→", "plain"]),
        "float": np.array([0.1, 1e16, 1e-7, -0.0, 123456789.0, 2.5e-300, 1 / 3]),
        "int": np.array([0, -1, 2**53 + 1, 7, 10**15, 3, 4]),
        "flag": np.array([True, False, True, True, False, False, True]),
        "knob": np.array([None, 8, None, 16, 8, 8, None], dtype=object),
        "few": np.array([1.5, 1.5, 2.0, 1.5, 2.0, 1.5, 1.5])}


def test_edge_cells_match_csv_and_json():
    rows = columns.rows(EDGE)
    assert written(columns.write_csv, EDGE, True) == oracle_csv(rows)
    assert written(columns.write_jsonl, EDGE) == oracle_jsonl(rows)
    empty = {k: v[:0] for k, v in EDGE.items()}
    assert written(columns.write_csv, empty, True) == "" == written(columns.write_jsonl, empty)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("at", [(0, "float"), (6, "few"), (3, "float")])
def test_finite_check_names_what_the_row_check_names(value, at):
    row, key = at
    cols = {k: v.copy() for k, v in EDGE.items()}
    cols[key][row] = value
    cols["few"][1] = math.inf  # a second bad cell, found later by the row check (it walks from the end)
    with pytest.raises(errors.WorkloadError) as by_rows:
        check_rows(columns.rows(cols), "sweep")
    with pytest.raises(errors.WorkloadError) as by_columns:
        columns.check_finite(cols, "sweep")
    assert str(by_columns.value) == str(by_rows.value)


def test_finite_check_allows_ignored_knobs_but_not_inf_in_them():
    columns.check_finite(EDGE)  # None knobs pass
    cols = dict(EDGE, knob=np.array([None, math.inf, None, 1, 1, 1, 1], dtype=object))
    with pytest.raises(errors.WorkloadError, match="sweep.knob came out as inf"):
        columns.check_finite(cols)


@pytest.mark.parametrize("key", ["name", "float", "int", "flag", "knob", "few"])
@pytest.mark.parametrize("reverse", [False, True])
def test_sort_is_python_s_stable_sort_with_none_last(key, reverse):
    cols = dict(EDGE, order=np.arange(7))
    expected = sorted(columns.rows(cols), key=lambda r: (r[key] is None, r[key]), reverse=reverse)
    assert columns.rows(columns.sort(cols, key, reverse)) == expected


def test_sorting_a_sweep_in_columns_matches_sorting_its_rows(varied):
    rows, cols = varied
    for key, reverse in (("tokens_per_s", True), ("steps", False), ("gpu", True), ("block", True)):
        expected = sorted(rows, key=lambda r: (r[key] is None, r[key]), reverse=reverse)
        assert columns.rows(columns.sort(cols, key, reverse)) == expected, key


REQUIREMENTS = ["tokens_per_s >= 300", "time_s < 2.5", "scheme == dual-cache", "scheme != ar", "fits", "not fits",
                "block > 8", "steps <= 32", "gpu == oddgpu", "batch == 16", "max_batch != 0", "verdict == memory-bound",
                "fits == true", "batch == true", "tp", "not tp", "memory_bound_time_fraction", "supported",
                "precision != fp8"]


@pytest.mark.parametrize("text", REQUIREMENTS)
def test_a_requirement_over_columns_is_the_row_by_row_check(varied, text):
    """Where numpy can answer for every row at once it answers as `holds` does row by row; where it
    cannot (a knob with None, a flag against a number), it says so and the rows are checked."""
    rows, cols = varied
    q = api.parse_requirements([text])[0]
    held = q.holds_columns(cols)
    expected = [q.holds(r) for r in rows]
    if held is None:
        assert q.key in ("block", "steps", "supported") or isinstance(q.value, bool)
    else:
        assert held.tolist() == expected
    assert any(expected) or text in ("gpu == oddgpu", "supported", "not tp")


def test_a_streamed_sweep_lists_the_same_failures_as_the_rows(varied, tmp_path):
    from dlmcost.cli.sweep import _failures

    rows, cols = varied
    for texts in (["tokens_per_s >= 300", "fits"], ["scheme != ar", "block > 8"], ["time_s < 2.5"]):
        qs = api.parse_requirements(texts)
        assert _failures(qs, cols) == api.requirement_failures(qs, rows, api.sweep_label)


def test_a_sorted_jsonl_sweep_is_jsonl(capsys):
    """--format jsonl with --sort holds the rows to sort them, and still writes one JSON object per
    line (it drew a table before), in the order --sort asks."""
    from dlmcost.cli import main

    assert main(["sweep", "--gpu", "h100,b200", "--block", "8,32", "-f", "jsonl", "--sort", "-time_s"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = sorted(api.sweep_rows(api.sweep(gpus="h100,b200", blocks=[8, 32])), key=lambda r: r["time_s"],
                      reverse=True)
    assert rows == expected


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "jsonl"])
def test_a_large_sweep_builds_no_dictionaries(monkeypatch, capsys, fmt):
    """Sorted and cut in columns: a table of the top rows formats them from the columns, and
    csv and jsonl, streamed or sorted, are written from them: no row becomes a dictionary."""
    from dlmcost.cli import main

    built = []
    real = columns.rows

    def counting(cols, index=None):
        out = real(cols, index)
        built.append(len(out))
        return out

    monkeypatch.setattr(columns, "rows", counting)
    args = ["sweep", "--gpu", "h100,b200", "--block", "4,8,16,32", "--batch", "1,2,4,8,16,32", "-f", fmt]
    for extra in ([], ["--sort", "-tokens_per_s"]):
        built.clear()
        assert main([*args, *extra, "--limit", "5"]) == 0
        total = len(capsys.readouterr().out.splitlines())
        assert total > 5 and sum(built) == 0, (extra, built)
