"""`--require`: turn a result into an exit code for CI, with a tiny expression language.

A requirement is one comparison over a documented result key (the keys of a sweep row, the
same for every row of `analyze`):

    tokens_per_s >= 300        time_s < 2.5        scheme == dual-cache
    fits                       not fits            supported

Operators: >= <= > < == != ; values are numbers, true/false, or a word. Several `--require`
options must all hold. Each command names its own keys (`ROW_KEYS` here for analyze and sweep;
`plan` and `serve` pass theirs); a renamed key (`results.DEPRECATED_KEYS`) is still accepted for one
release, and `deprecation_warnings` says what to write instead. The text is tokenised and compared here; nothing is ever evaluated as
Python (no eval). A row that fails any requirement is listed on stderr and the command exits
with EXIT_REQUIREMENT (8, the code `plan` uses when no deployment meets its targets).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from ..errors import UsageError
from ..results import DEPRECATED_KEYS, SweepRow

OPERATORS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
             "!=": operator.ne}
_FORM = re.compile(r"^\s*(?:(not)\s+)?([a-z_][a-z0-9_]*)\s*(?:(>=|<=|==|!=|>|<)\s*(\S+))?\s*$")

# The keys a requirement can name, per row: the columns of `sweep --format csv` (one row per
# configuration) and, for `analyze`, the same names taken from each GPU's result.
ROW_KEYS = (*SweepRow.model_fields, "supported")


@dataclass(frozen=True)
class Requirement:
    text: str
    key: str
    op: str | None  # None: the key itself must be true (or false with `not`)
    value: object
    negate: bool
    replaced_by: tuple[str, str] | None = None  # a deprecated key: (its new name, how the two relate)

    def holds(self, row: dict) -> bool:
        if not row.get("supported", True) and self.key != "supported":
            return False  # an unsupported GPU meets no requirement on its numbers
        got = row.get(self.key)
        if self.op is None:
            ok = bool(got)
        elif got is None:
            ok = False
        elif isinstance(self.value, float):
            ok = isinstance(got, (int, float)) and not isinstance(got, bool) and OPERATORS[self.op](float(got), self.value)
        else:
            ok = OPERATORS[self.op](got, self.value)
        return ok != self.negate

    def missed_by(self, row: dict) -> str:
        """The requirement and the value that failed it: `tokens_per_s >= 1000 (got 954.9)`."""
        if not row.get("supported", True) and self.key != "supported":
            return f"{self.text} (unsupported: no numbers)"
        got = row.get(self.key)
        return f"{self.text} (got {'nothing' if got is None else _shown(got)})"

    def holds_columns(self, columns: dict):
        """`holds` for every row of one array per key at once, for the comparisons numpy makes as
        Python does (a number with a number, a word with a word, a bare flag or number); None for
        any other, which the caller leaves to `holds` row by row."""
        import numpy as np  # sweeps only: analyze checks its few rows one by one

        c = columns.get(self.key)
        kind = getattr(c, "dtype", np.dtype(object)).kind
        if self.op is None and kind in "biuf":
            ok = c != 0
        elif isinstance(self.value, float) and kind in "iuf":
            ok = OPERATORS[self.op](c.astype(float), self.value)
        elif isinstance(self.value, str) and kind == "U":
            ok = OPERATORS[self.op](c, self.value)
        else:
            return None
        return ok != self.negate


def _shown(value) -> str:
    """A row's value as a table shows it: 4 significant digits, thousands separated, no 1e+04."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        v = float(value)
        return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.4g}"
    return str(value)


def _value(token: str, key: str, op: str):
    low = token.lower()
    if low in ("true", "false", "yes", "no"):
        if op not in ("==", "!="):
            raise UsageError(f"--require: '{key} {op} {token}': booleans compare with == or !=")
        return low in ("true", "yes")
    try:
        number = float(token.replace("_", ""))
    except ValueError:
        number = None
    if number is not None:
        if not math.isfinite(number):
            raise UsageError(f"--require: '{token}' is not a finite number")
        return number
    if op not in ("==", "!="):
        raise UsageError(f"--require: '{key} {op} {token}': '{token}' is not a number")
    return token


def parse(text: str, keys: tuple[str, ...] = ROW_KEYS, deprecated: dict | None = None) -> Requirement:
    """One `--require` expression over `keys` (the command's); `deprecated`: the command's renamed
    keys, old -> (new, how they relate) (default: analyze's and sweep's, `results.DEPRECATED_KEYS`)."""
    deprecated = DEPRECATED_KEYS if deprecated is None else deprecated
    m = _FORM.match(text)
    if not m:
        raise UsageError(f"--require: cannot read '{text}'; write KEY OP VALUE (e.g. 'tokens_per_s >= 300') "
                         f"or KEY / not KEY (e.g. 'fits')")
    negate, key, op, raw = m.groups()
    if key not in keys:
        current = [k for k in keys if k not in deprecated]
        raise UsageError(f"--require: unknown key '{key}'; choose from: {', '.join(current)}")
    if negate and op:
        raise UsageError("--require: 'not' applies to a bare key only, e.g. 'not fits'")
    return Requirement(text.strip(), key, op, _value(raw, key, op) if op else None, bool(negate), deprecated.get(key))


def parse_all(texts: list[str] | None, keys: tuple[str, ...] = ROW_KEYS,
              deprecated: dict | None = None) -> list[Requirement]:
    return [parse(t, keys, deprecated) for t in texts or []]


def deprecation_warnings(requirements: list[Requirement]) -> list[str]:
    """One line per requirement that names a deprecated key: what it means and what replaces it."""
    return [f"--require '{q.text}': '{q.key}' is deprecated and will be removed; use '{q.replaced_by[0]}' "
            f"({q.replaced_by[1]})" for q in requirements if q.replaced_by]


def analyze_rows(a: dict) -> list[dict]:
    """`analyze` results in the shape of sweep rows, so one set of keys serves both commands."""
    w = a["workload"]
    out = []
    for r in a["results"]:
        row = dict(gpu=r["gpu"], scheme=w["scheme"], prompt=w["prompt"], gen=w["gen"], steps=w["steps"],
                   block=w["block"], batch=w["batch"], tp=w["tp"], ep=w["ep"], precision=w["precision"],
                   supported=r["supported"])
        if r["supported"]:
            row.update({k: r[k] for k in ROW_KEYS if k in r and k not in row})
            row.update(fits=r["memory"]["fits"], memory_total_bytes=r["memory"]["total_bytes"],
                       max_batch=r["memory"]["max_batch"])
        out.append(row)
    return out


def failures(requirements: list[Requirement], rows, label) -> list[str]:
    """One line per failing row: its label and the requirements it misses."""
    out = []
    for row in rows:
        missed = [q.missed_by(row) for q in requirements if not q.holds(row)]
        if missed:
            out.append(f"{label(row)}: {'; '.join(missed)}")
    return out


def sweep_label(row: dict) -> str:
    knobs = " ".join(f"{k}={row[k]:g}" if isinstance(row[k], float) else f"{k}={row[k]}"
                     for k in ("prompt", "gen", "steps", "block", "batch", "tp", "precision") if row.get(k) is not None)
    model = f"{row['model']}: " if "model" in row else ""
    return f"{model}{row['gpu']} {row['scheme']} {knobs}"


# the names dlmcost.api exports them by
parse_requirements, requirement_failures, requirement_rows = parse_all, failures, analyze_rows
requirement_warnings = deprecation_warnings
