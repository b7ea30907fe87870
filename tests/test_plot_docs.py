"""docs/plots.md's pictures come from scripts/gen_docs_images.py, whose commands are the ones
the page shows: running the script checks the documented command lines still work."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

REPO = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("gen_docs_images", REPO / "scripts" / "gen_docs_images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_images_regenerate_from_the_documented_commands(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    script = load_script()
    files = script.generate(tmp_path)
    assert [f.name for f in files] == ["roofline.png", "sweep.png", "plan-front.png", "serve.png"]
    for f in files:
        assert f.read_bytes()[:4] == b"\x89PNG" and f.stat().st_size > 20_000
        assert (REPO / "docs" / "img" / f.name).is_file()
    page = (REPO / "docs" / "plots.md").read_text()
    for name, command in script.COMMANDS:
        assert f"dlmcost {command.format(out=name)}" in page
        assert f"(img/{name})" in page
    assert "(img/plan-front.png)" in page
