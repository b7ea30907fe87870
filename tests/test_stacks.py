"""Software-stack profiles: the bundled files, the loader's refusals, and the time rule
(stack_time) against hand-computed cases."""

import math

import numpy as np
import pytest

from dlmcost import stack_time as st
from dlmcost.stacks import DEFAULT_STACK, StackFileError, bundled_stack_names, load_stack, validate_stack

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


def test_op_time_hand_computed():
    s = stack()
    # linear op at 10 rows: rate = 100 * 0.8 * 0.35 = 28 FLOP/s -> 56 FLOPs take 2 s; memory 30 B at
    # 10 * 0.5 = 5 B/s = 6 s -> max 6 s; + 2 kernels * 0.5 s = 7 s.
    # attention: rate 100 * 0.8 * 0.5 = 40 -> 400 FLOPs = 10 s; memory 10 B = 2 s -> 10 s + 1 kernel = 10.5 s.
    # elementwise: FLOPs 0; 10 B * 2 (factor) / 5 = 4 s; + 0 kernels.
    # comm: no FLOPs or bytes; link 3 s.
    kind = st.kind_codes(["linear", "attention", "other", "comm"])
    t = st.op_gpu_time(flops=[56, 400, 0, 0], nbytes=[30, 10, 10, 0], rows=10, kind=kind, kernels=[2, 1, 0, 0],
                       peak=100.0, eff_hw=0.8, bandwidth=10.0, eff_mem=0.5, overhead_s=0.5, stack=s,
                       link_s=np.array([0, 0, 0, 3.0]))
    assert np.allclose(t, [7.0, 10.5, 4.0, 3.0])


def test_pass_time_overlap_rule():
    s = stack()
    # host 12 layers * 100 us = 1.2 ms; GPU 1 ms; overlapped: max = 1.2 ms, + 0.05 ms fixed
    host = st.host_time(12, s)
    assert math.isclose(float(host), 1.2e-3)
    assert math.isclose(float(st.pass_time(1e-3, host, s)), 1.25e-3)
    serial = stack(host=dict(us_per_layer=100, overlaps_gpu=False, fixed_us_per_forward=50))
    assert math.isclose(float(st.pass_time(1e-3, host, serial)), 2.25e-3)


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
    with pytest.raises(StackFileError, match="larger than"):
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
