"""The stdio capture format: what ``mcp-blackbox record --stdio`` writes and how to read it back.

One file per run of the server, JSON Lines: a header record first, then one record per line of stdin,
stdout or stderr and per event (spawn, end of a stream, a failed write, a signal, the exit), each
written whole, with its newline, in one ``write`` as it happens. A recorder killed outright leaves at
most one torn record, the last; :func:`read_capture` reports it and keeps everything before it.

The wrapper (``addon/stdio_recorder.py``) and the analyzer both import this module, so the names
below are the only spelling of the format. docs/ARCHITECTURE.md, "stdio capture format", is its
reference.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

FORMAT: Final = "mcp-blackbox-stdio"
VERSION: Final = 1
SUFFIX: Final = ".stdio.jsonl"
# A line is kept whole up to this many bytes; past it, its head only (the pass-through is never cut).
LINE_LIMIT: Final = 1 << 20

# Streams, named from the server process's side: stdin is what the client sent, stdout what the server
# answered, stderr the server's log.
STDIN: Final = "stdin"
STDOUT: Final = "stdout"
STDERR: Final = "stderr"
Stream = Literal["stdin", "stdout", "stderr"]
STREAMS: Final[tuple[Stream, ...]] = (STDIN, STDOUT, STDERR)

# Record types.
HEADER: Final = "header"
SPAWN: Final = "spawn"
LINE: Final = "line"
EOF: Final = "eof"
WRITE_FAILED: Final = "write_failed"
SIGNAL: Final = "signal"
EXIT: Final = "exit"
RECORD_TYPES: Final = frozenset({HEADER, SPAWN, LINE, EOF, WRITE_FAILED, SIGNAL, EXIT})

# A header is found within this many bytes of the start, or the file is not a stdio capture.
HEADER_SCAN: Final = 64 * 1024


def line_fields(data: bytes, length: int) -> dict[str, Any]:
    """A line's payload fields: ``bytes`` (its length without the newline), then ``text`` or ``b64``.

    ``data`` is what was kept of it (all of it, or the head up to :data:`LINE_LIMIT`). Text when it is
    UTF-8, so that a capture reads as what was sent; base64 otherwise, so no byte is lost or replaced.
    A head cut inside a UTF-8 sequence loses those few bytes rather than falling back to base64.
    """
    truncated = len(data) < length
    fields: dict[str, Any] = {"bytes": length}
    try:
        fields["text"] = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if truncated and e.start >= len(data) - 3 and e.reason == "unexpected end of data":
            fields["text"] = data[: e.start].decode("utf-8")
        else:
            fields["b64"] = base64.b64encode(data).decode("ascii")
    if truncated:
        fields["truncated"] = True
    return fields


def line_payload(record: dict[str, Any]) -> bytes:
    """The bytes of a line record as kept (its head when ``truncated``), without the newline."""
    if "b64" in record:
        return base64.b64decode(record["b64"], validate=True)
    text = record.get("text")
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else b""


def is_header(record: object) -> bool:
    return isinstance(record, dict) and record.get("format") == FORMAT and record.get("type") == HEADER


def is_stdio_capture(path: str | Path) -> bool:
    """Whether the file starts with a stdio capture's header: how the analyzer tells it from a flow file."""
    try:
        with open(path, "rb") as file:
            first = file.read(HEADER_SCAN).split(b"\n", 1)[0]
    except OSError:
        return False
    if not first.startswith(b"{"):
        return False  # flow files start with a tnetstring length, HAR with '{' too: parsed below
    try:
        return is_header(json.loads(first))
    except ValueError:
        return False


@dataclass(frozen=True)
class ReadProblem:
    """A line of the capture that is not a record: ``line`` is 1-based, ``offset`` its first byte."""

    line: int
    offset: int
    reason: str


@dataclass
class CaptureReading:
    """What :func:`read_capture` found besides the records: the header and the problems, filled as it goes."""

    path: str
    header: dict[str, Any] | None = None
    problems: list[ReadProblem] = field(default_factory=list)
    records_read: int = 0
    # A last line without its newline that is not a record: the recorder was stopped while writing it.
    torn_tail: bool = False


def read_capture(path: str | Path, reading: CaptureReading | None = None) -> Iterator[dict[str, Any]]:
    """The records after the header, in file order, streamed.

    The header is put in ``reading.header``; a line that is not a JSON object with a known ``type`` is
    skipped and said in ``reading.problems`` (a torn last line sets ``torn_tail`` too), and the rest is
    kept. A file whose first line is not a header yields nothing and says so.
    """
    reading = reading if reading is not None else CaptureReading(str(path))
    with open(path, "rb") as file:
        lines = enumerate(file, start=1)
        first = next(lines, None)
        if first is None or not _take_header(first[1], reading):
            return
        offset = len(first[1])
        for number, raw in lines:
            start, offset = offset, offset + len(raw)
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if isinstance(record, dict) and record.get("type") in RECORD_TYPES:
                reading.records_read += 1
                yield record
                continue
            reading.problems.append(ReadProblem(number, start, _why_not_a_record(raw, record, reading)))


def _take_header(raw: bytes, reading: CaptureReading) -> bool:
    """The first line into ``reading.header``; False, with the problem said, when it is no header. A version
    this reader does not know is said, and the capture read anyway."""
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    if not is_header(record):
        reading.problems.append(ReadProblem(1, 0, f"not a {FORMAT} capture: no header record"))
        return False
    assert isinstance(record, dict)
    if record.get("version") != VERSION:
        reading.problems.append(
            ReadProblem(1, 0, f"format version {record.get('version')!r}; this reader knows {VERSION}")
        )
    reading.header = record
    return True


def _why_not_a_record(raw: bytes, record: Any, reading: CaptureReading) -> str:
    """Why a line after the header is no record; a last line without its newline is torn (said in ``reading``)."""
    if not raw.endswith(b"\n"):
        reading.torn_tail = True
        return f"torn last record ({len(raw)} bytes without a newline): the recorder stopped mid-write"
    if record is None:
        return "not JSON"
    return "not a record (a JSON object with a known type)"
