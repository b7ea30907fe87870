"""The documentation cannot drift: every generated example output and JSON Schema file matches
what the code prints now (`python docs/generate.py` regenerates them), and no internal wording
reaches a user."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import generate  # noqa: E402


def test_generated_docs_are_current():
    pytest.importorskip("cogapp")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = generate.run_cog(check=True)
    assert status == 0, f"docs out of date: run `python docs/generate.py`\n{err.getvalue()[-3000:]}"


@pytest.mark.parametrize("which", generate.SCHEMAS)
def test_schema_files_are_current(which):
    path = generate.schema_path(which)
    assert path.read_text() == generate.schema_text(which), f"{path} is stale: run `python docs/generate.py`"


def test_every_document_has_generated_examples():
    for path in generate.documents():
        assert "[[[end]]]" in path.read_text(), f"{path.name}: no generated block"


def test_readme_shows_the_command_ci_runs():
    ci_script = ROOT / ".ci" / "run"
    if not ci_script.exists():
        pytest.skip("not a git checkout")
    command = ci_script.read_text().strip().splitlines()[-1]
    assert command in (ROOT / "README.md").read_text(), "the README's test command must be what .ci/run runs"


# Wording that only makes sense inside the team: the background documents and their tables.
# (A random seed is a seed; a public repository's docs/reference/ is fine.)
INTERNAL = re.compile(r"seed(?:'s| table| document| blog)|(?:first|second) seed|\bseeds?/|\.\./shared|DESIGN\.md"
                      r"|(?<![/\w])reference/|reference manifest|MANIFEST\.md", re.IGNORECASE)


def test_no_internal_wording_in_user_facing_text():
    paths = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md"),
             *(ROOT / "dlmcost").rglob("*.py"), *(ROOT / "dlmcost").rglob("*.yaml"), *(ROOT / "hardware").iterdir()]
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in paths
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if INTERNAL.search(line)]
    assert not hits, "\n".join(hits)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_point_into_the_repository():
    """Links to files resolve, and none leaves the repository."""
    for path in generate.documents():
        for target in LINK.findall(path.read_text()):
            if "://" in target:
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{path.name}: {target} is outside the repository"
            assert resolved.exists(), f"{path.name}: broken link {target}"


def readme_exit_codes() -> list[tuple[str, str]]:
    """(code or range, meaning) of each row of the README's table of exit codes."""
    return re.findall(r"^\| (\d+(?:-\d+)?) \| (.*) \|$", (ROOT / "README.md").read_text(), re.MULTILINE)


def test_exit_code_table_lists_every_code():
    from dlmcost import errors

    def subclasses(cls):
        return [c for s in cls.__subclasses__() for c in (s, *subclasses(s))]

    codes = {c.exit_code for c in subclasses(errors.DlmcostError)} | {0, errors.EXIT_INTERNAL, errors.EXIT_OUTPUT,
                                                                      errors.EXIT_INTERRUPTED, errors.EXIT_USAGE}
    table = set()
    for code, meaning in readme_exit_codes():
        first, _, last = code.partition("-")
        span = range(int(first), int(last or first) + 1)
        # a row for a range ("10-15") says what each of its codes means
        table |= {c for c in span if not last or re.search(rf"\b{c}\b", meaning)}
    assert codes <= table, f"README exit codes lack {sorted(codes - table)}"


def test_help_lists_the_exit_codes_of_the_readme():
    """`dlmcost --help` ends with the codes of the README's table, in its order, each with a few
    words (both are made from errors.EXIT_CODES; this reads what each prints)."""
    from dlmcost.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--help"]) == 0
    line = " ".join(out.getvalue().split()).split("Exit codes: ", 1)[1]
    helped = [item.split(" ", 1) for item in line.removesuffix(".").split("; ")]
    assert [code for code, _ in helped] == [code for code, _ in readme_exit_codes()]
    assert all(words for _, words in helped)
