"""Rendering for the stack commands (calibrate, measure): tables of measured vs predicted time."""

from __future__ import annotations

from .cells import plural, safe
from .evidence import against_published
from .output import Output
from .formats import to_csv, to_markdown, typed_json
from .tables import print_fitted, table_columns

POINT_HEADERS = ["point", "GPU", "measured\nms/fwd", "before\nms/fwd", "before\nerror", "after\nms/fwd", "after\nerror"]
POINT_PRIORITY = [0, 1, 0, 2, 2, 0, 0]  # a narrow terminal keeps the measurement and the fitted prediction
MEASURE_HEADERS = ["pass family", "q", "c", "mask", "count", "measured\nms", "predicted\nms", "ratio\npred/meas"]
MEASURE_PRIORITY = [0, 1, 1, 2, 2, 0, 0, 0]


def _err(r: dict) -> str:
    return f"{r['error']:.2f}x"


def calibration_rows(result: dict) -> list[list[str]]:
    return [[b["id"], b["gpu"], f"{b['measured_ms']:.4g}", f"{b['predicted_ms']:.4g}", _err(b),
             f"{a['predicted_ms']:.4g}", _err(a)] for b, a in zip(result["before"], result["after"])]


def calibration_record(result: dict, written: str) -> dict:
    """The fit as `--format json` prints it."""
    return dict(stack=result["data"]["name"], written=written, fitted=result["values"],
                rms_log_error=result["rms_log_error"],
                points=[dict(id=b["id"], gpu=b["gpu"], measured_ms=b["measured_ms"], before_ms=b["predicted_ms"],
                             before_error=b["error"], after_ms=a["predicted_ms"], after_error=a["error"],
                             held_out_ratio=r)
                        for b, a, r in zip(result["before"], result["after"], result["held_out_ratios"])],
                held_out=result["held_out"])


def held_out_line(result: dict) -> str:
    """'error band of the written stack: 0.92–1.09× over 22 measurements, held out: ...; sglang's
    published band 0.88–1.61×: narrower by 3.57×' (what serve and plan take for the stack)."""
    h = result["held_out"]
    if h is None:
        return "error band of the written stack: none (too few held-out measurements and no published band)"
    return (f"error band of the written stack: {h['low']:.2f}–{h['high']:.2f}× over "
            f"{plural(h['ratios'], 'measurement')}, {safe(h['basis'])}{against_published(h)} (serve and plan draw "
            f"its ranges from it)")


def render_calibration(result: dict, written: str, fmt: str, out: Output) -> None:
    rows = calibration_rows(result)
    if fmt == "json":
        out.write(typed_json("calibrate", calibration_record(result, written)))
        return
    if fmt == "csv":
        out.write(to_csv([dict(zip((h.replace("\n", " ") for h in POINT_HEADERS), r)) for r in rows]))
        return
    if fmt == "markdown":
        out.write(to_markdown(POINT_HEADERS, rows))
        return
    fitted = ", ".join(f"{k}={v:.4g}" for k, v in result["values"].items())
    print_fitted(out, table_columns(POINT_HEADERS, POINT_PRIORITY, left=2), rows,
                 caption=f"fitted: {fitted} (host/fixed in us; gemm = multiplier on the GEMM curve); "
                         f"RMS log error {result['rms_log_error']:.3f}; error = max(pred/meas, meas/pred)",
                 title=f"calibrated stack '{result['data']['name']}' written to {written}")
    out.line(held_out_line(result))


def _kinds(result: dict) -> str:
    """Which layers were built: 'layers: 1 of 16 built (full, head_dim 128, ...)' per kind."""
    return "layers: " + "; ".join(f"{k['built']} of {k['count']} built ({k['kind']})" for k in result["layer_kinds"])


def _measure_rows(result: dict) -> list[list[str]]:
    return [[f["name"], f"{f['q']:g}", f"{f['c']:g}", "causal" if f["causal"] else "bidirectional", f"{f['count']:g}",
             f"{f['measured_ms']:.4g}", f"{f['predicted_ms']:.4g}", f"{f['predicted_ms'] / f['measured_ms']:.3g}"]
            for f in result["families"]]


def render_measure(result: dict, fmt: str, out: Output) -> None:
    """One batch's measurement as a table or Markdown, printed as soon as it is taken (json and
    csv print every batch at once: `render_measurements`)."""
    rows = _measure_rows(result)
    if fmt == "markdown":
        out.write(to_markdown(MEASURE_HEADERS, rows))
    else:
        print_fitted(out, table_columns(MEASURE_HEADERS, MEASURE_PRIORITY), rows,
                     caption=f"median of up to {result['repeats']} timed runs after {result['warmup']} warm-up; "
                             f"{_kinds(result)}; predicted = the stack's time for the same pass",
                     title=f"{result['model']} on {result['device']} ({result['backend']} backend), "
                           f"stack '{result['stack']}'")


def render_measurements(results: list[dict], fmt: str, out: Output, calibrated: dict | None = None,
                        written: str | None = None) -> None:
    """Every batch's measurement as one document: json, an object with the `measurements` (one per
    batch) and the fit to them (`calibrated`, with --profile-out, else null); csv, one table of
    every batch's pass families with a `batch` column, then the fit's table after a blank line."""
    if fmt == "json":
        out.write(typed_json("measure", dict(measurements=results, calibrated=calibration_record(calibrated, written)
                                             if calibrated is not None else None)))
        return
    headers = ["batch"] + [h.replace("\n", " ") for h in MEASURE_HEADERS]
    out.write(to_csv([dict(zip(headers, [str(r["workload"].get("batch", 1)), *row]))
                      for r in results for row in _measure_rows(r)]))
    if calibrated is not None:
        out.write("\n")
        render_calibration(calibrated, written, "csv", out)
