"""The typer application every command module registers on, and its root options."""

import typer

from .. import __version__
from ..errors import exit_codes_line

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Capacity planner for diffusion language model inference.",
                  epilog=exit_codes_line())


def _version(value: bool) -> None:
    if value:
        print(f"dlmcost {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="print the version and exit")):
    """Capacity planner for diffusion language model inference."""


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, kept as written by click's \\b."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)
