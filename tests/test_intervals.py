"""Intervals: `serve` simulates each load again with every step time at the two ends of its
stack's error band (dlmcost/inputs/error_bands.json, which the validation writes from its
out-of-source errors: tests/test_validation.py checks it is what the rows give). With one user
and no think time every time in the run scales with the steps, so the interval is the prediction
divided (speeds) or multiplied (times, costs) by the band's ends, exactly."""

from __future__ import annotations

import json
import math

import pytest

from dlmcost import api
from dlmcost.inputs import error_bands

MODEL = "GSAI-ML/LLaDA-8B-Instruct"


def on_nvidia(stack: str) -> dict:
    """A stack's band on NVIDIA parts, as the bands file holds it (its `vendors` entry, where the
    validation has bands per vendor): the band an H100 or H200 deployment's intervals take."""
    entry = json.loads(error_bands.BANDS_FILE.read_text())["bands"][stack]
    return (entry.get("vendors") or {}).get("nvidia", entry)


pytestmark = pytest.mark.usefixtures("bundled_offline")


def test_one_user_scales_exactly_with_the_band():
    band = on_nvidia("sglang-dllm")
    r = api.serve(MODEL, api.ClosedLoop(1), api.ServeSetup(gpu="h100"), prompt=256, answer=128)
    d, (p,) = r.deployment, r.points
    assert d["error_band"]["low"] == band["low"] and d["error_band"]["high"] == band["high"]
    lo, hi = band["low"], band["high"]
    iv = p.intervals
    assert iv["output_tokens_per_s"] == pytest.approx([p.output_tokens_per_s / hi, p.output_tokens_per_s / lo])
    assert iv["tokens_per_s_per_user"] == pytest.approx([p.tokens_per_s_per_user / hi, p.tokens_per_s_per_user / lo])
    assert iv["latency_p50_s"] == pytest.approx([p.latency_s["median"] * lo, p.latency_s["median"] * hi])
    assert iv["usd_per_mtok"] == pytest.approx([p.usd_per_mtok * lo, p.usd_per_mtok * hi])


def test_a_stack_file_takes_the_pooled_band(tmp_path):
    from dlmcost.inputs.stacks import bundled_stack_dir

    mine = tmp_path / "mine.yaml"
    mine.write_text((bundled_stack_dir() / "sglang.yaml").read_text().replace("name: sglang", "name: mine"))
    pooled = json.loads(error_bands.BANDS_FILE.read_text())["bands"]["pooled"]
    band = error_bands.band_for(str(mine))
    assert (band.low, band.high, band.numbers) == (pooled["low"], pooled["high"], pooled["numbers"])
    assert "pooled" in band.basis


def test_plan_gpus_at_the_band_ends_by_hand(capsys):
    """No latency target, fixed lengths, batch limit 8 on one H100 or one H200 (SGLang's usual
    path): the fewest replicas keep utilisation below 1, R = floor(rate / capacity) + 1; at the ends
    of the stack's band every step is `low` or `high` times as long, so a replica's capacity is
    capacity / low or capacity / high, and R follows (capacity from `api.analyze`, not from plan's
    code), for every row shown, not the first alone."""
    from dlmcost.cli import main

    band = on_nvidia("sglang")
    capacity = {}
    for gpu in ("h100", "h200"):
        a = api.analyze(MODEL, gpu, scheme="block", block=32, tpf=2, prompt=256, gen=128, batch=8,
                        stack="sglang")["results"][0]
        capacity[gpu] = 8 / a["time_s"]
    rate = 2.5 * capacity["h100"]
    capsys.readouterr()
    rc = main([str(x) for x in ("plan", MODEL, "--rate", rate, "--gpu", "h100,h200", "--tp", "1", "--precision",
                                "bf16", "--scheme", "block", "--block", "32", "--tpf", "2", "--prompt", "256",
                                "--answer", "128", "--max-batch", "8", "--price", "h100=2", "--price", "h200=3",
                                "--max-usd-per-mtok", "1000", "--stack", "sglang", "-f", "json")])
    rows = json.loads(capsys.readouterr().out)["deployments"]
    assert rc == 0 and sorted(d["gpu"] for d in rows) == ["H100 SXM", "H200 SXM"]
    for d in rows:
        gpu, price = ("h100", 2.0) if d["gpu"] == "H100 SXM" else ("h200", 3.0)
        expected = [math.floor(rate / (capacity[gpu] / k)) + 1 for k in (band["low"], band["high"])]
        assert d["intervals"]["gpus"] == expected
        assert d["intervals"]["band"] == [band["low"], band["high"]]
        tokens_per_s = rate * 128
        assert d["intervals"]["usd_per_mtok"] == pytest.approx([price * r / (tokens_per_s * 3600) * 1e6
                                                                for r in expected])


def test_plan_table_and_csv_carry_the_band_ends():
    """The table's band columns: the GPUs at the two ends as 'low–high' (one number when they
    agree, 'none' for an end where no replica count meets the targets; '-' without a band), the p95 latency the same way; the CSV
    has each end as its own column."""
    from dlmcost.render.plan import PLAN_HEADERS, plan_csv_rows, plan_table

    base = dict(model=MODEL, gpu="H100 SXM", decoding="mdm/1", replicas=1, tp=1, precision="bf16", max_running=8,
                p50_latency_s=1.0, p95_latency_s=2.0, p95_first_block_s=0.5, tokens_per_s_per_user=10.0,
                capacity_rps=3.0, headroom=0.5, usd_per_hour=2.0, usd_per_mtok=1.0, joules_per_token=1.0)
    rows = [dict(base, intervals=dict(gpus=[1, 3], usd_per_mtok=[1.0, 3.0], p95_latency_s=[2.5, 4.25],
                                      band=[1.2, 1.6], band_stack="s")),
            dict(base, intervals=dict(gpus=[2, None], usd_per_mtok=[2.0, None], p95_latency_s=[2.5, None],
                                      band=[1.2, 1.6], band_stack="s")),
            dict(base, intervals=dict(gpus=[1, 1], usd_per_mtok=[1.0, 1.0], p95_latency_s=[3.0, 3.0],
                                      band=[1.2, 1.6], band_stack="s")),
            base]
    headers, cells = plan_table(rows, show_decoding=False)
    at = headers.index("GPUs\n(band)"), headers.index("$/Mtok\nband"), headers.index("p95 s\nband")
    assert [[row[i] for i in at] for row in cells] == [["1 (1–3)", "1–3", "2.5–4.2"], ["1 (2–none)", "2–none", "2.5–none"],
                                                       ["1 (1)", "1", "3"], ["1", "-", "-"]]
    assert headers[-3:] == PLAN_HEADERS[-3:]
    csv = plan_csv_rows(dict(deployments=rows, ar_baseline=[]))
    assert (csv[0]["gpus_band_low"], csv[0]["gpus_band_high"], csv[0]["p95_latency_s_band_high"],
            csv[0]["band_stack"]) == (1, 3, 4.25, "s")
    assert csv[3]["gpus_band_low"] is None


def test_serve_prints_the_band_and_the_ranges(capsys):
    """One user: the table of the band's ends shows output tokens/s as predicted / high – predicted
    / low and the median latency as predicted x low – x high (the band from its file, the
    predictions from the JSON), and the header names the band and the published decoding."""
    from dlmcost.cli import main
    from dlmcost.render.serve import n3

    band = on_nvidia("sglang-dllm")
    args = ["serve", MODEL, "--gpu", "h100", "-c", "1", "--prompt", "256", "--answer", "128", "--requests", "100"]
    capsys.readouterr()
    assert main([*args, "-f", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["deployments"][0]["points"][0]
    assert main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    tok, lat = p["output_tokens_per_s"], p["latency_s"]["median"]
    assert f"{n3(tok / band['high'])}–{n3(tok / band['low'])}" in text
    assert f"{n3(lat * band['low'])}–{n3(lat * band['high'])}" in text
    assert (f"error band: sglang-dllm on NVIDIA parts {band['low']:.2f}–{band['high']:.2f}× over {band['numbers']} "
            f"measurements") in text
    assert "token per forward: LLaDA-8B-Instruct" in text


AR_MODEL = "Qwen/Qwen2.5-7B"


def test_one_user_ttfb_moves_by_the_first_token_band():
    """SGLang's time-to-first-token numbers make a band of their own (wider than its speed band).
    One user: every time scales with the steps, so at each end the TTFB is the prediction times
    the speed band's end times the first-token scale (first-token end / speed end), i.e. the
    prediction times the first-token band's end; the other times move by the speed band."""
    band = on_nvidia("sglang")
    first = band["first_token"]
    # the case this tests: the two bands differ by more than 5% at one end at least (sglang's first tokens on
    # NVIDIA parts run further to the optimistic side than its speed), far beyond the checks' tolerance
    assert max(abs(first["low"] / band["low"] - 1), abs(first["high"] / band["high"] - 1)) > 0.05
    r = api.serve(AR_MODEL, api.ClosedLoop(1), api.ServeSetup(gpu="h100", stack="sglang"), prompt=512, answer=64)
    d, (p,) = r.deployment, r.points
    assert d["error_band"]["first_token"]["high"] == first["high"]
    iv = p.intervals
    assert iv["ttfb_p50_s"] == pytest.approx([p.ttfb_s["median"] * first["low"], p.ttfb_s["median"] * first["high"]])
    assert iv["latency_p50_s"] == pytest.approx([p.latency_s["median"] * band["low"], p.latency_s["median"] * band["high"]])
    assert iv["output_tokens_per_s"] == pytest.approx([p.output_tokens_per_s / band["high"],
                                                       p.output_tokens_per_s / band["low"]])


def test_plan_holds_a_first_block_target_at_the_first_token_bands_ends(capsys):
    """A first-block target between the lone first block at the speed band's high end and at the
    first-token band's: met at the low end, no replica count meets it at the high end (None),
    where scaling the steps by the speed band alone would meet it. The lone first block comes from
    `api.serve` at one user (a request alone on a replica: its prompt pass), not from plan."""
    from dlmcost.cli import main

    band = on_nvidia("sglang")
    first = band["first_token"]
    r = api.serve(AR_MODEL, api.ClosedLoop(1), api.ServeSetup(gpu="h100", tp=1, precision="bf16", stack="sglang"),
                  prompt=512, answer=64)
    lone = r.points[0].ttfb_s["median"]
    target = lone * (band["high"] + first["high"]) / 2
    assert lone * first["low"] < target and lone * band["high"] < target < lone * first["high"]
    capsys.readouterr()
    rc = main([str(x) for x in ("plan", AR_MODEL, "--rate", 0.05, "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                                "--prompt", "512", "--answer", "64", "--stack", "sglang", "--price", "h100=2",
                                "--first-block-p95", target, "-f", "json")])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    (d,) = [d for d in out["deployments"] if d["replicas"] == 1]
    assert d["intervals"]["gpus"] == [1, None]


def test_the_header_names_a_first_token_band_only_where_it_differs():
    """The first-token band is named (with how a TTFB interval moves) where its ends differ from the
    speed band's at the printed two decimals, and not otherwise."""
    from dlmcost.render.evidence import band_meaning, first_token_phrase

    speed = dict(stack="s", low=1.03, high=1.33, numbers=10, basis="b")
    apart = dict(speed, first_token=dict(low=1.09, median=1.2, high=2.73, numbers=14, basis="all its numbers"))
    same = dict(speed, first_token=dict(low=1.031, median=1.2, high=1.329, numbers=10, basis="its speed band"))
    assert first_token_phrase(apart) == "; time to first token 1.09–2.73× over 14 measurements, all its numbers"
    assert first_token_phrase(apart, basis=False) == " (time to first token 1.09–2.73×)"
    assert first_token_phrase(same) == first_token_phrase(speed) == ""
    # both bands read at two decimals: a speed band of 1.031–1.329 prints as 1.03–1.33, as does a
    # first-token band of 1.034–1.326
    finer = dict(speed, low=1.031, high=1.329, first_token=dict(low=1.034, median=1.2, high=1.326, numbers=10,
                                                                 basis="its speed band"))
    assert first_token_phrase(finer) == ""
    assert band_meaning([apart]).endswith("the time to first token further to its own band's ends")
    assert "first token" not in band_meaning([same, speed])


def test_an_amd_deployment_takes_the_amd_band_and_is_warned_optimistic(capsys, sglang_amd_band_above_one):
    """On an MI300X the intervals come from sglang's band on AMD parts (the bands' `vendors`
    entry; here one lying above 1, as the SGLang cookbook's MI300X runs once made it), not its NVIDIA band; the
    band lies above 1 at both ends, so with the rate at f = (1 + 1 / low) / 2 of one replica's capacity
    (from `api.analyze`; 1 / low < f < 1) even the faster end (steps low x as long: capacity / low < rate) needs more than
    one replica, and plan warns that the recommendation is optimistic, with the GPUs at the ends
    its JSON gives. The same plan on an H100 (band below 1 at its faster end) is not warned."""
    from dlmcost.cli import main

    amd = sglang_amd_band_above_one
    assert amd["low"] > 1  # the case this tests
    f = (1 + 1 / amd["low"]) / 2  # under one replica's capacity, over its capacity at the band's faster end
    capacity = {}
    for gpu in ("mi300x", "h100"):
        a = api.analyze(AR_MODEL, gpu, scheme="ar", prompt=256, gen=128, batch=8, stack="sglang")["results"][0]
        capacity[gpu] = 8 / a["time_s"]
    said = {}
    for gpu in ("mi300x", "h100"):
        capsys.readouterr()
        rc = main([str(x) for x in ("plan", AR_MODEL, "--rate", f * capacity[gpu], "--gpu", gpu, "--tp", "1",
                                    "--precision", "bf16", "--prompt", "256", "--answer", "128", "--max-batch", "8",
                                    "--stack", "sglang", "--requests", "200", "-f", "json")])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        said[gpu] = (json.loads(captured.out), " ".join(captured.err.split()))
    doc, err = said["mi300x"]
    top = doc["deployments"][0]
    assert top["intervals"]["band"] == [amd["low"], amd["high"]]
    assert top["intervals"]["band_stack"] == "sglang on AMD parts"
    # no latency target: R = floor(rate / (capacity / k)) + 1 at band end k (test_plan_gpus_at_the_band_ends_by_hand)
    ends = [math.floor(f * k) + 1 for k in (amd["low"], amd["high"])]
    assert top["intervals"]["gpus"] == ends and ends[0] > top["gpus"] == 1
    assert (f"the recommended 1 x MI300X (TP1, bf16, ar) is likely optimistic: its error band (sglang on AMD parts, "
            f"{amd['low']:.2f}–{amd['high']:.2f}×) lies above 1") in err
    span = f"{ends[0]}" if ends[0] == ends[1] else f"{ends[0]}–{ends[1]}"  # one count where the ends agree
    assert f"slower than predicted: {span} GPUs at its ends, not 1" in err
    assert "likely optimistic" not in said["h100"][1]
    assert said["h100"][0]["deployments"][0]["intervals"]["band_stack"] == "sglang on NVIDIA parts"


def test_a_band_of_one_gives_the_point_itself(monkeypatch):
    """A band whose ends are both 1 runs each end as the point ran: the same requests, arrivals
    and seed, so every interval is [value, value] even under random arrivals and lengths; a metric
    with no value (None) or an infinite one gets no interval."""
    from dlmcost.serving import deployment
    from dlmcost.serving.deployment import bands

    one = error_bands.ErrorBand("one", 1.0, 1.0, 1.0, 6, "a band of no width")
    monkeypatch.setattr(deployment, "band_for", lambda stack, vendor=None: one)
    monkeypatch.setitem(bands.INTERVAL_METRICS, "nothing", lambda p: None)
    monkeypatch.setitem(bands.INTERVAL_METRICS, "endless", lambda p: math.inf)
    r = api.serve(MODEL, api.OpenLoop(3.0), api.ServeSetup(gpu="h100"), prompt="p50:200,p90:600", answer=128,
                  requests=120, seed=7)
    (p,) = r.points
    iv = p.intervals
    assert "nothing" not in iv and "endless" not in iv
    assert iv["latency_p99_s"] == [p.latency_s["p99"]] * 2 and iv["ttfb_p50_s"] == [p.ttfb_s["median"]] * 2
    assert iv["output_tokens_per_s"] == [p.output_tokens_per_s] * 2


def test_a_bands_record_without_a_first_token_band_or_a_published_one():
    band = error_bands.ErrorBand("x", 0.9, 1.0, 1.2, 6, "mine")
    record = band.record()
    assert record["first_token"] is None and record["published"] is None and record["narrowing"] is None
    assert band.first_token_scales() == (1.0, 1.0)


def _calibrated_stack(tmp_path, published: dict | None):
    """sglang's stack file with a held-out band of 0.8-1.25 (median 1.0) of its own."""
    import yaml

    from dlmcost.inputs.stacks import bundled_stack_dir

    data = yaml.safe_load((bundled_stack_dir() / "sglang.yaml").read_text())
    data["name"] = "mine"
    data["held_out_error"] = dict(ratios=[0.8, 0.9, 1.0, 1.0, 1.1, 1.25], low=0.8, median=1.0, high=1.25,
                                  basis="six held-out measurements")
    if published is not None:
        data["held_out_error"]["published"] = published
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_calibrated_bands_first_token_band_is_its_published_stacks_excess(tmp_path, monkeypatch):
    """Calibrated from sglang: the first-token band is the calibrated band times sglang's own
    first-token band / its speed band, end by end (not the pooled band's excess); a calibrated
    band with no published band behind it takes the pooled excess, and without a generated
    bands file it has no first-token band."""
    bands = json.loads(error_bands.BANDS_FILE.read_text())["bands"]
    for name in ("sglang", "pooled"):
        b = bands[name]
        published = None if name == "pooled" else {k: b[k] for k in ("low", "median", "high", "numbers")} | {"stack": name}
        band = error_bands.band_for(_calibrated_stack(tmp_path, published))
        assert (band.low, band.median, band.high, band.source) == (0.8, 1.0, 1.25, "calibration")
        f = b["first_token"]
        assert (band.first_token.low, band.first_token.median, band.first_token.high) == (
            pytest.approx(0.8 * f["low"] / b["low"]), pytest.approx(f["median"] / b["median"]),
            pytest.approx(1.25 * f["high"] / b["high"]))
        if published is None:
            assert band.published is None and band.narrowing is None
        else:
            assert band.published.low == b["low"]
    monkeypatch.setattr(error_bands, "_bands", lambda: {})
    assert error_bands.band_for(_calibrated_stack(tmp_path, None)).first_token is None


def test_a_band_says_whose_numbers_it_is_from(tmp_path):
    """A bundled stack's band carries the generated file's bases, speed and first-token; a stack
    file without validation says it takes the pooled bands."""
    from dlmcost.inputs.stacks import bundled_stack_dir

    entry = json.loads(error_bands.BANDS_FILE.read_text())["bands"]["sglang"]
    band = error_bands.published_band_for("sglang")
    assert (band.basis, band.first_token.basis) == (entry["basis"], entry["first_token"]["basis"])
    mine = tmp_path / "mine.yaml"
    mine.write_text((bundled_stack_dir() / "sglang.yaml").read_text().replace("name: sglang", "name: mine"))
    band = error_bands.band_for(str(mine))
    assert band.basis == f"pooled band of every stack ({mine} has no validation of its own)"
    assert band.first_token.basis == f"pooled first-token band of every stack ({mine} has no validation of its own)"
    # the pooled band asked for itself (no stack, or by its name) is its own: it says its own basis
    pooled = json.loads(error_bands.BANDS_FILE.read_text())["bands"][error_bands.POOLED]
    for asked in (None, error_bands.POOLED):
        band = error_bands.published_band_for(asked)
        assert (band.basis, band.first_token.basis) == (pooled["basis"], pooled["first_token"]["basis"])


@pytest.mark.parametrize("gpus_at_ends, said", [
    ([3, 4], "3–4 GPUs at its ends, not 2 (--conservative"),
    ([3, 3], "3 GPUs at its ends, not 2 (--conservative"),
    # the faster end's count the recommendation's own: the slower end, where none meets, is the news
    ([2, None], "2 GPUs at its faster end and no replica count meeting the targets at its slower end (--conservative"),
    ([3, None], "3 GPUs at its faster end (not 2) and no replica count meeting the targets at its slower end"),
    ([None, None], "no replica count meets the targets at either end (--conservative"),
    ([2, 3], None),  # its own GPUs at the faster end: no warning
])
def test_the_optimistic_warning_says_each_end_as_it_is(gpus_at_ends, said):
    """plan's warning where the recommended deployment's band lies above 1: the GPUs at each end
    as its intervals give them, an end where no replica count meets the targets said so (once said
    '2 GPUs at its ends, not 2' where only the faster end met them)."""
    import warnings
    from types import SimpleNamespace

    from dlmcost.plan import _warn_if_band_is_slower

    top = SimpleNamespace(replicas=2, gpu="H100 SXM", tp=1, precision="fp8", decoding="ar", gpus=2,
                          intervals={"band": [1.17, 1.34], "band_stack": "vllm on NVIDIA parts", "gpus": gpus_at_ends})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _warn_if_band_is_slower(SimpleNamespace(deployments=[top]))
    if said is None:
        assert not caught
    else:
        (w,) = caught
        assert said in str(w.message) and "is likely optimistic" in str(w.message), str(w.message)
