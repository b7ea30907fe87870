"""A GPU's GEMMs stream their weights at a measured rate per weight precision (the hardware file's
`efficiency.weight_streaming`: NVIDIA aiconfigurator's CUDA-graph GEMM timings), every other op at
the generic `memory_bandwidth` and `overhead_us_per_op`: each checked against the formula."""

from __future__ import annotations

import json

import pytest

from dlmcost.errors import HardwareFileError
from dlmcost.inputs.hardware import HardwareDB

pytestmark = pytest.mark.usefixtures("bundled_offline")

BASE = """name: Streamer {tag}
aliases: [streamer-{tag}]
vendor: NVIDIA
status: estimated
memory_gb: 80
bandwidth_tb_s: 2.0
peak_tflops: {{bf16: 1000, fp8: 2000, fp32: 60}}
scale_up_gb_s: 300
efficiency:
  memory_bandwidth: 0.8
  gemm: {{bf16: 0.8, fp8: 0.8}}
  overhead_us_per_op: 0
{streaming}sources: {{memory: test, bandwidth: test, peak_tflops: test, efficiency: test}}
"""


def _gpu(tmp_path, tag: str, streaming: str = "") -> str:
    path = tmp_path / f"{tag}.yaml"
    path.write_text(BASE.format(tag=tag, streaming=streaming))
    return str(path)


def _ops(run, hw: str, tag: str, precision: str) -> dict:
    rc, out, err = run("analyze", "Qwen/Qwen2.5-7B", "--gpu", f"streamer-{tag}", "--hardware", hw, "--scheme", "ar",
                       "--prompt", "64", "--gen", "8", "--precision", precision, "--ops", "-f", "json")
    assert rc == 0, err
    return {op["name"]: op for op in json.loads(out)["results"][0]["ops"]}


def test_gemms_stream_at_their_precisions_rate_and_other_ops_at_the_generic_one(tmp_path, run):
    """Decode at one request is memory-bound: a GEMM's time is kernels x overhead + bytes / (fraction x
    2 TB/s). With bf16 GEMMs at 0.4 of the peak and no overhead (the generic: 0.8), every GEMM op (q/k/v
    and output projections, the MLP) takes twice the generic time, to the rounding of the prefill's
    share of it; attention and the elementwise ops are unchanged, and an fp8 run (no fp8 entry) too.
    With 10 us a kernel the difference is exactly the kernels' count times 10 us over the pass."""
    generic = _ops(run, _gpu(tmp_path, "a"), "a", "bf16")
    slow = _ops(run, _gpu(tmp_path, "b", "  weight_streaming:\n    bf16: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n"),
                "b", "bf16")
    for name in ("o_proj", "mlp"):
        # the prefill (64 rows) is memory-bound at this GPU's ridge too: every pass doubles
        assert slow[name]["time_s"] == pytest.approx(2 * generic[name]["time_s"], rel=1e-9), name
    for name in ("attention", "elementwise"):
        assert slow[name]["time_s"] == pytest.approx(generic[name]["time_s"], rel=1e-12), name
    fp8_generic = _ops(run, _gpu(tmp_path, "c"), "c", "fp8")
    fp8_slow = _ops(run, _gpu(tmp_path, "d", "  weight_streaming:\n    bf16: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n"),
                    "d", "fp8")
    assert fp8_slow["mlp"]["time_s"] == pytest.approx(fp8_generic["mlp"]["time_s"], rel=1e-12)
    # the same rate, 10 us a kernel: the MLP's time grows by its kernels x 10 us (8 passes of the
    # pass families: 1 prefill, which samples the first of the 8 tokens, + 7 decode steps; Qwen2.5-7B
    # has 28 layers, the MLP op one kernel a layer)
    launches = _ops(run, _gpu(tmp_path, "e", "  weight_streaming:\n    bf16: {memory_bandwidth: 0.8, overhead_us_per_op: 10}\n"),
                    "e", "bf16")
    extra = launches["mlp"]["time_s"] - generic["mlp"]["time_s"]
    assert extra == pytest.approx(10e-6 * 28 * 8, rel=1e-9)  # 2.24 ms
    assert launches["attention"]["time_s"] == pytest.approx(generic["attention"]["time_s"], rel=1e-12)


def test_a_streaming_precision_must_be_known(tmp_path):
    path = _gpu(tmp_path, "f", "  weight_streaming:\n    bf17: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n")
    with pytest.raises(HardwareFileError, match="bf17"):
        HardwareDB.load([path]).get("streamer-f")


def test_the_bundled_values_are_the_measured_fits():
    """The A100, H100, H200 and Blackwell parts' GEMMs: aiconfigurator's timings fitted as latency = t0 +
    bytes / (fraction x peak); the parts without published GEMM timings keep the generic values."""
    db = HardwareDB.load(None)
    fits = {"a100": {"bf16": (0.71, 4.6)}, "h100": {"bf16": (0.83, 3.2), "fp8": (0.77, 5.4)},
            "h200": {"bf16": (0.81, 3.4), "fp8": (0.71, 5.6)},
            "b200": {"bf16": (0.76, 2.8), "fp8": (0.67, 6.5)}, "b300": {"bf16": (0.76, 2.5), "fp8": (0.68, 6.1)},
            "gb200": {"bf16": (0.76, 2.7), "fp8": (0.66, 6.4)}, "gb300": {"bf16": (0.75, 2.6), "fp8": (0.66, 6.3)}}
    for gpu, by_precision in fits.items():
        eff = db.get(gpu).efficiency
        for precision, (fraction, us) in by_precision.items():
            assert eff.streaming(precision) == (fraction, us), (gpu, precision)
        assert "aiconfigurator" in db.get(gpu).sources["efficiency"]
    l40s = db.get("l40s").efficiency  # its tables' small GEMMs run from its 96 MB L2: no fit taken
    assert l40s.streaming("bf16") == (l40s.memory_bandwidth, l40s.overhead_us_per_op)
    b200 = db.get("b200").efficiency
    assert b200.streaming("fp4") == (b200.memory_bandwidth, b200.overhead_us_per_op)  # not measured


def test_an_moes_experts_stream_at_the_gemms_rate(tmp_path, run):
    """The routed experts (their expected distinct experts' weights, the gaps between a pass family's
    ends included) are GEMMs: at half the bandwidth fraction, twice the time."""
    def experts(tag, stack, streaming=""):
        hw = _gpu(tmp_path, tag, streaming)
        rc, out, err = run("analyze", "Qwen/Qwen3-30B-A3B", "--gpu", f"streamer-{tag}", "--hardware", hw,
                           "--scheme", "ar", "--prompt", "64", "--gen", "32", "--stack", stack, "--ops", "-f", "json")
        assert rc == 0, err
        return {op["name"]: op for op in json.loads(out)["results"][0]["ops"]}["experts"]["time_s"]

    half = "  weight_streaming:\n    bf16: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n"
    for stack in ("sglang", "none"):  # pass by pass under a stack; the bare roofline's closed form
        assert experts(f"m1{stack}", stack, half) == pytest.approx(2 * experts(f"m0{stack}", stack), rel=1e-9), stack


def test_an_moes_experts_take_their_own_streaming_where_measured(tmp_path, run):
    """A hardware file's experts_streaming moves the routed experts alone (the gaps between a pass
    family's ends included, under a stack pass by pass and on the bare roofline in closed form): at
    half its bandwidth fraction the experts take twice the time, while the router, a dense GEMM,
    keeps weight_streaming's rate; a precision it does not list takes weight_streaming's."""
    def ops(tag, stack, streaming, precision="bf16"):
        hw = _gpu(tmp_path, tag, streaming)
        rc, out, err = run("analyze", "Qwen/Qwen3-30B-A3B", "--gpu", f"streamer-{tag}", "--hardware", hw,
                           "--scheme", "ar", "--prompt", "64", "--gen", "32", "--stack", stack, "--precision", precision,
                           "--ops", "-f", "json")
        assert rc == 0, err
        return {op["name"]: op["time_s"] for op in json.loads(out)["results"][0]["ops"]}

    dense = "  weight_streaming:\n    bf16: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n"
    own = dense + "  experts_streaming:\n    bf16: {memory_bandwidth: 0.8, overhead_us_per_op: 0}\n"
    slower = dense + "  experts_streaming:\n    bf16: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n"
    for stack in ("sglang", "none"):
        fast, slow, plain = ops(f"e1{stack}", stack, own), ops(f"e2{stack}", stack, slower), ops(f"e0{stack}", stack, dense)
        assert slow["experts"] == pytest.approx(2 * fast["experts"], rel=1e-9), stack
        assert slow["experts"] == pytest.approx(plain["experts"], rel=1e-9), stack  # 0.4 is the dense GEMMs' too
        assert fast["router"] == slow["router"] == plain["router"], stack
    # fp8 weights: the file lists bf16 only, so the experts stream at the GEMMs' (generic) fp8 rate
    assert ops("e3", "none", own, "fp8")["experts"] == pytest.approx(ops("e4", "none", dense, "fp8")["experts"], rel=1e-12)


def test_a_fused_moe_block_is_aiconfigurators_measured_time():
    """DeepSeek-V3's routed-experts block at TP8 on an H200 in fp8, one token, with the bare roofline: two
    grouped-GEMM kernels at the fp8 streaming rate (2 x 5.6 us) over the 8 touched experts' 1/8 slices
    (3 x 7168 x 2048 / 8 bytes each: 44 MB a layer, read at 0.71 of 4.8 TB/s) plus four small kernels at
    the generic 3 us: 36.1 us a layer, against 36.4 us measured for SGLang's fused MoE (NVIDIA
    aiconfigurator's h200_sxm moe_perf, sglang 0.5.14). The four small kernels are the elementwise op's."""
    from dlmcost import api

    r = api.analyze("deepseek-ai/DeepSeek-V3", "h200", stack="none", scheme="ar", prompt=1, gen=2, tp=8,
                    precision="fp8")["results"][0]
    ops = {o["name"]: o for o in r["ops"]}
    layers = 58  # DeepSeek-V3's MoE layers (the first 3 of its 61 are dense)
    expert_bytes = 3 * 7168 * 2048 / 8  # an expert's gate, up and down, a TP8 slice, one byte a weight
    touched = 8  # one token, 8 routed experts
    # each copy's activations in and out: d_model in, the slice's 3 x 256 intermediate, in bf16
    activations = 2 * touched * (7168 + 3 * 2048 / 8) * 2
    per_layer = 2 * 5.6e-6 + (touched * expert_bytes + activations) / (0.71 * 4.8e12)
    passes = 2  # the prompt's pass (the first token) and one decode step (the second), each over one token
    assert ops["experts"]["time_s"] == pytest.approx(passes * layers * per_layer, rel=1e-9)
    assert per_layer + 4 * 3e-6 == pytest.approx(36.1e-6, abs=0.1e-6)


def test_decode_attention_reads_the_cache_at_its_measured_rate_and_other_passes_do_not(tmp_path, run):
    """`efficiency.decode_attention` times attention in passes of one query a sequence (AR decode's
    steps) and no other. Qwen2.5-7B (28 layers, 28 query and 4 K/V heads of 128), prompt 64, 8
    tokens (the prefill samples the first; 7 steps feed tokens 0..6): the steps read 64..70 cached
    tokens. By hand, their attention moves 28 x (64+...+70 = 469) x 1,024 x 2 B of K/V read
    + 28 x 7 x 1,024 x 2 B written + 28 x 7 x (2 x 28 x 128 + 1,024) x 2 B of Q/O/K/V activations
    = 30,507,008 B, memory-bound: at 0.4 of 2 TB/s they take 30,507,008 / 1.6e12 s more than at the
    generic 0.8 (19.07 us), the prefill's attention (64 queries) unchanged. 10 us a kernel adds
    7 steps x 28 kernels x 10 us."""
    generic = _ops(run, _gpu(tmp_path, "g"), "g", "bf16")
    slow = _ops(run, _gpu(tmp_path, "h", "  decode_attention: {memory_bandwidth: 0.4, overhead_us_per_op: 0}\n"),
                "h", "bf16")
    moved = 28 * 469 * 1024 * 2 + 28 * 7 * 1024 * 2 + 28 * 7 * (2 * 28 * 128 + 1024) * 2
    assert moved == 30_507_008
    assert slow["attention"]["time_s"] - generic["attention"]["time_s"] == pytest.approx(moved / 1.6e12, rel=1e-9)
    for name in ("o_proj", "mlp", "elementwise"):
        assert slow[name]["time_s"] == pytest.approx(generic[name]["time_s"], rel=1e-12), name
    launches = _ops(run, _gpu(tmp_path, "i", "  decode_attention: {memory_bandwidth: 0.8, overhead_us_per_op: 10}\n"),
                    "i", "bf16")
    assert launches["attention"]["time_s"] - generic["attention"]["time_s"] == pytest.approx(7 * 28 * 10e-6, rel=1e-9)


def test_bundled_decode_attention_rates_are_the_measured_fits():
    """The measured decode-attention fits (aiconfigurator's generation-attention tables): the A100
    (and the A800, its die) at 16.5 us + bytes / (0.46 x peak); H100/H800 and H200 their measured
    latencies at the generic 0.8, and so B200, B300, GB200 and GB300; a GPU without a table the generic
    rate."""
    db = HardwareDB.load(None)
    expected = {"a100": (0.46, 16.5), "a800": (0.46, 16.5), "h100": (0.8, 10.6), "h800": (0.8, 10.6),
                "h200": (0.8, 11.1), "b200": (0.8, 9.7), "b300": (0.8, 8.9), "gb200": (0.8, 10.0),
                "gb300": (0.8, 10.1)}
    for name, rate in expected.items():
        assert db.get(name).efficiency.decode_attention_rate() == rate, name
        assert "generation_attention_perf" in db.get(name).sources["efficiency"], name
    l40s = db.get("l40s").efficiency
    assert l40s.decode_attention is None
    assert l40s.decode_attention_rate() == (l40s.memory_bandwidth, l40s.overhead_us_per_op)


def _relative_least_squares(rows) -> tuple[float, float]:
    """(a, b) minimising sum ((a u + b x - y) / y)^2 over rows (u, x, y): the 2 x 2 weighted normal
    equations solved by hand here, not with the code's help."""
    w = [1 / y ** 2 for _, _, y in rows]
    suu = sum(wi * u * u for wi, (u, _, _) in zip(w, rows))
    sux = sum(wi * u * x for wi, (u, x, _) in zip(w, rows))
    sxx = sum(wi * x * x for wi, (_, x, _) in zip(w, rows))
    suy = sum(wi * u * y for wi, (u, _, y) in zip(w, rows))
    sxy = sum(wi * x * y for wi, (_, x, y) in zip(w, rows))
    det = suu * sxx - sux * sux
    return (suy * sxx - sux * sxy) / det, (suu * sxy - sux * suy) / det


def _corpus(name: str) -> list[dict]:
    import csv
    from pathlib import Path

    table = Path(__file__).parent / "corpus" / name
    return list(csv.DictReader(line for line in table.open() if not line.startswith("#")))


# each die's published tuning rows (tests/corpus, copied from ROCm/aiter's tables), its peak bandwidth,
# the parts that take its fits, and the fits their hardware files give
AMD_DIES = {
    "gfx942": dict(rows=245, peak=5.3e12, gpus=("mi300x", "mi325x"), dense=(0.40, 3.8), blocks=19, experts=(0.80, 14.0)),
    "gfx950": dict(rows=543, peak=8.0e12, gpus=("mi355x",), dense=(0.49, 4.0), blocks=77, experts=(0.85, 12.3)),
}


@pytest.mark.parametrize("die", AMD_DIES)
def test_the_amd_fp8_streaming_is_the_least_squares_fit_of_aiters_tuned_gemms(die):
    """latency = t0 + weight bytes / (fraction x peak), fitted by least squares of the relative error
    to the published tuned FP8 block-scale GEMM times at 1-64 rows (a weight is N x K bytes and a
    4-byte scale per 128 x 128 block), as the die's parts' hardware files give it (rounded); bf16
    keeps the generic values."""
    spec = AMD_DIES[die]
    rows = _corpus(f"aiter_{die}_fp8_blockscale_gemm_1_64_rows.csv")
    assert len(rows) == spec["rows"] and all(1 <= int(r["M"]) <= 64 for r in rows)
    t0, c = _relative_least_squares([(1.0, int(r["N"]) * int(r["K"]) * (1 + 4 / 128 ** 2) / spec["peak"],
                                      float(r["us"]) * 1e-6) for r in rows])
    assert (round(1 / c, 2), round(t0 * 1e6, 1)) == spec["dense"]
    db = HardwareDB.load(None)
    for name in spec["gpus"]:
        eff = db.get(name).efficiency
        assert eff.streaming("fp8") == spec["dense"], name
        assert eff.streaming("bf16") == (eff.memory_bandwidth, eff.overhead_us_per_op), name
        if name != "mi325x":  # whose file takes the MI300X's, the same die
            assert "e4048607a535" in db.get(name).sources["efficiency"], name


@pytest.mark.parametrize("die", AMD_DIES)
def test_the_amd_fused_moe_experts_are_aiters_measured_blocks(die):
    """experts_streaming fp8: a fused MoE block's two grouped GEMMs take 2 t0 + touched expert bytes /
    (fraction x peak), fitted by least squares of the relative error to the published tuned block
    times at 1-64 tokens (uniform routing's expected distinct experts E (1 - (1 - k/E)^T), each 3 D I
    bytes and a 4-byte scale per 128 x 128 block). On gfx942 the fraction is held at 0.80, the MI300X's
    measured copy rate, which the free fit passes (0.995), and t0 alone fitted; on gfx950 both."""
    spec = AMD_DIES[die]
    rows = _corpus(f"aiter_{die}_fp8_fused_moe_1_64_tokens.csv")
    assert len(rows) == spec["blocks"]
    points = []
    for r in rows:
        tokens, d, i, e, k = (int(r[c]) for c in ("token", "model_dim", "inter_dim", "expert", "topk"))
        touched = e * (1 - (1 - k / e) ** tokens)
        points.append((2.0, touched * 3 * d * i * (1 + 4 / 128 ** 2) / spec["peak"], float(r["us"]) * 1e-6))
    t0, c = _relative_least_squares(points)
    fraction, _ = spec["experts"]
    if die == "gfx942":
        assert 1 / c > 0.99  # past the part's copy rate: held there, t0 fitted alone
        t0 = sum(2 * (y - x / fraction) / y ** 2 for _, x, y in points) / sum(4 / y ** 2 for _, _, y in points)
    else:
        fraction = round(1 / c, 2)
    assert (fraction, round(t0 * 1e6, 1)) == spec["experts"]
    db = HardwareDB.load(None)
    for name in spec["gpus"]:
        assert db.get(name).efficiency.experts_rate("fp8") == spec["experts"], name
        assert db.get(name).efficiency.experts_rate("bf16") == db.get(name).efficiency.streaming("bf16"), name


# each Blackwell part's measured bf16 fused MoE blocks (tests/corpus, copied from NVIDIA aiconfigurator's SGLang
# tables), its peak bandwidth and the fit its hardware file gives
NVIDIA_BF16_MOE = {
    "b200": dict(table="b200_sxm", rows=552, peak=7.7e12, experts=(0.63, 10.6)),
    "b300": dict(table="b300_sxm", rows=600, peak=7.75e12, experts=(0.62, 12.3)),
    "gb200": dict(table="gb200", rows=552, peak=8.0e12, experts=(0.61, 10.5)),
    "gb300": dict(table="gb300", rows=552, peak=8.0e12, experts=(0.62, 10.3)),
}


@pytest.mark.parametrize("gpu", NVIDIA_BF16_MOE)
def test_blackwell_bf16_fused_moe_experts_are_sglangs_measured_blocks(gpu):
    """experts_streaming bf16 on a Blackwell part: a whole measured fused MoE block (top-k, align, two
    grouped GEMMs, activation, reduce) less the four small kernels the elementwise op charges at 3 us each
    is 2 t0 + touched expert bytes (uniform routing: E (1 - (1 - k/E)^T) experts of 3 D I / tp bf16 weights) /
    (fraction x peak), fitted by least squares of the relative error at 1-64 tokens, as the hardware file
    gives it (rounded). fp8 keeps the dense GEMMs' streaming rate, and the Hopper parts have no such block."""
    spec = NVIDIA_BF16_MOE[gpu]
    rows = _corpus(f"aiconfigurator_{spec['table']}_sglang_bfloat16_fused_moe_1_64_tokens.csv")
    assert len(rows) == spec["rows"] and all(1 <= int(r["tokens"]) <= 64 for r in rows)
    points = []
    for r in rows:
        tokens, d, i, e, k, tp = (int(r[c]) for c in ("tokens", "hidden", "inter", "experts", "topk", "tp"))
        touched = e * (1 - (1 - k / e) ** tokens)
        points.append((2.0, touched * 3 * d * i / tp * 2 / spec["peak"], float(r["us"]) * 1e-6 - 4 * 3e-6))
    t0, c = _relative_least_squares(points)
    assert (round(1 / c, 2), round(t0 * 1e6, 1)) == spec["experts"]
    db = HardwareDB.load(None)
    eff = db.get(gpu).efficiency
    assert db.get(gpu).bandwidth_tb_s * 1e12 == spec["peak"] and eff.overhead_us_per_op == 3
    assert eff.experts_rate("bf16") == spec["experts"]
    assert eff.experts_rate("fp8") == eff.streaming("fp8")
    assert f"{spec['table']}/moe/sglang" in db.get(gpu).sources["efficiency"]
    for hopper in ("h100", "h200"):
        assert db.get(hopper).efficiency.experts_streaming == {}, hopper


def test_mi300x_decode_attention_and_a_deepseek_moe_block_by_hand():
    """The MI300X and MI325X take aiter's MLA decode kernel's 15.5 us at the generic 0.75; DeepSeek-V3's
    TP8 experts at one token on an MI300X, bare roofline, by hand: 2 x 14 us + 8 touched slices of 3 x
    7168 x 2048 / 8 bytes with their activations at 0.80 of 5.3 TB/s, 58 MoE layers, two passes."""
    from dlmcost import api

    db = HardwareDB.load(None)
    for name in ("mi300x", "mi325x"):
        assert db.get(name).efficiency.decode_attention_rate() == (0.75, 15.5), name
    assert "PR #2039" in db.get("mi300x").sources["efficiency"]
    r = api.analyze("deepseek-ai/DeepSeek-V3", "mi300x", stack="none", scheme="ar", prompt=1, gen=2, tp=8,
                    precision="fp8")["results"][0]
    experts = {o["name"]: o for o in r["ops"]}["experts"]["time_s"]
    activations = 2 * 8 * (7168 + 3 * 2048 / 8) * 2  # each copy's bf16 activations in and out
    per_layer = 2 * 14.0e-6 + (8 * 3 * 7168 * 2048 / 8 + activations) / (0.80 * 5.3e12)
    assert experts == pytest.approx(2 * 58 * per_layer, rel=1e-9)
