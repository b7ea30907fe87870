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
argv. A command job runs `sys.exit(dlmcost.__main__.main())` as the console script does; a script
job runs its source as `python -c` would; both at the child's top level, so that the exit is
Python's own (SystemExit, the streams flushed, atexit, an escaping exception's traceback and exit
1). Whatever still runs at the request's deadline is killed (None in the answer), so that a job
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
import socket
import subprocess
import sys
import threading


def _serve(fd_socket) -> dict:
    """The server loop; returns only in a forked child, with the job it is to run (its streams
    already in place)."""
    import signal
    import socket
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
        # the streams a job was given (a pipe's end, /dev/full) come beside the request, on the socket
        passed = socket.recv_fds(fd_socket, 1, request["nfds"])[1] if request["nfds"] else []
        running, files = {}, []
        for i, job in enumerate(request["jobs"]):
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            pid = os.fork()
            if pid == 0:
                null = os.open(os.devnull, os.O_RDONLY)
                for fd, default in ((0, null), (1, out.fileno()), (2, err.fileno())):
                    given = job["streams"][fd]
                    os.dup2(default if given is None else passed[given], fd)
                for fd in (*passed, null, fd_socket.detach()):  # only the job's own streams stay open
                    os.close(fd)
                return job
            running[pid] = i
            files.append((out, err))
        for fd in passed:  # the children hold them now: a reader sees the end when they are done
            os.close(fd)
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


if __name__ == "__main__":
    import socket

    fd_socket = socket.socket(fileno=int(sys.argv[1]))
    sys.argv[1:] = []
    sys.path[0] = ""  # not this file's folder (tests/): the folder a job runs in, as for `python -c` or `-m`
    import dlmcost.__main__
    import dlmcost.cli  # noqa: F401

    sys.stdout.flush()
    job = _serve(fd_socket)
    # A forked child from here on, its streams on the job's files: the job runs at the top level,
    # so that its exit is Python's own (SystemExit, flushing the streams, atexit, an escaping
    # exception's traceback and exit 1), as in a fresh process.
    if job["env"] is not None:
        os.environ.clear()
        os.environ.update(job["env"])
    if job["cwd"] is not None:
        os.chdir(job["cwd"])
    if job["script"] is None:
        sys.argv = ["dlmcost", *job["argv"]]
        sys.exit(dlmcost.__main__.main())
    sys.argv = ["-c", *job["argv"]]
    exec(compile(job["script"], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
    sys.exit(0)


def case(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None, stdout: int | None = None) -> dict:
    """A `dlmcost` command: its arguments, and the environment and folder it runs in (None: the
    server's: the `env` given to `run`, the test process's folder); `stdout`: a file descriptor
    of the caller's to write to instead of a file (a pipe's end, /dev/full; the caller closes its
    own copy after `run`)."""
    return {"script": None, "argv": [str(a) for a in argv], "env": env, "cwd": cwd, "streams": [None, stdout, None]}


def script(source: str, argv: list[str] = (), env: dict[str, str] | None = None, cwd: str | None = None) -> dict:
    """`python -c source argv...` (in a process that has imported dlmcost.cli already)."""
    return {"script": source, "argv": [str(a) for a in argv], "env": env, "cwd": cwd, "streams": [None, None, None]}


# Read by the interpreter as it starts (stream encodings, sys.path, flags), not later: a request
# whose values differ gets a server started with them.
def _startup_env(env: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k == "LANG"))


_servers: dict[tuple, subprocess.Popen] = {}
_sockets: dict[tuple, socket.socket] = {}  # each server's end for passing file descriptors
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
    passed: list[int] = []

    def indexed(streams: list[int | None]) -> list[int | None]:
        passed.extend(fd for fd in streams if fd is not None)
        return [None if fd is None else passed.index(fd) for fd in streams]

    jobs = {name: {**job, "cwd": job["cwd"] or cwd or os.getcwd(), "env": job["env"] if job["env"] is not None else env,
                   "streams": indexed(job["streams"])} for name, job in jobs.items()}
    key = _startup_env(env)
    with _lock:
        server = _servers.get(key)
        if server is None or server.poll() is not None:
            ours, theirs = socket.socketpair()
            server = _servers[key] = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())], env=env,
                                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      pass_fds=(theirs.fileno(),))
            theirs.close()
            _sockets[key] = ours
        try:
            if passed:
                socket.send_fds(_sockets[key], [b"."], passed)
            request = {"jobs": list(jobs.values()), "limit_s": limit_s, "nfds": len(passed)}
            server.stdin.write(json.dumps(request).encode() + b"\n")
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
