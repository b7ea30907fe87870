"""`--format html`: the pages of analyze, sweep and plan (each built in its command's module from
the same rows as the terminal's tables; page.py has the page's parts). Kept as the name the CLI
imports."""

from __future__ import annotations

from .page import figures, page, table
from .analyze import analyze_page
from .plan import plan_page
from .sweep import sweep_page

__all__ = ["analyze_page", "sweep_page", "plan_page", "figures", "page", "table"]
