"""The `dlmcost` command and `python -m dlmcost`."""

import gc
import os


def main() -> None:
    # pydantic looks for plugins (observability hooks) by scanning every installed package's
    # entry points when the first model class is built: milliseconds per run, more in a large
    # environment, for hooks a command-line tool has no use for. Setting the variable to "" keeps them.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # A command imports a few thousand objects that live until it exits (typer, pydantic's
    # validators, numpy, dlmcost's tables) and then runs for milliseconds. Tracing them for
    # reference cycles is wasted work: collection is off while they are imported, and what was
    # imported is frozen out of later collections; collection is on again for the command itself.
    gc.disable()
    from .cli import run

    gc.freeze()
    gc.enable()
    run()


if __name__ == "__main__":
    main()
