"""Bad input never produces a traceback: one `error:` line on stderr and a documented exit code.

`tests/corpus/models/` holds malformed model configs, `tests/corpus/hardware/` malformed GPU
YAML files; every file goes through the commands that read it. `tests/corpus/slow/` holds YAML
alias bombs, run in a subprocess under a timeout so that a hang fails instead of blocking the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlmcost import errors
from dlmcost.cli import main

CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL_FILES = sorted((CORPUS / "models").iterdir())
HARDWARE_FILES = sorted((CORPUS / "hardware").iterdir())
PWNED = Path("/tmp/dlmcost_corpus_pwned")  # what the !!python/object files would create if executed

# Every exit code a user can cause, from errors.py (click's own usage errors share EXIT_USAGE).
DOCUMENTED = {0, errors.EXIT_USAGE, errors.WorkloadError.exit_code, errors.UnknownGPUError.exit_code,
              errors.HardwareFileError.exit_code, errors.UnknownModelError.exit_code,
              errors.ConfigError.exit_code}
HUB_CODES = {errors.HubError.exit_code, errors.HubRepoNotFound.exit_code, errors.HubGated.exit_code,
             errors.HubRevisionNotFound.exit_code, errors.HubFileNotFound.exit_code,
             errors.HubUnreachable.exit_code}


def test_exit_codes_are_distinct_per_class():
    classes = [errors.UsageError, errors.WorkloadError, errors.UnknownGPUError, errors.HardwareFileError,
               errors.UnknownModelError, errors.ConfigError, errors.HubError, errors.HubRepoNotFound,
               errors.HubGated, errors.HubRevisionNotFound, errors.HubFileNotFound, errors.HubUnreachable]
    codes = [c.exit_code for c in classes]
    assert len(set(codes)) == len(codes)
    assert 0 not in codes and errors.EXIT_INTERNAL not in codes
    assert errors.UsageError.exit_code == errors.EXIT_USAGE == 2


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    monkeypatch.delenv("DLMCOST_HARDWARE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a bad id must never reach the network here


@pytest.fixture
def fails(capsys):
    """Run main(args); assert one `error:` line on stderr, nothing on stdout, no traceback."""

    def run(*args, code: int | None = None) -> str:
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        where = f"dlmcost {' '.join(map(str, args))!r} -> rc={rc}, stderr={err!r}"
        assert rc != 0, where
        assert "Traceback" not in err and "Traceback" not in out, where
        assert "internal error" not in err, where
        assert rc != errors.EXIT_INTERNAL, where
        lines = err.splitlines()
        assert len(lines) == 1, where
        assert lines[0].startswith("error: "), where
        assert len(lines[0]) > len("error: ") + 5, where
        assert out == "", where
        if code is not None:
            assert rc == code, where
        assert rc in DOCUMENTED, where
        return lines[0]

    return run


# --- the corpus ---------------------------------------------------------------------------------


def test_corpus_is_big_enough():
    assert len(MODEL_FILES) + len(HARDWARE_FILES) >= 20
    assert len(HARDWARE_FILES) >= 5


@pytest.fixture
def no_side_effect():
    PWNED.unlink(missing_ok=True)
    yield
    assert not PWNED.exists(), "a !!python/object tag in a YAML file was executed"


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.name)
def test_bad_model_file_model_command(fails, path, no_side_effect):
    fails("model", path, code=errors.ConfigError.exit_code)


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.name)
def test_bad_model_file_analyze(fails, path, no_side_effect):
    fails("analyze", path, "--gpu", "h100", code=errors.ConfigError.exit_code)


@pytest.mark.parametrize("path", [p for p in MODEL_FILES if p.name.startswith(("yaml_", "qwen2_string", "empty"))],
                         ids=lambda p: p.name)
def test_bad_model_file_sweep(fails, path, no_side_effect):
    fails("sweep", "--model", path, "--gpu", "h100", code=errors.ConfigError.exit_code)


@pytest.mark.parametrize("path", HARDWARE_FILES, ids=lambda p: p.name)
def test_bad_hardware_file_gpus(fails, path, no_side_effect):
    msg = fails("gpus", "--hardware", path, code=errors.HardwareFileError.exit_code)
    assert path.name in msg


@pytest.mark.parametrize("path", HARDWARE_FILES, ids=lambda p: p.name)
def test_bad_hardware_file_analyze_and_env(fails, path, no_side_effect, monkeypatch):
    fails("analyze", "--hardware", path, "--gpu", "h100", code=errors.HardwareFileError.exit_code)
    monkeypatch.setenv("DLMCOST_HARDWARE", str(path))
    fails("gpus", code=errors.HardwareFileError.exit_code)


def test_yaml_python_tags_are_refused_not_executed(fails, no_side_effect):
    for path in (CORPUS / "models" / "yaml_python_object.yaml", CORPUS / "models" / "yaml_python_object_nested.yml",
                 CORPUS / "hardware" / "python_object.yaml"):
        assert "!!python/object/apply:os.system" in path.read_text()
    fails("model", CORPUS / "models" / "yaml_python_object.yaml")
    fails("analyze", CORPUS / "models" / "yaml_python_object_nested.yml")
    fails("gpus", "--hardware", CORPUS / "hardware" / "python_object.yaml")
    fails("analyze", "--gpu", "h100", "--efficiency", CORPUS / "hardware" / "python_object.yaml")
    assert not PWNED.exists()


# --- messages name what is wrong --------------------------------------------------------------------


def test_unknown_architecture_names_supported_families(fails):
    msg = fails("model", CORPUS / "models" / "unknown_architecture.json")
    assert "gpt_neox" in msg
    for family in ("LLaDA", "Dream", "SDAR", "Qwen2", "Llama", "Mixtral", "DeepSeek"):
        assert family in msg, msg


@pytest.mark.parametrize("name,words", [
    ("llada_missing_d_model.json", ["d_model"]),
    ("qwen2_missing_num_hidden_layers.json", ["num_hidden_layers"]),
    ("qwen2_string_hidden_size.json", ["hidden_size"]),
    ("qwen2_heads_not_multiple_of_kv.json", ["n_kv_heads"]),
    ("mixtral_k_gt_experts.json", ["experts_per_token"]),
    ("llada_zero_layers.json", ["n_layers"]),
    ("qwen2_nan_hidden.json", ["hidden_size"]),
    ("truncated.json", ["JSON"]),
    ("not_json.json", ["JSON"]),
    ("yaml_syntax_error.yaml", ["YAML"]),
    ("list_not_object.json", ["mapping"]),
    ("deeply_nested.json", ["nested"]),
])
def test_config_messages_name_the_problem(fails, name, words):
    msg = fails("model", CORPUS / "models" / name)
    for word in words:
        assert word in msg, msg


@pytest.mark.parametrize("name,word", [("negative_bandwidth.yaml", "bandwidth_tb_s"),
                                       ("missing_sources.yaml", "sources"),
                                       ("not_a_mapping.yaml", "mapping")])
def test_hardware_messages_name_the_problem(fails, name, word):
    msg = fails("gpus", "--hardware", CORPUS / "hardware" / name)
    assert word in msg, msg


def test_missing_paths(fails, tmp_path):
    fails("model", tmp_path / "nope.json", code=errors.UnknownModelError.exit_code)
    fails("gpus", "--hardware", tmp_path / "nope.yaml", code=errors.HardwareFileError.exit_code)
    fails("model", tmp_path, code=errors.ConfigError.exit_code)  # a folder without config.json
    fails("analyze", "--gpu", "h100", "--efficiency", tmp_path / "nope.yaml", code=errors.EXIT_USAGE)


# --- efficiency files ----------------------------------------------------------------------------


@pytest.mark.parametrize("content", [
    b"memory_bandwidth: 2\ngemm: {bf16: 0.8}\noverhead_us_per_op: 3\n",
    b"- 1\n- 2\n",
    b"",
    b"memory_bandwidth: [unclosed\n",
    b"\xff\xfe\x00 not utf-8",
    b"memory_bandwidth: .nan\ngemm: {bf16: 0.8}\noverhead_us_per_op: 3\n",
], ids=["out-of-range", "list", "empty", "syntax", "not-utf8", "nan"])
def test_bad_efficiency_file(fails, tmp_path, content):
    path = tmp_path / "eff.yaml"
    path.write_bytes(content)
    fails("analyze", "--gpu", "h100", "--efficiency", path, code=errors.EXIT_USAGE)


# --- workload and option errors ------------------------------------------------------------------


@pytest.mark.parametrize("args,code", [
    (["analyze", "--gpu", "h10"], 4),
    (["analyze", "--gpu", "h100,nosuchgpu"], 4),
    (["sweep", "--gpu", "h10"], 4),
    (["analyze", "no-such-model"], 6),
    (["analyze", "no_such_model.json"], 6),
    (["model", "no-such-model"], 6),
    (["sweep", "--model", "no-such-model"], 6),
    (["analyze", ""], 6),
    (["analyze", "--block", "7", "--gen", "128", "--scheme", "dual-cache"], 3),
    (["analyze", "--steps", "2", "--block", "32", "--gen", "128", "--scheme", "dual-cache"], 3),
    (["analyze", "--block", "256", "--gen", "128", "--scheme", "prefix-cache"], 3),
    (["analyze", "--block", "5", "--gen", "128", "--scheme", "mdm"], 3),
    (["analyze", "JetLM/SDAR-4B-Chat", "--steps", "10", "--block", "4", "--gen", "256"], 3),
    (["analyze", "--batch", "0"], 2),
    (["analyze", "--batch", "-1"], 2),
    (["analyze", "--batch", "2000000"], 2),
    (["analyze", "--gen", "0"], 2),
    (["analyze", "--gen", "-128"], 2),
    (["analyze", "--prompt", "-1"], 2),
    (["analyze", "--steps", "nan"], 2),
    (["analyze", "--steps", "inf"], 2),
    (["analyze", "--steps", "0"], 2),
    (["analyze", "--steps", "-5"], 2),
    (["analyze", "--tpf", "nan"], 2),
    (["analyze", "--tpf", "0"], 2),
    (["analyze", "--tpf", "2", "--steps", "64"], 2),
    (["analyze", "--block", "0"], 2),
    (["analyze", "--cfg", "nan"], 2),
    (["analyze", "--cfg", "-1"], 2),
    (["analyze", "--precision", "fp7"], 2),
    (["analyze", "--kv-dtype", "fp3"], 2),
    (["analyze", "--format", "xml"], 2),
    (["analyze", "--logits", "some"], 2),
    (["analyze", "--expert-load", "most"], 2),
    (["analyze", "--efficiency", "nosuchprofile"], 2),
    (["analyze", "--scheme", "teleport"], 2),
    (["sweep", "--block", "a,b"], 2),
    (["sweep", "--block", ","], 2),
    (["sweep", "--gen", "0"], 2),
    (["sweep", "--batch", "-4"], 2),
    (["sweep", "--steps", "nan"], 2),
    (["sweep", "--steps", "inf"], 2),
    (["sweep", "--scheme", "teleport"], 2),
    (["sweep", "--precision", "fp7"], 2),
    (["sweep", "--kv-dtype", "fp3"], 2),
    (["sweep", "--format", "xml"], 2),
    (["sweep", "--sort", "nosuchcolumn"], 2),
    (["sweep", "--top", "-1"], 2),
    (["sweep", "--logits", "some"], 2),
    (["sweep", "--expert-load", "most"], 2),
    (["sweep", "--tpf", "-1"], 2),
    (["sweep", "--cfg", "nan"], 2),
    (["sweep", "--efficiency", "nosuchprofile"], 2),
    (["gpus", "--format", "xml"], 2),
    (["models", "--format", "xml"], 2),
    (["model", "GSAI-ML/LLaDA-8B-Instruct", "--format", "xml"], 2),
], ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_workload_and_option_errors(fails, args, code):
    fails(*args, code=code)


@pytest.mark.parametrize("spec", ["", ",", " , ,"])
def test_empty_gpu_list_is_an_error(capsys, spec):
    """`--gpu ''` selects nothing: an error, not an empty table with exit 0."""
    for args in (["analyze", "--gpu", spec], ["sweep", "--gpu", spec]):
        rc = main(args)
        out, err = capsys.readouterr()
        assert rc in (errors.EXIT_USAGE, errors.UnknownGPUError.exit_code), (args, rc, out[:200])
        assert err.count("\n") == 1 and err.startswith("error:"), (args, err)


def test_unknown_gpu_suggests_close_names(fails):
    msg = fails("analyze", "--gpu", "h10", code=4)
    assert "h10" in msg and "h100" in msg
    msg = fails("analyze", "--gpu", "mi300", code=4)
    assert "mi300x" in msg


def test_unknown_model_points_to_models_command(fails):
    msg = fails("analyze", "nosuchmodel", code=6)
    assert "nosuchmodel" in msg and "dlmcost models" in msg


def test_workload_messages(fails):
    msg = fails("analyze", "--block", "7", "--gen", "128", "--scheme", "dual-cache", code=3)
    assert "7" in msg and "128" in msg and "divide" in msg
    msg = fails("analyze", "--steps", "2", "--block", "32", "--gen", "128", "--scheme", "dual-cache", code=3)
    assert "2" in msg and "4" in msg


def test_error_quoting_a_newline_stays_one_line(capsys):
    """A message that quotes the user's value must still be one line (quote it with repr)."""
    rc = main(["analyze", "--gpu", "h1\n00"])
    err = capsys.readouterr().err
    assert rc == errors.UnknownGPUError.exit_code
    assert err.count("\n") == 1 and err.startswith("error:"), repr(err)


def test_format_message_lists_formats(fails):
    msg = fails("analyze", "--format", "xml", code=2)
    for fmt in ("table", "json", "csv", "markdown"):
        assert fmt in msg


def test_precision_message_lists_precisions(fails):
    msg = fails("analyze", "--precision", "fp7", code=2)
    assert "bf16" in msg and "fp8" in msg


# click's own parsing errors (typer raises them before dlmcost sees the values)


@pytest.mark.parametrize("args", [
    ["analyze", "--batch", "abc"],
    ["analyze", "--steps", "many"],
    ["analyze", "--gen", "1.5"],
    ["analyze", "--nosuchoption"],
    ["analyze", "--gpu"],
    ["sweep", "--top", "x"],
    ["nosuchcommand"],
    ["model"],
    ["gpus", "extra-argument"],
], ids=" ".join)
def test_click_usage_errors_are_one_line(fails, args):
    fails(*args, code=errors.EXIT_USAGE)


def test_no_arguments_shows_usage(capsys):
    rc = main([])
    out, err = capsys.readouterr()
    assert rc in (0, errors.EXIT_USAGE), (rc, err)
    assert "internal error" not in err and "Traceback" not in err, err
    assert "Usage" in out + err


# sweep must validate like analyze


@pytest.mark.parametrize("args", [
    ["sweep", "--tpf", "nan"],
    ["sweep", "--tpf", "inf"],
    ["sweep", "--gpu", "a100", "--precision", "fp8", "--kv-dtype", "fp3"],
    ["sweep", "--gpu", "a100", "--precision", "fp8", "--kv-dtype", "fp3", "--format", "json"],
], ids=" ".join)
def test_sweep_validates_like_analyze(fails, args):
    """`analyze --tpf nan` and `sweep --steps nan` are usage errors; so is `sweep --tpf nan`, and an
    unknown --kv-dtype is refused even when no (GPU, precision) pair can run."""
    fails(*args, code=errors.EXIT_USAGE)


@pytest.mark.parametrize("args", [
    ["analyze", "--tpf", "1e-300", "--gpu", "h100", "--format", "json"],
    ["analyze", "--tpf", "1e-300", "--gpu", "h100", "--format", "csv"],
    ["sweep", "--tpf", "1e-300", "--gpu", "h100", "--format", "json"],
    ["sweep", "--tpf", "1e-300", "--gpu", "h100", "--format", "csv"],
], ids=" ".join)
def test_tiny_tpf_is_refused_or_finite(capsys, args):
    """S = Lg / tpf: a tiny --tpf must be refused (like --steps above 1e7), never overflow to inf."""
    rc = main(args)
    out, err = capsys.readouterr()
    where = f"dlmcost {' '.join(args)} -> rc={rc}, stderr={err[:300]!r}"
    assert "internal error" not in err and "Traceback" not in err, where
    assert "Warning" not in err, where  # numpy overflow warnings leak to stderr
    if rc == 0:
        assert all(line.startswith("warning: ") for line in err.splitlines()), where
        assert "inf" not in out.lower() and "nan" not in out.lower(), where
    else:
        assert rc in (errors.EXIT_USAGE, errors.WorkloadError.exit_code), where
        assert len(err.splitlines()) == 1 and err.startswith("error:"), where


# --- alias bombs: must fail fast, never hang --------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["model", "{slow}/alias_bomb_model.yaml"],
    ["gpus", "--hardware", "{slow}/alias_bomb_hardware.yaml"],
    ["analyze", "--gpu", "h100", "--efficiency", "{slow}/alias_bomb_efficiency.yaml"],
], ids=["model", "hardware", "efficiency"])
def test_yaml_alias_bomb_fails_fast(args):
    argv = [a.replace("{slow}", str(CORPUS / "slow")) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "DLMCOST_HARDWARE"}
    env["HF_HUB_OFFLINE"] = "1"
    try:
        p = subprocess.run([sys.executable, "-m", "dlmcost", *argv], capture_output=True, text=True, timeout=15,
                           env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"dlmcost {' '.join(args)} still running after 15 s (YAML alias expansion)")
    assert p.returncode in DOCUMENTED - {0}, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("error:"), p.stderr
