"""Gates everywhere: `plan` and `serve` take `--require` (exit 8 naming the failing value, as
analyze and sweep do), `serve` marks every load point that misses a target and exits 8 when one
does, and `serve --max-rate` answering "none" exits 8 with the reason."""

from __future__ import annotations

import csv
import io
import json

import pytest

from dlmcost.cli import main

MODEL = "GSAI-ML/LLaDA-8B-Instruct"
# one H100 decoding LLaDA's default mdm, fixed lengths: c=8 runs every request alike
SERVE = ["serve", MODEL, "--gpu", "h100", "--prompt", "256", "--answer", "128", "--requests", "200"]



@pytest.fixture(scope="module")
def two_loads():
    """c=1 and c=8 as JSON, with no target: the latencies the gates below are checked against."""
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*SERVE, "-c", "1,8", "-f", "json"]) == 0
    points = json.loads(buf.getvalue())["deployments"][0]["points"]
    return {p["concurrency"]: p for p in points}


def test_serve_marks_and_fails_a_load_that_misses_its_target(run, two_loads):
    """`serve -c 8 --p95 1` printed a p99 of seconds and exited 0 with no mark."""
    p95_c1, p95_c8 = two_loads[1]["latency_s"]["p95"], two_loads[8]["latency_s"]["p95"]
    limit = (p95_c1 + p95_c8) / 2  # between the two: c=1 meets it, c=8 misses it
    rc, out, err = run(*SERVE, "-c", "1,8", "--p95", f"{limit:.6g}")
    assert rc == 8
    marked = {}  # the curve table's load cells (the latency table below repeats the loads unmarked)
    for line in out.splitlines():
        if line.startswith("c="):
            marked.setdefault(line.split()[0].rstrip("*!x"), line.split()[0])
    assert marked["c=8"].endswith("x") and not marked["c=1"].endswith("x")
    assert "x = misses a target" in " ".join(out.split())  # (the caption wraps)
    assert f"c=8: p95_latency_s {p95_c8:.4g} > {float(f'{limit:.6g}'):.4g}" in err
    assert "c=1:" not in err
    rc, out, _ = run(*SERVE, "-c", "1,8", "--p95", f"{limit:.6g}", "-f", "json")
    points = {p["concurrency"]: p for p in json.loads(out)["deployments"][0]["points"]}
    assert rc == 8 and points[1]["meets_targets"] is True and points[8]["meets_targets"] is False
    assert points[8]["misses"] == [dict(target="p95_latency_s", value=pytest.approx(p95_c8), limit=float(f"{limit:.6g}"))]
    rc, out, _ = run(*SERVE, "-c", "1,8", "--p95", f"{p95_c8 * 2:.6g}")
    assert rc == 0 and not any(line.split()[0].endswith("x") for line in out.splitlines() if line.startswith("c="))
    assert "x = misses" in " ".join(out.split())  # the caption explains the mark whether or not a load carries it


def test_serve_max_rate_none_exits_8_with_the_reason(run):
    rc, out, err = run(*SERVE, "--max-rate", "--p95", "0.001")  # below one request's own latency
    assert rc == 8
    assert "none" in out
    assert "--max-rate: no rate within the targets" in err and "p95_latency_s" in err and "> 0.001" in err


def test_serve_require_names_the_failing_value(run, two_loads):
    user = two_loads[8]["tokens_per_s_per_user"]
    rc, _, err = run(*SERVE, "-c", "8", "--require", f"tokens_per_s_per_user >= {user * 2:.6g}")
    assert rc == 8 and f"c=8: tokens_per_s_per_user >= {user * 2:.6g} (got {user:.4g})" in err
    # the latency targets' names are serve's --require keys, as plan's
    p95 = two_loads[8]["latency_s"]["p95"]
    rc, _, err = run(*SERVE, "-c", "8", "--require", f"p95_latency_s <= {p95 * 1.01:.6g}")
    assert rc == 0, err
    rc, _, err = run(*SERVE, "-c", "8", "--require", "latency >= 1")
    assert rc == 2 and "p95_latency_s" in err


def test_serve_csv_has_the_targets_keys(run, two_loads):
    rc, out, _ = run(*SERVE, "-c", "8", "-f", "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    p = two_loads[8]
    assert float(row["p95_latency_s"]) == pytest.approx(p["latency_s"]["p95"])
    assert float(row["p50_latency_s"]) == pytest.approx(p["latency_s"]["median"])
    assert float(row["p95_first_block_s"]) == pytest.approx(p["ttfb_s"]["p95"])
    assert row["meets_targets"] == "" and row["misses"] == ""  # no target given
    # every CSV column is a key --require takes (the price range's ends too), and no other
    from dlmcost.render.serve import CSV_KEYS

    assert list(row) == list(CSV_KEYS) and {"usd_per_mtok_low", "usd_per_mtok_high"} <= set(row)
    low = float(row["usd_per_mtok_low"])
    rc, _, err = run(*SERVE, "-c", "8", "--require", f"usd_per_mtok_low >= {low * 2:.6g}")
    assert rc == 8 and "usd_per_mtok_low" in err


PLAN = ["plan", MODEL, "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--prompt", "256",
        "--answer", "128", "--requests", "200"]


def test_plan_require_holds_the_recommended_deployment(run):
    rc, out, _ = run(*PLAN, "-f", "json")
    assert rc == 0
    deployments = json.loads(out)["deployments"]
    best = deployments[0]["usd_per_mtok"]
    assert len(deployments) > 1 and deployments[-1]["usd_per_mtok"] > best  # later rows cost more
    rc, _, err = run(*PLAN, "--require", f"usd_per_mtok <= {best * 1.01:.6g}")
    assert rc == 0, err  # the first row meets it; later, dearer rows do not count
    rc, _, err = run(*PLAN, "--require", f"usd_per_mtok <= {best / 2:.6g}")
    assert rc == 8 and f"usd_per_mtok <= {best / 2:.6g} (got {best:.4g})" in err
    rc, _, err = run(*PLAN, "--require", "max_batch >= 1")
    assert rc == 0 and "'max_batch' is deprecated" in err and "max_running" in err


def test_plan_top_0_shows_every_row(run):
    rc, out, _ = run(*PLAN, "-f", "json")
    n = len(json.loads(out)["deployments"])
    assert n > 2
    rc, out, err = run(*PLAN, "--top", "0")
    assert rc == 0, err
    assert sum(line.startswith("H100 SXM") for line in out.splitlines()) == n
    rc, out, _ = run(*PLAN, "--top", "2")
    assert sum(line.startswith("H100 SXM") for line in out.splitlines()) == 2
    rc, _, err = run(*PLAN, "--top", "-1")
    assert rc == 2 and "0 (all rows)" in err
