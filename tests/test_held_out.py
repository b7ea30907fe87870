"""A calibration's own error band: `calibrate` predicts each measurement with a fit that did not
see it, writes the 10th-90th percentile of measured / predicted into the stack file, and serve and
plan draw their ranges from it, saying how much narrower it is than the published band.

The expected values are computed here, not by the code: on a stack whose every pass is host-bound
(5 ms of host time per layer against microseconds of GPU work for the tiny model), the predicted
time per forward is c_i x h (h = host.us_per_layer, the one fitted parameter), so the least-squares
fit of ln(predicted / measured) has ln h = mean of ln(m_i / c_i), and without point i its mean over
the others. Measured times made as the truth's prediction x e_i give the held-out ratio

    r_i = m_i / (c_i h_-i) = e_i / (geometric mean of e_j over j != i)

whatever c_i and the truth's h are."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from dlmcost import api
from dlmcost.calibration.measurements import Point, analysis_for, compare
from dlmcost.inputs import error_bands
from dlmcost.inputs.stacks import bundled_stack_dir

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "examples" / "tiny-dlm.yaml")
MODEL = "GSAI-ML/LLaDA-8B-Instruct"
FACTORS = [1.0, 1.05, 0.95, 1.1, 0.9, 1.02, 0.98]  # measured / the truth's prediction, point by point
WORKLOADS = [dict(scheme="ar", prompt=64, gen=64, batch=1), dict(scheme="mdm", prompt=64, gen=64, steps=8, batch=2)]

pytestmark = pytest.mark.usefixtures("bundled_offline")


def host_bound_stack(tmp_path: Path) -> Path:
    """hf-eager with 5 ms of host time per layer and no fixed cost: every pass costs its host time."""
    data = yaml.safe_load((bundled_stack_dir() / "hf-eager.yaml").read_text())
    data["name"] = "host-bound"
    data["host"].update(us_per_layer=5000.0, fixed_us_per_forward=0.0)
    path = tmp_path / "host-bound.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def measurements(tmp_path: Path, stack: Path, factors=FACTORS) -> Path:
    points = []
    for i, e in enumerate(factors):
        wl = WORKLOADS[i % 2]
        stub = Point(id=f"p{i}", model=TINY, gpu="h100", workload=wl, measured=dict(ms_per_forward=1.0))
        predicted = compare(stub, analysis_for(stub, ROOT, stack=str(stack))[0])["predicted_ms"]
        points.append(dict(id=f"p{i}", model=TINY, gpu="h100", workload=wl, measured=dict(ms_per_forward=predicted * e)))
    path = tmp_path / "measured.yaml"
    path.write_text(yaml.safe_dump(dict(points=points)))
    return path


def held_out_by_hand(factors: list[float]) -> list[float]:
    n = len(factors)
    return [e / math.prod(f for j, f in enumerate(factors) if j != i) ** (1 / (n - 1)) for i, e in enumerate(factors)]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (the validation's bands' rule)."""
    xs = sorted(values)
    at = q / 100 * (len(xs) - 1)
    lo = math.floor(at)
    return xs[lo] + (at - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])


def pooled() -> dict:
    """The pooled band on NVIDIA parts (every measurement here is an H100's): the published band a
    calibration on them is set against, and a user's stack file's on an H100."""
    entry = json.loads(error_bands.BANDS_FILE.read_text())["bands"]["pooled"]
    return (entry.get("vendors") or {}).get("nvidia", entry)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The stack calibrated (`--fit host`) to the seven measurements, and what calibrate printed."""
    from dlmcost.cli import main

    tmp = tmp_path_factory.mktemp("held_out")
    stack = host_bound_stack(tmp)
    source, out = measurements(tmp, stack), tmp / "mine.yaml"
    args = ["calibrate", str(source), "--stack", str(stack), "--fit", "host", "--name", "mine", "-o", str(out)]
    import contextlib
    import io

    printed = {}
    for fmt in ("table", "json"):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main([*args, "-f", fmt]) == 0
        printed[fmt] = buffer.getvalue()
    return out, printed


def test_the_stored_band_is_the_leave_one_out_percentiles(calibrated):
    out, printed = calibrated
    held = yaml.safe_load(out.read_text())["held_out_error"]
    ratios = held_out_by_hand(FACTORS)
    assert held["ratios"] == pytest.approx(ratios, rel=1e-5)
    assert (held["low"], held["median"], held["high"]) == pytest.approx(
        (percentile(ratios, 10), percentile(ratios, 50), percentile(ratios, 90)), rel=1e-5)
    p = pooled()
    assert held["published"] == dict(stack="pooled", vendor="NVIDIA", low=p["low"], median=p["median"], high=p["high"],
                                     numbers=p["numbers"])
    doc = json.loads(printed["json"])
    assert [pt["held_out_ratio"] for pt in doc["points"]] == pytest.approx(ratios, rel=1e-5)
    assert doc["held_out"]["ratios"] == len(FACTORS)


def test_calibrate_prints_how_much_narrower(calibrated):
    _, printed = calibrated
    ratios = held_out_by_hand(FACTORS)
    low, high, p = percentile(ratios, 10), percentile(ratios, 90), pooled()
    narrower = math.log(p["high"] / p["low"]) / math.log(high / low)
    text = " ".join(printed["table"].split())
    assert (f"error band of the written stack: {low:.2f}–{high:.2f}× over 7 measurements, held out: each of your "
            f"measurements predicted by a fit without it; the pooled published band on NVIDIA parts {p['low']:.2f}–{p['high']:.2f}×: "
            f"narrower by {narrower:.3g}×") in text
    assert json.loads(printed["json"])["held_out"]["narrowing"] == pytest.approx(narrower, rel=1e-4)


def test_serve_names_the_calibrated_band_and_draws_its_ranges_from_it(calibrated, run):
    """One user: every time scales with the step, so the ranges are the prediction divided
    (speeds) or multiplied (times) by the calibrated band's ends, exactly."""
    out, _ = calibrated
    held = yaml.safe_load(out.read_text())["held_out_error"]
    lo, hi = held["low"], held["high"]
    args = ["serve", MODEL, "--gpu", "h100", "-c", "1", "--prompt", "64", "--answer", "32", "--requests", "100",
            "--stack", str(out)]
    rc, text, _ = run(*args, "-f", "json")
    assert rc == 0
    entry = json.loads(text)["deployments"][0]
    band, point = entry["deployment"]["error_band"], entry["points"][0]
    assert (band["source"], band["stack"], band["low"], band["high"], band["numbers"]) == (
        "calibration", "mine", lo, hi, 7)
    p = pooled()
    assert band["narrowing"] == pytest.approx(math.log(p["high"] / p["low"]) / math.log(hi / lo))
    tok, lat = point["output_tokens_per_s"], point["latency_s"]["median"]
    assert point["intervals"]["output_tokens_per_s"] == pytest.approx([tok / hi, tok / lo])
    assert point["intervals"]["latency_p50_s"] == pytest.approx([lat * lo, lat * hi])
    # a calibration measures passes, not first tokens: the published first-token band's excess over the
    # published speed band stays, on the calibrated band (the published first-token ratios were taken
    # against the uncalibrated prediction); one user: exactly the prediction times those ends
    first, ttfb = p["first_token"], point["ttfb_s"]["median"]
    ends = [lo * first["low"] / p["low"], hi * first["high"] / p["high"]]
    assert (first["low"], first["high"]) != (p["low"], p["high"])  # the case this tests: the excess is not 1
    assert [band["first_token"]["low"], band["first_token"]["high"]] == pytest.approx(ends)
    # and its median: the published first-token median's excess over the published speed median
    assert band["first_token"]["median"] == pytest.approx(held["median"] * first["median"] / p["median"])
    assert point["intervals"]["ttfb_p50_s"] == pytest.approx([ttfb * ends[0], ttfb * ends[1]])
    rc, text, _ = run(*args)
    said = " ".join(text.split())
    assert (f"error band: mine {lo:.2f}–{hi:.2f}× over 7 measurements, held out: each of your measurements "
            f"predicted by a fit without it; the pooled published band on NVIDIA parts {p['low']:.2f}–{p['high']:.2f}×: narrower by "
            f"{band['narrowing']:.3g}×") in said


def plan_at(run, stack: str, capacity_of) -> dict:
    """Plan one candidate (H100, TP1, bf16, block 32 at 2 tokens per forward, batch limit 8) at
    2.5 x its full-batch capacity under `stack` (capacity from `api.analyze`)."""
    a = api.analyze(MODEL, "h100", scheme="block", block=32, tpf=2, prompt=64, gen=32, batch=8, stack=stack)
    capacity_of.append(8 / a["results"][0]["time_s"])
    rate = 2.5 * capacity_of[-1]
    rc, text, _ = run("plan", MODEL, "--rate", rate, "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme",
                      "block", "--block", "32", "--tpf", "2", "--prompt", "64", "--answer", "32", "--max-batch", "8",
                      "--price", "h100=2", "--stack", stack, "-f", "json")
    assert rc == 0
    return json.loads(text)


def test_plan_intervals_shrink_to_the_calibrated_band(calibrated, run, tmp_path):
    """No latency target: the fewest replicas keep utilisation below 1, R = floor(rate / (capacity
    / k)) + 1 at band end k. At 2.5 x capacity the pooled speed band (the bands file's: its ends
    move with the validation) needs more GPUs at its high end than at its low end; the calibrated
    band (within 0.9–1.1) needs 3 at both ends."""
    out, _ = calibrated
    held = yaml.safe_load(out.read_text())["held_out_error"]
    by_hand = lambda band: [math.floor(2.5 * k) + 1 for k in band]  # noqa: E731  (rate / capacity = 2.5)
    capacities = []
    mine = plan_at(run, str(out), capacities)
    d = mine["deployments"][0]["intervals"]
    assert d["band"] == [held["low"], held["high"]] and d["band_stack"] == "mine"
    assert d["gpus"] == by_hand([held["low"], held["high"]]) == [3, 3]
    assert mine["search"]["error_bands"][str(out)]["source"] == "calibration"
    published = plan_at(run, str(host_bound_stack(tmp_path)), capacities)  # the stack it was calibrated from
    p = pooled()
    wide = published["deployments"][0]["intervals"]
    ends = by_hand([p["low"], p["high"]])
    assert wide["gpus"] == ends and ends[0] < ends[1]
    assert published["search"]["error_bands"][f"{host_bound_stack(tmp_path)} on NVIDIA parts"]["source"] == "validation"
    ratio = lambda iv: iv["usd_per_mtok"][1] / iv["usd_per_mtok"][0]  # noqa: E731
    assert ratio(d) == pytest.approx(1.0) and ratio(wide) == pytest.approx(ends[1] / ends[0])


def test_fewer_than_six_held_out_keep_the_published_band_widened():
    """Three held-out ratios: the published band, each end moved out to the farthest ratio past it;
    the published median; and 'wider' where it moved."""
    from dlmcost.calibration.held_out import held_out_band
    from dlmcost.inputs.error_bands import ErrorBand

    published = ErrorBand("sglang", 0.9, 1.3, 1.6, 37, "")
    band = held_out_band([0.5, 1.0, 1.2], published, 3)
    assert (band["low"], band["median"], band["high"]) == (0.5, 1.3, 1.6)
    assert "fewer than 6" in band["basis"] and "widened" in band["basis"]
    same = held_out_band([1.0, 1.1], published, 4)
    assert (same["low"], same["high"]) == (0.9, 1.6)
    assert "widened" not in same["basis"] and "2 of 4 could not be left out" in same["basis"]
    assert held_out_band([1.0], None, 1) is None  # nothing to widen: no band


def test_folds_by_hand():
    """Up to ten measurements, each its own fold; beyond, ten folds, measurement i in fold i mod 10
    (12 points: 0 and 10 together, 1 and 11, then one each)."""
    from dlmcost.calibration.held_out import folds

    assert [f.tolist() for f in folds(7)] == [[i] for i in range(7)]
    assert [f.tolist() for f in folds(10)] == [[i] for i in range(10)]
    assert [f.tolist() for f in folds(12)] == [[0, 10], [1, 11]] + [[i] for i in range(2, 10)]
    assert [f.tolist() for f in folds(25)][4] == [4, 14, 24]


def test_six_held_out_ratios_make_a_band_of_their_own():
    """Six ratios (the least that make a band): the 10th, 50th and 90th percentile, linear between
    order statistics: at ranks 0.5, 2.5 and 4.5 of 1.0..1.5, 1.05, 1.25, 1.45; the basis says each
    is held out by leaving it alone out up to ten measurements, by its fold beyond."""
    from dlmcost.calibration.held_out import held_out_band
    from dlmcost.inputs.error_bands import ErrorBand

    published = ErrorBand("sglang", 0.9, 1.3, 1.6, 37, "")
    ratios = [1.3, 1.0, 1.5, 1.1, 1.4, 1.2]
    band = held_out_band(ratios, published, 6)
    assert (band["low"], band["median"], band["high"]) == pytest.approx((1.05, 1.25, 1.45))
    assert band["basis"] == "held out: each of your measurements predicted by a fit without it"
    assert held_out_band(ratios, published, 10)["basis"].endswith("a fit without it; 4 of 10 could not be left out")
    assert held_out_band(ratios, published, 11)["basis"].endswith("a fit without its fold (10 folds); "
                                                                  "5 of 11 could not be left out")


def test_a_band_of_no_width_has_no_narrowing():
    """Six equal ratios: a band of no width, which `calibrate` says as such instead of dividing by 0."""
    from dlmcost.calibration.held_out import held_out_band, summary
    from dlmcost.inputs.error_bands import ErrorBand
    from dlmcost.render.evidence import narrowing_phrase

    band = held_out_band([1.1] * 6, ErrorBand("sglang", 0.9, 1.3, 1.6, 37, ""), 6)
    assert (band["low"], band["high"]) == pytest.approx((1.1, 1.1))
    said = summary(band)
    assert said["narrowing"] is None and narrowing_phrase(said["narrowing"]).startswith("of no width")
