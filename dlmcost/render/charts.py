"""What the pictures show, as plain data: rooflines, sweep charts and plan fronts.

Every chart is built from the dictionaries that `api.analyze`, `api.sweep` + `api.sweep_rows`
and `plan` return, the same content as `--format json`; nothing here calls the cost engine or
reads a database: a roofline's peaks, bandwidth and AR decode point are in the analyze result
(`peak_flops`, `attention_peak_flops`, `bandwidth_bytes_per_s`, `ar_step_arithmetic_intensity`).
The attainable FLOP/s at an arithmetic intensity is the roofline formula, `attainable_flops`. The drawing
backends (`plot.py`: matplotlib files and inline SVG; `termplot.py`: the terminal) only render
a `Chart`, so every backend shows the same points.

Importing this module imports no plotting library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import UsageError
from .cells import num
from .labels import knee_label, uses

# Markers distinct in black and white (matplotlib codes; termplot maps them to characters).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h")
# A plan's deployments, one marker per model and decoding: none of the front's square or the AR star.
CANDIDATE_MARKERS = tuple(m for m in MARKERS if m not in ("s", "*"))
# Line styles for GPU roofs, so that up to seven roofs differ without colour (matplotlib dash
# patterns: (offset, (on, off, ...)) in line widths).
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (8, 2, 1, 2)))
BF16_ROOF_STYLE = (0, (1, 2))  # thin and finely dotted, under the precision's own roofs
# More GPUs than this: their ridges and knees are in the legend only (beside the marks, the labels
# of several GPUs crowd the few points where their roofs bend).
RIDGE_NOTES_UP_TO = 1
GRAY = -1  # palette index drawn in gray
LOG_SPAN = 20.0  # an axis whose positive values span at least this ratio is drawn log-scaled


@dataclass
class Series:
    """A line (linestyle set) or a set of markers (linestyle None) in one panel."""

    x: list[float]
    y: list[float]
    label: str | None = None  # legend text; None: no legend entry
    color: int = 0  # palette index, GRAY for gray
    marker: str | None = None
    linestyle: str | tuple | None = None
    width: float = 1.4  # line width in points
    size: float = 6.0  # marker size in points
    filled: bool = True
    gid: str | None = None  # id of the element in SVG output (tests read points back by it)
    tips: list[str] | None = None  # one text per point, shown on hover in SVG and HTML (needs a gid)


@dataclass
class Note:
    x: float
    y: float
    text: str
    below: bool = False  # text under the point (a roof's flat part) instead of above it


@dataclass
class Panel:
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    title: str = ""
    xlog: bool = False
    ylog: bool = False
    xticks: list[tuple[float, str]] | None = None  # categorical or few numeric values


@dataclass
class Chart:
    kind: str  # roofline | sweep | plan
    title: str
    panels: list[Panel]
    shared_y: bool = False  # every panel on one y scale (the sweep's GPU panels compare by eye)
    per_row: int | None = None  # panels side by side at most (None: the drawing's default)


def attainable_flops(intensity: float, peak_flops: float, bandwidth_bytes_per_s: float) -> float:
    """The roofline: min(peak, AI * bandwidth). Below the ridge (peak / bandwidth) memory limits
    the rate, above it the tensor cores do (Williams, Waterman & Patterson, CACM 2009)."""
    return min(peak_flops, intensity * bandwidth_bytes_per_s)


def _log_scaled(values) -> bool:
    pos = [v for v in values if v is not None and v > 0]
    return len(pos) > 1 and max(pos) / min(pos) >= LOG_SPAN


# --- roofline --------------------------------------------------------------------------------------



def workload_title(model_id: str, w: dict) -> str:
    """The chart's title: the model, the scheme, and only the knobs the scheme reads."""
    parts = [model_id, w["scheme"], f"Lp {w['prompt']}", f"Lg {w['gen']}"]
    parts += [f"S {w['steps']:g}"] if uses(w, "steps") else []
    parts += [f"b {w['block']}"] if uses(w, "block") else []
    parts += [f"B {w['batch']}" + (" (CFG ×2)" if w.get("cfg") else ""), w["precision"]]
    if w.get("tp", 1) > 1 or w.get("ep", 1) > 1:
        parts.append(f"tp {w['tp']} ep {w['ep']}, per GPU")
    return " · ".join(parts)


def _share(p: dict, r: dict) -> float:
    """A pass family's share of the generation's time (its count × time of one pass)."""
    return p["count"] * p["time_s"] / r["time_s"]


def _op_notes(ops: list[dict], roof) -> list[Note]:
    """One label per cluster of ops within 25% of each other's intensity (they would overlap)."""
    notes: list[Note] = []
    for o in sorted(ops, key=lambda o: o["arithmetic_intensity"]):
        x = o["arithmetic_intensity"]
        if notes and x <= notes[-1].x * 1.25:
            notes[-1].text += f", {o['name']}"
        else:
            notes.append(Note(x, roof(x), o["name"]))
    return notes


def roofline(result: dict, show_ops: bool = False) -> Chart:
    """Log-log roofline of one analyze result: each GPU's roof at the workload's compute
    precision (bf16 dotted beneath when attention's peak differs), every pass family on its roof
    with a marker whose area is its share of the time, the AR decode step (the result's AR
    baseline; not for AR itself), with `show_ops` each op over the generation, and each GPU's two
    ridges apart: the peak ridge where its roof bends (peak / bandwidth, a tick) and the achievable
    ridge the table shows (a dotted vertical line: where the achievable compute and memory times
    meet), both in the roof's legend entry with the knee block as the table shows it, and labelled
    beside the marks for up to RIDGE_NOTES_UP_TO GPUs. Everything drawn is in `result` (the AR
    point is its `ar_step_arithmetic_intensity`)."""
    w = result["workload"]
    compute = w["compute_precision"]
    runs = [r for r in result["results"] if r.get("supported")]
    if not runs:
        raise UsageError("nothing to plot: no selected GPU supports this workload")
    families = list(dict.fromkeys(p["name"] for r in runs for p in r["passes"]))
    marker_of = {name: MARKERS[i % len(MARKERS)] for i, name in enumerate(families)}
    ar_marker = "*"
    ar_point = bool(w["knobs"])  # AR has no knob: it is its own baseline
    panel = Panel(xlabel="arithmetic intensity (FLOP/byte)", ylabel="attainable FLOP/s", xlog=True, ylog=True)
    xs = []
    for r in runs:
        xs += [p["arithmetic_intensity"] for p in r["passes"]]
        if ar_point:
            xs.append(r["ar_step_arithmetic_intensity"])
        if show_ops:
            xs += [o["arithmetic_intensity"] for o in r["ops"] if o["arithmetic_intensity"] > 0]
        xs += [r["peak_flops"] / r["bandwidth_bytes_per_s"], r["attention_peak_flops"] / r["bandwidth_bytes_per_s"],
               r["achievable_ridge_flops_per_byte"]]
    lo, hi = min(x for x in xs if x > 0) / 4, max(xs) * 12  # room right of the ridges for their labels
    floor = min(attainable_flops(lo, r["peak_flops"], r["bandwidth_bytes_per_s"]) for r in runs)

    for gi, r in enumerate(runs):
        bw, peak, apeak = r["bandwidth_bytes_per_s"], r["peak_flops"], r["attention_peak_flops"]

        def roof(x: float, peak=peak, bw=bw) -> float:
            return attainable_flops(x, peak, bw)

        ridge, achievable = peak / bw, r["achievable_ridge_flops_per_byte"]
        # the knee as the table says it, where the scheme has a block to grow (mdm, AR: none)
        knee_text = f"knee b={knee_label(r['knee']['block'], w)}" if uses(w, "block") else None
        ridges = f"ridge {num(achievable)} achievable, {num(ridge)} peak"
        panel.series.append(Series([lo, ridge, hi], [roof(lo), roof(ridge), roof(hi)],
                                   label=f"{r['gpu']} roof ({compute}): {ridges}" + (f"; {knee_text}" if knee_text else ""),
                                   color=gi,
                                   linestyle=LINESTYLES[gi % len(LINESTYLES)], gid=f"roof:{r['gpu_key']}"))
        panel.series.append(Series([ridge], [peak], label="peak ridge (peak / bandwidth)" if gi == 0 else None,
                                   color=gi, marker="|", size=12, gid=f"ridge-peak:{r['gpu_key']}"))
        panel.series.append(Series([achievable, achievable], [floor, roof(achievable)],
                                   label="achievable ridge (the table's)" if gi == 0 else None, color=gi,
                                   linestyle=":", width=1.0, gid=f"ridge-achievable:{r['gpu_key']}"))
        if apeak != peak:
            panel.series.append(Series([lo, apeak / bw, hi], [attainable_flops(x, apeak, bw) for x in (lo, apeak / bw, hi)],
                                       label="bf16 roofs (attention)" if gi == 0 else None, color=gi,
                                       linestyle=BF16_ROOF_STYLE, width=0.8, gid=f"roof-bf16:{r['gpu_key']}"))
        if len(runs) <= RIDGE_NOTES_UP_TO:
            panel.notes.append(Note(ridge, peak, f"{r['gpu']}: peak ridge {num(ridge)}"
                                    + (f", {knee_text}" if knee_text else ""), below=True))
            panel.notes.append(Note(achievable, roof(achievable), f"{r['gpu']}: achievable ridge {num(achievable)}"))
        for p in r["passes"]:
            x = p["arithmetic_intensity"]
            share = _share(p, r)
            panel.series.append(Series(
                [x], [roof(x)], label=f"{p['name']} pass" if gi == 0 else None, color=gi,
                marker=marker_of[p["name"]], size=5 + 13 * math.sqrt(share),
                gid=f"pass:{p['name']}:{r['gpu_key']}"))
        if ar_point:
            x = r["ar_step_arithmetic_intensity"]
            panel.series.append(Series([x], [roof(x)], label="AR decode step" if gi == 0 else None, color=gi,
                                       marker=ar_marker, size=12, filled=False, gid=f"ar-step:{r['gpu_key']}"))
        if show_ops:
            ops = [o for o in r["ops"] if o["arithmetic_intensity"] > 0]  # collectives move bytes only
            panel.series.append(Series([o["arithmetic_intensity"] for o in ops],
                                       [roof(o["arithmetic_intensity"]) for o in ops],
                                       label="op (whole generation)" if gi == 0 else None, color=gi, marker="x",
                                       size=5, gid=f"ops:{r['gpu_key']}"))
            if gi == 0:
                panel.notes += _op_notes(ops, roof)
    return Chart("roofline", workload_title(result["model"]["id"], w), [panel])


# --- sweep -----------------------------------------------------------------------------------------

KNOBS = ("gpu", "scheme", "prompt", "gen", "steps", "block", "batch", "tp", "ep", "precision")
# The knob --x defaults to: the first of these the sweep varies.
X_PREFERENCE = ("block", "batch", "gen", "prompt", "steps", "tp", "ep", "precision", "scheme", "gpu")
COLOR_PREFERENCE = ("scheme", "precision", "gpu", "batch", "block", "gen", "prompt", "steps", "tp", "ep")
AXIS_LABELS = dict(tokens_per_s="tokens/s", tokens_per_s_per_gpu="tokens/s per GPU", time_s="latency (s)",
                   speedup_vs_ar="speed-up vs AR (AR latency / latency)", time_ratio_to_ar="latency / AR latency",
                   arithmetic_intensity="arithmetic intensity (FLOP/byte)",
                   block="block length b", batch="batch B", gen="generated tokens Lg", prompt="prompt tokens Lp",
                   steps="steps S", memory_total_bytes="memory (bytes)", nfe="forward passes (NFE)")


def sweep_metrics(rows: list[dict]) -> list[str]:
    """Columns --y can plot: the numeric ones that are not knobs."""
    return [k for k, v in rows[0].items()
            if k not in KNOBS and isinstance(v, (int, float)) and not isinstance(v, bool)] if rows else []


def _varying(rows: list[dict], key: str) -> bool:
    return len({r[key] for r in rows if r[key] is not None}) > 1


def sweep_axes(rows: list[dict], x: str | None = None, y: str | None = None, color: str | None = None,
               facet: str | None = None) -> tuple[str, str, str | None, str | None]:
    """Checked --x/--y/--color/--facet with defaults: x the first knob the sweep varies (block
    before batch...), y tokens/s, color the scheme, one panel per GPU."""
    if not rows:
        raise UsageError("nothing to plot: the sweep evaluated no configuration")
    for name, value in (("x", x), ("color", color), ("facet", facet)):
        if value is not None and value not in KNOBS:
            raise UsageError(f"--{name}: '{value}' is not a knob; choose from: {', '.join(KNOBS)}")
    metrics = sweep_metrics(rows)
    if y is not None and y not in metrics:
        raise UsageError(f"--y: '{y}' is not a numeric column; choose from: {', '.join(metrics)}")
    varying = [k for k in KNOBS if _varying(rows, k)]
    x = x or next((k for k in X_PREFERENCE if k in varying), "gpu")
    color = color or next((k for k in COLOR_PREFERENCE if k in varying and k != x), None)
    facet = facet or ("gpu" if "gpu" in varying and "gpu" not in (x, color) else None)
    if len({x, color, facet} - {None}) < len([k for k in (x, color, facet) if k]):
        raise UsageError("--x, --color and --facet must name different knobs")
    return x, y or "tokens_per_s", color, facet


def _label_value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def sweep(rows: list[dict], model_id: str, x: str | None = None, y: str | None = None,
          color: str | None = None, facet: str | None = None) -> Chart:
    """One panel per facet value, one line per color value (and per value of any other knob the
    sweep varies); a row that does not depend on x (AR or MDM against the block) is a dashed
    horizontal line across the panel."""
    x, y, color, facet = sweep_axes(rows, x, y, color, facet)
    others = [k for k in KNOBS if _varying(rows, k) and k not in (x, color, facet)]
    group_keys = ([color] if color else []) + others
    categorical = any(isinstance(r[x], str) for r in rows)
    cats = list(dict.fromkeys(r[x] for r in rows if r[x] is not None)) if categorical else []
    pos = {c: float(i) for i, c in enumerate(cats)}

    def xval(v):
        return pos[v] if categorical else float(v)

    xs_all = [xval(r[x]) for r in rows if r[x] is not None]
    ylog = _log_scaled([r[y] for r in rows])  # one y scale for every panel: they compare by eye
    facets = list(dict.fromkeys(r[facet] for r in rows)) if facet else [None]
    lines = list(dict.fromkeys(tuple(r[k] for k in group_keys) for r in rows))
    panels = []
    for fv in facets:
        sub = [r for r in rows if facet is None or r[facet] == fv]
        xticks = None
        if categorical:
            xticks = [(pos[c], str(c)) for c in cats]
        elif len(set(xs_all)) <= 12:
            xticks = [(v, f"{v:g}") for v in sorted(set(xs_all))]
        panel = Panel(xlabel=AXIS_LABELS.get(x, x), ylabel=AXIS_LABELS.get(y, y),
                      title=f"{facet} = {_label_value(fv)}" if facet else "",
                      xlog=not categorical and _log_scaled(xs_all), ylog=ylog, xticks=xticks)
        span = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
        for li, key in enumerate(lines):
            pts = [r for r in sub if tuple(r[k] for k in group_keys) == key and r[y] is not None]
            if not pts:
                continue
            label = ", ".join(str(v) if k in ("scheme", "gpu") else f"{k}={_label_value(v)}"
                              for k, v in zip(group_keys, key)) or y
            gid = f"line:{_label_value(fv)}:{label}" if facet else f"line:{label}"
            flat = [r for r in pts if r[x] is None]
            pts = sorted((r for r in pts if r[x] is not None), key=lambda r: xval(r[x]))
            if pts:
                panel.series.append(Series([xval(r[x]) for r in pts], [float(r[y]) for r in pts], label=label,
                                           color=li, marker=MARKERS[li % len(MARKERS)], linestyle="-", gid=gid))
            for r in flat:
                panel.series.append(Series(list(span), [float(r[y])] * 2, label=f"{label} (any {x})", color=li,
                                           marker=MARKERS[li % len(MARKERS)], linestyle="--", gid=gid + ":flat"))
        panels.append(panel)
    title = " · ".join([model_id, f"{AXIS_LABELS.get(y, y)} against {AXIS_LABELS.get(x, x)}",
                        *fixed_knobs(rows, {x, color, facet, *others})])
    if len(panels) > 1:
        title += " · the same y scale in every panel"
    return Chart("sweep", title, panels, shared_y=True)


# How a sweep chart's title names a knob that has one value in every row.
TITLE_KNOBS = dict(scheme="{}", prompt="Lp {}", gen="Lg {}", steps="S {}", block="b {}", batch="B {}", precision="{}",
                   tp="tp {}", ep="ep {}", gpu="{}")


def fixed_knobs(rows: list[dict], shown: set) -> list[str]:
    """The knobs with one value across the sweep, as the title states them (a knob no row's
    scheme reads, null in every row, is left out)."""
    out = []
    for knob, form in TITLE_KNOBS.items():
        values = {r[knob] for r in rows if r[knob] is not None}
        if knob not in shown and len(values) == 1 and not (knob in ("tp", "ep") and values == {1}):
            out.append(form.format(_label_value(values.pop())))
    return out


# --- plan front ------------------------------------------------------------------------------------

PLAN_KEYS = ("gpu", "usd_per_mtok", "p95_latency_s", "pareto", "is_ar_baseline")


def short_model(model_id: str) -> str:
    """A model id without its organisation ('LLaDA2.0-mini'), as the plan table's model column."""
    return str(model_id).rpartition("/")[2]


def deployment_label(r: dict, model: bool = True) -> str:
    """A deployment in a few words: model, GPU, replicas × TP, precision and decoding, whichever of
    them the row has ('LLaDA2.0-mini MI300X 2×TP1 fp8 block/32/1')."""
    size = f"{r['replicas']}×TP{r['tp']}" if "replicas" in r and "tp" in r else ""
    parts = [short_model(r["model"]) if model and r.get("model") else "", str(r["gpu"]), size,
             str(r.get("precision") or ""), str(r.get("decoding") or "")]
    return " ".join(p for p in parts if p)


def plan_front(rows: list[dict], title: str = "plan: cost against p95 latency") -> Chart:
    """$ per million tokens against p95 latency: every deployment (hollow markers, one colour and
    marker per model and decoding, named in the legend), the Pareto front (joined in latency order,
    each point labelled with its model, GPU, replicas × TP, precision and decoding) and the AR
    baseline (stars, labelled alike). Every point carries its full label as a hover text."""
    if not rows:
        raise UsageError("nothing to plot: the plan has no candidate")
    missing = [k for k in PLAN_KEYS if k not in rows[0]]
    if missing:
        raise UsageError(f"plan rows lack {', '.join(missing)}")
    several = len({r.get("model") for r in rows}) > 1
    xs = [r["p95_latency_s"] for r in rows]
    ys = [r["usd_per_mtok"] for r in rows]
    panel = Panel(xlabel="p95 latency (s)", ylabel="$ per million tokens", xlog=_log_scaled(xs), ylog=_log_scaled(ys))

    def tip(r: dict) -> str:
        return f"{deployment_label(r)}: ${r['usd_per_mtok']:.3g} per Mtok, p95 {r['p95_latency_s']:.3g} s"

    plan_rows = [r for r in rows if not r["is_ar_baseline"]]
    groups = list(dict.fromkeys((r.get("model"), r.get("decoding")) for r in plan_rows))
    for i, (model, decoding) in enumerate(groups):
        members = [r for r in plan_rows if (r.get("model"), r.get("decoding")) == (model, decoding)]
        name = " ".join(str(v) for v in ((short_model(model) if several and model else None), decoding) if v)
        panel.series.append(Series([r["p95_latency_s"] for r in members], [r["usd_per_mtok"] for r in members],
                                   label=name or "deployment", color=i if len(groups) > 1 else GRAY,
                                   marker=CANDIDATE_MARKERS[i % len(CANDIDATE_MARKERS)], filled=False, size=5,
                                   gid=f"plan:candidates:{i + 1}", tips=[tip(r) for r in members]))
    front = sorted((r for r in plan_rows if r["pareto"]), key=lambda r: r["p95_latency_s"])
    base = [r for r in rows if r["is_ar_baseline"]]
    if front:
        panel.series.append(Series([r["p95_latency_s"] for r in front], [r["usd_per_mtok"] for r in front],
                                   label="Pareto front", color=0, marker="s", linestyle="-", size=7, gid="plan:pareto",
                                   tips=[tip(r) for r in front]))
        panel.notes += [Note(r["p95_latency_s"], r["usd_per_mtok"], deployment_label(r, several)) for r in front]
    if base:
        panel.series.append(Series([r["p95_latency_s"] for r in base], [r["usd_per_mtok"] for r in base],
                                   label="AR baseline", color=1, marker="*", size=12, gid="plan:ar-baseline",
                                   tips=[tip(r) for r in base]))
        panel.notes += [Note(r["p95_latency_s"], r["usd_per_mtok"], "AR " + deployment_label(r, several)) for r in base]
    return Chart("plan", title, [panel])
