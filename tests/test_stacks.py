"""Software-stack profiles: the bundled files, the loader's refusals, and the time rule
(stack_time) against hand-computed cases."""

import math

import numpy as np
import pytest

from dlmcost.engine import stack_time as st
from dlmcost.inputs.stacks import DEFAULT_STACK, StackFileError, bundled_stack_names, load_stack, validate_stack

BASE = dict(
    name="t", host=dict(us_per_layer=100, overlaps_gpu=True, fixed_us_per_forward=50),
    gemm_efficiency=dict(rows=[1, 100, 10000], efficiency=[0.2, 0.5, 1.0]),
    attention_efficiency=0.5, elementwise_bytes_factor=2.0, sampler_logits_bytes=10,
    sources={k: "hand" for k in ("host", "fixed", "gemm_efficiency", "attention_efficiency",
                                 "elementwise_bytes_factor", "sampler_logits_bytes")},
)


def stack(**over):
    data = {**BASE, **over}
    return validate_stack(data)


def test_bundled_stacks_load_and_default_exists():
    names = bundled_stack_names()
    assert {"hf-eager", "compiled", "sglang"} <= set(names)
    assert DEFAULT_STACK in names
    for n in names:
        s = load_stack(n)
        assert s.name == n
    assert load_stack(None).name == DEFAULT_STACK


def test_gemm_curve_interpolates_in_log_rows_and_holds_ends():
    s = stack()
    # 10 rows is halfway between 1 and 100 in log: 0.2 + 0.5 * (0.5 - 0.2) = 0.35
    # 1000 rows halfway between 100 and 10000: 0.75; below 1 and above 10000 the ends hold
    got = st.gemm_factor([0.5, 1, 10, 1000, 1e6], s)
    assert np.allclose(got, [0.2, 0.2, 0.35, 0.75, 1.0])


def test_factors_hand_computed():
    s = stack()
    # attention: the stack's efficiency; elementwise: 1 on compute, its byte factor on traffic
    assert np.allclose(st.compute_factor("linear", [10, 1000], s), [0.35, 0.75])
    assert np.allclose(st.compute_factor("lm_head", 10, s), 0.35)
    assert np.allclose(st.compute_factor("attention", [10, 1000], s), [0.5, 0.5])
    assert np.allclose(st.compute_factor("other", 10, s), 1.0)
    # arrays in, arrays out: one factor per configuration, whatever the op's kind
    rows = np.array([[10.0, 1000.0, 5.0]])
    for kind in ("linear", "lm_head", "attention", "other"):
        assert st.compute_factor(kind, rows, s).shape == rows.shape
    assert st.traffic_factor("other", s) == 2.0 and st.traffic_factor("linear", s) == 1.0


def test_host_wait_overlap_rule():
    s = stack()
    # host 12 layers * 100 us = 1.2 ms; GPU 1 ms: overlapped, the GPU waits 0.2 ms (pass = max = 1.2 ms)
    host = st.host_time(12, s)
    assert math.isclose(float(host), 1.2e-3)
    assert np.allclose(st.host_wait([1e-3, 2e-3], host, s), [0.2e-3, 0.0])
    serial = stack(host=dict(us_per_layer=100, overlaps_gpu=False, fixed_us_per_forward=50))
    assert np.allclose(st.host_wait([1e-3, 2e-3], host, serial), [1.2e-3, 1.2e-3])
    assert math.isclose(st.fixed_time(s), 50e-6)


def test_sampler_time():
    # 4 logits x 10 bytes / (10 B/s * 0.5) = 8 s
    assert math.isclose(float(st.sampler_time(4, 10.0, 0.5, stack())), 8.0)


@pytest.mark.parametrize("text, needle", [
    ("[1, 2", "not valid YAML"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("!!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ("name: x\n", "field"),
])
def test_hostile_or_bad_files_are_one_line_errors(tmp_path, text, needle):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(StackFileError) as exc:
        load_stack(str(f))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_oversized_file_refused_before_parsing(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("a: " + "x" * (300 * 1024))
    with pytest.raises(StackFileError, match="the limit is 256 KiB"):
        load_stack(str(f))


@pytest.mark.parametrize("over, field", [
    (dict(attention_efficiency=1.5), "attention_efficiency"),
    (dict(gemm_efficiency=dict(rows=[10, 5], efficiency=[0.5, 0.6])), "rows"),
    (dict(gemm_efficiency=dict(rows=[1, 10], efficiency=[0.5])), "gemm_efficiency"),
    (dict(sources={"host": "x"}), "sources"),
    (dict(elementwise_bytes_factor=float("nan")), "elementwise_bytes_factor"),
])
def test_validation_rejects_out_of_range(over, field):
    with pytest.raises(StackFileError, match=field):
        stack(**over)


def test_unknown_stack_name_lists_choices():
    with pytest.raises(StackFileError, match="hf-eager"):
        load_stack("no-such-stack\x1b[31m")


def test_the_stacks_command_lists_the_registry_with_its_fits_and_bands(capsys, monkeypatch):
    """`dlmcost stacks`: every bundled stack, which decodings default to it, what was fitted on
    which validation points (the files' `fitted`), and its error band (error_bands.json)."""
    import json as _json

    from dlmcost.cli import main
    from dlmcost.inputs import error_bands
    from dlmcost.inputs.stacks import DEFAULT_STACKS, bundled_stack_names, load_stack

    assert main(["stacks", "-f", "json"]) == 0
    entries = {e["name"]: e for e in _json.loads(capsys.readouterr().out)}
    assert set(entries) == set(bundled_stack_names())
    bands = _json.loads(error_bands.BANDS_FILE.read_text())["bands"]
    for name, e in entries.items():
        assert e["fitted"] == {k: list(v) for k, v in load_stack(name).fitted.items()}
        assert (e["error_band"]["low"], e["error_band"]["high"]) == (bands[name]["low"], bands[name]["high"])
        assert e["default_for"] == [kind for kind, n in DEFAULT_STACKS.items() if n == name]
    assert main(["stacks"]) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert all(name in table for name in entries) and "default for" in table
    # every --help that takes --stack lists the registry's stacks
    import re

    assert main(["analyze", "--help"]) == 0
    helptext = " ".join(re.sub(r"-\n\s+", "-", capsys.readouterr().out).split())  # a name the help wraps at its hyphen
    assert all(name in helptext for name in entries)
