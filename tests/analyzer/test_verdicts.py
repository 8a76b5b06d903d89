"""Every outcome and every flag of docs/ARCHITECTURE.md, on small captures built with mitmproxy's classes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.net import encoding

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import error, exchange, result, rpc, sse, text_result, tool_call, write

SESSION = {"mcp-session-id": "s1"}


def verdicts(tmp_path: Path, *flows: Any) -> list[dict[str, Any]]:
    return analyze([write(tmp_path, *flows)]).calls


def only(calls: list[dict[str, Any]], method: str = "tools/call") -> dict[str, Any]:
    (call,) = [c for c in calls if c["method"] == method]
    return call


def test_no_response(tmp_path: Path) -> None:
    call = only(verdicts(tmp_path, exchange(tool_call(1), status=None, error_message="connection refused")))
    assert (call["outcome"], call["layer"]) == ("NO_RESPONSE", "transport")
    assert "connection refused" in call["evidence"][-1]


def test_http_error_and_result_under_5xx(tmp_path: Path) -> None:
    calls = verdicts(
        tmp_path,
        exchange(tool_call(1), status=503, body=b"down", content_type="text/plain"),
        exchange(tool_call(2, "another_tool"), status=500, body=result(2, text_result())),
    )
    assert [(c["outcome"], c["flags"]) for c in calls] == [
        ("HTTP_ERROR", []),
        ("HTTP_ERROR", ["HTTP_STATUS_MISMATCH"]),
    ]
    assert calls[0]["http_status"] == 503


def test_jsonrpc_error_under_200_and_4xx(tmp_path: Path) -> None:
    calls = verdicts(
        tmp_path,
        exchange(tool_call(1), body=error(1, -32602)),
        exchange(tool_call(2), status=400, body=error(2, -32020, "header mismatch")),
    )
    assert [(c["outcome"], c["layer"], c["error_code"], c["flags"]) for c in calls] == [
        ("JSONRPC_ERROR", "protocol", -32602, []),
        ("JSONRPC_ERROR", "protocol", -32020, ["HTTP_STATUS_MISMATCH"]),
    ]


def test_error_without_id_answers_its_exchange(tmp_path: Path) -> None:
    call = only(verdicts(tmp_path, exchange(tool_call(7), status=400, body=error(None, -32700, "parse error"))))
    assert (call["outcome"], call["error_code"]) == ("JSONRPC_ERROR", -32700)


def test_stream_incomplete_2025_and_2026(tmp_path: Path) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    cut = {"ended": "upstream-error", "error": "peer closed connection", "event_times": [1.5], "chunks": []}
    old = exchange(
        tool_call(1, progressToken=1),
        body=sse(progress, ids=True),
        content_type="text/event-stream",
        request_headers={**SESSION, "mcp-protocol-version": "2025-11-25"},
        error_message="peer closed connection",
        stream=cut,
    )
    modern = exchange(
        tool_call(1, progressToken=1, **{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
        body=sse(progress),
        content_type="text/event-stream",
        stream=cut,
    )
    first, second = verdicts(tmp_path, old, modern)
    for call in (first, second):
        assert (call["outcome"], call["layer"]) == ("STREAM_INCOMPLETE", "transport")
        assert "1 events, no final response" in call["evidence"]
        assert call["sse_events"] == 1, "the progress event belongs to the call"
    assert "not resumed later in the capture" in first["evidence"]
    assert any("cancellation or loss" in e for e in second["evidence"])


CONNECT_FAILED = "Connect call failed ('127.0.0.1', 8000)"


def cut_stream(at: float) -> Any:
    """A 2025-11-25 tools/call whose event stream (one progress event, id 0) the server cut 1 s in."""
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    cut = {"ended": "upstream-error", "error": "peer closed connection", "event_times": [at + 0.5], "chunks": []}
    return exchange(
        tool_call(1, progressToken=1),
        body=sse(progress, ids=True),
        content_type="text/event-stream",
        request_headers={**SESSION, "mcp-protocol-version": "2025-11-25"},
        error_message="peer closed connection",
        stream=cut,
        at=at,
        duration=1.0,
    )


def resume(at: float, **kwargs: Any) -> Any:
    headers = {**SESSION, "mcp-protocol-version": "2025-11-25", "last-event-id": "0"}
    return exchange(None, method="GET", request_headers=headers, at=at, duration=0.01, **kwargs)


def test_refused_resume_attempts_are_named_by_the_cut_call(tmp_path: Path) -> None:
    """The client tried to resume (GET with Last-Event-ID) and the connection was refused: no message, so no
    pairing; the cut call's evidence says it was tried, when, and what refused it."""
    refused = [resume(t, status=None, error_message=CONNECT_FAILED) for t in (102.0, 103.5)]
    call = only(verdicts(tmp_path, cut_stream(100.0), *refused))
    assert call["outcome"] == "STREAM_INCOMPLETE", call
    assert "not resumed later in the capture" not in call["evidence"], "not without saying it was tried"
    assert call["evidence"][-1] == (
        f"resume tried 2 times (GET with Last-Event-ID 0), refused each time: 1.0 s after the stream ended: "
        f"{CONNECT_FAILED}; 2.5 s after the stream ended: {CONNECT_FAILED}; not resumed later in the capture"
    )


def test_a_resumed_stream_and_one_never_resumed_read_as_before(tmp_path: Path) -> None:
    answered = resume(102.0, body=sse(result(1, text_result()), ids=True), content_type="text/event-stream")
    resumed = only(verdicts(tmp_path, cut_stream(100.0), answered))
    assert resumed["outcome"] == "TOOL_SUCCESS" and resumed["flags"] == ["LATE_RESPONSE"], resumed
    assert "answer arrived on a resumed GET (Last-Event-ID 0)" in resumed["evidence"]
    never = only(verdicts(tmp_path, cut_stream(100.0)))
    assert never["evidence"][-1] == "not resumed later in the capture", never


def test_cancelled_stream(tmp_path: Path) -> None:
    calls = verdicts(
        tmp_path,
        exchange(
            tool_call(3),
            body=b"",
            content_type="text/event-stream",
            request_headers=SESSION,
            error_message="Client disconnected.",
        ),
        exchange(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
            status=202,
            body=b"",
            request_headers=SESSION,
        ),
    )
    assert (only(calls)["outcome"], only(calls)["layer"]) == ("CANCELLED", "interaction")
    assert only(calls, "notifications/cancelled")["outcome"] == "ACCEPTED"


def test_malformed_json_and_envelopes(tmp_path: Path) -> None:
    # Four different tools: independent calls, not retries of one another.
    calls = verdicts(
        tmp_path,
        exchange(tool_call(1, "t1"), body=b"{unclosed"),
        exchange(tool_call(2, "t2"), body={**result(2, text_result()), "error": {"code": 1, "message": "x"}}),
        exchange(tool_call(3, "t3"), body=result(99, text_result())),
        exchange(tool_call(4, "t4"), body={"jsonrpc": "1.0", "id": 4, "result": text_result()}),
    )
    by_id = {c["jsonrpc_id"]: c for c in calls}
    assert by_id[1]["outcome"] == "MALFORMED_JSON"
    assert by_id[2]["outcome"] == "INVALID_ENVELOPE" and "both result and error" in by_id[2]["evidence"][-1]
    assert by_id[3]["outcome"] == "INVALID_ENVELOPE" and "does not match request id 3" in by_id[3]["evidence"][-1]
    assert by_id[99]["flags"] == ["ORPHAN_RESPONSE"]
    assert by_id[4]["outcome"] == "INVALID_ENVELOPE"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"content": "not-an-array"}, "content is a string, not an array"),
        ({"content": [], "isError": "yes"}, "isError is a string, not a boolean"),
        ({"content": [], "resultType": "partial"}, "unknown resultType"),
        ([1, 2], "not an object"),
    ],
)
def test_invalid_tool_result(tmp_path: Path, value: Any, why: str) -> None:
    call = only(verdicts(tmp_path, exchange(tool_call(1), body=result(1, value))))
    assert (call["outcome"], call["layer"]) == ("INVALID_TOOL_RESULT", "protocol")
    assert why in call["evidence"][-1]


def test_input_required_tool_error_success(tmp_path: Path) -> None:
    calls = verdicts(
        tmp_path,
        exchange(tool_call(1), body=result(1, {"resultType": "input_required", "inputRequests": {}})),
        exchange(tool_call(2), body=result(2, text_result("nope", isError=True))),
        exchange(tool_call(3), body=result(3, text_result(resultType="complete"))),
        exchange(tool_call(4), body=result(4, text_result()), request_headers={"mcp-protocol-version": "2026-07-28"}),
        exchange(rpc(5, "resources/list"), body=result(5, {"resources": []})),
        exchange(tool_call(6), body=result(6, text_result()), request_headers={"mcp-protocol-version": "2025-11-25"}),
    )
    assert [(c["outcome"], c["layer"]) for c in calls] == [
        ("INPUT_REQUIRED", "interaction"),
        ("TOOL_ERROR", "application"),
        ("TOOL_SUCCESS", "application"),
        ("TOOL_SUCCESS", "application"),
        ("SUCCESS", "application"),
        ("TOOL_SUCCESS", "application"),
    ]
    assert calls[1]["error_message"] == "nope"
    assert calls[3]["evidence"][-1] == "tool result complete (no resultType: complete)"
    assert calls[5]["evidence"][-1] == "tool result complete", "2025 versions have no resultType to miss"


def test_accepted_notification(tmp_path: Path) -> None:
    call = only(
        verdicts(tmp_path, exchange({"jsonrpc": "2.0", "method": "notifications/initialized"}, status=202, body=b"")),
        "notifications/initialized",
    )
    assert (call["outcome"], call["layer"], call["jsonrpc_id"]) == ("ACCEPTED", "transport", None)


def test_soft_error_and_empty_result_flags(tmp_path: Path) -> None:
    calls = verdicts(
        tmp_path,
        exchange(tool_call(1), body=result(1, text_result(json.dumps({"code": "E_STOCK", "message": "missing"})))),
        exchange(tool_call(2), body=result(2, {"content": []})),
        exchange(tool_call(3), body=result(3, text_result("all good"))),
    )
    assert [c["flags"] for c in calls] == [["SUSPECT_SOFT_ERROR"], ["EMPTY_RESULT"], []]
    assert all(c["outcome"] == "TOOL_SUCCESS" for c in calls)


def test_output_schema_violation_uses_tools_list(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    tools = {"tools": [{"name": "add", "inputSchema": {"type": "object"}, "outputSchema": schema}]}
    calls = verdicts(
        tmp_path,
        exchange(rpc(1, "tools/list"), body=result(1, tools)),
        exchange(tool_call(2, "add"), body=result(2, text_result(structuredContent={"sum": 5}))),
        exchange(tool_call(3, "add"), body=result(3, text_result(structuredContent={"sum": "5"}))),
        exchange(tool_call(4, "add"), body=result(4, text_result())),
    )
    assert [c["flags"] for c in calls[1:]] == [[], ["OUTPUT_SCHEMA_VIOLATION"], ["OUTPUT_SCHEMA_VIOLATION"]]
    assert "$.sum: '5' is not of type 'integer'" in calls[2]["evidence"][-1], "the flag's reason is the last word"


def test_duplicate_response_and_reused_id(tmp_path: Path) -> None:
    answers = sse(result(1, text_result("a")), result(1, text_result("b")))
    calls = verdicts(
        tmp_path,
        exchange(tool_call(1), body=answers, content_type="text/event-stream", request_headers=SESSION),
        exchange(tool_call(1), body=result(1, text_result()), request_headers=SESSION),
    )
    assert calls[0]["flags"] == ["DUPLICATE_RESPONSE"]
    assert "ID_REUSED" in calls[1]["flags"]


def test_late_response_on_resumed_get(tmp_path: Path) -> None:
    calls = verdicts(
        tmp_path,
        exchange(
            tool_call(1),
            body=b"id: 0\ndata:\n\n",
            content_type="text/event-stream",
            request_headers=SESSION,
            error_message="peer closed connection",
        ),
        exchange(
            None,
            method="GET",
            body=sse(result(1, text_result("done")), ids=True),
            content_type="text/event-stream",
            request_headers={**SESSION, "last-event-id": "0"},
        ),
    )
    call = only(calls)
    assert (call["outcome"], call["flags"]) == ("TOOL_SUCCESS", ["LATE_RESPONSE"])
    assert len(call["exchanges"]) == 2


def test_ids_are_scoped_by_session_and_direction(tmp_path: Path) -> None:
    """Id 1 in two sessions, and a server request with id 1 beside a client request with id 1."""
    elicit = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {"message": "name?"}}
    calls = verdicts(
        tmp_path,
        exchange(
            tool_call(1),
            body=sse(elicit, result(1, text_result("hi Ada"))),
            content_type="text/event-stream",
            request_headers={"mcp-session-id": "A"},
        ),
        exchange(
            result(1, {"action": "accept", "content": {"name": "Ada"}}),
            status=202,
            body=b"",
            request_headers={"mcp-session-id": "A"},
        ),
        exchange(tool_call(1), body=error(1), request_headers={"mcp-session-id": "B"}),
        exchange(tool_call("1"), body=result("1", text_result()), request_headers={"mcp-session-id": "B"}),
    )
    outcomes = {(c["scope"], c["direction"], c["method"], repr(c["jsonrpc_id"])): c["outcome"] for c in calls}
    assert outcomes == {
        ("session:A", "client->server", "tools/call", "1"): "TOOL_SUCCESS",
        ("session:A", "server->client", "elicitation/create", "1"): "SUCCESS",
        ("session:B", "client->server", "tools/call", "1"): "JSONRPC_ERROR",
        ("session:B", "client->server", "tools/call", "'1'"): "TOOL_SUCCESS",
    }
    assert not any(c["flags"] for c in calls), "1 and '1' are different ids"


def test_batches_and_content_encodings(tmp_path: Path) -> None:
    batch = [tool_call(1), tool_call(2)]
    answers = json.dumps([result(1, text_result()), error(2)]).encode()
    flows = [exchange(batch, body=answers, request_headers=SESSION)]
    for n, (coding, compress) in enumerate(
        [
            ("gzip", gzip.compress),
            ("br", lambda b: encoding.encode(b, "br")),
            ("zstd", lambda b: encoding.encode(b, "zstd")),
        ],
        start=10,
    ):
        flows.append(
            exchange(
                tool_call(n),
                body=compress(json.dumps(result(n, text_result())).encode()),
                response_headers={"content-encoding": coding},
            )
        )
    latin = json.dumps(result(20, text_result("café"))).encode("latin-1")
    flows.append(exchange(tool_call(20), body=latin, content_type="application/json; charset=latin-1"))
    calls = verdicts(tmp_path, *flows)
    assert [(c["jsonrpc_id"], c["outcome"]) for c in calls] == [
        (1, "TOOL_SUCCESS"),
        (2, "JSONRPC_ERROR"),
        (10, "TOOL_SUCCESS"),
        (11, "TOOL_SUCCESS"),
        (12, "TOOL_SUCCESS"),
        (20, "TOOL_SUCCESS"),
    ]


def test_progress_and_log_notifications_attach_to_their_call(tmp_path: Path) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}}
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    analysis = analyze(
        [
            write(
                tmp_path,
                exchange(
                    tool_call(1, progressToken="t"),
                    body=sse(progress, log, result(1, text_result())),
                    content_type="text/event-stream",
                    request_headers=SESSION,
                ),
            )
        ]
    )
    (call,) = analysis.call_objects
    assert [n.method for n in call.notifications] == ["notifications/progress", "notifications/message"]
    assert analysis.calls[0]["sse_events"] == 3


def test_an_error_answering_a_notification_is_that_notifications_row_never_a_phantom(tmp_path: Path) -> None:
    """Issue 21: a 404 "Session not found" on notifications/initialized was an HTTP_ERROR row and a second,
    phantom INVALID_ENVELOPE + ORPHAN_RESPONSE row for the same body. A 200 carrying an error is said too."""
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    not_found = {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "Session not found"}}
    session = {"mcp-session-id": "s1"}
    capture = write(
        tmp_path,
        exchange(rpc(0, "initialize", {"protocolVersion": "2025-11-25"}), body=result(0, {}),
                 response_headers=session, at=100.0),
        exchange(initialized, status=404, body=not_found, request_headers=session, at=100.1),
        exchange(initialized, status=200, body={**not_found, "id": None}, request_headers=session, at=100.2),
    )  # fmt: skip
    calls = analyze([capture]).calls
    assert [(c["method"], c["outcome"]) for c in calls] == [
        ("initialize", "SUCCESS"),
        ("notifications/initialized", "HTTP_ERROR"),
        ("notifications/initialized", "JSONRPC_ERROR"),
    ]
    assert "Session not found" in calls[1]["evidence"][-1] and calls[2]["error_code"] == -32600
    assert not [c for c in calls if "ORPHAN_RESPONSE" in c["flags"]]
