"""The compiled table of the bundled YAML files: a hit is exactly the parse, a miss is parsed."""

from __future__ import annotations

import json

import yaml

from dlmcost.inputs import bundled as compiled, files
from dlmcost.errors import HardwareFileError
from dlmcost.inputs.hardware import HardwareDB, bundled_hardware_dir


def _parse(path):
    return yaml.safe_load(path.read_bytes().decode("utf-8-sig"))


def test_every_bundled_yaml_file_is_in_the_table_and_reads_as_its_parse():
    table = json.loads(compiled.TABLE.read_text(encoding="utf-8"))
    paths = compiled.bundled_yaml_files()
    assert len(paths) >= 35  # 33 GPUs, the stacks, the models' manifest
    for path in paths:
        text = path.read_bytes().decode("utf-8-sig")
        assert text in table, f"{path} is not compiled: run `python docs/generate.py`"
        # json.dumps, not ==: the order of a mapping's keys is data too (`dlmcost models` lists
        # the manifest in its order)
        assert json.dumps(json.loads(table[text])) == json.dumps(_parse(path))
        read = files.read_document(path, limit=1 << 20, error=HardwareFileError, what="x")
        assert json.dumps(read) == json.dumps(_parse(path))
    assert len(table) == len({p.read_bytes() for p in paths})  # no stale entries


def test_an_edited_file_misses_and_is_parsed(tmp_path):
    src = bundled_hardware_dir() / "nvidia-h100-sxm.yaml"
    edited = tmp_path / "h100-edited.yaml"
    text = src.read_text(encoding="utf-8").replace("name: H100 SXM", "name: H100 Edited")
    edited.write_text(text.replace("aliases: [h100, h100-sxm, h100-sxm5, h100sxm]", "aliases: []"), encoding="utf-8")
    assert compiled.lookup(edited.read_text(encoding="utf-8")) is None
    db = HardwareDB.load([str(edited)])
    assert db.get("H100 Edited").bandwidth_tb_s == 3.35


def test_a_hit_is_a_fresh_copy_each_time():
    text = (bundled_hardware_dir() / "nvidia-h100-sxm.yaml").read_text(encoding="utf-8")
    first = compiled.lookup(text)
    first["name"] = "changed"
    assert compiled.lookup(text)["name"] == "H100 SXM"


def test_a_missing_or_damaged_table_only_costs_time(tmp_path, monkeypatch):
    damaged = tmp_path / "compiled_yaml.json"
    damaged.write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(compiled, "TABLE", damaged)
    compiled._table.cache_clear()
    try:
        path = bundled_hardware_dir() / "nvidia-h100-sxm.yaml"
        assert files.read_document(path, limit=1 << 20, error=HardwareFileError, what="x") == _parse(path)
    finally:
        compiled._table.cache_clear()


def test_only_data_that_survives_json_is_compiled(tmp_path, monkeypatch):
    # a YAML date or an integer key would come back different from JSON: such a file is left out
    odd = tmp_path / "odd.yaml"
    odd.write_text("as_of: 2026-09-25\n1: one\n", encoding="utf-8")
    monkeypatch.setattr(compiled, "bundled_yaml_files", lambda: [odd])
    assert json.loads(compiled.build()) == {}


def test_a_damaged_entry_only_costs_time(tmp_path, monkeypatch):
    path = bundled_hardware_dir() / "nvidia-h100-sxm.yaml"
    damaged = tmp_path / "compiled_yaml.json"
    damaged.write_text(json.dumps({path.read_bytes().decode("utf-8-sig"): "{not json"}), encoding="utf-8")
    monkeypatch.setattr(compiled, "TABLE", damaged)
    compiled._table.cache_clear()
    try:
        assert files.read_document(path, limit=1 << 20, error=HardwareFileError, what="x") == _parse(path)
    finally:
        compiled._table.cache_clear()
