"""Run the `dlmcost` console script in pseudo-terminals without starting Python for each run.

A terminal test needs a real process: its standard streams a pseudo-terminal of a given size, its
own environment (TERM, NO_COLOR), its exit code. What it does not need is a fresh interpreter that
imports dlmcost again each time (about 0.25 s a run, most of the time of ~30 runs). So one server
process per pytest process imports `dlmcost.cli` (what the console script imports before it runs a
command) and then, for each request, forks a child in a new pseudo-terminal (`pty.fork`). The child
leaves the server's loop, takes the request's window size, environment, working folder and argv,
and runs `sys.exit(dlmcost.__main__.main())` as the console script does: Python's own exit path
(flushing, exit code, SystemExit, an escaping exception's traceback) is that of a real run. The
server relays everything written to the terminal and the exit status.

Client side (`run`): a lazily started server per test process (one per set of the variables
Python reads as it starts, so that a child's streams are set up as a fresh run's would be), stopped
when its stdin closes (at the test process's exit, whatever the way), or killed when an answer is
not read (a run past ANSWER_S, an interrupted test), so that no late answer goes to the next run.

Protocol: one JSON line per request on the server's stdin ({argv, cols, rows, env, cwd}); one JSON
line per answer on its stdout ({status, out}: the wait status and the bytes as latin-1 text).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading


def _serve() -> dict:
    """The server loop; returns only in a forked child, with the request it is to run."""
    import fcntl
    import pty
    import signal
    import struct
    import termios

    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                os._exit(0)  # the test process went away
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        req = json.loads(line)
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", req["rows"], req["cols"], 0, 0))
            return req
        out = b""
        while True:
            ready, _, _ = select.select([fd], [], [], 60)
            if not ready:  # silent for a minute: a hung run, ended here so that waitpid returns
                os.kill(pid, signal.SIGKILL)
                break
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:  # EIO: the child and its terminal are gone
                break
            if not chunk:
                break
            out += chunk
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        answer = json.dumps({"status": status, "out": out.decode("latin-1")}).encode() + b"\n"
        while answer:
            answer = answer[os.write(1, answer):]


if __name__ == "__main__":
    # sys.path as the console script has it: its own folder first (not tests/)
    sys.path[0] = os.path.dirname(sys.argv[1])
    import dlmcost.__main__  # noqa: F401
    import dlmcost.cli  # noqa: F401

    request = _serve()
    # Python set the standard streams up for the server's pipes; for a terminal it makes stdout
    # line-buffered (unless -u or PYTHONUNBUFFERED, which the server was started with too), so
    # that what a command prints and its stderr lines reach the screen in the order written
    if not sys.stdout.write_through:
        sys.stdout.reconfigure(line_buffering=True)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = request["argv"]
    sys.exit(dlmcost.__main__.main())


# Read by the interpreter as it starts (stream encodings and buffering, flags), not later: a
# request whose values differ gets a server started with them.
def _startup_env(env: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k == "LANG"))


_servers: dict[tuple, subprocess.Popen] = {}
_lock = threading.Lock()


ANSWER_S = 600  # longest a run may take: the server gives up on a silent one after 60 s


@atexit.register
def _stop() -> None:
    for server in _servers.values():
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a run still going: its terminal closes with the server
            server.kill()
            server.wait()


def _drop(key: tuple) -> None:
    """Stop a server whose answer was not read (a timeout, an interrupted test): its late answer
    would otherwise be read as the next request's. Its running child, if any, gets SIGHUP as its
    terminal closes."""
    server = _servers.pop(key)
    server.kill()
    server.wait()


def run(script: str, args: list[str], cols: int, rows: int, env: dict[str, str]) -> tuple[int, bytes]:
    """Run `script args` (the dlmcost console script) in a cols x rows pseudo-terminal with exactly
    the environment `env`: (exit code, everything written to the terminal)."""
    key = _startup_env(env)
    with _lock:
        server = _servers.get(key)
        if server is None or server.poll() is not None:
            server = _servers[key] = subprocess.Popen([sys.executable, __file__, script], env=env,
                                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        request = {"argv": [script, *args], "cols": cols, "rows": rows, "env": env, "cwd": os.getcwd()}
        try:
            server.stdin.write(json.dumps(request).encode() + b"\n")
            server.stdin.flush()
            ready, _, _ = select.select([server.stdout], [], [], ANSWER_S)  # one line per request: none buffered
            line = server.stdout.readline() if ready else b""
        except BaseException:
            _drop(key)
            raise
        reason = "" if line else "exited" if server.poll() is not None else f"no answer in {ANSWER_S} s"
        if not line:
            _drop(key)
    assert line, f"the pseudo-terminal server: {reason}"
    answer = json.loads(line)
    return os.waitstatus_to_exitcode(answer["status"]), answer["out"].encode("latin-1")
