"""Fit the tokens per forward that published serving points leave unstated.

    python scripts/fit_serving_tpf.py            # print each fitted value and its point's ratio
    python scripts/fit_serving_tpf.py --write    # also write them into validation/serving.yaml

A point of validation/serving.yaml whose `fitted` note starts with "METRIC sets --tpf X" (METRIC a
throughput of scripts/validation.py's METRICS) sets the `--tpf` of its command: the value at which
its predicted METRIC equals the measured one, found by bisection between one token per forward (a
threshold sampler commits at least one) and the block (one step per block). Where the file's value
already predicts the measurement within 1% it is kept. With `--write` the value goes into the
point's command and note and into the command of every point that `leans_on` it; the point is then
in-sample, the others out of sample (docs/validation.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlmcost.inputs.yaml_loader import load_yaml  # noqa: E402 - refuses a repeated key

SERVING = ROOT / "validation" / "serving.yaml"
NOTE = re.compile(r"^(\w+) sets --tpf ([0-9.]+)")
TPF = re.compile(r"--tpf\s+([0-9.]+)(?=\s|$)")
KEEP = 0.01  # a value already within 1% of the measurement is kept


def _validation_script():
    spec = importlib.util.spec_from_file_location("validation_script", ROOT / "scripts" / "validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_tpf(command: str, value: float) -> str:
    return TPF.sub(f"--tpf {value:.6g}", command)


def block(command: str) -> int:
    """The block a `dlmcost serve` command decodes in: the most tokens one forward can commit."""
    from dlmcost.cli.entry import main

    out = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*shlex.split(command)[1:], "-f", "json"]) == 0, command
    return json.loads(out.getvalue())["deployments"][0]["deployment"]["block"]


def bisect(f, bounds: tuple[float, float], steps: int = 30) -> float:
    """The value in `bounds` where f (monotonic, rising) crosses 1, in log steps; an end if it does not."""
    lo, hi = (math.log(b) for b in bounds)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if f(math.exp(mid)) > 1.0:
            hi = mid
        else:
            lo = mid
    return math.exp((lo + hi) / 2)


def solve(points: list[dict]) -> dict[str, tuple[float, float, bool]]:
    """Fitting point id -> (tokens per forward, predicted / measured at it, whether the file's is kept)."""
    validation = _validation_script()
    out = {}
    for p in points:
        m = NOTE.match(p.get("fitted") or "")
        if not m:
            continue
        metric = m.group(1)
        assert validation.METRICS[metric][2], f"{p['id']}: {metric} is not a throughput"
        measured = float(p["measured"][metric])
        command = " ".join(p["command"].split())

        def ratio(tpf: float) -> float:
            with contextlib.redirect_stderr(io.StringIO()):
                return validation.METRICS[metric][1](validation.serve_json(with_tpf(command, tpf))) / measured

        now = float(TPF.search(command).group(1))
        if abs(ratio(now) - 1) <= KEEP:
            out[p["id"]] = (now, ratio(now), True)
            continue
        # to two decimals, on whichever side predicts closer (the predicted steps per block are whole,
        # so the throughput jumps where the bisection ends)
        crossing = bisect(ratio, (1.0, float(block(command))))
        value = min((math.floor(crossing * 100) / 100, math.ceil(crossing * 100) / 100),
                    key=lambda v: abs(math.log(ratio(v))))
        out[p["id"]] = (value, ratio(value), False)
    return out


def write(text: str, points: list[dict], fitted: dict[str, tuple[float, float, bool]]) -> str:
    """validation/serving.yaml's text with each fitted value in its note and in the commands that use it."""
    blocks = re.split(r"(?m)^(?=  - id: )", text)
    for i, chunk in enumerate(blocks):
        m = re.match(r"  - id: (\S+)", chunk)
        if not m:
            continue
        point = next(q for q in points if q["id"] == m.group(1))
        for fid, (value, _, _) in fitted.items():
            if point["id"] == fid:
                chunk = re.sub(r'(fitted: "\w+ sets --tpf )[0-9.]+', rf"\g<1>{value:g}", chunk)
            if point["id"] == fid or f"serving:{fid}" in point.get("leans_on", []):
                chunk = TPF.sub(f"--tpf {value:g}", chunk)
        blocks[i] = chunk
    return "".join(blocks)


def main(argv: list[str]) -> int:
    text = SERVING.read_text(encoding="utf-8")
    points = load_yaml(text)["points"]
    fitted = solve(points)
    for pid, (value, r, kept) in fitted.items():
        print(f"{pid}: --tpf {value:g}{' (kept)' if kept else ''}, predicted / measured {r:.3f}")
    if "--write" in argv:
        SERVING.write_text(write(text, points, fitted), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
