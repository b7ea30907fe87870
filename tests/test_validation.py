"""The validation page: the published cases stay within target and the page is up to date."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("validation_script", ROOT / "scripts" / "validation.py")
validation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(validation)

# When this test was written: median error 1.16x, worst 1.40x over 20 points; with 21 more published
# points (Qwen's H20 benchmark, the d3LLM table's batch-4 and Qwen3 rows, Dream's reference sampler):
# 1.05x, worst 1.61x (Dream's top-p sampler, not modelled). Keep them from regressing.
MEDIAN_LIMIT = 1.20
WORST_LIMIT = 1.7


@pytest.fixture(scope="module")
def rows():
    """Every published case evaluated once for the module's tests (about 2 s each time)."""
    return validation.rows()


def test_validation_targets_and_coverage(rows):
    s = validation.summary(rows)
    assert s["n"] >= 10 and len(s["stacks"]) >= 3
    assert {"A100 80GB SXM", "H100 SXM", "B200"} <= set(s["gpus"])
    assert {"dense dLLM", "AR baseline", "cached/block dLLM", "MoE"} <= {r["point"].case for r in rows}
    assert all(r["point"].source for r in rows)
    assert s["median_error"] <= MEDIAN_LIMIT, s
    assert s["worst_error"] <= WORST_LIMIT, s
    # the stacks must beat the bare roofline they refine
    assert s["median_error"] < s["roofline_median_error"]


def test_page_is_current(rows, serving):
    # what `python scripts/validation.py --check` compares
    assert validation.PAGE.read_text(encoding="utf-8") == validation.render(rows, serving), \
        "run: python scripts/validation.py"


def test_docs_quote_the_current_numbers(rows):
    s = validation.summary(rows)
    text = (ROOT / "docs" / "stacks.md").read_text(encoding="utf-8")
    assert f"{s['n']} published measurements" in text
    assert f"median error {s['median_error']:.2f}×, worst {s['worst_error']:.2f}×" in text
    assert f"{s['out_median_error']:.2f}× / {s['out_worst_error']:.2f}× over the {s['n_out']} points" in text


# --- serving under load (validation/serving.yaml, `dlmcost serve`) ---------------------------------

# When this was written: at concurrency >= 8 median 1.21x, worst 1.37x; at batch >= 32 at most 1.01x
# optimistic; overall worst 1.37x (before sglang-dllm's first_block_outside_limit and prompt_prefill
# and the A100 40GB PCIe's sustained_compute: 1.40x, 1.52x, 1.47x, 1.92x). The targets (1.3x,
# 2x, 1.5x) are reported on the page; these limits hold the median to its target and keep the rest
# from regressing.
SERVING_HEAVY_MEDIAN_LIMIT = 1.3
SERVING_HEAVY_WORST_LIMIT = 1.45
SERVING_BIG_OPTIMISM_LIMIT = 1.1
SERVING_WORST_LIMIT = 1.5


@pytest.fixture(scope="module")
def serving():
    """Every serving point's `dlmcost serve` command run once (about 2 s in all)."""
    return validation.serving_rows()


def test_serving_coverage(serving):
    s = validation.serving_summary(serving)
    # at least two throughput-against-concurrency curves of four loads or more
    assert sum(len(v) >= 4 for v in s["curves"].values()) >= 2, s["curves"]
    points = {r["id"]: r["point"] for r in serving}
    assert all(p["source"] and p["assumes"] and p["command"].startswith("dlmcost serve ") for p in points.values())
    assert {"output_tokens_per_s", "ttft_mean_s", "e2e_mean_s", "forward_ms"} <= {r["metric"] for r in serving}
    # in-sample: the jax-tpu stack's two fitted points, the fitted tokens per forward, the A100 40GB
    # PCIe's sustained_compute (batch 32), and the mini's concurrency-100 point that sglang-dllm's
    # first_block_outside_limit is inferred from (all three of its numbers)
    in_sample = {(r["id"], r["metric"]) for r in serving if r["in_sample"]}
    assert in_sample == {("sglang-llada21-mini-b200-c1", "output_tokens_per_s"),
                         ("sglang-jax-qwen3-8b-tpu7x-c1", "output_tokens_per_s"),
                         ("sglang-jax-qwen3-8b-tpu7x-c128", "output_tokens_per_s"),
                         ("fluxserve-llada-a100-b32", "forward_ms"),
                         *(("sglang-llada21-mini-b200-c100", m) for m in ("output_tokens_per_s", "ttft_mean_s",
                                                                           "e2e_mean_s"))}
    assert s["n_out"] == s["n"] - 7 and s["n_heavy"] >= 8


def test_serving_errors_do_not_regress(serving):
    s = validation.serving_summary(serving)
    assert s["heavy_median_error"] <= SERVING_HEAVY_MEDIAN_LIMIT, s
    assert s["heavy_worst_error"] <= SERVING_HEAVY_WORST_LIMIT, s
    assert s["big_optimism"] <= SERVING_BIG_OPTIMISM_LIMIT, s
    assert s["worst_error"] <= SERVING_WORST_LIMIT, s
    # the fitted tokens per forward reproduces its point
    fit = next(r for r in serving if r["id"] == "sglang-llada21-mini-b200-c1" and r["metric"] == "output_tokens_per_s")
    assert fit["predicted"] == pytest.approx(426.26, rel=0.01)
    # and the fitted sustained compute its forward
    fit = next(r for r in serving if r["id"] == "fluxserve-llada-a100-b32")
    assert fit["predicted"] == pytest.approx(401.3, rel=0.01)


def test_serving_ratios_from_the_definitions(serving):
    """Ratio, error and the optimistic side recomputed from the measured and predicted values."""
    for r in serving:
        assert r["ratio"] == pytest.approx(r["predicted"] / r["measured"])
        assert r["error"] == pytest.approx(max(r["predicted"] / r["measured"], r["measured"] / r["predicted"]))
        throughput = r["metric"] in ("output_tokens_per_s", "total_tokens_per_s")  # the rest are times
        faster = r["predicted"] > r["measured"] if throughput else r["predicted"] < r["measured"]
        assert (r["optimism"] > 1) == faster, r
    # a forward at batch 32 is a job of 32 one-pass requests: its makespan, read back from serve's JSON
    point = validation.serve_json(next(r["point"]["command"] for r in serving if r["id"] == "fluxserve-llada-a100-b32"))
    b32 = next(r for r in serving if r["id"] == "fluxserve-llada-a100-b32")
    assert b32["predicted"] == pytest.approx(1000 * point["makespan_s"])
    assert point["concurrency"] == 32 and point["requests"] == 32


def test_serving_lengths_reproduce_the_published_totals():
    """The length files are SGLang bench_serving's random dataset (seed 1, 1000 / 1000, range ratio 0):
    their sums are the cookbook's printed token totals (10 prompts: 6,101 in and 4,220 out; 500 prompts:
    249,831 and 252,662)."""
    folder = validation.ROOT / "validation" / "lengths"

    def total(name):
        return sum(int(v) for v in (folder / name).read_text().split())

    assert total("sglang-random-1000-seed1-n10-input.txt") == 6101
    assert total("sglang-random-1000-seed1-n10-output.txt") == 4220
    assert total("sglang-random-1000-seed1-n500-input.txt") == 249831
    assert total("sglang-random-1000-seed1-n500-output.txt") == 252662


def test_serving_tpot_from_its_definition(serving):
    """bench_serving's mean TPOT, (E2E - TTFT) / (answer - 1) per request, where every answer has the
    command's fixed length (1,536 tokens here): recomputed from serve's latency and first-block means."""
    row = next(r for r in serving if r["id"] == "wxrep-llada21mini-h20-4k1k5-c72-radixoff-k1"
               and r["metric"] == "tpot_mean_ms")
    assert "--answer 1536" in " ".join(row["point"]["command"].split())
    point = validation.serve_json(row["point"]["command"])
    assert row["predicted"] == pytest.approx(1000 * (point["latency_s"]["mean"] - point["ttfb_s"]["mean"]) / 1535)


def test_fitted_tokens_per_forward_reproduce_their_points(serving):
    """Each point whose note sets --tpf predicts its measured throughput to within the step that whole
    steps per block allow (scripts/fit_serving_tpf.py); the points that lean on it use the same value."""
    import re

    fitted = [r for r in serving if re.match(r"\w+ sets --tpf ", r["point"].get("fitted") or "") and r["in_sample"]]
    assert len(fitted) >= 8
    for r in fitted:
        assert r["error"] <= 1.03, r
        value = re.search(r"sets --tpf ([0-9.]+)", r["point"]["fitted"]).group(1)
        assert f"--tpf {value} " in " ".join(r["point"]["command"].split()) + " "
        for q in serving:
            if f"serving:{r['id']}" in q["point"].get("leans_on", []):
                assert f"--tpf {value} " in " ".join(q["point"]["command"].split()) + " ", q["id"]


def test_fit_script_writes_a_value_where_it_is_used():
    """scripts/fit_serving_tpf.py's --write puts a fitted value in the fitting point's note and command and
    in the commands of the points that lean on it, and nowhere else."""
    spec_fit = importlib.util.spec_from_file_location("fit_serving_tpf", ROOT / "scripts" / "fit_serving_tpf.py")
    fit = importlib.util.module_from_spec(spec_fit)
    spec_fit.loader.exec_module(fit)
    text = (
        "points:\n"
        "  - id: a\n    command: dlmcost serve m --tpf 1 --job 2\n    fitted: \"output_tokens_per_s sets --tpf 1 (x)\"\n"
        "  - id: b\n    command: >-\n      dlmcost serve m --tpf 1\n      --tpf-spread 0.5\n    leans_on: [serving:a]\n"
        "  - id: c\n    command: dlmcost serve m --tpf 1 --job 2\n"
    )
    points = [{"id": "a"}, {"id": "b", "leans_on": ["serving:a"]}, {"id": "c"}]
    out = fit.write(text, points, {"a": (2.5, 1.0, False)})
    assert out == text.replace("--tpf 1 --job 2\n    fitted: \"output_tokens_per_s sets --tpf 1",
                               "--tpf 2.5 --job 2\n    fitted: \"output_tokens_per_s sets --tpf 2.5") \
                      .replace("serve m --tpf 1\n      --tpf-spread", "serve m --tpf 2.5\n      --tpf-spread")
