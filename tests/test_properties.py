"""Property-based tests (hypothesis) of the API, the cost model and the CLI.

* `api.analyze` either raises a `DlmcostError` or returns finite, non-negative numbers everywhere;
* more denoising steps never make a diffusion workload cheaper;
* a larger batch never lowers the arithmetic intensity of a pass (or of any op in it);
* random option values through `cli.main` never print a traceback and exit with a documented code.

Settings come from the "dlmcost" hypothesis profile in tests/conftest.py: deterministic and modest
(a few dozen examples per property, no deadline) so the file runs in a few seconds;
DLMCOST_FUZZ_SCALE=10 runs ten times as many random examples.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dlmcost import api, errors
from dlmcost.cli import main
from dlmcost.engine.cost import PassInput, pass_ops
from dlmcost.inputs.models import bundled_ids, load_bundled
from dlmcost.render.formats import to_json

MODEL_IDS = bundled_ids()
DIFFUSION_SCHEMES = ["mdm", "prefix-cache", "dual-cache", "block"]
ALL_SCHEMES = ["ar", *DIFFUSION_SCHEMES]
PRECISIONS = ["bf16", "fp8", "w4a16"]
GPUS = ["h100", "b200", "mi300x"]
BLOCKS = [1, 2, 4, 8, 16, 32, 64]
DOCUMENTED = {0, errors.EXIT_USAGE, errors.WorkloadError.exit_code, errors.UnknownGPUError.exit_code,
              errors.HardwareFileError.exit_code, errors.UnknownModelError.exit_code, errors.ConfigError.exit_code}

# The suite's profile (tests/conftest.py); the slower properties run two thirds as many examples.
SETTINGS = settings()
FEW = settings(SETTINGS, max_examples=max(1, SETTINGS.max_examples * 2 // 3))


@pytest.fixture(scope="module", autouse=True)
def _isolated_env():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DLMCOST_HARDWARE", raising=False)
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield


# --- strategies ---------------------------------------------------------------------------------


@st.composite
def workloads(draw, schemes=ALL_SCHEMES):
    """Valid-looking workloads: gen a multiple of the block, steps >= number of blocks."""
    block = draw(st.sampled_from(BLOCKS))
    n_blocks = draw(st.integers(1, 16))
    gen = block * n_blocks
    return dict(
        scheme=draw(st.sampled_from(schemes)),
        prompt=draw(st.integers(0, 4096)),
        gen=gen,
        block=block,
        steps=draw(st.integers(n_blocks, max(n_blocks, 2 * gen))),
        batch=draw(st.integers(1, 512)),
        precision=draw(st.sampled_from(PRECISIONS)),
        kv_dtype=draw(st.sampled_from(["bf16", "fp8", "fp4"])),
        cfg=draw(st.booleans()),
        store_pass=draw(st.booleans()),
        logits=draw(st.sampled_from(["all", "committed"])),
        expert_load=draw(st.sampled_from(["expected", "all"])),
    )


gpu_lists = st.lists(st.sampled_from(GPUS), min_size=1, max_size=3, unique=True).map(",".join)


# --- helpers ------------------------------------------------------------------------------------


def numbers(obj, path=""):
    """Every (path, number) in a nested result (bools and strings skipped, None allowed)."""
    if hasattr(obj, "model_dump"):  # typed result records
        obj = obj.model_dump()
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, (int, float, np.integer, np.floating)):
        yield path, float(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from numbers(v, f"{path}[{i}]")
    else:
        raise AssertionError(f"{path}: unexpected type {type(obj).__name__}")


def assert_finite_non_negative(result: dict) -> None:
    assert result["results"], "at least one GPU"
    for res in result["results"]:
        if not res["supported"]:
            continue
        for key in ("time_s", "flops", "bytes", "tokens_per_s", "arithmetic_intensity", "nfe"):
            assert key in res
        for key in ("memory", "passes"):
            assert res[key]
        for path, value in numbers(res):
            assert math.isfinite(value), f"{res['gpu']}: {path} = {value}"
            assert value >= 0, f"{res['gpu']}: {path} = {value}"
        assert res["time_s"] > 0 and res["tokens_per_s"] > 0
        for p in res["passes"]:
            assert p["count"] > 0 and p["time_s"] > 0
    for path, value in numbers(result["model"]):
        assert math.isfinite(value) and value >= 0, f"model.{path} = {value}"
    to_json(result)  # the CLI's --format json refuses NaN/inf: it must never see one


# --- the API: finite or a clean error ----------------------------------------------------------


@SETTINGS
@given(model=st.sampled_from(MODEL_IDS), w=workloads(), gpus=gpu_lists,
       efficiency=st.sampled_from(["realistic", "ideal"]))
def test_analyze_is_finite_or_raises_dlmcost_error(model, w, gpus, efficiency):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow or 0/0 in numpy is a bug
        try:
            result = api.analyze(model, gpus, efficiency=efficiency, **w)
        except errors.DlmcostError:
            return
    assert_finite_non_negative(result)
    # the workload echoed back is the one asked for
    assert result["workload"]["scheme"] == w["scheme"]
    assert result["workload"]["gen"] == w["gen"] and result["workload"]["batch"] == w["batch"]


@FEW
@given(model=st.sampled_from(MODEL_IDS), scheme=st.sampled_from(ALL_SCHEMES),
       prompt=st.integers(0, 10_000_000), gen_exp=st.integers(0, 7), batch=st.integers(1, 1_000_000),
       tpf=st.one_of(st.none(), st.floats(1e-3, 1e7)), gpus=gpu_lists)
def test_analyze_extremes_are_finite_or_clean_errors(model, scheme, prompt, gen_exp, batch, tpf, gpus):
    """Sizes up to the documented bounds (1e7 tokens, 1e6 sequences): still finite or a clean error."""
    gen = 10 ** gen_exp
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            result = api.analyze(model, gpus, scheme=scheme, prompt=prompt, gen=gen, block=gen, batch=batch,
                                 tpf=tpf)
        except errors.DlmcostError:
            return
    assert_finite_non_negative(result)


@FEW
@given(tpf=st.floats(min_value=0, exclude_min=True, max_value=1e-3), gen=st.sampled_from([1, 128, 4096]))
def test_tiny_tokens_per_forward_is_refused_or_finite(tpf, gen):
    """S = Lg / tpf is bounded like --steps (1e7); an unbounded S overflows to inf."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            result = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", gen=gen, block=gen, tpf=tpf)
        except errors.DlmcostError:
            return
    assert_finite_non_negative(result)
    assert result["workload"]["steps"] <= 10_000_000


# --- sweep and analyze are the same model ----------------------------------------------------------


@FEW
@given(model=st.sampled_from(MODEL_IDS), w=workloads(), gpu=st.sampled_from(GPUS))
def test_sweep_row_equals_analyze(model, w, gpu):
    """One-configuration sweep == analyze of that configuration (same engine, same defaults)."""
    try:
        res = api.analyze(model, gpu, **w)["results"][0]
    except errors.DlmcostError:
        return
    assume(res["supported"])
    result = api.sweep(model, gpus=gpu, schemes=[w["scheme"]], prompts=[w["prompt"]], gens=[w["gen"]],
                       steps=[w["steps"]], blocks=[w["block"]], batches=[w["batch"]], precisions=[w["precision"]],
                       kv_dtype=w["kv_dtype"], cfg=w["cfg"], store_pass=w["store_pass"], logits=w["logits"],
                       expert_load=w["expert_load"])
    rows = api.sweep_rows(result)
    assert len(rows) == 1 == result["evaluated"], result["skipped_impossible"]
    row = rows[0]
    for key in ("time_s", "tokens_per_s", "arithmetic_intensity", "nfe", "time_ratio_to_ar"):
        assert row[key] == pytest.approx(res[key], rel=1e-9), key
    assert row["verdict"] == res["verdict"]
    assert row["fits"] == res["memory"]["fits"]
    assert row["max_batch"] == res["memory"]["max_batch"]
    assert row["memory_total_bytes"] == pytest.approx(res["memory"]["total_bytes"], rel=1e-12)


@pytest.mark.parametrize("model", ["GSAI-ML/LLaDA-8B-Instruct", "JetLM/SDAR-4B-Chat", "google/diffusiongemma-26B-A4B-it",
                                   "meta-llama/Meta-Llama-3-8B"])
def test_a_sweep_takes_analyze_s_defaults(model):
    """Steps, block and store pass left unset: every row of a sweep over every scheme and two lengths
    is analyze of its scheme and length with the same knobs unset (one function gives both their
    defaults: a scheme's own block, the sampler's steps at its own length only, its store pass for
    the block scheme alone). Where analyze refuses (the block scheme with no block), sweep runs one
    block of the whole generation."""
    sampler = load_bundled(model).sampler
    gens = [sampler.gen, 2 * sampler.gen]
    rows = api.sweep_rows(api.sweep(model, gpus="h100", schemes=list(api.SCHEMES), gens=gens))
    compared = 0
    for row in rows:
        try:
            res = api.analyze(model, "h100", scheme=row["scheme"], gen=row["gen"])
        except errors.DlmcostError:
            continue
        r = res["results"][0]
        assert (row["time_s"], row["nfe"]) == (pytest.approx(r["time_s"], rel=1e-12), pytest.approx(r["nfe"])), row
        compared += 1
    assert compared >= len(rows) - len(gens)  # all but the block scheme's where analyze needs --block


# --- monotonic in steps -------------------------------------------------------------------------


@SETTINGS
@given(model=st.sampled_from(MODEL_IDS), w=workloads(schemes=DIFFUSION_SCHEMES), extra=st.integers(1, 512),
       gpu=st.sampled_from(GPUS), efficiency=st.sampled_from(["realistic", "ideal"]))
def test_more_steps_never_cheaper(model, w, extra, gpu, efficiency):
    try:
        few = api.analyze(model, gpu, efficiency=efficiency, **w)
        many = api.analyze(model, gpu, efficiency=efficiency, **{**w, "steps": w["steps"] + extra})
    except errors.DlmcostError:
        return
    a, b = few["results"][0], many["results"][0]
    assume(a["supported"] and b["supported"])
    tol = 1 + 1e-9
    assert b["time_s"] * tol >= a["time_s"], (a["time_s"], b["time_s"])
    assert b["flops"] * tol >= a["flops"], (a["flops"], b["flops"])
    assert b["bytes"] * tol >= a["bytes"], (a["bytes"], b["bytes"])
    assert b["nfe"] >= a["nfe"]
    assert b["tokens_per_s"] <= a["tokens_per_s"] * tol


# --- batch never lowers arithmetic intensity -----------------------------------------------------


@SETTINGS
@given(model=st.sampled_from(MODEL_IDS), q=st.integers(1, 8192), c=st.integers(0, 16384),
       kv_write=st.integers(0, 4096), logits=st.integers(0, 4096), causal=st.booleans(),
       wbytes=st.sampled_from([0.5, 1.0, 2.0]), kvbytes=st.sampled_from([0.5, 1.0, 2.0]),
       all_experts=st.booleans(), b1=st.integers(1, 1024), b2=st.integers(1, 1024))
def test_larger_batch_never_lowers_pass_intensity(model, q, c, kv_write, logits, causal, wbytes, kvbytes,
                                                  all_experts, b1, b2):
    small, large = sorted((b1, b2))
    m = load_bundled(model)

    def ops(batch):
        arr = lambda v: np.array([float(v)])  # noqa: E731
        p = PassInput(B=arr(batch), q=arr(q), c=arr(c), kv_write=arr(kv_write), logits=arr(logits),
                      causal=np.array([causal]), wbytes=arr(wbytes), kvbytes=arr(kvbytes),
                      all_experts=np.array([all_experts]))
        return pass_ops(m, p)

    o_small, o_large = ops(small), ops(large)
    f_small = sum(float(o.flops[0]) for o in o_small)
    f_large = sum(float(o.flops[0]) for o in o_large)
    by_small = sum(float(o.bytes[0]) for o in o_small)
    by_large = sum(float(o.bytes[0]) for o in o_large)
    assert all(math.isfinite(x) and x > 0 for x in (f_small, f_large, by_small, by_large))
    assert f_large / by_large >= (f_small / by_small) * (1 - 1e-12)
    for a, b in zip(o_small, o_large):  # op by op, too
        assert a.name == b.name
        fa, fb, ba, bb = float(a.flops[0]), float(b.flops[0]), float(a.bytes[0]), float(b.bytes[0])
        assert fa >= 0 and fb >= 0 and ba >= 0 and bb >= 0, a.name
        if ba > 0 and bb > 0:
            assert fb / bb >= (fa / ba) * (1 - 1e-12), a.name
        # FLOPs scale with the batch exactly
        assert fb == pytest.approx(fa * large / small, rel=1e-12, abs=0), a.name


@FEW
@given(model=st.sampled_from(MODEL_IDS), w=workloads(), factor=st.integers(2, 64), gpu=st.sampled_from(GPUS))
def test_larger_batch_never_lowers_pass_intensity_via_api(model, w, factor, gpu):
    assume(w["batch"] * factor <= 1_000_000)
    try:
        small = api.analyze(model, gpu, **w)["results"][0]
        large = api.analyze(model, gpu, **{**w, "batch": w["batch"] * factor})["results"][0]
    except errors.DlmcostError:
        return
    assume(small["supported"] and large["supported"])
    passes_small = {p["name"]: p for p in small["passes"]}
    passes_large = {p["name"]: p for p in large["passes"]}
    assert set(passes_small) == set(passes_large)
    for name, p in passes_small.items():
        assert passes_large[name]["arithmetic_intensity"] >= p["arithmetic_intensity"] * (1 - 1e-12), name
        assert passes_large[name]["count"] == p["count"], name
    assert large["arithmetic_intensity"] >= small["arithmetic_intensity"] * (1 - 1e-12)


# --- CLI fuzz -----------------------------------------------------------------------------------


def run_cli(args: list[str]) -> tuple[int, str, str, list]:
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        rc = main(args)
    return rc, out.getvalue(), err.getvalue(), [w for w in caught if issubclass(w.category, RuntimeWarning)]


def check_cli(args: list[str]) -> int:
    rc, out, err, runtime_warnings = run_cli(args)
    where = f"dlmcost {args!r} -> rc={rc}, stderr={err[:400]!r}"
    assert "Traceback" not in err and "Traceback" not in out, where
    assert "internal error" not in err, where
    assert rc in DOCUMENTED, where
    assert not runtime_warnings, f"{where}: numpy warned {runtime_warnings[0].message}"
    if rc == 0:  # warnings (unverified config, context exceeded) are allowed, one line each
        assert all(line.startswith("warning: ") for line in err.rstrip("\n").split("\n") if line), where
    else:
        lines = err.rstrip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("error: "), where
    if rc == 0 and "json" in args:
        json.loads(out)
    return rc


def _num_text(draw_from):
    return draw_from.map(lambda v: repr(v) if isinstance(v, float) else str(v))


ints_as_text = _num_text(st.one_of(st.integers(-5, 5), st.integers(-10**12, 10**12), st.sampled_from([0, 1, 32, 128])))
floats_as_text = _num_text(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**8)))
# Printable junk: no NUL (argv cannot hold it), no '/' (a Hub id would be looked up), no line breaks
# (a message quoting the value would span lines; see test_bad_input.test_error_quoting_a_newline).
junk = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="/"),
               max_size=12)

TYPED_OPTIONS = {
    "--gpu": st.one_of(st.sampled_from(["h100", "b200", "mi300x", "h100,b200", "a100", "h10", "all"]), junk),
    "--scheme": st.one_of(st.sampled_from(ALL_SCHEMES), junk),
    "--prompt": ints_as_text,
    "--gen": ints_as_text,
    "--steps": floats_as_text,
    "--tpf": floats_as_text,
    "--block": ints_as_text,
    "--batch": ints_as_text,
    "--precision": st.one_of(st.sampled_from(PRECISIONS + ["fp4", "w8a16"]), junk),
    "--kv-dtype": st.one_of(st.sampled_from(["bf16", "fp8", "int8", "fp4"]), junk),
    "--cfg": floats_as_text,
    "--logits": st.one_of(st.sampled_from(["all", "committed"]), junk),
    "--expert-load": st.one_of(st.sampled_from(["expected", "all"]), junk),
    "--efficiency": st.one_of(st.sampled_from(["realistic", "ideal"]), junk),
    "--format": st.sampled_from(["json", "csv", "markdown", "table", "xml"]),
}
model_args = st.one_of(st.sampled_from(MODEL_IDS), junk.filter(lambda s: s.strip() and not s.startswith("-")))


@st.composite
def analyze_argv(draw):
    argv = ["analyze"]
    if draw(st.booleans()):
        argv.append(draw(model_args))
    for opt in draw(st.lists(st.sampled_from(sorted(TYPED_OPTIONS)), max_size=6, unique=True)):
        argv += [opt, draw(TYPED_OPTIONS[opt])]
    if "--gpu" not in argv:
        argv += ["--gpu", draw(st.sampled_from(GPUS))]
    return argv


@SETTINGS
@given(argv=analyze_argv())
def test_cli_fuzz_analyze(argv):
    check_cli(argv)


def _list(values):
    return st.lists(values, min_size=1, max_size=2).map(lambda xs: ",".join(str(x) for x in xs))


SWEEP_OPTIONS = {
    "--scheme": _list(st.sampled_from(ALL_SCHEMES)),
    "--prompt": _list(st.integers(-1, 5000)),
    "--gen": _list(st.sampled_from([0, 1, 7, 64, 128, 256])),
    "--steps": _list(st.one_of(st.integers(-1, 600), st.sampled_from(["nan", "1e9"]))),
    "--block": _list(st.sampled_from([0, 1, 3, 4, 8, 32, 128, 512])),
    "--batch": _list(st.integers(-1, 2048)),
    "--precision": _list(st.sampled_from(PRECISIONS + ["fp4"])),
    "--tpf": floats_as_text,
    "--sort": st.sampled_from(["tokens_per_s", "-tokens_per_s", "time_s", "-block", "steps", "gpu", "nosuch"]),
    "--top": st.integers(-1, 5).map(str),
    "--cfg": st.sampled_from(["0", "1", "-1", "nan"]),
    "--logits": st.sampled_from(["all", "committed", "x"]),
    "--kv-dtype": st.sampled_from(["bf16", "fp8", "fp3"]),
    "--format": st.sampled_from(["json", "csv", "markdown", "table"]),
}


@st.composite
def sweep_argv(draw):
    argv = ["sweep", "--model", draw(st.sampled_from(MODEL_IDS)),
            "--gpu", draw(st.lists(st.sampled_from(GPUS + ["a100"]), min_size=1, max_size=2, unique=True).map(",".join))]
    for opt in draw(st.lists(st.sampled_from(sorted(SWEEP_OPTIONS)), max_size=6, unique=True)):
        argv += [opt, draw(SWEEP_OPTIONS[opt])]
    return argv


@FEW
@given(argv=sweep_argv())
def test_cli_fuzz_sweep(argv):
    check_cli(argv)


RAW_OPTIONS = ["--gpu", "--scheme", "--prompt", "--gen", "--steps", "--tpf", "--block", "--batch", "--precision",
               "--kv-dtype", "--cfg", "--logits", "--format", "--top", "--sort", "--nosuch"]


@FEW
@given(command=st.sampled_from(["analyze", "sweep", "gpus", "models", "model"]),
       pairs=st.lists(st.tuples(st.sampled_from(RAW_OPTIONS), junk), max_size=4))
def test_cli_fuzz_raw_text(command, pairs):
    """Any text for any option (numbers that are not numbers, unknown options): one line, exit 2 or so."""
    argv = [command]
    if command == "model":
        argv.append("GSAI-ML/LLaDA-8B-Instruct")
    for opt, value in pairs:
        argv += [opt, value]
    check_cli(argv)
