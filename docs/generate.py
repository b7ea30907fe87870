"""Regenerate (or, with --check, verify) every generated part of the documentation.

    python docs/generate.py          rewrite example outputs, docs/schema/*.schema.json and
                                     dlmcost/inputs/bundled_yaml.json
    python docs/generate.py --check  exit 1 if anything is stale (what CI runs, via tests/test_docs.py)

Example outputs live between cogapp markers in these files; each is the real output of the
command written above it. The JSON Schema files are `dlmcost schema analyze|sweep`. The compiled
table holds the parsed bundled YAML files (hardware, stacks, the models' manifest): see
dlmcost/inputs/bundled.py; regenerate it after editing one of them, or start-up parses that file again.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

import cogdocs  # noqa: E402

SCHEMA_DIR = DOCS / "schema"
SCHEMAS = ("analyze", "sweep", "serve", "plan", "gpus", "models", "model", "schemes", "calibrate", "measure")


def documents() -> list[Path]:
    return [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))) if p.exists()]


def schema_text(which: str) -> str:
    text, code = cogdocs.output(f"dlmcost schema {which}")
    assert code == 0, text
    return text + "\n"


def schema_path(which: str) -> Path:
    return SCHEMA_DIR / f"{which}.schema.json"


def stale_schemas() -> list[Path]:
    return [schema_path(w) for w in SCHEMAS
            if not schema_path(w).exists() or schema_path(w).read_text() != schema_text(w)]


def run_cog(check: bool) -> int:
    from cogapp import Cog

    files = [str(p) for p in documents()]
    mode = ["--check", "--diff"] if check else ["-r"]
    # -I: the snippets import cogdocs; -p: what every snippet starts with; --verbosity=1: name
    # only the files that change
    prologue = "from cogdocs import exit_codes, run, run_many, python_file, layout"
    return Cog().main(["cog", *mode, "-I", str(DOCS), "-p", prologue, "--verbosity=1", *files])


def main(argv: list[str]) -> int:
    from dlmcost.inputs import bundled as compiled

    check = "--check" in argv
    # first, so that the examples below are produced with the current table
    table = compiled.build()
    table_stale = not compiled.TABLE.exists() or compiled.TABLE.read_text(encoding="utf-8") != table
    if table_stale and not check:
        compiled.TABLE.write_text(table, encoding="utf-8")
    status = run_cog(check)
    if check:
        for path in stale_schemas() + ([compiled.TABLE] if table_stale else []):
            print(f"stale: {path} (regenerate with `python docs/generate.py`)", file=sys.stderr)
            status = status or 1
    else:
        SCHEMA_DIR.mkdir(exist_ok=True)
        for which in SCHEMAS:
            schema_path(which).write_text(schema_text(which))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
