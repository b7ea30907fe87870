"""Charts: the plotted points are the results' numbers, read back from the matplotlib objects,
the SVG and the terminal text; every chart renders for every scheme, an MoE and a TP layout.

Expected coordinates are computed here from the hardware files' raw numbers (TFLOP/s, TB/s)
and the results' arithmetic intensities with the roofline formula written out again.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("matplotlib")

from dlmcost import api  # noqa: E402
from dlmcost.render import charts, plot, termplot
from dlmcost.render.analyze import analyze_page, analyze_rows
from dlmcost.errors import UsageError  # noqa: E402
from dlmcost.inputs.hardware import HardwareDB  # noqa: E402

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
MOE = "inclusionAI/LLaDA2.0-mini"
SCHEMES = ("ar", "mdm", "prefix-cache", "dual-cache", "block")
# (model, analyze options) for every scheme, an MoE and a two-GPU tensor-parallel layout
CASES = [(LLADA, dict(scheme=s, gen=256, steps=64, block=32)) for s in SCHEMES] + [
    (MOE, dict(gpus="h100,b200")), (LLADA, dict(scheme="block", block=32, tp=2, precision="fp8"))]
CASE_IDS = list(SCHEMES) + ["moe", "tp2-fp8"]
SVG_NS = {"svg": "http://www.w3.org/2000/svg"}


# the same workload decoded autoregressively: an AR point computed apart from the chart
AR_WORKLOAD = dict(scheme="ar", steps=None, tpf=None, block=None, store_pass=None)


def analyze_pair(model: str, opts: dict):
    """The analyze result, and the same workload's AR decode analyzed apart (the independent
    source of the AR point the chart takes from the result)."""
    opts = dict(opts)
    gpus = opts.pop("gpus", "h100,b200")
    result = api.analyze(model, gpus, **opts).plain()
    ar = api.analyze(model, gpus, **{**opts, **AR_WORKLOAD}).plain()
    return result, ar


def knee_cell(result: dict, gpu: int = 0) -> str:
    """The knee as the analyze table shows it (its last column)."""
    return analyze_rows(result)[gpu][-1]


def roof_by_hand(gpu_key: str, compute: str, ai: float) -> float:
    """min(peak, AI * bandwidth) from the YAML's TFLOP/s and TB/s."""
    g = HardwareDB.load().get(gpu_key)
    return min(g.peak_tflops[compute] * 1e12, ai * g.bandwidth_tb_s * 1e12)


def lines_by_gid(fig) -> dict:
    return {line.get_gid(): line for ax in fig.axes for line in ax.get_lines() if line.get_gid()}


def test_attainable_flops_by_hand():
    # H100 SXM bf16: 989.5 TFLOP/s, 3.35 TB/s; ridge 295.4 FLOP/B
    assert charts.attainable_flops(1.0, 989.5e12, 3.35e12) == pytest.approx(3.35e12)
    assert charts.attainable_flops(100.0, 989.5e12, 3.35e12) == pytest.approx(335e12)
    assert charts.attainable_flops(1000.0, 989.5e12, 3.35e12) == pytest.approx(989.5e12)


@pytest.mark.parametrize(("model", "opts"), CASES, ids=CASE_IDS)
def test_roofline_points_are_the_results_numbers(model, opts):
    result, ar = analyze_pair(model, opts)
    compute = "fp8" if result["workload"]["precision"] == "fp8" else "bf16"
    chart = charts.roofline(result, show_ops=True)  # everything drawn comes from the result
    fig = plot.figure(chart)
    lines = lines_by_gid(fig)
    for r in result["results"]:
        key = r["gpu_key"]
        for p in r["passes"]:
            x, y = lines[f"pass:{p['name']}:{key}"].get_xydata()[0]
            assert x == pytest.approx(p["arithmetic_intensity"], rel=1e-12)
            assert y == pytest.approx(roof_by_hand(key, compute, p["arithmetic_intensity"]), rel=1e-12)
        # the roof bends at the ridge, at the peak
        g = HardwareDB.load().get(key)
        rx, ry = lines[f"roof:{key}"].get_xydata()[1]
        assert rx == pytest.approx(g.peak_tflops[compute] / g.bandwidth_tb_s)
        assert ry == pytest.approx(g.peak_tflops[compute] * 1e12)
        assert (f"roof-bf16:{key}" in lines) == (compute != "bf16")
        ops = [o for o in r["ops"] if o["arithmetic_intensity"] > 0]
        xy = lines[f"ops:{key}"].get_xydata()
        assert [pt[0] for pt in xy] == pytest.approx([o["arithmetic_intensity"] for o in ops])
        assert [pt[1] for pt in xy] == pytest.approx([roof_by_hand(key, compute, o["arithmetic_intensity"]) for o in ops])
        if result["workload"]["scheme"] != "ar":
            ar_step = next(p for q in ar["results"] if q["gpu_key"] == key for p in q["passes"] if p["name"] == "step")
            x, y = lines[f"ar-step:{key}"].get_xydata()[0]
            assert x == pytest.approx(ar_step["arithmetic_intensity"])
            assert y == pytest.approx(roof_by_hand(key, compute, x))
    page = analyze_page(result, [chart], show_ops=True)  # the SVG drawing: every artist drawn once
    assert page.count("<svg") == 1 and all(f"pass:{p['name']}:" in page for p in result["results"][0]["passes"])
    text = termplot.render(chart, width=100)
    assert "attainable FLOP/s" in text and "step pass" in text


def test_roofline_saves_as_png(tmp_path):
    """The PNG path draws the same figure as the SVG above with another backend (once is enough:
    about 0.4 s a drawing): two roofs (fp8 over bf16) on two GPUs, each op drawn."""
    result, _ = analyze_pair(*CASES[CASE_IDS.index("tp2-fp8")])
    out = tmp_path / "roofline.png"
    plot.save(charts.roofline(result, show_ops=True), str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_roofline_ar_decode_step_by_hand():
    """LLaDA-8B AR decode at batch 1 reads every weight once per token: AI ~ 1 FLOP/byte, so its
    point sits at ~ 3.35 TFLOP/s on the H100's roof (3.35 TB/s x 1 FLOP/B)."""
    result, ar = analyze_pair(LLADA, dict(scheme="block", block=32, gpus="h100"))
    line = lines_by_gid(plot.figure(charts.roofline(result)))["ar-step:h100-sxm"]
    x, y = line.get_xydata()[0]
    assert 0.9 < x < 1.1
    assert y == pytest.approx(3.35e12 * x)


def test_roofline_marker_area_follows_time_share():
    result, ar = analyze_pair(LLADA, dict(scheme="block", block=32, gen=256, steps=64, gpus="h100"))
    chart = charts.roofline(result)
    r = result["results"][0]
    sizes = {s.gid.split(":")[1]: s.size for s in chart.panels[0].series if s.gid and s.gid.startswith("pass:")}
    shares = {p["name"]: p["count"] * p["time_s"] / r["time_s"] for p in r["passes"]}
    assert sum(shares.values()) == pytest.approx(1.0)  # the families make up the whole generation
    assert (sizes["step"] > sizes["prefill"]) == (shares["step"] > shares["prefill"])
    for name, share in shares.items():
        assert sizes[name] == pytest.approx(5 + 13 * share ** 0.5)


def test_roofline_black_and_white_markers_and_title():
    result, ar = analyze_pair(LLADA, dict(scheme="block", block=32, gpus="h100,b200,mi300x"))
    chart = charts.roofline(result, show_ops=True)
    legend = [s for s in chart.panels[0].series if s.label]
    point_markers = [s.marker for s in legend if s.marker]
    assert len(point_markers) == len(set(point_markers)) >= 4  # prefill, step, AR step, ops
    roof_styles = [s.linestyle for s in legend if s.gid.startswith("roof:")]
    assert len(roof_styles) == len(set(roof_styles)) == 3  # roofs differ without colour too
    assert "block" in chart.title and "b 32" in chart.title and LLADA in chart.title
    # three GPUs: each one's ridges and knee in its legend entry, not beside the marks (they would crowd)
    assert [s.label.rpartition("; ")[2] for s in legend if s.gid.startswith("roof:")] == \
        [f"knee b={knee_cell(result, i)}" for i in range(3)]
    assert not any("ridge" in n.text or "knee" in n.text for n in chart.panels[0].notes)


def test_roofline_seven_gpus_fp8_roofs_differ_and_carry_the_knee():
    result, ar = analyze_pair(LLADA, dict(precision="fp8", gpus=None, scheme="dual-cache", block=32))
    assert len(result["results"]) == 7
    chart = charts.roofline(result)
    roofs = [s for s in chart.panels[0].series if s.gid.startswith("roof:")]
    assert len({str(s.linestyle) for s in roofs}) == 7
    for i, (s, r) in enumerate(zip(roofs, result["results"])):
        assert s.label.startswith(f"{r['gpu']} roof (fp8): ") and s.label.endswith(f"; knee b={knee_cell(result, i)}")
    bf16 = [s for s in chart.panels[0].series if s.gid.startswith("roof-bf16:")]
    assert len(bf16) == 7 and all(s.width < roofs[0].width for s in bf16)
    assert not any("knee" in n.text for n in chart.panels[0].notes)  # in the legend, not colliding at ridges
    text = termplot.render(chart, width=100)
    assert all(f"knee b={knee_cell(result, i)}" in text for i in range(len(result["results"])))


def svg_point(svg_text: str, gid: str) -> tuple[float, float]:
    root = ET.fromstring(svg_text)
    group = root.find(f".//svg:g[@id='{gid}']", SVG_NS)
    use = group.find(".//svg:use", SVG_NS)
    return float(use.get("x")), float(use.get("y"))


def expected_svg_point(fig, gid: str) -> tuple[float, float]:
    """Where matplotlib's own transform puts a data point of a figure laid out for its SVG, in SVG
    user units (1/72 inch, y down)."""
    line = lines_by_gid(fig)[gid]
    px, py = line.axes.transData.transform(line.get_xydata()[0])
    scale = 72.0 / fig.dpi
    return px * scale, fig.bbox.height * scale - py * scale


def test_svg_and_html_points_sit_at_the_data():
    result, ar = analyze_pair(LLADA, dict(scheme="dual-cache", block=32, gpus="h100"))
    chart = charts.roofline(result)
    fig = plot.figure(chart)  # plot.svg(chart) draws this same figure; kept to read its axes below
    svg = plot.svg(chart, fig)  # and lays it out as for the SVG (one drawing for both)
    want = expected_svg_point(fig, "pass:step:h100-sxm")
    assert svg_point(svg, "pass:step:h100-sxm") == pytest.approx(want, abs=0.01)
    page = analyze_page(result, [chart])
    inline = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    assert svg_point(inline, "pass:step:h100-sxm") == pytest.approx(want, abs=0.01)
    # and that position is the intensity on a log axis: invert the axis mapping by hand
    ax = fig.axes[0]
    (x0, x1), bbox = ax.get_xlim(), ax.get_window_extent()
    scale = 72.0 / fig.dpi
    sx, _ = svg_point(inline, "pass:step:h100-sxm")
    frac = (sx / scale - bbox.x0) / bbox.width
    ai = 10 ** (math.log10(x0) + frac * (math.log10(x1) - math.log10(x0)))
    step = next(p for p in result["results"][0]["passes"] if p["name"] == "step")
    assert ai == pytest.approx(step["arithmetic_intensity"], rel=1e-3)


def sweep_rows(**kw):
    return api.sweep_rows(api.sweep(LLADA, **kw))


def test_sweep_defaults_tokens_per_s_against_block_per_scheme_per_gpu():
    rows = sweep_rows(gpus="h100,b200", blocks=[1, 8, 32], schemes=list(SCHEMES))
    assert charts.sweep_axes(rows) == ("block", "tokens_per_s", "scheme", "gpu")
    chart = charts.sweep(rows, LLADA)
    assert [p.title for p in chart.panels] == ["gpu = H100 SXM", "gpu = B200"]
    panel = chart.panels[0]
    assert panel.xlog  # 1..32 spans more than LOG_SPAN
    lines = lines_by_gid(plot.figure(chart))
    for scheme in ("prefix-cache", "dual-cache", "block"):
        want = sorted((r["block"], r["tokens_per_s"]) for r in rows if r["scheme"] == scheme and r["gpu"] == "H100 SXM")
        got = lines[f"line:H100 SXM:{scheme}"].get_xydata()
        assert [pt[0] for pt in got] == [w[0] for w in want]
        assert [pt[1] for pt in got] == pytest.approx([w[1] for w in want], rel=1e-12)
    # AR ignores the block: a flat line at its one value, across the panel
    ar = [r for r in rows if r["scheme"] == "ar" and r["gpu"] == "B200"]
    assert len(ar) == 1
    flat = lines["line:B200:ar:flat"].get_xydata()
    assert [pt[1] for pt in flat] == [ar[0]["tokens_per_s"]] * 2 and [pt[0] for pt in flat] == [1.0, 32.0]
    markers = [s.marker for s in panel.series if s.label and not s.gid.endswith(":flat")]
    assert len(markers) == len(set(markers))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sweep_chart_renders_for_each_scheme(scheme, tmp_path):
    rows = sweep_rows(gpus="h100", schemes=[scheme], batches=[1, 4, 16], blocks=[32], gens=[256])
    chart = charts.sweep(rows, LLADA, y="time_s")
    (line,) = chart.panels[0].series
    assert line.x == [1.0, 4.0, 16.0]
    assert line.y == [r["time_s"] for r in sorted(rows, key=lambda r: r["batch"])]
    plot.save(chart, str(tmp_path / "s.svg"))
    assert "<svg" in (tmp_path / "s.svg").read_text()
    assert "latency (s)" in termplot.render(chart, width=90)


def test_sweep_chart_moe_and_tp():
    rows = api.sweep_rows(api.sweep(MOE, gpus="h100,b200", tps=[1, 2, 4], schemes=["block"]))
    chart = charts.sweep(rows, MOE, y="tokens_per_s_per_gpu")
    assert charts.sweep_axes(rows, y="tokens_per_s_per_gpu")[0] == "tp"
    assert charts.sweep_axes(rows)[2:] == ("gpu", None)  # one line per GPU in one panel
    line = lines_by_gid(plot.figure(chart))["line:B200"]
    b200 = sorted((r for r in rows if r["gpu"] == "B200"), key=lambda r: r["tp"])
    assert line.get_xdata().tolist() == [r["tp"] for r in b200]
    assert line.get_ydata().tolist() == [r["tokens_per_s_per_gpu"] for r in b200]
    termplot.render(chart)


def test_sweep_axis_options_are_checked():
    rows = sweep_rows(gpus="h100", blocks=[8, 32])
    with pytest.raises(UsageError, match="--x: 'foo' is not a knob"):
        charts.sweep(rows, LLADA, x="foo")
    with pytest.raises(UsageError, match="--y: 'verdict' is not a numeric column"):
        charts.sweep(rows, LLADA, y="verdict")
    with pytest.raises(UsageError, match="different knobs"):
        charts.sweep(rows, LLADA, x="block", color="block")
    with pytest.raises(UsageError, match="no configuration"):
        charts.sweep([], LLADA)
    # a categorical x: one tick per GPU
    chart = charts.sweep(sweep_rows(gpus="h100,b200,mi300x", schemes=["block"], blocks=[32]), LLADA, x="gpu")
    assert [t for _, t in chart.panels[0].xticks] == ["H100 SXM", "B200", "MI300X"]
    plot.figure(chart)


def test_roofline_knee_label_is_the_tables():
    """Issue 21: LLaDA-8B dual-cache on an H100 has a knee beyond its 128 generated tokens: the
    table says 'all', and so must the chart (it said 'b=367'). mdm has no block to grow: the
    table says '-' and the chart no knee."""
    result, _ = analyze_pair(LLADA, dict(gpus="h100", scheme="dual-cache", block=32))
    r = result["results"][0]
    assert r["knee"]["block"] >= result["workload"]["gen"] and knee_cell(result) == "all"
    chart = charts.roofline(result)
    assert any(s.label.startswith("H100 SXM roof (bf16): ") and s.label.endswith("; knee b=all")
               for s in chart.panels[0].series)
    assert "H100 SXM: peak ridge 295, knee b=all" in {n.text for n in chart.panels[0].notes}
    assert f"b={r['knee']['block']}" not in termplot.render(chart, width=100)
    result, _ = analyze_pair(LLADA, dict(gpus="h100"))
    assert result["workload"]["scheme"] == "mdm" and knee_cell(result) == "-"
    chart = charts.roofline(result)
    roof = next(s for s in chart.panels[0].series if s.gid == "roof:h100-sxm")
    assert roof.label == "H100 SXM roof (bf16): ridge 172 achievable, 295 peak"  # no knee after it
    assert "H100 SXM: peak ridge 295" in {n.text for n in chart.panels[0].notes}
    assert not any("knee" in n.text for n in chart.panels[0].notes)


def test_roofline_needs_no_database(monkeypatch):
    """The chart reads the peaks, the bandwidth and the AR point from the result: with the
    hardware database out of reach it draws the same points."""
    result, _ = analyze_pair(LLADA, dict(scheme="block", block=32, gpus="h100,b200"))
    want = {s.gid: (s.x, s.y) for s in charts.roofline(result).panels[0].series}

    def no_database(*a, **k):
        raise AssertionError("a chart read the hardware database")

    monkeypatch.setattr(HardwareDB, "load", no_database)
    assert {s.gid: (s.x, s.y) for s in charts.roofline(result).panels[0].series} == want


def test_titles_show_only_the_knobs_the_scheme_reads():
    """mdm ignores the block: no 'b 32' in its chart title; block diffusion reads it."""
    mdm, _ = analyze_pair(LLADA, dict(scheme="mdm", block=32, gpus="h100"))
    assert " b 32" not in charts.roofline(mdm).title and "S " in charts.roofline(mdm).title
    block, _ = analyze_pair(LLADA, dict(scheme="block", block=32, gpus="h100"))
    assert "b 32" in charts.roofline(block).title
    ar, _ = analyze_pair(LLADA, dict(scheme="ar", gpus="h100"))
    assert " S " not in charts.roofline(ar).title and " b " not in charts.roofline(ar).title
    assert not any(s.gid.startswith("ar-step:") for s in charts.roofline(ar).panels[0].series)  # AR is its own


def test_sweep_title_states_the_fixed_knobs_and_the_panels_share_one_y_scale():
    """Issue 21: the sweep chart's title named neither the scheme nor the lengths or steps, and
    each GPU panel had a y scale of its own without saying so."""
    one = charts.sweep(sweep_rows(gpus="h100,b200", schemes=["dual-cache"], blocks=[8, 32], gens=[256], steps=[64]),
                       LLADA)
    assert len(one.panels) == 1 and "dual-cache" in one.title and "Lg 256" in one.title and "S 64" in one.title
    rows = sweep_rows(gpus="h100,b200,l4", schemes=["dual-cache", "prefix-cache"], blocks=[8, 32], gens=[256],
                      steps=[64], prompts=[512])
    chart = charts.sweep(rows, LLADA)
    assert len(chart.panels) == 3 and "cache" not in chart.title  # the scheme varies: it is the lines' label
    for part in ("Lp 512", "Lg 256", "S 64", "B 1", "bf16", "the same y scale in every panel"):
        assert part in chart.title, (part, chart.title)
    fig = plot.figure(chart)
    limits = {tuple(ax.get_ylim()) for ax in fig.axes if ax.get_visible()}
    assert len(limits) == 1, limits
    ys = [r["tokens_per_s"] for r in rows]
    (lo, hi), = limits
    assert lo <= min(ys) and max(ys) <= hi
    text = termplot.render(chart, width=90)
    ticks = [[ln.split("|")[0].strip() for ln in block.splitlines() if "|" in ln]
             for block in text.split("\ngpu = ")[1:]]
    assert len(ticks) == 3 and ticks[0] == ticks[1] == ticks[2]


# plan rows as `plan --format json` lists deployments (the keys the chart reads)
PLAN = [dict(zip(("model", "gpu", "replicas", "tp", "precision", "decoding", "usd_per_mtok", "p95_latency_s", "pareto",
                  "is_ar_baseline"), row)) for row in [
    ("org/A", "H100 SXM", 1, 1, "bf16", "block/32/2", 2.0, 1.5, True, False),
    ("org/A", "B200", 2, 1, "fp8", "block/32/2", 1.2, 4.0, True, False),
    ("org/B", "H200 SXM", 1, 2, "bf16", "ar", 3.5, 0.6, True, False),
    ("org/B", "MI300X", 1, 1, "fp8", "ar", 2.5, 5.0, False, False),
    ("org/A", "L4", 8, 1, "bf16", "block/32/2", 40.0, 90.0, False, False),
    ("org/A", "H100 SXM", 3, 1, "bf16", "ar", 6.0, 9.0, False, True),
]]


def test_plan_front_labels_each_point_by_model_gpu_tp_and_decoding(tmp_path):
    """Issue 29: a two-model plan drew every candidate as a gray circle and labelled the front
    with the GPU alone. Each model and decoding is a series of its own (named in the legend), the
    front's points are labelled with model, GPU, replicas × TP, precision and decoding, and every
    point carries that label on hover in the SVG."""
    chart = charts.plan_front(PLAN)
    fig = plot.figure(chart)
    lines = lines_by_gid(fig)
    assert lines["plan:candidates:1"].get_xydata().tolist() == [[1.5, 2.0], [4.0, 1.2], [90.0, 40.0]]
    assert lines["plan:candidates:2"].get_xydata().tolist() == [[0.6, 3.5], [5.0, 2.5]]
    assert [s.label for s in chart.panels[0].series] == ["A block/32/2", "B ar", "Pareto front", "AR baseline"]
    assert lines["plan:pareto"].get_xydata().tolist() == [[0.6, 3.5], [1.5, 2.0], [4.0, 1.2]]  # by latency
    assert lines["plan:ar-baseline"].get_xydata().tolist() == [[9.0, 6.0]]
    assert [n.text for n in chart.panels[0].notes] == [
        "B H200 SXM 1×TP2 bf16 ar", "A H100 SXM 1×TP1 bf16 block/32/2", "A B200 2×TP1 fp8 block/32/2",
        "AR A H100 SXM 3×TP1 bf16 ar"]
    panel = chart.panels[0]
    assert panel.xlog and panel.ylog  # 0.6..90 s and $1.2..40 span decades
    assert lines["plan:candidates:1"].get_markerfacecolor() == "none"  # hollow: differs without colour
    markers = [s.marker for s in panel.series]
    assert len(markers) == len(set(markers))
    svg = plot.svg(chart, fig)
    titles = re.findall(r'<g id="plan:candidates:2">.*?</g>\s*</g>', svg, re.S)[0]
    assert re.findall(r"<title>(.*?)</title>", titles) == ["B H200 SXM 1×TP2 bf16 ar: $3.5 per Mtok, p95 0.6 s",
                                                          "B MI300X 1×TP1 fp8 ar: $2.5 per Mtok, p95 5 s"]
    assert labels_apart(fig)
    assert "Pareto front" in termplot.render(chart)
    with pytest.raises(UsageError, match="lack"):
        charts.plan_front([dict(gpu="x")])


def labels_apart(fig) -> bool:
    """No two text labels of a drawn figure overlap, and each lies inside its axes (boxes from the
    Agg renderer's own layout of the text, not from the code that placed them)."""
    import matplotlib.text
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        boxes = [(a.get_text(), matplotlib.text.Text.get_window_extent(a, renderer)) for a in ax.texts]
        for i, (text, box) in enumerate(boxes):
            assert frame.x0 - 0.5 <= box.x0 and box.x1 <= frame.x1 + 0.5, f"{text!r} leaves the axes"
            assert frame.y0 - 0.5 <= box.y0 and box.y1 <= frame.y1 + 0.5, f"{text!r} leaves the axes"
            for other, obox in boxes[:i]:
                assert not box.overlaps(obox), f"{text!r} covers {other!r}"
    return True


def test_roofline_labels_do_not_collide():
    """Issue 29: analyze's roofline with three GPUs and --ops printed the knee labels and the op
    cluster's label on top of each other. In the picture and in the terminal's text, every label
    is whole and clear of the others."""
    result, _ = analyze_pair(LLADA, dict(gpus="h100,b200,mi300x"))
    chart = charts.roofline(result, show_ops=True)
    assert labels_apart(plot.figure(chart))
    text = termplot.render(chart, width=100)
    assert all(n.text in text for n in chart.panels[0].notes)


def test_roofline_marks_the_achievable_and_the_peak_ridge_apart():
    """Issue 29: the chart bent the roof at the peak ridge (989.5 / 3.35 = 295 FLOP/B on an H100)
    while the table's ridge column shows the achievable one (172 for this workload): both are
    drawn, apart, at their own intensities, and labelled with the numbers the table and
    `dlmcost gpus` print."""
    result, _ = analyze_pair(LLADA, dict(gpus="h100"))
    r = result["results"][0]
    peak = 989.5e12 / 3.35e12  # the H100 SXM file's bf16 TFLOP/s over its TB/s
    table_ridge = analyze_rows(result)[0][5]
    assert table_ridge == "172" and round(peak) == 295
    chart = charts.roofline(result)
    lines = lines_by_gid(plot.figure(chart))
    (x, y), = lines["ridge-peak:h100-sxm"].get_xydata().tolist()
    assert x == pytest.approx(peak) and y == pytest.approx(989.5e12)
    xs = [pt[0] for pt in lines["ridge-achievable:h100-sxm"].get_xydata()]
    assert xs == pytest.approx([r["achievable_ridge_flops_per_byte"]] * 2) and abs(xs[0] - peak) > 100
    notes = {n.text for n in chart.panels[0].notes}
    # (mdm, the model's scheme, has no block to grow: no knee beside the peak ridge)
    assert {"H100 SXM: achievable ridge 172", "H100 SXM: peak ridge 295"} <= notes
    roof = next(s for s in chart.panels[0].series if s.gid == "roof:h100-sxm")
    assert "ridge 172 achievable, 295 peak" in roof.label


def test_terminal_chart_places_markers_on_the_grid():
    """A point at the panel's extremes lands in the first and last columns; text is printable."""
    panel = charts.Panel("x", "y", [charts.Series([1.0, 100.0], [1.0, 100.0], label="pts", marker="s")], xlog=True, ylog=True)
    lines = termplot.render_panel(panel, width=60, height=10)
    grid = [ln.split("|", 1)[1] for ln in lines if "|" in ln]
    assert grid[-1].lstrip().startswith("#") or grid[-2].lstrip().startswith("#")
    assert any(row.rstrip().endswith("#") for row in grid[:2])
    assert all(c.isprintable() for ln in lines for c in ln)


def shown_tick_labels(axis, minor: bool = False) -> list[str]:
    """The non-empty tick labels inside the axis's view, after a layout pass."""
    lo, hi = sorted(axis.get_view_interval())
    ticks = axis.get_minor_ticks() if minor else axis.get_major_ticks()
    return [t.label1.get_text() for t in ticks if t.label1.get_text() and lo <= t.get_loc() <= hi]


def test_log_axes_are_labelled_as_the_tables_write_numbers():
    """1T, 10T, 1P and 1, 10, 100 (SI prefixes, as in the tables), never 10^12 in mathtext."""
    result, _ = analyze_pair(LLADA, dict(scheme="block", block=32, gpus="h100,b200"))
    fig = plot.figure(charts.roofline(result))
    fig.draw_without_rendering()
    ax = fig.axes[0]
    ys, xs = shown_tick_labels(ax.yaxis), shown_tick_labels(ax.xaxis)
    assert {"1T", "10T", "100T", "1P"} <= set(ys) and set(ys) <= {"100G", "1T", "10T", "100T", "1P", "10P"}
    assert {"1", "10", "100"} <= set(xs)
    every = [t.get_text() for a in (ax.xaxis, ax.yaxis) for t in a.get_ticklabels(minor=False) + a.get_ticklabels(minor=True)]
    assert not any("$" in t or "^" in t for t in every)
    assert shown_tick_labels(ax.yaxis, minor=True) == []  # more than a decade: decades only


@pytest.mark.parametrize(("lo", "hi", "minor"), [
    (150, 900, ["200", "500"]),  # under a decade: 2 and 5 x 10^n, which do not crowd
    (150, 400, ["200", "300", "400"]),  # under a factor of 3: every tick between decades
])
def test_a_log_axis_narrower_than_a_decade_labels_the_ticks_between(lo, hi, minor):
    chart = charts.Chart("sweep", "narrow", [charts.Panel("x", "y", [charts.Series([1, 2], [lo, hi], marker="o")],
                                                           ylog=True)])
    fig = plot.figure(chart)
    fig.draw_without_rendering()
    axis = fig.axes[0].yaxis
    assert shown_tick_labels(axis) == [] and shown_tick_labels(axis, minor=True) == minor
