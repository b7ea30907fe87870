"""Rendering for the stack commands (calibrate, measure): tables of measured vs predicted time."""

from __future__ import annotations

from .output import Output
from .formats import to_csv, to_json, to_markdown
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


def render_calibration(result: dict, written: str, fmt: str, out: Output) -> None:
    rows = calibration_rows(result)
    if fmt == "json":
        doc = dict(stack=result["data"]["name"], written=written, fitted=result["values"],
                   rms_log_error=result["rms_log_error"],
                   points=[dict(id=b["id"], gpu=b["gpu"], measured_ms=b["measured_ms"], before_ms=b["predicted_ms"],
                                before_error=b["error"], after_ms=a["predicted_ms"], after_error=a["error"])
                           for b, a in zip(result["before"], result["after"])])
        out.write(to_json(doc) + "\n")
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


def _kinds(result: dict) -> str:
    """Which layers were built: 'layers: 1 of 16 built (full, head_dim 128, ...)' per kind."""
    return "layers: " + "; ".join(f"{k['built']} of {k['count']} built ({k['kind']})" for k in result["layer_kinds"])


def render_measure(result: dict, fmt: str, out: Output) -> None:
    headers = MEASURE_HEADERS
    rows = [[f["name"], f"{f['q']:g}", f"{f['c']:g}", "causal" if f["causal"] else "bidirectional", f"{f['count']:g}", f"{f['measured_ms']:.4g}",
             f"{f['predicted_ms']:.4g}", f"{f['predicted_ms'] / f['measured_ms']:.3g}"] for f in result["families"]]
    if fmt == "json":
        out.write(to_json(result) + "\n")
    elif fmt == "csv":
        out.write(to_csv([dict(zip((h.replace("\n", " ") for h in headers), r)) for r in rows]))
    elif fmt == "markdown":
        out.write(to_markdown(headers, rows))
    else:
        print_fitted(out, table_columns(headers, MEASURE_PRIORITY), rows,
                     caption=f"median of up to {result['repeats']} timed runs after {result['warmup']} warm-up; "
                             f"{_kinds(result)}; predicted = the stack's time for the same pass",
                     title=f"{result['model']} on {result['device']} ({result['backend']} backend), "
                           f"stack '{result['stack']}'")
