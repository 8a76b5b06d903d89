"""The stdio loader and its rules on hand-written captures (the end-to-end tests record real processes:
tests/e2e/test_stdio_analysis.py): pairing across the pipes, server requests answered on stdin, a cancel,
a line cut in the capture, lines that one read brought, stable ids, the windowed analysis, and which stderr
lines show an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.calls.stdio_calls import exception_in
from mcp_blackbox.analyzer.model.stdio_session import StderrLine
from mcp_blackbox.analyzer.outputs.analysis import CallStream, analyze
from mcp_blackbox.analyzer.outputs.export import iter_records
from mcp_blackbox.analyzer.wire import stdio_capture as fmt

T0 = 1_800_000_000.0


class Capture:
    """A stdio capture written record by record, as the wrapper writes one."""

    def __init__(self, path: Path, command: list[str] | None = None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = [
            {"format": fmt.FORMAT, "version": fmt.VERSION, "type": fmt.HEADER, "t": T0,
             "command": command or ["python", "server.py"], "cwd": "/tmp", "pid": 100,
             "recorder": "mcp-blackbox test", "line_limit": fmt.LINE_LIMIT},
            {"type": fmt.SPAWN, "t": T0, "pid": 101},
        ]  # fmt: skip

    def line(self, stream: str, t: float, data: bytes | str | dict[str, Any], length: int | None = None) -> None:
        raw = json.dumps(data).encode() if isinstance(data, dict) else data.encode() if isinstance(data, str) else data
        self.records.append({"type": fmt.LINE, "stream": stream, "t": T0 + t, "t_first": T0 + t,
                             **fmt.line_fields(raw, length or len(raw))})  # fmt: skip

    def event(self, kind: str, t: float, **fields: Any) -> None:
        self.records.append({"type": kind, "t": T0 + t, **fields})

    def write(self) -> Path:
        """In time order, as the wrapper writes them (a pipe's lines in the order read)."""
        ordered = self.records[:2] + sorted(self.records[2:], key=lambda r: r["t"])
        self.path.write_text("".join(json.dumps(r) + "\n" for r in ordered))
        return self.path


def tool_call(n: int, tool: str) -> dict[str, Any]:
    arguments = {"n": n}  # each call its own arguments: no call repeats another (DUPLICATE_EXECUTION)
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def text_result(n: int, text: str = "ok") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "result": {"content": [{"type": "text", "text": text}]}}


def records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(analyze([path])))


def test_a_server_request_on_stdout_is_answered_on_stdin_and_a_cancel_ends_a_call(tmp_path: Path) -> None:
    cap = Capture(tmp_path / "a.stdio.jsonl")
    cap.line(fmt.STDIN, 0.0, tool_call(1, "summarize"))
    cap.line(fmt.STDOUT, 0.1, {"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}})
    cap.line(fmt.STDIN, 0.2, {"jsonrpc": "2.0", "id": 0, "result": {"role": "assistant", "content": {}}})
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}}
    cap.line(fmt.STDOUT, 0.25, log)  # sent while one request waited: that request's
    cap.line(fmt.STDOUT, 0.3, text_result(1, "summary"))
    cap.line(fmt.STDIN, 0.4, tool_call(2, "slow"))
    cap.line(fmt.STDOUT, 0.6, log)
    cap.line(fmt.STDIN, 0.9, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    cap.event(fmt.EOF, 1.0, stream=fmt.STDIN)
    cap.event(fmt.EXIT, 1.1, code=0, signal=None, status=0)
    by_method = {(r["method"], r["tool"]): r for r in records(cap.write())}
    sampling = by_method[("sampling/createMessage", None)]
    assert sampling["direction"] == "server->client" and sampling["outcome"] == "SUCCESS"
    assert by_method[("tools/call", "summarize")]["outcome"] == "TOOL_SUCCESS"
    slow = by_method[("tools/call", "slow")]
    assert slow["ending"]["server_sent"]["other_notifications"] == 1, "the log line sent while it alone waited"
    assert slow["outcome"] == "CANCELLED" and slow["ending"]["ended_by"] == "client-cancel", slow
    assert by_method[("notifications/cancelled", None)]["outcome"] == "ACCEPTED"


def test_a_line_cut_in_the_capture_is_read_from_its_head(tmp_path: Path) -> None:
    cap = Capture(tmp_path / "cut.stdio.jsonl")
    cap.line(fmt.STDIN, 0.0, tool_call(1, "big"))
    cap.line(fmt.STDIN, 0.0, tool_call(2, "big"))  # the same read: a microsecond apart
    head = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"' + b"x" * 100
    cap.line(fmt.STDOUT, 0.5, head, length=5_000_000)
    head = b'{"result":{"content":[{"type":"text","text":"' + b"y" * 100  # the id comes last: not in the head
    cap.line(fmt.STDOUT, 0.6, head, length=5_000_000)
    first, second = records(cap.write())
    assert first["jsonrpc_id"] == 1 and second["jsonrpc_id"] == 2, "the order of one read survives"
    for record in (first, second):
        assert record["outcome"] == "TOOL_SUCCESS" and record["flags"] == ["TRUNCATED_IN_CAPTURE"], record
    assert any("oldest waiting" in line for line in second["evidence"])


def test_ids_are_stable_and_the_windowed_analysis_equals_the_whole(tmp_path: Path) -> None:
    cap = Capture(tmp_path / "long.stdio.jsonl")
    for n in range(40):  # a call every 30 s for 20 minutes, one of them waiting 40 s (less than the window)
        t = n * 30.0
        cap.line(fmt.STDIN, t, tool_call(n, "echo"))
        if n != 5:
            cap.line(fmt.STDOUT, t + 0.01, text_result(n))
        if n in (3, 6):
            cap.line(fmt.STDERR, t + 0.005, "Traceback (most recent call last):")
    cap.line(fmt.STDOUT, 5 * 30.0 + 40, text_result(5))
    cap.event(fmt.EOF, 1300.0, stream=fmt.STDIN)
    cap.event(fmt.EXIT, 1300.1, code=0, signal=None, status=0)
    path = cap.write()
    whole = records(path)
    windowed = list(iter_records(CallStream([path], window=60.0)))
    assert windowed == whole
    assert [r["call_id"] for r in records(path)] == [r["call_id"] for r in whole], "ids do not change"
    beside = [r for r in iter_records(analyze([Path(__file__).parents[2] / "sample_captures" / "py-auth-retry.flows",
                                               path])) if r["carrier"] == "stdio"]  # fmt: skip
    assert [r["call_id"] for r in beside] == [r["call_id"] for r in whole], "whatever is loaded beside it"
    # Call 5 was still waiting when call 6's traceback was written: calls in flight at once share the lines.
    assert [r["jsonrpc_id"] for r in whole if "STDERR_DURING_CALL" in r["flags"]] == [3, 5, 6]
    assert whole[5]["duration_ms"] == pytest.approx(40_000, abs=1)


@pytest.mark.parametrize(
    ("line", "shows"),
    [
        ("Traceback (most recent call last):", True),
        ("FileNotFoundError: [Errno 2] No such file or directory: '/x'", True),
        ("Error: ENOENT: no such file or directory, open '/nonexistent/settings.json'", True),
        ("    at Object.openSync (node:fs:573:18)", True),
        ("    at file:///srv/server.mjs:40:24", True),
        ("\tat com.example.Tool.run(Tool.java:42)", True),
        ('Exception in thread "main" java.lang.IllegalStateException: no', True),
        ("panic: runtime error: index out of range [3] with length 2", True),
        ("thread 'main' panicked at src/main.rs:4:5:", True),
        ("INFO chatty: echoing 10 characters, no errors", False),
        ("ERROR could not reach the cache, using the database", False),
        ("WARNING: retrying after an Exception-free timeout", False),
        ("handled 3 errors today", False),
        ("[server] at 12:00:01 ready", False),
    ],
)
def test_what_shows_an_exception(line: str, shows: bool) -> None:
    found = exception_in((StderrLine(T0, T0, line),))
    assert (found is not None) == shows


def test_redact_refuses_a_stdio_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_blackbox.cli.main import main

    cap = Capture(tmp_path / "a.stdio.jsonl")
    cap.line(fmt.STDIN, 0.0, tool_call(1, "echo"))
    out = tmp_path / "shared.stdio.jsonl"
    assert main(["redact", str(cap.write()), "-o", str(out)]) == 2
    assert "is a stdio capture" in capsys.readouterr().err and not out.exists()


def test_a_json_line_that_is_no_json_rpc_is_an_invalid_envelope_of_the_waiting_call(tmp_path: Path) -> None:
    cap = Capture(tmp_path / "env.stdio.jsonl")
    cap.line(fmt.STDIN, 0.0, tool_call(1, "echo"))
    cap.line(fmt.STDOUT, 0.1, {"status": "working"})  # JSON, but no JSON-RPC message
    cap.line(fmt.STDOUT, 0.2, text_result(1))
    [record] = records(cap.write())
    assert record["outcome"] == "INVALID_ENVELOPE", record
    assert record["reason"].startswith("a line on stdout while the call waited is not JSON-RPC: neither")


def test_a_capture_cut_by_a_kill_or_holding_only_its_header(tmp_path: Path) -> None:
    cap = Capture(tmp_path / "killed.stdio.jsonl")
    cap.event(fmt.SIGNAL, 0.0, signal="SIGTERM", number=15, forwarded_to=None)  # before the spawn: kept aside
    cap.records.insert(1, cap.records.pop())
    cap.line(fmt.STDIN, 0.1, tool_call(1, "slow"))
    path = cap.write()
    with path.open("a") as torn:
        torn.write('{"type": "line", "stream": "stdout", "t": ')  # the record the SIGKILL cut
    analysis = analyze([path])
    [record] = analysis.calls
    assert record["outcome"] == "NO_RESPONSE" and record["ending"]["ended_by"] == "capture-end", record
    assert record["scope"] == "stdio:killed.stdio.jsonl:101"
    assert [p["reason"].split(":")[0] for p in analysis.read_problems] == ["line 5"]
    header_only = tmp_path / "empty.stdio.jsonl"
    header_only.write_text(json.dumps(Capture(header_only).records[0]) + "\n")
    assert analyze([header_only]).calls == [] and analyze([header_only]).read_problems == []
