"""Files a command will write (`--plot FILE`, `--out FILE`), checked before any work starts.

A path that cannot be written fails at once with one line, so a long run is not wasted and
nothing is printed first: a name longer than the file system allows, a folder that is missing
or is a file, a named pipe (opening it would wait for a reader), a folder or a device where the
file should be, a read-only file or folder. Whether the folder takes a new file is asked of the
file system itself (a file created and removed at once), which also answers for read-only
mounts and for root, whom permission bits do not stop.

The error is a `UsageError` (exit 2, a bad option value), as for the file's other checks.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import UsageError
from ..safe_text import shown

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


# the first line of every file dlmcost writes for itself to read again (calibrate's and measure's)
OWN_FILE_HEADER = b"# Written by `dlmcost "


def check_output_file(path: str, what: str, own_only: bool = False) -> None:
    """Raise `UsageError` unless `path` can be written as a regular file (nothing is left behind).
    `own_only`: an existing file is replaced only where it is empty or one dlmcost wrote (its
    first line OWN_FILE_HEADER): `calibrate -o /etc/passwd` replaced the file, run as root."""
    if not path:
        raise UsageError(f"{what} needs a file name")

    def refuse(reason: str) -> UsageError:
        return UsageError(f"{what}: cannot write '{shown(path)}': {reason}")

    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise refuse(f"'{shown(folder)}' is not a folder" if os.path.lexists(folder)
                     else f"folder '{shown(folder)}' does not exist")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise refuse("it is a symbolic link to nothing") from None
        _probe_new_file(path, refuse)
        return
    except OSError as exc:
        raise refuse(_reason(exc)) from None
    for is_kind, kind in _KINDS:
        if is_kind(info.st_mode):
            raise refuse(f"it is {kind}, not a regular file")
    _probe_existing_file(path, refuse)
    if own_only and info.st_size and not _written_by_dlmcost(path):
        raise refuse(f"it exists and dlmcost did not write it (its first line is not "
                     f"'{OWN_FILE_HEADER.decode()}...'): remove it first or choose another name")


def check_not_the_same(path: str, what: str, other: str | None, other_what: str) -> None:
    """Raise `UsageError` when `path` names the same file as `other` (through a link, or spelt
    another way): `calibrate points.yaml -o points.yaml` replaced the measurements it read with the
    stack it fitted, and `measure --out f --profile-out f` the measurements with the stack."""
    if other is None:
        return
    try:
        same = os.path.samefile(path, other)
    except (OSError, ValueError):  # one of them not there yet: the same name, once links are followed
        same = os.path.realpath(path) == os.path.realpath(other)
    if same:
        raise UsageError(f"{what}: '{shown(path)}' is {other_what}: writing there would replace it; "
                         "choose another name")


def _written_by_dlmcost(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(OWN_FILE_HEADER)) == OWN_FILE_HEADER
    except OSError:  # unreadable: not known to be ours
        return False


def _probe_new_file(path: str, refuse) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        raise refuse(_reason(exc)) from None
    os.close(fd)
    os.unlink(path)


def _probe_existing_file(path: str, refuse) -> None:
    """Opened for writing without truncating it: the file stays as it is until the command writes."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as exc:
        raise refuse(_reason(exc)) from None


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        longest = max(len(os.fsencode(part)) for part in exc.filename.split(os.sep)) if exc.filename else 0
        return f"the name is too long for the file system ({longest} bytes in one part)"
    return exc.strerror or type(exc).__name__
