"""The decoding schemes, one function each, registered by name.

A new scheme is one module here (a function from `Knobs` to its pass families, decorated with
`@scheme`), one import line below, its tests and its row in docs/methodology.md. Everything else
(the CLI's choices, sweep's ignored knobs, memory's peak shapes, validation) reads the registry.
"""

# imported in the order the CLI and docs list them
from . import ar, mdm, fast_dllm, block, multi_block, windowed_refresh, draft_verify, diffusion_gemma  # noqa: F401, I001
from .base import REGISTRY, SCHEME_KNOBS, Knobs, PassFamily, Scheme, peak_shape, prompt_passes

SCHEMES: tuple[str, ...] = tuple(REGISTRY)
# the autoregressive baseline's name: what an "AR" workload or row is run as
AR_SCHEME: str = next(name for name, s in REGISTRY.items() if s.autoregressive)

__all__ = ["AR_SCHEME", "REGISTRY", "SCHEMES", "SCHEME_KNOBS", "Knobs", "PassFamily", "Scheme", "get_scheme", "peak_shape",
           "prompt_passes"]


def get_scheme(name: str) -> Scheme:
    return REGISTRY[name]
