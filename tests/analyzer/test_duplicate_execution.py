"""DUPLICATE_EXECUTION: a write the same client ran twice, with identical arguments, retry or not.

The typical case is an application loop that re-runs its whole sequence after a later step failed, and
with it a write that had already succeeded. Look-alikes must stay unflagged: another client, other
arguments, a read-only or idempotent tool, a first attempt refused before it ran, a connection the
proxy never made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.review.check import DEFAULT_FAIL_ON, matching_calls
from mcp_blackbox.analyzer.review.summary_text import summary_text
from tests.analyzer.flows import exchange, from_process, result, rpc, sse, text_result, tool_call, write

UA = {"user-agent": "app/1"}
TOOLS = {
    "tools": [
        {"name": "write_record", "annotations": {"destructiveHint": True}},
        {"name": "lookup", "annotations": {"readOnlyHint": True}},
        {"name": "report", "annotations": {"readOnlyHint": True}},
        {"name": "set_flag", "annotations": {"idempotentHint": True}},
    ]
}


def session(scope: str) -> dict[str, str]:
    return {"mcp-session-id": scope, **UA}


def start(scope: str, at: float) -> list[Any]:
    init = exchange(rpc(0, "initialize", {"protocolVersion": "2025-11-25"}), body=result(0, {}), request_headers=UA,
                    response_headers={"mcp-session-id": scope}, at=at, duration=0.01)  # fmt: skip
    listing = exchange(rpc(1, "tools/list"), body=result(1, TOOLS), request_headers=session(scope), at=at + 0.02,
                       duration=0.01)  # fmt: skip
    return [init, listing]


def tool(rpc_id: int, name: str, scope: str, at: float, args: dict[str, Any] | None = None, **kw: Any) -> Any:
    message = tool_call(rpc_id, name)
    message["params"]["arguments"] = args if args is not None else {"key": "order-1", "value": "paid"}
    kw.setdefault("body", result(rpc_id, text_result("done")))
    return exchange(message, request_headers=session(scope), at=at, duration=kw.pop("duration", 0.01), **kw)


def cut_stream(rpc_id: int, name: str, scope: str, at: float) -> Any:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": rpc_id}}
    cut = {"ended": "upstream-error", "error": "peer closed"}
    return tool(rpc_id, name, scope, at, {}, body=sse(progress), content_type="text/event-stream",
                error_message="peer closed connection", stream=cut)  # fmt: skip


def analysis_of(tmp_path: Path, *flows: Any) -> Any:
    return analyze([write(tmp_path, *flows)])


def flagged(analysis: Any) -> list[tuple[str | None, Any]]:
    return [(c["tool"], c["jsonrpc_id"]) for c in analysis.calls if "DUPLICATE_EXECUTION" in c["flags"]]


def app_loop_re_run(tmp_path: Path) -> Any:
    """An application loop that re-ran its sequence on a new session after its report's stream was cut: its
    write (which had succeeded) ran again."""
    flows = [
        *start("A", 100.0),
        tool(2, "write_record", "A", 100.1),
        cut_stream(3, "report", "A", 100.2),
        *start("B", 101.0),
        tool(2, "write_record", "B", 101.1),
        tool(3, "report", "B", 101.2, {}),
    ]
    return analysis_of(tmp_path, *from_process(4242, *flows))  # one process: one run going on


def test_app_loop_re_running_its_sequence_executes_the_write_twice(tmp_path: Path) -> None:
    analysis = app_loop_re_run(tmp_path)
    assert flagged(analysis) == [("write_record", 2)]
    (duplicate,) = analysis.duplicate_executions
    calls = {c["call_id"]: c for c in analysis.calls}
    assert [calls[c]["scope"] for c in duplicate.record()["calls"]] == ["session:A", "session:B"]
    assert duplicate.record()["executions"] == ["ran", "ran"]
    write_again = next(c for c in analysis.calls if c["scope"] == "session:B" and c["tool"] == "write_record")
    assert write_again["retry_group"] is None, "not a retry: the first write succeeded"
    assert "ran before in" in write_again["evidence"][-1]
    assert write_again in matching_calls(analysis.calls, DEFAULT_FAIL_ON), "check fails on it by default"
    text = summary_text(analysis)
    assert "ran more than once: 1 certain, 0 possible" in text
    assert f"{write_again['call_id']} TOOL_SUCCESS (HTTP 200): ran; not in a retry chain" in text


def test_a_write_that_may_have_run_then_ran_is_a_duplicate(tmp_path: Path) -> None:
    analysis = analysis_of(
        tmp_path, *start("A", 100.0),
        tool(2, "write_record", "A", 100.1, body=b"upstream timed out", status=504, content_type="text/plain"),
        tool(3, "write_record", "A", 101.2),
    )  # fmt: skip
    assert flagged(analysis) == [("write_record", 3)]
    assert analysis.duplicate_executions[0].record()["executions"] == ["may have run", "ran"]


def test_look_alikes_are_not_duplicates(tmp_path: Path) -> None:
    connect_failed = tool(2, "write_record", "A", 100.1, status=None, body=None,
                          error_message="Connect call failed ('127.0.0.1', 9)")  # fmt: skip
    analysis = analysis_of(
        tmp_path,
        *start("A", 100.0),
        connect_failed,  # never reached the server
        tool(3, "write_record", "A", 100.5),
        tool(4, "write_record", "A", 100.6, {"key": "order-2", "value": "paid"}),  # other arguments
        tool(5, "lookup", "A", 100.7),
        tool(6, "lookup", "A", 100.8),  # read-only
        tool(7, "set_flag", "A", 100.9),
        tool(8, "set_flag", "A", 101.0),  # idempotent
        tool(9, "write_record", "A", 101.1, {"key": "order-3"}, status=401, body=b"", content_type="text/plain"),
        tool(10, "write_record", "A", 101.2, {"key": "order-3"}),  # refused before it ran
        *start("X", 100.55),  # another client, alive alongside A, writes the same
        tool(2, "write_record", "X", 100.56),
    )
    assert flagged(analysis) == []
    assert analysis.duplicate_executions == []


def test_an_unknown_tool_and_a_gateway_with_no_live_upstream_did_not_run(tmp_path: Path) -> None:
    """Issue 21: requests that never reached a tool are not executions; the look-alikes beside them are."""
    unknown = result(2, {"content": [{"type": "text", "text": "Unknown tool: write_record"}], "isError": True})
    nowhere = b"<html><body><center><h1>502 Bad Gateway</h1></center>no live upstreams</body></html>"
    bad_gateway = b"<html><body><center><h1>502 Bad Gateway</h1></center><center>nginx</center></body></html>"
    analysis = analysis_of(
        tmp_path, *start("A", 100.0),
        tool(2, "write_record", "A", 100.1, body=unknown),
        tool(3, "write_record", "A", 100.3),
        tool(4, "write_record", "A", 100.5, {"key": "order-2"}, status=502, body=nowhere, content_type="text/html"),
        tool(5, "write_record", "A", 100.7, {"key": "order-2"}),
        # Look-alikes: an isError of the tool's own, and a 502 after the upstream took the request, may have run.
        tool(6, "write_record", "A", 100.9, {"key": "order-3"}, body=result(6, {"content": [], "isError": True})),
        tool(7, "write_record", "A", 101.1, {"key": "order-3"}),
        tool(8, "write_record", "A", 101.3, {"key": "order-4"}, status=502, body=bad_gateway, content_type="text/html"),
        tool(9, "write_record", "A", 101.5, {"key": "order-4"}),
    )  # fmt: skip
    assert flagged(analysis) == [("write_record", 7), ("write_record", 9)]
    executions = [d.record()["executions"] for d in analysis.duplicate_executions]
    assert executions == [["ran", "ran"], ["may have run", "ran"]]


def test_a_503_did_not_run_unless_the_gateway_says_its_upstream_reset(tmp_path: Path) -> None:
    """Issue 21: a 503 (the server's own, a rate limit, a gateway with no upstream) and a 429 were not
    processed (RFC 9110 15.6.4), so the write sent again ran once; Envoy's 503 after its upstream reset
    the request it had taken is the look-alike: the write may have run there."""
    reset = b"upstream connect error or disconnect/reset before headers. reset reason: connection termination"
    analysis = analysis_of(
        tmp_path, *start("A", 100.0),
        tool(2, "write_record", "A", 100.1, status=503, body=b"unavailable", content_type="text/plain"),
        tool(3, "write_record", "A", 100.3),
        tool(4, "write_record", "A", 100.5, {"key": "order-2"}, status=429, body=b"slow down"),
        tool(5, "write_record", "A", 100.7, {"key": "order-2"}),
        tool(6, "write_record", "A", 100.9, {"key": "order-3"}, status=503, body=reset, content_type="text/plain"),
        tool(7, "write_record", "A", 101.1, {"key": "order-3"}),
    )  # fmt: skip
    assert flagged(analysis) == [("write_record", 7)]
    assert [d.record()["executions"] for d in analysis.duplicate_executions] == [["may have run", "ran"]]


def test_a_write_sent_again_after_its_result_with_nothing_failed_is_on_purpose(tmp_path: Path) -> None:
    """A user saving twice: the client got the first result and nothing failed before it sent the write
    again, so it is not counted. Look-alike: the same, but a call of that client failed in between (an
    application starting its job over), in the same session and in a new one: counted."""
    analysis = analysis_of(
        tmp_path, *start("A", 100.0),
        tool(2, "write_record", "A", 100.1),
        tool(3, "write_record", "A", 100.9),  # on purpose
        tool(4, "write_record", "A", 101.1, {"key": "order-2"}),
        tool(5, "lookup", "A", 101.2, status=500, body=b"boom", content_type="text/plain"),
        tool(6, "write_record", "A", 101.5, {"key": "order-2"}),  # after a failure: the job started over
    )  # fmt: skip
    assert flagged(analysis) == [("write_record", 6)]
    (on_purpose,) = [c for c in analysis.calls if c["jsonrpc_id"] == 3 and c["tool"] == "write_record"]
    assert on_purpose["flags"] == [] and any("sent again on purpose" in e for e in on_purpose["evidence"])
