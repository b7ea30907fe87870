"""Issue 11: the installed `dlmcost` command in shell scripts, CI and 80-column terminals.
Where a real process is the point (pipes closed early, pseudo-terminals where width/colour
matter, the console script itself, a fresh venv, peak memory, what a fresh process imports) the
tests run the installed console script; the rest call `cli.main` in-process (`cli` fixture), which
is what the script runs, and fast."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dlmcost
from dlmcost import api
from dlmcost.analysis import requirements as gates, limits
from dlmcost.render.sweep import render_sweep
from dlmcost.errors import EXIT_REQUIREMENT, UsageError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forkrun  # noqa: E402
import ptyserver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DLMCOST = str(Path(sys.executable).parent / "dlmcost")
ESC = "\x1b"


def run(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    """The installed console script in a child process."""
    return subprocess.run([DLMCOST, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def cli(capsys, monkeypatch):
    """`cli.main` in-process with the same calling convention and result as `run`."""
    from dlmcost.cli import main

    def call(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as mp:
            for key, value in (env or {}).items():
                mp.setenv(key, value)
            if cwd is not None:
                mp.chdir(cwd)
            capsys.readouterr()
            code = main([str(a) for a in args])
            out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return call


def in_pty(args: list[str], cols: int = 80, rows: int = 40, env: dict | None = None) -> tuple[int, str]:
    """Run the console script in a pseudo-terminal of the given size; returns (exit code, everything
    written). A real process each time, forked from one that has imported dlmcost (tests/ptyserver.py)."""
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    e.update({"TERM": "xterm-256color", **(env or {})})
    code, out = ptyserver.run(DLMCOST, args, cols=cols, rows=rows, env=e)
    return code, out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_a_terminal_run_shows_stdout_and_stderr_in_the_order_written():
    """On a terminal Python line-buffers stdout (without -u or PYTHONUNBUFFERED): the table is on
    the screen before the failed requirement's lines on stderr, as in a real run (a pipe, block
    buffered, would show them first). The terminal server's children set their streams up so."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "PYTHONUNBUFFERED")}
    code, out = ptyserver.run(DLMCOST, ["analyze", "--gpu", "h100", "--require", "tokens_per_s > 1e12"], cols=100,
                              rows=40, env={**env, "TERM": "dumb"})
    lines = out.decode("utf-8", "replace").splitlines()
    assert code == EXIT_REQUIREMENT
    table = next(i for i, line in enumerate(lines) if line.startswith("H100 SXM"))
    error = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    assert table < error, lines


def visible(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# --- scripts and CI --------------------------------------------------------------------------


def piped_to(reader: list[str], args: list[str]) -> tuple[list, subprocess.CompletedProcess]:
    """`dlmcost args | reader`: dlmcost's stdout a pipe into the reader, dlmcost forked from
    tests/forkrun.py's server (a process of its own, its exit Python's own, no interpreter start).
    (dlmcost's [exit code, stdout, stderr], the reader's run)."""
    r, w = os.pipe()
    reader_proc = subprocess.Popen(reader, stdin=r, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(r)
    try:
        done = forkrun.run({"dlmcost": forkrun.case(args, stdout=w)}, dict(os.environ), limit_s=120)["dlmcost"]
    finally:
        os.close(w)
    out, err = reader_proc.communicate(timeout=120)
    assert done is not None, "still running after 120 s"
    return done, subprocess.CompletedProcess(reader, reader_proc.returncode, out, err)


@pytest.mark.parametrize("fmt", ["table", "csv", "jsonl", "json", "markdown"])
def test_pipe_closed_early_exits_0(fmt):
    """`dlmcost sweep ... | head -1`: the reader goes away after a line; exit 0 and nothing on stderr
    (both sides of the pipeline, as under `set -o pipefail`)."""
    (code, _, err), head = piped_to(["head", "-1"], ["sweep", "--gpu", "all", "--block", "4,8,16,32", "--batch",
                                                    "1,2,4", "-f", fmt])
    assert code == 0 and head.returncode == 0, err + head.stderr
    assert err + head.stderr == ""


def test_bare_command_prints_help_and_succeeds():
    r = run()
    assert r.returncode == 0 and "Usage: dlmcost" in r.stdout and "error" not in r.stderr


def test_version_has_one_source():
    from importlib.metadata import version

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"dlmcost {dlmcost.__version__}"
    assert version("dlmcost") == dlmcost.__version__
    assert "version = " not in (ROOT / "pyproject.toml").read_text().split("[project]")[1].split("[")[0]


COMMANDS = ["analyze", "sweep", "schemes", "schema", "gpus", "models", "model", "decodings", "plan"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_an_example_and_every_option_says_what_it_is(command, cli):
    text = cli(command, "--help", env={"COLUMNS": "200"}).stdout
    assert "Examples:" in text and f"dlmcost {command}" in text.split("Examples:")[1]
    assert "<list[str]>" not in text and "<bool>" not in text
    options = text.split("Options:")[1].split("Examples:")[0]
    for line in options.splitlines():
        if re.match(r"^  -", line):
            # option, metavar, then two spaces and help text on the same line (width 200)
            assert re.search(r"\S\s{2,}\S", line.strip()), f"no help text: {line!r}"


def test_shell_completion_is_offered(cli):
    assert "--show-completion" in cli("--help").stdout


def test_require_gates_with_exit_8_and_lists_failing_rows(cli):
    ok = cli("analyze", "--gpu", "h100", "-r", "tokens_per_s >= 1", "-r", "fits", "-f", "json")
    assert ok.returncode == 0, ok.stderr
    tps = json.loads(ok.stdout)["results"][0]["tokens_per_s"]
    bad = cli("analyze", "--gpu", "h100,b200", "-r", f"tokens_per_s >= {tps * 1.01}", "-f", "csv")
    assert bad.returncode == EXIT_REQUIREMENT == 8
    assert "H100 SXM" in bad.stderr and "B200" not in bad.stderr.split("\n", 1)[1]  # B200 is faster
    # the value that failed it, as the table shows it (4 significant digits): not only in stdout
    assert f"(got {tps:.4g})" in bad.stderr, bad.stderr
    sw = cli("sweep", "--gpu", "h100", "--batch", "1,100000", "-r", "fits", "-f", "csv")
    assert sw.returncode == 8 and "batch=100000" in sw.stderr and "batch=1 " not in sw.stderr
    assert "fits (got false)" in sw.stderr
    assert sw.stdout.count("\n") == 1 + len(sw.stdout.splitlines()) - 1  # rows still printed


@pytest.mark.parametrize("expr", ["__import__('os').system('true')", "tokens_per_s >= 1 or 1", "nosuch > 1",
                                  "tokens_per_s >= fast", "not time_s > 1", "fits >= true"])
def test_require_rejects_anything_but_the_small_language(expr, cli):
    r = cli("analyze", "--gpu", "h100", "-r", expr)
    assert r.returncode == 2 and r.stderr.startswith("error: --require")


def test_requirement_semantics_by_hand():
    row = dict(gpu="X", scheme="mdm", tokens_per_s=300.0, fits=True, time_s=2.0, supported=True)
    assert gates.parse("tokens_per_s >= 300").holds(row)
    assert not gates.parse("tokens_per_s > 300").holds(row)
    assert gates.parse("fits").holds(row) and not gates.parse("not fits").holds(row)
    assert gates.parse("scheme == mdm").holds(row) and gates.parse("scheme != ar").holds(row)
    assert gates.parse("time_s < 2.5").holds(row) and not gates.parse("time_s <= 1_9").holds(dict(row, time_s=20))
    assert not gates.parse("tokens_per_s >= 1").holds(dict(gpu="Y", supported=False))
    assert gates.parse("tokens_per_s >= 1000").missed_by(dict(row, tokens_per_s=10920.4)) == \
        "tokens_per_s >= 1000 (got 10,920)"  # thousands separated, never 1.092e+04
    assert gates.parse("fits").missed_by(dict(row, fits=False)) == "fits (got false)"
    assert gates.parse("time_s < 1").missed_by(dict(gpu="Y", supported=False)) == "time_s < 1 (unsupported: no numbers)"
    with pytest.raises(UsageError):
        gates.parse("tokens_per_s >= nan")


WORKFLOW = ROOT / "examples" / "github-actions.yml"


def workflow_steps() -> tuple[dict[str, str], list[dict]]:
    """The CI recipe's workflow-level environment (GitHub expressions left out: the test sets
    those) and its steps."""
    import yaml

    doc = yaml.safe_load(WORKFLOW.read_text())
    env = {k: str(v) for k, v in doc.get("env", {}).items() if "${{" not in str(v)}
    (job,) = doc["jobs"].values()
    return env, job["steps"]


def run_step(step: dict, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """One `run:` step as GitHub runs it with `shell: bash`."""
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                          capture_output=True, text=True, env={**env, **step.get("env", {})}, cwd=cwd, timeout=300)


def test_ci_recipe_installs_dlmcost_in_a_fresh_venv_and_gates(tmp_path):
    """The workflow's own `run:` steps, in order, in an empty folder (the user's repository: no
    second file of ours beside it) with a fresh venv: install from the checkout (offline, as the
    recipe installs from dlmcost's repository), gate, sweep. Then the gate again with a floor no
    GPU meets (exit 8)."""
    pytest.importorskip("hatchling")  # the local build backend (no download)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    # the test environment's dependencies, but not its (editable) dlmcost
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "deps.pth").write_text("\n".join(deps) + "\n")
    workflow_env, steps = workflow_steps()
    # `python -m pip` is the fresh venv's python running the test environment's pip
    env = dict(workflow_env, PATH=f"{venv}/bin:/usr/bin:/bin", HOME=str(tmp_path), PYTHONNOUSERSITE="1",
               DLMCOST_SOURCE=str(ROOT), DLMCOST_PIP_ARGS=f"--no-deps --no-build-isolation --no-index --prefix {venv}")
    repo = tmp_path / "repo"
    repo.mkdir()
    runs = [step for step in steps if "run" in step]
    assert len(runs) == 3
    done = [run_step(step, env, repo) for step in runs]  # bash -e: a step stops at its first failure
    for step, r in zip(runs, done):
        assert r.returncode == 0, (step["name"], r.stdout + r.stderr)
    assert "ok: throughput floor 300" in done[1].stdout
    assert (repo / "sweep.csv").read_text().startswith("gpu,")
    installed = site / "dlmcost"
    assert (installed / "_examples" / "tiny-dlm.yaml").is_file() and (installed / "_hardware").is_dir()
    assert (installed / "_examples" / "measurements.yaml").is_file()  # the calibrate format, in the docs
    r = run_step(runs[1], {**env, "MIN_TOKENS_PER_S": "100000"}, repo)
    assert r.returncode == 8 and "tokens_per_s >= 100000" in r.stderr
    # the README's example file works from any folder once installed
    r = subprocess.run([f"{venv}/bin/dlmcost", "model", "examples/tiny-dlm.yaml", "-f", "json"], capture_output=True,
                       text=True, env=env, cwd=repo, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["id"]


def test_ci_recipe_is_one_file_and_never_installs_by_name(tmp_path):
    """Nothing of ours beside the workflow (no script it runs, no file it reads), pip given only
    the source the user set, and a missing DLMCOST_SOURCE stops the job with one line before pip."""
    text = WORKFLOW.read_text()
    assert "examples/" not in text.split("name: dlmcost gate", 1)[1] and ".sh" not in text
    env, steps = workflow_steps()
    install = next(step for step in steps if "pip install" in step.get("run", ""))
    pip_lines = [line for line in install["run"].splitlines() if "pip install" in line]
    assert pip_lines and all(line.rstrip().endswith('"$DLMCOST_SOURCE"') for line in pip_lines), pip_lines
    assert "--require" in text
    r = run_step(install, {**env, "PATH": "/usr/bin:/bin", "DLMCOST_SOURCE": ""}, tmp_path)
    assert r.returncode == 2 and r.stdout.count("\n") == 1 and "DLMCOST_SOURCE" in r.stdout, r.stdout + r.stderr
    assert "pip" not in r.stderr


def test_huggingface_hub_is_not_imported_without_the_hub():
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "dlmcost", "analyze", "--gpu", "h100", "-f", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "huggingface" not in r.stderr


PLAIN_COMMANDS = [["analyze", "-f", "json"], ["analyze", "-f", "csv"], ["analyze", "-f", "markdown"],
                  ["analyze", "--ops", "-f", "markdown"], ["sweep", "--block", "8,32", "-f", "markdown"],
                  ["sweep", "-f", "csv"], ["sweep", "-f", "jsonl"], ["sweep", "-f", "json"], ["schemes", "-f", "json"],
                  ["gpus", "-f", "csv"], ["models", "-f", "markdown"], ["model", "GSAI-ML/LLaDA-8B-Instruct", "-f", "json"],
                  ["plan", "--rate", "1", "--gpu", "h100", "--tp", "1", "--requests", "50", "-f", "json"],
                  ["analyze", "--gpu", "nosuch"], ["sweep", "--bogus"]]  # and the errors


def test_output_formats_do_not_import_rich():
    """Issue #7, then issue 21: rich draws the terminal's tables (and typer's --help), never the
    machine formats (JSON, CSV, JSONL, Markdown) nor an error. Each command in a fresh
    interpreter; the first, `dlmcost analyze -f json`, as the installed script runs it."""
    r = subprocess.run([DLMCOST, "analyze", "-f", "json"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 0 and "dlmcost.render.analyze" in r.stderr
    assert not re.search(r"\|\s+rich(\.|$)", r.stderr, re.M)
    # the others forked from one interpreter that has imported dlmcost.cli and nothing else, so
    # each command starts where a fresh `from dlmcost.cli import main` would (no start-up, not 14:
    # the probe runs in tests/forkrun.py's server, which has run just `import dlmcost.__main__, dlmcost.cli`)
    r = forkrun.run({"probe": forkrun.script(RICH_PROBE, [json.dumps(PLAIN_COMMANDS)])}, dict(os.environ),
                    limit_s=120)["probe"]
    assert r is not None, "still running after 120 s"
    code, stdout, stderr = r
    assert code == 0, stderr
    loaded = json.loads(stdout)
    assert loaded.pop("<parent>") == [] and len(loaded) == len(PLAIN_COMMANDS), loaded
    assert all(v == [] for v in loaded.values()), loaded


RICH_PROBE = r"""
import contextlib, io, json, os, sys
from dlmcost.cli import main
def rich():
    return sorted(m for m in sys.modules if m.split(".")[0] == "rich")
out = {"<parent>": rich()}
for args in json.loads(sys.argv[1]):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(args)
        os.write(w, json.dumps(rich()).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out[" ".join(args)] = json.loads(data) if data else "no answer (the command raised)"
print(json.dumps(out))
"""


def test_packaging_metadata():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'license = "MIT"' in text and (ROOT / "LICENSE").read_text().startswith("MIT License")
    for field in ("classifiers", "keywords"):  # no project URLs: the project has no public home yet
        assert field in text


# --- tables --------------------------------------------------------------------------------


SWEEP = ["sweep", "--gpu", "h100,rtx-pro-6000,b200", "--block", "8,32", "--batch", "1,16", "--precision", "bf16,fp8",
         "--tp", "1,2"]


@pytest.mark.parametrize("cols", [80, 120])
def test_tables_fit_the_terminal_by_dropping_columns_not_numbers(cols):
    code, out = in_pty([*SWEEP, "--limit", "0"], cols=cols)
    assert code == 0
    lines = visible(out).splitlines()
    assert all(len(line) <= cols for line in lines), max(lines, key=len)
    table = [ln for ln in lines if ln.startswith(("H100", "RTX", "B200"))]
    assert table and not any("…" in ln for ln in table)
    assert any("RTX PRO 6000 Blackwell" in ln for ln in table)  # long names whole
    if cols == 80:
        assert "hidden at 80 columns" in visible(out) and "Lp (= 256 in every row)" in visible(out)


# Every table dlmcost prints (issue #11): the small ones (schemes, models, model, analyze --ops,
# plan) as well as the results tables; the sweep's have a test of their own above.
TABLE_COMMANDS = {
    "schemes": ["schemes"],
    "models": ["models"],
    "gpus": ["gpus"],
    "model": ["model", "GSAI-ML/LLaDA-8B-Instruct"],
    "analyze-ops": ["analyze", "--gpu", "all", "--ops"],
    "plan": ["plan", "--rate", "2", "--p95", "30", "--gpu", "h100,rtx-pro-6000", "--requests", "200", "--scheme",
             "dual-cache,ar", "--block", "32", "--tpf", "2"],
}
NUMBER = re.compile(r"[-+]?\d(?:[\d.,e+–×%B*]*[\d%B*])?")  # "1.5e+04", "2.49*", "8.02B", "1–4", not "4,"


def _tables(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(columns, the lines after its rule up to the next rule) of each table in the output."""
    rules = [i for i, ln in enumerate(lines) if ln.startswith("─")]
    return [(len(lines[i].split()), lines[i + 1:j]) for i, j in zip(rules, rules[1:] + [len(lines)])]


WIDE: dict[str, str] = {}


@pytest.mark.parametrize("cols, env", [(80, {}), (120, {}), (80, {"NO_COLOR": "1"}), (120, {"TERM": "dumb"})],
                         ids=["80", "120", "80-no-color", "120-dumb"])
@pytest.mark.parametrize("name", TABLE_COMMANDS)
def test_every_table_fits_the_terminal_by_dropping_columns_not_digits(cli, name, cols, env):
    """In a terminal of `cols` columns: no line wider, no '…' anywhere (a number is never elided,
    nor a name), every number one the full-width table has, and a note under each table that
    lost columns, naming them; colour only where the terminal takes it."""
    args = TABLE_COMMANDS[name]
    code, out = in_pty(args, cols=cols, env=env)
    assert code == 0, out[-500:]
    assert (ESC in out) == (not env), "bold headers on a colour terminal, no escape codes under NO_COLOR/dumb"
    # (the pty carries stderr too: a warning is one line, whatever the width; `gpus` warns of old prices)
    lines = [line for line in visible(out).splitlines() if not line.startswith("warning: ")]
    assert all(len(line) <= cols for line in lines), max(lines, key=len)
    assert not any("…" in line for line in lines), [line for line in lines if "…" in line]
    if name not in WIDE:  # the full-width table, the same for the four terminals: computed once
        WIDE[name] = cli(*args, env={"COLUMNS": "400"}).stdout
    wide = WIDE[name].splitlines()
    assert len(_tables(lines)) == len(_tables(wide)) >= 1
    for (n, body), (n_all, _) in zip(_tables(lines), _tables(wide)):
        note = [ln for ln in body if ln.startswith("(hidden at ")]
        if n < n_all:
            assert note and note[0].startswith(f"(hidden at {cols} columns: "), body
        else:
            assert n == n_all and not note
    shown = " ".join(lines).replace(f"(hidden at {cols} columns", "")
    assert set(NUMBER.findall(shown)) <= set(NUMBER.findall(" ".join(wide)))


def test_an_80_column_terminal_drops_what_a_serving_engineer_needs_least():
    """The columns kept at 80: a model's size and K/V bytes per token and its config status; a
    pass's count, time and bound; a scheme's knobs and what it runs, wrapped."""
    _, out = in_pty(["models"], cols=80, env={"NO_COLOR": "1"})
    assert "(hidden at 80 columns: family, default scheme;" in out
    assert re.search(r"^inclusionAI/LLaDA-MoE-7B-A1B-Instruct +7\.36B +1\.72B +128 +unverified$", out, re.M)
    _, out = in_pty(["analyze", "--gpu", "h100", "--ops"], cols=80, env={"NO_COLOR": "1"})
    from dlmcost import api  # the pass's time in ms, as the result has it: the time column is kept
    step = next(p for p in api.analyze(gpus="h100").plain()["results"][0]["passes"] if p["name"] == "step")
    shown = re.search(r"^step +128 +384 +0 .* compute +([0-9.]+)$", out, re.M)  # four figures, trailing zeros dropped
    assert shown and float(shown.group(1)) == pytest.approx(step["time_s"] * 1e3, abs=0.005)
    _, out = in_pty(["schemes"], cols=80, env={"NO_COLOR": "1"})
    assert "hidden" not in out and re.search(r"^block +steps +yes +block diffusion", out, re.M)
    assert re.search(r"^ +store_pass ", out, re.M)  # one knob a line, never a literal '\\n'


def test_piped_tables_follow_columns(cli):
    r = cli(*SWEEP, env={"COLUMNS": "80"})
    assert r.returncode == 0 and max(len(x) for x in r.stdout.splitlines()) <= 80


def test_terminal_shows_the_rows_that_fit_and_says_how_to_get_more():
    code, out = in_pty(["sweep", "--gpu", "all", "--block", "4,8,16,32", "--batch", "1,2,4"], cols=120, rows=30)
    text = visible(out)
    assert code == 0 and len(text.splitlines()) <= 30 + 6
    assert re.search(r"… [\d,]+ more rows \([\d,]+ in all\): --limit N", text) and "--format csv" in text


def test_a_4000_row_sweep_table_is_drawn_whole():
    """Every row of a 4000-row sweep is drawn when asked for (how long it takes is measured by
    `python benchmarks/bench.py --part render`, target at most 1 s: timings in tests are noise on
    shared machines)."""
    result = api.sweep(gpus="all", blocks=[4, 8, 16, 32], batches=[1, 2, 4, 8, 16], gens=[128, 256, 512])
    rows = api.sweep_rows(result)[:4000]
    assert len(rows) == 4000
    from dlmcost.render.output import Output

    out = Output(io.StringIO(), width=120)
    render_sweep(result.model_dump(exclude={"rows"}), rows, "table", out, rows)
    assert out.stream.getvalue().count("\n") > 4000


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_no_color_and_dumb_terminals_get_no_escape_codes(env):
    code, out = in_pty(["analyze", "--gpu", "h100,b200", "--batch", "100000"], cols=120, env=env)
    assert code == 0 and ESC not in out


def test_header_digits_are_not_highlighted():
    code, out = in_pty(["analyze", "--gpu", "h100"], cols=120)
    header = out.split("\n")[0]
    assert ESC not in header and "8.02B params" in header


def test_speedup_column_is_ar_latency_over_latency(cli):
    a = json.loads(cli("analyze", "--gpu", "h100", "--scheme", "dual-cache", "--gen", "256", "--block", "32",
                       "--tpf", "3", "-f", "json").stdout)["results"][0]
    expected = f"{a['ar_time_s'] / a['time_s']:.3g}"
    md = cli("analyze", "--gpu", "h100", "--scheme", "dual-cache", "--gen", "256", "--block", "32", "--tpf", "3",
             "-f", "markdown").stdout
    header = [ln for ln in md.splitlines() if ln.startswith("| GPU")][0]
    row = [ln for ln in md.splitlines() if ln.startswith("| H100")][0]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["speed-up vs AR ×"] == expected and float(expected) > 1  # faster than AR here
    assert "max batch" in cells and "knee block" in cells
    assert "S=85.33" in md and "85.3333" not in md  # 256 / 3 steps
    assert "|---|---:|" in md and "speed-up vs AR: AR decode latency / this latency" in md  # aligned, legend


def test_knee_never_exceeds_the_generation_length(cli):
    r = cli("analyze", "inclusionAI/LLaDA2.0-flash", "--gpu", "h100", "--tp", "4", "--precision", "fp8", "-f", "markdown")
    row = [ln for ln in r.stdout.splitlines() if ln.startswith("| H100")][0]
    knee = row.strip("|").split("|")[-1].strip()
    gen = int(re.search(r"gen (\d+)", r.stdout).group(1))
    assert knee == "all" or int(knee) <= gen
    assert "tp 4" in r.stdout  # the tensor-parallel size is stated


def test_hidden_settings_are_stated(cli):
    block = cli("analyze", "JetLM/SDAR-4B-Chat", "--gpu", "h100").stdout
    assert "store pass" in block
    ar = cli("analyze", "meta-llama/Meta-Llama-3-8B", "--gpu", "h100", "--scheme", "dual-cache")
    assert ar.returncode == 0 and "is an autoregressive model: it does not decode with 'dual-cache'" in ar.stderr


def test_analyze_csv_keeps_the_ops(cli):
    r = cli("analyze", "--gpu", "h100", "-f", "csv", "--ops")
    lines = r.stdout.splitlines()
    kinds = {ln.split(",")[0] for ln in lines[1:]}
    assert lines[0].startswith("row,") and kinds == {"result", "pass", "op"}


def test_memory_is_in_si_gb_everywhere(cli):
    r = cli("gpus", "-f", "json")
    h100 = next(g for g in json.loads(r.stdout) if g["name"] == "H100 SXM")
    assert h100["memory_bytes"] == 80 * 2**30 and h100["memory_as_listed"] == "80 GiB"
    table = cli("gpus", env={"COLUMNS": "200"}).stdout
    assert re.search(r"H100 SXM\s+85\.9\s+80 GiB", table) and re.search(r"MI325X\s+256\s+256 GB", table)
    assert "GB = 1e9 bytes" in table


# --- claims --------------------------------------------------------------------------------


def test_sweep_takes_a_comma_list_of_models(cli):
    r = cli("sweep", "-m", "GSAI-ML/LLaDA-8B-Instruct,meta-llama/Meta-Llama-3-8B", "--gpu", "h100", "-f", "csv")
    assert r.returncode == 0, r.stderr
    models = {ln.split(",")[0] for ln in r.stdout.splitlines()[1:]}
    assert models == {"GSAI-ML/LLaDA-8B-Instruct", "meta-llama/Meta-Llama-3-8B"}


LLADA, LLAMA = "GSAI-ML/LLaDA-8B-Instruct", "meta-llama/Meta-Llama-3-8B"


def csv_rows(text: str) -> list[dict]:
    import csv

    return list(csv.DictReader(io.StringIO(text)))


def test_several_models_share_one_grid_and_one_sorted_table(cli):
    """`--model A,B` compares like with like: the lengths not given are the first model's for every
    model (LLaDA generates 128 tokens by default, Llama 256), each model runs its own schemes, and
    the rows are sorted and cut together, with a model column."""
    from dlmcost.inputs.models import load_bundled

    llada_gen, llama_gen = load_bundled(LLADA).sampler.gen, load_bundled(LLAMA).sampler.gen
    assert llada_gen != llama_gen
    args = ["sweep", "-m", f"{LLADA},{LLAMA}", "--gpu", "h100", "--batch", "1,8,64"]
    for extra in ([], ["--sort", "-tokens_per_s"]):  # streamed, and held and sorted
        r = cli(*args, *extra, "-f", "csv")
        rows = csv_rows(r.stdout)
        assert {row["gen"] for row in rows} == {str(llada_gen)}, extra
        assert {row["scheme"] for row in rows if row["model"] == LLAMA} == set(load_bundled(LLAMA).sampler.schemes)
    speeds = [float(row["tokens_per_s"]) for row in rows]
    assert speeds == sorted(speeds, reverse=True)
    order = [row["model"] for row in rows]
    assert sum(a != b for a, b in zip(order, order[1:])) > 1  # sorted together, not model after model
    # each row is that model's own sweep at the shared length
    alone = api.sweep_rows(api.sweep(LLAMA, gpus="h100", gens=[llada_gen], batches=[1, 8, 64]))
    assert sorted(float(row["time_s"]) for row in rows if row["model"] == LLAMA) == sorted(a["time_s"] for a in alone)

    table = cli(*args, "--sort", "-tokens_per_s", "--limit", "3", env={"COLUMNS": "200"}).stdout
    lines = table.splitlines()
    assert lines[0].startswith(f"{LLADA}, {LLAMA} · {len(rows)} configurations evaluated")
    assert f"take {LLADA}'s defaults" in " ".join(table.split()) and table.count("configurations evaluated") == 1
    body = [ln for ln in lines if ln.startswith((f"{LLADA} ", f"{LLAMA} "))]
    assert len(body) == 3 and lines[lines.index(body[0]) - 2].split()[0] == "model"
    assert [ln.split()[0] for ln in body] == order[:3]
    assert f"{len(rows) - 3:,} more rows ({len(rows):,} in all)" in table

    own = csv_rows(cli(*args, "--own-defaults", "-f", "csv").stdout)
    assert {(row["model"], row["gen"]) for row in own} == {(LLADA, str(llada_gen)), (LLAMA, str(llama_gen))}
    assert "each model's grid from its own defaults" in " ".join(cli(*args, "--own-defaults").stdout.split())
    given = csv_rows(cli(*args, "--gen", "64", "-f", "csv").stdout)
    assert {row["gen"] for row in given} == {"64"} and {row["model"] for row in given} == {LLADA, LLAMA}


def test_example_files_work_from_any_folder(tmp_path, cli):
    r = cli("model", "examples/tiny-dlm.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


# --- big outputs ---------------------------------------------------------------------------


def test_sweep_streams_chunks_and_sweep_is_built_on_them(monkeypatch):
    monkeypatch.setattr(limits, "SWEEP_CHUNK", 7)
    meta, chunks = api.iter_sweep(gpus="h100,b200", blocks=[8, 32], batches=[1, 2, 4])
    parts = list(chunks)
    assert len(parts) > 1 and all(len(p) <= 7 for p in parts)
    assert sum(map(len, parts)) == meta.evaluated
    whole = api.sweep(gpus="h100,b200", blocks=[8, 32], batches=[1, 2, 4])
    assert [r.model_dump() for p in parts for r in p] == api.sweep_rows(whole)


def test_the_configuration_limit_admits_exactly_its_number():
    opts = dict(gpus="h100", blocks=[8, 32], batches=[1, 2])
    whole = api.sweep(**opts, max_configs=None)
    n = whole.evaluated + whole.skipped_impossible  # one GPU, one precision: every configuration asked for
    assert api.sweep(**opts, max_configs=n).evaluated == whole.evaluated > 0
    with pytest.raises(UsageError, match=f"asks for {n:,} configurations; at most {n - 1:,}"):
        api.sweep(**opts, max_configs=n - 1)


def test_large_grids_are_refused_unless_streamed_with_allow_large(monkeypatch, capsys):
    from dlmcost.cli import main

    monkeypatch.setattr(limits, "MAX_SWEEP_CONFIGS", 10)
    args = ["sweep", "--gpu", "h100", "--block", "8,32", "--batch", "1,2,4,8"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "24 configurations; at most 10" in err and "--allow-large" in err
    assert main([*args, "--allow-large"]) == 2  # a table holds every row: refused
    capsys.readouterr()
    assert main([*args, "--allow-large", "-f", "jsonl"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) > 10 and all(json.loads(x)["gpu"] == "H100 SXM" for x in out)


def _streamed_peak_mb(*batches: int) -> list[tuple[int, float]]:
    """Rows written and peak memory of a csv sweep in a fresh process (chunks of 2,048
    configurations), one process per number of batches, all running at once."""
    from concurrent.futures import ThreadPoolExecutor

    def one(n: int) -> tuple[int, float]:
        code = ("import resource,sys; import dlmcost.analysis.limits as limits; limits.SWEEP_CHUNK = 2048; from dlmcost.cli import main; "
                "main(['sweep','--gpu','all','--block','1,2,4,8,16,32,64,128','--batch',"
                f"','.join(str(b) for b in range(1,{n}+1)),'--gen','128,256','-f','csv']); "
                "sys.stdout.flush(); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
        r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        return r.stdout.count(b"\n"), int(r.stderr.decode().strip().splitlines()[-1]) / 1024

    with ThreadPoolExecutor(len(batches)) as pool:
        return list(pool.map(one, batches))


def test_streamed_csv_memory_does_not_grow_with_the_grid():
    """4x the rows (4 and 14 chunks), about the same memory: streamed, the peak grew by ~6 MB;
    with every chunk held before writing (the bug this guards against), by ~80 MB."""
    (small_rows, small_mb), (big_rows, big_mb) = _streamed_peak_mb(6, 24)  # two processes at once
    assert big_rows > 3.5 * small_rows > 3 * 2048
    assert big_mb - small_mb < 30, (small_mb, big_mb)


# --- product text ----------------------------------------------------------------------------


FORBIDDEN = re.compile(r"(?<![\w/])reference/|\.\./shared|DESIGN\.md|\bseeds?\b(?!\s*[=:\[\]{)])|\bseed's\b|seed (blog|table)")
ALLOWED_SEED = re.compile(r"random seed|--seed|seed=|seed:|\"seed\"|'seed'|`seed`|seed \[|seed \{|\(seed\)|, seed|seeded|"
                          r"seed\)|seed: int|\.seed|\[.seed.\]|`--seed`")


def test_product_files_cite_no_internal_documents():
    files = [p for d in ("hardware", "dlmcost", "docs", "examples") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".yml", ".json", ".sh", ".txt", ".html")]
    files.append(ROOT / "README.md")
    bad = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in FORBIDDEN.finditer(line):
                if "seed" in m.group(0) and ALLOWED_SEED.search(line):
                    continue
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not bad, "\n".join(bad)


def test_plan_draws_its_cost_latency_front(tmp_path, cli):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plan.png"
    args = ["plan", "--rate", "2", "--p95", "30", "--gpu", "h100,b200", "--tp", "1", "--requests", "200"]
    r = cli(*args, "--plot", str(out))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000
    html = cli(*args, "-f", "html")
    assert html.returncode == 0 and "<svg" in html.stdout and "deployments meeting the targets" in html.stdout


def test_readme_links_stay_inside_the_repository():
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path = (ROOT / target).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), target
