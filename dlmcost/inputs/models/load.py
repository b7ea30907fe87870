"""From a model argument to a ModelSpec: local file, bundled id, or the Hugging Face Hub.

Resolution order: an existing local path; a bundled id (no network, so CI stays fast and
deterministic) unless a revision or `hub=True` asks for the Hub; otherwise the Hugging Face cache
and the Hub (see `hub.py`).
"""

from __future__ import annotations

import json
import math
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import files
from ..bundled import CONFIG_DIR  # the bundled configs (re-exported: importers read it here)
from ...errors import ConfigError, UnknownModelError
from ...safe_text import shown
from .families import detect
from .spec import ModelSpec

SCHEMA_TAG = "dlmcost.model/v1"  # marks a file written in dlmcost's own normalised schema


MAX_VALUES = 200_000  # values in one config: YAML aliases can make a small file expand into a huge tree
MAX_DEPTH = 100  # levels of nesting: real configs have three or four


def _check_finite(value: Any) -> None:
    """JSON allows NaN/Infinity through Python's parser; a config never should. Iterative, so a
    maliciously deep document cannot exhaust the interpreter's stack; a path is spelled out only
    for the message (keys may be long)."""
    stack: list[tuple[int, tuple, Any]] = [(0, (), value)]
    visited = 0
    while stack:
        visited += 1
        if visited > MAX_VALUES:
            raise ConfigError(f"config is too large to be a model config (over {MAX_VALUES:,} values)")
        depth, path, v = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"config is nested more than {MAX_DEPTH} levels deep; a model config has a few")
        if isinstance(v, float) and not math.isfinite(v):
            where = shown("".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "(top level)")
            raise ConfigError(f"config field '{where}' is not a finite number: {v!r}")
        if isinstance(v, dict):
            stack += [(depth + 1, (*path, str(k)), x) for k, x in v.items()]
        elif isinstance(v, list):
            stack += [(depth + 1, (*path, i), x) for i, x in enumerate(v)]


def spec_from_mapping(data: Any, *, model_id: str, source: str, revision: str | None = None,
                      verified: bool = True, provenance: str | None = None) -> ModelSpec:
    """A config.json-style mapping or a dlmcost-schema mapping -> ModelSpec. `provenance`: a
    bundled config's MANIFEST status; otherwise the Hub's file is verbatim, a local one local."""
    if not isinstance(data, dict):
        raise ConfigError(f"model config for '{shown(model_id)}' must be a mapping of fields, got {type(data).__name__}")
    _check_finite(data)
    if data.get("schema") == SCHEMA_TAG:
        fields = {k: v for k, v in data.items() if k != "schema"}
        fields.setdefault("id", model_id)
        fields.setdefault("family", "custom")
        fields["source"] = source
        fields["provenance"] = provenance or "local"
        where = "dlmcost schema"
    else:
        family = detect(data)
        fields = family.parse(data)
        fields.update(id=model_id, source=source, revision=revision, verified=verified, sampler=family.sampler,
                      provenance=provenance or ("verbatim" if source in ("hub", "cache") else "local"))
        where = f"{family.description} config"
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"{where} for '{shown(model_id)}': {files.validation_message(exc)}") from None


def read_config_file(path: Path) -> Any:
    """A local JSON or YAML model config, through the bounded reader."""
    return files.read_document(path, limit=files.CONFIG_LIMIT, error=ConfigError, what="model file")


def load_local(path: Path) -> ModelSpec:
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{shown(path)}: model files must end in .json, .yaml or .yml")
    return spec_from_mapping(read_config_file(path), model_id=str(path), source="local")


def _local_path(arg: str) -> Path | None:
    """The local file an argument names (a folder means its config.json), or None if nothing is
    there; a path that cannot even be looked up is an error that says why."""
    path = files.expand(arg, ConfigError, "model path")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (2, 20):  # ENOENT, ENOTDIR
            return None
        raise ConfigError(f"model path {shown(arg)}: {files.os_problem(exc)}") from None
    except ValueError:  # an embedded NUL
        return None
    if stat.S_ISDIR(mode):
        config = path / "config.json"
        if not os.path.lexists(config):
            raise ConfigError(f"{shown(arg)} is a folder without a config.json")
        return config
    if not stat.S_ISREG(mode):  # named for what it is, whatever its suffix, and never opened
        raise ConfigError(f"model path {shown(arg)} is {files.kind_of(mode)}, not a regular file")
    return path


# --- bundled configs -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def bundled_manifest() -> dict[str, dict]:
    return files.read_document(CONFIG_DIR / "MANIFEST.yaml", limit=files.CONFIG_LIMIT, error=ConfigError,
                               what="bundled manifest")


def bundled_ids() -> list[str]:
    return list(bundled_manifest())


def _bundled_key(model_id: str) -> str | None:
    """The bundled id `model_id` names, whatever its case, with or without the organisation
    (`llada2.0-mini`, `LLaDA-8B-Instruct`); None if none. A bare name that two organisations
    share is refused with both ids."""
    lower = {k.lower(): k for k in bundled_manifest()}
    if model_id.lower() in lower or "/" in model_id:
        return lower.get(model_id.lower())
    named = [k for k in bundled_manifest() if k.split("/", 1)[-1].lower() == model_id.lower()]
    if len(named) > 1:
        raise UnknownModelError(f"'{shown(model_id)}' names several bundled models: {', '.join(named)}; give the "
                                f"organisation too")
    return named[0] if named else None


def _unknown(arg: str) -> UnknownModelError:
    """A name that is neither a file nor a bundled id, with the bundled ids it may mean: those
    whose name contains it (`llada2.0`: both LLaDA2.0 models), else the closest ones."""
    from ..names import close_matches, hint, is_slip

    ids = bundled_ids()
    lowered = arg.lower()
    containing = [k for k in ids if lowered in k.lower()] if len(lowered) >= 3 else []
    if len(containing) > 1:
        return UnknownModelError(f"'{shown(arg)}' matches several bundled models: {', '.join(containing)}; give one")
    bare = "/" not in arg  # compared with the names without their organisation
    by_name = {(k.split("/", 1)[-1] if bare else k): k for k in ids}
    slips = [k for name, k in by_name.items() if is_slip(arg, name)]
    near = containing or slips or [by_name[n] for n in close_matches(arg, list(by_name))]
    return UnknownModelError(f"no such file or bundled model: '{shown(arg)}'"
                             f"{hint(near, '`dlmcost models` lists the bundled ids')}")


def _slip_of_bundled(arg: str, revision: str | None) -> str | None:
    """The bundled id a Hub-shaped argument is a typing slip of (inclusionAI/LLaDA2.0-min), found
    before any network request; None if it is no slip, or if the Hugging Face cache holds it (a
    real model of that name)."""
    from ..names import is_slip

    meant = [k for k in bundled_ids() if is_slip(arg, k)]
    if not meant:
        return None
    from .hub import is_cached  # imported lazily: huggingface_hub is slow to import

    return None if is_cached(arg, revision) else meant[0]


def load_bundled(model_id: str) -> ModelSpec:
    key = _bundled_key(model_id)
    if key is None:
        raise UnknownModelError(f"'{shown(model_id)}' is not a bundled model")
    meta = bundled_manifest()[key]
    data = json.loads((CONFIG_DIR / (key.replace("/", "__") + ".json")).read_text(encoding="utf-8"))
    return spec_from_mapping(data, model_id=key, source="bundled", verified=meta.get("status") != "unverified",
                             provenance=meta.get("status"))


def resolve_model(arg: str, *, revision: str | None = None, hub: bool = False,
                  timeout_s: float | None = None, local: bool = True) -> ModelSpec:
    """Local path, then bundled id (unless the Hub is asked for), then HF cache / Hub.
    `local=False`: `arg` is an id, never looked up as a path (a caller that resolved paths
    itself, from another folder than the current one)."""
    if not arg or not arg.strip():
        raise UnknownModelError("model name is empty")
    path = _local_path(arg) if local else None
    if path is not None:
        return load_local(path)
    key = _bundled_key(arg)
    if key and not (hub or revision):
        return load_bundled(key)
    if key:
        arg = key  # the Hub asked for by a bundled id's short name: its full id
    elif arg.endswith((".json", ".yaml", ".yml")) or "/" not in arg:
        raise _unknown(arg)
    from .hub import check_revision  # hub.py imports huggingface_hub only when it asks the Hub

    check_revision(revision)  # before the cache is read at refs/<revision>
    if not key and not hub and (meant := _slip_of_bundled(arg, revision)):
        raise UnknownModelError(f"'{shown(arg)}' is not a bundled model; did you mean {meant}? (to fetch "
                                f"'{shown(arg)}' from the Hub as written, add --hub)")
    from .hub import fetch_config  # imported lazily: huggingface_hub is slow to import

    data, source, commit = fetch_config(arg, revision=revision, timeout_s=timeout_s)
    return spec_from_mapping(data, model_id=arg, source=source, revision=commit)
