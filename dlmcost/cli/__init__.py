"""The `dlmcost` command: parses options, calls `dlmcost.api`, renders with `dlmcost.render`.

    app.py          the typer application and its root options
    options.py      option groups shared by the commands (decorators), single-option checks
    output.py       stderr lines, the finite check, charts after tables, --require's exit code
    entry.py        the process: streams, exit codes, `main` and `run`
    analyze.py, sweep.py, catalog.py (schemes, schema, gpus, models, model), calibration.py
    (calibrate, measure), plan.py, serve.py, plots.py: one module per command group

A new command is one module here, imported below in the order `dlmcost --help` lists it.
"""

# (no `from __future__ import annotations` in this package: typer would evaluate every option's
# annotation string on each run, a compile() each)
import os

# dlmcost defines no pydantic plugins, and the CLI is a process of its own: spare pydantic its
# scan of every installed distribution's entry points when the first model class is built.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from . import analyze, sweep, catalog, calibration, plan, serve, plots  # noqa: E402, F401, I001  (registers the commands)
from .app import app  # noqa: E402, F401
from .entry import main, run  # noqa: E402, F401
