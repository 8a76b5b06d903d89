"""The stdio recording wrapper: ``mcp-blackbox record --stdio -w CAPTURE -- COMMAND ARGS...``.

Put in place of an MCP server's command in a client's configuration, it starts COMMAND as its child and
stands between the two on all three pipes. Each pipe has its own thread that reads whatever is there
(``os.read``) and writes it on at once, before anything else is done with it: no newline or whole message
is waited for, so the pass-through is byte for byte and never held back by the recording. Only then are
the bytes split into lines and each line written to the capture with its times (``analyzer/wire/stdio_capture.py``
has the format; docs/ARCHITECTURE.md, "stdio capture format", describes it).

A thread per pipe rather than one select loop: a peer that stops reading blocks only the pipe it stopped
reading, as it would without the wrapper, and the other two keep flowing. A line is timed when the
wrapper knew of it: its read, or earlier, when the thread of the child's other output pipe saw it waiting
(``Pump.look``): a thread woken late would otherwise time a line late.

Faithful ends: when the client closes stdin, the child's stdin is closed; when a destination refuses a
write (the client stopped reading stdout, the child closed its stdin), the source is closed too, so its
writer meets the broken pipe it would have met without the wrapper. The child runs in its own process
group and the wrapper forwards INT, TERM, HUP, QUIT, USR1 and USR2 to that group: a client that kills the
wrapper's group (the Python SDK does) or a terminal's Ctrl-C then reaches the server once, not twice. The
wrapper exits with the child's status, 128 + N for a child killed by signal N, as a shell reports it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

from mcp_blackbox.analyzer.wire import stdio_capture as fmt
from mcp_blackbox.analyzer.wire.inputs import recording_marker
from mcp_blackbox.analyzer.wire.metadata import ProcessRecord
from mcp_blackbox.analyzer.wire.recording import RecordingRecord, marker, recording_id, stdio_recording_id

CHUNK = 64 * 1024  # a pipe's default capacity on Linux: one read takes whatever a writer could queue
FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# After the child exits, how long its stdout and stderr may stay open (a grandchild holding them) before
# the wrapper stops waiting: the client sees the server's exit through ours, so it must not wait long.
DRAIN_GRACE = 1.0

# The wrapper's own failures, numbered as env(1) and timeout(1) number them, apart from the child's codes.
STATUS_WRAPPER_FAILED = 125
STATUS_NOT_EXECUTABLE = 126
STATUS_NOT_FOUND = 127


def say(message: str) -> None:
    """A line on the wrapper's stderr (never stdout: it is the protocol's channel)."""
    with contextlib.suppress(OSError):
        os.write(2, f"mcp-blackbox record: {message}\n".encode(errors="backslashreplace"))


def stamp(t: float) -> float:
    return round(t, 6)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:  # a pipe someone set O_NONBLOCK on: wait for room, as a blocking write would
            select.select([], [fd], [])


def read_some(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:
            select.select([fd], [], [])


def capture_path(target: str, start: float) -> Path:
    """``-w``'s file, or in a directory (one that exists, or a path ending in /) a new file for this run.

    A client restarts its servers (each launch of the app, each reload): a directory keeps every run.
    """
    if target.endswith(("/", os.sep)) or Path(target).is_dir():
        name = f"mcp-stdio-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(start))}-{os.getpid()}{fmt.SUFFIX}"
        return Path(target) / name
    return Path(target)


def open_capture(path: Path, *, directory: bool) -> int:
    if directory:
        path.parent.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode through O_TRUNC: make it owner-only
    return fd


class CaptureWriter:
    """Records appended to the capture, each one ``write`` of a whole line, so a SIGKILL tears at most one.

    Re-entrant: the signal handler runs on the main thread and may record while the main thread holds
    the lock between two records. A failing disk stops the recording, never the traffic.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self.fd: int | None = fd
        self.path = path
        self.lock = threading.RLock()

    def write(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        with self.lock:
            if self.fd is None:
                return
            try:
                write_all(self.fd, data)
            except OSError as e:
                say(f"{self.path}: {e.strerror}; recording stopped, the server's traffic goes on")
                self.fd = None

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = None


class LineSplitter:
    """One stream cut into lines at ``\\n``, each recorded with the time of its first byte and of its end.

    A line longer than ``limit`` keeps its head and its length; the rest is counted, not kept.
    """

    def __init__(self, stream: fmt.Stream, capture: CaptureWriter, limit: int) -> None:
        self.stream = stream
        self.capture = capture
        self.limit = limit
        self.head = bytearray()
        self.length = 0
        self.t_first: float | None = None

    def feed(self, chunk: bytes, now: float, seen: Seen | None = None) -> None:
        """``chunk`` read at ``now``; ``seen``: its first bytes were in the pipe earlier (``Seen``)."""
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            t_first, t = (now, now) if seen is None else (seen.time_of(start, now), seen.time_of(end, now))
            if self.t_first is None and end - start <= self.limit:
                self.emit(chunk[start:end], end - start, t_first, t)  # the usual case: a whole line in one read
            else:
                self.add(chunk, start, end, t_first)
                self.flush(t)
            start = end + 1
        if start < len(chunk):
            self.add(chunk, start, len(chunk), now if seen is None else seen.time_of(start, now))

    def add(self, chunk: bytes, start: int, end: int, now: float) -> None:
        if self.t_first is None:
            self.t_first = now
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[start : min(end, start + room)]
        self.length += end - start

    def flush(self, now: float, **extra: Any) -> None:
        """Record the pending line (none pending: nothing); ``extra`` marks one that ended without newline."""
        if self.t_first is None:
            return
        self.emit(bytes(self.head), self.length, self.t_first, now, **extra)
        self.head.clear()
        self.length = 0
        self.t_first = None

    def emit(self, data: bytes, length: int, t_first: float, t: float, **extra: Any) -> None:
        record = {"type": fmt.LINE, "stream": self.stream, "t": stamp(t), "t_first": stamp(t_first)}
        record.update(fmt.line_fields(data, length))
        record.update(extra)
        self.capture.write(record)


class Seen(NamedTuple):
    """``size`` bytes were waiting in a pipe at ``t``: seen there by the other output pipe's thread."""

    t: float
    size: int
    reads: int  # how many reads of the pipe had been done before it looked

    def time_of(self, offset: int, now: float) -> float:
        """When the byte at ``offset`` of the next read was known to be there: ``t``, if it was then."""
        return min(self.t, now) if offset < self.size else now


def waiting_bytes(fd: int) -> int:
    """How many bytes a pipe holds (FIONREAD); 0 where it cannot say."""
    try:
        size: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0
    return size


class Pump(threading.Thread):
    """Copies one pipe (source fd to destination fd) chunk by chunk, then records the chunk's lines."""

    def __init__(
        self,
        stream: fmt.Stream,
        source: int,
        destination: int,
        capture: CaptureWriter,
        limit: int,
        at_eof: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=f"mcp-blackbox {stream}", daemon=True)
        self.stream = stream
        self.source = source
        self.destination = destination
        self.capture = capture
        self.splitter = LineSplitter(stream, capture, limit)
        self.at_eof = at_eof
        # The child's stdout and stderr: each pump, after a read, looks at what waits in the other's pipe.
        self.other: Pump | None = None
        self.reads = 0
        self.seen: Seen | None = None  # set by the other pump's thread

    def run(self) -> None:
        error: str | None = None
        while True:
            try:
                chunk = read_some(self.source)
            except OSError as e:
                chunk, error = b"", e.strerror or str(e)
            now = time.time()
            if not chunk:
                break
            if not self.pass_on(chunk, now):
                return
        self.splitter.flush(now, unterminated=True)
        record = {"type": fmt.EOF, "stream": self.stream, "t": stamp(now)}
        if error is not None:
            record["error"] = error
        self.capture.write(record)
        if self.at_eof is not None:
            self.at_eof()

    def pass_on(self, chunk: bytes, now: float) -> bool:
        """Write ``chunk`` (read at ``now``) on, then record its lines; False: the destination refused it (the
        source is closed)."""
        try:
            write_all(self.destination, chunk)
        except OSError as e:
            self.refused(chunk, now, e)
            return False
        self.reads += 1
        seen, self.seen = self.seen, None
        self.splitter.feed(chunk, now, seen if seen is not None and seen.reads == self.reads - 1 else None)
        if self.other is not None:
            self.other.look()
        return True

    def look(self) -> None:
        """Called from the other pump's thread: note what waits in this pipe now, for this pump's next read.

        Two threads read the child's two pipes, and a thread the machine is slow to wake reads, and times,
        a line late: a stderr line the child wrote before its answer was timed 187 ms after it on a loaded
        machine. The other thread, just after its own read, sees the bytes waiting here; they were written
        by then, and the next read here starts with them. Counted reads tell a look that came after this
        pump's read (it then speaks of the read after)."""
        reads = self.reads  # before the look: a read that ends meanwhile only makes the time later than true
        size = waiting_bytes(self.source)
        if size:
            self.seen = Seen(time.time(), size, reads)

    def refused(self, chunk: bytes, now: float, error: OSError) -> None:
        """The destination is gone: record what was read (the writer did send it) and close the source."""
        self.splitter.feed(chunk, now)
        self.splitter.flush(now, unterminated=True)
        reason = errno.errorcode.get(error.errno or 0, "") or error.strerror or str(error)
        self.capture.write({"type": fmt.WRITE_FAILED, "stream": self.stream, "t": stamp(now), "error": reason})
        with contextlib.suppress(OSError):
            os.close(self.source)


class StdioRecorder:
    def __init__(
        self,
        command: Sequence[str],
        capture: CaptureWriter,
        *,
        limit: int = fmt.LINE_LIMIT,
        directory: Path | None = None,
    ) -> None:
        self.command = list(command)
        self.capture = capture
        self.limit = limit
        self.directory = directory  # -w DIR/: each server run a file of its own, in one recording
        self.child: subprocess.Popen[bytes] | None = None
        self.pending_signals: list[int] = []

    def header(self, start: float, recorder: str) -> dict[str, Any]:
        client = _client_process()
        return {
            "format": fmt.FORMAT,  # first: the key a reader identifies the file by
            "version": fmt.VERSION,
            "type": fmt.HEADER,
            "t": stamp(start),
            "command": self.command,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            # The client: the process that started the wrapper as its server (measured, not inferred).
            "client_process": client,
            # Which recording the file is part of, and its number in it (analyzer/wire/recording.py).
            "recording": self._recording(client),
            "recorder": recorder,
            "line_limit": self.limit,
        }

    def _recording(self, client: ProcessRecord | None) -> RecordingRecord:
        """The servers one client started into one directory are one recording, numbered as they started."""
        if self.directory is None:
            return marker(recording_id(), 1)
        recording = stdio_recording_id(client, self.directory)
        earlier = [
            path
            for path in self.directory.glob(f"*{fmt.SUFFIX}")
            if path != self.capture.path and (found := recording_marker(str(path))) and found["id"] == recording
        ]
        return marker(recording, len(earlier) + 1)

    def on_signal(self, number: int, frame: FrameType | None) -> None:
        child = self.child
        running = child is not None and child.returncode is None
        if child is None:
            self.pending_signals.append(number)  # before the spawn: passed on right after it
        elif running:
            self.forward(child.pid, number)
        self.capture.write(
            {
                "type": fmt.SIGNAL,
                "t": stamp(time.time()),
                "signal": signal.Signals(number).name,
                "number": number,
                "forwarded_to": child.pid if child is not None and running else None,
            }
        )

    @staticmethod
    def forward(pid: int, number: int) -> None:
        try:
            os.killpg(pid, number)  # its group: the server and whatever it started, as a group kill would
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def spawn(self) -> tuple[int, int, int] | int:
        """Start the child on three new pipes; our ends, or the exit status when it could not start."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        theirs, ours = (stdin_r, stdout_w, stderr_w), (stdin_w, stdout_r, stderr_r)
        try:
            self.child = subprocess.Popen(
                self.command,
                stdin=stdin_r,
                stdout=stdout_w,
                stderr=stderr_w,
                process_group=0,
            )
        except OSError as e:
            for fd in theirs + ours:
                os.close(fd)
            status = STATUS_NOT_FOUND if isinstance(e, FileNotFoundError) else STATUS_NOT_EXECUTABLE
            say(f"cannot run {self.command[0]}: {e.strerror or e}")
            now = stamp(time.time())
            self.capture.write({"type": fmt.SPAWN, "t": now, "pid": None, "error": str(e)})
            self.capture.write({"type": fmt.EXIT, "t": now, "code": None, "signal": None, "status": status})
            return status
        for fd in theirs:
            os.close(fd)
        return ours

    def run(self, recorder: str) -> int:
        start = time.time()
        self.capture.write(self.header(start, recorder))
        previous = {number: signal.signal(number, self.on_signal) for number in FORWARDED_SIGNALS}
        try:
            return self.record()
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def record(self) -> int:
        spawned = self.spawn()
        if isinstance(spawned, int):
            return spawned
        child_stdin, child_stdout, child_stderr = spawned
        assert self.child is not None
        self.capture.write({"type": fmt.SPAWN, "t": stamp(time.time()), "pid": self.child.pid})
        for number in self.pending_signals:
            self.forward(self.child.pid, number)
        self.pending_signals.clear()

        def client_disconnected() -> None:
            # The client closed the server's stdin: the child's stdin is closed, as it would have been.
            with contextlib.suppress(OSError):
                os.close(child_stdin)

        pumps = [
            Pump(fmt.STDIN, 0, child_stdin, self.capture, self.limit, at_eof=client_disconnected),
            Pump(fmt.STDOUT, child_stdout, 1, self.capture, self.limit),
            Pump(fmt.STDERR, child_stderr, 2, self.capture, self.limit),
        ]
        pumps[1].other, pumps[2].other = pumps[2], pumps[1]
        for pump in pumps:
            pump.start()
        returncode = self.child.wait()
        t_exit = time.time()
        deadline = t_exit + DRAIN_GRACE
        for pump in pumps[1:]:
            pump.join(max(0.0, deadline - time.time()))
        record: dict[str, Any] = {"type": fmt.EXIT, "t": stamp(t_exit)}
        if returncode >= 0:
            record.update(code=returncode, signal=None, status=returncode)
        else:
            number = -returncode
            record.update(code=None, signal=signal_name(number), status=128 + number)
        still_open = [pump.stream for pump in pumps[1:] if pump.is_alive()]
        if still_open:
            record["open_streams"] = still_open  # a grandchild still holds them: not waited for
        self.capture.write(record)
        return int(record["status"])


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def run(command: Sequence[str], target: str, *, recorder: str, limit: int = fmt.LINE_LIMIT) -> int:
    """Record COMMAND's stdio into ``target``; the exit status to leave with."""
    if not command:
        say("no command to run: give it after --, e.g. record --stdio -w cap.stdio.jsonl -- python server.py")
        return STATUS_WRAPPER_FAILED
    path = capture_path(target, time.time())
    try:
        fd = open_capture(path, directory=path != Path(target))
    except OSError as e:
        # Nothing has started yet: better a server that does not start, saying why, than one unrecorded.
        say(f"cannot write the capture {path}: {e.strerror or e}")
        return STATUS_WRAPPER_FAILED
    capture = CaptureWriter(fd, path)
    try:
        directory = path.parent if path != Path(target) else None
        return StdioRecorder(command, capture, limit=limit, directory=directory).run(recorder)
    finally:
        capture.close()


def _client_process() -> ProcessRecord | None:
    """The wrapper's parent, as addon/peer_lookup.py describes a process; None without psutil, or unreadable."""
    try:
        from mcp_blackbox.addon.peer_lookup import parent_process
    except ImportError:  # psutil missing: the capture says the client is unknown
        return None
    return parent_process()
