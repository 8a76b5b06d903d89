"""A GET stream or a DELETE answered with an error is an event of that stream or session, not a call."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.analyzer.review.report import build_report
from tests.analyzer.flows import error, exchange, result, tool_call, write

SESSION = {"mcp-session-id": "s1", "user-agent": "client/1"}
NOT_ALLOWED = {"jsonrpc": "2.0", "error": {"code": -32000, "message": "Method not allowed"}, "id": None}


def test_refused_get_and_delete_are_stream_events_not_orphan_calls(tmp_path: Path) -> None:
    capture = write(
        tmp_path,
        exchange(tool_call(1, "echo"), body=result(1, {"content": []}), request_headers=SESSION, at=1.0),
        exchange(None, method="GET", status=405, body=NOT_ALLOWED, request_headers=SESSION, at=2.0),
        exchange(None, method="DELETE", status=400, body=error(None, -32600, "No valid session"),
                 request_headers=SESSION, at=3.0),
    )  # fmt: skip
    analysis = analyze([capture])
    assert [c["method"] for c in analysis.calls] == ["tools/call"]
    assert not any("ORPHAN_RESPONSE" in c["flags"] for c in analysis.calls)
    assert [(e["method"], e["status"]) for e in analysis.stream_events] == [("GET", 405), ("DELETE", 400)]
    assert analysis.stream_events[0]["what"] == "JSON-RPC error -32000: Method not allowed"
    out = io.StringIO()
    write_json(analysis, out)
    exported = json.loads(out.getvalue())
    assert len(exported["stream_events"]) == 2 and exported["summary"]["stream_events"] == 2
    notes = build_report([capture])["meta"]["stream_events"]
    assert notes[0] == "GET /mcp (HTTP 405): JSON-RPC error -32000: Method not allowed"


def test_an_unknown_id_on_a_post_is_still_an_orphan(tmp_path: Path) -> None:
    capture = write(tmp_path, exchange(tool_call(1, "echo"), body=result(7, {"content": []}), request_headers=SESSION))
    analysis = analyze([capture])
    assert any("ORPHAN_RESPONSE" in c["flags"] for c in analysis.calls) and analysis.stream_events == []


def test_json_rpc_of_another_protocol_is_skipped_with_its_methods(tmp_path: Path) -> None:
    eth = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}
    capture = write(
        tmp_path,
        exchange(eth, path="/rpc", body={"jsonrpc": "2.0", "id": 1, "result": "0x10"}, at=1.0),
        exchange(tool_call(1, "echo"), body=result(1, {"content": []}), at=2.0),
        exchange(eth, path="/rpc", body={"jsonrpc": "2.0", "id": 1, "result": "0x10"}, request_headers=SESSION,
                 at=3.0),  # an MCP session header makes it MCP's, whatever the method
    )  # fmt: skip
    analysis = analyze([capture])
    assert [c["method"] for c in analysis.calls] == ["tools/call", "eth_blockNumber"]
    (skipped,) = analysis.skipped
    assert "JSON-RPC with methods MCP does not define (eth_blockNumber)" in skipped["reason"]


def test_the_recorder_leaves_other_json_rpc_alone(recorder: Any) -> None:
    from mitmproxy.test import tflow, tutils

    body = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
    flow = tflow.tflow(req=tutils.treq(method=b"POST", path=b"/rpc", content=body), resp=True)
    recorder.response(flow)
    assert "mcp_blackbox" not in flow.metadata
