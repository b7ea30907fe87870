"""Model specs and where they come from: bundled configs, local files, the Hugging Face Hub."""

from .load import bundled_ids, bundled_manifest, load_bundled, resolve_model, spec_from_mapping
from .spec import MLASpec, ModelSpec, MoESpec, SamplerDefaults

__all__ = [
    "MLASpec", "ModelSpec", "MoESpec", "SamplerDefaults",
    "bundled_ids", "bundled_manifest", "load_bundled", "resolve_model", "spec_from_mapping",
]
