"""Errors the CLI turns into one line on stderr and a distinct exit code.

Every failure a user can cause (a typo in a GPU name, a broken config, an impossible workload, no
network) raises a subclass of `DlmcostError`; the CLI prints `error: <message>` and exits with the
class's `exit_code`. Anything else is a bug and is also caught, so no traceback ever reaches the
terminal (the exit code then is `EXIT_INTERNAL`).
"""

from __future__ import annotations

EXIT_USAGE = 2  # typer/click's own code for bad options; our usage errors share it
EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug in dlmcost
EXIT_REQUIREMENT = 8  # the run worked, but a result misses what the user required (CI gates)


class DlmcostError(Exception):
    """Base class: a message meant for the user, and the exit code to leave with."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UsageError(DlmcostError):
    """An option value that cannot be used (non-positive size, unknown precision name...)."""

    exit_code = EXIT_USAGE


class OverrideError(UsageError):
    """A value given as an override of a file's field (`plan`'s options over its scenario) that
    the field refuses: `field` (section, name) and `detail` let the command name its own option."""

    def __init__(self, message: str, field: tuple[str, str], detail: str):
        super().__init__(message)
        self.field, self.detail = field, detail


class WorkloadError(DlmcostError):
    """A workload that cannot run: block not dividing the generation, fewer steps than blocks."""

    exit_code = 3


class UnknownGPUError(DlmcostError):
    exit_code = 4


class HardwareFileError(DlmcostError):
    """A hardware YAML that is unreadable or fails validation."""

    exit_code = 5


class UnknownModelError(DlmcostError):
    """Neither a local file, a bundled id, nor (when allowed) something the Hub knows."""

    exit_code = 6


class ConfigError(DlmcostError):
    """A model config that is not valid JSON/YAML, or lacks fields, or names no known family."""

    exit_code = 7


class RequirementError(DlmcostError):
    """The command ran, but a result misses a requirement (`--require`, or `plan`'s targets).
    `details`: the failing rows, one line each, printed under the error line."""

    exit_code = EXIT_REQUIREMENT

    def __init__(self, message: str, details: list[str] = ()):
        super().__init__(message)
        self.details = list(details)


class NoDeploymentError(RequirementError):
    """`plan`: no deployment in the search space meets the targets (CI can gate on this code)."""


class MissingExtraError(DlmcostError):
    """An optional feature whose extra is not installed or fails to load (`--plot`, `--format html`
    need `plot`; `measure --backend torch` needs `measure`)."""

    exit_code = 9


# What each extra installs, as pyproject.toml lists it (the installed metadata is read first, so
# the two agree; these answer when dlmcost runs from a checkout that was never installed).
EXTRAS = {"plot": "matplotlib>=3.7", "measure": "torch>=2.1", "pandas": "pandas>=2.0"}


def install_hint(extra: str) -> str:
    """How to install an extra's packages: by their own names, which works wherever dlmcost runs
    (the package index's `dlmcost` is another project, so `pip install 'dlmcost[plot]'` would
    fetch that), or from a dlmcost checkout by the extra's name."""
    needs = [EXTRAS[extra]]
    try:
        from importlib.metadata import PackageNotFoundError, requires

        marker = f"extra == '{extra}'"
        listed = [r.split(";")[0].strip() for r in requires("dlmcost") or [] if r.replace('"', "'").endswith(marker)]
        needs = listed or needs
    except (ImportError, PackageNotFoundError):
        pass
    return f"pip install {' '.join(repr(n) for n in needs)} (or, from a dlmcost checkout, pip install '.[{extra}]')"


class HubError(DlmcostError):
    """Base for failures talking to the Hugging Face Hub; subclasses carry distinct exit codes."""

    exit_code = 10


class HubRepoNotFound(HubError):
    exit_code = 11


class HubGated(HubError):
    exit_code = 12


class HubRevisionNotFound(HubError):
    exit_code = 13


class HubFileNotFound(HubError):
    exit_code = 14


class HubUnreachable(HubError):
    exit_code = 15


class TraceError(DlmcostError):
    """A request trace that cannot be replayed: unreadable, too large, an unknown format, a missing
    column, or a bad value (the message names the row and the column)."""

    exit_code = 16


class DlmcostWarning(UserWarning):
    """Something the user should know that does not stop the command (printed as `warning: ...`)."""


EXIT_OUTPUT = 74  # sysexits EX_IOERR: the result could not be written (stdout closed, disk full)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C

# Every exit code, the one list that `dlmcost --help` (its short words) and the README's table (its
# meaning, Markdown) are made from: (code or range, short, meaning).
EXIT_CODES = (
    ("0", "ok", "success"),
    ("2", "bad usage", "bad option value (non-positive size, unknown precision, scheme, format or profile), or a "
                       "request beyond a [limit](docs/limits.md)"),
    ("3", "impossible workload", "impossible workload (a block not dividing the generation...), or a result that "
                                 "would overflow"),
    ("4", "unknown GPU", "unknown GPU (the message suggests close names)"),
    ("5", "bad hardware or stack file", "invalid hardware or stack file, unknown stack"),
    ("6", "unknown model", "unknown model (not a file, not bundled, not a Hub id)"),
    ("7", "bad model config", "unreadable, malformed or incomplete model config (the message names the field)"),
    ("8", "ran fine but a result missed --require (plan: no deployment meets the targets)",
     "ran fine, but a `--require` failed or `plan` found no deployment meeting the targets (details on stderr)"),
    ("9", "missing extra", "`--plot FILE` or `--format html` without the `plot` extra"),
    ("10-15", "Hugging Face Hub", "Hub: 11 repository not found, 12 gated or private (set `HF_TOKEN`), 13 revision "
                                  "not found, 14 no `config.json` (or safetensors, for `--verify`), 15 unreachable, "
                                  "timed out or answering unlike the Hub (retry, or `HF_HUB_OFFLINE=1` for the "
                                  "cache), 10 anything else"),
    ("16", "bad request trace", "unreadable or malformed request trace, or one beyond a [limit](docs/limits.md) "
                                "(the message names the row and the column)"),
    (str(EXIT_INTERNAL), "internal error", "internal error (a bug; please report it)"),
    (str(EXIT_OUTPUT), "output not written", "the result could not be written (stdout closed, disk full)"),
    (str(EXIT_INTERRUPTED), "interrupted", "interrupted"),
)


def exit_codes_line() -> str:
    """The exit codes in one line, as `dlmcost --help` ends."""
    return "Exit codes: " + "; ".join(f"{code} {short}" for code, short, _ in EXIT_CODES) + "."
