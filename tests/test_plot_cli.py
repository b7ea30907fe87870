"""`--plot`, `dlmcost plot ...`, `--format html` from the command line, the missing-extra path,
and that the base `analyze` imports no plotting code."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

from dlmcost.errors import install_hint

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forkrun  # noqa: E402

LLADA = "GSAI-ML/LLaDA-8B-Instruct"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    monkeypatch.delenv("DLMCOST_HARDWARE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def cli(run):
    return run  # conftest's: the CLI in-process


def test_base_analyze_imports_no_plotting_code():
    code = ("import sys; from dlmcost.cli import main; rc = main(['analyze', '--gpu', 'h100', '--format', 'json']); "
            "print([m for m in sys.modules if m.split('.')[0] == 'matplotlib' or m in "
            "('dlmcost.render.charts', 'dlmcost.render.plot', 'dlmcost.render.termplot')], file=sys.stderr)")
    # forked from an interpreter that has run just `import dlmcost.__main__, dlmcost.cli` (tests/forkrun.py): what
    # this script imports first in a fresh one
    rc, _, stderr = forkrun.run({"probe": forkrun.script(code)}, dict(os.environ), limit_s=120)["probe"]
    assert rc == 0, stderr
    assert stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("args", [["analyze", "--gpu", "h100", "--plot", "{tmp}/r.png"],
                                  ["sweep", "--gpu", "h100", "--block", "8,32", "--plot", "{tmp}/s.svg"],
                                  ["analyze", "--gpu", "h100", "--format", "html"]])
def test_without_the_extra_one_line_and_exit_9(args, tmp_path, cli, monkeypatch):
    """matplotlib hidden (a sys.modules entry None makes `import matplotlib...` fail, whether or
    not an earlier test imported it): one line, exit 9, nothing on stdout, no file written."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, out, err = cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert rc == 9
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    # the plot extra's own requirement (pyproject.toml's), which pip installs wherever dlmcost runs, and
    # the extra by name from a checkout; never 'dlmcost[plot]': the package index's dlmcost is another project
    plot_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["plot"]
    assert plot_extra == ["matplotlib>=3.7"]
    assert "pip install 'matplotlib>=3.7' (or, from a dlmcost checkout, pip install '.[plot]')" in err
    assert "dlmcost[" not in err
    assert list(tmp_path.iterdir()) == []


FAKE_MATPLOTLIBS = {"runtime-error": ("matplotlib", "RuntimeError('Could not parse matplotlibrc\\n line 3')"),
                    "figure-value-error": ("matplotlib.figure", "ValueError('\\x1b[2Jbad backend')")}
FAILING_RUNS = {"plot": ["--plot", "{tmp}/r.png"], "html": ["--format", "html"]}


@pytest.fixture(scope="module")
def failing_matplotlib_runs(tmp_path_factory):
    """For each fake matplotlib (first on PYTHONPATH, so one interpreter per fake, started with it),
    both runs forked from that interpreter (tests/forkrun.py), each with an out folder of its own:
    {(fake, run): ([exit code, stdout, stderr] or None, out folder)}."""
    results = {}
    for fake_id, (module, error) in FAKE_MATPLOTLIBS.items():
        tmp = tmp_path_factory.mktemp(fake_id)
        fake = tmp / "fake" / "matplotlib"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text(f"raise {error}\n" if module == "matplotlib" else "")
        (fake / "figure.py").write_text(f"raise {error}\n")
        out_dirs = {run_id: tmp / f"out-{run_id}" for run_id in FAILING_RUNS}
        for out_dir in out_dirs.values():
            out_dir.mkdir()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), *sys.path]), "HF_HUB_OFFLINE": "1"}
        done = forkrun.run({run_id: forkrun.case(["analyze", "--gpu", "h100",
                                                  *(a.replace("{tmp}", str(out_dirs[run_id])) for a in args)])
                            for run_id, args in FAILING_RUNS.items()}, env, limit_s=60)
        results |= {(fake_id, run_id): (done[run_id], out_dirs[run_id]) for run_id in FAILING_RUNS}
    return results


@pytest.mark.parametrize("fake_id", FAKE_MATPLOTLIBS)
@pytest.mark.parametrize("run_id", FAILING_RUNS)
def test_a_matplotlib_that_fails_to_load_is_the_extra_exit_9(failing_matplotlib_runs, run_id, fake_id):
    """A fake matplotlib first on PYTHONPATH whose import raises something other than ImportError:
    the plot extra's one line and exit 9 with the reason, not an internal error; nothing written."""
    error = FAKE_MATPLOTLIBS[fake_id][1]
    result, out_dir = failing_matplotlib_runs[fake_id, run_id]
    assert result is not None, "still running after 60 s"
    code, stdout, stderr = result
    assert code == 9, stderr
    assert stdout == "" and list(out_dir.iterdir()) == []
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert "failed to load" in stderr and error.split("(")[0] in stderr, stderr
    assert "\x1b" not in stderr and "internal error" not in stderr


def test_terminal_plot_needs_no_extra(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, out, err = cli("analyze", "--gpu", "h100", "--plot", "-")
    assert rc == 0, err
    assert "attainable FLOP/s" in out


def test_analyze_plot_png_and_svg(cli, tmp_path):
    rc, out, err = cli("analyze", "--gpu", "h100,b200", "--scheme", "block", "--block", "32", "--ops",
                       "--plot", tmp_path / "r.png")
    assert rc == 0, err
    assert "H100 SXM" in out  # the table still prints
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    rc, _, err = cli("analyze", "--gpu", "h100", "--plot", tmp_path / "r.svg", "--format", "json")
    assert rc == 0, err
    assert "<svg" in (tmp_path / "r.svg").read_text()


def test_terminal_roofline_and_plot_command(cli):
    rc, out, err = cli("analyze", "--gpu", "h100", "--scheme", "dual-cache", "--plot", "-")
    assert rc == 0, err
    assert "attainable FLOP/s (log)" in out and "H100 SXM: peak ridge 295, knee b=" in out
    assert "\x1b" not in out
    rc2, out2, _ = cli("plot", "roofline", "--gpu", "h100", "--scheme", "dual-cache")
    assert rc2 == 0 and out2 == out
    rc, out, err = cli("plot", "sweep", "--gpu", "h100", "--block", "1,8,32", "--y", "time_s")
    assert rc == 0, err
    assert "latency (s)" in out and "block length b" in out


def test_sweep_plot_file_and_axis_options(cli, tmp_path):
    rc, _, err = cli("sweep", "--gpu", "h100,b200", "--block", "1,8,32", "--batch", "1,4",
                     "--plot", tmp_path / "s.png", "--x", "batch", "--color", "block", "--facet", "gpu")
    assert rc == 0, err
    assert (tmp_path / "s.png").stat().st_size > 10_000


@pytest.mark.parametrize(("args", "message"), [
    (["sweep", "--x", "block"], "add --plot FILE or --format html"),
    (["sweep", "--plot", "-", "--x", "nope"], "--x: 'nope' is not a knob"),
    (["sweep", "--plot", "-", "--y", "gpu"], "--y: 'gpu' is not a numeric column"),
    (["analyze", "--plot", "r.pdf"], "must end in .png or .svg"),
    (["analyze", "--plot", ""], "--plot needs a file name"),
    (["analyze", "--plot", "/no/such/dir/r.png"], "does not exist"),
    (["analyze", "--plot", "-", "--format", "json"], "--plot - draws on stdout"),
    (["gpus", "--format", "html"], "unknown format 'html'"),
    (["models", "--format", "html"], "unknown format 'html'"),
])
def test_bad_plot_options_one_line_exit_2(cli, args, message):
    rc, out, err = cli(*args)
    assert rc == 2
    assert err.count("\n") == 1 and message in err, err


def test_html_pages_are_self_contained(cli):
    for args in (["analyze", "--gpu", "h100,b200", "--ops", "--tp", "2"],
                 ["sweep", "--gpu", "h100,b200", "--block", "1,8,32"]):
        rc, out, err = cli(*args, "--format", "html")
        assert rc == 0, err
        assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
        assert out.count("<svg") == 1 and "<table" in out
        # nothing fetched: no scripts from elsewhere (one inline: the table sort), links, external images,
        # fonts or URLs other than XML namespaces
        assert out.count("<script") == 1 and "<script>" in out
        assert not re.search(r"<script[^>]*src|<link|<img|@import|url\((?!#)|@font-face|fetch\(|XMLHttpRequest", out)
        urls = set(re.findall(r"https?://[^\"' )]+", out))
        assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    rc, out, _ = cli("analyze", "--gpu", "h100", "--format", "json")
    assert json.loads(out)["results"][0]["gpu"] == "H100 SXM"  # json unaffected


def test_every_extra_hint_names_what_pyproject_lists():
    """The hints install the extras' own packages (what `pip install '.[EXTRA]'` would), read from
    the installed metadata, with the table of errors.EXTRAS as the fallback agreeing."""
    from dlmcost.errors import EXTRAS

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, requirement in EXTRAS.items():
        assert extras[extra] == [requirement]
        assert install_hint(extra) == f"pip install '{requirement}' (or, from a dlmcost checkout, pip install '.[{extra}]')"
