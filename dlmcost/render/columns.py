"""Sweep rows from their columns, never one Python object per row: CSV, JSONL, the finite check,
and a table's sort and cut.

CSV and JSONL come out byte for byte as `csv.DictWriter` and `json.dumps` write the same rows as
dictionaries; the finite check is one numpy test per column; a table is sorted and cut in columns,
so that only the rows it shows become dictionaries.

A column is a numpy array of one kind: float, int, bool, str, or object (numbers with None where
a scheme ignores the knob). Each is turned into its cells once, in C where numpy and `repr` of a
list allow it: the repr of a Python float is what both `csv` and `json` write for it, and the few
distinct strings of a column (GPU names, schemes, verdicts) are escaped and quoted once each.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import TextIO

import numpy as np

from ..errors import WorkloadError
from ..safe_text import shown

# what each format writes for None, True and False (csv.DictWriter: '', str(); json: null, true)
_WORDS = {"csv": ("", "True", "False"), "json": ("null", "true", "false")}


def _csv_field(text: str) -> str:
    """One field as csv.writer quotes it (QUOTE_MINIMAL: a comma, a quote or a line break)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([text, ""])
    return buf.getvalue()[:-2]  # the field, without the empty second one's ',' and the newline


def _listed(values: list) -> list[str]:
    """repr of each item, all at once: repr of a list is its items' reprs joined by ', ' (numbers
    and None only, so no item holds ', ')."""
    return repr(values)[1:-1].split(", ") if values else []


def _strings(column: np.ndarray, fmt: str) -> list[str]:
    """Text cells, control characters escaped as cells.safe escapes them; each distinct value once."""
    distinct, where = np.unique(column.astype(str), return_inverse=True)
    quote = _csv_field if fmt == "csv" else json.dumps
    cells = np.array([quote(shown(v, None)) for v in distinct.tolist()], dtype=object)
    return cells[where.reshape(-1)].tolist()


def cells(column: np.ndarray, fmt: str) -> list[str]:
    """A column's cells in `fmt` ('csv' or 'json')."""
    none, true, false = _WORDS[fmt]
    kind = column.dtype.kind
    if kind == "b":
        return np.where(column, true, false).tolist()
    if kind in "iuf":
        distinct, where = np.unique(column, return_inverse=True)
        if 2 * len(distinct) > len(column):
            return _listed(column.tolist())
        return np.array(_listed(distinct.tolist()), dtype=object)[where.reshape(-1)].tolist()  # each value once
    if kind in "US" or (kind == "O" and column.size and isinstance(column.flat[0], str)):
        return _strings(column, fmt)
    values = column.tolist()  # object: numbers of one type, with None where a scheme ignores the knob
    table = {v: none if v is None else repr(v) for v in set(values)}  # a knob: a few values
    return list(map(table.__getitem__, values))


def _body(columns: dict[str, np.ndarray], fmt: str) -> list[list[str]]:
    """Each column's cells; a column equal to one before it (tokens/s per GPU at tp 1) is not
    formatted twice."""
    out, done = [], []
    for c in map(np.asarray, columns.values()):
        same = next((cells_ for prior, cells_ in done if prior.dtype == c.dtype and np.array_equal(prior, c)), None)
        out.append(same if same is not None else cells(c, fmt))
        if c.dtype.kind == "f":
            done.append((c, out[-1]))
    return out


def write_csv(columns: dict[str, np.ndarray], stream: TextIO, header: bool) -> None:
    """The rows as CSV lines, after a header line if asked; nothing at all for no rows."""
    if not columns or not len(next(iter(columns.values()))):
        return
    if header:
        stream.write(",".join(_csv_field(k) for k in columns) + "\n")
    stream.write("\n".join(map(",".join, zip(*_body(columns, "csv")))) + "\n")


def write_jsonl(columns: dict[str, np.ndarray], stream: TextIO) -> None:
    """One JSON object per row and line, keys in the columns' order (json.dumps' separators)."""
    if not columns or not len(next(iter(columns.values()))):
        return
    template = "{" + ", ".join(f"{json.dumps(k).replace('%', '%%')}: %s" for k in columns) + "}\n"
    stream.write("".join(map(template.__mod__, zip(*_body(columns, "json")))))


def check_finite(columns: dict[str, np.ndarray], where: str = "sweep") -> None:
    """Every number finite, one numpy test per column: float columns wholly, object columns (a
    knob, None where the scheme ignores it) for inf. The error names the value the row-by-row check
    would have met first (`cli.output.check_finite` walks the last row's last key first)."""
    names = list(columns)
    bad = []
    for name in names:
        c = np.asarray(columns[name])
        if c.dtype.kind == "f":
            bad.append(~np.isfinite(c))
        elif c.dtype.kind == "O" and c.size and not isinstance(c.flat[0], str):
            bad.append(np.isinf(c.astype(float)))  # None -> NaN, allowed
        else:
            bad.append(np.zeros(len(c), dtype=bool))
    if not bad:
        return
    rows = np.flatnonzero(np.any(bad, axis=0))
    if not rows.size:
        return
    row = rows[-1]
    key = max(i for i, b in enumerate(bad) if b[row])
    value = float(columns[names[key]][row])
    raise WorkloadError(f"the {where}.{names[key]} came out as {value} (an overflow): inputs at the edge of "
                        f"their ranges?")


def concatenate(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Chunks of columns as one set of columns (empty for none)."""
    parts = [p for p in parts if p]
    if not parts:
        return {}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def sort(columns: dict[str, np.ndarray], key: str, reverse: bool = False) -> dict[str, np.ndarray]:
    """The rows ordered as `rows.sort(key=lambda r: (r[key] is None, r[key]), reverse=reverse)`
    orders them: stable, None after every value (before, reversed)."""
    column = np.asarray(columns[key])
    if column.dtype.kind == "O" and column.size and not isinstance(column.flat[0], str):
        missing = np.equal(column, None)
        values = np.where(missing, 0, column).astype(float)
    else:
        missing = np.zeros(len(column), dtype=bool)
        values = column
    if values.dtype.kind not in "biuf":
        values = np.unique(values, return_inverse=True)[1].reshape(-1)  # ranks sort as the strings do
    values = values.astype(float) if values.dtype.kind == "b" else values
    sign = -1 if reverse else 1
    order = np.lexsort((sign * values, sign * missing.astype(int)))  # lexsort is stable; last key first
    return {k: np.asarray(v)[order] for k, v in columns.items()}


def formatted(columns: dict[str, np.ndarray], keys: tuple[str, ...], form) -> list:
    """`form` of each row's values of `keys` (a table's cells), computed once per distinct value
    where a column has few (a knob, a GPU name), else once a row."""
    values = [np.asarray(columns[k]).tolist() for k in keys]
    rows = values[0] if len(keys) == 1 else list(zip(*values))
    distinct = set(rows)
    if 2 * len(distinct) > len(rows):
        return list(map(form, rows)) if len(keys) == 1 else [form(*v) for v in rows]
    cells = {v: form(v) if len(keys) == 1 else form(*v) for v in distinct}
    return list(map(cells.__getitem__, rows))


class ColumnRows(Sequence):
    """Rows held as columns: their number, the distinct values of a key, and rows as dictionaries
    only for the indices asked for (a table's shown rows)."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns
        self._n = len(next(iter(columns.values()))) if columns else 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return rows(self.columns, range(self._n)[index])
        return rows(self.columns, [range(self._n)[index]])[0]

    def distinct(self, key: str) -> set:
        return set(self.columns[key].tolist()) if self._n else set()

    def head(self, n: int | None) -> "ColumnRows":
        """The first `n` rows (all for None or 0), still as columns."""
        return self if not n or n >= self._n else ColumnRows({k: v[:n] for k, v in self.columns.items()})


def rows(columns: dict[str, np.ndarray], index=None) -> list[dict]:
    """Rows as dictionaries of plain Python values (what SweepRow.plain() gives), for `index` only
    when given."""
    if not columns:
        return []
    picked = {k: (np.asarray(v)[list(index)] if index is not None else np.asarray(v)).tolist()
              for k, v in columns.items()}
    names = list(picked)
    return [dict(zip(names, values)) for values in zip(*picked.values())]
