"""Traffic a deployment must serve: arrivals and the prompt / answer lengths of each request.

Arrivals are either open-loop Poisson at `rate` requests/s, or closed-loop: `users` clients, each
sending its next request `think_s` seconds after the previous answer arrived. Lengths are a fixed
value, a few percentiles (sampled by linear interpolation of the quantile function between them),
or a file of observed lengths (sampled with replacement). Everything is drawn from one seeded
generator, so a plan is reproducible.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DlmcostWarning, UsageError
from ..inputs import files
from ..safe_text import shown

MAX_LENGTH = 1_000_000
# A request rate's range, requests/s: below a request every 11.6 days, arrival times of a
# million requests (up to ~1e12 s) would no longer resolve the milliseconds of a pass
MIN_RATE, MAX_RATE = 1e-6, 1e7
RATE_RANGE = "0.000001..10,000,000 requests/s"
MAX_THINK_S = 1e6
THINK_RANGE = "0..1,000,000 seconds"


def check_rate(rate, what: str = "the request rate") -> None:
    if not (math.isfinite(rate) and MIN_RATE <= rate <= MAX_RATE):
        raise UsageError(f"{what} must be in {RATE_RANGE}, got {float(rate)!r}")


def check_think(think_s, what: str = "think time") -> None:
    if not (math.isfinite(think_s) and 0 <= think_s <= MAX_THINK_S):
        raise UsageError(f"{what} must be in {THINK_RANGE}, got {float(think_s)!r}")
MAX_CLASSES_PER_LENGTH = 3  # length bins per axis: the step-time table is evaluated per bin
# A lengths file (`--prompt @FILE`) is read whole, through the bounded reader: at most
# LENGTHS_FILE_BYTES bytes and MAX_FILE_VALUES token counts, counted before any is converted (a
# million take about 0.3 s and 80 MB; `serve` simulates at most a million requests anyway).
LENGTHS_FILE_BYTES = 16 << 20
MAX_FILE_VALUES = 1_000_000
_SEPARATORS = np.zeros(256, bool)
_SEPARATORS[list(b" \t\n\r\f\v,")] = True


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts: `values` at cumulative probabilities `quantiles`.

    fixed: one value at q=1; percentiles: the given points; file: the empirical sample."""

    kind: str  # "fixed" | "percentiles" | "file"
    values: tuple[float, ...]
    quantiles: tuple[float, ...] = ()

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, self.values[0])
        if self.kind == "file":
            return np.asarray(self.values)[rng.integers(0, len(self.values), n)]
        u = rng.random(n)
        return np.round(np.interp(u, self.quantiles, self.values))

    @property
    def mean_hint(self) -> float:
        return float(np.mean(self.values))


def parse_lengths(spec, what: str, least: int = 0) -> LengthDist:
    """An int, a mapping {p50: 128, p90: 512} (or {file: path}), or a string of the same:
    '256', 'p50:128,p90:512', '@lengths.txt'; every length at least `least` (an answer's: 1, a
    request generates a token at least; a prompt may be empty)."""
    if isinstance(spec, bool):
        raise UsageError(f"{what}: expected a token count, percentiles or a file, got {spec!r}")
    if isinstance(spec, (int, float)):
        return LengthDist("fixed", (_length(spec, what, least),))
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("@"):
            return _from_file(text[1:], what, least)  # '@' alone: an empty path, refused as one
        if ":" in text:
            pairs = {}
            for part in (p.strip() for p in text.split(",") if p.strip()):
                key, _, value = part.partition(":")
                if key.strip() in pairs:  # the last one won without a word
                    raise UsageError(f"{what}: percentile '{shown(key.strip(), 40)}' is given twice")
                pairs[key.strip()] = value.strip()
            return _from_percentiles(pairs, what, least)
        try:
            float(text)
        except ValueError:
            raise UsageError(f"{what}: '{text}' is not a token count, 'p50:N,p90:M' or '@FILE'") from None
        return LengthDist("fixed", (_length(text, what, least),))  # (the value as given in a refusal)
    if isinstance(spec, dict):
        if set(spec) == {"file"}:
            path = spec["file"]
            if not isinstance(path, str):  # `{file: 5}` is not the file named "5"
                raise UsageError(f"{what}: 'file' takes a path (a string), got {shown(repr(path), 40)}")
            return _from_file(path, what, least)
        return _from_percentiles(spec, what, least)
    raise UsageError(f"{what}: expected a token count, percentiles or a file, got {type(spec).__name__}")


def _length(value, what: str, least: int = 0) -> float:
    if isinstance(value, bool):  # `p50: true` in a YAML mapping: a typo, not one token
        raise UsageError(f"{what}: expected a token count, got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # a YAML integer past float's range (`prompt: 1000...0`): out of range, said so
        v = math.inf
    except (TypeError, ValueError):
        raise UsageError(f"{what}: '{value}' is not a number") from None
    if not math.isfinite(v) or v < least or v > MAX_LENGTH or v != round(v):
        raise UsageError(f"{what}: lengths must be whole token counts in {least}..{MAX_LENGTH:,}, got {shown(value, 40)}")
    return v


def _from_percentiles(pairs: dict, what: str, least: int = 0) -> LengthDist:
    points = []
    for key, value in pairs.items():
        k = str(key).strip().lower()
        try:
            p = float(k[1:]) if k.startswith("p") else float("nan")
        except ValueError:
            p = float("nan")
        if not (0 <= p <= 100):
            raise UsageError(f"{what}: percentile keys look like p50 or p99.9, got '{key}'")
        if any(p / 100 == q for q, _ in points):  # p50 and p50.0 (or P50): which one holds?
            raise UsageError(f"{what}: percentile '{shown(str(key).strip(), 40)}' is given twice")
        points.append((p / 100, _length(value, what, least)))
    if not points:
        raise UsageError(f"{what}: no percentiles given")
    points.sort()
    qs, vs = zip(*points)
    if any(b < a for a, b in zip(vs, vs[1:])):
        raise UsageError(f"{what}: percentile values must not decrease with the percentile")
    # below the lowest given percentile: its value; above the highest: its value (no extrapolation)
    qs, vs = (0.0,) + qs + (1.0,), (vs[0],) + vs + (vs[-1],)
    return LengthDist("percentiles", tuple(vs), tuple(qs))


def _from_file(path: str, what: str, least: int = 0) -> LengthDist:
    """Token counts separated by whitespace or commas, from a regular file within the limits."""
    data = files.read_bytes(path, limit=LENGTHS_FILE_BYTES, error=UsageError, what=f"{what}: lengths file")
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark, allowed as in every file read
    name = shown(str(path))
    is_separator = _SEPARATORS[np.frombuffer(data, np.uint8)]
    count = int(np.count_nonzero(~is_separator[:1]) + np.count_nonzero(is_separator[:-1] & ~is_separator[1:]))
    if not count:
        raise UsageError(f"{what}: lengths file {name} holds no numbers")
    if count > MAX_FILE_VALUES:
        raise UsageError(f"{what}: lengths file {name} is too large (more than {MAX_FILE_VALUES:,} values)")
    tokens = data.replace(b",", b" ").split()
    try:
        values = np.array(tokens, dtype=np.float64)
    except ValueError:  # the first token that is not a number, by its position alone: the file may
        # be any file a scenario names (`{file: ...}`), and quoting it would print the first word of,
        # say, a token file into a CI log
        at = next((i for i, t in enumerate(tokens) if not _is_float(t)), len(tokens) - 1)
        raise UsageError(f"{what}: lengths file {name}, value {at + 1:,} is not a number (a lengths file holds "
                         f"token counts separated by whitespace or commas)") from None
    wrong = ~np.isfinite(values) | (values < least) | (values > MAX_LENGTH) | (values != np.round(values))
    if wrong.any():
        at = int(np.argmax(wrong))
        _length(tokens[at].decode("ascii", "replace"), f"{what}: lengths file {name}, value {at + 1:,}", least)
    del tokens, data  # the text's objects go before the values' are made (a million of each: ~40 MB)
    return LengthDist("file", tuple(values.tolist()))


CACHED_FROM_TRACE = "trace"  # --cached-prompt trace: each request's cached prefix from the trace's hash_ids


def parse_cached_shares(spec: str, what: str = "--cached-prompt") -> tuple[float, ...] | str:
    """'0.3' (every prompt's share in the prefix cache), '@FILE' (one share a request, in the order
    requests are sent; whitespace or commas between them), each in 0..1, or 'trace' (the replayed
    trace's own: CACHED_FROM_TRACE)."""
    text = str(spec).strip()
    if text == CACHED_FROM_TRACE:
        return CACHED_FROM_TRACE
    if text.startswith("@"):
        path = Path(text[1:])
        data = files.read_bytes(path, limit=LENGTHS_FILE_BYTES, error=UsageError, what=f"{what}: shares file")
        tokens = data.removeprefix(b"\xef\xbb\xbf").replace(b",", b" ").split()
        if not tokens:
            raise UsageError(f"{what}: shares file {shown(str(path))} holds no numbers")
        if len(tokens) > MAX_FILE_VALUES:
            raise UsageError(f"{what}: shares file {shown(str(path))} is too large (more than {MAX_FILE_VALUES:,} values)")
        # a bad value is named by its position alone, as a lengths file's: the file may be any file
        where = lambda i: f"{what}: shares file {shown(str(path))}, value {i + 1:,}"  # noqa: E731
        return tuple(_share(t.decode("utf-8", "replace"), where(i), quote=False) for i, t in enumerate(tokens))
    return (_share(text, what),)


def _share(value: str, what: str, quote: bool = True) -> float:
    """A share in 0..1; `quote`: the error shows the value (the option's own text, not a file's)."""
    shown_value = f" '{shown(value, 40)}'" if quote else ""
    try:
        v = float(value)
    except ValueError:
        raise UsageError(f"{what}{shown_value} is not a share in 0..1") from None
    if not (math.isfinite(v) and 0 <= v <= 1):  # a number: shown, a file's too (it is no word of a secret)
        raise UsageError(f"{what}{shown_value} is not a share of the prompt in 0..1"
                         + ("" if quote else f", got {shown(value, 40)}"))
    return v


def warn_beyond_context(model_id: str, max_context: int | None, prompts, answers) -> None:
    """The warning `analyze` gives one workload, for the requests a deployment serves: those whose
    prompt and answer together exceed the model's trained context are costed as if it ran them."""
    if not max_context or not len(prompts):
        return
    total = np.asarray(prompts, float) + np.asarray(answers, float)
    over = int(np.count_nonzero(total > max_context))
    if over:
        warnings.warn(f"{over:,} of {len(total):,} requests exceed {shown(model_id)}'s trained context of "
                      f"{max_context:,} tokens (prompt + answer up to {int(total.max()):,}); the numbers assume the "
                      "model could run them", DlmcostWarning, stacklevel=3)


def _is_float(token: bytes) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Traffic:
    prompt: LengthDist
    answer: LengthDist
    rate: float | None = None  # requests/s, Poisson (open loop)
    users: int | None = None  # concurrent clients (closed loop)
    think_s: float = 0.0  # closed loop: pause between an answer and the user's next request
    cached_prompt: float = 0.0  # the share of each prompt already in the prefix cache

    def __post_init__(self):
        if (self.rate is None) == (self.users is None):
            raise UsageError("traffic: give a request rate (requests/s) or a number of concurrent users, not both")
        if self.rate is not None:
            check_rate(self.rate, "traffic: the request rate")
        if self.users is not None and not (isinstance(self.users, int) and 0 < self.users <= 10_000_000):
            raise UsageError(f"traffic: users must be a whole number in 1..10,000,000, got {self.users}")
        check_think(self.think_s, "traffic: think time")
        if self.rate is not None and self.think_s:  # an open loop sends at its rate, whoever waits
            raise UsageError("traffic: a think time goes with concurrent users (a closed loop), not a request rate")
        if not (math.isfinite(self.cached_prompt) and 0 <= self.cached_prompt <= 1):
            raise UsageError(f"traffic: the share of a prompt in the prefix cache must be in 0..1, got {self.cached_prompt}")

    @property
    def closed_loop(self) -> bool:
        return self.users is not None


@dataclass(frozen=True)
class RequestSample:
    """The requests one simulation replays: unit-rate arrival gaps and length-class indices.

    The same sample is reused for every deployment (common random numbers), scaled to the
    per-replica rate, so that two deployments differ only by their hardware, never by luck."""

    unit_gaps: np.ndarray  # exponential(1) inter-arrival gaps (open loop); divide by the rate
    prompt_class: np.ndarray
    answer_class: np.ndarray
    prompt_values: np.ndarray  # token count of each prompt class
    answer_values: np.ndarray  # token count of each answer class (before rounding to the block)
    class_share: np.ndarray  # fraction of requests in each (prompt, answer) class, flattened
    # each request's own token counts: its class's table times its passes, its own count of them
    # (None: every request its class's values)
    prompt_tokens: np.ndarray | None = None
    answer_tokens: np.ndarray | None = None


def _bins(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Up to MAX_CLASSES_PER_LENGTH quantile bins; each represented by its mean (rounded up)."""
    uniq = np.unique(values)
    if len(uniq) <= MAX_CLASSES_PER_LENGTH:
        return np.searchsorted(uniq, values), uniq.astype(float)
    edges = np.quantile(values, np.linspace(0, 1, MAX_CLASSES_PER_LENGTH + 1)[1:-1])
    idx = np.searchsorted(edges, values, side="right")
    reps = np.array([np.ceil(values[idx == k].mean()) if np.any(idx == k) else np.nan
                     for k in range(MAX_CLASSES_PER_LENGTH)])
    keep = ~np.isnan(reps)
    remap = np.cumsum(keep) - 1
    return remap[idx], reps[keep]


def sample_requests(traffic: Traffic, n: int, seed: int) -> RequestSample:
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0, n)
    prompts = traffic.prompt.sample(rng, n)
    answers = np.maximum(traffic.answer.sample(rng, n), 1.0)  # an answer has at least one token
    return length_classes(prompts, answers, gaps)


def length_classes(prompts: np.ndarray, answers: np.ndarray, gaps: np.ndarray | None = None) -> RequestSample:
    """Requests of the given lengths grouped into classes (quantile bins per axis), each keeping
    its own lengths."""
    n = len(prompts)
    gaps = np.zeros(n) if gaps is None else gaps
    prompts, answers = np.asarray(prompts, float), np.asarray(answers, float)
    p_idx, p_vals = _bins(prompts)
    a_idx, a_vals = _bins(answers)
    flat = p_idx * len(a_vals) + a_idx
    share = np.bincount(flat, minlength=len(p_vals) * len(a_vals)) / n
    return RequestSample(gaps, p_idx, a_idx, p_vals, a_vals, share, prompts, answers)
