"""What `dlmcost models` and `dlmcost model` show: the bundled models, one model's parsed
architecture, and (`--verify`) its parameter count against the checkpoint's.
"""

from __future__ import annotations

from ..errors import UsageError
from ..inputs.models import ModelSpec
from .records import model_summary


def model_info(spec: ModelSpec) -> dict:
    """Everything `dlmcost model` shows: architecture, parameter counts, K/V bytes per token."""
    from ..inputs.precision import KV_DTYPE_BYTES

    info = model_summary(spec).model_dump()
    info.update(
        n_layers=spec.n_layers, d_model=spec.d_model, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads,
        head_dim=spec.head_dim, group_size=spec.group_size, ffn_dim=spec.ffn_dim,
        mlp="gated (SwiGLU, 3 matrices)" if spec.gated_mlp else "plain (2 matrices)",
        vocab_size=spec.vocab_size, tie_embeddings=spec.tie_embeddings, qkv_bias=spec.qkv_bias,
        qk_norm=spec.qk_norm, n_dense_layers=spec.n_dense_layers, n_moe_layers=spec.n_moe_layers,
    )
    info["kv_bytes_per_token"] = {k: spec.kv_bytes_per_token(v) for k, v in KV_DTYPE_BYTES.items() if k not in ("fp16", "int4")}
    if spec.layers:  # per-layer kinds (hybrids): one line per group
        info["layers"] = {f"{i}": f"{n} x {kind.describe()}" for i, (n, kind) in enumerate(spec.layers)}
    if spec.logit_softcap:
        info["logit_softcap"] = spec.logit_softcap
    if spec.vision_params:
        info["vision_params"] = spec.vision_params  # reported apart: planning is text-only
    if spec.moe:
        info["moe"] = spec.moe.model_dump()
    if spec.mla:
        info["mla"] = spec.mla.model_dump() | {"cache_elements_per_layer": spec.mla.cache_elements_per_layer}
    if spec.sampler:
        info["sampler"] = spec.sampler.model_dump(exclude={"schemes"}) | {"schemes": ", ".join(spec.sampler.schemes)}
    return info


def list_models() -> list[dict]:
    from ..inputs.models import bundled_ids, load_bundled

    out = []
    for model_id in bundled_ids():
        spec = load_bundled(model_id)
        summary = model_summary(spec).plain()
        # status: provenance's old name, kept for one release (documents.ModelEntry)
        out.append(dict(summary, status=summary["provenance"], default_scheme=spec.sampler.scheme if spec.sampler else "ar"))
    return out


VERIFY_WARN_FRACTION = 0.02


def verify_model(spec: ModelSpec, revision: str | None = None) -> dict:
    """Compare dlmcost's parameter count with the checkpoint's safetensors metadata (no weights
    are downloaded); a gap above 2% usually means an architecture feature the parser misses."""
    if spec.source == "local" or "/" not in spec.id:
        raise UsageError("--verify needs a Hub model id (it reads the checkpoint's safetensors metadata)")
    from ..inputs.models.hub import verify_params

    found = verify_params(spec.id, revision=revision)
    checkpoint = found["checkpoint_params"]
    diff = (spec.params_total - checkpoint) / checkpoint
    out = dict(found, dlmcost_params=spec.params_total, difference_fraction=diff)
    if abs(diff) > VERIFY_WARN_FRACTION:
        out["warning"] = (f"dlmcost counts {spec.params_total:,} parameters, the checkpoint has {checkpoint:,} "
                          f"({diff:+.1%}): the config may use a feature the parser does not model")
    return out
