"""Helpers for the generated parts of README.md, CONTRIBUTING.md and docs/*.md.

Every example output in the documentation sits between cogapp's begin and end markers and is
produced by running the real command here, in-process, at 100 columns without colour, so that
it is the same on every machine. `python docs/generate.py` rewrites the outputs and the JSON
Schema files; `python docs/generate.py --check` (and tests/test_docs.py) fails when any of them
no longer matches what the code prints.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Stable rendering: dlmcost/output.py reads these when a command starts.
STABLE_ENV = dict(COLUMNS="100", LINES="50", NO_COLOR="1", TERM="dumb")


@contextlib.contextmanager
def stable_env():
    """The rendering environment for one command, restored afterwards (the test suite shares
    this process)."""
    saved = {k: os.environ.get(k) for k in (*STABLE_ENV, "FORCE_COLOR")}
    os.environ.update(STABLE_ENV)
    os.environ.pop("FORCE_COLOR", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def output(command: str, *, head: int | None = None, section: str | None = None) -> tuple[str, int]:
    """What `dlmcost ...` prints (stdout then stderr, trailing spaces stripped) and its exit code;
    `head`: only the first lines; `section`: only the table whose title ends with it ("passes")."""
    from dlmcost.cli import main

    argv = shlex.split(command)
    assert argv[0] == "dlmcost", command
    out, err = io.StringIO(), io.StringIO()
    with stable_env(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv[1:])
    lines = [line.rstrip() for line in (out.getvalue() + err.getvalue()).splitlines()]
    if section is not None:
        start = next(i for i, line in enumerate(lines) if line.endswith(f": {section}"))
        title = lines[start].rsplit(": ", 1)[0] + ": "  # "H100 SXM: ", the prefix of the next table
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(title)), len(lines))
        lines = ["...", *lines[start:end], "..."]
    if head is not None and len(lines) > head:
        lines = lines[:head] + ["..."]
    return "\n".join(lines), code


def run(command: str, *, head: int | None = None, section: str | None = None, raw: bool = False,
        code: int = 0) -> None:
    """Emit a fenced block: the command after a `$ ` prompt, then what it prints (`raw`: the
    output as Markdown of its own, for `--format markdown`). A command that does not exit with
    `code` stops generation."""
    import cog  # provided by cogapp while it runs a snippet

    expected = code
    text, code = output(command, head=head, section=section)
    if code != expected:
        raise SystemExit(f"{command!r} exited {code}: {text}")
    if expected:
        text += f"\n$ echo $?\n{code}"
    cog.outl(f"`$ {command}`\n\n{text}" if raw else f"```text\n$ {command}\n{text}\n```")


def run_many(*commands: tuple[str, int | None], scratch: tuple[str, ...] | None = None) -> None:
    """Emit one fenced block of several commands, each `(command, head)`: its first `head` lines
    (None: all). `scratch`: run them in a fresh temporary folder (see `scratch_dir`) holding
    these folders of the repository, for commands that write files."""
    import cog

    blocks = []
    with scratch_dir(*scratch) if scratch is not None else contextlib.nullcontext():
        for command, head in commands:
            text, code = output(command, head=head)
            if code:
                raise SystemExit(f"{command!r} exited {code}: {text}")
            blocks.append(f"$ {command}\n{text}")
    cog.outl("```text\n" + "\n".join(blocks) + "\n```")


@contextlib.contextmanager
def scratch_dir(*folders: str):
    """A temporary working folder with links to these folders of the repository: a command that
    writes a file (`calibrate -o my-stack.yaml`) writes it there, not into the checkout, and what
    it prints names the file by a path that is the same on every machine. Removed afterwards."""
    saved = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="dlmcost-docs-") as tmp:
        for folder in folders:
            os.symlink(ROOT / folder, Path(tmp) / folder, target_is_directory=True)
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(saved)


def python_file(path: str) -> None:
    """Emit a Python file of the repository and, below it, what it prints when run."""
    import cog

    code = (ROOT / path).read_text(encoding="utf-8").strip("\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, path, "exec"), {"__name__": "__main__"})
    cog.outl(f"```python\n{code}\n```\n\n```text\n$ python {path}\n{out.getvalue().rstrip()}\n```")


def exit_codes() -> None:
    """Emit the README's table of exit codes from `dlmcost.errors.EXIT_CODES`, the list that
    `dlmcost --help` ends with."""
    import cog

    from dlmcost.errors import EXIT_CODES

    cog.outl("| code | meaning |\n|---|---|\n" + "\n".join(f"| {code} | {meaning} |" for code, _, meaning in EXIT_CODES))


def layout(*folders: str) -> None:
    """Emit the modules of these folders with the first sentence of each module's docstring, so
    that the layout in CONTRIBUTING.md cannot fall behind the code."""
    import cog

    lines = []
    for folder in folders:
        lines.append(f"{folder}/")
        for path in sorted((ROOT / folder).glob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            first = re.sub(r"-\n", "-", doc.split("\n\n")[0]).replace("\n", " ")  # words split at a hyphen
            first = re.split(r"\.\s+(?=[A-Z`])", first)[0].rstrip(".")  # the first sentence
            lines += textwrap.wrap(f"  {path.name:<20} {first}", width=100, subsequent_indent=" " * 23,
                                   break_on_hyphens=False) or [f"  {path.name}"]
    cog.outl("```text\n" + "\n".join(lines) + "\n```")
