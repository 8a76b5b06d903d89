"""What ends an attempt, what is negotiation, and evidence that says only what is true.

- A cancel ends the attempt: CANCELLED before NO_RESPONSE and STREAM_INCOMPLETE, the retry window measured
  from the cancel, a result that came after it kept and flagged; a protocol fault made before it stays.
- Any refusal of a ``server/discover`` probe, then ``initialize``, is protocol-fallback; a later probe from a
  second session starts a negotiation of its own instead of retrying the first.
- Evidence: no "now in a session" for stateless calls, no "may have run twice" for what runs no tool, no
  HTTP_STATUS_MISMATCH for the status 2026-07-28 gives an error, no LATE_RESPONSE for a planned reconnect,
  and a flag's reason as the call's last line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import error, exchange, result, rpc, sse, text_result, tool_call, write
from tests.analyzer.test_retries import TOOLS, session

DISCOVER = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
AGENT = {"user-agent": "client/1"}  # real clients name themselves; the lineage of stateless calls follows it


def run(tmp_path: Path, *flows: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    analysis = analyze([write(tmp_path, *flows)])
    return analysis.calls, [g.record() for g in analysis.retry_groups]


def cancel(request_id: Any, *, at: float, scope: str = "A") -> Any:
    notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    return exchange(notice, status=202, body=b"", request_headers=session(scope), at=at, duration=0.01)


def write_call(rpc_id: Any, *, at: float, scope: str = "A", **kw: Any) -> Any:
    message = tool_call(rpc_id, "write_record")
    message["params"]["arguments"] = {"key": "k1"}
    return exchange(message, request_headers=session(scope), at=at, **kw)


def calls_of(records: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [r for r in records if r["method"] == method]


# ---------------------------------------------------------------- cancel


def test_cancel_before_any_response_is_cancelled_and_ends_the_attempt(tmp_path: Path) -> None:
    """A client times out and cancels; the POST's connection closes 0.8 s later, after the re-send began."""
    records, groups = run(
        tmp_path,
        exchange(rpc(0, "tools/list"), body=TOOLS, request_headers=session("A"), at=100.0),
        write_call(1, at=101.0, status=None, error_message="connection closed", duration=10.8),
        cancel(1, at=111.0),
        write_call(2, at=111.5, body=result(2, text_result("done"))),
    )
    first, again = calls_of(records, "tools/call")
    assert first["outcome"] == "CANCELLED" and first["layer"] == "interaction"
    assert first["t_end"] == 111.0 and first["duration_ms"] == 10_000.0, "the cancel ends the attempt"
    assert any("notifications/cancelled 10.00 s after the request" in line for line in first["evidence"])
    (group,) = groups
    assert group["members"] == [first["call_id"], again["call_id"]]
    assert group["origin"] == "app-retry" and again["flags"] == ["DUPLICATE_EXECUTION", "UNSAFE_RETRY"]


def test_result_after_the_cancel_is_kept_and_flagged(tmp_path: Path) -> None:
    records, _ = run(
        tmp_path,
        write_call(1, at=100.0, body=sse(result(1, text_result("done"))), content_type="text/event-stream",
                   duration=5.0),
        cancel(1, at=102.0),
    )  # fmt: skip
    (call,) = calls_of(records, "tools/call")
    assert call["outcome"] == "CANCELLED" and call["flags"] == ["ANSWERED_AFTER_CANCEL"]
    assert call["t_end"] == 102.0
    assert "the server did the work anyway" in call["evidence"][-1]


def test_answer_before_the_cancel_stands(tmp_path: Path) -> None:
    records, _ = run(tmp_path, write_call(1, at=100.0, body=result(1, text_result("done"))), cancel(1, at=101.0))
    (call,) = calls_of(records, "tools/call")
    assert call["outcome"] == "TOOL_SUCCESS" and call["flags"] == []


def test_protocol_fault_before_the_cancel_stays_the_servers_fault(tmp_path: Path) -> None:
    """Look-alike: the server answered under a wrong id, then the waiting client gave up and cancelled."""
    records, _ = run(tmp_path, write_call(1, at=100.0, body=result(1001, text_result("x"))), cancel(1, at=108.0))
    call = next(r for r in calls_of(records, "tools/call") if r["jsonrpc_id"] == 1)
    assert call["outcome"] == "INVALID_ENVELOPE"


# ---------------------------------------------------------------- negotiation


def test_probe_refused_with_429_then_initialize_is_protocol_fallback(tmp_path: Path) -> None:
    records, groups = run(
        tmp_path,
        exchange(rpc(1, "server/discover", DISCOVER), status=429, body=b"slow down", content_type="text/plain",
                 request_headers=AGENT, at=100.0, duration=0.05),
        exchange(rpc(1, "initialize", {"protocolVersion": "2025-11-25"}), body=result(1, {}), request_headers=AGENT,
                 at=100.2),
    )  # fmt: skip
    (group,) = groups
    assert group["origin"] == "protocol-fallback" and group["failure_retry"] is False
    assert group["members"] == [r["call_id"] for r in records]


def test_two_sessions_each_negotiate_and_are_not_one_chain(tmp_path: Path) -> None:
    """A bridge's throw-away test session, then the real one: both refuse the probe, both initialize."""

    def negotiation(at: float, scope: str) -> list[Any]:
        refused = error(1, -32601, "Method not found")
        return [
            exchange(rpc(1, "server/discover", DISCOVER), status=400, body=refused, request_headers=AGENT, at=at,
                     duration=0.05),
            exchange(rpc(1, "initialize", {"protocolVersion": "2025-11-25"}), body=result(1, {}), at=at + 0.1,
                     request_headers=AGENT, response_headers={"mcp-session-id": scope}),
        ]  # fmt: skip

    records, groups = run(tmp_path, *negotiation(100.0, "test"), *negotiation(101.0, "real"))
    assert [g["origin"] for g in groups] == ["protocol-fallback", "protocol-fallback"]
    assert [len(g["members"]) for g in groups] == [2, 2]
    assert not any(r["retry_origin"] == "app-retry" for r in records)


# ---------------------------------------------------------------- evidence


def test_stateless_retry_evidence_says_stateless(tmp_path: Path) -> None:
    message = tool_call(1, "lookup")
    _, groups = run(
        tmp_path,
        exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=AGENT, at=100.0),
        exchange(message, body=result(1, text_result("ok")), request_headers=AGENT, at=102.0),
    )
    (group,) = groups
    assert "no session (stateless)" in group["evidence"][0] and "now in a session" not in group["evidence"][0]


def test_initialize_retried_after_503_never_may_have_run_twice(tmp_path: Path) -> None:
    init = rpc(0, "initialize", {"protocolVersion": "2025-11-25"})
    _, groups = run(
        tmp_path,
        exchange(init, status=503, body=b"busy", content_type="text/plain", request_headers=AGENT, at=100.0),
        exchange(init, body=result(0, {}), request_headers=AGENT, at=102.0),
    )
    (group,) = groups
    assert group["may_have_run_twice"] is False and group["safety"] == "safe"


def test_2026_error_with_its_own_status_is_no_mismatch(tmp_path: Path) -> None:
    headers = {"mcp-protocol-version": "2026-07-28"}
    records, _ = run(
        tmp_path,
        exchange(tool_call(1, "add"), status=400, body=error(1, -32602, "bad"), request_headers=headers, at=1.0),
        exchange(tool_call(2, "add"), status=400, body=error(2, -32603, "oops"), request_headers=headers, at=2.0),
        exchange(tool_call(3, "add"), status=400, body=error(3, -32602, "bad"), at=3.0),
    )
    assert [r["flags"] for r in records] == [[], ["HTTP_STATUS_MISMATCH"], ["HTTP_STATUS_MISMATCH"]]
    assert "HTTP 400 is the status 2026-07-28 gives error -32602" in records[0]["evidence"]


def test_planned_reconnect_is_not_late(tmp_path: Path) -> None:
    """The server closed the stream cleanly after a priming event; the answer came on the reconnect."""
    clean = {"ended": "complete", "error": None, "event_times": None}
    cut = {"ended": "upstream-error", "error": "peer closed", "event_times": None}

    def attempt(rpc_id: int, at: float, stream: dict[str, Any]) -> list[Any]:
        post = exchange(
            tool_call(rpc_id, f"lookup{rpc_id}"),
            body=b"id: e1\ndata: \nretry: 500\n\n",
            content_type="text/event-stream",
            request_headers=session("A"),
            stream=stream,
            at=at,
        )
        get = exchange(
            None,
            method="GET",
            body=sse(result(rpc_id, text_result("ok")), ids=True),
            content_type="text/event-stream",
            request_headers=session("A", **{"last-event-id": "e1"}),
            at=at + 0.6,
        )
        return [post, get]  # fmt: skip

    records, _ = run(tmp_path, *attempt(1, 100.0, clean), *attempt(2, 110.0, cut))
    planned, resumed = calls_of(records, "tools/call")
    assert planned["outcome"] == resumed["outcome"] == "TOOL_SUCCESS"
    assert planned["flags"] == [] and any("planned reconnect" in line for line in planned["evidence"])
    assert resumed["flags"] == ["LATE_RESPONSE"]


def test_a_flag_is_explained_by_the_last_line(tmp_path: Path) -> None:
    records, _ = run(tmp_path, exchange(tool_call(1, "x"), body=result(1, text_result("Error: disk full"))))
    (call,) = records
    assert call["flags"] == ["SUSPECT_SOFT_ERROR"]
    assert "reads like an error" in call["evidence"][-1]


def test_a_probe_again_after_403_without_new_credentials_is_no_auth_retry(tmp_path: Path) -> None:
    """A probe refused for a foreign Origin (403), then the client's next, unconditional probe."""
    probe = rpc(1, "server/discover", DISCOVER)
    _, groups = run(
        tmp_path,
        exchange(probe, status=403, body=b"forbidden origin", content_type="text/plain",
                 request_headers={**AGENT, "origin": "http://evil.example"}, at=100.0, duration=0.01),
        exchange(probe, body=result(1, {"supportedVersions": ["2026-07-28"]}), request_headers=AGENT, at=100.5),
    )  # fmt: skip
    assert all(g["origin"] != "auth-retry" for g in groups)


# ---------------------------------------------------------------- gateways


def gateway_attempt(server: str, at: float, *, status: int = 200, duration: float = 0.01) -> Any:
    """Recorded behind the gateway: its connection, its X-Request-ID, the client's body."""
    message = tool_call(7, "write_record")
    message["params"]["arguments"] = {"key": "k1"}
    body = result(7, text_result("done")) if status == 200 else b"upstream busy"
    kind = "application/json" if status == 200 else "text/plain"
    headers = {**AGENT, "x-request-id": "req-42"}
    return exchange(message, status=status, body=body, content_type=kind, request_headers=headers, server=server,
                    at=at, duration=duration)  # fmt: skip


def test_gateway_re_send_after_a_503_to_another_server_is_proxy(tmp_path: Path) -> None:
    _, groups = run(
        tmp_path,
        gateway_attempt("http://127.0.0.1:8001", 100.0, status=503),
        gateway_attempt("http://127.0.0.1:8002", 100.013),
    )
    (group,) = groups
    assert (group["origin"], group["confidence"]) == ("proxy", "high")
    assert "same X-Request-ID" in group["evidence"][0]


def test_gateway_re_send_after_its_upstream_timeout_is_proxy(tmp_path: Path) -> None:
    """Behind the gateway, its timeout shows as an attempt that got no response: it gave up on the upstream."""
    message = tool_call(7, "write_record")
    message["params"]["arguments"] = {"key": "k1"}
    timed_out = exchange(message, status=None, error_message="connection closed by the client",
                         request_headers={**AGENT, "x-request-id": "req-42"}, server="http://127.0.0.1:8001",
                         at=100.0, duration=60.0)  # fmt: skip
    _, groups = run(tmp_path, timed_out, gateway_attempt("http://127.0.0.1:8002", 160.01))
    (group,) = groups
    assert group["origin"] == "proxy"


def test_same_request_id_after_a_success_is_no_retry(tmp_path: Path) -> None:
    _, groups = run(
        tmp_path, gateway_attempt("http://127.0.0.1:8001", 100.0), gateway_attempt("http://127.0.0.1:8002", 101.0)
    )
    assert groups == []


def test_same_request_id_after_a_401_with_new_credentials_is_auth_retry_not_proxy(tmp_path: Path) -> None:
    """Tracing middleware keeps one X-Request-ID per operation; the client re-sends with a token."""
    message = tool_call(7, "write_record")
    first = exchange(
        message,
        status=401,
        body=b"",
        content_type="text/plain",
        request_headers={**AGENT, "x-request-id": "op-1"},
        at=100.0,
        duration=0.01,
    )
    again = exchange(message, body=result(7, text_result("done")), at=100.2, duration=0.01,
                     request_headers={**AGENT, "x-request-id": "op-1", "authorization": "Bearer t"})  # fmt: skip
    again.client_conn = first.client_conn
    _, groups = run(tmp_path, first, again)
    (group,) = groups
    assert group["origin"] == "auth-retry"


def test_same_request_id_minutes_later_is_no_gateway_copy(tmp_path: Path) -> None:
    _, groups = run(
        tmp_path,
        gateway_attempt("http://127.0.0.1:8001", 100.0, status=503),
        gateway_attempt("http://127.0.0.1:8001", 340.0),
    )
    assert all(g["origin"] != "proxy" for g in groups)


def test_no_response_then_ran_may_have_run_twice(tmp_path: Path) -> None:
    records, groups = run(
        tmp_path,
        exchange(rpc(0, "tools/list"), body=TOOLS, request_headers=session("A"), at=99.0, duration=0.01),
        write_call(1, at=100.0, status=None, error_message="Server disconnected", duration=0.5),
        write_call(2, at=101.0, body=result(2, text_result("done"))),
    )
    (group,) = groups
    assert group["may_have_run_twice"] is True
    assert calls_of(records, "tools/call")[1]["flags"] == ["DUPLICATE_EXECUTION", "UNSAFE_RETRY"]


def test_an_error_on_an_open_event_stream_is_an_answer_not_a_stream_event(tmp_path: Path) -> None:
    stream = sse(error(5, -32603, "boom"))
    analysis = analyze([write(tmp_path, exchange(None, method="GET", body=stream, content_type="text/event-stream",
                                                 request_headers=session("A"), at=1.0))])  # fmt: skip
    assert analysis.stream_events == []
    assert [c["flags"] for c in analysis.calls] == [["ORPHAN_RESPONSE"]]


def test_a_fault_that_came_after_the_cancel_is_cancelled(tmp_path: Path) -> None:
    """JSON mode: the client cancels at +4 s; an empty 200 comes at +6 s, when the client had given up."""
    late_empty = write_call(1, at=100.0, body=b"", duration=6.0)
    late_empty.response.timestamp_start = 106.0
    records, _ = run(tmp_path, late_empty, cancel(1, at=104.0))
    (call,) = calls_of(records, "tools/call")
    assert call["outcome"] == "CANCELLED"
