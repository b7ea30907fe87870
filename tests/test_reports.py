"""The reports people forward (issue 29): `--format html` wherever a command's help lists it, a
summary sentence on top, the whole plan table, and a legend for every column of every page.
The pages in a browser (sorting, no console message) are tests/test_html_browser.py's."""

from __future__ import annotations

import re

import pytest

from dlmcost.cli import main
from dlmcost.render import analyze, plan, serve, sweep

COMMANDS = ["analyze", "sweep", "serve", "plan", "gpus", "models", "model", "schemes", "calibrate", "measure"]


def run(capsys, *args):
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_format_the_help_lists_is_accepted(command, capsys, monkeypatch):
    """`serve --format html` failed with "unknown format 'html'" though its help listed html (the
    help was shared by every command). Each command's help lists exactly the formats it takes: the
    ones its refusal of an unknown format names."""
    monkeypatch.setenv("COLUMNS", "300")  # the option's help on one line
    rc, out, _ = run(capsys, command, "--help")
    assert rc == 0
    listed = re.search(r"--format\s+FORMAT\s+(.*?)\s+\[default", out, re.S).group(1)
    listed = [re.match(r"\w+", part.strip()).group(0) for part in " ".join(listed.split()).split("|")]
    extra = {"model": ["MODEL"], "measure": ["MODEL", "--gpu", "h100"],  # what they need before --format is read
             "calibrate": ["points.yaml", "--out", "unwritten.yaml"]}.get(command, [])
    rc, _, err = run(capsys, command, *extra, "--format", "nosuch")
    assert rc == 2
    accepted = err.strip().rpartition("choose one of: ")[2].split(", ")
    assert sorted(listed) == sorted(accepted)


# A plan record as `dlmcost plan -f json` writes it, cut to what the pages read.
def deployment(i: int, **change) -> dict:
    d = dict(model="org/Model-A", gpu="MI300X", gpu_key="mi300x", replicas=2, tp=1, precision="fp8", scheme="block",
             decoding="block/32/1", max_running=256,
             max_batch=256, p50_latency_s=6.2, p95_latency_s=6.8, p99_latency_s=7.0,
             p95_first_block_s=0.74, tokens_per_s_per_user=81.2, served_rps=20.0, capacity_rps=23.4, headroom=0.17,
             usd_per_hour=3.98, usd_per_mtok=0.11 + i / 100, usd_per_mtok_low=0.083 + i / 100,
             usd_per_mtok_high=0.33 + i / 100, usd_per_mtok_at_capacity=0.087, joules_per_token=0.15,
             output_tokens_per_s=10_000.0, tokens_per_s_per_gpu=5000.0, pareto=i == 0, misses=[])
    return d | change


def plan_record(deployments: list[dict], **change) -> dict:
    return dict(model="org/Model-A", models=["org/Model-A"], targets={"p95_latency_s": 10.0},
                traffic=dict(rate=20.0, users=None, think_s=0.0, prompt=1000, answer=500), evaluated=40,
                skipped={"unsupported_or_not_fitting": 0, "absurd": 0}, all_autoregressive=False,
                search=dict(gpus=["MI300X"], tp=[1, 2], precisions=["bf16", "fp8"], kv_dtype="bf16", mem_fraction=0.9, decodings=["block/32/1"],
                            max_batch=[256], requests=2000, seed=0),
                deployments=deployments, pareto=[d for d in deployments if d["pareto"]], ar_baseline=[],
                nearest_miss=None) | change


def test_plan_recommends_in_one_sentence():
    """The cheapest deployment meeting the targets, in words, with its $/Mtok over the price range,
    its p95 against the target and its margin (17% over 20 req/s); or the nearest miss."""
    record = plan_record([deployment(i) for i in range(3)])
    assert plan.recommendation(record) == (
        "Recommended: Model-A on 2 × MI300X (TP 1, fp8), block/32/1 decoding, batch limit 256, at $0.11 per "
        "million output tokens ($0.083–0.33 over the GPU's public price range); p95 latency 6.8 s (target 10 s), "
        "capacity 17% above the offered load; the cheapest of 3 deployments meeting the targets.")
    miss = deployment(0, misses=[dict(target="p95_latency_s", value=12.345, limit=10.0)])
    assert plan.recommendation(plan_record([], nearest_miss=miss)) == (
        "No deployment meets the targets (p95_latency_s 10); the nearest miss, Model-A on 2 × MI300X (TP 1, fp8), "
        "block/32/1 decoding, batch limit 256, misses p95_latency_s 12.3 against 10.")


def test_plan_page_holds_the_whole_table(capsys):
    """The plan's HTML table cut the deployments to --limit's 15 without saying so: the page lists
    every one (with $/Mtok over the price range), as JSON and CSV do; the terminal's table still
    shows 15 and says how many more there are."""
    from dlmcost.render.output import Output
    import io

    record = plan_record([deployment(i) for i in range(20)])
    page = plan.plan_page(record, [])
    table = re.search(r'<table id="deployments">.*?</table>', page, re.S).group(0)
    rows = re.findall(r"<tr><td>.*?</tr>", table)
    assert len(rows) == 20
    assert "<td>0.083–0.33</td>" in rows[0] and "<td>0.27–0.52</td>" in rows[19]  # 0.083 + 0.19, 0.33 + 0.19
    assert "Recommended: Model-A on 2 × MI300X" in page
    buf = io.StringIO()
    plan.render_plan(record, "markdown", Output(buf), top=15)
    assert "(first 15 of 20; json, csv and html list all)" in buf.getvalue()


@pytest.mark.parametrize(("headers", "legend"), [
    (analyze.ANALYZE_HEADERS, analyze.ANALYZE_LEGEND), (analyze.PASS_HEADERS, analyze.PASS_LEGEND),
    (analyze.OP_HEADERS, analyze.OP_LEGEND), (sweep.SWEEP_HEADERS, sweep.SWEEP_LEGEND),
    (plan.PLAN_HEADERS + [plan.PRICE_RANGE], plan.PLAN_LEGEND),
    (["#"] + serve.CURVE_HEADERS + ["$/Mtok\nlow–high"], serve.CURVE_LEGEND),
    (["#"] + serve.LATENCY_HEADERS, serve.LATENCY_LEGEND),
    (["#"] + serve.BAND_HEADERS, serve.BAND_LEGEND),
], ids=["analyze", "passes", "ops", "sweep", "plan", "serve-curve", "serve-latency", "serve-band"])
def test_every_column_of_every_page_has_a_legend(headers, legend):
    """A column added without its meaning fails here; a legend entry for no column too."""
    assert set(headers) == set(legend)
    assert all(len(text) > 10 for text in legend.values())


def test_legends_speak_the_tables_vocabulary():
    """The pages explain the cells in the words JSON uses: AI is the dominant pass family's (its
    JSON key named), the knee '-' of a scheme without a block, plan's B is max_running, serve's
    load marks include x (a missed target), and J/tok follows the busy fraction."""
    for legend in (analyze.ANALYZE_LEGEND, sweep.SWEEP_LEGEND):
        assert "dominant_pass_arithmetic_intensity" in legend["AI\nFLOP/B"]
    assert "-: a scheme without a cached block step" in analyze.ANALYZE_LEGEND["knee\nblock"]
    assert "max_running" in plan.PLAN_LEGEND["B"]
    assert "x = misses a target" in serve.CURVE_LEGEND["load"] and "! = overloaded" in serve.CURVE_LEGEND["load"]
    assert all("idle" in legend["J/tok"] for legend in (plan.PLAN_LEGEND, serve.CURVE_LEGEND))


def test_serve_and_analyze_summaries_by_hand():
    """The serve page's sentence: the load with the most output tokens/s per GPU, its p99, how many
    loads were overloaded, and the saturation; analyze's: the fastest GPU."""
    stats = dict(mean=1.0, median=1.0, p90=2.0, p99=2.5)
    point = dict(load="2 req/s (Poisson)", rate=2.0, concurrency=None, output_tokens_per_s_per_gpu=250.0,
                 latency_s=stats, overloaded=False)
    record = dict(deployments=[dict(
        deployment=dict(model="org/Model-A", replicas=1, gpu="H100 SXM", tp=1, decoding="block/32/2"),
        points=[point, dict(point, load="8 req/s (Poisson)", rate=8.0, output_tokens_per_s_per_gpu=900.0,
                            latency_s=dict(stats, p99=12.345), overloaded=True)],
        saturation=dict(rate=7.5, output_tokens_per_s=960.0, output_tokens_per_s_per_gpu=960.0, in_flight=256))])
    assert serve.serve_summary(record) == (
        "Most output tokens/s per GPU: Model-A on 1× H100 SXM TP1 block/32/2 at 8 req/s, 900 (p99 latency 12.3 s); "
        "1 of 2 loads overloaded (queues grow); it saturates at 7.5 req/s (960 output tok/s).")
    run = dict(supported=True, gpu="B200", time_s=0.5, tokens_per_s=256.0, verdict="memory-bound",
               memory=dict(fits=True, total_bytes=16.3e9))
    result = dict(results=[dict(run, gpu="H100 SXM", time_s=0.9), run, dict(supported=False, gpu="L4")])
    assert analyze.analyze_summary(result) == ("Fastest of 3 GPUs: B200, 500 ms for the generation (256 tok/s), "
                                               "memory-bound, and it fits in memory (16.3 GB).")
