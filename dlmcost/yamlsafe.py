"""The one place dlmcost parses YAML: safe loading only.

`yaml.safe_load` is `yaml.load(stream, SafeLoader)`. Where PyYAML was built with libyaml we use
`CSafeLoader`, the same safe constructor (plain scalars, lists and mappings; `!!python/...` tags
are refused, never executed) with a C scanner: ten times faster, which keeps `dlmcost analyze`
near the interpreter's import floor with 30+ hardware files to read.
"""

from __future__ import annotations

import yaml

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAMLError = yaml.YAMLError


def safe_load(text: str):
    if _SAFE_LOADER is yaml.SafeLoader:
        return yaml.safe_load(text)
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - CSafeLoader is the safe loader
