"""The files the commands write: checked before any work, and put in place only when the work is done.

Every command that writes a file asks :func:`refused` (the analysis commands' ``-o``) or
:func:`recording_refused` (``record -w``, ``run -w``) before it reads a capture or starts a process, so a
path that cannot be written is one line on stderr and exit 2, not a traceback after minutes of analysis::

    mcp-blackbox report: cannot write out/report.html: No such file or directory

:class:`Output` then writes the text beside the path and renames it over the path at the end, so inputs
found unreadable half-way (an ``export`` that streams) leave no empty or truncated file where an older
good one was, and an interrupted run leaves no half a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from pathlib import Path
from types import TracebackType
from typing import IO

STDOUT = "-"
CANNOT_WRITE = 2  # the exit status of a usage error: nothing was read, run or written


def refused(command: str, *paths: str | None) -> bool:
    """Whether one of an analysis command's output ``paths`` cannot be written; the first that cannot is
    said on stderr, in one line. None and ``-`` are stdout."""
    for path in paths:
        reason = unwritable(path)
        if reason is not None:
            say_cannot_write(command, path or STDOUT, reason)
            return True
    return False


def recording_refused(command: str, target: str, *, rotating: bool = False) -> bool:
    """Whether a recorder's ``-w`` (``target``) cannot be written, said on stderr as :func:`refused` says it.
    ``rotating``: rotated files are asked for (--rotate-size, --keep), in a directory."""
    reason = unrecordable(target, rotating=rotating)
    if reason is not None:
        say_cannot_write(command, target, reason)
    return reason is not None


def say_cannot_write(command: str, path: str, reason: str) -> None:
    # print, not cli.main.explain: one line whatever its length, for a log's grep.
    print(f"mcp-blackbox {command}: cannot write {path}: {reason}", file=sys.stderr)


def unwritable(path: str | None) -> str | None:
    """Why an analysis command cannot write ``path`` (what the system would say: the strerror), None: it
    can. These commands make no directories, so a missing one is an error. A file is written beside the
    path and renamed over it (:class:`Output`): its directory must take a new file, even when it exists."""
    if path is None or path == STDOUT:
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return _no_new_file_in(Path(path).parent)
    except OSError as e:  # a parent that is a file (ENOTDIR), a loop of links, a name too long
        return e.strerror or str(e)
    if stat.S_ISDIR(mode):
        return os.strerror(errno.EISDIR)
    if not os.access(path, os.W_OK):
        return _denied(Path(path))
    if stat.S_ISREG(mode):
        return _no_new_file_in(Path(os.path.realpath(path)).parent)
    return None  # a device or a pipe (/dev/stdout, a FIFO): written as it is


def unrecordable(target: str, *, rotating: bool = False) -> str | None:
    """Why a recorder cannot write ``target``, by the recorders' own rules (addon/rotation.py,
    addon/stdio_recorder.py): the directories it lacks are made, and an existing directory, or a path
    ending in /, takes a new file per run (rotated files). None: it can."""
    path = Path(os.path.expanduser(target))
    directory = rotating or path.is_dir() or target.endswith(("/", os.sep))
    if directory and path.exists() and not path.is_dir():
        return f"{os.strerror(errno.ENOTDIR)} (a directory is needed for the files of each run or rotation)"
    nearest = path if directory else path.parent
    while not nearest.exists() and nearest != nearest.parent:  # the directories the recorder will make
        nearest = nearest.parent
    if not nearest.is_dir():
        return os.strerror(errno.ENOTDIR)
    if not os.access(nearest, os.W_OK | os.X_OK):
        return _denied(nearest)
    if not directory and path.exists() and not os.access(path, os.W_OK):
        return _denied(path)
    return None


def _no_new_file_in(directory: Path) -> str | None:
    """Why no file can be made in ``directory``; None: one can."""
    directory = directory if str(directory) else Path(".")
    try:
        mode = os.stat(directory).st_mode
    except OSError as e:
        return e.strerror or str(e)
    if not stat.S_ISDIR(mode):
        return os.strerror(errno.ENOTDIR)
    if not os.access(directory, os.W_OK | os.X_OK):
        return _denied(directory)
    return None


def _denied(path: Path) -> str:
    """EROFS where the file system is read-only (access() says no to root there too), else EACCES."""
    with contextlib.suppress(OSError):
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return os.strerror(errno.EROFS)
    return os.strerror(errno.EACCES)


class Output:
    """Where a command's text goes: stdout for None or ``-``, else a new file beside the path, renamed over
    it when the ``with`` block ends. :meth:`discard` (the inputs could not be read) or an exception leaves
    the path as it was: nothing created, nothing truncated.

    The new file is created as ``open()`` would create it (0666 less the umask) or, replacing a file, with
    that file's mode; ``mode`` instead, when given, either way (an output that holds secrets: 0600). A
    symbolic link is written through. A device or a pipe is written to directly.
    """

    def __init__(self, path: str | None, *, newline: str | None = None, mode: int | None = None) -> None:
        self.path = path
        self.newline = newline
        self.mode = mode
        self.target: Path | None = None  # the file renamed over; None: stdout or written directly
        self.temporary: Path | None = None
        self.stream: IO[str] = sys.stdout
        self.kept = True

    def __enter__(self) -> Output:
        if self.path is None or self.path == STDOUT:
            return self
        target = Path(os.path.realpath(self.path))
        try:
            existing: int | None = os.stat(target).st_mode
        except FileNotFoundError:
            existing = None
        if existing is not None and not stat.S_ISREG(existing):
            self.stream = self._open(os.open(target, os.O_WRONLY | os.O_TRUNC))
            return self
        self.target = target
        fd, self.temporary = _new_file_beside(target)
        mode = self.mode if self.mode is not None or existing is None else stat.S_IMODE(existing)
        if mode is not None:  # else the umask's, as created
            os.fchmod(fd, mode)
        self.stream = self._open(fd)
        return self

    def discard(self) -> None:
        """Leave the path as it was when the block ends."""
        self.kept = False

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self.stream is sys.stdout:
            return
        closed = False
        try:
            self.stream.close()  # flushes: a full disk fails here, and then nothing is put in place
            closed = True
        finally:
            if self.temporary is not None and self.target is not None:
                if self.kept and closed and kind is None:
                    os.replace(self.temporary, self.target)
                else:
                    self.temporary.unlink(missing_ok=True)

    def _open(self, fd: int) -> IO[str]:
        # UTF-8 whatever the locale; a lone surrogate (a JSON "\\ud800" in a name) as an escape, not a traceback.
        return open(fd, "w", encoding="utf-8", errors="backslashreplace", newline=self.newline)


def _new_file_beside(target: Path) -> tuple[int, Path]:
    """A new hidden file in ``target``'s directory, created 0666 less the umask (as ``open()`` creates a file:
    os.open applies the umask, mkstemp's 0600 does not follow it)."""
    while True:
        candidate = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), candidate
        except FileExistsError:
            continue
