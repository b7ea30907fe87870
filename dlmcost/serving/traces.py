"""Request traces a deployment can replay: when each request arrived, how long its prompt was, and
how many tokens its answer had.

Three public formats are read (docs/plan.md, "Traces"):

- `azure`: the Azure LLM inference traces (Azure/AzurePublicDataset, 2023 and 2024), CSV with
  `TIMESTAMP` (a date and time, fractional seconds of up to 9 digits: the files have 7),
  `ContextTokens`, `GeneratedTokens`; the 2025 multimodal trace's `NumImages` is ignored;
- `mooncake`: the Mooncake traces (kvcache-ai/Mooncake), JSON lines with `timestamp` (ms),
  `input_length`, `output_length`, and `hash_ids`, the prompt's cache blocks of 512 tokens (14 ids
  for a prompt of 6,955 tokens in the trace README's example), from which `prefix_hits` finds each
  request's prompt tokens a prefix cache holds when it arrives (`Trace.cached_tokens`, what
  `serve --cached-prompt trace` replays);
- `burstgpt`: BurstGPT (HPMLL/BurstGPT), CSV with `Timestamp` (s), `Request tokens`,
  `Response tokens` (`Model`, `Total tokens`, `Log Type` and any other column are ignored).

A trace is another person's file: it is read through the bounded reader (`files.TRACE_LIMIT`
bytes, a regular file only, never blocking), one line at a time (at most `MAX_LINE_BYTES`), at
most `MAX_TRACE_ROWS` rows; every value is checked (a column the trace needs named twice in a CSV
header, or a field written twice in a JSON line, is refused: which one holds the numbers?), and the
first bad one is one `TraceError` line naming the file, the row (the line of the file, the header
being row 1) and the column. Rows whose
answer has no tokens are skipped and counted (in BurstGPT they are the failed requests); rows
that arrived before the row above them are sorted into arrival order and counted. Both are said
in `Trace.notes`, each also issued as a `DlmcostWarning`.

How an answer length becomes the work of a diffusion model is `canvas_for`: the caller says, from
the scheme registry (`Scheme.stops`), whether the scheme stops after the answer's last token, after
the block holding it, or runs its whole canvas.
"""

from __future__ import annotations

import csv
from array import array
import functools
import json
import math
import re
import warnings
from dataclasses import dataclass
from datetime import date
from enum import Enum

import numpy as np

from ..errors import DlmcostWarning, TraceError, UsageError, WorkloadError
from ..inputs import files
from ..safe_text import shown
from .traffic import MAX_LENGTH

MAX_TRACE_ROWS = 2_000_000  # rows of one trace (blank lines included); cut a longer one first
MAX_LINE_BYTES = 1 << 20  # one line of a trace: a Mooncake line of a 128k-token prompt is ~2 KB
MAX_SPAN_S = 1e9  # seconds from the first arrival to the last, after the time scale (~32 years)
MOONCAKE_BLOCK_TOKENS = 512  # prompt tokens a Mooncake hash id stands for
# hash ids over a whole trace: read into 8 bytes each, but finding the repeats (prefix_hits: the sort,
# each id's row, place and first row) peaks at about 80 bytes an id, measured: 20M ids took 1.5 GB,
# 5M 0.4 GB. Mooncake's published traces hold under 1M (at most some 24k requests of 17-25 blocks on average)
MAX_HASH_IDS = 5_000_000

FORMATS = {
    "azure": "Azure LLM inference trace (CSV)",
    "mooncake": "Mooncake trace (JSON lines)",
    "burstgpt": "BurstGPT trace (CSV)",
}
# (arrival time, prompt tokens, answer tokens) as each format names them
COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}
_BOM = b"\xef\xbb\xbf"
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_NOT_FINITE = {"nan", "inf", "infinity"}
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
                       r"(?:(Z)|([+-])(\d{2}):?(\d{2}))?", re.ASCII)
_EPOCH = date(1970, 1, 1).toordinal()


# eq=False: == on arrays is elementwise, so a generated __eq__ could only raise.
@dataclass(frozen=True, eq=False)
class Trace:
    """The requests of a trace in arrival order (read-only arrays of one length)."""

    arrival_s: np.ndarray  # float64 seconds after the first request (sorted; the first is 0)
    prompt_tokens: np.ndarray  # int64
    answer_tokens: np.ndarray  # int64, each at least 1
    fmt: str  # a key of FORMATS
    source: str  # the path it was read from, safe to print
    rows_read: int  # data rows in the file (blank lines not counted)
    rows_skipped: int  # rows with no answer tokens (BurstGPT: failed requests), left out
    rows_kept: int  # requests here: rows_read - rows_skipped, then sampled
    rows_reordered: int  # rows that arrived before the row above them (the trace was sorted)
    notes: tuple[str, ...] = ()  # what was skipped or sorted, one line each
    # each request's prompt tokens a prefix cache holds when it arrives (Mooncake's hash_ids: `prefix_hits`);
    # None for a format without them
    cached_tokens: np.ndarray | None = None
    # why a Mooncake trace's hash_ids were not read (a row's not block ids, too many of them); None: read, or none
    hash_ids_unread: str | None = None

    @property
    def span_s(self) -> float:
        """Seconds from the first arrival to the last."""
        return float(self.arrival_s[-1])

    def describe(self) -> str:
        """One line: the file, its format and what was kept."""
        of = f" of {self.rows_read:,} rows" if self.rows_kept != self.rows_read else ""
        return f"{self.source}: {FORMATS[self.fmt]}, {self.rows_kept:,} requests{of} over {self.span_s:.4g} s"


def read_trace(path, fmt: str | None = None, time_scale: float = 1.0, sample: int | float | None = None,
               seed: int = 0) -> Trace:
    """The requests of the trace at `path`.

    fmt: "azure", "mooncake" or "burstgpt"; None detects it from the first line (a JSON object:
    Mooncake; a CSV header with `ContextTokens` and `GeneratedTokens`: Azure; with `Request tokens`
    and `Response tokens`: BurstGPT) and `Trace.fmt` says which it found.
    time_scale: multiplies every inter-arrival time (0.5 replays the trace at twice its rate).
    sample: None keeps every request; a float in (0, 1] keeps that fraction (rounded, at least
    one), an int that many requests, drawn without replacement by numpy's Generator(seed) and
    kept in arrival order. Sampling thins the traffic: a time_scale equal to the fraction keeps
    the rate.
    """
    scale = _time_scale(time_scale)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"trace format '{shown(fmt)}' is not one of {', '.join(FORMATS)}")
    if sample is not None:
        _check_sample(sample)
    _check_seed(seed)
    label = f"trace {shown(str(path))}"
    with files.open_bounded(path, limit=files.TRACE_LIMIT, error=TraceError, what="trace") as stream:
        lines = _Lines(stream, label)
        first = next((line for line in lines if line.strip()), None)
        if first is None:
            raise TraceError(f"{label} is empty")
        fmt = fmt or _detect(first, label)
        lines.most = MAX_TRACE_ROWS + (fmt != "mooncake")
        rows = _read_jsonl(first, lines, label) if fmt == "mooncake" else (*_read_csv(first, lines, fmt, label), None, None)
    return _trace(*rows, fmt=fmt, source=shown(str(path)), label=label, scale=scale, sample=sample, seed=seed)


# --- reading -------------------------------------------------------------------------------------


class _Lines:
    """The lines of a binary stream as text, numbered, each checked for length, NUL bytes and UTF-8."""

    def __init__(self, stream, label: str):
        self.stream, self.label, self.number = stream, label, 0
        self.most = MAX_TRACE_ROWS + 1  # lines: a CSV header and the rows (JSON lines: the rows alone)

    def __iter__(self):
        return self

    def __next__(self) -> str:
        raw = self.stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            raise StopIteration
        self.number += 1
        if self.number > self.most:
            raise TraceError(f"{self.label} has more than {MAX_TRACE_ROWS:,} rows; cut it (e.g. with head) "
                             f"before replaying it")
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(f"{self.label} row {self.number} is longer than {MAX_LINE_BYTES:,} bytes")
        if self.number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        if b"\0" in raw:
            raise TraceError(f"{self.label} row {self.number} holds a NUL byte: a binary file, not a trace")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(f"{self.label} row {self.number} is not UTF-8 text "
                             f"(byte {exc.start + 1} of the row: {exc.reason})") from None


def _csv_fields(line: str, at: str) -> list[str]:
    """The fields of one CSV line; what the csv module refuses (a field over its 131,072
    characters) is a bad trace, said with the row (`at`)."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as exc:
        raise TraceError(f"{at}: {shown(exc)}") from None


def _detect(first: str, label: str) -> str:
    if first.lstrip().startswith("{"):
        return "mooncake"
    try:
        names = {name.strip().lower() for name in next(csv.reader([first]), [])}
    except csv.Error:  # not a CSV header either (a field over the csv module's 131,072 characters)
        names = set()
    for fmt in ("azure", "burstgpt"):
        if {c.lower() for c in COLUMNS[fmt][1:]} <= names:
            return fmt
    raise TraceError(f"{label}: not a trace format dlmcost reads; its first line is '{shown(first.rstrip(), 80)}', "
                     f"not a JSON object (Mooncake) nor a CSV header with ContextTokens and GeneratedTokens (Azure) "
                     f"or Request tokens and Response tokens (BurstGPT)")


def _read_csv(first: str, lines: _Lines, fmt: str, label: str):
    header = [name.strip().lower() for name in _csv_fields(first, f"{label} row {lines.number}")]
    where = []
    for column in COLUMNS[fmt]:
        if column.lower() not in header:
            raise TraceError(f"{label}: no column {column} in its header (the {FORMATS[fmt]} format has "
                             f"{', '.join(COLUMNS[fmt])})")
        found = [i + 1 for i, name in enumerate(header) if name == column.lower()]
        if len(found) > 1:  # which one holds the numbers? (the first was read, without a word)
            raise TraceError(f"{label}: column {column} appears twice in its header (fields {found[0]} and {found[1]})")
        where.append(found[0] - 1)
    it, ip, ia = where
    need = max(where) + 1
    azure = fmt == "azure"
    time_of = _azure_time if azure else _seconds
    t_name, p_name, a_name = COLUMNS[fmt]
    times, prompts, answers = _columns()
    origin = None  # azure: the first row's time, in ns since 1970
    reader = csv.reader(lines)
    try:
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            at = f"{label} row {lines.number}"
            if len(row) < need:
                missing = next(c for c, i in zip(COLUMNS[fmt], where) if i >= len(row))
                raise TraceError(f"{at}: no value for column {missing} ({len(row)} fields, the header has "
                                 f"{len(header)})")
            t = time_of(row[it], at, t_name)
            if azure:  # whole ns until the first row's time is subtracted: no precision lost to the date
                origin = t if origin is None else origin
                t = (t - origin) / 1e9
            times.append(t)
            prompts.append(_whole(row[ip], at, p_name))
            answers.append(_whole(row[ia], at, a_name))
    except csv.Error as exc:
        raise TraceError(f"{label} row {lines.number}: {shown(exc)}") from None
    return times, prompts, answers


def _columns() -> tuple[array, array, array]:
    """Arrival times (s, float64) and token counts (int64), 8 bytes a value where a list takes 30."""
    return array("d"), array("q"), array("q")


def _read_jsonl(first: str, lines: _Lines, label: str):
    t_name, p_name, a_name = COLUMNS["mooncake"]
    times, prompts, answers = _columns()
    # each row's hash ids (0 where it has none) and all of them in order; optional: a row whose hash_ids
    # are not block ids, or more of them than MAX_HASH_IDS, leaves the trace without them (`unread`)
    counts, ids = array("q"), array("q")
    any_hashes, unread = False, None
    line = first
    while line is not None:
        if line.strip():
            at = f"{label} row {lines.number}"
            record = _json_object(line, at)
            times.append(_json_number(record, t_name, at, whole=False) / 1000.0)  # ms
            prompts.append(_json_number(record, p_name, at, whole=True))
            answers.append(_json_number(record, a_name, at, whole=True))
            if unread is None:
                any_hashes = any_hashes or "hash_ids" in record
                unread = _add_hash_ids(record, at, counts, ids)
        line = next(lines, None)
    # (why they were not read goes with the trace: serve warns, or refuses where --cached-prompt trace needs them)
    return times, prompts, answers, (counts, ids) if any_hashes and unread is None else None, unread


def _add_hash_ids(record: dict, at: str, counts: array, ids: array) -> str | None:
    """Appends a Mooncake row's `hash_ids` (a list of whole numbers within 64 bits; none where the
    field is absent); what is wrong with them instead, if anything, and the ids read so far go."""
    blocks = record.get("hash_ids", [])
    problem = None
    if not isinstance(blocks, list):
        problem = f"{at}, column hash_ids: not a list of block ids"
    elif any(isinstance(b, bool) or not isinstance(b, int) or not -(1 << 63) <= b < (1 << 63) for b in blocks):
        problem = f"{at}, column hash_ids: not all whole numbers within 64 bits"
    elif len(ids) + len(blocks) > MAX_HASH_IDS:
        problem = f"{at}: more than {MAX_HASH_IDS:,} hash_ids in the trace"
    if problem is not None:
        del counts[:], ids[:]
        return problem
    counts.append(len(blocks))
    ids.extend(blocks)
    return None


def prefix_hits(counts: np.ndarray, ids: np.ndarray, prompts: np.ndarray, block: int = MOONCAKE_BLOCK_TOKENS) -> np.ndarray:
    """Each request's prompt tokens in a prefix cache when it arrives, the requests in arrival order
    with `counts[r]` block ids each (`ids`, concatenated): its leading blocks whose ids an earlier
    request had (a block's id names its whole prefix, as the Mooncake trace's chained hashes do), times
    `block`, at most its prompt. One cache for every replica that never evicts (Mooncake's pooled
    KV store), so an upper bound on the hits of replicas that each keep their own."""
    counts = np.asarray(counts, np.int64)
    ids = np.asarray(ids, np.int64)
    row = np.repeat(np.arange(len(counts)), counts)
    pos = np.arange(len(ids)) - np.repeat(np.cumsum(counts) - counts, counts)  # a block's place in its prompt
    _, first_at, which = np.unique(ids, return_index=True, return_inverse=True)
    seen = row[first_at][which.reshape(-1)] < row  # the id's first request came before this one
    leading = counts.copy()
    np.minimum.at(leading, row[~seen], pos[~seen])  # the first block not seen before ends the hit
    return np.minimum(leading * block, np.asarray(prompts, np.int64))


def _json_object(line: str, at: str) -> dict:
    try:
        record = files.STRICT_JSON.decode(line)
    except files.RepeatedField as exc:
        raise TraceError(f"{at}: field '{shown(exc.name, 40)}' appears twice") from None
    except RecursionError:
        raise TraceError(f"{at} is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{at} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError:  # an integer over Python's 4,300-digit conversion limit
        raise TraceError(f"{at} holds an integer with more than 4,300 digits") from None
    if not isinstance(record, dict):
        raise TraceError(f"{at} is a JSON {_json_kind(record)}, not an object with {', '.join(COLUMNS['mooncake'])}")
    return record


def _json_kind(value) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _json_number(record: dict, column: str, at: str, whole: bool):
    if column not in record:
        raise TraceError(f"{at}: no field {column}")
    value = record[column]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = _json_kind(value) if not isinstance(value, dict) else "object"
        raise TraceError(f"{at}, column {column}: a {kind}, not a number")
    return _checked(value, repr(value), at, column, whole)


# --- values --------------------------------------------------------------------------------------


def _number(text: str, at: str, column: str, whole: bool):
    s = text.strip()
    if s.lower().lstrip("+-") in _NOT_FINITE:
        raise TraceError(f"{at}, column {column}: '{shown(s, 40)}' is not a finite number")
    if len(s) > 40 or not _NUMBER.fullmatch(s):
        kind = "a whole number" if whole else "a number"
        raise TraceError(f"{at}, column {column}: '{shown(s, 40)}' is not {kind}")
    return _checked(int(s) if s.isdigit() else float(s), s, at, column, whole)


def _checked(value, text: str, at: str, column: str, whole: bool):
    """A finite, non-negative number (whole, at most MAX_LENGTH, for a token count)."""
    if isinstance(value, int) and value.bit_length() > 63:  # a JSON integer beyond any float's reach
        raise TraceError(f"{at}, column {column}: '{shown(text, 40)}' is too large")
    if not math.isfinite(value):
        raise TraceError(f"{at}, column {column}: '{shown(text, 40)}' is not a finite number")
    if value < 0:
        raise TraceError(f"{at}, column {column}: '{shown(text, 40)}' is negative")
    if whole:
        if value != int(value):
            raise TraceError(f"{at}, column {column}: '{shown(text, 40)}' is not a whole number")
        if value > MAX_LENGTH:
            raise TraceError(f"{at}, column {column}: '{shown(text, 40)}' is over the limit of {MAX_LENGTH:,} tokens")
        return int(value)
    return float(value)


def _whole(text: str, at: str, column: str) -> int:
    if text.isascii() and text.isdigit() and len(text) < 7:  # the common case, at most 999,999
        return int(text)
    return _number(text, at, column, whole=True)


def _seconds(text: str, at: str, column: str) -> float:
    return _number(text, at, column, whole=False)


def _azure_time(text: str, at: str, column: str) -> int:
    """Nanoseconds since 1970-01-01 UTC of 'YYYY-MM-DD HH:MM:SS[.fffffff][Z|+HH:MM]'."""
    s = text.strip()
    m = _DATETIME.fullmatch(s)
    if m is None:
        raise TraceError(f"{at}, column {column}: '{shown(s, 40)}' is not a date and time "
                         f"(YYYY-MM-DD HH:MM:SS.fffffff)")
    day = _day(m.group(1), m.group(2), m.group(3))
    if day is None:
        raise TraceError(f"{at}, column {column}: '{shown(s, 40)}' is not a date")
    h, mi, sec = int(m.group(4)), int(m.group(5)), int(m.group(6))
    if h > 23 or mi > 59 or sec > 59:
        raise TraceError(f"{at}, column {column}: '{shown(s, 40)}' is not a time of day")
    fraction = int((m.group(7) or "").ljust(9, "0"))
    offset = 0
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:  # ISO 8601 and Python's datetime: under 24 hours, minutes under 60
            raise TraceError(f"{at}, column {column}: '{shown(s, 40)}' has no such UTC offset "
                             f"(-23:59 to +23:59)")
        offset = (1 if m.group(9) == "+" else -1) * (oh * 3600 + om * 60)
    return ((day * 86400 + h * 3600 + mi * 60 + sec - offset) * 1_000_000_000) + fraction


@functools.lru_cache(maxsize=1024)  # a trace's rows share a few dates
def _day(y: str, mo: str, d: str) -> int | None:
    """Days from 1970-01-01 to the date, None for no such date."""
    try:
        return date(int(y), int(mo), int(d)).toordinal() - _EPOCH
    except ValueError:
        return None


# --- the trace -----------------------------------------------------------------------------------


def _time_scale(time_scale) -> float:
    if isinstance(time_scale, bool) or not isinstance(time_scale, (int, float, np.integer, np.floating)):
        raise UsageError(f"time scale: expected a positive number, got {shown(repr(time_scale), 40)}")
    scale = float(time_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise UsageError(f"time scale must be a positive number, not {scale:g}")
    return scale


def _check_sample(sample) -> None:
    if isinstance(sample, (bool, np.bool_)):
        raise UsageError(f"trace sample: expected a fraction in (0, 1] or a number of requests, got {sample}")
    if isinstance(sample, (int, np.integer)):
        if sample < 1:
            raise UsageError(f"trace sample: {int(sample)} requests; at least 1")
    elif isinstance(sample, (float, np.floating)):
        if not (0 < sample <= 1):
            raise UsageError(f"trace sample: a fraction must be in (0, 1], not {float(sample):g}")
    else:
        raise UsageError(f"trace sample: expected a fraction in (0, 1] or a number of requests, got "
                         f"{shown(repr(sample), 40)}")


def _check_seed(value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise UsageError(f"trace sample: the random seed must be a whole number of at least 0, not {shown(repr(value), 40)}")


def _sample_rows(n: int, sample, seed: int, label: str) -> np.ndarray:
    """Row indices kept, in order: all of them, or `k` drawn without replacement."""
    if isinstance(sample, (int, np.integer)):
        k = int(sample)
        if k > n:
            raise UsageError(f"{label}: asked for {k:,} requests; it has {n:,}")
    else:
        k = max(1, math.floor(float(sample) * n + 0.5))
    if k == n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def _trace(times, prompts, answers, hashes=None, unread=None, *, fmt, source, label, scale, sample, seed) -> Trace:
    rows_read = len(times)
    if rows_read == 0:
        raise TraceError(f"{label} holds no requests (only a header)")
    t = np.asarray(times, dtype=np.float64)
    prompt = np.asarray(prompts, dtype=np.int64)
    answer = np.asarray(answers, dtype=np.int64)
    kept = np.arange(rows_read)  # the file's rows still kept, in the order kept
    notes = []
    answered = answer > 0
    skipped = int(rows_read - answered.sum())
    if skipped:
        column = COLUMNS[fmt][2]
        why = "failed requests" if fmt == "burstgpt" else "nothing to decode"
        if skipped == rows_read:
            raise TraceError(f"{label} holds no requests with an answer: every row has 0 {column} ({why})")
        notes.append(f"{source}: skipped {skipped:,} of {rows_read:,} rows with 0 {column} ({why})")
        t, prompt, answer, kept = t[answered], prompt[answered], answer[answered], kept[answered]
    backwards = int(np.count_nonzero(np.diff(t) < 0))
    if backwards:
        order = np.argsort(t, kind="stable")
        t, prompt, answer, kept = t[order], prompt[order], answer[order], kept[order]
        rows = "row" if backwards == 1 else "rows"
        notes.append(f"{source}: {backwards:,} {rows} arrived before the row above; requests sorted by arrival time")
    if sample is not None:
        rows = _sample_rows(len(t), sample, seed, label)
        t, prompt, answer, kept = t[rows], prompt[rows], answer[rows], kept[rows]
    cached = _cached_tokens(hashes, kept, prompt) if hashes is not None else None
    arrival = (t - t[0]) * scale
    if not arrival[-1] <= MAX_SPAN_S:
        raise TraceError(f"{label} spans {arrival[-1]:.4g} s from its first request to its last (after the time "
                         f"scale); at most {MAX_SPAN_S:g} s")
    for note in notes:
        warnings.warn(note, DlmcostWarning, stacklevel=3)
    for a in (arrival, prompt, answer) + ((cached,) if cached is not None else ()):
        a.setflags(write=False)
    return Trace(arrival_s=arrival, prompt_tokens=prompt, answer_tokens=answer, fmt=fmt, source=source,
                 rows_read=rows_read, rows_skipped=skipped, rows_kept=len(arrival), rows_reordered=backwards,
                 notes=tuple(notes), cached_tokens=cached, hash_ids_unread=unread)


def _cached_tokens(hashes, kept: np.ndarray, prompt: np.ndarray) -> np.ndarray:
    """`prefix_hits` over the requests replayed (the kept rows, in arrival order): what the file's
    rows left out never filled the cache."""
    counts = np.asarray(hashes[0], np.int64)
    ids = np.asarray(hashes[1], np.int64)
    starts = np.cumsum(counts) - counts
    mine = counts[kept]
    take = np.repeat(starts[kept], mine) + (np.arange(int(mine.sum())) - np.repeat(np.cumsum(mine) - mine, mine))
    return prefix_hits(mine, ids[take], prompt)


# --- from an answer length to the canvas ---------------------------------------------------------


class Decodes(Enum):
    """What a decoding scheme runs for an answer shorter than its generation length: the values
    of the scheme registry's `Scheme.stops`, so a caller passes `Decodes(REGISTRY[name].stops)`."""

    TOKENS = "token"  # stops right after the answer's last token (AR, draft-verify)
    BLOCKS = "block"  # stops after the block that holds the end of the answer (block diffusion)
    CANVAS = "never"  # runs the whole canvas whatever the answer (mdm, the fast-dllm caches)


@dataclass(frozen=True, eq=False)
class Canvas:
    """What each request of a trace costs a diffusion model (int64 arrays, one per request)."""

    blocks: np.ndarray  # blocks decoded (TOKENS: one per token)
    decoded: np.ndarray  # answer positions the model decodes
    useful: np.ndarray  # answer tokens delivered: the answer, cut to the canvas
    truncated: int  # answers longer than the canvas `gen`, cut to it


def canvas_for(answer_tokens, block: int, gen: int | None = None, *, decodes: Decodes = Decodes.BLOCKS) -> Canvas:
    """The canvas each answer length takes, for a scheme that `decodes` as the registry says.

    BLOCKS: ceil(answer / block) blocks of `block` tokens are decoded; with a generation length
    `gen`, answers are cut to it and the last block ends at it (as `Scheme.tokens_run`).
    CANVAS: the whole canvas `gen` (required, a multiple of `block`) is decoded whatever the answer,
    in gen / block blocks. TOKENS: the answer itself, one token at a time (`block` unused).
    Useful tokens are the answer, cut to `gen` when one is given.
    """
    if not isinstance(decodes, Decodes):
        raise UsageError(f"canvas: decodes must be a Decodes, not {shown(repr(decodes), 40)}")
    b = _positive(block, "block length")
    g = None if gen is None else _positive(gen, "generation length")
    given = np.asarray(answer_tokens)
    if given.size and (given.dtype.kind not in "iuf" or not np.all(np.isfinite(given)) or np.any(given != np.round(given))):
        raise UsageError("canvas: answer lengths must be whole numbers")
    answer = given.astype(np.int64)
    if answer.size and answer.min() < 0:
        raise UsageError("canvas: answer lengths cannot be negative")
    useful = answer if g is None else np.minimum(answer, g)
    truncated = 0 if g is None else int(np.count_nonzero(answer > g))
    if decodes is Decodes.CANVAS:
        if g is None:
            raise UsageError("canvas: a scheme that runs its whole canvas needs the generation length")
        if b > g or g % b:
            raise WorkloadError(f"block length {b} does not divide the generation length {g}")
        decoded = np.full(answer.shape, g, dtype=np.int64)
        blocks = np.full(answer.shape, g // b, dtype=np.int64)
    elif decodes is Decodes.BLOCKS:
        blocks = -(-useful // b)  # ceil
        decoded = blocks * b if g is None else np.minimum(blocks * b, g)
    else:
        decoded = useful
        blocks = useful
    return Canvas(blocks=blocks.astype(np.int64), decoded=decoded.astype(np.int64),
                  useful=useful.astype(np.int64), truncated=truncated)


def _positive(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UsageError(f"canvas: {what} must be a positive whole number, not {shown(repr(value), 40)}")
    return int(value)
