"""From a model argument to a ModelSpec: local file, bundled id, or the Hugging Face Hub.

Resolution order: an existing local path; a bundled id (no network, so CI stays fast and
deterministic) unless a revision or `hub=True` asks for the Hub; otherwise the Hugging Face cache
and the Hub (see `hub.py`).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import yamlsafe
from pydantic import ValidationError

from ..errors import ConfigError, UnknownModelError
from .families import detect
from .spec import ModelSpec

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
SCHEMA_TAG = "dlmcost.model/v1"  # marks a file written in dlmcost's own normalised schema


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"field '{where}': {err['msg']}"


def _check_finite(value: Any) -> None:
    """JSON allows NaN/Infinity through Python's parser; a config never should. Iterative, so a
    maliciously deep document cannot exhaust the interpreter's stack."""
    stack = [("", value)]
    visited = 0
    while stack:
        visited += 1
        if visited > 200_000:  # YAML aliases can make a small file expand into a huge tree
            raise ConfigError("config is too large to be a model config (over 200,000 values)")
        path, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"config field '{path or '(top level)'}' is not a finite number: {v!r}")
        if len(path) > 1000:
            raise ConfigError("config is nested too deeply to be a model config")
        if isinstance(v, dict):
            stack += [(f"{path}.{k}" if path else str(k), x) for k, x in v.items()]
        elif isinstance(v, list):
            stack += [(f"{path}[{i}]", x) for i, x in enumerate(v)]


def spec_from_mapping(data: Any, *, model_id: str, source: str, revision: str | None = None,
                      verified: bool = True) -> ModelSpec:
    """A config.json-style mapping or a dlmcost-schema mapping -> ModelSpec."""
    if not isinstance(data, dict):
        raise ConfigError(f"model config for '{model_id}' must be a mapping of fields, got {type(data).__name__}")
    _check_finite(data)
    if data.get("schema") == SCHEMA_TAG:
        fields = {k: v for k, v in data.items() if k != "schema"}
        fields.setdefault("id", model_id)
        fields.setdefault("family", "custom")
        fields["source"] = source
        where = "dlmcost schema"
    else:
        family = detect(data)
        fields = family.parse(data)
        fields.update(id=model_id, source=source, revision=revision, verified=verified, sampler=family.sampler)
        where = f"{family.description} config"
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"{where} for '{model_id}': {_first_error(exc)}") from None


def read_config_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc.__class__.__name__}: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except RecursionError:
            raise ConfigError(f"{path} is nested too deeply to be a model config") from None
    try:
        return yamlsafe.safe_load(text)  # safe_load only: tags like !!python/object are refused
    except yamlsafe.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise ConfigError(f"{path} is not valid YAML: {first}") from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to be a model config") from None


def load_local(path: Path) -> ModelSpec:
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{path}: model files must end in .json, .yaml or .yml")
    return spec_from_mapping(read_config_file(path), model_id=str(path), source="local")


# --- bundled configs -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def bundled_manifest() -> dict[str, dict]:
    return yamlsafe.safe_load((CONFIG_DIR / "MANIFEST.yaml").read_text(encoding="utf-8"))


def bundled_ids() -> list[str]:
    return list(bundled_manifest())


def _bundled_key(model_id: str) -> str | None:
    lower = {k.lower(): k for k in bundled_manifest()}
    return lower.get(model_id.lower())


def load_bundled(model_id: str) -> ModelSpec:
    key = _bundled_key(model_id)
    if key is None:
        raise UnknownModelError(f"'{model_id}' is not a bundled model")
    meta = bundled_manifest()[key]
    data = json.loads((CONFIG_DIR / (key.replace("/", "__") + ".json")).read_text(encoding="utf-8"))
    return spec_from_mapping(data, model_id=key, source="bundled", verified=meta.get("status") != "unverified")


def resolve_model(arg: str, *, revision: str | None = None, hub: bool = False,
                  timeout_s: float | None = None) -> ModelSpec:
    """Local path, then bundled id (unless the Hub is asked for), then HF cache / Hub."""
    if not arg or not arg.strip():
        raise UnknownModelError("model name is empty")
    path = Path(arg).expanduser()
    if path.exists():
        if path.is_dir():
            path = path / "config.json"
            if not path.exists():
                raise ConfigError(f"{arg} is a folder without a config.json")
        return load_local(path)
    if _bundled_key(arg) and not (hub or revision):
        return load_bundled(arg)
    if arg.endswith((".json", ".yaml", ".yml")) or "/" not in arg:
        hint = "; `dlmcost models` lists the bundled ids" if "/" not in arg else ""
        raise UnknownModelError(f"no such file or bundled model: '{arg}'{hint}")
    from .hub import fetch_config  # imported lazily: huggingface_hub is slow to import

    data, source, commit = fetch_config(arg, revision=revision, timeout_s=timeout_s)
    return spec_from_mapping(data, model_id=arg, source=source, revision=commit)
