"""Issue 21: a progress bar on a terminal for work over about a second (large sweeps, calibrate,
measure; plan's search in test_plan.py). Through the Python API each kind of work calls a plain
`progress(done, total)` with done counts that only grow and end at the total; through the CLI
the bar shows on a terminal's stderr once a second has passed, says what it counts, and is
erased; on a pipe nothing is drawn and the bar's module is never even built."""

from __future__ import annotations

import io
import math
import time
import types
from pathlib import Path

import pytest
import yaml

from dlmcost import api
from dlmcost.analysis import limits
from dlmcost.calibration import calibrate as cal
from dlmcost.calibration import measure as ms
from dlmcost.render import progress as progress_module

ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = str(ROOT / "examples" / "measurements.yaml")
TINY = str(ROOT / "examples" / "tiny-dlm.yaml")
CPU = ["--hardware", str(ROOT / "examples" / "generic-cpu.yaml"), "--gpu", "generic-cpu"]
ERASE = "\x1b[2K"
# what measure times here is only counted: a model of a few MB (tests/test_measure.py's), not the
# 1B-parameter example, whose GEMMs took a second of CPU per run
MICRO = dict(schema="dlmcost.model/v1", id="test/micro", family="custom", n_layers=2, d_model=128, n_heads=4,
             n_kv_heads=2, head_dim=32, ffn_dim=256, gated_mlp=True, vocab_size=512, tie_embeddings=True)
MICRO_ARG = "<micro model file>"  # in CASES: replaced by the `micro` fixture's path
FEW_ARG = "<few measurements>"  # in CASES: the example's first four points (a bar, not a fit, is tested)


@pytest.fixture(scope="module")
def micro(tmp_path_factory) -> str:
    import yaml

    path = tmp_path_factory.mktemp("models") / "micro.yaml"
    path.write_text(yaml.safe_dump(MICRO))
    return str(path)


@pytest.fixture(scope="module")
def few(tmp_path_factory) -> str:
    """The example measurements' first four points of bundled models, as their own file: the fit and
    its four held-out refits show the bar as the whole file's would, in a fraction of the time."""
    points = [p for p in yaml.safe_load(Path(MEASUREMENTS).read_text())["points"] if not p["model"].endswith(".yaml")]
    path = tmp_path_factory.mktemp("measurements") / "few.yaml"
    path.write_text(yaml.safe_dump(dict(points=points[:4])))
    return str(path)


def placed(args: list[str], micro: str, few: str) -> list[str]:
    return [{MICRO_ARG: micro, FEW_ARG: few}.get(a, a) for a in args]


class Tty(io.StringIO):
    def isatty(self):
        return True


def calls_of(run) -> list[tuple[int, int]]:
    calls = []
    run(lambda done, total: calls.append((done, total)))
    return calls


def grows_to_its_total(calls: list[tuple[int, int]]) -> bool:
    dones = [d for d, _ in calls]
    totals = {t for _, t in calls}
    return (len(totals) == 1 and all(a <= b for a, b in zip(dones, dones[1:]))
            and calls[-1][0] == calls[-1][1] and all(0 <= d <= t for d, t in calls))


# --- the callable, through the Python API -----------------------------------------------------


def test_a_sweep_reports_the_configurations_evaluated_chunk_by_chunk(monkeypatch):
    monkeypatch.setattr(limits, "SWEEP_CHUNK", 7)
    kept = {}

    def run(progress):
        kept["rows"] = api.sweep(gpus="h100", schemes=["block"], blocks=[4, 8, 16, 32], batches=[1, 2, 4, 8, 16],
                                 gens=[128, 256], progress=progress).rows

    calls = calls_of(run)
    n = len(kept["rows"])  # 4 blocks x 5 batches x 2 lengths, none impossible: 40
    assert n == 40
    assert calls == [(min(7 * k, n), n) for k in range(1, math.ceil(n / 7) + 1)]  # 7, 14, ..., 35, 40
    assert grows_to_its_total(calls)


def test_calibrate_reports_its_fit_iterations_and_ends_at_the_total(tmp_path, few):
    """The fit's iterations, then MAX_ITER more for each held-out refit (one per fold: a point
    each up to ten, ten folds beyond)."""
    out = str(tmp_path / "fitted.yaml")
    calls = calls_of(lambda progress: api.calibrate_file(few, stack=None, fit="fixed,gemm", name=None,
                                                         only=None, hardware=None, out=out, progress=progress))
    total = cal.MAX_ITER * (1 + min(10, len(yaml.safe_load(Path(few).read_text())["points"])))
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert (cal.MAX_ITER, total) in calls  # the fit's end, before the refits
    assert grows_to_its_total(calls)
    assert len(calls) >= 3  # at least one iteration, and the end


def test_measure_reports_each_timing_over_every_batch(monkeypatch, micro):
    timed = []
    real = ms.time_pass
    monkeypatch.setattr(ms, "time_pass", lambda *a, **k: timed.append(1) or real(*a, **k))
    calls = calls_of(lambda progress: list(api.measure_batches(
        micro, "generic-cpu", dict(gen=32, prompt=16, block=8, tpf=2), [1, 2], stack=None, backend="numpy",
        device=None, warmup=0, repeats=1, layers=None, hardware=[CPU[1]], progress=progress)))
    # one call per part timed at a shape, counted by the timer itself: done = 1, 2, ..., all of them
    assert calls == [(k, len(timed)) for k in range(1, len(timed) + 1)]
    assert len(timed) >= 4  # two batches: the head and a layer kind at least, each


def test_what_data_pins_counts_every_fit_tried(monkeypatch, few):
    """measure --profile-out tries parameter sets in turn: one growing count over all of them."""
    points, base_dir = api.calibrate_file.__globals__["load_points"](few)
    from dlmcost.inputs.stacks import load_stack

    order = (("host", "fixed", "gemm", "attention", "elementwise"), ("fixed", "gemm"))  # the first is refused
    calls = calls_of(lambda progress: cal.calibrate_what_data_pins(points, base_dir, load_stack(None), "m",
                                                                   order=order, progress=progress))
    assert calls[-1] == (2 * cal.MAX_ITER, 2 * cal.MAX_ITER) and grows_to_its_total(calls)


# --- the bar, through the CLI -------------------------------------------------------------------


def slow_clock(monkeypatch, step_s: float = 0.4) -> None:
    """Progress's clock moves `step_s` each time it is read: from the third call on, past a second."""
    now = [0.0]

    def monotonic():
        now[0] += step_s
        return now[0]

    monkeypatch.setattr(progress_module, "time", types.SimpleNamespace(monotonic=monotonic,
                                                                       perf_counter=time.perf_counter))


def run_cli(monkeypatch, capsys, args, stderr) -> tuple[int, str, str]:
    from dlmcost.cli import main

    monkeypatch.setattr("sys.stderr", stderr)
    capsys.readouterr()
    code = main(args)
    return code, capsys.readouterr().out, stderr.getvalue()


SWEEP = ["sweep", "--gpu", "h100,b200", "--scheme", "block", "--block", "4,8,16,32", "--batch", "1,2,4,8,16", "--gen", "128,256"]
CASES = {
    "sweep": (SWEEP, "sweeping: configurations"),
    "sweep csv": (SWEEP + ["-f", "csv"], "sweeping: configurations"),
    "several models": (SWEEP + ["-m", "GSAI-ML/LLaDA-8B-Instruct,Dream-org/Dream-v0-Instruct-7B"],
                       "sweeping model 2/2: configurations"),
    "calibrate": (["calibrate", FEW_ARG, "-o", "fitted.yaml"], "calibrating: fit iterations"),
    "measure": (["measure", MICRO_ARG, *CPU, "--gen", "32", "--prompt", "16", "--block", "8", "--tpf", "2",
                 "--batch", "1,2", "--warmup", "0", "--repeats", "1"], "measuring: timings (head, layer kinds)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_bar_shows_on_a_terminal_after_a_second_and_is_erased(case, monkeypatch, capsys, tmp_path, micro, few):
    args, text = CASES[case]
    args = placed(args, micro, few)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(limits, "SWEEP_CHUNK", 16)  # many chunks: calls before and after the first second
    slow_clock(monkeypatch)
    code, out, err = run_cli(monkeypatch, capsys, args, Tty())
    assert code == 0, err
    assert text in err and ERASE in err
    assert err.rstrip("\r\n\x1b[1A").endswith(ERASE)  # nothing left on the screen after it
    assert text not in out  # the bar is on stderr only


@pytest.mark.parametrize("case", list(CASES))
def test_no_bar_on_a_pipe_and_no_bar_built(case, monkeypatch, capsys, tmp_path, micro, few):
    args, _ = CASES[case]
    args = placed(args, micro, few)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(limits, "SWEEP_CHUNK", 16)
    slow_clock(monkeypatch)

    def refused(*_a, **_k):
        raise AssertionError("a progress bar was built for a pipe")

    monkeypatch.setattr(progress_module.Progress, "__init__", refused)
    code, _, err = run_cli(monkeypatch, capsys, args, io.StringIO())
    assert code == 0 and err == ""


def test_no_bar_between_rows_streamed_to_the_same_terminal(monkeypatch, capsys):
    """csv to a terminal: the rows scroll by on stdout, so no bar is drawn over them."""
    monkeypatch.setattr(limits, "SWEEP_CHUNK", 16)
    slow_clock(monkeypatch)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    code, out, err = run_cli(monkeypatch, capsys, SWEEP + ["-f", "csv"], Tty())
    assert code == 0 and err == "" and out.count("\n") == 81  # the header and 2 GPUs x 40 rows


# --- a real run on a pseudo-terminal and on a pipe ------------------------------------------------

# measure with no cap on timed runs: each part is timed until its runs add up to ENOUGH_S (0.5 s),
# so the two timings of masked diffusion's one pass shape (the head, the one layer kind) take a
# second at least, on any machine, after the bar was set up: its second call is past the first second
LONG_MEASURE = ["measure", TINY, *CPU, "--scheme", "mdm", "--gen", "32", "--prompt", "16", "--tpf", "2",
                "--warmup", "0", "--repeats", "100000000"]


def test_a_real_run_shows_the_bar_on_a_terminal_and_nothing_on_a_pipe():
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ptyserver

    script = str(Path(sys.executable).parent / "dlmcost")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    code, out = ptyserver.run(script, LONG_MEASURE, cols=100, rows=40, env={**env, "TERM": "xterm-256color"})
    text = out.decode("utf-8", "replace")
    assert code == 0, text
    bar = text.index("measuring: timings (head, layer kinds)")
    assert ERASE in text[bar:] and text.index("pass family") > bar  # erased, then the table
    assert "2/2" in text[bar:text.index("pass family")]  # counted: both timings
    assert "0/2" not in text  # its first frame is the count it was called with
    piped = subprocess.run([script, *LONG_MEASURE], capture_output=True, text=True, timeout=120, env=env)
    assert piped.returncode == 0 and piped.stderr == "" and "pass family" in piped.stdout
