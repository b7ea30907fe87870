"""The one reader for the files dlmcost parses (model configs, hardware and efficiency files, the
Hub's JSON) and the one formatter for what goes wrong in them.

Files come from other people, so reading is bounded before it starts:

- only regular files are opened: a FIFO, a device (`/dev/zero` behind a symlink), a socket or a
  folder is named for what it is, found with `os.stat` before `open`, and the open itself is
  non-blocking, so nothing can wait for a writer that never comes;
- at most `limit` bytes are read (`limit + 1` to tell "too big" from "exactly the limit");
- text is UTF-8, with or without a byte-order mark, for JSON and YAML alike;
- YAML goes through the safe loader only (plain scalars, lists and mappings; `!!python/...` tags
  are refused, never executed), the C one when PyYAML has it (ten times faster), and a mapping
  that names the same key twice is refused (PyYAML would keep the last one without a word:
  `yaml_loader`), as is a JSON object naming a field twice;
- integers over Python's 4,300-digit conversion limit, nesting deeper than the interpreter's
  stack, paths too long for the file system and `~unknownuser/...` each get their own message.

Files read line by line (request traces, which may run to hundreds of MB) are opened with
`open_bounded` instead: the same checks before the open, then a binary stream that refuses to
read past `limit` bytes however the file grows, so the caller never holds the whole file.

Every failure is raised as the caller's `DlmcostError` subclass, so each kind of file keeps its
documented exit code.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import DlmcostError
from ..safe_text import shown
from .yaml_loader import RepeatedKeyError, load_yaml

# Limits, generous for real files (the largest bundled model config is under 10 KB, the largest
# real safetensors index, DeepSeek-V3's, about 9 MB), small enough to refuse junk at once.
CONFIG_LIMIT = 16 << 20  # a model config (local or from the Hub)
HARDWARE_LIMIT = 1 << 20  # a hardware or efficiency YAML
INDEX_LIMIT = 64 << 20  # a safetensors shard index from the Hub
TOKEN_LIMIT = 64 << 10  # the Hugging Face token file
TRACE_LIMIT = 256 << 20  # a request trace (CSV or JSON lines), read as it streams: at most 2,000,000 rows anyway


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """'a folder', 'a named pipe (FIFO)'... for a non-regular file's st_mode."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def expand(path: str | os.PathLike, error: type[DlmcostError], what: str) -> Path:
    """`~/x` and `~user/x` expanded; an unknown user is an error, not a crash; an empty path (an
    unset shell variable) too, which Path reads as the current folder."""
    if isinstance(path, str) and not path:
        raise error(f"{what}: the path is empty")
    p = Path(path)
    try:
        return p.expanduser()
    except RuntimeError:  # ~nosuchuser
        raise error(f"{what} {shown(str(path))}: no such user's home folder for '~'") from None


def os_problem(exc: OSError) -> str:
    """A short, specific reason for an OSError (without the path, which the caller shows)."""
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is longer than the file system allows"
    if exc.errno == errno.ENOENT:
        return "does not exist"
    if exc.errno == errno.ELOOP:
        return "has a symbolic link loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def _open_regular(path: str | os.PathLike, *, limit: int, error: type[DlmcostError], what: str) -> tuple[io.FileIO, os.stat_result]:
    """An unbuffered binary handle on a regular file the stat saw at most `limit` bytes long,
    opened without blocking (a FIFO, a device or a folder is refused before the open)."""
    p = expand(path, error, what)
    name = shown(str(path))
    try:
        st = os.stat(p)  # follows symlinks: /dev/zero behind a link is a device
    except OSError as exc:
        raise error(f"{what} {name}: {os_problem(exc)}") from None
    except ValueError:  # an embedded NUL (only through the Python API: argv cannot hold one)
        raise error(f"{what} {name}: a path cannot contain a NUL character") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {name} is {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise error(f"{what} {name} is {st.st_size:,} bytes; the limit is {_mib(limit)}")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise error(f"{what} {name}: {os_problem(exc)}") from None
    fh = os.fdopen(fd, "rb", buffering=0)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
        fh.close()
        raise error(f"{what} {name} is not a regular file")
    return fh, st


def yaml_files(path: str | os.PathLike, *, error: type[DlmcostError], what: str) -> list[Path]:
    """The YAML files a path names: itself (a regular file), or the .yaml/.yml regular files of a
    folder, in name order. Anything else is `error`, named for what it is."""
    p = expand(path, error, what)
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        raise error(f"{what} {shown(str(path))}: {os_problem(exc)}") from None
    except ValueError:  # an embedded NUL (only through the Python API: argv cannot hold one)
        raise error(f"{what} {shown(str(path))}: a path cannot contain a NUL character") from None
    if stat.S_ISDIR(mode):
        return sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml") and f.is_file())
    if not stat.S_ISREG(mode):
        raise error(f"{what} {shown(str(path))} is {kind_of(mode)}, not a YAML file or folder")
    return [p]


def read_bytes(path: str | os.PathLike, *, limit: int, error: type[DlmcostError], what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, without ever blocking."""
    name = shown(str(path))
    fh, st = _open_regular(path, limit=limit, error=error, what=what)
    with fh:
        try:
            # as many bytes as the stat saw, plus one to notice a file that grew since: asking for
            # `limit + 1` at once would allocate the whole limit (16 MiB for a config) per file
            want = min(st.st_size, limit) + 1
            data = _read_upto(fh, want)
            if len(data) == want and want <= limit:  # it grew (or /proc, which says 0): read on
                data += _read_upto(fh, limit + 1 - want)
        except OSError as exc:
            raise error(f"{what} {name}: {os_problem(exc)}") from None
    if len(data) > limit:  # grew after the stat
        raise error(f"{what} {name} is over the limit of {_mib(limit)}")
    return data


def _read_upto(fh: io.FileIO, n: int) -> bytes:
    """Up to `n` bytes, fewer only at the end of the file (an unbuffered read may return less)."""
    parts, left = [], n
    while left > 0:
        chunk = fh.read(left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


class _Bounded(io.RawIOBase):
    """A raw stream that raises `error` once more than `limit` bytes have come through it."""

    def __init__(self, fh: io.FileIO, limit: int, error: type[DlmcostError], label: str):
        super().__init__()
        self._fh, self._left, self._error, self._label = fh, limit, error, label
        self._limit = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            n = self._fh.readinto(buffer)
        except OSError as exc:
            raise self._error(f"{self._label}: {os_problem(exc)}") from None
        self._left -= n or 0
        if self._left < 0:
            raise self._error(f"{self._label} is over the limit of {_mib(self._limit)}")
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


def open_bounded(path: str | os.PathLike, *, limit: int, error: type[DlmcostError], what: str) -> io.BufferedReader:
    """A regular file as a buffered binary stream (`readline(size)`, iteration) that never blocks
    and raises `error` as soon as more than `limit` bytes were read, even from a file that grows
    (or a /proc file, whose stat says 0). Close it (it is a context manager)."""
    fh, _ = _open_regular(path, limit=limit, error=error, what=what)
    return io.BufferedReader(_Bounded(fh, limit, error, f"{what} {shown(str(path))}"), buffer_size=1 << 16)


def decode(data: bytes, *, error: type[DlmcostError], what: str) -> str:
    try:
        return data.decode("utf-8-sig")  # a byte-order mark is allowed, in JSON as in YAML
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def yaml_message(exc: Exception) -> str:
    """The first line of a YAML error and where it is, without quoting the document."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["syntax error"])[0]
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return shown(f"{problem}{where}")


def validation_message(exc: Exception, top: str = "(top level)") -> str:
    """pydantic's first error as "field 'a.b': message" (one line, user text escaped)."""
    errors = exc.errors()
    err = errors[0]
    where = ".".join(str(p) for p in err["loc"]) or top
    return shown(f"field '{where}': {err['msg']}")


def _int_limit(exc: ValueError) -> bool:
    return "integer string conversion" in str(exc)


class RepeatedField(Exception):
    """A JSON object naming one field twice (`name`)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def unique_fields(pairs: list) -> dict:
    """A JSON object's fields, refusing one written twice (json keeps the last without a word:
    `{"model_type": "llada", "model_type": "llama"}` was read as a llama)."""
    record = dict(pairs)
    if len(record) != len(pairs):  # rare: only then is the repeated one looked for
        seen = set()
        for name, _ in pairs:
            if name in seen:
                raise RepeatedField(name)
            seen.add(name)
    return record


STRICT_JSON = json.JSONDecoder(object_pairs_hook=unique_fields)


def parse(text: str, *, fmt: str, error: type[DlmcostError], what: str) -> Any:
    """JSON or YAML text -> Python data, every failure as `error`."""
    try:
        if fmt == "json":
            return STRICT_JSON.decode(text)
        return load_yaml(text)
    except RepeatedKeyError as exc:
        raise error(f"{what}: {exc.message()}") from None
    except RepeatedField as exc:
        raise error(f"{what}: key '{shown(exc.name, 40)}' appears twice") from None
    except RecursionError:
        raise error(f"{what} is nested too deeply (more levels than the parser's stack allows)") from None
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:
        if _int_limit(exc):
            raise error(f"{what} holds an integer with more than 4,300 digits") from None
        raise error(f"{what} is not valid {fmt.upper()}: {shown(str(exc))}") from None
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError and its subclasses
        if type(exc).__module__.startswith("yaml"):
            raise error(f"{what} is not valid YAML: {yaml_message(exc)}") from None
        raise


def read_document(path: str | os.PathLike, *, limit: int, error: type[DlmcostError], what: str,
                  fmt: str | None = None) -> Any:
    """A JSON (by suffix `.json`, or `fmt="json"`) or YAML file, read within `limit` bytes."""
    data = read_bytes(path, limit=limit, error=error, what=what)
    label = f"{what} {shown(str(path))}"
    fmt = fmt or ("json" if str(path).lower().endswith(".json") else "yaml")
    text = decode(data, error=error, what=label)
    if fmt == "yaml":
        from . import bundled as compiled

        known = compiled.lookup(text)  # a bundled file: its parse, without the YAML parser
        if known is not None:
            return known
    return parse(text, fmt=fmt, error=error, what=label)
