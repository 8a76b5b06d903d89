"""A body cut before its declared length is a transfer cut (transport), not bad JSON from the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.analyzer.flows import exchange, tool_call, write

CUT = (
    "HTTP/1 protocol error: peer closed connection without sending complete message body "
    "(received 0 bytes, expected 234)"
)


def only_call(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    (call,) = analyze([str(write(tmp_path, exchange(tool_call(1, "echo"), **kwargs)))]).calls
    return call


def test_headers_then_nothing_is_a_cut_transfer(tmp_path: Path) -> None:
    call = only_call(tmp_path, body=b"", error_message=CUT)
    assert call["outcome"] == "STREAM_INCOMPLETE" and call["layer"] == "transport"
    assert call["evidence"][-1] == f"the response body was cut: {CUT}"
    assert call["ending"]["ended_by"] == "server-cut" and call["reason"].startswith("no answer: server-cut after ")


def test_part_of_a_json_answer_then_an_error_is_a_cut_transfer(tmp_path: Path) -> None:
    call = only_call(
        tmp_path, body=b'{"jsonrpc": "2.0", "id": 1, "resu', error_message=CUT.replace("0 bytes", "33 bytes")
    )
    assert call["outcome"] == "STREAM_INCOMPLETE"


def test_the_same_bytes_without_a_transfer_error_are_bad_json(tmp_path: Path) -> None:
    """The look-alike: a server that wrote a broken body and closed it properly."""
    call = only_call(tmp_path, body=b'{"jsonrpc": "2.0", "id": 1, "resu')
    assert call["outcome"] == "MALFORMED_JSON"


def test_a_complete_answer_with_a_late_error_keeps_its_answer(tmp_path: Path) -> None:
    """The answer arrived whole; a connection error after it does not undo it."""
    body = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "ok"}]}}
    call = only_call(tmp_path, body=body, error_message="peer closed connection")
    assert call["outcome"] == "TOOL_SUCCESS"
