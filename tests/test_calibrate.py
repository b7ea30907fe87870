"""`dlmcost calibrate`: recovers known parameters from synthetic measurements, refuses what the
data cannot pin, and writes a file that --stack accepts."""

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from dlmcost.calibration.calibrate import PARAMETERS, Problem, calibrate, fit, with_parameters
from dlmcost.cli import main
from dlmcost.errors import UsageError
from dlmcost.calibration.measurements import Point, analysis_for, compare, load_points
from dlmcost.inputs.stacks import load_stack

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "examples" / "tiny-dlm.yaml")
WORKLOADS = [  # host-bound AR decode and GPU-bound full-canvas passes of different sizes
    dict(scheme="ar", prompt=64, gen=64, batch=1),
    dict(scheme="mdm", prompt=512, gen=512, steps=16, block=32, batch=4),
    dict(scheme="mdm", prompt=1024, gen=1024, steps=8, block=128, batch=8),
    dict(scheme="mdm", prompt=128, gen=128, steps=8, block=16, batch=16),
]


def synthetic_points(truth):
    pts = []
    for i, wl in enumerate(WORKLOADS):
        stub = Point(id=f"p{i}", model=TINY, gpu="h100", workload=wl, measured=dict(ms_per_forward=1.0))
        a, _ = analysis_for(stub, ROOT, stack=truth)
        ms = compare(stub, a)["predicted_ms"]
        pts.append(Point(id=f"p{i}", model=TINY, gpu="h100", workload=wl, measured=dict(ms_per_forward=ms)))
    return pts


def test_recovers_known_parameters():
    base = load_stack("hf-eager")
    truth = with_parameters(base, dict(fixed=2500.0, gemm=0.6))
    res = calibrate(synthetic_points(truth), ROOT, base, ["fixed", "gemm"], "fit")
    assert res["values"]["fixed"] == pytest.approx(2500.0, rel=1e-3)
    assert res["values"]["gemm"] == pytest.approx(0.6, rel=1e-3)
    assert all(r["error"] < 1.001 for r in res["after"])
    assert any(r["error"] > 1.05 for r in res["before"])


def test_refuses_more_parameters_than_points():
    base = load_stack("hf-eager")
    pts = synthetic_points(base)[:2]
    with pytest.raises(UsageError, match="2 measurement.s. cannot pin 3 parameters"):
        calibrate(pts, ROOT, base, ["fixed", "gemm", "attention"], "fit")


def test_refuses_parameter_the_data_does_not_touch():
    # under CUDA graphs nothing waits on the host: host time cannot be pinned
    base = load_stack("compiled")
    with pytest.raises(UsageError, match="do not depend on host"):
        calibrate(synthetic_points(base), ROOT, base, ["host", "fixed"], "fit")


def test_cli_writes_a_stack_that_loads(tmp_path, capsys):
    truth = with_parameters(load_stack("hf-eager"), dict(fixed=2500.0, gemm=0.6))
    data = dict(points=[p.model_dump(exclude_defaults=True) for p in synthetic_points(truth)])
    src = tmp_path / "m.yaml"
    src.write_text(yaml.safe_dump(data))
    out = tmp_path / "fit.yaml"
    code = main(["calibrate", str(src), "--stack", "hf-eager", "--fit", "fixed,gemm", "-o", str(out), "-f", "json"])
    assert code == 0
    s = load_stack(str(out))
    assert s.host.fixed_us_per_forward == pytest.approx(2500.0, rel=1e-3)
    assert "fitted by" in s.sources["fixed"]
    assert '"after_error"' in capsys.readouterr().out


def test_the_documented_format_travels_with_dlmcost(tmp_path, capsys, monkeypatch):
    """`examples/measurements.yaml` (the format the docs and `calibrate --help` point to) resolves
    from a folder that has no examples/ of its own, as after `pip install`, and holds exactly the
    published SGLang points of the validation (so the two cannot drift apart)."""
    published = yaml.safe_load((ROOT / "validation" / "published.yaml").read_text())["points"]
    example = yaml.safe_load((ROOT / "examples" / "measurements.yaml").read_text())["points"]
    assert example == [p for p in published if p.get("stack") == "sglang"]
    monkeypatch.chdir(tmp_path)
    code = main(["calibrate", "examples/measurements.yaml", "--stack", "sglang", "-o", "fit.yaml", "-f", "json"])
    assert code == 0, capsys.readouterr().err
    assert load_stack(str(tmp_path / "fit.yaml")).host.fixed_us_per_forward > 0
    assert not (tmp_path / "examples").exists()
    main(["calibrate", "--help"])
    assert "examples/measurements.yaml" in " ".join(capsys.readouterr().out.split())


def test_cli_bad_fit_name_is_one_line(tmp_path, capsys):
    code = main(["calibrate", str(ROOT / "validation" / "published.yaml"), "--fit", "bogus", "-o", str(tmp_path / "x.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --fit") and err.count("\n") == 1


GOOD = dict(id="ok", model=TINY, gpu="h100", workload=dict(scheme="ar", prompt=64, gen=64),
            measured=dict(ms_per_forward=1.0))
AR = dict(scheme="ar", prompt=64, gen=64)


@pytest.mark.parametrize("bad, code, message", [
    (dict(gpu="nogpu"), 4, "unknown GPU 'nogpu'; `dlmcost gpus` lists them"),
    (dict(workload=dict(AR, gen=0)), 2, "invalid workload: field 'gen': Input should be greater than 0"),
    (dict(workload=dict(AR, scheme="block", block=48)), 3, "block length 48 does not divide the generation length 64"),
    (dict(workload=dict(AR, tp=3)), 3, "16 attention heads do not split over tp=3 GPUs"),
    (dict(gpu="a100", workload=dict(AR, precision="fp8")), 2, "point bad: a100 cannot run this workload"),
    (dict(workload=dict(AR, precision="bogus")), 2, "unknown precision 'bogus'; choose one of: bf16, fp8, fp4, w8a16, w4a16"),
    (dict(workload=dict(AR, kv_dtype="zz")), 2, "unknown K/V dtype 'zz'; choose one of: bf16, fp16, fp8, int8, fp4, int4"),
    # a time per forward past what floats can compare with put an infinite ratio into the fit (exit 70)
    (dict(measured=dict(ms_per_forward=5e-324)), 2,
     "point bad: its measurement gives 4.94e-324 ms per forward pass; a time per forward is in [1e-06, 1e+12] ms"),
    (dict(measured=dict(tokens_per_s=5e-324), tokens_per_forward=1e6), 2,
     "point bad: its measurement gives inf ms per forward pass; a time per forward is in [1e-06, 1e+12] ms"),
    (dict(measured=dict(latency_s=1e-300)), 2,  # 1e-300 s over 64 passes (the prompt's, 63 decodes)
     "point bad: its measurement gives 1.56e-299 ms per forward pass; a time per forward is in [1e-06, 1e+12] ms"),
])
def test_cli_a_bad_point_is_one_line_with_its_code(tmp_path, capsys, bad, code, message):
    # the bad point sits between good ones; the messages and codes are those of `analyze`
    src = tmp_path / "m.yaml"
    src.write_text(yaml.safe_dump(dict(points=[GOOD, dict(GOOD, id="bad", **bad), GOOD])))
    out = tmp_path / "fit.yaml"
    assert main(["calibrate", str(src), "--fit", "fixed", "-o", str(out)]) == code
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not out.exists()


def test_answer_tokens_beyond_the_generation_is_refused(tmp_path, capsys):
    """answer_tokens counts the useful tokens of the generation: 1,000,000 of a gen of 128 (or of
    the model's default generation, when gen is not given) cannot be, in calibrate as in compare."""
    point = dict(GOOD, id="long", workload=dict(scheme="mdm", prompt=16, gen=128), measured=dict(tokens_per_s=50.0),
                 answer_tokens=1_000_000)
    src = tmp_path / "m.yaml"
    src.write_text(yaml.safe_dump(dict(points=[point])))
    assert main(["calibrate", str(src), "--fit", "fixed", "-o", str(tmp_path / "x.yaml")]) == 2
    assert capsys.readouterr().err == ("error: point long: answer_tokens 1,000,000 is more than the 128 tokens its "
                                       "workload generates (gen); it counts the useful tokens of that generation\n")
    with pytest.raises(UsageError, match="answer_tokens 129 is more than the 128 tokens"):
        p = Point(**dict(point, answer_tokens=129))
        compare(p, analysis_for(p, ROOT)[0])
    p = Point(**dict(point, answer_tokens=128))  # all of it: fine
    assert compare(p, analysis_for(p, ROOT)[0])["measured_ms"] > 0


def test_stack_none_is_refused_for_what_it_is(tmp_path, capsys):
    """`none` is the bare roofline: calibrate has nothing to fit in it, and says so instead of
    calling it unknown and listing it among the stacks to use."""
    src = tmp_path / "m.yaml"
    src.write_text(yaml.safe_dump(dict(points=[GOOD])))
    assert main(["calibrate", str(src), "--stack", "none", "-o", str(tmp_path / "x.yaml")]) == 5
    err = capsys.readouterr().err
    assert err.startswith("error: --stack none (the bare roofline) has no parameters to fit") and err.count("\n") == 1
    assert ", none," not in err and "unknown stack" not in err


def test_cli_the_first_bad_point_is_reported(tmp_path, capsys):
    # points are checked in file order, each fully (workload, then whether its GPU can run it)
    first = dict(GOOD, id="first", gpu="a100", workload=dict(AR, precision="fp8"))
    second = dict(GOOD, id="second", workload=dict(AR, tp=3))
    src = tmp_path / "m.yaml"
    src.write_text(yaml.safe_dump(dict(points=[first, second])))
    assert main(["calibrate", str(src), "--fit", "fixed", "-o", str(tmp_path / "x.yaml")]) == 2
    assert capsys.readouterr().err == "error: point first: a100 cannot run this workload\n"


def test_a_relative_model_path_is_taken_from_the_file_s_folder_never_the_current_one(tmp_path, capsys,
                                                                                     monkeypatch):
    """tiny.yaml in the current folder, the measurements file in sub/: not found beside the file
    (exit 6, saying where it looked), instead of a fit on whatever the current folder held; a
    copy beside the file is the one read; an id is never looked up as a path."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(TINY, tmp_path / "tiny.yaml")
    (tmp_path / "sub").mkdir()
    src = tmp_path / "sub" / "m.yaml"
    src.write_text(yaml.safe_dump(dict(points=[dict(GOOD, model="tiny.yaml")])))
    assert main(["calibrate", str(src), "--fit", "fixed", "-o", str(tmp_path / "x.yaml")]) == 6
    assert capsys.readouterr().err == (f"error: point ok: no model file tiny.yaml in the measurements file's folder "
                                       f"({tmp_path / 'sub'}), where a relative path is taken from\n")
    beside = yaml.safe_load(Path(TINY).read_text()) | {"id": "beside/tiny"}  # not the current folder's copy
    (tmp_path / "sub" / "tiny.yaml").write_text(yaml.safe_dump(beside))
    points, base = load_points(src)
    assert base == tmp_path / "sub" and analysis_for(points[0], base)[1].id == "beside/tiny"
    (tmp_path / "GSAI-ML").mkdir()  # a folder named like a bundled id's org, in the current folder
    (tmp_path / "GSAI-ML" / "LLaDA-8B-Instruct").mkdir()
    llada = dict(GOOD, model="GSAI-ML/LLaDA-8B-Instruct")
    assert analysis_for(Point(**llada), tmp_path / "sub")[1].source == "bundled"


def point_by_point_rows(problem: Problem, theta) -> list[dict]:
    """The rows as calibrate first computed them: a whole `analyze` of each point."""
    s = problem.stack(theta)
    return [compare(p, analysis_for(p, problem.base_dir, problem.hardware, s, spec)[0])
            for p, spec in zip(problem.points, problem.specs)]


def test_vectorised_residuals_equal_analyze_point_by_point():
    # the published points (dense, MoE, tp, cached and answer-token schedules on five GPUs) and a
    # few more: CFG (batch doubled, answer tokens counted once), a latency measurement, a GPU list whose
    # first entry cannot run the precision, a block schedule with a store pass
    points, base_dir = load_points(ROOT / "validation" / "published.yaml")
    extra = [dict(scheme="mdm", prompt=64, gen=64, steps=16, block=16, batch=2, cfg=True),
             dict(scheme="block", prompt=64, gen=64, steps=16, block=16, store_pass=True)]
    points += [Point(id="cfg", model=TINY, gpu="h100", workload=extra[0], measured=dict(tokens_per_s=900.0),
                     answer_tokens=40),
               Point(id="latency", model=TINY, gpu="b200", workload=extra[1], measured=dict(latency_s=0.02)),
               Point(id="fp8", model=TINY, gpu="a100,h100", workload=dict(AR, precision="fp8"),
                     measured=dict(ms_per_forward=0.5))]
    problem = Problem(points, base_dir, load_stack("hf-eager"), list(PARAMETERS))
    for theta in (problem.theta0, problem.theta0 + [0.4, -0.3, -0.5, -0.2, 0.3]):
        fast, slow = problem.rows(theta), point_by_point_rows(problem, theta)
        assert [r["gpu"] for r in fast] == [r["gpu"] for r in slow] and fast[-1]["gpu"] == "H100 SXM"
        for f, s in zip(fast, slow):
            assert f.keys() == s.keys()
            assert f == {k: pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for k, v in s.items()}
        assert problem.residuals(theta) == pytest.approx(np.log([r["ratio"] for r in slow]), rel=0, abs=1e-12)


def test_published_sglang_fit_is_a_minimum_and_reports_its_rms():
    # the example of docs/stacks.md: the printed RMS log error is that of the fitted predictions,
    # and moving either fitted parameter by 1% either way fits the points worse
    points, base_dir = load_points(ROOT / "validation" / "published.yaml")
    points = [p for p in points if p.stack == "sglang"]
    base = load_stack("sglang")
    problem = Problem(points, base_dir, base, ["fixed", "gemm"])
    best, info = fit(problem)  # what `calibrate` fits and prints (without its held-out refits)
    logs = np.log([a["predicted_ms"] / a["measured_ms"] for a in problem.rows(best)])
    assert info["rms_log_error"] == pytest.approx(np.sqrt(np.mean(logs ** 2)), rel=1e-9)
    cost = lambda theta: float(problem.residuals(theta) @ problem.residuals(theta))  # noqa: E731
    for step in ([0.01, 0], [-0.01, 0], [0, 0.01], [0, -0.01]):
        assert cost(best + step) > cost(best)


def test_measured_time_per_forward_error_and_rms_by_hand():
    """docs/validation.md and docs/stacks.md: measured ms per forward is the given ms, or
    1000 x tokens per forward / tokens/s, or 1000 x latency / NFE, or with answer tokens
    1000 x batch x answer / tokens/s / NFE; predicted = 1000 x time_s / NFE; error =
    max(pred/meas, meas/pred); the fit's RMS log error = sqrt(mean of ln(pred/meas)^2) after it."""
    from dlmcost import api

    wl = dict(scheme="mdm", prompt=128, gen=128, steps=8, block=16, batch=4)
    a = api.analyze(TINY, "h100", stack="hf-eager", **wl)["results"][0]
    nfe, pred_ms = a["nfe"], 1e3 * a["time_s"] / a["nfe"]
    assert nfe == 8
    given = [  # (measured, tokens_per_forward, answer_tokens) and the measured ms by hand
        (dict(ms_per_forward=2 * pred_ms), 1.0, None, 2 * pred_ms),
        (dict(tokens_per_s=4e3 / (1.25 * pred_ms)), 4.0, None, 1.25 * pred_ms),
        (dict(latency_s=0.8 * pred_ms * nfe / 1e3), 1.0, None, 0.8 * pred_ms),
        (dict(tokens_per_s=4 * 100 / (0.5 * pred_ms * nfe / 1e3)), 1.0, 100, 0.5 * pred_ms),
    ]
    points = [Point(id=f"p{i}", model=TINY, gpu="h100", workload=wl, measured=m, tokens_per_forward=tpf,
                    answer_tokens=ans) for i, (m, tpf, ans, _) in enumerate(given)]
    for p, (*_, meas_ms) in zip(points, given):
        row = compare(p, api.analyze(TINY, "h100", stack="hf-eager", **wl))
        assert row["measured_ms"] == pytest.approx(meas_ms, rel=1e-12)
        assert row["predicted_ms"] == pytest.approx(pred_ms, rel=1e-12)
        assert row["ratio"] == pytest.approx(pred_ms / meas_ms, rel=1e-12)
        assert row["error"] == pytest.approx(max(pred_ms / meas_ms, meas_ms / pred_ms), rel=1e-12)
    res = calibrate(points, ROOT, load_stack("hf-eager"), ["fixed"], "fit")
    assert [r["error"] for r in res["before"]] == pytest.approx([2.0, 1.25, 1.25, 2.0], rel=1e-12)
    logs = [math.log(r["predicted_ms"] / r["measured_ms"]) for r in res["after"]]
    assert res["rms_log_error"] == pytest.approx(math.sqrt(sum(x * x for x in logs) / len(logs)), rel=1e-9)


@pytest.mark.parametrize("bad", [dict(measured=dict(ms_per_forward="20")), dict(tokens_per_forward=True),
                                 dict(measured=dict(tokens_per_s=True)), dict(in_sample="yes"),
                                 dict(workload=dict(AR, prompt=True)), dict(workload=dict(AR, gen="64")),
                                 dict(workload=dict(AR, cfg=1))])
def test_a_point_with_a_typed_typo_is_refused(tmp_path, capsys, bad):
    """Strict, as stack and scenario files: a quoted number or a boolean where a number belongs (or
    a word where a boolean does) is a typo, refused with the file named, not read as 20 or 1."""
    src = tmp_path / "m.yaml"
    src.write_text(yaml.safe_dump(dict(points=[GOOD, dict(GOOD, id="bad", **bad)])))
    assert main(["calibrate", str(src), "--fit", "fixed", "-o", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
