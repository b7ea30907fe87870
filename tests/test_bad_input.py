"""Bad input never produces a traceback: one `error:` line on stderr and a documented exit code.

`tests/corpus/models/` holds malformed model configs, `tests/corpus/hardware/` malformed GPU
YAML files; every file goes through the commands that read it. `tests/corpus/slow/` holds YAML
alias bombs, run in a subprocess under a timeout so that a hang fails instead of blocking the suite.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlmcost import api, errors
from dlmcost.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forkrun  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL_FILES = sorted((CORPUS / "models").iterdir())
HARDWARE_FILES = sorted((CORPUS / "hardware").iterdir())
PWNED = Path("/tmp/dlmcost_corpus_pwned")  # what the !!python/object files would create if executed

# Every exit code a user can cause, from errors.py (click's own usage errors share EXIT_USAGE).
DOCUMENTED = {0, errors.EXIT_USAGE, errors.WorkloadError.exit_code, errors.UnknownGPUError.exit_code,
              errors.HardwareFileError.exit_code, errors.UnknownModelError.exit_code,
              errors.ConfigError.exit_code, errors.TraceError.exit_code}
HUB_CODES = {errors.HubError.exit_code, errors.HubRepoNotFound.exit_code, errors.HubGated.exit_code,
             errors.HubRevisionNotFound.exit_code, errors.HubFileNotFound.exit_code,
             errors.HubUnreachable.exit_code}


def test_exit_codes_are_distinct_per_class():
    classes = [errors.UsageError, errors.WorkloadError, errors.UnknownGPUError, errors.HardwareFileError,
               errors.UnknownModelError, errors.ConfigError, errors.HubError, errors.HubRepoNotFound,
               errors.HubGated, errors.HubRevisionNotFound, errors.HubFileNotFound, errors.HubUnreachable,
               errors.TraceError]
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
    ("minimax_m2_qk_norm_type_unknown.json", ["qk_norm_type", "per_layer"]),
    ("minimax_m2_string_use_qk_norm.json", ["use_qk_norm"]),
    ("minimax_m2_missing_experts.json", ["MiniMax-M2 config", "num_local_experts"]),
    ("llada_zero_layers.json", ["n_layers"]),
    ("qwen2_nan_hidden.json", ["hidden_size"]),
    ("truncated.json", ["JSON"]),
    ("not_json.json", ["JSON"]),
    ("yaml_syntax_error.yaml", ["YAML"]),
    ("list_not_object.json", ["mapping"]),
    ("deeply_nested.json", ["nested"]),
    ("json_duplicate_key.json", ["key 'n_layers' appears twice"]),  # the last one was read without a word
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


@pytest.mark.parametrize("args, code, what", [
    (["serve", "--trace", ""], errors.TraceError.exit_code, "trace"),
    (["serve", "-c", "1", "--prompt", "@"], errors.EXIT_USAGE, "prompt lengths: lengths file"),
    (["analyze", "--gpu", "h100", "--efficiency", ""], errors.EXIT_USAGE, "efficiency file"),
    (["gpus", "--hardware", ""], errors.HardwareFileError.exit_code, "hardware path"),
    (["plan", "--rate", "1", "--scenario", ""], errors.EXIT_USAGE, "scenario file"),
])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(fails, tmp_path, monkeypatch, args, code, what):
    """'' (an unset shell variable) was the current folder: 'trace  is a folder', every YAML file
    there read as hardware, no scenario at all."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other.yaml").write_text("name: not a GPU\n")
    assert fails(*args, code=code) == f"error: {what}: the path is empty"


@pytest.mark.parametrize("length", ['{file: ""}', '"@"'])
def test_an_empty_lengths_path_in_a_scenario_is_refused(fails, tmp_path, length):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"traffic: {{rate: 1, prompt: {length}}}\n")
    assert fails("plan", "--scenario", scenario, code=errors.EXIT_USAGE) == "error: prompt lengths: lengths file: the path is empty"


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
    (["serve", "--gpu", "h100", "-c", "1", "--kv-dtype", "fp7"], 2),
    (["plan", "--rate", "1", "--gpu", "h100", "--tp", "1", "--kv-dtype", "fp7"], 2),
    *[([command, "--mem-fraction", f], 2) for command in ("analyze", "sweep") for f in ("0", "1.5", "nan", "x")],
    *[(["serve", "--gpu", "h100", "-c", "1", "--mem-fraction", f], 2) for f in ("0", "1.5", "nan", "x")],
    *[(["plan", "--rate", "1", "--gpu", "h100", "--tp", "1", "--mem-fraction", f], 2) for f in ("0", "1.5", "nan", "x")],
    *[(["plan", "--rate", "1", "--gpu", "h100", "--tp", "1", "--recv-interval", r], 2) for r in ("0", "1001", "x")],
    (["sweep", "--format", "xml"], 2),
    (["sweep", "--sort", "nosuchcolumn"], 2),
    (["sweep", "--sort", ""], 2),  # once read as no --sort: exit 0, unsorted
    (["sweep", "--sort", "-"], 2),
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


@pytest.mark.parametrize("args, said", [
    (["--steps", "0"], "--steps: a positive number"),  # once read as not given: the published decoding, exit 0
    (["--steps", "64,0"], "--steps: a positive number"),
    (["--steps", "-5"], "--steps: a positive number"),  # once blamed on --tpf
    (["--tpf", "0"], "--tpf: a positive number"),
])
def test_serve_refuses_a_zero_or_negative_step_count_as_analyze_does(fails, args, said):
    assert said in fails("serve", "--gpu", "h100", "-c", "1", *args, code=errors.EXIT_USAGE)


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


ALIAS_BOMBS = {  # run with the blocking cases below, in the same forked driver under its deadline
    "model": ["model", "{slow}/alias_bomb_model.yaml"],
    "hardware": ["gpus", "--hardware", "{slow}/alias_bomb_hardware.yaml"],
    "efficiency": ["analyze", "--gpu", "h100", "--efficiency", "{slow}/alias_bomb_efficiency.yaml"],
}


@pytest.mark.parametrize("name", ALIAS_BOMBS)
def test_yaml_alias_bomb_fails_fast(blocking_results, name):
    result = blocking_results[f"alias-bomb-{name}"]
    if result is None:
        pytest.fail(f"dlmcost {' '.join(ALIAS_BOMBS[name])} still running after {FAST_S} s (YAML alias expansion)")
    rc, _, err = result
    assert rc in DOCUMENTED - {0}, err
    assert "Traceback" not in err and "internal error" not in err
    assert len(err.splitlines()) == 1 and err.startswith("error:"), err


# --- hostile input: one test per class (files that block or never end, terminal escapes, output) ----

FAST_S = 15  # a case that hangs fails here instead of blocking the suite
UNSAFE = ("\x1b", "\x07", "\x9b", "\x00")


BLOCKING_CASES = {  # name: (args, exit code, word in the message)
    "fifo-model": (["model", "{fifo}"], errors.ConfigError.exit_code, "named pipe"),
    "fifo-config-in-folder": (["model", "{dir}"], errors.ConfigError.exit_code, "named pipe"),
    "fifo-hardware": (["gpus", "--hardware", "{fifo}"], errors.HardwareFileError.exit_code, "named pipe"),
    "fifo-efficiency": (["analyze", "--gpu", "h100", "--efficiency", "{fifo}"], errors.EXIT_USAGE, "named pipe"),
    "dev-zero-model": (["model", "{zero}"], errors.ConfigError.exit_code, "character device"),
    "dev-zero-hardware": (["gpus", "--hardware", "{zero_yaml}"], errors.HardwareFileError.exit_code,
                          "character device"),
    "dev-zero-efficiency": (["analyze", "--gpu", "h100", "--efficiency", "{zero_yaml}"], errors.EXIT_USAGE,
                            "character device"),
    "moe-billion-layers": (["model", "{slow}/moe_billion_layers.json"], errors.ConfigError.exit_code, "layers"),
    # lengths files: an option's value (no arrival times: not a request trace), so exit 2
    "fifo-lengths-serve": (["serve", "--rate", "1", "--prompt", "@{fifo}"], errors.EXIT_USAGE, "named pipe"),
    "fifo-lengths-plan": (["plan", "--rate", "1", "--p95", "10", "--answer", "@{fifo}"], errors.EXIT_USAGE,
                          "named pipe"),
    "dev-zero-lengths-serve": (["serve", "--rate", "1", "--answer", "@{zero}"], errors.EXIT_USAGE,
                               "character device"),
    "folder-lengths-plan": (["plan", "--rate", "1", "--p95", "10", "--prompt", "@{dir}"], errors.EXIT_USAGE, "folder"),
    # a measurements file's model, beside it (never a "no such file or bundled model")
    "fifo-calibrate-model": (["calibrate", "{points_fifo}", "-o", "{out_fifo}"], errors.ConfigError.exit_code, "named pipe"),
    "dev-zero-calibrate-model": (["calibrate", "{points_zero}", "-o", "{out_zero}"], errors.ConfigError.exit_code,
                                 "character device"),
    "folder-calibrate-model": (["calibrate", "{points_dir}", "-o", "{out_dir}"], errors.ConfigError.exit_code, "named pipe"),
    "fifo-model-without-suffix": (["model", "{fifo_bare}"], errors.ConfigError.exit_code, "named pipe"),
}


# The blocking cases, each in its own process forked from one interpreter that imported dlmcost
# once (tests/forkrun.py), all at once under one deadline: a case that hangs is killed at the
# deadline without holding up the others.


@pytest.fixture(scope="module")
def blocking_results(tmp_path_factory):
    """Every case in its own process, all at once (each would hang or fill memory if the check
    regressed; together they take the time of one). None: still running at the deadline."""
    tmp = tmp_path_factory.mktemp("blocking")
    os.mkfifo(tmp / "pipe.json")
    (tmp / "model_dir").mkdir()
    os.mkfifo(tmp / "model_dir" / "config.json")
    for name in ("zero.json", "zero.yaml"):
        (tmp / name).symlink_to("/dev/zero")
    os.mkfifo(tmp / "pipe")
    subst = {"{fifo}": str(tmp / "pipe.json"), "{dir}": str(tmp / "model_dir"), "{zero}": str(tmp / "zero.json"),
             "{zero_yaml}": str(tmp / "zero.yaml"), "{slow}": str(CORPUS / "slow"), "{fifo_bare}": str(tmp / "pipe"),
             # each case its own output: the cases run at once, and a calibration that takes its
             # output path before it fails would find another case's there ('File exists')
             **{f"{{out_{name}}}": str(tmp / f"fitted_{name}.yaml") for name in ("fifo", "zero", "dir")}}
    for name, model in (("fifo", "pipe.json"), ("zero", "zero.json"), ("dir", "model_dir")):
        point = dict(id="p", model=model, gpu="h100", workload=dict(scheme="ar", prompt=8, gen=8),
                     measured=dict(ms_per_forward=1.0))
        (tmp / f"points_{name}.yaml").write_text(json.dumps(dict(points=[point])))
        subst[f"{{points_{name}}}"] = str(tmp / f"points_{name}.yaml")
    env = {k: v for k, v in os.environ.items() if k != "DLMCOST_HARDWARE"} | {"HF_HUB_OFFLINE": "1"}
    subst |= {f"@{k}": f"@{v}" for k, v in subst.items()}  # a lengths file: --prompt @FILE
    cases = {name: [subst.get(a, a).replace("{slow}", subst["{slow}"]) for a in args]
             for name, (args, _, _) in BLOCKING_CASES.items()}
    cases |= {f"alias-bomb-{name}": [a.replace("{slow}", subst["{slow}"]) for a in args]
              for name, args in ALIAS_BOMBS.items()}
    return run_forked(cases, env)


def run_forked(cases: dict[str, list[str]], env: dict[str, str]) -> dict:
    """The commands forked from one interpreter started with `env` (tests/forkrun.py): {name:
    [exit code, stdout, stderr] or None if still running after FAST_S}."""
    return forkrun.run({name: forkrun.case(argv) for name, argv in cases.items()}, env, FAST_S)


@pytest.mark.parametrize("name", BLOCKING_CASES)
def test_files_that_block_or_never_end_fail_fast(blocking_results, name):
    _, code, word = BLOCKING_CASES[name]
    result = blocking_results[name]
    assert result is not None, f"{name}: still running after {FAST_S} s"
    rc, stdout, err = result
    assert rc == code, err
    assert err.count("\n") == 1 and err.startswith("error: ") and word in err, err
    assert stdout == ""


def test_oversize_files_and_folders_are_named_for_what_they_are(fails, tmp_path):
    with open(tmp_path / "big.json", "wb") as fh:  # sparse: over the limit without writing it
        fh.truncate((16 << 20) + 1)
    with open(tmp_path / "big.yaml", "wb") as fh:
        fh.truncate((1 << 20) + 1)
    assert "limit is 16 MiB" in fails("model", tmp_path / "big.json", code=errors.ConfigError.exit_code)
    assert "limit is 1 MiB" in fails("gpus", "--hardware", tmp_path / "big.yaml", code=errors.HardwareFileError.exit_code)
    assert "limit is 1 MiB" in fails("analyze", "--efficiency", tmp_path / "big.yaml", code=errors.EXIT_USAGE)
    assert "folder" in fails("analyze", "--gpu", "h100", "--efficiency", tmp_path, code=errors.EXIT_USAGE)
    with open(tmp_path / "lengths.txt", "wb") as fh:  # a lengths file (docs/limits.md: 16 MiB)
        fh.truncate((16 << 20) + 1)
    assert "limit is 16 MiB" in fails("serve", "--rate", "1", "--prompt", f"@{tmp_path / 'lengths.txt'}",
                                      code=errors.EXIT_USAGE)


@pytest.mark.parametrize("name", ["huge_int_5000_digits.json", "huge_int_5000_digits.yaml"])
def test_integer_over_4300_digits_in_model_file(fails, name):
    assert "4,300 digits" in fails("model", CORPUS / "models" / name, code=errors.ConfigError.exit_code)


def test_integer_over_4300_digits_in_hardware_and_efficiency_files(fails, tmp_path):
    assert "4,300 digits" in fails("gpus", "--hardware", CORPUS / "hardware" / "huge_int_bandwidth.yaml")
    eff = tmp_path / "eff.yaml"
    eff.write_text("memory_bandwidth: 0.8\ngemm: {bf16: 0.8}\noverhead_us_per_op: " + "9" * 5000 + "\n")
    assert "4,300 digits" in fails("analyze", "--gpu", "h100", "--efficiency", eff, code=errors.EXIT_USAGE)


@pytest.mark.parametrize("prompt", ["1" + "0" * 400, "{p50: 1" + "0" * 400 + "}"], ids=["count", "percentile"])
def test_a_scenarios_length_past_floats_range_is_refused(fails, tmp_path, prompt):
    # YAML reads 1000...0 as a Python int that float() cannot convert: once an OverflowError, exit 70
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"traffic: {{rate: 1, prompt: {prompt}}}\n")
    assert "whole token counts" in fails("plan", "--scenario", scenario, code=errors.EXIT_USAGE)


def test_a_softcap_past_floats_range_in_a_model_file_is_refused(fails, tmp_path):
    # a JSON integer float() cannot convert, in the one field read as a float without a bound
    config = json.loads((Path(__file__).resolve().parents[1] / "dlmcost" / "inputs" / "models" / "configs"
                         / "google__gemma-2-9b.json").read_text())
    config["final_logit_softcapping"] = 0
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config).replace('"final_logit_softcapping": 0', '"final_logit_softcapping": 1' + "0" * 400))
    assert "final_logit_softcapping" in fails("analyze", path, "--gpu", "h100", code=errors.ConfigError.exit_code)


@pytest.mark.parametrize("name, word", [
    ("tiny_bandwidth.yaml", "bandwidth_tb_s"), ("tiny_peak.yaml", "peak_tflops"),
    ("tiny_gemm_efficiency.yaml", "gemm"), ("tiny_link.yaml", "scale_up_gb_s"),
    ("bool_bandwidth.yaml", "bandwidth_tb_s"), ("bool_efficiency.yaml", "memory_bandwidth"),
])
def test_tiny_and_boolean_hardware_values_are_refused(fails, name, word):
    assert word in fails("gpus", "--hardware", CORPUS / "hardware" / name, code=errors.HardwareFileError.exit_code)


@pytest.mark.parametrize("content, word", [
    ("memory_bandwidth: 0.8\ngemm: {bf16: 1.0e-300}\noverhead_us_per_op: 3\n", "gemm"),
    ("memory_bandwidth: 5.0e-324\ngemm: {bf16: 0.8}\noverhead_us_per_op: 3\n", "memory_bandwidth"),
    ("memory_bandwidth: true\ngemm: {bf16: 0.8}\noverhead_us_per_op: 3\n", "memory_bandwidth"),
    ("memory_bandwidth: 0.8\ngemm: {bf16: true}\noverhead_us_per_op: 3\n", "gemm"),
], ids=["tiny-gemm", "tiny-bandwidth", "bool-bandwidth", "bool-gemm"])
def test_tiny_and_boolean_efficiency_values_are_refused(fails, tmp_path, content, word):
    path = tmp_path / "eff.yaml"
    path.write_text(content)
    assert word in fails("analyze", "--gpu", "h100", "--efficiency", path, code=errors.EXIT_USAGE)


def test_paths_too_long_or_with_unknown_user(fails):
    long = "x" * 5000 + ".json"
    assert "longer than the file system allows" in fails("model", long, code=errors.ConfigError.exit_code)
    assert "longer than the file system allows" in fails("gpus", "--hardware", long,
                                                         code=errors.HardwareFileError.exit_code)
    assert "longer than the file system allows" in fails("analyze", "--gpu", "h100", "--efficiency", long,
                                                         code=errors.EXIT_USAGE)
    for args, code in ((["model", "~nosuchuser_dlmcost/x.json"], errors.ConfigError.exit_code),
                       (["gpus", "--hardware", "~nosuchuser_dlmcost/x.yaml"], errors.HardwareFileError.exit_code),
                       (["analyze", "--efficiency", "~nosuchuser_dlmcost/x.yaml"], errors.EXIT_USAGE)):
        assert "home folder" in fails(*args, code=code)
    # a NUL cannot come through argv, but can through main() and the environment of a Python caller
    fails("model", "a\x00b.json", code=errors.UnknownModelError.exit_code)
    assert "NUL" in fails("gpus", "--hardware", "a\x00b", code=errors.HardwareFileError.exit_code)
    assert "NUL" in fails("analyze", "--efficiency", "a\x00b.yaml", code=errors.EXIT_USAGE)


def test_long_key_and_bom_are_fine(capsys, tmp_path):
    """A 5,000-character key is not 'nested too deeply'; a BOM is accepted in JSON as in YAML."""
    cfg = json.loads((CORPUS.parent.parent / "dlmcost" / "inputs" / "models" / "configs" / "Qwen__Qwen2.5-7B.json").read_text())
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(cfg).encode())
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbf" + json.dumps(cfg).encode())  # JSON is YAML
    cfg["k" * 5000] = 1  # (a YAML key is at most 1,024 characters: JSON only)
    (tmp_path / "long_key.json").write_text(json.dumps(cfg))
    for name in ("long_key.json", "bom.json", "bom.yaml"):
        assert main(["model", str(tmp_path / name), "--format", "json"]) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["n_layers"] == cfg["num_hidden_layers"]


def test_deep_nesting_message(fails, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"model_type": "qwen2", "x": ' + "[" * 500 + "]" * 500 + "}")
    assert "nested more than" in fails("model", path, code=errors.ConfigError.exit_code)


# terminal safety: control characters and rich markup from input


def _hostile_gpu_file(tmp_path, name: str, aliases: str = "[]") -> Path:
    text = (Path(__file__).resolve().parents[1] / "hardware" / "nvidia-h100-sxm.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(("name:", "aliases:"))]
    path = tmp_path / "gpu.yaml"
    path.write_text(f"name: {json.dumps(name)}\naliases: {aliases}\n" + "\n".join(lines) + "\n")
    return path


EVIL = "EVIL\x1b]0;pwned\x07\x1b[2J\x9b[/bold][red]x"


@pytest.mark.parametrize("args", [
    ["analyze", "--gpu", EVIL],
    ["analyze", "--gpu", "h100", "--revision", EVIL, "acme/" + EVIL],
    ["model", "acme/x" + EVIL],
    ["model", "x" + EVIL + ".json"],
    ["analyze", "--gpu", "h100", "--efficiency", EVIL + ".yaml"],
    ["gpus", "--hardware", EVIL + ".yaml"],
    ["analyze", "--gpu", "h100", "--scheme", EVIL],
    ["analyze", "--gpu", "h100", "--precision", EVIL],
    ["sweep", "--gpu", "h100", "--block", EVIL],
    ["serve", "--gpu", "h100", "-c", "1", "--kv-dtype", EVIL],
], ids=["gpu", "revision", "hub-id", "model-file", "efficiency-file", "hardware-file", "scheme", "precision",
        "sweep-list", "serve-kv-dtype"])
def test_control_characters_in_errors_are_escaped(capsys, args):
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc not in (0, errors.EXIT_INTERNAL), err
    assert not any(c in out + err for c in UNSAFE), repr(err)
    assert err.count("\n") == 1 and err.startswith("error: "), repr(err)
    assert "internal error" not in err


# The escape codes dlmcost itself writes on a colour terminal (output.py); nothing else may appear.
OWN_STYLES = ("\x1b[1;31m", "\x1b[1m", "\x1b[2m", "\x1b[33m", "\x1b[35m", "\x1b[36m", "\x1b[0m")


def _without_own_styles(text: str) -> str:
    for code in OWN_STYLES:
        text = text.replace(code, "")
    return text


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "table-in-colour"])
def test_control_characters_and_markup_in_names_from_files(capsys, monkeypatch, tmp_path, fmt):
    if fmt == "table-in-colour":  # the styled path: bold headers, coloured cells, dimmed notes
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.delenv("NO_COLOR", raising=False)
        monkeypatch.setenv("TERM", "xterm-256color")
        monkeypatch.setenv("COLUMNS", "80")  # narrow: columns dropped, text wrapped
        fmt = "table"
    gpu = _hostile_gpu_file(tmp_path, EVIL)
    model = tmp_path / "[bold]m\x1b]0;pwned\x07\x1b[2J\x9b[red].json"  # a file name cannot hold '/'  
    model.write_text((CORPUS.parent.parent / "dlmcost" / "inputs" / "models" / "configs" / "Qwen__Qwen2.5-7B.json").read_text())
    for args in (["gpus", "--hardware", gpu], ["analyze", model, "--hardware", gpu, "--gpu", "all", "--ops"],
                 ["model", model], ["sweep", "--model", model, "--hardware", gpu, "--gpu", "all", "--gen", "64"]):
        rc = main([str(a) for a in args] + ["--format", fmt])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert ("\x1b[1m" in out) == ("FORCE_COLOR" in os.environ)
        out = _without_own_styles(out)
        assert not any(c in out + err for c in UNSAFE), repr(out[:500])
        if fmt == "table":  # shown literally, not interpreted (nor crashing on the closing tag)
            # (a narrow table may wrap the long name anywhere, depending on the temporary folder's
            # length: look for it with the line breaks taken out)
            joined = re.sub(r"\n\s*", "", out)
            assert "EVIL\\x1b" in joined or "[bold]m" in joined, out[:300]
            if args[0] != "gpus":
                assert "[bold]m" in joined, out[:300]


# a window title, a bell, a right-to-left override, a script, and matplotlib mathtext that does not parse
EVIL_ID = "evil/\x1b]0;pwned\x07\u202e<script>alert(1)</script> $\\frac$"


@pytest.mark.parametrize("args", [["analyze", "--gpu", "h100", "--ops"], ["sweep", "--gpu", "h100", "--gen", "64"],
                                  ["plan", "--gpu", "h100", "--rate", "1"],
                                  ["serve", "--gpu", "h100", "--rate", "1,2", "--requests", "100"]], ids=lambda a: a[0])
def test_control_characters_and_markup_in_a_model_id_in_html(capsys, tmp_path, args):
    """The id reaches the page's title, heading, header, chart caption and the chart's own text
    (matplotlib repeats it in an SVG comment): everywhere escaped as on the terminal, and as text."""
    pytest.importorskip("matplotlib")
    text = (Path(__file__).resolve().parents[1] / "examples" / "tiny-dlm.yaml").read_text()
    model = tmp_path / "evil.yaml"
    model.write_text(re.sub(r"^id: .*$", lambda _: "id: " + json.dumps(EVIL_ID), text, flags=re.M))
    model_arg = ["--model", str(model)] if args[0] == "sweep" else [str(model)]
    rc = main([args[0], *model_arg, *args[1:], "--format", "html"])
    page, err = capsys.readouterr()
    assert rc == 0, err
    assert not any(c in page + err for c in (*UNSAFE, "\u202e")), repr(page[:300])
    assert page.count("<script") == 1 and "<script>\n(function () {" in page  # the page's own, sorting its tables
    escaped = "evil/\\x1b]0;pwned\\x07\\u202e&lt;script&gt;alert(1)&lt;/script&gt; $\\frac$"
    assert page.count(escaped) >= 3, page[:600]  # <title>, <h1>, <figcaption> at least


@pytest.mark.parametrize("args", [["analyze", "--gpu", "h100", "--ops"], ["sweep", "--gpu", "h100", "--gen", "64"],
                                  ["plan", "--gpu", "h100", "--rate", "1"],
                                  ["serve", "--gpu", "h100", "--rate", "1,2", "--requests", "100"]], ids=lambda a: a[0])
def test_markup_in_a_model_id_is_inert_in_markdown(capsys, tmp_path, args):
    """--format markdown: the id (with `<script>` and a `|`) reaches the header lines and the
    table cells as text: no HTML tag a Markdown viewer would run, no cell split by the `|`."""
    text = (Path(__file__).resolve().parents[1] / "examples" / "tiny-dlm.yaml").read_text()
    model = tmp_path / "evil.yaml"
    evil = EVIL_ID + " a|b [x](javascript:alert(1)) ![](https://tracker.example/p.png)"
    model.write_text(re.sub(r"^id: .*$", lambda _: "id: " + json.dumps(evil), text, flags=re.M))
    model_arg = ["--model", str(model)] if args[0] == "sweep" else [str(model)]
    rc = main([args[0], *model_arg, *args[1:], "--format", "markdown"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "<" not in out and ">" not in out, out[:600]  # dlmcost's own Markdown holds no HTML
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "](" not in out.replace("\\](", "")  # no link or image: every ']' before a '(' escaped
    assert not any(c in out for c in (*UNSAFE, "\u202e"))
    for table in re.findall(r"(?:^\|.*\|\n)+", out, flags=re.M):  # every row of a table has its header's cells
        rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in table.splitlines()]
        assert len({len(r) for r in rows}) == 1, table[:400]


def test_a_pipe_in_a_gpu_name_does_not_split_a_markdown_row(capsys, tmp_path):
    """A GPU from a user's hardware file named with `|` and a tag: its cell stays one cell, as text."""
    gpu = _hostile_gpu_file(tmp_path, "Evil|GPU <b>x</b>")
    assert main(["analyze", "--hardware", str(gpu), "--gpu", "all", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "Evil\\|GPU &lt;b&gt;x&lt;/b&gt;" in out and "<b>" not in out
    table = re.search(r"(?:^\|.*\|\n)+", out, flags=re.M).group()
    assert len({len(re.split(r"(?<!\\)\|", line)) for line in table.splitlines()}) == 1, table[:400]


def test_long_unknown_gpu_is_cut_in_the_message(fails):
    msg = fails("analyze", "--gpu", "a" * 120_000, code=errors.UnknownGPUError.exit_code)
    assert len(msg) < 2000 and "120,000 characters" in msg


def test_user_alias_shadowing_a_bundled_gpu_warns(capsys, tmp_path):
    gpu = _hostile_gpu_file(tmp_path, "My GPU", aliases="[h100, mine]")
    assert main(["analyze", "--hardware", str(gpu), "--gpu", "mine", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: ") and "h100" in err and "H100" in err, err


def test_sweep_grid_is_bounded_before_it_is_built(fails):
    values = ",".join(str(i) for i in range(1, 51))
    msg = fails("sweep", "--gpu", "all", "--prompt", values, "--batch", values, "--block", values,
                "--gen", "64,128", code=errors.EXIT_USAGE)
    assert "configurations" in msg and "200,000" in msg


@pytest.mark.parametrize("command", ["analyze", "sweep"])
def test_non_finite_results_are_refused_before_printing(fails, monkeypatch, command):
    """Hardware ranges keep the arithmetic finite; should anything still overflow, the CLI says so
    instead of printing `inf` or failing in the JSON encoder."""
    from dlmcost import api

    if command == "analyze":
        real = api.analyze

        def overflowing(*args, **kwargs):
            out = real(*args, **kwargs)
            first = out.results[0].model_copy(update={"time_s": float("inf")})
            return out.model_copy(update={"results": [first, *out.results[1:]]})

        monkeypatch.setattr(api, "analyze", overflowing)
    else:
        real = api.iter_sweep_columns

        def overflowing(*args, **kwargs):
            meta, chunks = real(*args, **kwargs)
            cols = [dict(chunk) for chunk in chunks]
            cols[0]["time_s"] = cols[0]["time_s"].copy()
            cols[0]["time_s"][0] = float("inf")
            return meta, iter(cols)

        monkeypatch.setattr(api, "iter_sweep_columns", overflowing)
    args = ["analyze", "--gpu", "h100"] if command == "analyze" else ["sweep", "--gpu", "h100"]
    for fmt in ("json", "table") if command == "analyze" else ("json", "table", "csv", "jsonl"):
        assert "overflow" in fails(*args, "--format", fmt, code=errors.WorkloadError.exit_code)


def test_cfg_inf_message(fails):
    assert "finite" in fails("analyze", "--cfg", "inf", code=errors.EXIT_USAGE)


# output errors


def test_stdout_on_a_full_disk():
    """stdout on /dev/full, in a process forked from tests/forkrun.py's server (its exit Python's own)."""
    with open("/dev/full", "wb") as full:
        done = forkrun.run({"gpus": forkrun.case(["gpus"], stdout=full.fileno())},
                           {k: v for k, v in os.environ.items() if k not in ("DLMCOST_HARDWARE", "COLUMNS")}
                           | {"HF_HUB_OFFLINE": "1"}, FAST_S)["gpus"]
    assert done is not None, f"still running after {FAST_S} s"
    code, _, stderr = done
    assert code == errors.EXIT_OUTPUT, stderr
    *warned, failed = stderr.splitlines()  # (gpus warns of a list price over a year old)
    assert all(w.startswith("warning: ") for w in warned)
    assert failed.startswith("error: ") and "No space left" in failed


def test_stdout_closed():
    p = subprocess.run(f"{sys.executable} -m dlmcost gpus >&-", shell=True, capture_output=False,
                       stderr=subprocess.PIPE, timeout=FAST_S, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert p.returncode == errors.EXIT_OUTPUT
    assert p.stderr.decode().startswith("error: ") and b"closed" in p.stderr


def test_stderr_closed_keeps_errors_off_stdout():
    p = subprocess.run(f"{sys.executable} -m dlmcost analyze --gpu nosuch 2>&-", shell=True, stdout=subprocess.PIPE,
                       timeout=FAST_S, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert p.returncode == errors.UnknownGPUError.exit_code
    assert p.stdout == b""


def test_broken_pipe_is_quiet():
    """`dlmcost gpus | head -c 10`, dlmcost forked from tests/forkrun.py's server (its exit Python's own)."""
    r, w = os.pipe()
    head = subprocess.Popen(["head", "-c", "10"], stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(r)
    try:
        done = forkrun.run({"gpus": forkrun.case(["gpus"], stdout=w)}, {**os.environ, "HF_HUB_OFFLINE": "1"}, FAST_S)
    finally:
        os.close(w)
    head_err = head.communicate(timeout=FAST_S)[1].decode()
    assert done["gpus"] is not None, f"still running after {FAST_S} s"
    stderr = done["gpus"][2] + head_err
    assert "internal error" not in stderr and "Traceback" not in stderr and "Exception" not in stderr


def test_non_utf8_stdout_gets_ascii():
    """The glyphs (·, ×, —, table rules) fall back to ASCII; the three commands run at once, forked
    from one interpreter started in that locale (its streams set up for it as a fresh run's are)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    cmds = [["analyze", "--gpu", "h100"], ["gpus"], ["analyze", "--gpu", "h100", "-f", "markdown"]]
    results = run_forked({" ".join(cmd): cmd for cmd in cmds}, env)
    for cmd in cmds:
        result = results[" ".join(cmd)]
        assert result is not None, f"{cmd}: still running after {FAST_S} s"
        rc, stdout, err = result
        out = stdout.encode("latin-1")  # the bytes written (the driver sends them as latin-1 text)
        assert rc == 0, (cmd, err)
        out.decode("ascii")  # nothing but ASCII
        assert b"H100" in out


def test_narrow_terminal_still_prints_the_rows(capsys, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    monkeypatch.setenv("COLUMNS", "10")
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["gpus"]) == 0
    assert "H100" in out.getvalue() and "B200" in out.getvalue()


# --- A user's stack file with the blocks the stack profiles gained (`eager:`, `prefill_chunk_tokens`,
# `held_out_error` as `calibrate` writes it), edited by someone hostile: `serve --stack FILE` refuses
# it at load, one line and exit 5, before anything is simulated.

CALIBRATED = dict(ratios=[0.9, 1.0, 1.1, 1.2, 0.95, 1.05], low=0.92, median=1.0, high=1.15, basis="held out",
                  published=dict(stack="vllm", low=0.8, median=1.0, high=1.4, numbers=20))


def _stack_file(tmp_path: Path, **over) -> Path:
    """The bundled vllm stack (it has all three blocks' neighbours: eager, a chunk) with `over` set."""
    import yaml

    from dlmcost.inputs.stacks import bundled_stack_dir

    data = yaml.safe_load((bundled_stack_dir() / "vllm.yaml").read_text())
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({**data, "name": "mine", **over}, allow_unicode=True))  # vllm's name is vllm's
    return path


def _band(**over) -> dict:
    published = {**CALIBRATED["published"], **over.pop("published", {})}
    return {**CALIBRATED, **over, "published": published}


@pytest.mark.parametrize("over, field", [
    # a published band of no width: "narrower by" divided by zero (internal error, exit 70)
    (dict(held_out_error=_band(published=dict(low=1.4, median=1.4))), "held_out_error.published"),
    # upside down: printed "wider by -0.161x"
    (dict(held_out_error=_band(published=dict(low=2.0, high=0.5))), "held_out_error.published"),
    # YAML's true and a quoted number were read as 1.0 and 0.9 (lax types)
    (dict(held_out_error=_band(low=True)), "held_out_error.low"),
    (dict(held_out_error=_band(low="0.9")), "held_out_error.low"),
    (dict(prefill_chunk_tokens=True), "prefill_chunk_tokens"),  # was a 1-token chunk
    (dict(prefill_chunk_tokens="8192"), "prefill_chunk_tokens"),
    (dict(eager=dict(us_per_layer="47", overlaps_gpu=False)), "eager.us_per_layer"),
    # the mark --eager gives: printed "(eager)" on a stack run with CUDA graphs
    (dict(name="mine (eager)"), "name"),
    # refused already (kept so they stay refused)
    (dict(held_out_error=_band(low=1.5, high=0.9)), "held_out_error"),
    (dict(held_out_error=_band(high=float("nan"))), "held_out_error.high"),
    (dict(held_out_error=_band(high=float("inf"))), "held_out_error.high"),
    (dict(held_out_error=_band(high=1e308)), "held_out_error.high"),
    (dict(held_out_error=_band(low=0)), "held_out_error.low"),
    (dict(held_out_error=_band(ratios=[-1.0])), "held_out_error.ratios"),
    (dict(held_out_error=_band(basis=5)), "held_out_error.basis"),
    (dict(eager=dict(us_per_layer=-1, overlaps_gpu=False)), "eager.us_per_layer"),
    (dict(eager=dict(us_per_layer=float("nan"), overlaps_gpu=False)), "eager.us_per_layer"),
    (dict(eager=dict(us_per_layer=47)), "eager.overlaps_gpu"),
    (dict(prefill_chunk_tokens=0), "prefill_chunk_tokens"),
    (dict(prefill_chunk_tokens=10**18), "prefill_chunk_tokens"),
    # up to 1,000,000 was read: --max-running stops at 4096, and serve built its tables a row per
    # batch size (1.3 GB) before refusing "concurrency ... got 2000001", exit 2
    (dict(max_running_requests=4097), "max_running_requests"),
    # a band's end of 5e-324 scaled a pass to 0 s: the simulation divided by it (internal error, exit 70)
    (dict(held_out_error=_band(ratios=[5e-324], low=5e-324, median=1.0)), "held_out_error.ratios.0"),
    (dict(held_out_error=_band(low=5e-324)), "held_out_error.low"),
    # a vendor or stack with no published band: the header said "vllm's published band on nosuch
    # parts" while the first-token band fell back to every vendor's (or to none)
    (dict(held_out_error=_band(published=dict(vendor="nosuch"))), "held_out_error.published"),
    (dict(held_out_error=_band(published=dict(stack="nosuch"))), "held_out_error.published"),
], ids=["published-no-width", "published-upside-down", "bool-ratio", "text-ratio", "bool-chunk", "text-chunk",
        "text-eager", "name-marked-eager", "low-above-high", "nan", "inf", "1e308", "zero", "negative-ratio",
        "basis-number", "negative-eager", "nan-eager", "eager-half", "zero-chunk", "huge-chunk",
        "running-over-4096", "ratio-denormal", "low-denormal", "unknown-vendor", "unknown-published-stack"])
def test_hostile_values_in_a_stack_files_new_blocks(fails, tmp_path, over, field):
    path = _stack_file(tmp_path, **over)
    message = fails("serve", "Qwen/Qwen2.5-7B", "--stack", path, "-c", "2", code=errors.HardwareFileError.exit_code)
    assert f"field '{field}" in message


@pytest.mark.parametrize("command", [["serve", "--rate", "2", "--requests", "100"],
                                     ["plan", "--rate", "1", "--tp", "1", "--precision", "bf16", "--requests", "100"]])
def test_a_stack_efficiency_that_overflows_a_pass_time_is_refused(fails, tmp_path, command, monkeypatch):
    """A GEMM efficiency of 5e-324 makes a pass take inf seconds: serve and plan simulated those
    passes for ever (a hang). The file is refused, naming the field (efficiencies are at least
    1e-12); below that floor, the simulation refuses the table, as analyze refuses an inf."""
    from dlmcost.inputs import stacks
    import yaml

    data = yaml.safe_load((stacks.bundled_stack_dir() / "vllm.yaml").read_text())
    data["gemm_efficiency"]["efficiency"] = [5e-324] * len(data["gemm_efficiency"]["rows"])
    path = _stack_file(tmp_path, gemm_efficiency=data["gemm_efficiency"])
    message = fails(*command, "--gpu", "h100", "--stack", path, code=errors.HardwareFileError.exit_code)
    assert "field 'gemm_efficiency.efficiency': Value error, every efficiency must be in [1e-12, 1]" in message
    monkeypatch.setattr(stacks, "MIN_EFFICIENCY", 0.0)  # the simulation's own guard, for what else may overflow
    message = fails(*command, "--gpu", "h100", "--stack", path, code=errors.WorkloadError.exit_code)
    assert message == "error: a pass time on H100 SXM came out as inf (an overflow): inputs at the edge of their ranges?"


def test_a_calibrated_bands_basis_is_shown_escaped_in_serve(capsys, tmp_path):
    """`basis` is printed in serve's header: control characters as escapes, markup as it is. (The
    stack's name may hold none: a file whose name does is refused, exit 5, one line.)"""
    path = _stack_file(tmp_path, held_out_error=_band(basis="\x1b]0;pwned\x07\x1b[2J [bold]x[/bold]\u202e"),
                       name="mine")
    rc = main(["serve", "Qwen/Qwen2.5-7B", "--stack", str(path), "-c", "2", "--requests", "100"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert not any(c in out + err for c in (*UNSAFE, "\u202e")), repr(out[:500])
    joined = re.sub(r"\n\s*", " ", out)
    assert "\\x1b]0;pwned\\x07\\x1b[2J [bold]x[/bold]\\u202e" in joined, out[:600]
    path = _stack_file(tmp_path, held_out_error=_band(), name="mine\x1b[31m")
    assert main(["serve", "Qwen/Qwen2.5-7B", "--stack", str(path), "-c", "2", "--requests", "100"]) == 5
    err = capsys.readouterr().err
    assert err.endswith("field 'name': Value error, holds a control character: a stack's name is one printable line\n")
    assert err.count("\n") == 1 and "\x1b" not in err


@pytest.mark.parametrize("stack", ["none (eager)", "hf-eager (eager)"])
def test_a_stack_name_marked_eager_is_read_as_eager(fails, stack):
    # `none (eager)` said "calibrate and measure start from a stack" (exit 5); it is --stack none --eager
    assert "--eager" in fails("analyze", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--stack", stack, code=errors.EXIT_USAGE)


def test_a_blank_task_is_refused_not_read_as_none(fails):
    # `--task ''` ran the model's default task on analyze and serve (plan refused it)
    for args in (["analyze", "--gpu", "h100"], ["serve", "-c", "2"], ["plan", "--rate", "1"]):
        assert "task" in fails(args[0], "inclusionAI/LLaDA2.1-mini", *args[1:], "--task", "", code=errors.EXIT_USAGE)


@pytest.mark.parametrize("floor, field", [
    ("{general: true}", "search.min_accuracy.general"),  # read as 1.0: "no deployment", exit 8
    ("{general: '0.6'}", "search.min_accuracy.general"),  # read as 0.6
    ("{'  ': 0.5}", "search.min_accuracy"),  # "no published accuracy on " (a blank task), exit 8
    ("{general: .nan}", "search.min_accuracy.general"),
])
def test_hostile_quality_floor_in_a_scenario(fails, tmp_path, floor, field):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"model: inclusionAI/LLaDA2.1-mini\ntraffic: {{rate: 1}}\nsearch: {{min_accuracy: {floor}}}\n")
    assert f"field '{field}" in fails("plan", "--scenario", scenario, code=errors.EXIT_USAGE)


@pytest.mark.parametrize("value", ["general=1.5", "general=-0.1", "general=nan", "general=inf", "general=",
                                   "=0.5", "general=0.5,general=0.6", "general", "general=0"])
def test_hostile_min_accuracy_option(fails, value):
    assert "--min-accuracy" in fails("serve", "inclusionAI/LLaDA2.1-mini", "-c", "2", "--min-accuracy", value,
                                     code=errors.EXIT_USAGE)


# --- A key written twice in one mapping: PyYAML kept the second without a word (a stack's `eager:`
# or a hardware file's `memory_bandwidth:` changed the answer silently). Every YAML file is refused
# with one line naming the file, the key and both lines, and the exit code of its kind of file.
# The corpus files (hardware/duplicate_key*.yaml, models/yaml_duplicate_key.yaml) also run through
# every command above; each would be a valid file with either of its two lines.


@pytest.mark.parametrize("name, message", [
    ("duplicate_key.yaml", "key 'bandwidth_tb_s' appears twice (lines 8 and 9)"),
    ("duplicate_key_nested.yaml", "key 'memory_bandwidth' appears twice (lines 16 and 17)"),  # in `efficiency:`
])
def test_a_hardware_file_with_a_key_written_twice(fails, name, message):
    path = CORPUS / "hardware" / name
    assert fails("gpus", "--hardware", path, code=errors.HardwareFileError.exit_code) == \
        f"error: hardware file {path}: {message}"


def test_a_model_file_with_a_key_written_twice(fails):
    path = CORPUS / "models" / "yaml_duplicate_key.yaml"
    assert fails("model", path, code=errors.ConfigError.exit_code) == \
        f"error: model file {path}: key 'n_layers' appears twice (lines 3 and 10)"


@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_stack_file_with_a_key_written_twice(fails, tmp_path, where):
    from dlmcost.inputs.stacks import bundled_stack_dir

    lines = (bundled_stack_dir() / "vllm.yaml").read_text().splitlines(keepends=True)
    eager = next(i for i, line in enumerate(lines) if line.startswith("eager:")) + 1  # its line, from 1
    assert lines[eager].startswith("  us_per_layer: 47")
    if where == "top":  # a second `eager:` block at the end: it was the one read, 0 µs a layer
        lines.append("eager: {us_per_layer: 0, overlaps_gpu: false}\n")
        key, first, again = "eager", eager, len(lines)
    else:  # `us_per_layer` again under the first one's
        lines.insert(eager + 1, "  us_per_layer: 0\n")
        key, first, again = "us_per_layer", eager + 1, eager + 2
    path = tmp_path / "mine.yaml"
    path.write_text("".join(lines))
    message = fails("serve", "Qwen/Qwen2.5-7B", "--stack", path, "-c", "2", code=errors.HardwareFileError.exit_code)
    assert message == f"error: stack file {path}: key '{key}' appears twice (lines {first} and {again})"


@pytest.mark.parametrize("text, message", [
    ("model: inclusionAI/LLaDA2.1-mini\ntraffic: {rate: 1}\nsimulation: {requests: 100}\ntraffic: {rate: 100}\n",
     "key 'traffic' appears twice (lines 2 and 4)"),
    # one line: the columns tell the two apart ("traffic: {" is 10 characters; "rate: 1, " 9 more)
    ("model: inclusionAI/LLaDA2.1-mini\ntraffic: {rate: 1, rate: 100}\nsimulation: {requests: 100}\n",
     "key 'rate' appears twice (line 2, columns 11 and 20)"),
], ids=["top", "nested-flow"])
def test_a_scenario_file_with_a_key_written_twice(fails, tmp_path, text, message):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert fails("plan", "--scenario", path, code=errors.EXIT_USAGE) == f"error: scenario file {path}: {message}"


def test_an_efficiency_file_with_a_key_written_twice(fails, tmp_path):
    path = tmp_path / "eff.yaml"
    path.write_text("memory_bandwidth: 0.8\ngemm: {bf16: 0.8}\noverhead_us_per_op: 3\nmemory_bandwidth: 0.08\n")
    assert fails("analyze", "--gpu", "h100", "--efficiency", path, code=errors.EXIT_USAGE) == \
        f"error: efficiency file {path}: key 'memory_bandwidth' appears twice (lines 1 and 4)"


def test_a_measurements_file_with_a_key_written_twice(fails, tmp_path):
    path = tmp_path / "points.yaml"
    path.write_text("points:\n- id: mine\n  model: Qwen/Qwen2.5-7B\n  gpu: a100\n"
                    "  workload: {scheme: ar, prompt: 128, gen: 256, batch: 1}\n"
                    "  measured:\n    tokens_per_s: 96.8\n    tokens_per_s: 9.68\n  source: mine\n")
    assert fails("calibrate", path, "-o", tmp_path / "out.yaml", code=errors.EXIT_USAGE) == \
        f"error: measurements file {path}: key 'tokens_per_s' appears twice (lines 7 and 8)"


def test_a_trace_time_with_no_such_utc_offset(fails, tmp_path):
    # `+99:99` was read as 99 h 99 min east of UTC (4 days off); a trace error, exit 16
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-01-01 00:00:00Z,10,5\n2024-01-01 00:00:01+99:99,10,5\n")
    assert fails("serve", "inclusionAI/LLaDA2.1-mini", "--trace", path, code=errors.TraceError.exit_code) == \
        f"error: trace {path} row 3, column TIMESTAMP: '2024-01-01 00:00:01+99:99' has no such UTC offset (-23:59 to +23:59)"


def test_a_scenario_cannot_print_the_first_word_of_a_file_it_names(fails, tmp_path):
    # `prompt: {file: PATH}` reads any file; the error quoted its first word, so a scenario naming
    # a Hugging Face token file printed the token (into a CI log). The value is named by position.
    token = tmp_path / "token"
    token.write_text("hf_NotARealTokenButSecret\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"model: inclusionAI/LLaDA2.1-mini\ntraffic: {{rate: 1, prompt: {{file: {token}}}}}\n")
    message = fails("plan", "--scenario", scenario, code=errors.EXIT_USAGE)
    assert "hf_" not in message and "Secret" not in message, message
    assert message.endswith(f"lengths file {token}, value 1 is not a number (a lengths file holds token counts "
                            "separated by whitespace or commas)"), message


@pytest.mark.parametrize("name, said", [
    ("mine (eager)", "--name: 'mine (eager)' ends in '(eager)'"),
    ("mine (eager) ", "--name: 'mine (eager) ' ends in '(eager)'"),
    ("x" * 101, "--name: a stack's name has 1 to 100 characters, got 101"),
    ("", "--name: a stack's name has 1 to 100 characters, got 0"),  # was read as the default, "calibrated"
    ("sglang", "--name: 'sglang' is a bundled stack's name"),  # its outputs printed "stack: sglang"
    # written into the file as it came: a terminal's colour code, a bell, a line break
    ("x\x1b[31mRED\x07", "--name: 'x\\x1b[31mRED\\x07' holds a control character"),
    ("a\nfixed_us_per_forward: 0", "--name: 'a\\nfixed_us_per_forward: 0' holds a control character"),
])
def test_calibrate_refuses_a_name_its_stack_file_could_not_carry_before_any_work(fails, tmp_path, name, said):
    # the name was checked when the fitted stack was built, after the fit: exit 5, "stack file
    # calibrated: field 'name'", for an option. It is an option's value (exit 2), checked first:
    # here before the measurements file is even read.
    message = fails("calibrate", tmp_path / "none.yaml", "-o", tmp_path / "out.yaml", "--name", name,
                    code=errors.EXIT_USAGE)
    assert message.startswith(f"error: {said}"), message
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize("args", [
    ["serve", "inclusionAI/LLaDA2.1-mini", "-c", "2", "--min-accuracy", "gms8k=0.8"],
    ["plan", "inclusionAI/LLaDA2.1-mini", "--rate", "1", "--min-accuracy", "gms8k=0.8"],
    ["plan", "inclusionAI/LLaDA2.1-mini,GSAI-ML/LLaDA-8B-Instruct", "--rate", "1", "--min-accuracy", "gms8k=0.8"],
], ids=["serve", "plan", "plan-side-by-side"])
def test_a_quality_floor_on_a_task_no_model_published_is_a_usage_error(fails, args):
    # a typo in the task was exit 8, "no published decoding meets --min-accuracy": the code CI reads
    # as "ran fine, no deployment meets the targets"
    message = fails(*args, code=errors.EXIT_USAGE)
    assert message.startswith("error: --min-accuracy: no published accuracy on 'gms8k' for inclusionAI/LLaDA2.1-mini"), message
    assert "published for: " in message and ", general, " in message, message


def test_a_quality_floor_on_a_published_task_that_none_reaches_is_still_exit_8(capsys):
    # the task is known (GSM8K: LLaDA's report), the floor out of reach: the run's answer, not a typo
    rc = main(["serve", "GSAI-ML/LLaDA-8B-Instruct", "-c", "2", "--min-accuracy", "gsm8k=0.99"])
    err = capsys.readouterr().err
    assert rc == errors.EXIT_REQUIREMENT, err
    assert err.startswith("error: no published decoding meets --min-accuracy: ") and "the best published: 0.795" in err


# --- Large but valid: the work a run's options ask for is bounded before any is done -------------


@pytest.mark.parametrize("args, said", [
    # ten rates of a million requests, each simulated thrice (error band): 132 s; a longer list, hours
    (["serve", "--rate", "1,2,3,4,5,6,7,8,9,10", "--requests", "1000000"],
     "this would simulate 31,000,000 requests (1 deployment(s) x 10 load point(s) of 1,000,000 requests"),
    # the default search (432 candidates) at a million requests: some 20 minutes
    (["plan", "--rate", "5", "--p95", "10", "--requests", "1000000"],
     "this would simulate 432,000,000 requests (432 candidate deployments x 1,000,000 simulated requests)"),
], ids=["serve-rates", "plan-default-search"])
def test_a_run_that_would_simulate_too_many_requests_is_refused_first(fails, args, said):
    assert fails(*args, code=errors.EXIT_USAGE).startswith(f"error: {said}")


def test_serves_simulated_requests_are_counted_from_its_options():
    from dlmcost.serving.deployment import simulated_requests
    from dlmcost.serving.loads import BatchJob, ClosedLoop, OpenLoop

    loads = [OpenLoop(1.0), ClosedLoop(100_000), BatchJob(5000, 8)]
    # by hand: each point three times (2,000; a closed loop's 4 per user, 400,000; the job's 5,000),
    # the saturation run's 2,000, and --max-rate's 16 rates (14 halvings, the top and the reason) of 2,000
    assert simulated_requests(loads, 2000) == 3 * (2000 + 400_000 + 5000) + 2000
    assert simulated_requests(loads, 2000, find_max_rate=True) == 3 * 407_000 + 2000 + 16 * 2000


def test_serve_refuses_more_load_points_than_it_can_simulate_in_minutes(fails):
    # each point costs some 10 ms at 100 requests: 20,000 of them ran 230 s, 64 deployments of it hours
    rates = ",".join(["1"] * 5001)
    assert fails("serve", "--rate", rates, "--gpu", "h100,h200", "--requests", "100", code=errors.EXIT_USAGE) == \
        ("error: serve: 2 deployment(s) x 5,001 load points; at most 10,000 in one call (each takes some 10 ms "
         "however few its requests): fewer load points or deployments")


PLAN_ONE = ["plan", "--rate", "1", "--p95", "10", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--requests", "100"]


@pytest.mark.parametrize("prices, said", [
    (["h100=2", "h100=300"], "--price: 'h100' is given twice"),
    (["h100=2", "h100sxm=300"], "--price: 'h100' and 'h100sxm' name one GPU (H100 SXM)"),
])
def test_a_price_given_twice_is_refused(fails, prices, said):
    # the last one was taken without a word (h100 at $300/h, the $2 forgotten)
    args = [a for p in prices for a in ("--price", p)]
    assert fails(*PLAN_ONE, *args, code=errors.EXIT_USAGE).startswith(f"error: {said}")


def test_a_scenarios_price_given_twice_is_refused(fails, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("traffic: {rate: 1}\nprices: {h100: 2, H100 SXM: 300}\n")
    assert fails(*PLAN_ONE, "--scenario", scenario, code=errors.EXIT_USAGE) == \
        "error: prices: 'h100' and 'H100 SXM' name one GPU (H100 SXM): give its price once"


def test_a_price_option_replaces_the_scenarios_price_of_the_same_gpu_by_another_name(capsys, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("traffic: {rate: 1}\nprices: {h100: 2}\n")
    assert main([*PLAN_ONE, "--scenario", str(scenario), "--price", "h100sxm=3", "-f", "json"]) == 0
    assert {d["price_per_gpu_hour"] for d in json.loads(capsys.readouterr().out)["deployments"]} == {3.0}


@pytest.mark.parametrize("args, rate", [
    # 60,000 tokens a request on one H100 saturates at 0.008 req/s: the 14th halving tried 5e-7
    (["Qwen/Qwen3-8B", "--prompt", "30000", "--answer", "30000", "--p95", "1"], None),
    # 100,000 replicas of one-token requests saturate at 2.5e9 req/s, which was tried first
    (["Qwen/Qwen3-8B", "--gpu", "b300", "--replicas", "100000", "--prompt", "1", "--answer", "1", "--p95", "100"], 1e7),
], ids=["below-the-lowest-rate", "above-the-highest-rate"])
def test_max_rate_tries_only_rates_in_the_rate_range(capsys, args, rate):
    # each was exit 2, "the request rate must be in 0.000001..10,000,000 requests/s, got 5.1e-07":
    # a rate the user never gave. Now the answer: none within the targets (exit 8), or the top of the range.
    rc = main(["serve", *args, "--max-rate", "--requests", "100", "-f", "json"])
    out, err = capsys.readouterr()
    assert rc == (0 if rate else errors.EXIT_REQUIREMENT), err
    assert "must be in" not in err
    assert json.loads(out)["deployments"][0]["max_rate"]["rate"] == rate


@pytest.mark.parametrize("kv, said", [
    ("fp7", "unknown K/V dtype 'fp7'; choose one of: bf16"),
    ("1", "field 'search.kv_dtype'"),  # a number where a name belongs: a typo, refused by the strict scenario
])
def test_a_scenarios_kv_dtype_is_checked(fails, tmp_path, kv, said):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"traffic: {{rate: 1}}\nsearch: {{kv_dtype: {kv}}}\n")
    assert said in fails(*PLAN_ONE, "--scenario", scenario, code=errors.EXIT_USAGE)


@pytest.mark.parametrize("field, value, said", [
    ("mem_fraction", "1.2", "search.mem_fraction: a share in (0, 1]"),
    ("mem_fraction", "0", "search.mem_fraction: a share in (0, 1]"),
    ("mem_fraction", "true", "field 'search.mem_fraction'"),  # a flag where a share belongs: refused, not read as 1
    ("mem_fraction", '"0.9"', "field 'search.mem_fraction'"),  # quoted: a typo, refused by the strict scenario
    ("recv_interval", "0", "search.recv_interval: decode iterations between the scheduler's receives"),
    ("recv_interval", "1001", "search.recv_interval: decode iterations between the scheduler's receives"),
    ("recv_interval", "true", "field 'search.recv_interval'"),  # a flag where a count belongs
    ("recv_interval", '"3"', "field 'search.recv_interval'"),
])
def test_a_scenarios_memory_share_and_receive_interval_are_checked(fails, tmp_path, field, value, said):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"traffic: {{rate: 1}}\nsearch: {{{field}: {value}}}\n")
    assert said in fails(*PLAN_ONE, "--scenario", scenario, code=errors.EXIT_USAGE)


TRACE = Path(__file__).resolve().parents[1] / "examples" / "traces" / "azure-conv.csv"
SERVE_ONE = ["serve", "Qwen/Qwen2.5-7B", "--requests", "100"]


@pytest.mark.parametrize("args, said", [
    (["--trace", TRACE, "--prompt", "5"], "a trace brings its own prompt and answer lengths"),
    (["--trace", TRACE, "--answer", "7"], "a trace brings its own prompt and answer lengths"),
    (["-c", "4", "--time-scale", "2"], "--time-scale goes with --trace FILE"),
    (["-c", "4", "--sample", "5"], "--sample goes with --trace FILE"),
    (["-c", "4", "--trace-format", "azure"], "--trace-format goes with --trace FILE"),
    (["--rate", "2", "--think", "2"], "--think goes with --concurrency"),
    (["--job", "5", "--think", "2"], "--think goes with --concurrency"),
    (["--trace", TRACE, "--think", "2"], "--think goes with --concurrency"),
    (["--rate", "2", "--cv", "3"], "--cv goes with --arrival gamma (the poisson arrivals' gaps take none), got 3"),
    (["-c", "4", "--cv", "3"], "--cv goes with --arrival gamma"),
    (["-c", "4", "--arrival", "gamma"], "--arrival goes with --rate or --max-rate"),
    (["--trace", TRACE, "--arrival", "constant"], "--arrival goes with --rate or --max-rate"),
])
def test_a_serve_option_of_another_load_is_refused_not_ignored(fails, args, said):
    # each ran with the option ignored without a word: the trace's own lengths, Poisson gaps, no think
    # time, all 300 rows of no trace at all, as if the option had not been given
    assert fails(*SERVE_ONE, *args, code=errors.EXIT_USAGE).startswith(f"error: {said}")


def test_open_loop_arrivals_take_a_cv_only_when_gamma():
    from dlmcost.serving.loads import OpenLoop

    assert OpenLoop(2.0, "gamma", 3.0).cv == 3.0 and OpenLoop(2.0, "constant").cv == 1.0
    with pytest.raises(errors.UsageError, match="^--cv goes with --arrival gamma"):
        OpenLoop(2.0, "constant", 3.0)


@pytest.mark.parametrize("scheme", [["--scheme", "ar"], ["--scheme", "draft-verify", "--tpf", "3"]])
def test_a_tpf_spread_on_a_token_streaming_decoding_is_not_claimed(capsys, scheme):
    # AR commits one token a pass and draft-verify's requests run their answers' verify passes: no blocks to
    # spread passes over. The numbers were the run's without it, while the header said "ar, spread 2" and the
    # record tpf_spread 2.0; now 0, with a warning
    runs = []
    for extra in ([], ["--tpf-spread", "2"]):
        assert main([*SERVE_ONE, *scheme, "-c", "8", *extra, "-f", "json"]) == 0
        out, err = capsys.readouterr()
        runs.append((json.loads(out)["deployments"][0], err))
    (plain, _), (spread, err) = runs
    assert spread["deployment"]["tpf_spread"] == 0.0 and spread["points"] == plain["points"]
    assert err.endswith("warning: --tpf-spread does nothing here: a decoding that streams tokens (AR, draft-verify) "
                        "runs its answer's passes with no blocks to spread them over\n")
    assert err.count("--tpf-spread") == 1


@pytest.mark.parametrize("args, unread", [
    (["Qwen/Qwen2.5-7B", "--task", "gsm8k"], True),  # autoregressive: one token a pass whatever the task
    (["GSAI-ML/LLaDA-8B-Instruct", "--task", "gsm8k", "--tpf", "2"], True),  # --tpf set them
    (["GSAI-ML/LLaDA-8B-Instruct", "--task", "GSM8K"], False),  # its published tokens per forward on gsm8k
])
def test_a_task_no_deployment_reads_is_said(capsys, args, unread):
    # --task (or a typo of it) on a run that never reads it was taken without a word
    assert main(["serve", *args, "-c", "4", "--requests", "100", "-f", "json"]) == 0
    err = capsys.readouterr().err
    said = "does nothing here: no deployment takes its tokens per forward from a published decoding on it"
    assert (said in err) == unread, err


@pytest.mark.parametrize("command", [
    [*SERVE_ONE, "-c", "1", "--gpu", "h100,h200"],
    ["plan", "Qwen/Qwen2.5-7B", "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--requests", "100"],
], ids=["serve", "plan"])
def test_requests_beyond_the_trained_context_are_said(capsys, command):
    # analyze warned of a workload past the model's context; serve and plan costed such requests
    # without a word. Qwen2.5-7B's config: max_position_embeddings 131,072; 131,000 + 256 is past it
    rc = main([*command, "--prompt", "131000", "--answer", "256", "-f", "json"])
    err = capsys.readouterr().err
    assert rc in (0, errors.EXIT_REQUIREMENT), err
    assert err.count("warning: 100 of 100 requests exceed Qwen/Qwen2.5-7B's trained context of 131,072 tokens "
                     "(prompt + answer up to 131,256); the numbers assume the model could run them") == 1, err
    assert main([*command, "--prompt", "130816", "--answer", "256", "-f", "json"]) in (0, errors.EXIT_REQUIREMENT)
    assert "trained context" not in capsys.readouterr().err  # 131,072 exactly: within it


def test_the_context_warning_counts_the_requests_past_it():
    import warnings

    from dlmcost.serving.traffic import warn_beyond_context

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warn_beyond_context("m", 100, [10, 60, 99, 0], [90, 41, 2, 1])  # totals 100, 101, 101, 1: two past 100
        warn_beyond_context("m", None, [10**6], [1])  # no context known: nothing to say
    assert [str(w.message) for w in seen] == [
        "2 of 4 requests exceed m's trained context of 100 tokens (prompt + answer up to 101); the numbers assume "
        "the model could run them"]


@pytest.mark.parametrize("command", [["serve", "", "-c", "4", "--requests", "100"],
                                     ["plan", "", "--rate", "1", "--gpu", "h100", "--requests", "100"],
                                     ["plan", ",", "--rate", "1", "--gpu", "h100", "--requests", "100"]])
def test_an_empty_model_name_is_refused_not_replaced_by_the_default(fails, command):
    # `dlmcost serve "$MODEL"` with MODEL unset ran LLaDA-8B-Instruct (plan: the scenario's model)
    # without a word, as if no model had been named; analyze refuses it
    assert fails(*command, code=errors.EXIT_USAGE) == "error: --model needs at least one value"


@pytest.mark.parametrize("model", ["", " ", ",", []])
def test_plans_empty_model_name_through_the_api_is_refused(model):
    # the command line refused it; the API and a scenario's `model: ''` planned LLaDA-8B-Instruct instead
    with pytest.raises(errors.UsageError, match="^model: an empty model name"):
        api.run_plan(None, {"traffic": {"rate": 1}}, model=model)


def test_a_scenarios_empty_model_name_is_refused(fails, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: ''\ntraffic: {rate: 1}\n")
    assert fails("plan", "--scenario", scenario, code=errors.EXIT_USAGE).startswith("error: model: an empty model name")


@pytest.mark.parametrize("field", ["tp", "precisions", "max_batch"])
def test_a_scenarios_empty_search_list_is_refused_not_read_as_the_defaults(fails, tmp_path, field):
    # `gpus: []` and `kv_dtype: []` were refused, but `tp: []` searched TP 1, 2, 4 and 8, exit 0
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"traffic: {{rate: 1}}\nsearch: {{gpus: [h100], {field}: []}}\n")
    assert f"search.{field}" in fails("plan", "--requests", "100", "--scenario", scenario, code=errors.EXIT_USAGE)


def test_a_scenarios_empty_scheme_is_refused_not_read_as_the_models_own(fails, tmp_path):
    # --scheme '' is refused; the same blank in a scenario's decoding once ran the model's default scheme
    scenario = tmp_path / "s.yaml"
    scenario.write_text("traffic: {rate: 1}\nsearch: {decoding: [{scheme: ''}]}\n")
    assert "search.decoding.0.scheme" in fails(*PLAN_ONE, "--scenario", scenario, code=errors.EXIT_USAGE)


@pytest.mark.parametrize("kv, said", [(8, "--kv-dtype: a K/V cache number format's name, got 8"),
                                      ("fp7", "unknown K/V dtype 'fp7'")])
def test_a_serve_setups_kv_dtype_is_checked_through_the_api(kv, said):
    with pytest.raises(errors.UsageError, match=f"^{re.escape(said)}"):
        api.ServeSetup(kv_dtype=kv)
    assert api.ServeSetup(kv_dtype=None).kv_dtype == "bf16"  # not given: the engines' default


@pytest.mark.parametrize("kw, said", [
    (dict(arrival="constant", cv=5.0), "--cv goes with --arrival gamma"),
    (dict(arrival="bogus"), "arrivals: choose one of poisson, constant, gamma, got 'bogus'"),
    (dict(arrival="constant"), "--arrival goes with --rate or --max-rate"),
])
def test_api_serves_arrivals_without_an_open_loop_are_refused(kw, said):
    # a closed loop takes no arrival process: api.serve ran it with the option ignored
    from dlmcost.serving.loads import ClosedLoop

    with pytest.raises(errors.UsageError, match=f"^{re.escape(said)}"):
        api.serve("Qwen/Qwen2.5-7B", [ClosedLoop(4)], requests=100, **kw)


def test_plans_task_that_nothing_reads_warns(capsys):
    # an autoregressive model's plan, or one whose --tpf is given, takes no tokens per forward from --task
    assert main(["plan", "Qwen/Qwen2.5-7B", "--rate", "1", "--gpu", "h100", "--tp", "1", "--requests", "100",
                 "--task", "gsm8k", "-f", "json"]) == 0
    err = capsys.readouterr().err
    assert "warning: --task gsm8k does nothing here" in err and err.count("--task") == 1


@pytest.mark.parametrize("prompt", ["0", "1"])
def test_serve_preempting_requests_of_tiny_prompts_and_long_answers(capsys, prompt):
    # K/V on demand where memory binds: a prompt of no tokens divided by zero at the first
    # preemption (internal error), and a one-token prompt's recompute scaled a negative lift
    # (its first pass cheaper than a pass over the long answer) into negative times to a first token
    assert main(["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "-c", "4", "--requests", "100", "--answer", "50000",
                 "--prompt", prompt, "--mem-fraction", "0.25", "-f", "json"]) == 0
    point = json.loads(capsys.readouterr().out)["deployments"][0]["points"][0]
    assert point["preemptions"] > 0
    assert min(point["ttfb_s"].values()) > 0


def _every_preemption(monkeypatch) -> list[int]:
    """Each simulation's preemptions, read off its result (`SimResult.preempted`) as it returns:
    a count kept apart from the command's own (simulate/work.py)."""
    from dlmcost.serving import behaviour

    counts, simulate = [], behaviour.simulate

    def counted(*args, **kwargs):
        r = simulate(*args, **kwargs)
        counts.append(0 if r.preempted is None else int(r.preempted.sum()))
        return r

    monkeypatch.setattr(behaviour, "simulate", counted)
    return counts


# a memory that holds two of these requests at their final lengths (the warning's "about 2"), and
# users that ask for four: every simulation preempts, two deployments' or two models' alike
SERVE_PREEMPTING = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100,a100", "-c", "4", "--max-running", "4", "--requests",
                    "100", "--answer", "50000", "--prompt", "1", "--mem-fraction", "0.25"]
PLAN_PREEMPTING = ["plan", "Qwen/Qwen2.5-7B,Qwen/Qwen3-8B", "--rate", "1", "--answer", "30000", "--mem-fraction",
                   "0.3", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--requests", "100"]


@pytest.mark.parametrize("args", [SERVE_PREEMPTING, PLAN_PREEMPTING], ids=["serve", "plan"])
def test_a_command_that_preempts_past_its_limit_ends_with_one_line(run, fails, monkeypatch, args):
    # a serve of 100,000 requests at 30% of an H100 preempted 2.9 million times: no count of the options
    # bounds that work, so the command counts its preemptions as they come, over all its simulations
    from dlmcost.analysis import limits

    counts = _every_preemption(monkeypatch)
    rc, out, err = run(*args)
    assert rc == 0
    total = sum(counts)
    # shared: every one of its simulations (each load point's three, saturation; every candidate's
    # searches and band ends; both deployments, both models) stays under the total, which passes it
    assert 0 < max(counts) < total - 1 and sum(1 for c in counts if c) >= 4
    monkeypatch.setattr(limits, "MAX_PREEMPTIONS", total)  # at the limit: the same answer, byte for byte
    assert run(*args) == (0, out, err)
    monkeypatch.setattr(limits, "MAX_PREEMPTIONS", total - 1)
    assert fails(*args, code=errors.EXIT_USAGE) == (
        f"error: this call's simulations preempted more than {total - 1:,} running requests, at most {total - 1:,} "
        "in one call: a replica's memory holds about 2 of these requests at their final lengths, so requests are "
        "preempted and recomputed over and over (K/V is allocated as tokens come); give it more memory "
        "(--mem-fraction, a larger GPU, an fp8 K/V cache, more TP), shorter answers, or fewer --requests")


@pytest.mark.parametrize("command", [["calibrate", "examples/measurements.yaml", "-o"],
                                     ["measure", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--out"],
                                     ["measure", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--profile-out"]])
def test_an_existing_file_dlmcost_did_not_write_is_not_replaced(fails, tmp_path, command):
    # `calibrate ... -o /etc/passwd`, run as root, replaced the file with a stack profile
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0:root:/root:/bin/bash\n")
    message = fails(*command, victim, code=errors.EXIT_USAGE)
    assert "it exists and dlmcost did not write it" in message
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n"
    ours = tmp_path / "ours.yaml"  # one it wrote, or an empty one, is replaced as before
    ours.write_text("# Written by `dlmcost calibrate`; a stack profile for --stack.\nname: x\n")
    from dlmcost.cli.output_paths import check_output_file
    check_output_file(str(ours), "--out", own_only=True)
    (tmp_path / "empty").touch()
    check_output_file(str(tmp_path / "empty"), "--out", own_only=True)


def test_calibrate_and_measure_do_not_write_over_the_measurements(fails, tmp_path):
    # `calibrate points.yaml -o points.yaml` (a file `measure` wrote, so dlmcost's own) replaced the
    # measurements with the fitted stack, and `measure --out f --profile-out f` the same in one run
    points = tmp_path / "points.yaml"
    text = "# Written by `dlmcost measure`.\npoints: []\n"
    points.write_text(text)
    (tmp_path / "link.yaml").symlink_to(points)
    for out in (points, tmp_path / "link.yaml", tmp_path / "." / "points.yaml"):
        assert "is the measurements file it reads" in fails("calibrate", points, "-o", out, code=errors.EXIT_USAGE)
    assert points.read_text() == text
    new = tmp_path / "new.yaml"  # neither there yet: the same name is refused before any timing
    (tmp_path / "sub").mkdir()
    message = fails("measure", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--out", new, "--profile-out",
                    tmp_path / "sub" / ".." / "new.yaml", code=errors.EXIT_USAGE)
    assert "is the --out file the measurements go to" in message and not new.exists()


def test_plan_on_a_stack_that_runs_on_no_priced_part_says_so(fails, tmp_path):
    # it said "no GPU with a price to plan on; give --price NAME=USD", which could not help
    stack = tmp_path / "elsewhere.yaml"
    stack.write_text("extends: sglang\nname: elsewhere\nruns_on: [nonesuch]\nsources: {runs_on: a test}\n")
    message = fails("plan", "--rate", "1", "--stack", stack, code=errors.EXIT_USAGE)
    assert message == ("error: the elsewhere stack runs on none of the priced GPUs (its runs_on: nonesuch): "
                       "name the GPUs to plan on with --gpu")


def test_a_price_under_a_cent_an_hour_is_refused_wherever_it_is_given(tmp_path, capsys):
    """1e-300 $/h printed every $/Mtok as 0.00: plan's option, the scenario's prices, serve's --price
    (which took (0, 1000]) and a hardware file take the same range, a cent to $1,000 a GPU-hour."""
    from dlmcost.cli import main

    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: GSAI-ML/LLaDA-8B-Instruct\ntraffic: {rate: 1}\nsearch: {gpus: [h100]}\n"
                        "prices: {h100: 1.0e-300}\n")
    for args in (["plan", "GSAI-ML/LLaDA-8B-Instruct", "--rate", "1", "--gpu", "h100", "--price", "h100=1e-300"],
                 ["plan", "-s", str(scenario)],
                 ["serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "-c", "1", "--price", "1e-300"],
                 ["serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "-c", "1", "--price", "1000.5"]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert "0.01" in err and "1000" in err and "\n" not in err
    assert main(["plan", "GSAI-ML/LLaDA-8B-Instruct", "--rate", "1", "--gpu", "h100", "--price", "h100=0.01",
                 "-f", "json"]) == 0


@pytest.mark.parametrize("command", [["serve", "Qwen/Qwen3-8B", "--gpu", "h100", "-c", "8"],
                                     ["plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--tp", "1", "--rate", "1", "--p95", "100"]])
def test_an_answer_of_no_tokens_is_refused(capsys, command):
    """serve and plan costed --answer 0 as one token without a word (the same table as --answer 1)."""
    assert main([*command, "--requests", "100", "--answer", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "error: answer lengths: lengths must be whole token counts in 1..1,000,000, got 0\n"


@pytest.mark.parametrize("command", [["analyze", "Qwen/Qwen3-8B", "--gpu", "h100"], ["sweep", "--gpu", "h100"]])
def test_analyze_and_sweep_say_they_take_one_kv_dtype(capsys, command):
    """--kv-dtype fp8,bf16 (a list, as serve and plan compare) was 'unknown K/V dtype 'fp8,bf16''
    though each name is known: analyze and sweep cost one K/V format, and now say so."""
    assert main([*command, "--kv-dtype", "fp8,bf16"]) == 2
    assert capsys.readouterr().err == ("error: one K/V dtype here, got 'fp8,bf16'; choose one of: bf16, fp16, fp8, "
                                       "int8, fp4, int4 (serve and plan compare a list)\n")
