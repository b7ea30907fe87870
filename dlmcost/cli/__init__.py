"""The `dlmcost` command: parses options, calls `dlmcost.api`, renders with `dlmcost.render`."""

from .commands import app, main, run  # noqa: F401
