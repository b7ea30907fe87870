"""Names people type for things dlmcost knows (GPUs, bundled models): the close ones to suggest
when a name is unknown ("did you mean ...?"), and whether a name is a typing slip of another."""

from __future__ import annotations

import difflib

SUGGESTIONS = 3  # names offered at most
CUTOFF = 0.5  # difflib's similarity ratio a suggestion needs
MAX_SLIP = 2  # characters inserted, deleted or replaced in a typing slip


def close_matches(name: str, candidates: list[str], n: int = SUGGESTIONS, cutoff: float = CUTOFF) -> list[str]:
    """The candidates most like `name`, best first, compared without case (each as given)."""
    by_lower = {c.lower(): c for c in candidates}
    return [by_lower[m] for m in difflib.get_close_matches(name.lower()[:100], list(by_lower), n=n, cutoff=cutoff)]


def hint(matches: list[str], otherwise: str) -> str:
    """'; did you mean A, B?' when there are matches, else '; ' + `otherwise` (where to look)."""
    return f"; did you mean {', '.join(matches)}?" if matches else f"; {otherwise}"


def is_slip(typed: str, meant: str) -> bool:
    """Whether `typed` is `meant` with a slip of the keyboard: at most MAX_SLIP characters
    inserted, deleted or replaced (case aside), none of them a digit, inside a word of `meant`
    longer than SHORT_WORD. Digits name sizes and versions (Qwen3-4B is not a slip of Qwen3-8B),
    and short words variants (gemma-3-1b-pt is not a slip of gemma-3-1b-it)."""
    a, b = typed.lower(), meant.lower()
    if a == b:
        return False
    edits = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if any(ch.isdigit() for ch in a[i1:i2] + b[j1:j2]) or len(_word_at(b, j1)) <= SHORT_WORD:
            return False
        edits += max(i2 - i1, j2 - j1)
    return edits <= MAX_SLIP


SHORT_WORD = 3  # letters: a word this short (it, pt, hf, v2) marks a variant, not a slip


def _word_at(text: str, index: int) -> str:
    """The word of `text` (between / - _ . and spaces) at `index` (or just before it, at the end)."""
    index = min(index, len(text) - 1)
    separators = "/-_. "
    start = index
    while start > 0 and text[start - 1] not in separators:
        start -= 1
    end = index
    while end < len(text) and text[end] not in separators:
        end += 1
    return text[start:end]


def task_key(name: str) -> str:
    """A benchmark task as the decoding files name it: they spell tasks in lower case, so a typed
    'GSM8K' or ' gsm8k ' is the files' 'gsm8k' (--task, --min-accuracy and a scenario alike)."""
    return name.strip().lower()
