"""The package layout shows the data flow, read from the import statements themselves.

    cli -> api -> plan -> serving, calibration -> analysis -> engine -> inputs -> the ground floor
    render is reached from cli alone and reads results only (the ground floor)

Every import counts, at module level or inside a function (a lazy import is still a dependency).
A circle, or an import from a lower layer up to a higher one, fails a test here.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dlmcost"

GROUND = {"", "errors", "results", "documents", "dataframes", "safe_text"}  # "" is dlmcost/__init__.py (__version__)
# what each top-level part may import, besides itself and the ground floor
ALLOWED = {
    "inputs": set(),
    "engine": {"inputs"},
    "analysis": {"inputs", "engine"},
    "serving": {"inputs", "engine", "analysis"},
    "plan": {"inputs", "engine", "analysis", "serving"},
    "calibration": {"inputs", "engine", "analysis"},
    "api": {"inputs", "engine", "analysis", "serving", "plan", "calibration"},
    "render": set(),
    "cli": {"api", "render"},
    "__main__": {"cli", "inputs"},  # the entry imports the model classes first (__main__ says why)
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The dlmcost modules `name` imports (a package's submodule when `from pkg import sub`)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if name == "":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == "dlmcost" or node.module.startswith("dlmcost.")):
                target = node.module.removeprefix("dlmcost").lstrip(".")
            else:
                continue
            subs = {f"{target}.{a.name}".lstrip(".") for a in node.names} & known
            found |= subs or {target}
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("dlmcost").lstrip(".") for a in node.names
                      if a.name == "dlmcost" or a.name.startswith("dlmcost.")}
    return {m for m in found if m in known} - {name}


@cache  # read by three tests: the package's files, parsed once per test process (callers only read it)
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def part(name: str) -> str:
    top = name.split(".")[0]
    return "" if name in GROUND else top


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def upward(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for name, deps in sorted(g.items()):
        mine = part(name)
        if mine == "":
            allowed_parts = {""}
        else:
            allowed_parts = {"", mine, *ALLOWED[mine]}
        bad += [f"{name or 'dlmcost'} -> {d}" for d in sorted(deps) if part(d) not in allowed_parts]
    return bad


def test_the_graph_is_read_from_the_imports():
    """Not vacuous: the reader sees imports of each kind (relative, from-a-package, lazy)."""
    g = graph()
    assert "engine.cost" in g["engine.evaluation"]  # from .cost import ...
    assert "inputs.files" in g["inputs.hardware"]  # from . import files
    assert "analysis.analyze" in g["api"]
    assert len(g) > 50 and sum(map(len, g.values())) > 150


def test_the_checks_fail_on_a_circle_and_an_upward_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert upward({"engine.cost": {"api"}, "api": {"engine.cost"}}) == ["engine.cost -> api"]
    assert upward({"render.report": {"inputs.hardware"}}) == ["render.report -> inputs.hardware"]


import pytest  # noqa: E402


def test_no_import_circles():
    assert circles(graph()) == []


def test_imports_run_one_way_down_the_pipeline():
    assert upward(graph()) == []


@cache  # read by two tests (callers only read it)
def scheme_name_comparisons() -> list[str]:
    """Places outside engine/schemes/ that compare a value with a scheme's name (`== "ar"`,
    `in ("mdm", "block")`, a match case): everything else asks the registry."""
    from dlmcost.engine.schemes import SCHEMES

    names = set(SCHEMES)

    def constants(node) -> set:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(constants(e) for e in node.elts)) if node.elts else set()
        return set()

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[:2] == ("engine", "schemes"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                # `"block" in given` asks for a key (a knob's name), not a scheme: a left operand of
                # in / not in is not compared with a name
                membership = all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                sides = node.comparators if membership else (node.left, *node.comparators)
                hit = set().union(*(constants(n) for n in sides)) & names
            elif isinstance(node, ast.MatchValue):
                hit = constants(node.value) & names
            else:
                continue
            if hit:
                found.append(f"dlmcost/{rel}:{node.lineno}: {', '.join(sorted(hit))}")
    return found


def test_the_scheme_name_check_sees_a_comparison():
    from dlmcost.engine.schemes import SCHEMES

    assert "ar" in SCHEMES and "mdm" in SCHEMES  # the names the comparisons below would use
    tree = ast.parse('x == "ar" or y in ("mdm", "z")')
    compares = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    assert len(compares) == 2
    assert scheme_name_comparisons() is not None  # (the walk over the package runs)


def test_scheme_names_are_compared_only_inside_the_schemes_package():
    assert scheme_name_comparisons() == []
