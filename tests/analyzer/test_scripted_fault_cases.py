"""Eleven scripted faults, one per layer and kind, as real HTTP exchanges recorded through mitmdump.

Each case is one `tools/call` POST answered by a scripted (status, body): 503, a JSON-RPC error in a
200, isError, a cut stream, a success-looking body on a 500, and so on. The peer is a stdlib HTTP
server, the POST goes through mitmdump with the recording addon (reverse mode), and the analyzer reads
the saved flow file: each call must get the outcome and layer its fault belongs to. One mitmdump and
one upstream serve all cases; the upstream picks the script by path, ``POST /case/<name>``.

None of these exchanges carries an MCP session, so each exchange is its own pairing scope: every
request has id 1, and a call may only be answered from its own exchange (docs/ARCHITECTURE.md, "Call").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.proxy import start_mitmdump
from tests.support.raw_http import http_request

pytestmark = pytest.mark.e2e

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "synthetic", "arguments": {}}}
GOOD = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"resultType": "complete", "content": [{"type": "text", "text": "ok"}], "isError": False},
}
RPC_ERROR = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "synthetic invalid params"}}
TOOL_ERROR = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"resultType": "complete", "content": [{"type": "text", "text": "failed"}], "isError": True},
}
INPUT_REQUIRED = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "resultType": "input_required",
        "inputRequests": {
            "approval": {"method": "elicitation/create", "params": {"mode": "form", "message": "synthetic input"}}
        },
    },
}
LEGACY = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "legacy ok"}], "isError": False}}
NOT_AN_ARRAY = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"resultType": "complete", "content": "not-an-array", "isError": False},
}

Reply = tuple[int, Any]  # (HTTP status, body: JSON-encoded unless already a str)

# Case name -> the upstream's answer to the 1st, 2nd, ... POST on /case/<name>.
SCRIPTS: dict[str, list[Reply]] = {
    "baseline": [(200, GOOD)],
    "explicit_http_503_then_200": [(503, {"note": "synthetic outage"}), (200, GOOD)],
    "jsonrpc_error": [(200, RPC_ERROR)],
    "tool_isError": [(200, TOOL_ERROR)],
    "transport_precedence": [(500, GOOD)],
    "malformed_json": [(200, "{unclosed")],
    "conflicting_envelope": [(200, {**GOOD, "error": RPC_ERROR["error"]})],
    "wrong_response_id": [(200, {**GOOD, "id": 99})],
    "input_required": [(200, INPUT_REQUIRED)],
    "legacy_resultType_absent": [(200, LEGACY)],
    "invalid_tool_result": [(200, NOT_AN_ARRAY)],
}


@dataclass(frozen=True)
class Expected:
    outcome: str
    layer: str
    http_status: int
    error_code: int | None = None


# Case name -> what the analyzer must say about each tools/call POST of the case, in the order sent.
EXPECTED: dict[str, list[Expected]] = {
    "baseline": [Expected("TOOL_SUCCESS", "application", 200)],
    "explicit_http_503_then_200": [
        Expected("HTTP_ERROR", "transport", 503),
        Expected("TOOL_SUCCESS", "application", 200),
    ],
    "jsonrpc_error": [Expected("JSONRPC_ERROR", "protocol", 200, error_code=-32602)],
    "tool_isError": [Expected("TOOL_ERROR", "application", 200)],
    "transport_precedence": [Expected("HTTP_ERROR", "transport", 500)],
    "malformed_json": [Expected("MALFORMED_JSON", "protocol", 200)],
    "conflicting_envelope": [Expected("INVALID_ENVELOPE", "protocol", 200)],
    "wrong_response_id": [Expected("INVALID_ENVELOPE", "protocol", 200)],
    "input_required": [Expected("INPUT_REQUIRED", "interaction", 200)],
    "legacy_resultType_absent": [Expected("TOOL_SUCCESS", "application", 200)],
    "invalid_tool_result": [Expected("INVALID_TOOL_RESULT", "protocol", 200)],
}
POSTS = sum(len(script) for script in SCRIPTS.values())  # 12: the 503 case sends two

CALL_KEYS = {
    "call_id", "scope", "direction", "method", "tool", "jsonrpc_id", "outcome", "layer", "http_status",
    "error_code", "flags", "t_start", "t_end", "duration_ms", "sse_events", "exchanges", "evidence",
    "retry_group", "attempt", "retry_origin", "retry_confidence",
}  # fmt: skip


class ScriptedPeer(BaseHTTPRequestHandler):
    """Answers POST /case/<name> with the next scripted reply of that case."""

    protocol_version = "HTTP/1.1"
    hits: dict[str, int]  # set on the subclass made per server
    lock: threading.Lock

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        name = self.path.removeprefix("/case/")
        with self.lock:
            index = self.hits.get(name, 0)
            self.hits[name] = index + 1
        if name not in SCRIPTS or index >= len(SCRIPTS[name]):
            status, body = 418, f"no script for POST #{index + 1} on {self.path}"
        else:
            status, body = SCRIPTS[name][index]
        payload = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Recording:
    flow_file: Path
    path_of_flow: dict[str, str]  # flow id -> request path
    statuses_seen: dict[str, list[int]]  # case -> HTTP statuses the client got, in order


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recording]:
    """Every case's POST(s) through one mitmdump; the flow file is complete when this yields."""
    handler = type("Peer", (ScriptedPeer,), {"hits": {}, "lock": threading.Lock()})
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=upstream.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        proxy = start_mitmdump(
            f"reverse:http://127.0.0.1:{upstream.server_address[1]}", tmp_path_factory.mktemp("seed")
        )
        try:
            statuses: dict[str, list[int]] = {}
            for name, script in SCRIPTS.items():
                for _ in script:  # the 503 case: the test itself sends the second POST, as an application would
                    response = http_request(
                        proxy.port, "POST", f"/case/{name}", REQUEST, {"accept": "application/json"}
                    )
                    statuses.setdefault(name, []).append(response.status)
        finally:
            proxy.stop()
        flows = proxy.flows()
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert statuses == {name: [status for status, _ in script] for name, script in SCRIPTS.items()}, (
        f"the client did not see the scripted statuses through mitmdump; log:\n{proxy.log()}"
    )
    assert len(flows) == POSTS, f"expected {POSTS} flows in the capture, got {len(flows)}"
    yield Recording(proxy.flow_file, {flow.id: flow.request.path for flow in flows}, statuses)


@pytest.fixture(scope="module")
def analysis(recording: Recording) -> Any:
    from mcp_blackbox.analyzer import analyze  # the contract: analyzer.analyze(paths) -> Analysis

    return analyze([recording.flow_file])


def tool_calls_of_case(analysis: Any, recording: Recording, name: str) -> list[dict[str, Any]]:
    """The tools/call calls carried by the exchange(s) of one case, in the order they started."""
    flow_ids = {flow_id for flow_id, path in recording.path_of_flow.items() if path == f"/case/{name}"}
    calls = [c for c in analysis.calls if c["method"] == "tools/call" and flow_ids & set(c["exchanges"])]
    return sorted(calls, key=lambda c: c["t_start"])


def describe(calls: list[dict[str, Any]]) -> str:
    keys = ("outcome", "layer", "http_status", "error_code", "flags", "exchanges", "evidence")
    return json.dumps([{k: c.get(k) for k in keys} for c in calls], indent=1, default=str)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_scripted_fault_gets_its_outcome_and_layer(analysis: Any, recording: Recording, name: str) -> None:
    calls = tool_calls_of_case(analysis, recording, name)
    expected = EXPECTED[name]
    assert len(calls) == len(expected), f"{name}: one tools/call per POST expected, got:\n{describe(calls)}"
    for attempt, (call, want) in enumerate(zip(calls, expected, strict=True), start=1):
        where = f"{name}, POST #{attempt}:\n{describe([call])}"
        assert (call["outcome"], call["layer"]) == (want.outcome, want.layer), where
        assert call["http_status"] == want.http_status, where
        assert call["tool"] == "synthetic", where
        assert call["jsonrpc_id"] == 1, where  # the id as sent: an integer, not "1"
        if want.error_code is not None:
            assert call["error_code"] == want.error_code, where


def test_success_looking_body_on_500_is_flagged_status_mismatch(analysis: Any, recording: Recording) -> None:
    # docs/ARCHITECTURE.md: HTTP_STATUS_MISMATCH = a JSON-RPC error with 4xx, or a result with non-2xx.
    (call,) = tool_calls_of_case(analysis, recording, "transport_precedence")
    assert "HTTP_STATUS_MISMATCH" in call["flags"], describe([call])


def test_every_post_is_analyzed_and_nothing_skipped(analysis: Any, recording: Recording) -> None:
    assert analysis.read_problems == []
    assert analysis.flows_read == POSTS
    assert analysis.analyzed == POSTS, analysis.skipped
    assert analysis.skipped == []
    tool_calls = [c for c in analysis.calls if c["method"] == "tools/call"]
    assert len(tool_calls) == POSTS, describe(tool_calls)
    carried = [flow_id for c in tool_calls for flow_id in c["exchanges"]]
    assert sorted(carried) == sorted(recording.path_of_flow), "each tools/call is carried by its own exchange"


def test_sessionless_exchanges_are_separate_scopes(analysis: Any) -> None:
    # Every request has id 1 and no session: pairing by id alone would cross the cases' answers.
    tool_calls = [c for c in analysis.calls if c["method"] == "tools/call"]
    assert len({c["scope"] for c in tool_calls}) == len(tool_calls), describe(tool_calls)


def test_calls_keep_the_export_contract(analysis: Any) -> None:
    for call in analysis.calls:
        assert set(call) >= CALL_KEYS, f"missing keys {sorted(CALL_KEYS - set(call))} in {call}"
        assert isinstance(call["flags"], list), call
        assert isinstance(call["exchanges"], list) and call["exchanges"], call
        assert call["evidence"] and all(isinstance(step, str) for step in call["evidence"]), call
        if call["method"] == "tools/call":
            assert call["t_start"] <= call["t_end"], call
            assert call["duration_ms"] >= 0, call
