"""Numbers that say something: each trip a reader hit where a printed number said nothing, or
something else than it seemed (percentiles that cannot differ, one J/token per GPU count, an AI
column that disagreed with its verdict, a knee for schemes without a block, Python list reprs in
CSV, a negative tick, TPUs called GPUs)."""

from __future__ import annotations

import csv
import io
import itertools
import json

import pytest

from dlmcost import api
from dlmcost.render.charts import Panel, Series
from dlmcost.render.termplot import render_panel

MODEL = "GSAI-ML/LLaDA-8B-Instruct"
IDLE = 0.15  # of the board envelope, drawn while idle (docs/plan.md, Money and energy)



# --- percentiles ------------------------------------------------------------------------------


def test_a_note_when_percentiles_collapse(run):
    """A closed loop whose requests all have the same lengths runs every request alike: p50 = p90
    = p99, which the table now says, with what would show a tail."""
    args = ["serve", MODEL, "--gpu", "h100", "-c", "4", "--requests", "200", "--prompt", "256"]
    rc, out, _ = run(*args, "--answer", "128", "-f", "json")
    lat = json.loads(out)["deployments"][0]["points"][0]["latency_s"]
    assert lat["median"] == pytest.approx(lat["p99"], rel=1e-9)  # the premise: they are equal
    rc, out, _ = run(*args, "--answer", "128")
    assert "p50 = p90 = p99 at c=4: every measured request took the same time" in out
    rc, out, _ = run(*args, "--answer", "p50:128,p90:256", "-f", "json")
    lat = json.loads(out)["deployments"][0]["points"][0]["latency_s"]
    assert lat["p99"] > lat["median"] * 1.05  # lengths that differ: a tail
    rc, out, _ = run(*args, "--answer", "p50:128,p90:256")
    assert "p50 = p90 = p99" not in out


# --- energy -------------------------------------------------------------------------------------


def test_serve_joules_per_token_follow_the_busy_fraction(run):
    """Two loads on the same one H100: J/token = 700 W x (0.15 idle share x (1 - busy) + busy) /
    output tok/s, from each row's own busy fraction, so a lightly loaded row pays for its idle time
    and the two differ beyond their throughputs."""
    rc, out, _ = run("serve", MODEL, "--gpu", "h100", "--rate", "0.1,0.4", "--requests", "300",
                     "--answer", "128", "-f", "json")
    points = json.loads(out)["deployments"][0]["points"]
    busy = [p["gpu_busy_fraction"] for p in points]
    assert 0 < busy[0] < busy[1] < 1
    for p in points:
        watts = 700 * (IDLE * (1 - p["gpu_busy_fraction"]) + p["gpu_busy_fraction"])
        assert p["joules_per_token"] == pytest.approx(watts / p["output_tokens_per_s"], rel=1e-9)
    # the old envelope-only figure (700 W / output tok/s) overstated the lightly loaded row most
    assert points[0]["joules_per_token"] < 700 / points[0]["output_tokens_per_s"] * 0.5


def test_plan_rows_with_the_same_gpus_differ_in_joules_per_token(run):
    rc, out, _ = run("plan", MODEL, "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                     "--requests", "300", "--answer", "128", "-f", "json")
    one_gpu = [d for d in json.loads(out)["deployments"] if d["gpus"] == 1]
    assert len(one_gpu) >= 2
    assert len({round(d["joules_per_token"], 9) for d in one_gpu}) == len(one_gpu)
    for d in one_gpu:
        busy = d["gpu_busy_fraction"]
        assert d["joules_per_token"] == pytest.approx(700 * (IDLE * (1 - busy) + busy) / d["output_tokens_per_s"])


# --- the AI column and the verdict ------------------------------------------------------------


@pytest.mark.parametrize("workload", [dict(), dict(scheme="dual-cache", block=16, batch=8),
                                      dict(scheme="dual-cache", block=64, batch=4), dict(scheme="ar", batch=32),
                                      dict(scheme="ar", prompt=8192, gen=4)])  # the prefill, the first family, longest
def test_the_ai_shown_is_the_dominant_pass_familys(workload):
    """The tables' AI is the FLOP/byte of the pass family taking the most time (count x time of
    its average pass, from the result's own passes), the family whose ridge the table shows; when
    it takes at least half the time, its side of the ridge is the verdict."""
    r = api.analyze(MODEL, "h100", **workload).results[0]
    longest = max(r.passes, key=lambda p: p.count * p.time_s)
    assert r.dominant_pass_arithmetic_intensity == pytest.approx(longest.arithmetic_intensity, rel=1e-12)
    assert r.achievable_ridge_flops_per_byte == pytest.approx(longest.achievable_ridge_flops_per_byte, rel=1e-12)
    if longest.count * longest.time_s >= 0.5 * r.time_s:
        below = r.dominant_pass_arithmetic_intensity < r.achievable_ridge_flops_per_byte
        assert r.verdict == ("memory-bound" if below else "compute-bound")


def test_no_memory_bound_row_shows_more_ai_than_a_compute_bound_one(run):
    """The trip: on one GPU and scheme, b=16 B=8 showed "AI 238, memory" above b=64 B=4 "AI 225,
    compute" (the generation's average AI beside a time-weighted verdict). With the dominant
    family's AI, the shown numbers order as their verdicts do on this grid."""
    rc, out, _ = run("sweep", "--gpu", "h100,b200,mi300x", "--scheme", "dual-cache,prefix-cache,mdm",
                     "--block", "4,8,16,32,64", "--batch", "1,4,8,16,32,64", "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) > 150
    inverted = [(a, b) for a, b in itertools.product(rows, rows)
                if (a["gpu"], a["scheme"]) == (b["gpu"], b["scheme"]) and a["verdict"] == "memory-bound"
                and b["verdict"] == "compute-bound"
                and float(a["dominant_pass_arithmetic_intensity"]) > float(b["dominant_pass_arithmetic_intensity"])]
    assert inverted == []
    shown = run("sweep", "--gpu", "h100", "--scheme", "dual-cache", "--block", "16", "--batch", "8")[1]
    r = api.analyze(MODEL, "h100", scheme="dual-cache", block=16, batch=8).results[0]
    assert f" {r.dominant_pass_arithmetic_intensity:.3g} " in shown


# --- the knee --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme, knee", [("mdm", "-"), ("ar", "-"), ("dual-cache", None)])
def test_knee_block_only_where_the_scheme_has_a_block(run, scheme, knee):
    rc, out, _ = run("analyze", "--gpu", "h100", "--scheme", scheme, *(["--block", "32"] * (scheme == "dual-cache")))
    row = next(line for line in out.splitlines() if line.startswith("H100 SXM"))
    if knee:
        assert row.split()[-1] == knee
        assert "-: a scheme without a cached block step" in " ".join(out.split())
    else:
        assert row.split()[-1] != "-"


# --- CSV cells ---------------------------------------------------------------------------------------


def test_csv_cells_hold_no_python_reprs(run):
    rc, out, _ = run("analyze", "--gpu", "h100", "--scheme", "dual-cache", "--block", "32", "-f", "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    assert row["workload_knobs"] == "steps;block"
    assert not any(v.startswith(("[", "(", "{")) for v in row.values())
    rc, out, _ = run("analyze", "--gpu", "h100", "--scheme", "ar", "-f", "csv")
    assert next(csv.DictReader(io.StringIO(out)))["workload_knobs"] == ""


# --- the terminal chart ---------------------------------------------------------------------------


def tick_labels(lines: list[str]) -> list[str]:
    return [line.split("|")[0].strip() for line in lines if "|" in line and line.split("|")[0].strip()]


def test_no_negative_tick_for_values_that_cannot_be_negative():
    """Output tokens/s from 0 to 2850 padded by 4% below drew a -114 tick."""
    panel = Panel(xlabel="concurrency", ylabel="output tokens/s",
                  series=[Series([1, 8, 32], [0.0, 1200.0, 2850.0], label="tok/s", marker="o")])
    ticks = tick_labels(render_panel(panel, 80, 12))
    assert ticks and not any(t.startswith("-") for t in ticks) and ticks[-1] == "0"
    # values that are negative keep a padded axis below them
    panel = Panel(xlabel="x", ylabel="y", series=[Series([1, 2, 3], [-50.0, 0.0, 100.0], marker="o")])
    assert tick_labels(render_panel(panel, 80, 12))[-1].startswith("-")


# --- TPUs are not GPUs ------------------------------------------------------------------------------


def test_tpus_are_chips(run):
    rc, out, _ = run("serve", MODEL, "--gpu", "tpu-v6e", "--replicas", "2", "-c", "4", "--requests", "200")
    assert rc == 0 and "(2 chips)" in out.splitlines()[0] and "GPU" not in out.splitlines()[0]
    rc, out, _ = run("serve", MODEL, "--gpu", "h100", "--replicas", "2", "-c", "4", "--requests", "200")
    assert "(2 GPUs)" in out.splitlines()[0]
    rc, out, _ = run("gpus", "-f", "json")
    units = {g["name"]: g["unit"] for g in json.loads(out)}
    assert units["TPU v5e"] == units["Trainium2"] == "chip" and units["H100 SXM"] == "GPU"
    rc, out, _ = run("analyze", "--gpu", "tpu-v5e", "--precision", "fp8")
    assert "TPU v5e has no fp8 matrix units" in out and "tensor cores" not in out
