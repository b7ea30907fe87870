"""End-to-end tests of every `dlmcost` command and output format.

Most tests drive `dlmcost.cli.main([...])` in-process (fast, output captured with capsys); a few run
the installed console script (`pip install .` puts `dlmcost` on PATH) or `python -m dlmcost` in a
subprocess to check what a user's terminal really gets.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlmcost.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forkrun  # noqa: E402

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
DEFAULT_GPU_NAMES = ["H100 SXM", "H200 SXM", "B200", "B300", "MI300X", "MI355X", "MI455X"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# SGR colour parameters: 30-37/39 and 90-97 (foreground), 40-47/49 and 100-107 (background), 38;x / 48;x.
ANSI_COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")

RESULT_KEYS = {"gpu", "ridge_flops_per_byte", "nfe", "flops", "bytes", "arithmetic_intensity", "verdict",
               "time_s", "tokens_per_s", "tokens_per_nfe", "memory", "passes"}
PASS_KEYS = {"name", "count", "q", "c", "flops_linear", "flops_attention", "flops_lm_head", "weight_bytes",
             "kv_read_bytes", "kv_write_bytes", "activation_bytes", "arithmetic_intensity", "verdict", "time_s"}
VERDICTS = {"memory-bound", "compute-bound"}


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    """No user hardware files, no network, no colour surprises from the caller's environment."""
    monkeypatch.delenv("DLMCOST_HARDWARE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)


class Run:
    def __init__(self, rc: int, out: str, err: str):
        self.rc, self.out, self.err = rc, out, err

    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:  # shown by pytest when an assertion fails
        return f"Run(rc={self.rc}, err={self.err!r}, out={self.out[:500]!r})"


@pytest.fixture
def cli(capsys):
    def run(*args: str) -> Run:
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Run(rc, out, err)

    return run


def ok(run: Run) -> Run:
    assert run.rc == 0, run
    assert "Traceback" not in run.err and "error" not in run.err, run
    return run


# --- analyze --------------------------------------------------------------------------------------


def test_analyze_default_table(cli):
    r = ok(cli("analyze"))
    assert LLADA in r.out
    for name in DEFAULT_GPU_NAMES:
        assert name in r.out
    assert "compute" in r.out or "memory" in r.out
    # one verdict per GPU row
    rows = [line for line in r.out.splitlines() if line.split("  ")[0].strip() in DEFAULT_GPU_NAMES]
    assert len(rows) == len(DEFAULT_GPU_NAMES)
    assert all(("compute" in line) or ("memory" in line) for line in rows)


@pytest.mark.parametrize("scheme,shown", [("mdm", False), ("ar", False), ("block", True), ("prefix-cache", True)])
def test_analyze_header_shows_the_block_only_where_the_scheme_costs_it(cli, scheme, shown):
    """mdm and ar ignore the block (sweep prints `-` for it): the header leaves it out; gen 128 in
    blocks of 32 is 4 blocks."""
    header = ok(cli("analyze", "--gpu", "h100", "--scheme", scheme, "--gen", "128", "--block", "32",
                    "--steps", "128")).out.splitlines()[1]
    assert ("block 32 (4 blocks)" in header) == shown, header


def test_analyze_json_shape(cli):
    a = ok(cli("analyze", "--gpu", "h100", "--format", "json")).json()
    m = a["model"]
    assert m["id"] == LLADA
    assert m["params_total"] == pytest.approx(8.02e9, rel=0.005)
    assert m["params_nonembedding"] == pytest.approx(6.98e9, rel=0.005)
    assert m["kv_bytes_per_token"] == 524288
    w = a["workload"]
    for key in ("scheme", "prompt", "gen", "steps", "block", "batch", "precision", "kv_dtype"):
        assert key in w
    assert w["scheme"] == "mdm" and w["gen"] == 128 and w["steps"] == 128
    assert len(a["results"]) == 1
    res = a["results"][0]
    assert res["gpu"] == "H100 SXM"
    assert RESULT_KEYS <= set(res)
    assert res["verdict"] in VERDICTS
    assert res["ridge_flops_per_byte"] == pytest.approx(295.4, abs=1)
    assert res["nfe"] == 128
    assert res["tokens_per_nfe"] == pytest.approx(128 / res["nfe"])
    assert res["tokens_per_s"] == pytest.approx(128 / res["time_s"])
    assert res["arithmetic_intensity"] == pytest.approx(res["flops"] / res["bytes"])
    assert res["passes"], "at least one pass family"
    for p in res["passes"]:
        assert PASS_KEYS <= set(p), set(PASS_KEYS) - set(p)
        assert p["verdict"] in VERDICTS
        assert p["count"] > 0
    assert isinstance(res["memory"], dict) and res["memory"]["fits"] is True


@pytest.mark.parametrize("args", [
    [],
    ["--scheme", "dual-cache", "--block", "32"],
    ["--scheme", "prefix-cache", "--block", "8", "--prompt", "1000", "--batch", "4"],
    ["--scheme", "ar"],
    ["--scheme", "block", "--block", "4", "--store-pass"],
    ["--scheme", "block", "--block", "16", "--no-store-pass", "--logits", "committed"],
    ["--cfg", "1.5", "--precision", "fp8", "--kv-dtype", "fp8"],
    ["inclusionAI/LLaDA2.0-mini", "--expert-load", "all"],
    ["deepseek-ai/DeepSeek-V3", "--gen", "64"],
    ["JetLM/SDAR-4B-Chat", "--tpf", "2"],
])
def test_analyze_json_is_self_consistent(cli, args):
    a = ok(cli("analyze", *args, "--gpu", "h100,b200,mi300x", "--format", "json")).json()
    assert len(a["results"]) == 3
    for res in a["results"]:
        assert res["supported"] is True
        assert res["verdict"] in VERDICTS
        passes = res["passes"]
        total_time = sum(p["count"] * p["time_s"] for p in passes)
        assert total_time == pytest.approx(res["time_s"], rel=1e-9)
        total_flops = sum(p["count"] * (p["flops_linear"] + p["flops_attention"] + p["flops_lm_head"]
                                        + p.get("flops_other", 0.0)) for p in passes)
        assert total_flops == pytest.approx(res["flops"], rel=1e-9)
        total_bytes = sum(p["count"] * (p["weight_bytes"] + p["kv_read_bytes"] + p["kv_write_bytes"]
                                        + p["activation_bytes"]) for p in passes)
        assert total_bytes == pytest.approx(res["bytes"], rel=1e-9)
        assert sum(p["count"] for p in passes) == pytest.approx(res["nfe"])
        for key in ("time_s", "flops", "bytes", "tokens_per_s", "arithmetic_intensity"):
            assert math.isfinite(res[key]) and res[key] > 0, key


def test_analyze_cfg_doubles_effective_batch(cli):
    plain = ok(cli("analyze", "--gpu", "h100", "--format", "json")).json()
    cfg = ok(cli("analyze", "--gpu", "h100", "--cfg", "2", "--format", "json")).json()
    assert cfg["workload"]["effective_batch"] == 2 * plain["workload"]["effective_batch"]
    assert cfg["results"][0]["flops"] > plain["results"][0]["flops"]


def test_analyze_csv_one_line_per_gpu(cli):
    r = ok(cli("analyze", "--format", "csv"))
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert [row["gpu"] for row in rows] == DEFAULT_GPU_NAMES
    header = r.out.splitlines()[0].split(",")
    assert "gpu" in header and "time_s" in header and "tokens_per_s" in header
    assert len(r.out.strip().splitlines()) == 1 + len(DEFAULT_GPU_NAMES)
    for row in rows:
        assert float(row["time_s"]) > 0
        assert row["verdict"] in VERDICTS


def test_analyze_markdown_pipe_table(cli):
    r = ok(cli("analyze", "--gpu", "h100,b200", "--format", "markdown"))
    table = [line for line in r.out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2  # header, separator, one row per GPU
    assert set(table[1].replace("|", "")) <= set("-: ")
    assert any("H100 SXM" in line for line in table) and any("B200" in line for line in table)
    ncols = table[0].count("|")
    assert all(line.count("|") == ncols for line in table)


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_analyze_ops_tables(cli, fmt):
    r = ok(cli("analyze", "--gpu", "h100", "--scheme", "dual-cache", "--block", "32", "--ops", "--format", fmt))
    for op in ("qkv_proj", "attention", "o_proj", "mlp", "lm_head"):
        assert op in r.out
    for family in ("refresh", "step"):
        assert family in r.out
    without = ok(cli("analyze", "--gpu", "h100", "--scheme", "dual-cache", "--block", "32", "--format", fmt))
    assert "qkv_proj" not in without.out


def test_analyze_ops_json_has_ops(cli):
    res = ok(cli("analyze", "--gpu", "h100", "--format", "json")).json()["results"][0]
    names = {o["name"] for o in res["ops"]}
    assert {"qkv_proj", "attention", "o_proj", "mlp", "lm_head"} <= names
    assert sum(o["time_s"] for o in res["ops"]) == pytest.approx(res["time_s"], rel=1e-9)
    assert sum(o["flops"] for o in res["ops"]) == pytest.approx(res["flops"], rel=1e-9)


def test_analyze_unsupported_precision_table_row(cli):
    """The unsupported GPU gets a readable row, and the supported GPU's numbers stay readable."""
    r = ok(cli("analyze", "--gpu", "a100", "--precision", "fp8"))
    assert "A100 80GB SXM" in r.out
    assert "unsupported" in r.out
    both = ok(cli("analyze", "--gpu", "a100,h100", "--precision", "fp8"))
    h100 = ok(cli("analyze", "--gpu", "h100", "--precision", "fp8", "--format", "json")).json()["results"][0]
    assert "unsupported" in both.out
    h100_line = next(line for line in both.out.splitlines() if line.startswith("H100 SXM"))
    assert f"{h100['tokens_per_s']:.4g}" in h100_line, both.out


def test_analyze_unsupported_precision_json_csv(cli):
    j = ok(cli("analyze", "--gpu", "a100,h100", "--precision", "fp8", "--format", "json")).json()
    a100, h100 = j["results"]
    assert a100["supported"] is False and "fp8" in a100["error"]
    assert h100["supported"] is True
    c = ok(cli("analyze", "--gpu", "a100,h100", "--precision", "fp8", "--format", "csv"))
    rows = list(csv.DictReader(io.StringIO(c.out)))
    assert [row["supported"] for row in rows] == ["False", "True"]
    md = ok(cli("analyze", "--gpu", "a100", "--precision", "fp8", "--format", "markdown"))
    assert "unsupported" in md.out


def test_analyze_gpu_all(cli):
    j = ok(cli("analyze", "--gpu", "all", "--format", "json")).json()
    gpus = ok(cli("gpus", "--format", "json")).json()
    assert len(j["results"]) == len(gpus)


def test_analyze_warnings_go_to_stderr_one_line_each(cli):
    r = cli("analyze", "inclusionAI/LLaDA-MoE-7B-A1B-Instruct", "--gpu", "h100", "--format", "json")
    assert r.rc == 0, r
    json.loads(r.out)  # stdout stays clean JSON
    lines = r.err.splitlines()
    assert lines and all(line.startswith("warning: ") for line in lines), r
    assert any("unverified" in line for line in lines)
    r = cli("analyze", "--prompt", "4000", "--gen", "256", "--gpu", "h100", "--format", "json")
    assert r.rc == 0, r
    assert any("4096" in w for w in json.loads(r.out)["warnings"])
    assert all(line.startswith("warning: ") for line in r.err.splitlines()) and r.err, r


def test_efficiency_profiles(cli, tmp_path):
    realistic = ok(cli("analyze", "--gpu", "h100", "--format", "json")).json()
    ideal = ok(cli("analyze", "--gpu", "h100", "--efficiency", "ideal", "--format", "json")).json()
    assert realistic["efficiency_profile"] == "realistic" and ideal["efficiency_profile"] == "ideal"
    assert ideal["results"][0]["time_s"] < realistic["results"][0]["time_s"]
    assert ideal["results"][0]["flops"] == realistic["results"][0]["flops"]  # same work, faster
    path = tmp_path / "eff.yaml"
    path.write_text("memory_bandwidth: 0.5\ngemm: {bf16: 0.5}\noverhead_us_per_op: 10\n")
    slow = ok(cli("analyze", "--gpu", "h100", "--efficiency", path, "--format", "json")).json()
    assert "eff.yaml" in slow["efficiency_profile"]
    assert slow["results"][0]["time_s"] > realistic["results"][0]["time_s"]
    ok(cli("sweep", "--gpu", "h100", "--efficiency", path, "--block", "8"))


# --- sweep ----------------------------------------------------------------------------------------


def test_sweep_table(cli):
    r = ok(cli("sweep", "--block", "1,8,32"))
    assert "evaluated" in r.out
    for scheme in ("mdm", "prefix-cache", "dual-cache", "ar"):
        assert scheme in r.out


def test_sweep_json_rows_match_evaluated(cli):
    j = ok(cli("sweep", "--block", "1,8,32", "--format", "json")).json()
    assert len(j["rows"]) == j["evaluated"] > 0
    assert j["skipped_impossible"] == 0
    blocks = {row["block"] for row in j["rows"] if row["scheme"] in ("prefix-cache", "dual-cache")}
    assert blocks == {1, 8, 32}
    for row in j["rows"]:
        assert row["verdict"] in VERDICTS
        assert row["time_s"] > 0 and math.isfinite(row["tokens_per_s"])
        if row["scheme"] == "ar":
            assert row["steps"] is None and row["block"] is None


def test_sweep_csv(cli):
    j = ok(cli("sweep", "--block", "1,8,32", "--format", "json")).json()
    r = ok(cli("sweep", "--block", "1,8,32", "--format", "csv"))
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert len(rows) == j["evaluated"]
    assert {"gpu", "scheme", "block", "time_s", "tokens_per_s"} <= set(rows[0])


def test_sweep_markdown(cli):
    r = ok(cli("sweep", "--block", "8", "--gpu", "h100", "--format", "markdown"))
    table = [line for line in r.out.splitlines() if line.startswith("|")]
    assert len(table) >= 3


def test_sweep_impossible_rows_are_skipped_not_fatal(cli):
    r = ok(cli("sweep", "--block", "3", "--gen", "128"))
    j = ok(cli("sweep", "--block", "3", "--gen", "128", "--format", "json")).json()
    assert f"skipped {j['skipped_impossible']} impossible (block not dividing" in " ".join(r.out.split())
    assert "without the precision" not in r.out  # a count of 0 is not mentioned
    assert "skipped" not in ok(cli("sweep", "--block", "8", "--gen", "128")).out
    j = ok(cli("sweep", "--block", "3", "--gen", "128", "--format", "json")).json()
    assert j["skipped_impossible"] > 0
    assert len(j["rows"]) == j["evaluated"]
    # only the schemes that ignore the block survive
    assert {row["scheme"] for row in j["rows"]} <= {"mdm", "ar"}


def test_sweep_all_impossible_still_exits_zero(cli):
    j = ok(cli("sweep", "--block", "3", "--gen", "128", "--scheme", "dual-cache", "--format", "json")).json()
    assert j["evaluated"] == 0 and j["rows"] == [] and j["skipped_impossible"] > 0
    ok(cli("sweep", "--block", "3", "--gen", "128", "--scheme", "dual-cache"))
    ok(cli("sweep", "--block", "3", "--gen", "128", "--scheme", "dual-cache", "--format", "csv"))


def test_sweep_sort_and_top(cli):
    j = ok(cli("sweep", "--block", "1,8,32", "--sort", "-tokens_per_s", "--format", "json")).json()
    tps = [row["tokens_per_s"] for row in j["rows"]]
    assert tps == sorted(tps, reverse=True)
    asc = ok(cli("sweep", "--block", "1,8,32", "--sort", "time_s", "--format", "json")).json()
    times = [row["time_s"] for row in asc["rows"]]
    assert times == sorted(times)
    r = ok(cli("sweep", "--block", "1,8,32", "--sort", "-tokens_per_s", "--top", "2"))
    data_lines = [line for line in r.out.splitlines() if line.split("  ")[0].strip() in DEFAULT_GPU_NAMES]
    assert len(data_lines) == 2
    best = j["rows"][0]
    assert best["gpu"] in data_lines[0]
    md = ok(cli("sweep", "--block", "1,8,32", "--sort", "-tokens_per_s", "--top", "2", "--format", "markdown"))
    assert len([line for line in md.out.splitlines() if line.startswith("|")]) == 2 + 2


def test_sweep_unsupported_precision_counted(cli):
    j = ok(cli("sweep", "--gpu", "a100,h100", "--precision", "bf16,fp8", "--scheme", "mdm",
               "--format", "json")).json()
    assert j["skipped_unsupported"] == 1  # fp8 on the A100
    r = ok(cli("sweep", "--gpu", "a100,h100", "--precision", "bf16,fp8", "--scheme", "mdm"))
    assert "skipped 1 on GPUs without the precision" in " ".join(r.out.split()) and "impossible" not in r.out
    assert {(row["gpu"], row["precision"]) for row in j["rows"]} == {
        ("A100 80GB SXM", "bf16"), ("H100 SXM", "bf16"), ("H100 SXM", "fp8")}


def test_sweep_with_no_supported_gpu_precision_pair(cli):
    """Every (GPU, precision) pair unsupported: an empty result, in every format, exit 0."""
    j = ok(cli("sweep", "--gpu", "a100", "--precision", "fp8", "--format", "json")).json()
    assert j["rows"] == [] and j["evaluated"] == 0 and j["skipped_unsupported"] > 0
    for fmt in ("table", "csv", "markdown"):
        ok(cli("sweep", "--gpu", "a100", "--precision", "fp8", "--format", fmt))


def test_sweep_other_model_and_lists(cli):
    j = ok(cli("sweep", "--model", "JetLM/SDAR-4B-Chat", "--gpu", "h100", "--block", "4,8",
               "--batch", "1,16", "--prompt", "0,512", "--format", "json")).json()
    assert j["evaluated"] == len(j["rows"]) > 0
    assert {row["batch"] for row in j["rows"]} == {1, 16}
    assert {row["prompt"] for row in j["rows"]} == {0, 512}


# --- gpus -----------------------------------------------------------------------------------------


def test_gpus_table(cli):
    r = ok(cli("gpus"))
    for name in ("H100 SXM", "H200 SXM", "B200", "MI300X", "A100 80GB SXM"):
        assert name in r.out
    assert "ridge" in r.out


def test_gpus_json(cli):
    recs = ok(cli("gpus", "--format", "json")).json()
    assert isinstance(recs, list) and len(recs) >= 20
    for rec in recs:
        assert {"name", "aliases", "memory_bytes", "bandwidth_bytes_per_s", "peak_flops",
                "ridge_flops_per_byte"} <= set(rec)
        assert isinstance(rec["aliases"], list)
        assert rec["memory_bytes"] > 0 and rec["bandwidth_bytes_per_s"] > 0
        assert rec["peak_flops"]["bf16"] > 0
        for prec, ridge in rec["ridge_flops_per_byte"].items():
            assert ridge == pytest.approx(rec["peak_flops"][prec] / rec["bandwidth_bytes_per_s"])
    by_name = {rec["name"]: rec for rec in recs}
    assert by_name["H100 SXM"]["ridge_flops_per_byte"]["bf16"] == pytest.approx(295, abs=1)
    assert by_name["H200 SXM"]["ridge_flops_per_byte"]["bf16"] == pytest.approx(206, abs=1)
    assert "h100" in by_name["H100 SXM"]["aliases"]


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_gpus_csv_markdown(cli, fmt):
    r = ok(cli("gpus", "--format", fmt))
    assert "H100 SXM" in r.out
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(r.out)))
        n = len(ok(cli("gpus", "--format", "json")).json())
        assert len(rows) == 1 + n
    else:
        assert r.out.splitlines()[0].startswith("|")


# --- models / model -------------------------------------------------------------------------------


def test_models_lists_every_bundled_id(cli):
    from dlmcost.inputs.models import bundled_ids

    r = ok(cli("models"))
    ids = bundled_ids()
    assert len(ids) >= 13
    for model_id in ids:
        assert model_id in r.out
    moe_line = next(line for line in r.out.splitlines() if "LLaDA-MoE" in line)
    assert "unverified" in moe_line


def test_models_json_and_other_formats(cli):
    from dlmcost.inputs.models import bundled_ids

    recs = ok(cli("models", "--format", "json")).json()
    assert [rec["id"] for rec in recs] == bundled_ids()
    moe = next(rec for rec in recs if rec["id"] == "inclusionAI/LLaDA-MoE-7B-A1B-Instruct")
    assert moe["status"] == "unverified" and moe["verified"] is False
    llada = next(rec for rec in recs if rec["id"] == LLADA)
    assert llada["verified"] is True
    c = ok(cli("models", "--format", "csv"))
    assert len(list(csv.DictReader(io.StringIO(c.out)))) == len(recs)
    md = ok(cli("models", "--format", "markdown"))
    assert sum(line.startswith("|") for line in md.out.splitlines()) == 2 + len(recs)


def test_model_table(cli):
    r = ok(cli("model", LLADA))
    assert LLADA in r.out
    assert "params_total" in r.out and "8,015,581,184" in r.out
    assert "524288" in r.out
    # unset fields (a bundled config pins no revision) print as "-", never Python's None
    assert re.search(r"^revision +-$", r.out, re.M) and "None" not in r.out


def test_model_json(cli):
    info = ok(cli("model", LLADA, "--format", "json")).json()
    assert info["id"] == LLADA
    assert info["params_total"] == pytest.approx(8.02e9, rel=0.005)
    assert info["kv_bytes_per_token"]["bf16"] == 524288
    assert info["kv_bytes_per_token"]["fp8"] == 262144
    assert info["n_layers"] == 32 and info["d_model"] == 4096


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_model_csv_markdown(cli, fmt):
    r = ok(cli("model", LLADA, "--format", fmt))
    assert "params_total" in r.out
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(r.out)))
        assert len(rows) == 1 and rows[0]["id"] == LLADA


def test_model_id_is_case_insensitive(cli):
    info = ok(cli("model", LLADA.lower(), "--format", "json")).json()
    assert info["id"] == LLADA


@pytest.mark.parametrize("model_id", ["inclusionAI/LLaDA2.0-mini", "mistralai/Mixtral-8x7B-Instruct-v0.1",
                                      "deepseek-ai/DeepSeek-V3"])
def test_model_moe_json(cli, model_id):
    info = ok(cli("model", model_id, "--format", "json")).json()
    assert "moe" in info
    assert info["params_active"] < info["params_total"]


# --- local model files ----------------------------------------------------------------------------

DLMCOST_SCHEMA_YAML = """\
schema: dlmcost.model/v1
id: tiny-test-model
family: custom
n_layers: 4
d_model: 256
n_heads: 8
n_kv_heads: 2
head_dim: 32
ffn_dim: 1024
vocab_size: 1000
sampler:
  scheme: mdm
  gen: 64
  steps: 32
  block: 16
"""


@pytest.fixture
def schema_yaml(tmp_path) -> Path:
    from dlmcost.inputs.models.load import SCHEMA_TAG

    assert SCHEMA_TAG in DLMCOST_SCHEMA_YAML
    path = tmp_path / "tiny.yaml"
    path.write_text(DLMCOST_SCHEMA_YAML)
    return path


@pytest.fixture
def llada_json(tmp_path) -> Path:
    from dlmcost.inputs.models.load import CONFIG_DIR

    path = tmp_path / "config.json"
    shutil.copy(CONFIG_DIR / "GSAI-ML__LLaDA-8B-Instruct.json", path)
    return path


def test_local_json_config_matches_bundled(cli, llada_json):
    local = ok(cli("model", llada_json, "--format", "json")).json()
    bundled = ok(cli("model", LLADA, "--format", "json")).json()
    assert local["source"] == "local"
    for key in ("params_total", "params_nonembedding", "kv_bytes_per_token", "n_layers", "d_model"):
        assert local[key] == bundled[key]
    a = ok(cli("analyze", llada_json, "--gpu", "h100", "--format", "json")).json()
    b = ok(cli("analyze", LLADA, "--gpu", "h100", "--format", "json")).json()
    assert a["results"][0]["time_s"] == pytest.approx(b["results"][0]["time_s"])
    ok(cli("analyze", llada_json, "--gpu", "h100"))
    ok(cli("model", llada_json))
    # a folder holding a config.json works too
    folder = ok(cli("model", llada_json.parent, "--format", "json")).json()
    assert folder["params_total"] == bundled["params_total"]


def test_local_yaml_in_dlmcost_schema(cli, schema_yaml):
    info = ok(cli("model", schema_yaml, "--format", "json")).json()
    assert info["id"] == "tiny-test-model"
    assert info["n_layers"] == 4 and info["d_model"] == 256 and info["group_size"] == 4
    # K and V, 2 KV heads of 32, 4 layers, 2 bytes
    assert info["kv_bytes_per_token"]["bf16"] == 4 * 2 * 2 * 32 * 2
    d, v = 256, 1000
    assert info["params_total"] == info["params_nonembedding"] + 2 * v * d  # untied embedding and head
    ok(cli("model", schema_yaml))
    a = ok(cli("analyze", schema_yaml, "--gpu", "h100", "--format", "json")).json()
    assert a["model"]["id"] == "tiny-test-model"
    assert a["workload"]["gen"] == 64 and a["workload"]["steps"] == 32 and a["workload"]["block"] == 16
    res = a["results"][0]
    assert res["supported"] and res["time_s"] > 0 and res["verdict"] in VERDICTS
    ok(cli("analyze", schema_yaml, "--gpu", "h100", "--scheme", "dual-cache", "--format", "csv"))
    ok(cli("sweep", "--model", schema_yaml, "--gpu", "h100", "--block", "8,16"))


def test_local_yaml_without_sampler(cli, tmp_path):
    text = "\n".join(line for line in DLMCOST_SCHEMA_YAML.splitlines() if not line.startswith(" ")
                     and not line.startswith("sampler"))
    path = tmp_path / "nosampler.yml"
    path.write_text(text + "\n")
    a = ok(cli("analyze", path, "--gpu", "h100", "--format", "json")).json()
    assert a["results"][0]["supported"]


def test_hf_style_yaml_config(cli, tmp_path):
    """A config.json mapping written as YAML goes through the family parsers too."""
    from dlmcost.inputs.models.load import CONFIG_DIR

    data = json.loads((CONFIG_DIR / "Qwen__Qwen2.5-7B.json").read_text())
    import yaml

    path = tmp_path / "qwen.yaml"
    path.write_text(yaml.safe_dump(data))
    info = ok(cli("model", path, "--format", "json")).json()
    assert info["params_total"] == pytest.approx(7.62e9, rel=0.005)
    ok(cli("analyze", path, "--gpu", "h100"))


# --- custom hardware ------------------------------------------------------------------------------

CUSTOM_GPU_YAML = """\
name: Test Accel 9000
aliases: [ta9k, test-accel]
vendor: Testco
status: estimated
memory_gb: 96
bandwidth_tb_s: 2.0
peak_tflops:
  bf16: 1000
  fp8: 2000
  fp32: 50
efficiency:
  memory_bandwidth: 0.8
  gemm: {bf16: 0.8, fp8: 0.7}
  overhead_us_per_op: 3
sources:
  memory: test
  bandwidth: test
  peak_tflops: test
  efficiency: test
"""


@pytest.fixture
def custom_gpu(tmp_path) -> Path:
    path = tmp_path / "ta9k.yaml"
    path.write_text(CUSTOM_GPU_YAML)
    return path


def test_hardware_file_adds_gpu(cli, custom_gpu):
    recs = ok(cli("gpus", "--hardware", custom_gpu, "--format", "json")).json()
    rec = next(r for r in recs if r["name"] == "Test Accel 9000")
    assert rec["ridge_flops_per_byte"]["bf16"] == pytest.approx(500)
    assert rec["memory_bytes"] == pytest.approx(96e9)
    assert "Test Accel 9000" in ok(cli("gpus", "--hardware", custom_gpu)).out
    without = ok(cli("gpus", "--format", "json")).json()
    assert len(recs) == len(without) + 1
    a = ok(cli("analyze", "--hardware", custom_gpu, "--gpu", "ta9k", "--format", "json")).json()
    assert a["results"][0]["gpu"] == "Test Accel 9000"
    assert a["results"][0]["ridge_flops_per_byte"] == pytest.approx(500)
    ok(cli("analyze", "--hardware", custom_gpu, "--gpu", "test-accel,h100"))
    s = ok(cli("sweep", "--hardware", custom_gpu, "--gpu", "ta9k", "--block", "8", "--format", "json")).json()
    assert {row["gpu"] for row in s["rows"]} == {"Test Accel 9000"}
    # without the file the name is unknown
    assert cli("analyze", "--gpu", "ta9k").rc == 4


def test_hardware_folder_and_env_var(cli, custom_gpu, monkeypatch):
    a = ok(cli("analyze", "--hardware", custom_gpu.parent, "--gpu", "ta9k", "--format", "json")).json()
    assert a["results"][0]["gpu"] == "Test Accel 9000"
    monkeypatch.setenv("DLMCOST_HARDWARE", str(custom_gpu))
    a = ok(cli("analyze", "--gpu", "ta9k", "--format", "json")).json()
    assert a["results"][0]["gpu"] == "Test Accel 9000"
    assert any(r["name"] == "Test Accel 9000" for r in ok(cli("gpus", "--format", "json")).json())


def test_hardware_file_overrides_bundled_entry(cli, tmp_path):
    path = tmp_path / "h100.yaml"
    path.write_text(CUSTOM_GPU_YAML.replace("Test Accel 9000", "H100 SXM").replace("[ta9k, test-accel]", "[]"))
    recs = ok(cli("gpus", "--hardware", path, "--format", "json")).json()
    assert sum(r["name"] == "H100 SXM" for r in recs) == 1
    a = ok(cli("analyze", "--hardware", path, "--gpu", "H100 SXM", "--format", "json")).json()
    assert a["results"][0]["ridge_flops_per_byte"] == pytest.approx(500)


# --- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["analyze", "--help"], ["sweep", "--help"], ["gpus", "--help"],
                                  ["models", "--help"], ["model", "--help"]])
def test_help_exits_zero(cli, args):
    r = cli(*args)
    assert r.rc == 0, r
    assert "Usage" in r.out
    assert r.err == ""


# --- real processes -------------------------------------------------------------------------------


def _script() -> str:
    path = shutil.which("dlmcost")
    if path is None:
        pytest.skip("the `dlmcost` console script is not on PATH (run `pip install .` first)")
    return path


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DLMCOST_HARDWARE", "FORCE_COLOR", "NO_COLOR")}
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


def test_console_script_analyze_json():
    p = subprocess.run([_script(), "analyze", "--gpu", "h100", "--format", "json"], capture_output=True,
                       text=True, timeout=120, env=_env())
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    a = json.loads(p.stdout)
    assert a["results"][0]["gpu"] == "H100 SXM"


def test_console_script_error_is_one_line():
    p = subprocess.run([_script(), "analyze", "--gpu", "h10"], capture_output=True, text=True, timeout=120,
                       env=_env())
    assert p.returncode == 4
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    assert "h100" in lines[0]


def test_console_script_no_color():
    p = subprocess.run([_script(), "analyze"], capture_output=True, text=True, timeout=120,
                       env=_env(NO_COLOR="1"))
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\x1b" not in p.stderr
    assert "H100 SXM" in p.stdout


# `dlmcost sweep ... | head -1` (the console script, a reader that goes away early): exit 0 and
# nothing on stderr for every format, in test_scripting.py::test_pipe_closed_early_exits_0.


def test_python_m_no_color_piped():
    p = subprocess.run([sys.executable, "-m", "dlmcost", "analyze", "--gpu", "h100,b200"], capture_output=True,
                       text=True, timeout=120, env=_env(NO_COLOR="1"))
    assert p.returncode == 0, p.stderr
    assert not ANSI.search(p.stdout), repr(p.stdout[:300])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal")
def test_no_color_on_a_terminal():
    """On a real terminal NO_COLOR=1 removes every colour escape (bold/underline are not colours).
    The console script on a pseudo-terminal, forked from a process that has imported dlmcost
    (tests/ptyserver.py: a real run's streams and exit, without an interpreter start each)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ptyserver

    def run_in_pty(env):
        code, out = ptyserver.run(_script(), ["analyze", "--gpu", "h100,mi355x"], cols=120, rows=40, env=env)
        return code, out.decode("utf-8", errors="replace")

    rc, coloured = run_in_pty(_env(TERM="xterm-256color", COLUMNS="120"))
    assert rc == 0
    assert ANSI_COLOUR.search(coloured), "expected colour on a terminal without NO_COLOR"
    rc, plain = run_in_pty(_env(TERM="xterm-256color", COLUMNS="120", NO_COLOR="1"))
    assert rc == 0
    assert "H100 SXM" in plain
    assert not ANSI_COLOUR.search(plain), repr(plain[:300])


def test_the_command_entry_runs_with_the_garbage_collector_on(monkeypatch):
    """`dlmcost` (dlmcost.__main__:main) switches cyclic collection off only while importing,
    freezes what it imported, and runs the command with collection on."""
    import gc

    from dlmcost import __main__ as entry
    from dlmcost.cli import entry as cli

    seen = []
    monkeypatch.setattr(cli, "run", lambda: seen.append(gc.isenabled()))
    try:
        entry.main()
    finally:
        gc.unfreeze()
        gc.enable()
    assert seen == [True]


@pytest.mark.parametrize("given, kept", [(None, "__all__"), ("", "")])
def test_the_command_entry_skips_pydantic_plugin_discovery_unless_asked(monkeypatch, given, kept):
    import gc

    from dlmcost import __main__ as entry
    from dlmcost.cli import entry as cli

    if given is None:
        monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    else:
        monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", given)
    monkeypatch.setattr(cli, "run", lambda: None)
    try:
        entry.main()
    finally:
        gc.unfreeze()
        gc.enable()
    import os

    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == kept


@pytest.mark.parametrize("argv, given, kept", [(["analyze"], None, "1"), ([], None, "1"), (["analyze"], "4", "4"),
                                               (["analyze"], "", "1"),
                                               (["measure", "--backend", "numpy"], None, None)])
def test_the_command_entry_keeps_one_blas_thread_unless_the_command_multiplies_matrices(monkeypatch, argv, given,
                                                                                        kept):
    from dlmcost import __main__ as entry

    if given is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", given)
    entry.quiet_blas(argv)
    assert os.environ.get("OPENBLAS_NUM_THREADS") == kept


# What the command entry leaves behind at exit: its threads, and how deep in the call stack (in
# frames) each module was first asked for.
AT_EXIT = """
import atexit, json, os, sys
class Probe:
    depth = {}
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        frame, n = sys._getframe(), 0
        while frame:
            frame, n = frame.f_back, n + 1
        cls.depth.setdefault(name, n)
sys.meta_path.insert(0, Probe)
atexit.register(lambda: print(json.dumps([len(os.listdir('/proc/self/task')), Probe.depth]), file=sys.stderr))
sys.argv = ['dlmcost', 'analyze', '--gpu', 'h100']
from dlmcost.__main__ import main
main()
"""


def _at_exit(env: dict) -> tuple[int, dict[str, int]]:
    done = subprocess.run([sys.executable, "-c", AT_EXIT], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    threads, depth = json.loads(done.stderr.splitlines()[-1])
    return threads, depth


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_analyze_runs_on_one_thread_with_its_models_imported_first():
    """numpy's OpenBLAS starts no worker threads for a command that does not multiply matrices
    (with the user's own OPENBLAS_NUM_THREADS=2, it does: the count below is not vacuous); and the
    model classes, with pydantic, are imported higher in the call stack than the command's modules
    (__main__ says why)."""
    blas = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")  # OpenBLAS reads each (conftest sets them)
    env = {k: v for k, v in os.environ.items() if k not in blas}
    threads, depth = _at_exit(env)
    assert threads == 1
    assert depth["dlmcost.inputs.models"] == depth["dlmcost.cli"]  # both asked for by the entry itself
    assert depth["pydantic"] < depth["dlmcost.engine.evaluation"]  # not under the command's modules
    if _at_exit({**env, "OPENBLAS_NUM_THREADS": "2"})[0] == 1:
        pytest.skip("this numpy starts no BLAS threads")


def test_analyze_loads_only_what_it_uses():
    """Start-up: a bundled model's analyze imports neither the sweep, the model commands, the Hub
    client nor the YAML parser (bundled files come parsed); api's names for them still work. (rich
    draws its table; the machine formats load no rich: tests/test_output.py.)"""
    unused = ["dlmcost.analysis.sweep", "dlmcost.analysis.model_info", "dlmcost.inputs.models.hub", "huggingface_hub", "yaml",
              "rich.progress", "rich.markdown", "rich.syntax"]
    code = ("import contextlib, io, json, sys\nfrom dlmcost.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(['analyze'])\n"
            f"print(json.dumps([rc, [m for m in {unused!r} if m in sys.modules]]))")
    # forked from an interpreter that has run just `import dlmcost.__main__, dlmcost.cli` (tests/forkrun.py): what
    # this script's first line imports in a fresh one
    _, stdout, stderr = forkrun.run({"probe": forkrun.script(code)}, dict(os.environ), limit_s=120)["probe"]
    assert json.loads(stdout) == [0, []], stderr


def test_api_names_from_other_modules_load_on_first_use():
    import importlib

    from dlmcost import api

    for module, names in api._ELSEWHERE.items():
        for name in names:
            assert getattr(api, name) is getattr(importlib.import_module(f"dlmcost.{module}"), name)
    with pytest.raises(AttributeError, match="no attribute 'sweeps'"):
        api.sweeps  # noqa: B018


def test_api_lists_and_star_imports_its_lazy_names_before_they_load():
    """In a fresh interpreter (where nothing has loaded sweep.py or model_info.py yet): dir() lists
    them, `from dlmcost.api import *` takes them, and every name api exported before it was split
    into modules still imports."""
    code = """
import json, sys
import dlmcost.api as api
lazy = [n for names in api._ELSEWHERE.values() for n in names]
listed = all(n in dir(api) for n in lazy) and "dlmcost.analysis.sweep" not in sys.modules
ns = {}
exec("from dlmcost.api import *", ns)
print(json.dumps([listed, [n for n in lazy + getattr(api, "__all__", []) if n not in ns]]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout) == [True, []], done.stderr
    from dlmcost import api

    before_the_split = ("DEFAULT_MODEL MAX_PASSES_ONE_BY_ONE MAX_SWEEP_CONFIGS Prepared analyze build_grid check_passes "
                        "check_sweeps_passes generation_numbers iter_sweep list_models model_info model_summary "
                        "models_by_role prepare resolve_stack sweep sweep_columns sweep_first_pass sweep_passes sweep_rows "
                        "unique_rows unsupported_reason verify_model workload_for workload_summary workload_warnings "
                        "workloads_grid Frame Grids VERIFY_WARN_FRACTION").split()
    assert [n for n in before_the_split if not hasattr(api, n)] == []


def test_a_command_s_hub_options_do_not_outlive_it(monkeypatch, capsys):
    """--verbose and --hub-timeout are one command's: once the Hub client is loaded, a later
    command in the same process without them runs with its defaults again (cli.options.configure_hub)."""
    from dlmcost.cli import main
    from dlmcost.inputs.models import hub

    monkeypatch.setattr(hub, "_settings", dict(hub._settings))  # restored after the test
    assert main(["analyze", "--gpu", "h100", "--hub-timeout", "5", "--verbose"]) == 0
    assert hub._settings == {"verbose": True, "budget_s": 5.0}
    assert main(["analyze", "--gpu", "h100"]) == 0
    assert hub._settings == {"verbose": False, "budget_s": None}


@pytest.mark.parametrize("command", [["plan", "--rate", "1", "--p95", "5"], ["analyze", "--gpu", "h100"]])
def test_ctrl_c_exits_130_with_nothing_printed(command, monkeypatch, capsys):
    """Ctrl-C during a command: exit 130 (128 + SIGINT, as the shell reports it), no result and no
    held warning printed. typer turns the KeyboardInterrupt into a returned code, which was once
    dropped: an interrupted plan exited 0 with no output."""
    from dlmcost import api
    from dlmcost.cli import main
    from dlmcost.errors import EXIT_INTERRUPTED

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run_plan", interrupted)
    monkeypatch.setattr(api, "analyze_records", interrupted, raising=False)
    monkeypatch.setattr(api, "analyze", interrupted)
    capsys.readouterr()
    assert main(command) == EXIT_INTERRUPTED == 130
    out, err = capsys.readouterr()
    assert out == "" and err == ""


@pytest.mark.skipif(sys.platform == "win32", reason="no process groups")
def test_ctrl_c_while_the_command_starts_is_130_without_a_traceback():
    """Ctrl-C within the first fraction of a second, while the command's modules load (about half of
    a short command's run): exit 130 (or the signal itself, where it came before Python's handler),
    never a traceback."""
    import os
    import signal
    import subprocess
    import time

    command = subprocess.Popen([sys.executable, "-m", "dlmcost", "analyze", "--gpu", "h100"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(0.15)
    command.send_signal(signal.SIGINT)
    out, err = command.communicate(timeout=60)
    assert "Traceback" not in err and command.returncode in (130, -signal.SIGINT), (command.returncode, err)
