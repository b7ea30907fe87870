"""Parsed copies of the bundled YAML files, so that start-up does not run the YAML parser.

`dlmcost analyze` reads 35 small YAML files (the accelerator database, the default software stack,
the bundled models' manifest); parsing them costs more than the whole evaluation. This module
keeps, in `compiled_yaml.json` beside it, each bundled file's parsed data keyed by the file's
whole text. `files.read_document` looks a YAML file's text up there and, on a hit, returns the
stored data instead of parsing: the same text always parses to the same data, so a hit is exactly
the parse, whichever path the text came from (the key is the text itself, compared in full, not a
hash of it), and a miss (an edited or a user's file) is simply parsed. A stale table therefore
costs time, never correctness; `python docs/generate.py --check` (run by the tests) keeps the
shipped one current.

Only data that survives a JSON round trip unchanged is stored (YAML dates or non-string keys
would not), so a hit can never differ from a parse.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).with_name("bundled_yaml.json")


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    try:
        table = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing or damaged: every file is parsed, as without it
        return {}
    return table if isinstance(table, dict) else {}


def lookup(text: str):
    """The parsed data of this YAML text if it is a bundled file's, else None."""
    parsed = _table().get(text)
    if not isinstance(parsed, str):
        return None
    try:
        return json.loads(parsed)
    except ValueError:  # a damaged entry: parsed as without the table, like a damaged table
        return None


# Where the bundled data lives: inside the wheel (`dlmcost/_hardware`, `_stacks`, as pyproject.toml
# packs them), or the checkout's top-level folders. The readers of each kind of file import these.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
CONFIG_DIR = Path(__file__).resolve().parent / "models" / "configs"


def _data_dir(name: str) -> Path:
    packaged = PACKAGE_DIR / f"_{name}"
    return packaged if packaged.is_dir() else PACKAGE_DIR.parent / name


def bundled_hardware_dir() -> Path:
    """The accelerator database shipped with dlmcost: inside the wheel, or the checkout's `hardware/`."""
    return _data_dir("hardware")


def bundled_stack_dir() -> Path:
    """The stacks shipped with dlmcost: inside the wheel, or the checkout's `stacks/`."""
    return _data_dir("stacks")


def bundled_decoding_dir() -> Path:
    """The published decodings shipped with dlmcost: inside the wheel, or the checkout's `decoding/`."""
    return _data_dir("decoding")


def bundled_yaml_files() -> list[Path]:
    """Every YAML file that ships with dlmcost and is read at run time."""
    found = [*bundled_hardware_dir().glob("*.yaml"), *bundled_stack_dir().glob("*.yaml"),
             *bundled_decoding_dir().glob("*.yaml"), *CONFIG_DIR.glob("*.yaml")]
    return sorted(found, key=lambda p: (p.parent.name, p.name))


def build() -> str:
    """The table's text for the bundled files as they are now."""
    from .yaml_loader import load_yaml

    table = {}
    for path in bundled_yaml_files():
        text = path.read_bytes().decode("utf-8-sig")  # as files.decode reads it
        data = load_yaml(text)  # as files.parse reads it: a repeated key is refused here too
        try:
            # key order kept: a mapping's order is data (the models' manifest lists them in order)
            parsed = json.dumps(data, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            continue  # a date, a non-finite number...: not representable, parsed at run time
        if json.loads(parsed) == data:
            table[text] = parsed
    return json.dumps(table, indent=0, sort_keys=True) + "\n"
