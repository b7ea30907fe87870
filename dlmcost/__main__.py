"""The `dlmcost` command and `python -m dlmcost`."""

import gc
import os
import sys

# Commands that run matrix products through numpy's BLAS, and so keep its worker threads.
BLAS_COMMANDS = ("measure",)


def quiet_blas(argv: list[str]) -> None:
    """numpy's bundled OpenBLAS starts a worker thread per core when it is imported, and each one
    spins for a while waiting for work. dlmcost's own arithmetic is elementwise on small arrays
    and never calls BLAS, so on a two-core machine those threads only compete with the command for
    the CPU (about 10 ms of an analyze's 160). One thread, unless the user chose a number or the
    command times matrix products (`measure` with the numpy backend)."""
    if not (argv[:1] and argv[0] in BLAS_COMMANDS) and not os.environ.get("OPENBLAS_NUM_THREADS"):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"  # (empty, OpenBLAS's own "unset", counts as unset)


def main() -> None:
    # pydantic looks for plugins (observability hooks) by scanning every installed package's
    # entry points when the first model class is built: milliseconds per run, more in a large
    # environment, for hooks a command-line tool has no use for. Setting the variable to "" keeps them.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    quiet_blas(sys.argv[1:])  # before numpy is imported: OpenBLAS reads it then
    # A command imports a few thousand objects that live until it exits (typer, pydantic's
    # validators, numpy, dlmcost's tables) and then runs for milliseconds. Tracing them for
    # reference cycles is wasted work: collection is off while they are imported, and what was
    # imported is frozen out of later collections; collection is on again for the command itself.
    gc.disable()
    # The model classes (and pydantic with them) first, from the top of the call stack. Python 3.11
    # keeps its frames in 16 KB chunks and unmaps a chunk as soon as the call that needed it
    # returns, so recursive work (pydantic building validators) done across a chunk boundary maps
    # and unmaps one on every call: imported nine imports deep, through the command's modules,
    # that happened about 800 times per command (5 ms of an analyze's 160); from here, about 10.
    try:
        from .inputs.models import ModelSpec  # noqa: F401
        from .cli import entry
    except KeyboardInterrupt:  # Ctrl-C while the command starts: its documented code, no traceback
        from .errors import EXIT_INTERRUPTED

        sys.exit(EXIT_INTERRUPTED)

    gc.freeze()
    gc.enable()
    entry.run()


if __name__ == "__main__":
    main()
