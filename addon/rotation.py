"""The addon's own flow-file writer: owner-only files, written flow by flow, rotated by size, kept by count or bytes.

    mitmdump -s addon/mcp_recorder.py ... --set mcp_write=caps/ --set mcp_rotate_size=64m --set mcp_keep=1g

mitmproxy's ``-w`` (``save_stream_file``) already opens a new file whenever its strftime-formatted path
changes. What it lacks, and this writer adds:

- files created readable by their owner only (0600), whatever the umask;
- each flow written whole, in one ``write``, as it ends: after a SIGKILL every file holds every flow that
  had ended (the page cache outlives the process), so only the flows still open are lost; a rotated file
  is also fsynced when it is closed;
- ``mcp_rotate_size``: a new file once the current one has passed this size;
- ``mcp_keep``: retention, the newest N files or the newest that fit a byte budget, oldest deleted first.

``mcp_write`` names a file (strftime fields allowed: a new file each time the formatted path changes, as
``-w`` does) or, with ``mcp_rotate_size`` or ``mcp_keep``, an existing directory or a path ending in ``/``,
a directory of files named after their start time in UTC: ``mcp-20261201T193000Z-0001.flows``. The
names sort in time order, which is the order the analyzer reads a directory in. Retention only ever
deletes files named like that.

The writer is a second addon, after :class:`McpRecorder` in the script's ``addons``: mitmproxy calls
the recorder's hook first, so a flow is written with the recorder's record in it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.io import tnetstring
from mitmproxy.utils import human

from mcp_blackbox.addon.mcp_detect import request_messages
from mcp_blackbox.analyzer.wire.inputs import ROTATED_NAME
from mcp_blackbox.analyzer.wire.metadata import METADATA_KEY
from mcp_blackbox.analyzer.wire.recording import METADATA_KEY as RECORDING_KEY
from mcp_blackbox.analyzer.wire.recording import marker, recording_id

logger = logging.getLogger("mcp_blackbox")

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
OPTIONS = frozenset({"mcp_write", "mcp_rotate_size", "mcp_keep"})


@dataclass(frozen=True)
class Retention:
    """Keep the newest ``files`` files, or the newest whose sizes add up to at most ``budget`` bytes."""

    files: int | None = None
    budget: int | None = None

    def exceeded_by(self, count: int, total: int) -> bool:
        """Whether ``count`` files of ``total`` bytes are more than this keeps."""
        over_count = self.files is not None and count > self.files
        over_budget = self.budget is not None and total > self.budget
        return over_count or over_budget


def parse_keep(text: str) -> Retention:
    """``10``: the newest 10 files; ``1g``, ``500m``: the newest files within that many bytes."""
    text = text.strip()
    if text.isdigit():
        if int(text) < 1:
            raise ValueError("keep at least 1 file")
        return Retention(files=int(text))
    try:
        budget = human.parse_size(text)
    except ValueError:
        budget = None
    if budget is None or budget <= 0:
        raise ValueError(f"{text!r} is neither a number of files (10) nor a size (500m, 1g)")
    return Retention(budget=budget)


def parse_rotate_size(text: str) -> int:
    try:
        size = human.parse_size(text.strip())
    except ValueError:
        size = None
    if size is None or size <= 0:
        raise ValueError(f"{text!r} is not a size (e.g. 64m, 512k)")
    return size


def rotated_name(start: float, number: int) -> str:
    """``mcp-20261201T193000Z-0001.flows``: the start time in UTC, then the file's number in this run."""
    return f"mcp-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(start))}-{number:04d}.flows"


def rotated_files(directory: Path) -> list[Path]:
    """The directory's files named like rotated files, oldest first (their names sort by start time)."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory) if ROTATED_NAME.match(entry.name))
    except FileNotFoundError:
        return []
    return [directory / name for name in names]


class FlowFiles:
    """Where serialized flows go: one file (its path may hold strftime fields) or a directory of rotated files.

    ``reopen``: paths this process opened before (a script reload makes a new writer): appended to,
    not truncated, so a reload never erases what was recorded.
    """

    def __init__(
        self,
        target: str,
        *,
        directory: bool,
        rotate_size: int | None = None,
        keep: Retention | None = None,
        clock: Callable[[], float] = time.time,
        reopen: set[str] | None = None,
    ) -> None:
        self.target = target
        self.directory = Path(target) if directory else None
        self.rotate_size = rotate_size
        self.keep = keep
        self.clock = clock
        self.reopen = reopen if reopen is not None else set()
        self.fd: int | None = None
        self.path: Path | None = None
        self.size = 0
        self.number = 0  # rotated files opened in this run
        self.opened = 0  # files opened in this run, rotated or not: the recording's file numbers

    # -- writing

    def write(self, record: bytes) -> None:
        """Append one serialized flow, whole; rotate afterwards if the file has passed the size."""
        self._open_for_now()
        assert self.fd is not None
        view, before = memoryview(record), self.size
        try:
            while view:  # a regular file takes it in one write; a short write (disk nearly full) is continued
                written = os.write(self.fd, view)
                view = view[written:]
                self.size += written
        except OSError:
            # Never leave half a record: the flows after it could not be read. Cut back to the last whole one.
            os.ftruncate(self.fd, before)
            os.lseek(self.fd, before, os.SEEK_SET)
            self.size = before
            raise
        if self.directory is not None and self.rotate_size is not None and self.size >= self.rotate_size:
            self.close(sync=True)
            self.apply_retention()

    def starting_file(self) -> int | None:
        """Open the file the next record goes to; its number in the recording if the record starts it."""
        self._open_for_now()
        return self.opened if self.size == 0 else None

    def open_now(self) -> None:
        """Open the file at start-up (single-file mode), so that it exists once the proxy listens."""
        if self.directory is None:
            self._open_for_now()

    def close(self, *, sync: bool = False) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    # -- files

    def _open_for_now(self) -> None:
        if self.directory is not None:
            if self.fd is None:
                self._open_rotated()
            return
        path = Path(time.strftime(self.target, time.localtime(self.clock()))) if "%" in self.target else None
        path = path or Path(self.target)
        if self.fd is not None and path == self.path:
            return
        self.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        key = str(path.resolve())
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if key in self.reopen else os.O_TRUNC)
        self.fd = os.open(path, flags, FILE_MODE)
        os.fchmod(self.fd, FILE_MODE)  # an existing file keeps its mode through O_TRUNC: make it ours
        self.reopen.add(key)
        self.path, self.size = path, os.fstat(self.fd).st_size
        self.opened += 1

    def _open_rotated(self) -> None:
        assert self.directory is not None
        self.directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        start = self.clock()
        while True:
            self.number += 1
            path = self.directory / rotated_name(start, self.number)
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            except FileExistsError:  # another run in the same second: the next number
                continue
            break
        os.fchmod(self.fd, FILE_MODE)
        self.path, self.size = path, 0
        self.opened += 1
        self.apply_retention()

    def apply_retention(self) -> list[Path]:
        """Delete the oldest rotated files beyond ``keep`` (never the open one); the paths deleted."""
        if self.directory is None or self.keep is None:
            return []
        files = rotated_files(self.directory)
        sizes = _sizes(files)
        files = [p for p in files if p in sizes]
        deleted: list[Path] = []
        total = sum(sizes.values())
        for path in files:
            if not self.keep.exceeded_by(len(files) - len(deleted), total) or self._is_open(path):
                break
            if not _delete_rotated(path):
                break
            deleted.append(path)
            total -= sizes[path]
        return deleted

    def _is_open(self, path: Path) -> bool:
        return self.fd is not None and path == self.path


def _sizes(files: list[Path]) -> dict[Path, int]:
    """The size of each file, in their order; a file gone meanwhile is left out."""
    sizes: dict[Path, int] = {}
    for path in files:
        try:
            sizes[path] = path.stat().st_size
        except FileNotFoundError:
            continue
    return sizes


def _delete_rotated(path: Path) -> bool:
    """Delete a file for retention (one already gone counts as deleted); False, with a warning, if it cannot be:
    retention stops there rather than delete newer files."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        logger.warning("mcp_blackbox: cannot delete %s for mcp_keep: %s", path, e)
        return False
    return True


class CaptureWriter:
    """The addon: writes every HTTP flow as it ends (as ``-w`` does) into :class:`FlowFiles`."""

    def __init__(self) -> None:
        self.files: FlowFiles | None = None
        self.open_flows: dict[str, http.HTTPFlow] = {}
        self.is_running = False
        self.write_all = True
        self.recording = recording_id()  # every file this writer starts says it (analyzer/wire/recording.py)

    def load(self, loader: Any) -> None:
        loader.add_option(
            "mcp_write",
            str | None,
            None,
            "Write flows here as they end, each whole, in files readable by their owner only (0600): a file "
            "(strftime fields allowed, as with -w) or, with mcp_rotate_size or mcp_keep, a directory of files "
            "named mcp-<UTC start>-<n>.flows.",
        )
        loader.add_option(
            "mcp_rotate_size",
            str | None,
            None,
            "With mcp_write: start a new file once the current one has passed this size (e.g. 64m).",
        )
        loader.add_option(
            "mcp_keep",
            str | None,
            None,
            "With mcp_write: keep only the newest N rotated files (e.g. 24) or the newest that fit in a size "
            "(e.g. 1g); the oldest are deleted first.",
        )
        loader.add_option(
            "mcp_write_all",
            bool,
            True,
            "With mcp_write: write every HTTP flow (true), or only the exchanges the recorder took for MCP "
            "(false; what `mcp-blackbox run` does without --all): the rest passes through unrecorded.",
        )

    def configure(self, updated: set[str]) -> None:
        if "mcp_write_all" in updated:
            self.write_all = ctx.options.mcp_write_all
        if not OPTIONS & updated:
            return
        files = self._files_from_options()
        if self.files is not None:
            self.files.close()
        self.files = files
        if self.is_running and files is not None:
            self._start()

    def _files_from_options(self) -> FlowFiles | None:
        """The files the options name, or None without ``mcp_write``; a bad option is an ``OptionsError``."""
        target = ctx.options.mcp_write
        rotate_text, keep_text = ctx.options.mcp_rotate_size, ctx.options.mcp_keep
        if not target:
            _refuse_rotation_without_target(rotate_text, keep_text)
            return None
        rotate_size, keep = _rotation_options(rotate_text, keep_text)
        path = Path(os.path.expanduser(target))
        directory = bool(rotate_size or keep) or path.is_dir() or target.endswith(("/", os.sep))
        _check_write_target(target, path, directory)
        return FlowFiles(
            str(path), directory=directory, rotate_size=rotate_size, keep=keep, reopen=_opened_by_this_process()
        )

    def running(self) -> None:
        # Not before: if the proxy cannot listen (a port in use), mitmdump exits before this and no empty
        # capture is left behind.
        self.is_running = True
        if self.files is not None:
            self._start()

    def _start(self) -> None:
        assert self.files is not None
        try:
            self.files.open_now()
            self.files.apply_retention()
        except OSError as e:
            logger.error("mcp_blackbox: cannot write %s: %s", self.files.target, e)

    def request(self, flow: http.HTTPFlow) -> None:
        if self.files is not None:
            self.open_flows[flow.id] = flow

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None:  # a WebSocket flow is written at its end
            self._save(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._save(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self._save(flow)

    def done(self) -> None:
        # Flows still open at shutdown (the recorder has put their partial bodies back), as -w writes them.
        for flow in list(self.open_flows.values()):
            self._save(flow)
        self.open_flows.clear()
        if self.files is not None:
            try:
                self.files.close(sync=True)
            except OSError as e:
                logger.error("mcp_blackbox: closing %s failed: %s", self.files.path, e)

    def _save(self, flow: http.HTTPFlow) -> None:
        self.open_flows.pop(flow.id, None)
        if self.files is None or not (self.write_all or is_mcp(flow)):
            return
        try:
            state = flow.get_state()
            if (number := self.files.starting_file()) is not None:
                # The first flow of each file names the recording, on the copy written: the live flow is untouched.
                state["metadata"] = {**state.get("metadata", {}), RECORDING_KEY: marker(self.recording, number)}
            self.files.write(tnetstring.dumps(state))
        except Exception as e:  # a full disk must not stop the traffic; say it every time it happens
            logger.error(
                "mcp_blackbox: flow %s NOT written to %s: %s", flow.id, self.files.path or self.files.target, e
            )


def _refuse_rotation_without_target(rotate_text: str | None, keep_text: str | None) -> None:
    """Rotation or retention asked for with no ``mcp_write`` to apply it to: an error, not silently nothing."""
    if rotate_text or keep_text:
        name = "mcp_rotate_size" if rotate_text else "mcp_keep"
        raise exceptions.OptionsError(f"{name} needs mcp_write (the directory to write the files in)")


def _parsed_option[Value](name: str, parse: Callable[[str], Value], text: str | None) -> Value | None:
    """``text`` read by ``parse``, None when the option is unset; a bad value is an error naming the option."""
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as e:
        raise exceptions.OptionsError(f"{name}: {e}") from e


def _rotation_options(rotate_text: str | None, keep_text: str | None) -> tuple[int | None, Retention | None]:
    """``mcp_rotate_size`` and ``mcp_keep`` parsed, and checked against each other."""
    rotate_size = _parsed_option("mcp_rotate_size", parse_rotate_size, rotate_text)
    keep = _parsed_option("mcp_keep", parse_keep, keep_text)
    if keep is not None and keep.budget is not None and rotate_size is not None and keep.budget < rotate_size:
        raise exceptions.OptionsError(
            f"mcp_keep {keep_text} is smaller than mcp_rotate_size {rotate_text}: no closed file would be kept"
        )
    return rotate_size, keep


def _check_write_target(target: str, path: Path, directory: bool) -> None:
    """An ``OptionsError`` unless ``mcp_write`` (``target``, expanded to ``path``) can be written: as a directory
    of rotated files or as one file, whichever ``directory`` says."""
    if directory and "%" in target:
        raise exceptions.OptionsError(
            "mcp_write: a directory of rotated files has no strftime fields (the files are named by time)"
        )
    if directory and path.exists() and not path.is_dir():
        raise exceptions.OptionsError(f"mcp_write: {target} is a file; rotated files need a directory")
    # Written to later: say now, at start-up, if it cannot be (not when the first flow ends).
    nearest = path if directory else path.parent
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise exceptions.OptionsError(f"mcp_write: {nearest} is not writable")


def is_mcp(flow: http.HTTPFlow) -> bool:
    """Whether the recorder (run before this writer) took the flow for MCP; a request still unanswered at
    shutdown, which it has not judged, by the JSON-RPC in its body (the recorder's own test)."""
    record = flow.metadata.get(METADATA_KEY)
    return (isinstance(record, dict) and "mcp" in record) or bool(request_messages(flow))


def _opened_by_this_process() -> set[str]:
    """Paths opened by the writers of this mitmproxy process, kept on the master: a script reload drops
    this module, not the master, and must append to the file it was writing rather than truncate it."""
    master = ctx.master
    opened = getattr(master, "_mcp_blackbox_opened", None)
    if not isinstance(opened, set):
        opened = set()
        with contextlib.suppress(AttributeError):
            setattr(master, "_mcp_blackbox_opened", opened)  # noqa: B010 - not an attribute mitmproxy declares
    return opened
