"""The limit on passes costed one by one (limits.MAX_PASSES_ONE_BY_ONE, docs/limits.md).

Most pass families are summed in closed form; the others (an MoE model's prefix-cache steps,
sliding-window layers whose keys bend at the window, ...) are costed pass by pass, which takes
time in proportion. A call that would cost too many is refused before any work, with one
`error:` line and exit code 2; the count is checked against hand counts and against the passes
the engine actually costs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dlmcost import api, errors
from dlmcost.engine import evaluation as engine, frames
from dlmcost.analysis import limits
from dlmcost.cli import main
from dlmcost.inputs.models import resolve_model
from dlmcost.engine.schemes import SCHEMES

MOE = "inclusionAI/LLaDA2.0-mini"
# prefix-cache over 8 blocks of 8 tokens, 4 steps per block: the refresh opening each block has a
# fixed shape (closed form); the 3 other steps of block i cover the 64 - 8i tokens from it on,
# so an MoE model's experts change pass by pass: one pass per block, 8 in all
PREFIX = dict(scheme="prefix-cache", prompt=16, gen=64, block=8, steps=32)
# 5,000,000 blocks of one token, 2 steps each: 5,000,000 passes one by one per GPU
HUGE = ["--scheme", "prefix-cache", "--gen", "5000000", "--block", "1", "--steps", "10000000", "--prompt", "0"]


@pytest.fixture
def costed(monkeypatch):
    """The passes the engine costs one by one, counted as it yields them."""
    counted = [0]
    chunks = engine._pass_chunks

    def counting(n):
        for chunk in chunks(n):
            counted[0] += len(chunk[0])
            yield chunk

    monkeypatch.setattr(engine, "_pass_chunks", counting)
    return counted


@pytest.fixture
def no_work(monkeypatch):
    """Fail if anything is evaluated: a refusal must come before the work."""

    def refuse(*args, **kwargs):
        raise AssertionError("evaluated before the limit was checked")

    monkeypatch.setattr(frames, "evaluate", refuse)  # what analyze's and sweep's evaluations call


def refused(capsys, args) -> str:
    """The one error line (a warning given before the refusal is not shown: the command failed)."""
    capsys.readouterr()
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == errors.EXIT_USAGE == 2, err
    assert out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- the count ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", [None, "none"])  # every pass under a stack; on the bare roofline a family
def test_moe_prefix_cache_costs_one_pass_per_block_by_hand(costed, stack):  # memory-bound at both ends: none
    a = api.analyze(MOE, "h100,h200", stack=stack, **PREFIX)
    # two GPUs, 8 blocks each; the AR baseline's passes have one shape (q = 1); batch 1 on the bare
    # roofline: the experts are memory-bound at both ends, so throughout, and no pass is costed alone
    assert costed[0] == (2 * 8 if stack is None else 0)
    assert a.results[0].passes[1].name == "step" and a.results[0].passes[1].count == 8 * 3
    with pytest.raises(errors.UsageError):
        api.analyze(MOE, "h100,h200", stack=stack, max_passes=15, **PREFIX)
    # one step per block: only the refreshes run; the steps' family has its 8 shapes, none run
    costed[0] = 0
    api.analyze(MOE, "h100,h200", stack=stack, max_passes=0, **dict(PREFIX, steps=8))
    assert costed[0] == 0


def test_mla_costs_each_pass_in_both_forms_when_left_to_choose(costed):
    spec = resolve_model("deepseek-ai/DeepSeek-V3")
    api.analyze(spec, "h200", mla_form="auto", **PREFIX)
    assert costed[0] == 2 * 8
    costed[0] = 0
    api.analyze(spec, "h200", mla_form="absorbed", **PREFIX)
    assert costed[0] == 8
    api.analyze(spec, "h200", mla_form="absorbed", max_passes=8, **PREFIX)
    with pytest.raises(errors.UsageError, match="16 passes one by one"):
        api.analyze(spec, "h200", mla_form="auto", max_passes=15, **PREFIX)


def test_a_grid_mixing_mla_forms_counts_both_forms_where_evaluate_costs_them(costed):
    """A grid of workloads (calibrate's points) may mix MLA forms: a family is costed in both forms
    for all the configurations that run it as soon as one of them leaves the form to dlmcost, even
    one that runs it only once. Here a single one-block step (auto, in closed form) and PREFIX's
    8 steps taken one by one (absorbed): 2 x 8 passes, all on the second configuration."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.precision import get_precision
    from dlmcost.inputs.profiles import Profile
    from dlmcost.engine.roofline import gpu_rates
    from dlmcost.inputs.stacks import load_stack

    spec = resolve_model("deepseek-ai/DeepSeek-V3")
    once = api.workload_for(spec, mla_form="auto", **dict(PREFIX, gen=8, steps=2))
    steps = api.workload_for(spec, mla_form="absorbed", **PREFIX)
    rates = gpu_rates(HardwareDB.load().get("h200"), get_precision("bf16"), Profile("realistic"))
    # under a stack every pass counted is costed (on the bare roofline some need none)
    grid = frames.workloads_grid([once, steps], [rates, rates], load_stack("sglang"))
    assert engine.passes_one_by_one(spec, grid).tolist() == [0, 2 * 8]
    engine.evaluate(spec, grid)
    assert costed[0] == 2 * 8


def test_sliding_window_decode_goes_pass_by_pass_once_it_crosses_the_window(costed):
    """gemma-3-1b's sliding layers see 512 tokens: an AR decode from an empty prompt stays in
    closed form up to c = 511 (gen 512), and goes pass by pass beyond, for the decode and for
    its AR baseline (the same passes again)."""
    spec = resolve_model("google/gemma-3-1b-it")
    assert {kind.window for _, kind in spec.attention_groups if kind.attention == "sliding"} == {512}
    api.analyze(spec, "h100", scheme="ar", prompt=0, gen=512, max_passes=0)
    assert costed[0] == 0
    api.analyze(spec, "h100", scheme="ar", prompt=0, gen=513, max_passes=2 * 513)
    assert costed[0] == 2 * 513
    with pytest.raises(errors.UsageError, match="1,026 passes"):
        api.analyze(spec, "h100", scheme="ar", prompt=0, gen=513, max_passes=2 * 513 - 1)


def test_a_dense_model_without_sliding_layers_is_never_refused(costed):
    """Everything in closed form: no pass costed one by one, even at the token limit."""
    for scheme in SCHEMES:
        if scheme in ("diffgemma", "draft-verify"):
            continue  # (need a model of their own / steps no larger than the generation)
        api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme=scheme, prompt=0, gen=5_000_000, block=1,
                    steps=10_000_000 if scheme != "ar" else None, max_passes=0)
    assert costed[0] == 0


@pytest.mark.parametrize("model", [MOE, "google/gemma-3-1b-it", "deepseek-ai/DeepSeek-V3",
                                   "google/diffusiongemma-26B-A4B-it", "GSAI-ML/LLaDA-8B-Instruct"])
@pytest.mark.parametrize("stack", [None, "none"])
def test_the_count_is_what_the_engine_costs_over_a_sweep(costed, model, stack):
    spec = resolve_model(model)
    options = dict(gpus="h100", schemes=list(SCHEMES), prompts=[0, 16], gens=[64, 640], blocks=[8, 32], steps=[None, 320],
                   stack=stack, active_blocks=4)
    expected = api.sweep_passes(spec, **options)
    assert costed[0] == 0  # counted, nothing costed
    api.sweep(spec, **options)
    # every pass counted is costed one by one under a stack; on the bare roofline an MoE family
    # memory-bound at both ends is summed without it: the count bounds the work from above
    assert costed[0] == expected if stack is None else costed[0] <= expected
    if model != "GSAI-ML/LLaDA-8B-Instruct":
        assert expected > 0
    with pytest.raises(errors.UsageError):
        api.sweep(spec, max_passes=expected - 1, **options)


# --- the refusal ----------------------------------------------------------------------------------


def test_analyze_refuses_before_any_work(capsys, no_work):
    line = refused(capsys, ["analyze", MOE, *HUGE])  # 7 default GPUs
    assert "35,000,000 passes one by one" in line and f"at most {limits.MAX_PASSES_ONE_BY_ONE:,}" in line
    assert "fewer GPUs" in line


def test_analyze_just_under_the_limit_runs():
    passes = 2 * 8
    api.analyze(MOE, "h100,h200", max_passes=passes, **PREFIX)
    with pytest.raises(errors.UsageError) as exc:
        api.analyze(MOE, "h100,h200", max_passes=passes - 1, **PREFIX)
    assert exc.value.exit_code == 2


def test_sweep_refuses_summed_over_its_configurations(capsys, no_work):
    # 6 configurations of 5,000,000 passes each: 30,000,000 together (4 of them: the limit itself)
    line = refused(capsys, ["sweep", "-m", MOE, *HUGE, "--gpu", "h100,h200", "--batch", "1,2,3", "-f", "csv",
                            "--allow-large"])
    assert "30,000,000 passes one by one" in line and "shorten some lists" in line
    assert api.sweep_passes(MOE, gpus="h100,h200", schemes=["prefix-cache"], gens=[5_000_000], blocks=[1],
                            steps=[10_000_000], prompts=[0], batches=[1, 2]) == limits.MAX_PASSES_ONE_BY_ONE


def test_several_models_share_the_limit(capsys, no_work):
    # 15,000,000 passes per model, under the limit each, over it together
    line = refused(capsys, ["sweep", "-m", f"{MOE},{MOE}", *HUGE, "--gpu", "h100,h200,b200", "-f", "csv"])
    assert "30,000,000 passes one by one" in line and "fewer models" in line


def test_plan_adds_up_its_sweeps_before_running_any(capsys, no_work):
    line = refused(capsys, ["plan", MOE, "--scheme", "prefix-cache", "--block", "2", "--answer", "1000000",
                            "--rate", "1", "--p95", "1000", "--gpu", "h100"])  # its warning (not published with
    # prefix-cache) is dropped: the command failed
    assert "passes one by one" in line and "shorter answers" in line


def test_the_documented_limit_is_the_code_s():
    docs = Path(__file__).resolve().parent.parent / "docs"
    limit = f"{limits.MAX_PASSES_ONE_BY_ONE:,}"
    assert f"| passes costed one by one in one `analyze`, `sweep`, `plan` or `calibrate` (below) | {limit} | 2 |" in (
        docs / "limits.md").read_text()
    assert f"more than {limit} passes one by one" in (docs / "methodology.md").read_text()


@pytest.mark.parametrize("model, options, passes", [
    # one pass per block
    (MOE, dict(schemes=["prefix-cache"], gens=[9_999_999], blocks=[1], steps=[10_000_000]), 9_999_999),
    # every decode step crosses the 512-token window: all of them, for the decode and for its baseline
    ("google/gemma-3-1b-it", dict(schemes=["ar"], gens=[10_000_000]), 2 * 10_000_000),
    # per canvas: the first step, the later steps (one family), the store (all canvases but the
    # last); then the AR baseline
    ("google/diffusiongemma-26B-A4B-it", dict(schemes=["diffgemma"], gens=[9_999_999], blocks=[1],
                                              steps=[10_000_000]), 3 * 9_999_999 - 1 + 9_999_999),
])
def test_the_documented_single_configurations(model, options, passes):
    assert api.sweep_passes(model, gpus="h100", prompts=[0], **options) == passes
    assert f"{passes:,}" in (Path(__file__).resolve().parent.parent / "docs" / "limits.md").read_text()
    assert (passes <= limits.MAX_PASSES_ONE_BY_ONE) == (model != "google/diffusiongemma-26B-A4B-it")


def test_calibrate_counts_every_evaluation_of_its_fit_before_any(tmp_path, capsys, monkeypatch):
    from dlmcost.calibration import calibrate

    monkeypatch.setattr(calibrate, "evaluate", lambda *a, **k: pytest.fail("evaluated before the limit was checked"))
    # 200,000 one-token blocks of 2 steps each: 200,000 passes one by one per evaluation of the point
    point = dict(id="p", model=MOE, gpu="h100", measured=dict(ms_per_forward=10.0),
                 workload=dict(scheme="prefix-cache", prompt=0, gen=200_000, block=1, steps=400_000))
    path = tmp_path / "points.yaml"
    path.write_text(yaml.safe_dump(dict(points=[point])))
    evaluations = (calibrate.MAX_ITER + 3) * 2  # one parameter
    assert calibrate.MAX_ITER == 60  # as docs/limits.md says
    line = refused(capsys, ["calibrate", str(path), "--stack", "sglang", "--fit", "fixed", "-o",
                            str(tmp_path / "out.yaml")])
    assert f"{200_000 * evaluations:,} passes one by one" in line and f"up to {evaluations} times" in line
    assert not (tmp_path / "out.yaml").exists()


@pytest.fixture
def countings(monkeypatch):
    """How many times a sweep's chunk of configurations has its passes counted."""
    calls = [0]
    count = limits.count_passes

    def counting(*args, **kwargs):
        calls[0] += 1
        return count(*args, **kwargs)

    monkeypatch.setattr(limits, "count_passes", counting)
    return calls


def test_each_sweep_is_counted_once(capsys, countings):
    """The count costs about a tenth of a sweep: a command that checks the total of several
    sweeps (several models, plan's decodings and baseline) does not count each again."""
    assert main(["sweep", "-m", f"{MOE},GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--block", "8",
                 "--scheme", "prefix-cache", "-f", "csv"]) == 0
    assert countings[0] == 2  # one chunk per model
    countings[0] = 0
    api.sweep(MOE, gpus="h100", schemes=["prefix-cache"], max_passes=None)
    api.analyze(MOE, "h100", max_passes=None, **PREFIX)
    assert countings[0] == 0  # no limit: nothing to count
    assert main(["plan", MOE, "--scheme", "prefix-cache", "--block", "8", "--answer", "64", "--prompt", "16",
                 "--rate", "1", "--p95", "1000", "--gpu", "h100", "--requests", "200", "--ar-baseline"]) == 0
    assert countings[0] == 2  # the decoding's sweep and its AR baseline's
