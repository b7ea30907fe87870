"""Suite-wide settings.

BLAS: one thread per process. The suite runs one pytest worker per core plus the subprocesses some
tests start; OpenBLAS's default of a thread per core then has its threads spin-waiting for each
other on tiny matrices (tests/test_measure.py took 16 s of CPU instead of 3). Set before numpy is
imported (here, before any test module); inherited by the subprocesses; a value the caller set
wins.

Hypothesis: one profile for every property test (tests/test_properties.py). Deterministic and
modest by default, so the suite meets its time budget (issue 7: the whole suite in 40 s on two
cores); DLMCOST_FUZZ_SCALE=10 runs ten times as many random examples, not derandomized.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

FUZZ_SCALE = float(os.environ.get("DLMCOST_FUZZ_SCALE", "1"))
EXAMPLES = 25  # per property at scale 1; each example of the CLI properties is a full command

settings.register_profile(
    "dlmcost",
    max_examples=max(1, int(EXAMPLES * FUZZ_SCALE)),
    deadline=None,
    derandomize=FUZZ_SCALE == 1,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("dlmcost")


@pytest.fixture
def bundled_offline(monkeypatch):
    """The bundled hardware files and no Hub: what the serve and plan modules' numbers are
    computed against (`pytestmark = pytest.mark.usefixtures("bundled_offline")`)."""
    monkeypatch.delenv("DLMCOST_HARDWARE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _no_terminal_size_from_the_caller(monkeypatch):
    """Tables follow $COLUMNS: a test that needs a width sets it. Without this, output depended on
    the caller's environment (pytest-xdist workers, for one, run with COLUMNS=80 LINES=24)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


# The longest tests (a fresh venv, subprocesses, Chromium, the docs, the example plan), started
# first: pytest-xdist hands out tests in collection order, and a long test collected late can
# keep one core busy while the other sits idle at the end of the run (the 40 s budget on two
# cores); started first, the short ones fill in around them.
# Order only; a name that no longer matches is simply not moved. None of these uses a module-scoped
# fixture: moved out of its module, such a test would build the fixture a second time
# (test_hub_hostile's `results` is why its long first test is not here), unless every test that
# uses it moves, together (test_html_browser's pages and their one Chromium).
LONG_FIRST = (
    "tests/test_scripting.py::test_ci_recipe_installs_dlmcost_in_a_fresh_venv_and_gates",
    "tests/test_plan.py::test_example_scenario_runs",
    "tests/test_docs.py::test_generated_docs_are_current",
    "tests/test_hub.py::test_cache_reuse_offline_and_when_the_hub_fails",
    "tests/test_measure.py::test_the_lm_head_sampler_and_every_layer_run_inside_the_timed_region",
    # every test that imports torch, beside the one above: pytest-xdist's first chunk of tests goes to
    # one worker, so torch (about 1.5 s to import) is imported by one worker, not by both
    "tests/test_measure.py::test_moe_and_hybrid_models_run",
    "tests/test_measure.py::test_torch_backend_agrees_with_numpy",
    "tests/test_html_browser.py::test_report_page_in_chromium",
    "tests/test_plot_docs.py::test_docs_images_regenerate_from_the_documented_commands",
    "tests/test_charts.py::test_svg_and_html_points_sit_at_the_data",
    "tests/test_scripting.py::test_streamed_csv_memory_does_not_grow_with_the_grid",
    "tests/test_scripting.py::test_output_formats_do_not_import_rich",
    "tests/test_scripting.py::test_a_4000_row_sweep_table_is_drawn_whole",
)


def pytest_configure(config):
    """Compile the package's bytecode once, before any worker starts. Where PYTHONDONTWRITEBYTECODE
    is set (CI's environment sets it) no interpreter writes it, so each of the suite's hundreds of
    `python -m dlmcost` processes, and each worker, compiled every module it imported from source
    (about 0.1 s of CPU each time); the compiled files are read whatever the variable says."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller has done it
        return
    import compileall
    from pathlib import Path

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "dlmcost"), quiet=1)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        base = item.nodeid.split("[", 1)[0]
        return LONG_FIRST.index(base) if base in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)  # stable: everything else keeps its order


@pytest.fixture(scope="session")
def once_per_run(tmp_path_factory, worker_id):
    """`once_per_run(name, compute)`: compute's value, read from a pickle another pytest worker of
    the run wrote (beside their temporary folders) when there is one, so that a costly fixture of a
    module whose tests land on both workers is not computed twice. A worker never waits on
    another: while one is computing it (holding the lock), the other computes it too."""
    import os
    import pickle

    from filelock import FileLock, Timeout

    def get(name: str, compute):
        if worker_id == "master":  # no xdist: nothing to share
            return compute()
        path = tmp_path_factory.getbasetemp().parent / f"once-{name}.pickle"
        try:
            with FileLock(f"{path}.lock", timeout=0):
                if path.is_file():
                    return pickle.loads(path.read_bytes())
                value = compute()
                partial = path.with_suffix(f".{os.getpid()}")
                partial.write_bytes(pickle.dumps(value))
                partial.replace(path)  # whole or absent: a reader never sees half of it
                return value
        except Timeout:
            return compute()

    return get


@pytest.fixture
def run(capsys):
    """The CLI in-process: `run(*args)` -> (exit code, stdout, stderr), each argument as a string."""
    from dlmcost.cli import main

    def call(*args):
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    return call


@pytest.fixture
def sglang_amd_band_above_one(monkeypatch):
    """The published bands with sglang's band on AMD parts lying wholly above 1 (every measurement
    it rests on slower than predicted: low 1.2, high 2.0; first token 1.3 to 2.4), as the shipped
    bands once were: the case the optimistic-band warning and --conservative's AMD tests take. The
    band the commands read (error_bands' published bands) and the one the test reads (returned) are
    the same."""
    import copy

    from dlmcost.inputs import error_bands

    bands = copy.deepcopy(error_bands._bands())
    amd = bands["sglang"]["vendors"]["amd"]
    amd.update(low=1.2, median=1.5, high=2.0)
    amd["first_token"] = dict(amd["first_token"], low=1.3, median=1.8, high=2.4)
    monkeypatch.setattr(error_bands, "_bands", lambda: bands)
    return amd
