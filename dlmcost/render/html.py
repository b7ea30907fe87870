"""`--format html`: the pages of analyze, sweep and plan (built in report.py from the same rows
as the terminal's tables; page.py has the page's parts). Kept as the name the CLI imports."""

from __future__ import annotations

from .page import figures, page, table
from .report import analyze_page, plan_page, sweep_page

__all__ = ["analyze_page", "sweep_page", "plan_page", "figures", "page", "table"]
