"""`dlmcost plot roofline|sweep ARGS`: analyze's or sweep's table, then its chart drawn in text."""

import typer

from .app import app

plot_app = typer.Typer(no_args_is_help=True, help="Draw a chart in the terminal (the arguments of analyze or sweep).")
app.add_typer(plot_app, name="plot")
FORWARD = dict(allow_extra_args=True, ignore_unknown_options=True, help_option_names=[])


@plot_app.command("roofline", context_settings=FORWARD)
def plot_roofline(ctx: typer.Context):
    """`dlmcost analyze ARGS --plot -`: the table, then the roofline drawn in text."""
    typer.main.get_command(app).main(args=["analyze", *ctx.args, "--plot", "-"], standalone_mode=False)


@plot_app.command("sweep", context_settings=FORWARD)
def plot_sweep(ctx: typer.Context):
    """`dlmcost sweep ARGS --plot -`: the table, then the chart drawn in text."""
    typer.main.get_command(app).main(args=["sweep", *ctx.args, "--plot", "-"], standalone_mode=False)
