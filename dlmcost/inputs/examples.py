"""The example files the README's commands name (`examples/tiny-dlm.yaml`...) travel inside the
wheel (as `dlmcost/_examples`), so `dlmcost model examples/tiny-dlm.yaml` works from any folder
after `pip install dlmcost`, not only from a checkout's root. A file of that name in the current
folder always wins."""

from __future__ import annotations

from pathlib import Path

PREFIX = "examples/"


def bundled_dir() -> Path | None:
    here = Path(__file__).resolve().parents[1]  # the dlmcost package
    for folder in (here / "_examples", here.parent / "examples"):  # wheel, then a source checkout
        if folder.is_dir():
            return folder
    return None


def locate(arg: str | None) -> str | None:
    """`arg` itself unless it names a missing `examples/...` file that dlmcost carries."""
    if not arg or not arg.replace("\\", "/").startswith(PREFIX) or Path(arg).exists():
        return arg
    folder = bundled_dir()
    if folder is None:
        return arg
    candidate = folder / arg.replace("\\", "/")[len(PREFIX):]
    return str(candidate) if candidate.is_file() else arg
