"""Run `dlmcost` commands as forked copies of one interpreter that has imported dlmcost.

A test about what a command does as a process (its exit code, one line on stderr, nothing on
stdout, no hang) needs a process of its own, not a fresh interpreter: starting Python and importing
dlmcost again costs about 0.3 s of CPU a run. One driver process imports `dlmcost.__main__` and
`dlmcost.cli` (what the console script imports before it runs a command), then forks a child per
case, all at once: stdin from /dev/null, stdout and stderr to files, the case's environment (read
by the child from then on: a module the command imports, huggingface_hub for one, sees it), and
`dlmcost.__main__.main()` as the console script runs it; an uncaught exception prints its traceback
and exits 1, as Python does. Whatever still runs at the deadline is killed (None in the answer), so
that a case that hangs fails without holding up the others. Variables Python reads as it starts
(PYTHONIOENCODING, LC_ALL, PYTHONPATH) are the driver's: `env` of `run`.

The CLI's tests/ptyserver.py does the same for pseudo-terminals.
"""

from __future__ import annotations

import json
import subprocess
import sys

DRIVER = r"""
import json, os, signal, sys, tempfile, time, traceback
import dlmcost.__main__, dlmcost.cli
cases, limit = json.loads(sys.argv[1]), float(sys.argv[2])
sys.stdout.flush()
running, files = {}, {}
for name, case in cases.items():
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child never returns into the loop
        code = 1
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0); os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
            if case["env"] is not None:
                os.environ.clear(); os.environ.update(case["env"])
            if case["cwd"] is not None:
                os.chdir(case["cwd"])
            sys.argv = ["dlmcost", *case["argv"]]
            try:
                dlmcost.__main__.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            except BaseException:
                traceback.print_exc()
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(code)
    running[pid], files[name] = name, (out, err)
done, deadline = {}, time.monotonic() + limit
while running and time.monotonic() < deadline:
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
        time.sleep(0.01)
        continue
    done[running.pop(pid)] = os.waitstatus_to_exitcode(status)
for pid in running:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
result = {}
for name, (out, err) in files.items():
    out.seek(0); err.seek(0)
    result[name] = [done[name], out.read().decode("latin-1"), err.read().decode("utf-8", "replace")] if name in done else None
print(json.dumps(result))
"""


def case(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> dict:
    """One command: its arguments, and the environment and folder it runs in (None: the driver's)."""
    return {"argv": [str(a) for a in argv], "env": env, "cwd": cwd}


def run(cases: dict[str, dict], env: dict[str, str], limit_s: float, cwd: str | None = None) -> dict:
    """Every case at once, forked from one driver started with `env`: {name: [exit code, stdout as
    latin-1 text (its bytes: .encode("latin-1")), stderr] or None if still running at limit_s}."""
    driver = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(cases), str(limit_s)], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, env=env, cwd=cwd, timeout=limit_s + 60)
    assert driver.returncode == 0, driver.stderr
    return json.loads(driver.stdout)
