"""Run `dlmcost` commands (and small Python scripts) as processes forked from one interpreter that
has imported dlmcost, instead of starting Python for each.

A test about what a command does as a process (its exit code, one line on stderr, nothing on
stdout, no hang, an environment read as a module is imported) needs a process of its own, not a
fresh interpreter: starting Python and importing dlmcost again costs about 0.3 s of CPU a run. So
one server process per pytest process (and per set of the variables Python reads as it starts:
PYTHONPATH, PYTHONIOENCODING, LC_*, LANG) imports `dlmcost.__main__` and `dlmcost.cli` (what the
console script imports before it runs a command; not huggingface_hub, matplotlib or torch) and
then, for each request, forks a child per job, all at once: stdin from /dev/null, stdout and stderr
to files, the job's environment (read from then on: a module the job imports sees it), folder and
argv. A command job runs `dlmcost.__main__.main()` as the console script does; a script job runs
its source as `python -c` would. An uncaught exception prints its traceback and exits 1, as Python
does. Whatever still runs at the request's deadline is killed (None in the answer), so that a job
that hangs fails without holding up the others.

tests/ptyserver.py does the same for runs on a pseudo-terminal.

Protocol: one JSON line per request on the server's stdin ({jobs, limit_s}); one JSON line per
answer on its stdout ({results}: per job [exit code, stdout as latin-1 text, stderr] or null).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading


def _serve() -> None:
    import signal
    import tempfile
    import time

    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                os._exit(0)  # the test process went away
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        running, files = {}, []
        for i, job in enumerate(request["jobs"]):
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            pid = os.fork()
            if pid == 0:
                _child(job, out.fileno(), err.fileno())  # never returns
            running[pid] = i
            files.append((out, err))
        done, deadline = {}, time.monotonic() + request["limit_s"]
        while running and time.monotonic() < deadline:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.005)
                continue
            done[running.pop(pid)] = os.waitstatus_to_exitcode(status)
        for pid in running:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        results = []
        for i, (out, err) in enumerate(files):
            out.seek(0)
            err.seek(0)
            results.append([done[i], out.read().decode("latin-1"), err.read().decode("utf-8", "replace")]
                           if i in done else None)
            out.close()
            err.close()
        answer = json.dumps({"results": results}).encode() + b"\n"
        while answer:
            answer = answer[os.write(1, answer):]


def _child(job: dict, out: int, err: int) -> None:
    """In a forked child: run the job with its streams, environment and folder, then exit."""
    import traceback

    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        if job["env"] is not None:
            os.environ.clear()
            os.environ.update(job["env"])
        if job["cwd"] is not None:
            os.chdir(job["cwd"])
        try:
            if job["script"] is None:
                import dlmcost.__main__

                sys.argv = ["dlmcost", *job["argv"]]
                dlmcost.__main__.main()
            else:
                sys.argv = ["-c", *job["argv"]]
                exec(compile(job["script"], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    sys.path[0] = ""  # not this file's folder (tests/): the folder a job runs in, as for `python -c` or `-m`
    import dlmcost.__main__  # noqa: F401
    import dlmcost.cli  # noqa: F401

    sys.stdout.flush()
    _serve()


def case(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> dict:
    """A `dlmcost` command: its arguments, and the environment and folder it runs in (None: the
    server's: the `env` given to `run`, the test process's folder)."""
    return {"script": None, "argv": [str(a) for a in argv], "env": env, "cwd": cwd}


def script(source: str, argv: list[str] = (), env: dict[str, str] | None = None, cwd: str | None = None) -> dict:
    """`python -c source argv...` (in a process that has imported dlmcost.cli already)."""
    return {"script": source, "argv": [str(a) for a in argv], "env": env, "cwd": cwd}


# Read by the interpreter as it starts (stream encodings, sys.path, flags), not later: a request
# whose values differ gets a server started with them.
def _startup_env(env: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k == "LANG"))


_servers: dict[tuple, subprocess.Popen] = {}
_lock = threading.Lock()


@atexit.register
def _stop() -> None:
    for server in _servers.values():
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _drop(key: tuple) -> None:
    """Stop a server whose answer was not read (its late answer would be read as the next's)."""
    server = _servers.pop(key)
    server.kill()
    server.wait()


def run(jobs: dict[str, dict], env: dict[str, str], limit_s: float, cwd: str | None = None) -> dict:
    """Every job at once, each in a child forked from a server started with `env` (and run in
    `cwd` when the job names no folder): {name: [exit code, stdout as latin-1 text (its bytes:
    .encode("latin-1")), stderr] or None if still running after limit_s}."""
    jobs = {name: {**job, "cwd": job["cwd"] or cwd or os.getcwd(), "env": job["env"] if job["env"] is not None else env}
            for name, job in jobs.items()}
    key = _startup_env(env)
    with _lock:
        server = _servers.get(key)
        if server is None or server.poll() is not None:
            server = _servers[key] = subprocess.Popen([sys.executable, __file__], env=env, stdin=subprocess.PIPE,
                                                      stdout=subprocess.PIPE)
        try:
            server.stdin.write(json.dumps({"jobs": list(jobs.values()), "limit_s": limit_s}).encode() + b"\n")
            server.stdin.flush()
            ready, _, _ = select.select([server.stdout], [], [], limit_s + 60)
            line = server.stdout.readline() if ready else b""
        except BaseException:
            _drop(key)
            raise
        if not line:
            _drop(key)
    assert line, "the fork server exited or did not answer"
    return dict(zip(jobs, json.loads(line)["results"]))
