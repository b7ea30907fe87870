"""Text from input made safe to show: no control characters, no unbounded length.

Model ids, GPU names, file names and revisions come from users and from files other people
wrote. Sent raw to a terminal or a CI log, `ESC ] 0 ; ... BEL` sets the window title and
`ESC [ 2 J` clears the screen. `shown()` writes every C0 and C1 control character, DEL and the
bidirectional-override marks as escapes (`\\x1b`, `\\n`, `\\u202e`), and cuts text longer than
`limit` characters, saying how long it was. Nothing dlmcost prints is parsed for markup
(output.py writes text as it is), so brackets in a name are shown as they are.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls; the Unicode bidi embeddings/overrides/isolates and line/paragraph
# separators, which reorder or break what the terminal shows.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

LIMIT = 200  # characters of one piece of user text in a message


def _escape(m: re.Match) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def shown(text: object, limit: int | None = LIMIT) -> str:
    """`text` with control characters escaped, cut to about `limit` characters (None: no cut)."""
    s = str(text)
    if limit is not None and len(s) > limit:
        s = f"{s[:limit]}... ({len(s):,} characters)"
    return _UNSAFE.sub(_escape, s)
