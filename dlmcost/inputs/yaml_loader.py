"""The YAML loader of every file dlmcost reads: PyYAML's safe loader, refusing a repeated key.

PyYAML keeps the last of two equal keys in a mapping without a word, so a stack file with
`eager:` written twice, or a hardware file with two `memory_bandwidth:`, would change the answer
silently. `load_yaml` refuses such a mapping with `RepeatedKeyError`, which names the key and the
two places; `files.parse` turns it into the caller's one-line error, and `bundled.build` (the
table of the bundled files' parses) meets it too, so no bundled file can carry one.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..safe_text import shown

MERGE_TAG = "tag:yaml.org,2002:merge"


class RepeatedKeyError(Exception):
    """A YAML mapping that names one key twice: `key` as written the second time, at `where`;
    `first` as written the first time, at `first_where` ((line, column), both from 1)."""

    def __init__(self, key: str, where: tuple[int, int], first: str, first_where: tuple[int, int]):
        self.key, self.where, self.first, self.first_where = key, where, first, first_where
        super().__init__(self.message())

    def message(self) -> str:
        (line, column), (first_line, first_column) = self.where, self.first_where
        if line == first_line:  # a flow mapping, `{a: 1, a: 2}`: the columns tell them apart
            both = f"line {line}, columns {first_column} and {column}"
            at, first_at = f"line {line} column {column}", f"column {first_column}"
        else:
            both, at, first_at = f"lines {first_line} and {line}", f"line {line}", f"line {first_line}"
        if self.key == self.first:
            return f"key '{shown(self.key, 40)}' appears twice ({both})"
        # `1` and `0x1`, or `1` and `true`, are one key of a Python dict: the second would replace the first
        return f"key '{shown(self.key, 40)}' at {at} is the same key as '{shown(self.first, 40)}' at {first_at}"


@functools.lru_cache(maxsize=1)
def _strict_loader():
    """PyYAML's safe loader (the C parser when there is one; the constructor is Python either way)
    that refuses a mapping naming one key twice.

    Keys are compared as constructed, as the dict holding them would: `1` and `"1"` differ, `1`,
    `0x1` and `true` collide. Merge keys (`<<: *base`) keep their YAML meaning (yaml.org/type/merge):
    the mapping's own keys override the merged ones, and of several merged mappings the first
    wins. That is written once and plainly, so it is allowed; only a key written twice in one
    mapping is refused, `<<` included (each merged mapping is checked as a mapping too).
    PyYAML's own merging strays from that meaning (6.0.4 drops a merged key by the identity of its
    text object: `<<: [*a, *b]` could take b's value, and a mapping merging one that overrides a
    key it merged got the overridden value), so each flattened mapping is left with every key
    once, holding the value YAML means."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):
        def __init__(self, stream):
            super().__init__(stream)
            self._flattened: set[int] = set()  # mappings already checked and flattened

        def flatten_mapping(self, node):
            # A mapping merged into another is flattened there first and may be flattened again
            # when it is itself constructed: by then its merged keys sit in front of its own, so it
            # is checked only once, the first time.
            if id(node) in self._flattened:
                return
            merges = [key_node for key_node, _ in node.value if key_node.tag == MERGE_TAG]
            if len(merges) > 1:  # `<<` twice: one `<<: [*a, *b]` says the order plainly
                raise RepeatedKeyError("<<", _place(merges[1]), "<<", _place(merges[0]))
            own = len(node.value) - len(merges)
            super().flatten_mapping(node)  # the merged pairs first, then the mapping's own, in order
            self._flattened.add(id(node))
            merged, mine = node.value[:len(node.value) - own], node.value[len(node.value) - own:]
            self._refuse_repeats(mine)
            if merged:
                node.value = self._merge(merged, mine)

        def _refuse_repeats(self, pairs) -> None:
            seen: dict = {}
            for key_node, _ in pairs:
                key = self.construct_object(key_node, deep=False)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # a list or mapping as a key: PyYAML's own error names it
                    continue
                if first is not key_node:
                    raise RepeatedKeyError(str(key_node.value), _place(key_node), str(first.value), _place(first))

        def _merge(self, merged, mine):
            """Each key once: the first merged mapping's value, unless the mapping sets its own."""
            pairs: dict = {}
            try:
                for pair in merged:
                    pairs.setdefault(self.construct_object(pair[0], deep=False), pair)
                for pair in mine:
                    pairs[self.construct_object(pair[0], deep=False)] = pair
            except TypeError:  # an unhashable key: left as it is, for PyYAML's own error
                return merged + mine
            return list(pairs.values())

    # YAML 1.2's floats without a point (`1e-3`, `2E5`), which PyYAML's YAML 1.1 rules read as strings: a
    # measurement of `ms_per_forward: 1e-3` was refused as "not a valid number" (quoted, it stays a string)
    StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+0123456789"))
    return StrictLoader


EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


def _place(node) -> tuple[int, int]:
    """Where a YAML node starts: (line, column), both from 1."""
    return node.start_mark.line + 1, node.start_mark.column + 1


def load_yaml(text: str) -> Any:
    """YAML text -> Python data through the safe loader that refuses repeated keys
    (`RepeatedKeyError`); PyYAML's own errors as PyYAML raises them."""
    import yaml

    return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)
