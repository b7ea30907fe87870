"""The decoding schemes, one function each, registered by name.

A new scheme is one module here (a function from `Knobs` to its pass families, decorated with
`@scheme`), one import line below, its tests and its row in docs/methodology.md. Everything else
(the CLI's choices, sweep's ignored knobs, memory's peak shapes, validation) reads the registry.
"""

# imported in the order the CLI and docs list them
from . import ar, mdm, fast_dllm, block, multi_block, windowed_refresh, draft_verify, diffusion_gemma  # noqa: F401, I001
from .base import REGISTRY, SCHEME_KNOBS, Knobs, PassFamily, Scheme, later_peak_q, peak_shape, prompt_passes

SCHEMES: tuple[str, ...] = tuple(REGISTRY)

__all__ = ["REGISTRY", "SCHEMES", "SCHEME_KNOBS", "Knobs", "PassFamily", "Scheme", "autoregressive_scheme",
           "get_scheme", "later_peak_q", "peak_shape", "prompt_passes", "scheme_name"]


def scheme_name(name: str) -> str:
    """A scheme's registered name as a user may write it: in any case, blanks around it ignored
    (`--scheme AR` is ar, as `--precision FP8` is fp8)."""
    return name.strip().lower()


def get_scheme(name: str) -> Scheme:
    return REGISTRY[scheme_name(name)]


def autoregressive_scheme() -> str:
    """The registered scheme that decodes one token per pass, left to right (the AR baseline)."""
    return next(name for name, s in REGISTRY.items() if s.autoregressive)
