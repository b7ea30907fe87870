"""The sglang stack's first-token delay (front_end.first_token_us_per_layer) still fits the three
one-request runs it was fitted on, under the model as it now stands: the delay that minimises the
squared log error of the mean TTFT, found here by brute force over the model's TTFTs without any
delay, lies within 3% of the stack's number. A change to the cost model that moves those runs'
first tokens further fails here, asking for a refit (the page's measured means are typed below)."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest

from dlmcost.inputs.stacks import load_stack
from dlmcost.inputs.yaml_loader import load_yaml

pytestmark = pytest.mark.usefixtures("bundled_offline")

ROOT = Path(__file__).resolve().parents[1]
# the SGLang cookbook's DeepSeek-R1-0528 page on 8x B200: mean TTFT (ms) at one request in flight
MEASURED_MS = {"sgcr-dsr1-fp8-b200tp8-sglang-1k1k-c1": 153.00, "sgcr-dsr1-fp8-b200tp8-sglang-1k8k-c1": 125.76,
               "sgcr-dsr1-fp8-b200tp8-sglang-8k1k-c1": 165.91}
LAYERS = 61  # DeepSeek-V3's decoder layers


def _without_delay_ms(run, tmp_path, monkeypatch) -> dict[str, float]:
    stack = tmp_path / "sglang-no-delay.yaml"
    stack.write_text("extends: sglang\nname: sglang-no-delay\nfront_end:\n  first_token_us_per_layer: 0\n")
    points = {p["id"]: p for p in load_yaml((ROOT / "validation" / "serving.yaml").read_text())["points"]}
    monkeypatch.chdir(ROOT)  # the commands' @files
    out = {}
    for pid in MEASURED_MS:
        argv = shlex.split(" ".join(points[pid]["command"].split()))
        assert argv[:2] == ["dlmcost", "serve"] and "--stack" in argv
        argv[argv.index("--stack") + 1] = str(stack)
        rc, text, err = run(*argv[1:], "-f", "json")
        assert rc == 0, err
        (deployment,) = json.loads(text)["deployments"]
        out[pid] = deployment["points"][0]["ttfb_s"]["mean"] * 1000
    return out


def test_the_fitted_delay_still_fits_its_runs(run, tmp_path, monkeypatch):
    bare = _without_delay_ms(run, tmp_path, monkeypatch)
    assert all(bare[pid] < MEASURED_MS[pid] for pid in MEASURED_MS)  # each lacks a delay, none overshoots

    def loss(delay_ms: float) -> float:
        return sum((math.log(MEASURED_MS[p]) - math.log(bare[p] + delay_ms)) ** 2 for p in MEASURED_MS)

    best_ms = min((k / 100 for k in range(0, 20001)), key=loss)  # 0 to 200 ms by 0.01 ms
    fitted_us = load_stack("sglang").front_end.first_token_us_per_layer
    assert best_ms * 1000 / LAYERS == pytest.approx(fitted_us, rel=0.03)
