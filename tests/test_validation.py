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


# The first test of a worker that needs the serving rows runs every serving point's `dlmcost serve` in its
# setup (about 50 s on two busy cores for 600 numbers, growing with each publication added): more than
# the suite's 120 s hang limit allows with a margin once the machine is loaded.
pytestmark = pytest.mark.timeout(360)


@pytest.fixture(scope="module")
def rows(once_per_run):
    """Every published case evaluated once for the run's tests (about 1 s)."""
    return once_per_run("validation-rows", validation.rows)


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


@pytest.fixture(scope="module")
def serving(once_per_run):
    """Every serving point's `dlmcost serve` command run once for the run's tests (about 50 s in all)."""
    return once_per_run("validation-serving", validation.serving_rows)


@pytest.fixture(scope="module")
def marked(rows, serving):
    """The single-stream and serving rows with their publication and in-source marks."""
    validation.mark_sources(rows, serving)
    return rows, serving


# The headline (docs/validation.md): every number scored only against numbers fitted on other
# publications. The targets are TARGET_OUT_OF_SOURCE_MEDIAN (1.3x) and _WORST (2x). Neither is met since
# GPUStack's vLLM DeepSeek-R1 bursts (GPS) were added as a new source: the median is 1.31x over 65 numbers
# from 11 publications (1.26x over 53 from 10 before, met; 1.28x over 41 from 9 before IFX, from 1.57x before
# the per-request terms of sglang-dllm and jax-tpu), the worst 9.41x (the mean TTFT of GPS's 1,000 requests
# of 128 tokens since the prefill budget; their throughput, 6.66x, before it; 4.18x, IFX's mean TTFT at
# concurrency 8, before GPS; 2.51x, the vLLM dLLM plugin's eager run, before IFX). The SGLang cookbook's Llama 3.1
# page (SGCL, a new source) makes them 1.32x over 89 numbers from 12 publications and 15.13x, its mean TTFT at 64
# in flight with 8,000-token prompts, until the sglang stack's prefill budget (9.41x again, GPS's). Decode's
# attention at its measured kernel rate makes the median 1.27x (1.307x before: met again); the vllm stacks'
# front end (one API server of 5 ms a request, from a mock-engine measurement) then the worst 7.26x (GPS's
# burst's mean TTFT, 9.25x before); attention's keys term and the measured NCCL all-reduce curve 1.30x and
# 7.45x; the routed experts' fused MoE kernel at its measured rates (aiconfigurator's kernel timings, not
# validation points) then RECORDED below; GPUStack's Qwen3-8B page and the vLLM blog's FP8 K/V cache post (VKV), AR
# serving added as published, then 1.25x over 109 numbers from 13 publications, the worst unchanged.
# validation points) 1.26x and 7.04x; the front end's requests sharing its API servers (a burst reaching the
# engine together, as an asyncio loop takes them in turn) then RECORDED below (GPS's burst 7.04x -> 2.60x; the
# worst now IFX's mean TTFT at concurrency 8); both merged, 1.22x over 109 numbers and 4.01x;
# with the eager MoE dispatch (VPLUG's eager and TP2 runs) 1.20x; each simulated request running its own
# answer's passes (a closed loop's completions no longer in waves of a length class) then RECORDED below: SGCL's
# TTFT at 100 in flight 2.53x pessimistic -> 1.06x, the SGLang TTFTs at lower loads, which the waves' queued
# prefills had hidden a missing first-token cost behind, 1.39-5.16x optimistic (the worst IFX's at concurrency 8);
# SGLang's eager prefills (its graphs cover decode only: the stack's eager dispatch, once a prefill iteration)
# then RECORDED below: IFX's 5.16x -> 3.14x, the worst GPS's vLLM TTFT at one request, 3.95x.
# a prefill budget's memory share (one workspace, not every prompt at once) then 1.20x, the worst unchanged;
# with vLLM's first-token dispatch delay merged, the worst 3.14x (IFX's TTFT at 8 in flight); VKV's lengths as
# `vllm bench serve` draws them (its median TTFT 2.56x -> 1.13x) then 1.19x (1.187), the worst unchanged.
# Each is held to what it was when recorded (RECORDED_OUT_OF_SOURCE_*) until its target is met.
HEADLINE_MEDIAN_LIMIT = validation.RECORDED_OUT_OF_SOURCE_MEDIAN
HEADLINE_WORST_LIMIT = validation.RECORDED_OUT_OF_SOURCE_WORST


def test_headline_is_out_of_source_and_does_not_regress(marked):
    h = validation.headline(*marked)
    assert h["n"] >= 30 and len(h["origins"]) >= 6, h
    assert h["median_error"] <= HEADLINE_MEDIAN_LIMIT, h
    assert h["worst_error"] <= HEADLINE_WORST_LIMIT, h
    # the page says whether each target is met, from the numbers
    page = validation.PAGE.read_text(encoding="utf-8")
    median_word = "**met**" if h["median_error"] <= validation.TARGET_OUT_OF_SOURCE_MEDIAN else "**not met**"
    worst_word = "**met**" if h["worst_error"] <= validation.TARGET_OUT_OF_SOURCE_WORST else "**not met**"
    assert f"median <= {validation.TARGET_OUT_OF_SOURCE_MEDIAN}x ({median_word})" in page
    assert f"worst <= {validation.TARGET_OUT_OF_SOURCE_WORST:g}x ({worst_word})" in page


def test_no_scored_number_leans_on_a_fit_from_its_own_publication(marked):
    """Recomputed here from the files: for each scored row, the publications of every point that a
    fitted number of its stack or of its GPU was set on; its own must not be among them."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.stacks import load_stack

    where = validation.origins()
    gpus = {g.name: g for g in HardwareDB.load().gpus.values()}
    scored = [r for r in (*marked[0], *marked[1]) if validation.scored(r)]
    assert scored
    for r in scored:
        stack = load_stack(r["stack"])
        # the numbers its prediction reads: an eagerly run stack's eager dispatch too, a graphed one's not;
        # the first-token delay by a first-token metric only
        first_token = r.get("metric") in ("ttft_mean_s", "ttft_p50_s")
        fitted = [points for field, points in stack.fitted.items()
                  if (field != "eager" or r["stack"].endswith(" (eager)"))
                  and (field not in ("first_token_us_per_layer", "first_token_us_per_mla_layer") or first_token)]
        fitted += list(gpus[r["gpu"]].fitted.values())
        # a fitted list's "prefix*" names every point id that begins so
        named = {i for points in fitted for pid in points
                 for i in ([i for i in where if i.startswith(pid[:-1])] if pid.endswith("*") else [pid])}
        assert r["origin"] not in {where[pid] for pid in named}, r.get("id") or r["point"].id
    # and every fitting point is left out, whatever its publication (a first-token delay's: its first tokens)
    numbers = validation.fitted_numbers()
    fitters = validation.fitting_points(numbers)
    speed_fitters = validation.fitting_points(validation.speed_numbers(numbers))
    assert not any(validation.scored(r) for r in marked[1] if f"serving:{r['id']}"
                   in (fitters if r["metric"] in ("ttft_mean_s", "ttft_p50_s") else speed_fitters))


def test_the_in_source_rule_on_a_made_up_case():
    numbers = [dict(kind="stack", name="s", field="fixed_us_per_forward", points=["a1"]),
               dict(kind="gpu", name="G", field="memory_bandwidth", points=["serving:b1"])]
    where = {"a1": "A", "serving:b1": "B", "c1": "C"}
    assert validation.fit_origins("s", "G", numbers, where) == {"A", "B"}
    assert validation.fit_origins("s", "other GPU", numbers, where) == {"A"}
    assert validation.fit_origins("other stack", "other GPU", numbers, where) == set()
    # the eager dispatch is read by the stack run eagerly only (`NAME (eager)`)
    numbers.append(dict(kind="stack", name="s", field="eager", points=["c1"]))
    assert validation.fit_origins("s", "other GPU", numbers, where) == {"A"}
    assert validation.fit_origins("s (eager)", "other GPU", numbers, where) == {"A", "C"}


def test_a_first_token_delay_fitted_on_a_point_leaves_its_speed_numbers_out_of_source():
    """A stack's first-token delay set on a publication's points puts their first tokens in source, not
    their TPOTs; a fitted list's "prefix*" names every point id that begins so."""
    numbers = [dict(kind="stack", name="s", field="first_token_us_per_layer", points=["serving:a1", "serving:a2"]),
               dict(kind="stack", name="s", field="fixed_us_per_forward", points=["b1"])]
    where = {"serving:a1": "A", "serving:a2": "A", "b1": "B"}
    assert validation.fit_origins("s", "G", numbers, where) == {"A", "B"}
    assert validation.fit_origins("s", "G", validation.speed_numbers(numbers), where) == {"B"}
    ids = ["serving:a1", "serving:a2", "serving:b1", "a1"]
    assert validation.point_ids(["serving:a*", "b1"], ids) == ["serving:a1", "serving:a2", "b1"]
    assert validation.point_ids(["serving:zz*"], ids) == ["serving:zz*"]  # no match: left for the checks


def test_aics_vllm_first_tokens_are_in_source_and_their_tpots_scored(marked):
    """NVIDIA aiconfigurator fitted the vllm stack's first-token delay over its corpus, the AICS MiniMax
    rows among them: their TTFTs are in source, their TPOTs out of source."""
    rows = [r for r in marked[1] if r["id"].startswith("aics-minimax-m25-")]
    assert len(rows) == 96 + 58  # H200 and H100; B200
    assert all(r["in_source"] == (r["metric"] == "ttft_mean_s") for r in rows)


def test_every_fitted_number_names_validation_points():
    where = validation.origins()
    numbers = validation.fitted_numbers()
    assert numbers
    for n in numbers:
        assert n["points"] and all(pid in where for pid in n["points"]), n
    # a point whose `fitted` note sets a number or an assumption is a fitting point
    import yaml

    points = yaml.safe_load(validation.SERVING.read_text(encoding="utf-8"))["points"]
    leaned = {pid for q in points for pid in q.get("leans_on", [])}
    fitting = validation.fitting_points(numbers) | leaned
    for p in points:
        if p.get("fitted"):
            assert f"serving:{p['id']}" in fitting, p["id"]


def _engine(stack: str) -> str:
    """The stack whose band a bundled stack's numbers count in: the one its file `extends:` (read
    here with yaml, not with dlmcost's reader), else itself."""
    import yaml

    path = ROOT / "stacks" / f"{stack}.yaml"
    base = yaml.safe_load(path.read_text(encoding="utf-8")).get("extends") if path.is_file() else None
    return _engine(base) if base else stack


def test_error_bands_are_derived_from_the_out_of_source_numbers(marked):
    """The shipped bands (dlmcost/inputs/error_bands.json) are what the validation computes now,
    and a stack's speed band is the 10th/50th/90th percentile of its scored rows' speed ratios
    (numpy's linear interpolation, recomputed here) leaving out the times to the first token, or
    the pooled band when it has too few; its first-token band is the same over the TTFT rows, and
    with too few of those (in the stack and in all), its band over every number."""
    import json

    import numpy as np

    rows, serving = marked
    assert validation.BANDS.read_text(encoding="utf-8") == validation.bands_text(rows, serving), \
        "run: python scripts/validation.py"
    bands = json.loads(validation.BANDS.read_text(encoding="utf-8"))["bands"]
    speed, first, publications = {}, {}, {}
    for r in serving:
        if validation.scored(r):
            faster_up = validation.METRICS[r["metric"]][2]  # a throughput: more is faster
            ratio = r["predicted"] / r["measured"] if faster_up else r["measured"] / r["predicted"]
            (first if r["metric"].startswith("ttft") else speed).setdefault(_engine(r["stack"]), []).append(ratio)
            if not r["metric"].startswith("ttft"):  # the speed band's basis counts its own numbers' publications
                publications.setdefault(_engine(r["stack"]), set()).add(r["point"]["origin"])
    for r in rows:
        if validation.scored(r):
            publications.setdefault(_engine(r["stack"]), set()).add(r["point"].origin)
            speed.setdefault(_engine(r["stack"]), []).append(r["measured_ms"] / r["predicted_ms"])
    six = validation.BAND_MIN_NUMBERS

    def percentiles(values):
        return pytest.approx(tuple(np.percentile(values, [10, 50, 90])), abs=1e-4)

    pooled_speed = [v for vs in speed.values() for v in vs]
    pooled_first = [v for vs in first.values() for v in vs]
    # the case the shipped bands are in since GPUStack's Qwen3-8B page and VKV: enough TTFT numbers in all (22) for a
    # pooled band apart, sglang (IFX's 4, SGCL's 6, GPS's 2) and vllm (GPS's 8, VKV's 1) with enough of their own,
    # vllm-dllm without (VBLOG's 1), so that it takes the pooled one
    assert len(pooled_first) >= six and len(first["sglang"]) >= six and len(first["vllm"]) >= six
    assert 0 < len(first["vllm-dllm"]) < six
    assert bands["pooled"]["numbers"] == len(pooled_speed)
    assert (bands["pooled"]["low"], bands["pooled"]["median"], bands["pooled"]["high"]) == percentiles(pooled_speed)
    f = bands["pooled"]["first_token"]
    assert (f["low"], f["median"], f["high"]) == percentiles(pooled_first)
    assert f["numbers"] == len(pooled_first)
    for name, band in bands.items():
        if name == "pooled":
            continue
        if _engine(name) != name:  # a stack that extends another takes its band, its numbers counted there
            assert {k: v for k, v in band.items() if k != "basis"} == \
                {k: v for k, v in bands[_engine(name)].items() if k != "basis"}
            assert band["basis"].startswith(f"{_engine(name)}'s band, which it extends")
            continue
        own, own_first = speed.get(name, []), first.get(name, [])
        if len(own) >= six:
            assert band["numbers"] == len(own)
            n = len(publications[name])  # the basis says how many publications the numbers come from
            assert band["basis"].endswith(f"from {n} publication{'' if n == 1 else 's'}"), band["basis"]
            assert (band["low"], band["median"], band["high"]) == percentiles(own)
        else:
            assert (band["low"], band["high"]) == (bands["pooled"]["low"], bands["pooled"]["high"])
        f = band["first_token"]
        if len(own_first) >= six:
            assert (f["low"], f["median"], f["high"]) == percentiles(own_first), name
        elif len(pooled_first) >= six or len(own) + len(own_first) < six:
            assert (f["low"], f["high"]) == (bands["pooled"]["first_token"]["low"], bands["pooled"]["first_token"]["high"])
        else:
            assert (f["low"], f["median"], f["high"]) == percentiles(own + own_first), name
            assert f["numbers"] == len(own) + len(own_first)
    # the stack the TTFT numbers come from: its speed band leaves them out, its first-token band takes them in
    assert bands["sglang"]["high"] < bands["sglang"]["first_token"]["high"]


def test_vendor_bands_are_each_vendors_own_numbers(marked):
    """The bands on one vendor's parts: each stack's scored rows on that vendor's GPUs (the vendor
    read from the hardware files here, by the row's GPU name), their percentiles recomputed; a
    stack with too few there takes every stack's there. The case the shipped bands are in since the
    SGLang cookbook's MI300X runs: sglang measured on AMD and NVIDIA parts, its AMD numbers spread
    wider than its NVIDIA ones, its band on both between the two vendors' at its low end. (The two
    medians are close, and since the cookbook's GLM-4.6 runs on B200, 1.3-1.9x optimistic, the
    NVIDIA one is the higher: no order between them is asserted.)"""
    import json

    import numpy as np

    from dlmcost.inputs.hardware import HardwareDB

    rows, serving = marked
    vendor = {g.name: g.vendor for g in HardwareDB.load().gpus.values()}
    speed, first = {}, {}
    for r in serving:
        if validation.scored(r):
            faster_up = validation.METRICS[r["metric"]][2]
            ratio = r["predicted"] / r["measured"] if faster_up else r["measured"] / r["predicted"]
            key = (_engine(r["stack"]), vendor[r["gpu"]])
            (first if r["metric"].startswith("ttft") else speed).setdefault(key, []).append(ratio)
    for r in rows:
        if validation.scored(r):
            speed.setdefault((_engine(r["stack"]), vendor[r["gpu"]]), []).append(r["measured_ms"] / r["predicted_ms"])
    bands = json.loads(validation.BANDS.read_text(encoding="utf-8"))["bands"]
    six = validation.BAND_MIN_NUMBERS

    def percentiles(values):
        return pytest.approx(tuple(np.percentile(values, [10, 50, 90])), abs=1e-4)

    def every(v, table):
        return [x for (s, w), xs in table.items() if w == v for x in xs]

    assert sorted(bands["pooled"]["vendors"]) == ["amd", "nvidia"]
    for name in ("pooled", "sglang", "vllm", "sglang-dllm", "compiled"):
        for key, band in bands[name]["vendors"].items():
            v = band["vendor"]
            assert v.lower() == key
            own = every(v, speed) if name == "pooled" else speed.get((name, v), [])
            values = own if len(own) >= six else every(v, speed)
            assert (band["low"], band["median"], band["high"]) == percentiles(values), (name, v)
            own_first = every(v, first) if name == "pooled" else first.get((name, v), [])
            f = band["first_token"]
            assert (f["low"], f["median"], f["high"]) == percentiles(own_first if len(own_first) >= six
                                                                     else every(v, first)), (name, v)
    amd, nvidia = bands["sglang"]["vendors"]["amd"], bands["sglang"]["vendors"]["nvidia"]
    assert amd["high"] - amd["low"] > nvidia["high"] - nvidia["low"]
    assert amd["low"] < bands["sglang"]["low"] < nvidia["low"]
    assert "jax-tpu" in bands and "vendors" not in bands["jax-tpu"]  # it runs on neither vendor's parts


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


# SGLang bench_serving's random lengths: numpy's legacy generator at its default seed 1, N inputs
# randint(1, I + 1) and then N outputs randint(1, O + 1) (range ratio 0); file stem -> (I, O, N) and the
# cookbook's printed totals of input and generated tokens (SGC: the LLaDA 2.1 page; SGCL: the Llama 3.1 page)
SGLANG_RANDOM_LENGTHS = {
    "sglang-random-1000-seed1-n10": ((1000, 1000, 10), (6101, 4220)),  # SGC, SGCL 5.1.1.1
    "sglang-random-1000-seed1-n80": ((1000, 1000, 80), (39668, 40805)),  # SGCL 5.1.1.2
    "sglang-random-1000-seed1-n500": ((1000, 1000, 500), (249831, 252662)),  # SGC, SGCL 5.1.1.3
    "sglang-random-1000-seed1-n320": ((1000, 1000, 320), (158939, 170134)),  # SGCQ 5.1.1.3
    "sglang-random-8000-1000-seed1-n10": ((8000, 1000, 10), (41941, 4220)),  # SGCL 5.1.2.1
    "sglang-random-8000-1000-seed1-n80": ((8000, 1000, 80), (300020, 41669)),  # SGCL 5.1.2.2
    "sglang-random-8000-1000-seed1-n320": ((8000, 1000, 320), (1273893, 170000)),  # SGCL 5.1.2.3
    # SGCR's reasoning runs (the DeepSeek-R1 page prints each generated total less one token a request)
    "sglang-random-1000-8000-seed1-n10": ((1000, 8000, 10), (6101, 44452 + 10)),
    "sglang-random-1000-8000-seed1-n80": ((1000, 8000, 80), (39668, 318226 + 80)),
    "sglang-random-1000-8000-seed1-n320": ((1000, 8000, 320), (158939, 1300705 + 320)),
    # SGCGEM (its Gemma 4 page): no length flags, so bench_serving's default 1024 / 1024
    "sglang-random-1024-seed1-n10": ((1024, 1024, 10), (6101, 4220)),
    "sglang-random-1024-seed1-n1000": ((1024, 1024, 1000), (512842, 510855)),
}


@pytest.mark.parametrize("stem", sorted(SGLANG_RANDOM_LENGTHS))
def test_serving_lengths_are_bench_servings_draws_and_reproduce_the_published_totals(stem):
    """Each length file is the draw regenerated here (the file is what `dlmcost serve` reads, one line of
    lengths), and its sums are the cookbook's printed token totals."""
    import numpy as np

    (inputs, outputs, n), published = SGLANG_RANDOM_LENGTHS[stem]
    draws = np.random.RandomState(1)
    drawn = draws.randint(1, inputs + 1, size=n), draws.randint(1, outputs + 1, size=n)
    folder = validation.ROOT / "validation" / "lengths"
    for side, lengths, total in zip(("input", "output"), drawn, published):
        text = (folder / f"{stem}-{side}.txt").read_text()
        assert text == " ".join(str(v) for v in lengths) + "\n"
        assert sum(int(v) for v in text.split()) == total


def assert_length_files(stem: str, inputs, outputs) -> None:
    """validation/lengths/{stem}-input.txt and -output.txt are these lengths, one line each, as written."""
    folder = validation.ROOT / "validation" / "lengths"
    for side, lengths in (("input", inputs), ("output", outputs)):
        assert (folder / f"{stem}-{side}.txt").read_text() == " ".join(str(v) for v in lengths) + "\n"


# InferenceX's harness (utils/bench_serving/benchmark_serving.py, a copy of vLLM's older benchmark script): numpy's
# legacy generator at --seed 0, N inputs randint(int(ratio x I), I + 1) and then N outputs likewise about O;
# file stem -> (I, O, N) for IFX's, AICS's and IFX12's runs at range ratio 0.8 and 10 x c prompts (IFX12's B300 sweep
# starts at 1 and 2 in flight)
HARNESS_RATIO_LENGTHS = {
    f"vllm-bench-random-{shape}-ratio0.8-seed0-n{n}": (i, o, n)
    for shape, (i, o), top in (("1024", (1024, 1024), 2560), ("1024-8192", (1024, 8192), 1280),
                               ("8192-1024", (8192, 1024), 2560))
    for n in (10, 20, 40, 80, 160, 320, 640, 1280, 2560) if n <= top and (n >= 40 or shape != "1024-8192")
}


@pytest.mark.parametrize("stem", sorted(HARNESS_RATIO_LENGTHS))
def test_serving_lengths_are_inferencex_harness_draws(stem):
    import numpy as np

    inputs, outputs, n = HARNESS_RATIO_LENGTHS[stem]
    draws = np.random.RandomState(0)
    drawn = [draws.randint(int(0.8 * length), length + 1, size=n) for length in (inputs, outputs)]
    assert min(drawn[0]) >= int(0.8 * inputs) and max(drawn[1]) <= outputs
    assert_length_files(stem, *drawn)


def test_serving_lengths_are_vllm_bench_serves_draws_and_reproduce_vkvs_output_totals():
    """VKV's ~20k / ~2k tokens '(±15% variance)' as `vllm bench serve --dataset-name random --random-input-len 20000
    --random-output-len 2000 --random-range-ratio 0.15 --num-prompts 150` at its default --seed 0 (vLLM 0.19.1,
    vllm/benchmarks/datasets.py, RandomDataset.get_sampling_params): numpy's default_rng(seed), 150 inputs
    integers(floor(r (1 - 0.15)), ceil(r (1 + 0.15)) + 1) where r is the input length less the tokenizer's special
    tokens (Llama 3's BOS: r = 19,999), then 150 outputs integers(1700, 2301); the served prompt is the BOS and the
    draw. Every Table 4 and 5 row's output tok/s x total duration is the drawn answers' 302,875 tokens within the
    published numbers' rounding (the answers run to length: bench serve sets ignore_eos for the random dataset)."""
    import numpy as np

    draws = np.random.default_rng(0)
    prompts = draws.integers(16999, 22999 + 1, size=150) + 1
    answers = draws.integers(1700, 2300 + 1, size=150)
    assert_length_files("vllm-bench-serve-random-20000-2000-ratio0.15-seed0-n150", prompts, answers)
    assert sum(answers) == 302875
    for tokens_per_s, duration_s in ((450.3, 672.6), (517.5, 585.2), (831.6, 364.2), (853.0, 355.1), (871.8, 347.4)):
        assert (tokens_per_s - 0.05) * (duration_s - 0.05) <= 302875 <= (tokens_per_s + 0.05) * (duration_s + 0.05)


def test_serving_tpot_from_its_definition(serving):
    """bench_serving's mean TPOT, (E2E - TTFT) / (answer - 1) per request, where every answer has the
    command's fixed length (1,536 tokens here): recomputed from serve's latency and first-block means."""
    row = next(r for r in serving if r["id"] == "wxrep-llada21mini-h20-4k1k5-c72-radixoff-k1"
               and r["metric"] == "tpot_mean_ms")
    assert "--answer 1536" in " ".join(row["point"]["command"].split())
    point = validation.serve_json(row["point"]["command"])
    assert row["predicted"] == pytest.approx(1000 * (point["latency_s"]["mean"] - point["ttfb_s"]["mean"]) / 1535)


def test_serving_median_ttft_is_serves_median_first_block(serving):
    """A published median TTFT (ttft_p50_s) is scored against serve's median time to the first block, not its
    mean, and counts in the first-token band: VKV's ~20k-token prompts at 8 in flight, where the two differ."""
    row = next(r for r in serving if r["id"] == "vkv-llama31-8b-h100-vllm-20k2k-c8" and r["metric"] == "ttft_p50_s")
    point = validation.serve_json(row["point"]["command"])
    assert row["predicted"] == pytest.approx(point["ttfb_s"]["median"])
    # a mean would not pass: 1.03 s against the median's 0.86 s (the job's start, eight 17k-23k-token prompts at
    # once, puts a few first tokens seconds late: the p99 is 5.2 s)
    assert abs(point["ttfb_s"]["mean"] / point["ttfb_s"]["median"] - 1) > 0.1
    assert validation.first_token(row)


def test_fitted_tokens_per_forward_reproduce_their_points(serving):
    """Each point whose note sets --tpf predicts its measured throughput within 3%, or, where whole
    steps per block make the throughput jump past it (DiffusionGemma on vLLM at one request: one
    whole step fewer per block between 53.89 and 53.9), no value a hundredth either side predicts
    closer (scripts/fit_serving_tpf.py fits to two decimals); the points that lean on it use the same value."""
    import re

    fit = _fit_script()
    fitted = [r for r in serving if re.match(r"\w+ sets --tpf ", r["point"].get("fitted") or "") and r["in_sample"]]
    assert len(fitted) >= 8
    for r in fitted:
        value = re.search(r"sets --tpf ([0-9.]+)", r["point"]["fitted"]).group(1)
        if r["error"] > 1.03:
            metric = re.match(r"(\w+) sets", r["point"]["fitted"]).group(1)
            command = " ".join(r["point"]["command"].split())
            for neighbour in (float(value) - 0.01, float(value) + 0.01):
                ratio = validation.METRICS[metric][1](validation.serve_json(fit.with_tpf(command, neighbour)))
                ratio /= float(r["point"]["measured"][metric])
                assert max(ratio, 1 / ratio) >= r["error"], (r["id"], neighbour, ratio)
        assert f"--tpf {value} " in " ".join(r["point"]["command"].split()) + " "
        for q in serving:
            if f"serving:{r['id']}" in q["point"].get("leans_on", []):
                assert f"--tpf {value} " in " ".join(q["point"]["command"].split()) + " ", q["id"]


def _fit_script():
    spec_fit = importlib.util.spec_from_file_location("fit_serving_tpf", ROOT / "scripts" / "fit_serving_tpf.py")
    fit = importlib.util.module_from_spec(spec_fit)
    spec_fit.loader.exec_module(fit)
    return fit


def test_fit_script_writes_a_value_where_it_is_used():
    """scripts/fit_serving_tpf.py's --write puts a fitted value in the fitting point's note and command and
    in the commands of the points that lean on it, and nowhere else."""
    fit = _fit_script()
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


def test_the_headline_without_each_publication_by_hand(monkeypatch):
    """A: errors 1.0 and 3.0, B: 2.0, and an in-source row of C (not scored): without A the median
    and worst are B's 2.0; without B, the median of 1.0 and 3.0 is 2.0 and the worst 3.0; C, which
    the headline never takes, is no row."""
    monkeypatch.setattr(validation, "scored", lambda r: not r["in_source"])
    rows = [dict(origin="A", error=1.0, in_source=False), dict(origin="B", error=2.0, in_source=False),
            dict(origin="C", error=9.0, in_source=True)]
    serving = [dict(origin="A", error=3.0, in_source=False)]
    assert validation.without_each_publication(rows, serving) == [("A", 2, 2.0, 2.0), ("B", 1, 2.0, 3.0)]


def _row(stack: str, metric: str, optimism: float, origin: str = "X", gpu: str = "H100 SXM") -> dict:
    """A scored serving row as error_bands reads it."""
    return dict(stack=stack, metric=metric, optimism=optimism, origin=origin, in_source=False, gpu=gpu)


def test_first_token_bands_fall_back_as_their_basis_says():
    """Every branch of the first-token band on made-up rows, its ends recomputed with numpy and its
    basis read: too few TTFT numbers anywhere (3): a stack with enough numbers and some TTFT ones
    takes its band over all of them; one with enough speed numbers and no TTFT one, its speed band;
    one with too few in all, the pooled band over every number. Six TTFT numbers of its own make a
    band apart; a stack with fewer then takes the pooled first-token band."""
    import numpy as np

    speed = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    rows = ([_row("sglang", "output_tokens_per_s", v, "A") for v in speed]
            + [_row("sglang", "ttft_mean_s", v, "B") for v in (3.0, 4.0)]
            + [_row("hf-eager", "e2e_mean_s", v) for v in speed] + [_row("vllm", "ttft_mean_s", 0.5)])
    bands = validation.error_bands([], rows)

    def ends(values):
        return pytest.approx(tuple(np.percentile(values, [10, 50, 90])), abs=1e-4)

    s = bands["sglang"]["first_token"]
    assert (s["low"], s["median"], s["high"]) == ends(speed + [3.0, 4.0]) and s["numbers"] == 8
    assert s["basis"] == ("all its out-of-source numbers, from 2 publications: too few first-token numbers for a "
                          "band apart (6 needed), 2 of its own, 3 in all")
    h = bands["hf-eager"]
    assert (h["first_token"]["low"], h["first_token"]["high"]) == (h["low"], h["high"])
    assert h["first_token"]["basis"] == "its speed band: no first-token numbers of its own (3 in all)"
    everything = speed + [3.0, 4.0] + speed + [0.5]
    p = bands["pooled"]["first_token"]
    assert (p["low"], p["median"], p["high"]) == ends(everything) and p["numbers"] == 15
    v = bands["vllm"]["first_token"]
    assert (v["low"], v["high"]) == (p["low"], p["high"])
    assert v["basis"] == "pooled, first-token ones included: 1 out-of-source number of its own (fewer than 6)"

    ttft = [2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    apart = validation.error_bands([], [_row("sglang", "ttft_mean_s", x, "B") for x in ttft]
                                   + [_row("vllm", "ttft_mean_s", 0.5)] + [_row("sglang", "output_tokens_per_s", 1.2)])
    s = apart["sglang"]["first_token"]
    assert (s["low"], s["median"], s["high"]) == ends(ttft)
    assert s["basis"] == "its own out-of-source first-token numbers, from 1 publication"
    assert apart["pooled"]["first_token"]["basis"] == "every stack's out-of-source first-token numbers"
    assert apart["pooled"]["first_token"]["numbers"] == 7
    assert apart["vllm"]["first_token"]["basis"] == "pooled: 1 first-token number of its own (fewer than 6)"


# The SGLang cookbook's Llama 3.1 runs (SGCL), in the order the page prints them, on one server whose
# radix cache is never flushed (bench_serving flushes it only in SGLang's CI or with --flush-cache):
# (I, O, N) of each run. Prompt i of every run is the i-th ShareGPT prompt of one shuffle (Python's random
# at seed 1), repeated and cut to the run's i-th drawn input length, so it shares its first
# min(L_i, L'_i) tokens with prompt i of every earlier run that had one; each run's warm-up request is
# its own prompt 0. SGCR (its DeepSeek-R1 page) runs the same chat and summarization runs with three
# reasoning runs between them, whose prompts are the chat runs' (the same input draws).
SGCL_RUNS = [(1000, 1000, 10), (1000, 1000, 80), (1000, 1000, 500), (8000, 1000, 10), (8000, 1000, 80), (8000, 1000, 320)]
SGCR_RUNS = [*SGCL_RUNS[:3], (1000, 8000, 10), (1000, 8000, 80), (1000, 8000, 320), *SGCL_RUNS[3:]]


def cached_shares(runs: list[tuple[int, int, int]], run: int) -> list[float]:
    """Each request's share of its prompt already in the radix cache when it is sent (4 decimals)."""
    import numpy as np

    def inputs(i_len: int, n: int):
        return np.random.RandomState(1).randint(1, i_len + 1, size=n)

    i_len, _, n = runs[run]
    mine = inputs(i_len, n)
    cached = np.zeros(n)
    cached[0] = mine[0]  # the warm-up
    for e_len, _, e_n in runs[:run]:
        theirs = inputs(e_len, e_n)
        k = min(n, e_n)
        cached[:k] = np.maximum(cached[:k], np.minimum(mine[:k], theirs[:k]))
    return [round(float(c) / float(p), 4) for c, p in zip(cached, mine)]


# SGCM7 (its MiniMax-M2.7 page): 10 prompts at 1, then 500 at 100, with no run of 80 between them
SGCM7_RUNS = [(1000, 1000, 10), (1000, 1000, 500)]
# SGCQ (its Qwen3-Coder page): 10 prompts at 1, 80 at 16, then 320 at 64 (the first two as SGCL's)
SGCQ_RUNS = [(1000, 1000, 10), (1000, 1000, 80), (1000, 1000, 320)]
# SGCGEM (its Gemma 4 page): 10 prompts at 1, then 1000 at 100, at the default 1024 / 1024 (its image runs
# between them share no prefix with these)
SGCGEM_RUNS = [(1024, 1024, 10), (1024, 1024, 1000)]


@pytest.mark.parametrize("runs, run, suffix", [(SGCL_RUNS, i, "") for i in range(len(SGCL_RUNS))]
                         + [(SGCR_RUNS, i, "") for i in range(len(SGCR_RUNS))]
                         + [(SGCM7_RUNS, 0, ""), (SGCM7_RUNS, 1, "-after-n10")]
                         + [(SGCQ_RUNS, i, "") for i in range(len(SGCQ_RUNS))]
                         + [(SGCGEM_RUNS, 0, ""), (SGCGEM_RUNS, 1, "-after-n10")])
def test_sglang_cookbook_cached_shares_are_regenerated_from_the_runs_order(runs, run, suffix):
    """validation/lengths/sglang-random-*-cached.txt: the shares above, one a request in the order sent
    (SGCL's and SGCR's earlier runs add nothing to each other's files: the same files serve both; a page
    whose runs differ has its own file, named by its earlier run)."""
    i_len, o_len, n = runs[run]
    shape = {(1000, 1000): "1000", (8000, 1000): "8000-1000", (1000, 8000): "1000-8000", (1024, 1024): "1024"}[i_len, o_len]
    name = f"sglang-random-{shape}-seed1-n{n}{suffix}-cached.txt"
    text = (validation.ROOT / "validation" / "lengths" / name).read_text()
    assert text == " ".join(f"{v:g}" for v in cached_shares(runs, run)) + "\n"


def test_serving_summary_leaves_runs_not_modelled_out_of_every_figure():
    """A not-modelled run is listed on the page but counted nowhere: the figures are those of the other
    rows alone (median of 1.0, 1.5, 2.0 by hand), whatever its own error."""
    def row(error, not_modelled=None, concurrency=16):
        return dict(error=error, optimism=error, concurrency=concurrency, batch=concurrency, in_sample=False,
                    id=f"p{error}", metric="output_tokens_per_s", curve="c", not_modelled=not_modelled)

    rs = [row(1.0), row(1.5), row(2.0, concurrency=64), row(18.0, not_modelled="an older release", concurrency=64)]
    s = validation.serving_summary(rs)
    assert (s["n"], s["median_error"], s["worst_error"], s["n_not_modelled"]) == (3, 1.5, 2.0, 1)
    assert (s["n_heavy"], s["heavy_worst_error"], s["big_optimism"], s["points"]) == (3, 2.0, 2.0, 3)
    assert s["curves"] == {"c": [16, 64]}


def test_a_mean_first_token_beside_a_published_median_is_listed_not_scored():
    """Where a run publishes both, the median time to the first token is scored and the mean is a tail:
    out of the headline, the bands and the serving figures, counted apart (errors 1.2 and 1.4 scored, the
    mean's 4.0 not: median 1.3 and worst 1.4 by hand; the tails' own figure is 4.0). A mean alone (no
    median published) is scored as before, and a median never is a tail."""
    with_median = {"measured": {"ttft_mean_s": 0.7, "ttft_p50_s": 0.19}}
    alone = {"measured": {"ttft_mean_s": 0.7}}
    assert validation.mean_beside_median("ttft_mean_s", with_median)
    assert not validation.mean_beside_median("ttft_p50_s", with_median)
    assert not validation.mean_beside_median("ttft_mean_s", alone)
    assert not validation.mean_beside_median("output_tokens_per_s", with_median)

    def row(error, metric, point, origin="X"):
        return dict(error=error, optimism=1 / error, concurrency=32, batch=32, in_sample=False, in_source=False,
                    id="p", metric=metric, curve="c", origin=origin, point=point,
                    tail=validation.mean_beside_median(metric, point))

    serving = [row(1.2, "ttft_p50_s", with_median), row(4.0, "ttft_mean_s", with_median),
               row(1.4, "ttft_mean_s", alone, origin="Y")]
    assert [validation.scored(r) for r in serving] == [True, False, True]
    h = validation.headline([], serving)
    assert (h["n"], h["median_error"], h["worst_error"]) == (2, pytest.approx(1.3), 1.4)
    assert (h["n_tail"], h["tail_median_error"], h["tail_worst_error"]) == (1, 4.0, 4.0)
    s = validation.serving_summary(serving)
    assert (s["n"], s["worst_error"], s["n_tail"], s["n_not_modelled"]) == (2, 1.4, 1, 0)


def test_a_median_tpot_is_the_requests_median_gap_and_near_the_means_where_lengths_are_equal():
    """tpot_p50_ms (bench_serving's median TPOT) reads serve's median inter-token gap; where every
    prompt and answer has one length (AITR's 1,024 / 1,024 closed loops), each request's TPOT is
    (E2E - TTFT) / (answer - 1), so the median sits beside the mean read from serve's mean E2E and
    TTFT (tpot_mean_ms), a second route: within 3% of it."""
    points = {p["id"]: p for p in validation.load_yaml(validation.SERVING.read_text(encoding="utf-8"))["points"]}
    ids = [i for i in points if i.startswith("aitr-")]
    assert len(ids) == 8
    for i in ids[:2]:
        predicted = validation.serve_json(" ".join(points[i]["command"].split()))
        median = validation.METRICS["tpot_p50_ms"][1](predicted)
        mean = validation.METRICS["tpot_mean_ms"][1](predicted)
        assert median == pytest.approx(1000 * predicted["inter_block_s"]["median"])
        assert median == pytest.approx(mean, rel=0.03)


# the published median TTFTs (ms) of the runs the sglang stack's latent-attention first-token delay was fitted on
# (the SGLang cookbook's DeepSeek-R1-0528 page on 8x B200, one request in flight; its source: 820 us over
# DeepSeek-V3's 61 MLA layers), and the mean TTFTs of the runs its other layers' delay was fitted on (SGLang PR
# #13094's Llama-3.1-8B FP8 at TP8, one request in flight, prefills eager and graphed; 323 us over 32 layers)
FIRST_TOKEN_FIT_MS = {"sgcr-dsr1-fp8-b200tp8-sglang-1k1k-c1": 140.76, "sgcr-dsr1-fp8-b200tp8-sglang-1k8k-c1": 126.19,
                      "sgcr-dsr1-fp8-b200tp8-sglang-8k1k-c1": 154.96}
DENSE_FIRST_TOKEN_FIT_MS = {"sgp13094-llama31-8b-fp8-h100tp8-sglang-eager-1k16-c1": 29.97,
                            "sgp13094-llama31-8b-fp8-h100tp8-sglang-pcg-1k16-c1": 19.66}


def _refit_first_token_delay_ms(tmp_path, fit_ms: dict[str, float], statistic: str) -> float:
    """The delay (ms) that minimises the squared log error of the runs' published first tokens over the
    model's with no delay at all, by brute force (0 to 200 ms by 0.01 ms), each run on its own stack."""
    import math

    points = {p["id"]: p for p in validation.load_yaml(validation.SERVING.read_text(encoding="utf-8"))["points"]}
    bare = {}
    for pid in fit_ms:
        command = " ".join(points[pid]["command"].split())
        stack = command.split(" --stack ")[1].split()[0]
        assert stack in ("sglang", "sglang-pcg")
        path = tmp_path / f"{stack}-no-delay.yaml"
        path.write_text(f"extends: {stack}\nname: {stack}-no-delay\nfront_end:\n  first_token_us_per_layer: 0\n"
                        "  first_token_us_per_mla_layer: 0\n")
        served = validation.serve_json(command.replace(f" --stack {stack} ", f" --stack {path} "))
        bare[pid] = 1000 * served["ttfb_s"][statistic]
    assert all(bare[p] < fit_ms[p] for p in bare)  # each lacks a delay, none overshoots

    def loss(delay_ms: float) -> float:
        return sum((math.log(fit_ms[p]) - math.log(bare[p] + delay_ms)) ** 2 for p in bare)

    return min((k / 100 for k in range(20001)), key=loss)


def test_the_first_token_delay_still_fits_its_runs(tmp_path):
    """Refit by brute force under the model as it now stands: each of the sglang stack's two delays, refitted
    on its own runs, lies within 3% of the stack's number; a change to the cost model that moves it further
    fails here, asking for a refit."""
    from dlmcost.inputs.stacks import load_stack

    front = load_stack("sglang").front_end
    mla_ms = _refit_first_token_delay_ms(tmp_path, FIRST_TOKEN_FIT_MS, "median")
    assert mla_ms * 1000 / 61 == pytest.approx(front.first_token_us_per_mla_layer, rel=0.03)
    dense_ms = _refit_first_token_delay_ms(tmp_path, DENSE_FIRST_TOKEN_FIT_MS, "mean")
    assert dense_ms * 1000 / 32 == pytest.approx(front.first_token_us_per_layer, rel=0.03)


def test_pr13094_runs_find_only_their_warm_up_prompt_cached():
    """validation/lengths/sglang-flushed-warmup-n*-cached.txt: the cache flushed before each run, whose
    warm-up request sends the run's first prompt: share 1 for the first request, 0 for the others."""
    for n in (8, 32, 192, 256):
        text = (validation.ROOT / "validation" / "lengths" / f"sglang-flushed-warmup-n{n}-cached.txt").read_text()
        assert text == " ".join(["1"] + ["0"] * (n - 1)) + "\n"


def test_serving_notes_join_each_wrapped_bullet_into_one_line(tmp_path):
    """The notes file wraps its paragraphs; the page gets each bullet on one line, the file's header left out."""
    notes = tmp_path / "notes.md"
    notes.write_text("# Why\n\nAbout these notes,\nover two lines.\n\n- SGLang at 100: the first\n  and second line.\n\n"
                     "- vLLM: one line.\n")
    assert validation.serving_notes(notes) == ["- SGLang at 100: the first and second line.", "- vLLM: one line."]


def test_every_serving_note_is_on_the_page():
    page = validation.PAGE.read_text(encoding="utf-8").splitlines()
    notes = validation.serving_notes()
    assert len(notes) > 20 and all(note in page for note in notes)
