"""How a table cell writes a number or a word: significant digits without exponent notation,
milliseconds, GB, step counts, the speed-up against AR, the memory/compute verdict, and text from
input made safe for the terminal. Shared by every command's tables (terminal and Markdown alike)."""

from __future__ import annotations

import math

from .labels import si
from .output import Styled
from ..results import WorkloadSummary
from ..safe_text import shown

VERDICT_STYLE = {"memory-bound": "cyan", "compute-bound": "magenta"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 user', '2 users' (`many`: an irregular plural)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def sig(x: float, digits: int) -> str:
    """`digits` significant digits, never exponent notation: a number with more whole digits
    than that is shown whole, with thousands separators (10,920, not 1.092e+04)."""
    return f"{x:,.0f}" if abs(x) >= 10 ** digits else f"{x:.{digits}g}"


def percent(share: float) -> str:
    """A share as a percentage to four significant digits: 0.9 -> '90%', 0.925 -> '92.5%'."""
    return f"{sig(share * 100, 4)}%"


def memory_share(settings: dict) -> str:
    """'95% of memory' where the share of each GPU's memory the memory verdicts use is not the
    record's default (90%, vLLM's), else '' (the usual header stays as short as it was)."""
    default = WorkloadSummary.model_fields["mem_fraction"].default
    share = settings.get("mem_fraction", default)
    return "" if share == default else f"{percent(share)} of memory"


def num(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return sig(x, digits) if abs(x) < 1e6 else si(x, digits)


def ms(seconds: float | None) -> str:
    """Milliseconds to four digits, whole from 10,000 on (12,345: never exponent notation)."""
    if seconds is None:
        return "-"
    return sig(seconds * 1e3, 4)


def gb(nbytes: float | None) -> str:
    return "-" if nbytes is None else sig(nbytes / 1e9, 4)


def verdict_text(v: str | None) -> Styled:
    """Tables say 'memory' / 'compute' under a 'bound' header to stay within 100 columns."""
    if not v:
        return Styled("-")
    return Styled(v.removesuffix("-bound"), VERDICT_STYLE.get(v, ""))


def speedup(speedup_vs_ar: float | None) -> str:
    """AR latency / latency (above 1 = faster), as JSON's `speedup_vs_ar`."""
    return "-" if speedup_vs_ar is None else sig(speedup_vs_ar, 3)


def count(x: float | None) -> str:
    """Step and pass counts: whole numbers as such, fractions to four digits (85.33, not 85.3333)."""
    return "-" if x is None else sig(x, 4)


def safe(text) -> str:
    """Text from input (a model id, a GPU name...) for the terminal: control characters escaped."""
    return shown(text, None)
