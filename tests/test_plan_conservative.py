"""`plan --conservative`: every candidate searched at its stack's error band's slower end (every
step `high` times as long as predicted, each first token further to the first-token band's
`high`), checked against the formulas by hand and against the predicted plan's own band ends,
which reach the same numbers by another route (a second search of each row, plan/replicas/bands.py)."""

from __future__ import annotations

import json
import math

import pytest

from dlmcost import api
from dlmcost.cli import main
from dlmcost.inputs import error_bands

AR_MODEL = "Qwen/Qwen2.5-7B"

pytestmark = pytest.mark.usefixtures("bundled_offline")


def _bands(vendor: str) -> dict:
    """sglang's band on a vendor's parts, as the bands file holds it (what --conservative reads)."""
    entry = json.loads(error_bands.BANDS_FILE.read_text())["bands"]["sglang"]
    return entry["vendors"][vendor]


def _plan(capsys, *args) -> tuple[int, dict, str]:
    capsys.readouterr()
    rc = main([str(a) for a in ("plan", AR_MODEL, "--stack", "sglang", "--tp", "1", "--precision", "bf16",
                                "--prompt", "256", "--answer", "128", "--max-batch", "8", "--requests", "200",
                                *args, "-f", "json")])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else {}), err


def _capacity(gpu: str) -> float:
    """One replica's requests/s with its batch of 8 always full, from `api.analyze` (not plan's code)."""
    a = api.analyze(AR_MODEL, gpu, scheme="ar", prompt=256, gen=128, batch=8, stack="sglang")["results"][0]
    return 8 / a["time_s"]


def test_the_gpus_at_the_slower_end_by_hand(capsys):
    """No latency target, fixed lengths: the fewest replicas keep utilisation below 1, R =
    floor(rate / capacity) + 1, and a replica whose every step is `high` times as long has capacity
    / high: R = floor(rate high / capacity) + 1 on one MI300X at 0.8 of its predicted capacity (2 at
    sglang's AMD band, where the prediction needs 1), its range from the faster end to it."""
    amd = _bands("amd")
    rate = 0.8 * _capacity("mi300x")
    rc, doc, err = _plan(capsys, "--gpu", "mi300x", "--rate", rate, "--conservative")
    assert rc == 0, err
    (top,) = doc["deployments"]
    expected = [math.floor(0.8 * k) + 1 for k in (amd["low"], amd["high"])]
    assert expected[1] > 1  # the case this tests: the prediction's one replica is not enough here
    assert top["gpus"] == expected[1] and top["intervals"]["gpus"] == expected
    assert top["step_time_scale"] == amd["high"] and doc["search"]["conservative"] is True
    assert "likely optimistic" not in err  # planned at the slower end: nothing left to warn of


def test_a_lone_request_slows_by_the_band_and_its_first_token_by_the_first_token_band(capsys):
    """At a load so light that every request runs alone (one replica, no queue), each latency is the
    request's passes, so at the slower end it is the prediction's times the band's `high`, and the
    time to the first token the prediction's times the first-token band's `high` (the band's own
    end, times its excess `ErrorBand.first_token_scales`)."""
    for vendor, gpu in (("amd", "mi300x"), ("nvidia", "h100")):
        band = _bands(vendor)
        said = {}
        for mode in ((), ("--conservative",)):
            rc, doc, err = _plan(capsys, "--gpu", gpu, "--rate", 0.001, *mode)
            assert rc == 0, err
            said[mode] = doc["deployments"][0]
        predicted, slow = said[()], said[("--conservative",)]
        assert predicted["gpus"] == slow["gpus"] == 1
        for key in ("p50_latency_s", "p95_latency_s", "p99_latency_s"):
            assert slow[key] == pytest.approx(predicted[key] * band["high"], rel=1e-9)
        assert slow["p95_first_block_s"] == pytest.approx(predicted["p95_first_block_s"]
                                                          * band["first_token"]["high"], rel=1e-9)


def test_the_ranking_is_the_predicted_plans_slower_ends(capsys):
    """One MI300X ($2/h) or one H100 ($3/h), fp8, at 0.8 of one MI300X's predicted capacity: by the
    prediction one of either meets it and the MI300X is cheaper; at the bands' slower ends a replica
    serves capacity / H, so R = floor(rate H / capacity) + 1 (capacities from `api.analyze`, not from
    plan's code): two MI300X ($4/h) against one H100, which --conservative recommends. Each of its rows
    is what the predicted plan's own band ends give for the same candidate (a second search of each)."""
    def capacity(gpu):
        a = api.analyze(AR_MODEL, gpu, scheme="ar", prompt=256, gen=128, batch=8, stack="sglang",
                        precision="fp8")["results"][0]
        return 8 / a["time_s"]

    amd, nvidia = _bands("amd")["high"], _bands("nvidia")["high"]
    cap = {"MI300X": capacity("mi300x"), "H100 SXM": capacity("h100")}
    rate = 0.8 * cap["MI300X"]
    slow_end = {gpu: math.floor(rate * k / cap[gpu]) + 1 for gpu, k in (("MI300X", amd), ("H100 SXM", nvidia))}
    assert rate < min(cap.values()) and slow_end == {"MI300X": 2, "H100 SXM": 1}  # the case this tests
    common = ("--gpu", "mi300x,h100", "--rate", rate, "--precision", "fp8", "--price", "mi300x=2", "--price", "h100=3",
              "--limit", "0")
    rc, predicted, err = _plan(capsys, *common)
    assert rc == 0, err
    assert [(d["gpu"], d["gpus"]) for d in predicted["deployments"]] == [("MI300X", 1), ("H100 SXM", 1)]
    rc, slow, err = _plan(capsys, *common, "--conservative")
    assert rc == 0, err
    assert [(d["gpu"], d["gpus"]) for d in slow["deployments"]] == [("H100 SXM", 1), ("MI300X", 2)]
    ends = {d["gpu"]: d["intervals"] for d in predicted["deployments"]}
    for d in slow["deployments"]:
        assert d["gpus"] == ends[d["gpu"]]["gpus"][1] == slow_end[d["gpu"]]
        assert d["usd_per_mtok"] == pytest.approx(ends[d["gpu"]]["usd_per_mtok"][1], rel=1e-12)
        assert d["p95_latency_s"] == pytest.approx(ends[d["gpu"]]["p95_latency_s"][1], rel=1e-12)
        assert d["intervals"]["gpus"][0] == ends[d["gpu"]]["gpus"][0]


def test_the_scenario_field_is_the_option_and_a_string_is_refused(capsys, tmp_path):
    rate = 0.7 * _capacity("mi300x")
    good = tmp_path / "good.yaml"
    good.write_text("search:\n  conservative: true\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("search:\n  conservative: 'yes'\n")
    rc, by_file, err = _plan(capsys, "--gpu", "mi300x", "--rate", rate, "-s", good)
    assert rc == 0, err
    rc, by_option, _ = _plan(capsys, "--gpu", "mi300x", "--rate", rate, "--conservative")
    assert by_file["deployments"] == by_option["deployments"]
    rc, _, err = _plan(capsys, "--gpu", "mi300x", "--rate", rate, "-s", bad)
    assert rc == 2 and err.count("\n") == 1 and "search.conservative" in err


def test_the_warning_names_the_option(capsys, sglang_amd_band_above_one):
    low = sglang_amd_band_above_one["low"]
    assert low > 1  # the case this tests: the AMD band lies above 1
    rate = (1 + 1 / low) / 2 * _capacity("mi300x")  # one replica predicted, even the band's faster end needs two
    rc, _, err = _plan(capsys, "--gpu", "mi300x", "--rate", rate)
    assert rc == 0 and "likely optimistic" in err and "--conservative plans at the bands' slower ends" in err


def test_the_table_says_it_is_planned_at_the_slower_end(capsys):
    rate = 0.7 * _capacity("mi300x")
    capsys.readouterr()
    rc = main([str(a) for a in ("plan", AR_MODEL, "--stack", "sglang", "--gpu", "mi300x", "--tp", "1", "--precision",
                                "bf16", "--rate", rate, "--requests", "200", "--conservative")])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "planned at each band's slower end (--conservative)" in out
