"""The process around a command: its streams, and one line on stderr with a distinct exit code
for every failure (dlmcost/errors.py lists the codes). No command logic here."""

import codecs
import copy
import errno
import gc
import os
import sys
import warnings

import typer

from ..errors import (EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OUTPUT, EXIT_USAGE, DlmcostError, DlmcostWarning,
                      RequirementError)
from .app import app
from .output import stderr as _stderr
from .output import warn, warnings_held


_GLYPHS = {"\u00b7": ".", "\u2014": "-", "\u2013": "-", "\u00d7": "x", "\u2026": "...", "\u2500": "-",
           "\u2502": "|", "\u2501": "="}


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: the glyphs dlmcost prints, as ASCII; anything else as an escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(_GLYPHS.get(c, f"\\u{ord(c):04x}") for c in bad), exc.end


codecs.register_error("dlmcost-ascii", _ascii_fallback)


def _prepare_streams() -> None:
    """A stdout that cannot encode UTF-8 (LANG=C, PYTHONIOENCODING=ascii) gets ASCII glyphs
    instead of an encoding error; stderr gets escapes."""
    for stream, handler in ((sys.stdout, "dlmcost-ascii"), (sys.stderr, "backslashreplace")):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=handler)
            except (OSError, ValueError):
                pass


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, DlmcostWarning):
        warn(str(message))


def _show(held: list[str]) -> None:
    """The warnings a command gave, once it has run (or ran and missed a requirement); one given
    again (the same requests served by each deployment compared) is shown once."""
    for text in dict.fromkeys(held):
        _stderr(f"warning: {text}")


def _click_exit(exc: BaseException) -> int | None:
    """Exit code for click's own exceptions (typer may vendor click, so match by class name)."""
    kind = {c.__name__ for c in type(exc).__mro__}
    if "NoArgsIsHelpError" in kind:  # bare `dlmcost` (or `dlmcost plot`): the help, and success
        try:
            print(exc.format_message())
        except BrokenPipeError:
            pass
        return 0
    if "Exit" in kind:
        return int(getattr(exc, "exit_code", 0) or 0)
    if "Abort" in kind:
        _stderr("error: aborted")
        return EXIT_INTERRUPTED
    if "ClickException" in kind:
        _stderr(f"error: {exc.format_message()}")
        return EXIT_USAGE
    return None


_OUTPUT_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EBADF") if hasattr(errno, n)}


def _output_failed(exc: OSError) -> int:
    _stderr(f"error: cannot write the output: {exc.strerror or type(exc).__name__}")
    return EXIT_OUTPUT


def _silence_stdout() -> None:
    """After a failed write or a closed pipe, point stdout at /dev/null so the interpreter's final
    flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


_BUILT: dict[str | None, object] = {}  # command name (None: the whole tree) -> its click command


def _command_tree(args: list[str]):
    """The click command to run. typer builds every command's parameters from its signature up
    front (about a millisecond each); when the first argument names a command, only that one is
    built: same group, same callback, same help and errors for that command. Built once per
    process: click makes a fresh context for every run, so a program (or a test) that calls
    main() many times does not pay for the build each time."""
    name = args[0] if args else None
    chosen = [c for c in app.registered_commands if name and (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
    key = name if chosen else None
    if key not in _BUILT:
        if not chosen:  # a plot subcommand, --help, --version, completion, a typo: the whole tree
            _BUILT[key] = typer.main.get_command(app)
        else:
            one = copy.copy(app)
            one.registered_commands, one.registered_groups = chosen, []
            _BUILT[key] = typer.main.get_command(one)
    return _BUILT[key]


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line on stderr and a distinct exit code for every failure. Warnings are
    held until the command has run: shown when it succeeds (or misses a requirement, exit 8),
    dropped when it fails, so that a failure is its one error line."""
    if sys.stdout is None:  # started with stdout closed: nowhere to print a result
        _stderr("error: standard output is closed: nowhere to write the result")
        return EXIT_OUTPUT
    _prepare_streams()
    try:
        command = _command_tree(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # (Ctrl-C while the command's modules load)
        return EXIT_INTERRUPTED
    with warnings_held() as held:
        return _run(command, argv, held)


def _run(command, argv: list[str] | None, held: list[str]) -> int:
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            warnings.simplefilter("always", DlmcostWarning)
            code = command.main(args=argv, prog_name="dlmcost", standalone_mode=False)
            if isinstance(code, int) and not isinstance(code, bool) and code:
                return code  # typer returns an Exit's code here, Ctrl-C's 130 among them (the commands return None)
            sys.stdout.flush()  # a full disk shows up here, not at exit
        _show(held)
    except DlmcostError as exc:
        if isinstance(exc, RequirementError):  # the command ran: what it warned about stands
            _show(held)
        _stderr(f"error: {exc.message}")
        for line in getattr(exc, "details", ()):
            _stderr(f"  {line}")
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
        _silence_stdout()
        _show(held)
        return 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:  # file reads raise DlmcostErrors: this is the output
            _silence_stdout()
            return _output_failed(exc)
        _stderr(f"internal error: {exc.__class__.__name__}: {exc} (please report)")
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001
        code = _click_exit(exc)
        if code is not None:
            return code
        # a bug: still one line, never a traceback
        _stderr(f"internal error: {exc.__class__.__name__}: {exc} (please report)")
        return EXIT_INTERNAL
    return 0


def run() -> None:
    try:
        code = main()
    except SystemExit as exc:
        # click answers EPIPE on stdout with exit 1 after wrapping stdout in its PacifyFlushWrapper
        if type(sys.stdout).__name__ != "PacifyFlushWrapper":
            raise
        code = _reader_left(0) if exc.code == 1 else exc.code
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        code = _reader_left(code)
    # The process ends here: the interpreter's final collection would trace every live object
    # (a quarter of a short command's time) only for the exit to free them anyway.
    gc.freeze()
    sys.exit(code)


def _reader_left(code: int) -> int:
    """The reader of a pipe stopped early (`dlmcost sweep | head`): what it read is what it wanted,
    so this is success, as for csv and json; stdout goes to /dev/null so the interpreter's own
    final flush stays quiet."""
    _silence_stdout()
    return code


if __name__ == "__main__":
    run()
