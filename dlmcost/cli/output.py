"""What every command does with its result: warnings and failures as single lines on stderr (the
warnings held until the command has run), the finite check, charts drawn after the table, and
--require turned into an exit code."""

import math
import sys
from contextlib import contextmanager
from typing import Optional

from ..errors import RequirementError, WorkloadError
from ..render.output import Output
from ..safe_text import shown

MESSAGE_LIMIT = 1000  # characters of one error line: user text inside is cut shorter still
GATE_LINES = 20  # failing rows listed on stderr; the rest are counted


def stderr(line: str) -> None:
    """One line on stderr; nowhere if stderr is closed (never on stdout instead)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(shown(line, MESSAGE_LIMIT) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


_held: list[str] | None = None  # the warnings of the command running (`warnings_held`)


def warn(text: str) -> None:
    """A `warning: ...` line; held while a command runs (`warnings_held`), else printed now."""
    if _held is None:
        stderr(f"warning: {text}")
    else:
        _held.append(text)


@contextmanager
def warnings_held():
    """The warnings `warn` is given inside, held in the list this yields instead of printed, so
    that the caller shows them once the command has run (or drops them when it fails: a command
    that fails prints its one error line alone)."""
    global _held
    outer, _held = _held, []
    try:
        yield _held
    finally:
        _held = outer


def check_finite(result, where: str = "result") -> None:
    """Every number printed is finite: an overflow anywhere is a clear error, never `inf` in a
    table or a JSON encoder's exception (iterative: results are a few levels deep)."""
    stack = [(where, result)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise WorkloadError(f"the {path} came out as {value} (an overflow): inputs at the edge of their ranges?")
        if getattr(value, "dtype", None) is not None and value.dtype.kind == "f" and value.size:
            import numpy as np  # already loaded by the api; sweep columns hold NaN for ignored knobs

            if np.isinf(value).any():
                raise WorkloadError(f"the {path} came out as inf (an overflow): inputs at the edge of their ranges?")
        if isinstance(value, dict):
            stack += [(f"{path}.{k}", v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            stack += [(path, v) for v in value]


def draw(chart, plot: Optional[str], out: Output) -> None:
    """The chart after the table: drawn in text on stdout (`--plot -`) or saved to a file; then
    the table held until the picture was written (`Output(hold=...)`) goes out."""
    if chart is not None and plot == "-":
        from ..render.termplot import render

        out.write(render(chart))
    elif chart is not None and plot:
        from ..render.plot import save

        save(chart, plot)
    out.release()


def held_output(plot: Optional[str], streaming: bool = False) -> Output:
    """Standard output, held until the picture is written when there is a file to draw: a run
    whose plot fails leaves stdout empty (a streamed sweep cannot hold its rows)."""
    return Output.stdout(hold=plot not in (None, "-") and not streaming)


def stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # no stderr, or closed
        return False


@contextmanager
def progress_bar(what: str, shows: bool = True):
    """rich's progress bar (render.progress) for the work inside, as a `bar(done, total)` callable to
    pass down, erased at the end; None where it cannot show (`shows` false, e.g. rows streamed to
    the same terminal, or stderr not a terminal): rich is then not even imported, so a pipe, a log
    or a machine format loads none of it."""
    bar = None
    if shows and stderr_is_terminal():
        from ..render.progress import Progress

        bar = Progress(what)
    try:
        yield bar
    finally:
        if bar is not None:
            bar.clear()


def requirements_of(require: Optional[list[str]], keys: Optional[tuple[str, ...]] = None,
                    deprecated: Optional[dict] = None) -> list:
    """--require's expressions over the command's keys (default: analyze's and sweep's) and its
    renamed ones, parsed, with a warning on stderr for each deprecated key (the parser loads only
    when there are some: most commands have none, and analyze's start-up counts)."""
    if not require:
        return []
    from .. import api

    requirements = api.parse_requirements(require, *([keys, deprecated] if keys else []))
    for line in api.requirement_warnings(requirements):
        stderr(f"warning: {line}")
    return requirements


def gate(failed: list[str], requirements) -> None:
    """Exit 8 (EXIT_REQUIREMENT) when a row misses a --require; the rows go to stderr."""
    if not failed:
        return
    listed = failed[:GATE_LINES]
    more = [f"... and {len(failed) - len(listed):,} more"] if len(failed) > len(listed) else []
    raise RequirementError(f"{len(failed):,} result row(s) miss a requirement "
                           f"({'; '.join(q.text for q in requirements)}):", listed + more)
