"""The stdio capture format: line encoding, the reader's tolerance of damage, and the wrapper's line splitting."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.addon.stdio_recorder import CaptureWriter, LineSplitter, Pump, Seen
from mcp_blackbox.analyzer.wire import stdio_capture as fmt

HEADER = {"format": fmt.FORMAT, "version": fmt.VERSION, "type": fmt.HEADER, "t": 1.0, "command": ["x"]}


def write(path: Path, *records: dict[str, Any] | bytes) -> Path:
    with open(path, "wb") as file:
        for record in records:
            file.write(record if isinstance(record, bytes) else json.dumps(record).encode() + b"\n")
    return path


def line(text: str, t: float = 2.0) -> dict[str, Any]:
    return {"type": fmt.LINE, "stream": fmt.STDOUT, "t": t, "t_first": t, "bytes": len(text.encode()), "text": text}


def read(path: Path) -> tuple[list[dict[str, Any]], fmt.CaptureReading]:
    reading = fmt.CaptureReading(str(path))
    return list(fmt.read_capture(path, reading)), reading


@pytest.mark.parametrize(
    ("data", "length", "expected"),
    [
        (b'{"id":1}', 8, {"bytes": 8, "text": '{"id":1}'}),
        (b"", 0, {"bytes": 0, "text": ""}),
        ("é€".encode(), 5, {"bytes": 5, "text": "é€"}),
        (b"\xff\xfeok", 4, {"bytes": 4, "b64": "//5vaw=="}),
        # A head cut inside a character drops its first bytes, and stays text.
        ("ab€".encode()[:3], 5, {"bytes": 5, "text": "ab", "truncated": True}),
        # A head that is not UTF-8 before its end is base64, whole.
        (b"\xffabc", 9, {"bytes": 9, "b64": "/2FiYw==", "truncated": True}),
    ],
)
def test_line_fields(data: bytes, length: int, expected: dict[str, Any]) -> None:
    fields = fmt.line_fields(data, length)
    assert fields == expected
    kept = fmt.line_payload(fields)
    assert data.startswith(kept) and len(data) - len(kept) <= 3


def test_a_capture_reads_back_with_its_header(tmp_path: Path) -> None:
    path = write(tmp_path / "c.stdio.jsonl", HEADER, line("a"), {"type": fmt.EXIT, "t": 3.0, "code": 0})
    records, reading = read(path)
    assert reading.header == HEADER and reading.problems == [] and not reading.torn_tail
    assert [r["type"] for r in records] == [fmt.LINE, fmt.EXIT] and reading.records_read == 2
    assert fmt.is_stdio_capture(path)


def test_a_torn_last_record_is_reported_and_the_rest_kept(tmp_path: Path) -> None:
    torn = json.dumps(line("the last one")).encode()[:25]
    path = write(tmp_path / "c.stdio.jsonl", HEADER, line("a"), line("b"), torn)
    records, reading = read(path)
    assert [r["text"] for r in records] == ["a", "b"]
    assert reading.torn_tail
    [problem] = reading.problems
    assert problem.line == 4 and problem.offset == path.stat().st_size - 25 and "torn last record" in problem.reason


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "c.stdio.jsonl", HEADER, json.dumps(line("last")).encode())
    records, reading = read(path)
    assert [r["text"] for r in records] == ["last"] and reading.problems == [] and not reading.torn_tail


def test_bad_lines_in_the_middle_are_skipped_and_said(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.stdio.jsonl",
        HEADER,
        line("a"),
        b"garbage\n",
        b"[1, 2]\n",
        b'{"type": "mystery"}\n',
        line("b"),
    )
    records, reading = read(path)
    assert [r["text"] for r in records] == ["a", "b"] and not reading.torn_tail
    assert [(p.line, p.reason) for p in reading.problems] == [
        (3, "not JSON"),
        (4, "not a record (a JSON object with a known type)"),
        (5, "not a record (a JSON object with a known type)"),
    ]


def test_another_version_is_read_and_said(tmp_path: Path) -> None:
    path = write(tmp_path / "c.stdio.jsonl", HEADER | {"version": 2}, line("a"))
    records, reading = read(path)
    assert len(records) == 1 and "format version 2" in reading.problems[0].reason


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"1234:5:flows,}",  # a tnetstring, as flow files start
        b'{"log": {"version": "1.2", "entries": []}}\n',  # HAR
        b'{"format": "mcp-blackbox-stdio", "type": "line"}\n',  # the right name on the wrong record
        b"not json\n",
    ],
)
def test_what_is_not_a_stdio_capture(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "other"
    path.write_bytes(content)
    assert not fmt.is_stdio_capture(path)
    records, reading = read(path)
    assert records == [] and reading.header is None
    if content:
        assert "no header record" in reading.problems[0].reason


def test_a_missing_file_is_not_a_capture(tmp_path: Path) -> None:
    assert not fmt.is_stdio_capture(tmp_path / "missing.stdio.jsonl")


def test_the_splitter_cuts_lines_across_reads_and_bounds_them(tmp_path: Path) -> None:
    path = tmp_path / "c.stdio.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps(HEADER).encode() + b"\n")
    capture = CaptureWriter(fd, path)
    splitter = LineSplitter(fmt.STDERR, capture, limit=8)
    splitter.feed(b"one\ntw", 1.0)
    splitter.feed(b"o\n", 2.0)
    splitter.feed(b"0123456789ABC", 3.0)
    splitter.feed(b"DEF\n\nhalf", 4.0)
    splitter.flush(5.0, unterminated=True)
    splitter.flush(6.0, unterminated=True)  # nothing pending: nothing recorded
    capture.close()

    records, reading = read(path)
    assert reading.problems == []
    got = [
        (r.get("text"), r["bytes"], r["t_first"], r["t"], r.get("truncated"), r.get("unterminated")) for r in records
    ]
    assert got == [
        ("one", 3, 1.0, 1.0, None, None),
        ("two", 3, 1.0, 2.0, None, None),
        ("01234567", 16, 3.0, 4.0, True, None),
        ("", 0, 4.0, 4.0, None, None),
        ("half", 4, 4.0, 5.0, None, True),
    ]
    assert all(r["stream"] == fmt.STDERR for r in records)


def test_a_line_waiting_in_the_other_pipe_is_timed_when_it_was_seen_there(tmp_path: Path) -> None:
    """Two threads read the child's stdout and stderr; the one the machine wakes late timed its line late (a
    stderr line written before the answer, 187 ms after it). Each pump, after its read, looks at the bytes
    waiting in the other's pipe: those get that time. Look-alikes: a line written after the look keeps its
    read's time, and a look counted for an earlier read is not used. Real pipes; the threads' steps are taken
    here, in the order a slow wake-up gives them."""
    path = tmp_path / "c.stdio.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps(HEADER).encode() + b"\n")
    capture = CaptureWriter(fd, path)
    (out_r, out_w), (err_r, err_w), sink = os.pipe(), os.pipe(), os.open(os.devnull, os.O_WRONLY)
    stdout, stderr = (Pump(fmt.STDOUT, out_r, sink, capture, 1024), Pump(fmt.STDERR, err_r, sink, capture, 1024))
    stdout.other, stderr.other = stderr, stdout

    os.write(err_w, b"warning: slow disk\n")  # the child logs, then answers
    os.write(out_w, b'{"answer": 1}\n')
    answered = time.time()
    assert stdout.pass_on(os.read(out_r, 4096), answered)
    time.sleep(0.2)  # the stderr thread wakes late; meanwhile the child logs again
    os.write(err_w, b"done\n")
    late = time.time()
    assert stderr.pass_on(os.read(err_r, 4096), late)

    # A look counted before a read that came and went: it speaks of bytes that read took, not of the next.
    os.write(err_w, b"after\n")
    stderr.seen = Seen(answered, 100, reads=0)
    last = time.time()
    assert stderr.pass_on(os.read(err_r, 4096), last)
    capture.close()
    for pipe_fd in (out_r, out_w, err_r, err_w, sink):
        os.close(pipe_fd)

    records, _ = read(path)
    timed = {r["text"]: (r["t_first"], r["t"]) for r in records}
    assert timed['{"answer": 1}'] == (round(answered, 6), round(answered, 6))
    early_first, early_end = timed["warning: slow disk"]
    assert early_first == early_end and answered <= early_end < answered + 0.05
    assert timed["done"] == (round(late, 6), round(late, 6)), "written after the look: its read's time"
    assert timed["after"] == (round(last, 6), round(last, 6)), "a look counted for an earlier read"
