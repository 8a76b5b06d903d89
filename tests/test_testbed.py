"""End-to-end checks of the test bed itself: the SDK server, its fault layer and the Python runner.

Real processes on 127.0.0.1: each server mode runs once per module; tests reset its fault rules
and exchange log through the control endpoints. Raw checks use http.client or a bare socket, so
they see exactly what crossed the wire.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.processes import ServerProcess, run_py_client, start_server
from tests.support.raw_http import (
    Control,
    RawResponse,
    dechunk,
    http_request,
    mcp_headers,
    read_sse_until,
    socket_request,
)
from tests.support.sse import parse_stream

pytestmark = pytest.mark.e2e

TOOLS = {"echo", "add", "raise_error", "tool_error", "protocol_error", "progress", "ask_name", "write_record"}
ALL_STEPS: list[dict[str, Any]] = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "hi"}},
    {"op": "call", "tool": "add", "args": {"a": 2, "b": 3}},
    {"op": "call", "tool": "raise_error", "args": {"message": "boom"}},
    {"op": "call", "tool": "tool_error", "args": {"message": "bad input"}},
    {"op": "call", "tool": "protocol_error", "args": {"message": "no such thing"}},
    {"op": "call", "tool": "progress", "args": {"steps": 3, "delay_ms": 20}},
    {"op": "call", "tool": "ask_name"},
    {"op": "call", "tool": "write_record", "args": {"key": "k", "value": "v"}},
]
TOKEN = "s3cret"


# ---------------------------------------------------------------- fixtures


def _server(**kwargs: Any) -> Iterator[ServerProcess]:
    with start_server(**kwargs) as server:
        yield server
        server.assert_alive()  # a fault must never take the MCP server down


@pytest.fixture(scope="module")
def stateful() -> Iterator[ServerProcess]:
    # A short retry interval keeps the client's resume after a cut fast (default 1 s).
    yield from _server(mode="stateful", retry_interval_ms=100)


@pytest.fixture(scope="module")
def stateless() -> Iterator[ServerProcess]:
    yield from _server(mode="stateless")


@pytest.fixture(scope="module")
def stateless_json() -> Iterator[ServerProcess]:
    yield from _server(mode="stateless", json_response=True)


@pytest.fixture(scope="module")
def legacy_sse() -> Iterator[ServerProcess]:
    yield from _server(mode="legacy-sse")


@pytest.fixture(scope="module")
def authed() -> Iterator[ServerProcess]:
    yield from _server(mode="stateless", auth_token=TOKEN)


def control(server: ServerProcess) -> Control:
    ctl = Control(server.port)
    ctl.reset()
    return ctl


# ---------------------------------------------------------------- helpers


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def step(run: dict[str, Any], tool: str | None) -> dict[str, Any]:
    if tool is None:
        return next(s for s in run["steps"] if s["op"] == "list_tools")
    return next(s for s in run["steps"] if s["tool"] == tool)


def body_of(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["response_body_b64"])


def assert_logged_as_received(entry: dict[str, Any], response: RawResponse) -> None:
    """The control log says exactly what the raw client got: status, headers it set, body bytes."""
    assert entry["status"] == response.status
    assert body_of(entry) == response.body
    for name, value in entry["response_headers"].items():
        assert response.headers.get(name) == value, name


def rpc(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(request_id: int, tool: str, **args: Any) -> dict[str, Any]:
    return rpc(request_id, "tools/call", {"name": tool, "arguments": args})


def data_events(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in parse_stream(body) if e.has_data]


def open_session(server: ServerProcess) -> dict[str, str]:
    """A 2025-11-25 session by hand: initialize + initialized; returns the headers later requests need."""
    init = rpc(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}})
    response = http_request(server.port, "POST", "/mcp", init, mcp_headers())
    assert response.status == 200, response.body
    headers = mcp_headers({"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http_request(server.port, "POST", "/mcp", note, headers).status == 202
    return headers


# ---------------------------------------------------------------- every tool, every mode


def check_common_tools(run: dict[str, Any]) -> None:
    assert run["client"] == "python-mcp"
    assert run["fatal"] is None, run["fatal"]
    tools = {t["name"]: t for t in step(run, None)["result"]["tools"]}
    assert set(tools) == TOOLS
    assert tools["echo"]["annotations"]["readOnlyHint"] is True
    assert tools["add"]["outputSchema"]["properties"]["sum"]["type"] == "integer"
    assert tools["write_record"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
    }
    assert text_of(step(run, "echo")["result"]) == "hi"
    assert step(run, "add")["result"]["structuredContent"] == {"sum": 5}
    # A plain exception becomes an isError result; the SDK hides its text from the client.
    raised = step(run, "raise_error")["result"]
    assert raised["isError"] is True and text_of(raised) == "Error executing tool raise_error"
    failed = step(run, "tool_error")["result"]
    assert failed["isError"] is True and text_of(failed) == "bad input"
    protocol = step(run, "protocol_error")
    assert protocol["ok"] is False
    assert protocol["error"] == {"type": "MCPError", "code": -32602, "message": "no such thing"}
    progress = step(run, "progress")
    assert text_of(progress["result"]) == "done 3"
    assert [(p["progress"], p["total"], p["message"]) for p in progress["progress"]] == [
        (i, 3, f"step {i}") for i in (1, 2, 3)
    ]
    assert re.fullmatch(r"written k #\d+", text_of(step(run, "write_record")["result"]))


def posts_for(log: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [e for e in log if e["tool"] == tool]


def test_stateful_session_client(stateful: ServerProcess) -> None:
    ctl = control(stateful)
    run = run_py_client(stateful.mcp_url, ALL_STEPS, mode="legacy")
    check_common_tools(run)
    assert run["protocol_version"] == "2025-11-25"
    assert text_of(step(run, "ask_name")["result"]) == "hello Ada"
    log = ctl.log()
    assert "mcp-session-id" in log[0]["response_headers"]
    # Resumable stream: a priming event (id, empty data) first, then ids on every event.
    progress = posts_for(log, "progress")[0]
    assert parse_stream(body_of(progress))[0].data == ""
    assert [json.loads(e["data"]).get("method") for e in progress["events_sent"]] == ["notifications/progress"] * 3 + [
        None
    ]
    assert all(e["id"] for e in progress["events_sent"])
    # 2025 elicitation: a server->client request on the tools/call stream, answered by a POST.
    ask = posts_for(log, "ask_name")
    assert len(ask) == 1
    assert json.loads(ask[0]["events_sent"][0]["data"])["method"] == "elicitation/create"
    assert any('"result":{"action":"accept"' in e["request_body"] for e in log)


@pytest.mark.parametrize("server_name", ["stateful", "stateless"])
def test_modern_client(server_name: str, request: pytest.FixtureRequest) -> None:
    """mode=auto probes server/discover; the SDK serves 2026-07-28 statelessly in both modes."""
    server: ServerProcess = request.getfixturevalue(server_name)
    ctl = control(server)
    run = run_py_client(server.mcp_url, ALL_STEPS, mode="auto")
    check_common_tools(run)
    assert run["protocol_version"] == "2026-07-28"
    assert text_of(step(run, "ask_name")["result"]) == "hello Ada"
    log = ctl.log()
    assert log[0]["rpc_method"] == "server/discover"
    assert not any("mcp-session-id" in e["response_headers"] for e in log)
    # MRTR: first round answers input_required, the retry carries inputResponses under a new id.
    first, retry = posts_for(log, "ask_name")
    assert json.loads(body_of(first))["result"]["resultType"] == "input_required"
    assert json.loads(first["request_body"])["id"] != json.loads(retry["request_body"])["id"]
    assert "inputResponses" in json.loads(retry["request_body"])["params"]


def test_stateless_2025_client_cannot_elicit(stateless: ServerProcess) -> None:
    control(stateless)
    run = run_py_client(stateless.mcp_url, ALL_STEPS, mode="legacy")
    check_common_tools(run)
    assert run["protocol_version"] == "2025-11-25"
    # No session, so no channel for the elicitation/create request: the call fails with -32600.
    ask = step(run, "ask_name")
    assert ask["ok"] is False and ask["error"]["code"] == -32600
    assert "no back-channel" in ask["error"]["message"]


def test_legacy_sse(legacy_sse: ServerProcess) -> None:
    ctl = control(legacy_sse)
    run = run_py_client(legacy_sse.mcp_url, ALL_STEPS, transport="sse", mode="legacy")
    check_common_tools(run)
    assert text_of(step(run, "ask_name")["result"]) == "hello Ada"
    log = ctl.log()
    stream = next(e for e in log if e["http_method"] == "GET")
    assert stream["path"] == "/sse" and stream["events_sent"][0]["event"] == "endpoint"
    posts = [e for e in log if e["http_method"] == "POST"]
    assert posts and all(e["path"] == "/messages/" and e["status"] == 202 for e in posts)
    methods = [json.loads(e["data"]).get("method") for e in stream["events_sent"][1:]]
    assert "elicitation/create" in methods and "notifications/progress" in methods


def test_legacy_sse_auto_mode_speaks_2026(legacy_sse: ServerProcess) -> None:
    """Recorded SDK behaviour: the legacy SSE server answers server/discover, so the client adopts 2026."""
    control(legacy_sse)
    run = run_py_client(legacy_sse.mcp_url, ALL_STEPS[:2], transport="sse", mode="auto")
    assert run["fatal"] is None
    assert run["protocol_version"] == "2026-07-28"


def test_auth(authed: ServerProcess) -> None:
    ctl = control(authed)
    for headers in ({}, {"authorization": "Bearer wrong"}):
        response = http_request(authed.port, "POST", "/mcp", call(1, "echo", text="x"), mcp_headers(headers))
        assert response.status == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
    ok = run_py_client(authed.mcp_url, ALL_STEPS[1:2], auth_token=TOKEN)
    assert ok["fatal"] is None and text_of(ok["steps"][0]["result"]) == "hi"
    refused = run_py_client(authed.mcp_url, ALL_STEPS[1:2])
    assert refused["fatal"] is not None and refused["steps"] == []
    statuses = [e["status"] for e in ctl.log()]
    assert statuses[:2] == [401, 401] and 200 in statuses and statuses[-1] == 401


# ---------------------------------------------------------------- fault actions, seen raw


def test_statuses_503_then_success(stateless: ServerProcess) -> None:
    ctl = control(stateless)
    ctl.faults({"match": {"rpc_method": "tools/call", "tool": "echo"}, "action": {"statuses": [503, 200]}})
    first = http_request(stateless.port, "POST", "/mcp", call(1, "echo", text="x"), mcp_headers())
    assert first.status == 503
    second = http_request(stateless.port, "POST", "/mcp", call(1, "echo", text="x"), mcp_headers())
    assert second.status == 200
    assert data_events(second.body)[-1]["result"]["content"][0]["text"] == "x"
    third = http_request(stateless.port, "POST", "/mcp", call(2, "echo", text="y"), mcp_headers())
    assert third.status == 200  # times defaulted to len(statuses): the rule is used up
    log = ctl.log()
    assert [(e["fault"], e["status"]) for e in log] == [(0, 503), (0, 200), (None, 200)]
    for entry, response in zip(log, (first, second, third), strict=True):
        assert_logged_as_received(entry, response)


def test_429_with_retry_after(stateless: ServerProcess) -> None:
    ctl = control(stateless)
    ctl.faults({"action": {"status": 429, "headers": {"Retry-After": "1"}, "body": "slow down"}})
    response = http_request(stateless.port, "POST", "/mcp", call(1, "echo", text="x"), mcp_headers())
    assert (response.status, response.headers["retry-after"], response.body) == (429, "1", b"slow down")
    assert response.headers["content-type"].startswith("text/plain")
    [entry] = ctl.log()
    assert entry["fault"] == 0 and entry["rpc_method"] == "tools/call" and entry["tool"] == "echo"
    assert_logged_as_received(entry, response)


def test_503_on_first_post(stateless: ServerProcess) -> None:
    """Connection failures land in `fatal` (exit 0). Recorded: auto mode reads the 503 on its
    server/discover probe as "not modern" and falls back to the 2025 handshake."""
    ctl = control(stateless)
    ctl.faults({"match": {"http_method": "POST"}, "action": {"status": 503}})
    legacy = run_py_client(stateless.mcp_url, ALL_STEPS[1:2], mode="legacy")
    assert legacy["steps"] == []
    assert legacy["fatal"]["type"] == "MCPError" and legacy["fatal"]["code"] == -32603
    ctl.reset()
    ctl.faults({"match": {"http_method": "POST"}, "action": {"status": 503}})
    auto = run_py_client(stateless.mcp_url, ALL_STEPS[1:2], mode="auto")
    assert auto["fatal"] is None and auto["protocol_version"] == "2025-11-25"
    assert [e["rpc_method"] for e in ctl.log()][:2] == ["server/discover", "initialize"]


def test_cut_after_events_raw(stateful: ServerProcess) -> None:
    ctl = control(stateful)
    headers = open_session(stateful)
    ctl.faults({"match": {"tool": "progress"}, "action": {"cut_after_events": 1}})
    request = call(7, "progress", steps=3, delay_ms=50)
    request["params"]["_meta"] = {"progressToken": "p7"}
    head, raw = socket_request(stateful.port, "POST", "/mcp", json.dumps(request).encode(), headers)
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
    body, terminated = dechunk(raw)
    assert not terminated, "a cut must not look like a clean end of stream"
    events = parse_stream(body)
    assert [e.has_data for e in events] == [False, True]  # priming event, then exactly one data event
    assert json.loads(events[1].data)["params"]["progress"] == 1
    entry = ctl.log()[-1]
    assert entry["cut"] is True and entry["fault"] == 0 and body_of(entry) == body
    assert len(entry["events_sent"]) == 1

    # The SDK treated the cut as a disconnect; its event store still has the rest for a resume.
    def has_response(received: bytes) -> bool:
        return any("id" in m for m in data_events(received))

    resumed = read_sse_until(stateful.port, "/mcp", {**headers, "last-event-id": events[1].id or ""}, has_response)
    assert resumed.status == 200
    rest = data_events(resumed.body)
    assert [m.get("params", {}).get("progress") for m in rest[:-1]] == [2, 3]
    assert rest[-1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"text": "done 3", "type": "text"}], "isError": False},
    }
    # And the server keeps serving.
    after = http_request(stateful.port, "POST", "/mcp", call(8, "echo", text="still here"), headers)
    assert data_events(after.body)[-1]["result"]["content"][0]["text"] == "still here"


def test_cut_python_client_resumes(stateful: ServerProcess) -> None:
    """Recorded: on a 2025-11-25 session the SDK client resumes with GET + Last-Event-ID."""
    ctl = control(stateful)
    ctl.faults({"match": {"tool": "progress"}, "action": {"cut_after_events": 1}})
    run = run_py_client(stateful.mcp_url, [ALL_STEPS[6]], mode="legacy")
    progress = run["steps"][0]
    assert progress["ok"] is True and text_of(progress["result"]) == "done 3"
    assert [p["progress"] for p in progress["progress"]] == [1, 2, 3]
    log = ctl.log()
    cut = posts_for(log, "progress")[0]
    resume = next(e for e in log if e["http_method"] == "GET" and "last-event-id" in e["request_headers"])
    assert cut["cut"] is True
    assert resume["request_headers"]["last-event-id"] == cut["events_sent"][-1]["id"]
    assert len(resume["events_sent"]) == 3  # progress 2, progress 3, the response


def test_cut_python_client_2026_fails(stateless: ServerProcess) -> None:
    """Recorded: a 2026-07-28 stream has no event ids, so the client cannot resume; the call fails."""
    ctl = control(stateless)
    ctl.faults({"match": {"tool": "progress"}, "action": {"cut_after_events": 1}})
    run = run_py_client(stateless.mcp_url, [ALL_STEPS[6], ALL_STEPS[1]], mode="auto")
    progress, echo = run["steps"]
    assert progress["ok"] is False
    assert progress["error"]["code"] == -32000 and "without a response" in progress["error"]["message"]
    assert len(progress["progress"]) == 1
    assert echo["ok"] is True  # the session stays usable
    assert posts_for(ctl.log(), "progress")[0]["cut"] is True


def _check_rewritten(kind: str, text: str, original_id: int) -> None:
    if kind == "malformed_json":
        with pytest.raises(ValueError):
            json.loads(text)
        assert text.startswith('{"jsonrpc"')
        return
    message = json.loads(text)
    if kind == "wrong_id":
        assert message["id"] == original_id + 1000
    elif kind == "result_and_error":
        assert "result" in message and "error" in message
    elif kind == "content_not_array":
        assert message["result"]["content"] == "not-an-array"


REWRITES = ["malformed_json", "wrong_id", "result_and_error", "content_not_array"]


@pytest.mark.parametrize("kind", REWRITES)
@pytest.mark.parametrize("framing", ["sse", "json"])
def test_rewrite_raw(kind: str, framing: str, request: pytest.FixtureRequest) -> None:
    server: ServerProcess = request.getfixturevalue("stateless" if framing == "sse" else "stateless_json")
    ctl = control(server)
    ctl.faults({"match": {"tool": "echo"}, "action": {"rewrite": kind}})
    response = http_request(server.port, "POST", "/mcp", call(5, "echo", text="x"), mcp_headers())
    assert response.status == 200 and response.complete
    if framing == "json":
        assert response.headers["content-type"] == "application/json"
        assert int(response.headers["content-length"]) == len(response.body)
        _check_rewritten(kind, response.body.decode(), 5)
    else:
        assert response.headers["content-type"].startswith("text/event-stream")
        [event] = [e for e in parse_stream(response.body) if e.has_data]
        _check_rewritten(kind, event.data, 5)
    [entry] = ctl.log()
    assert_logged_as_received(entry, response)


# What the SDK client makes of each corrupted response (recorded behaviour, not a spec claim):
# (ok, error type, error code).
REWRITE_OUTCOMES = {
    # SSE: the transport overwrites a response's id with the request's own, so wrong_id goes unnoticed.
    ("sse", "wrong_id"): (True, None, None),
    ("sse", "malformed_json"): (False, "MCPError", -32700),
    # Both members present: the SDK's JSON-RPC union parses it as the error.
    ("sse", "result_and_error"): (False, "MCPError", -32603),
    ("sse", "content_not_array"): (False, "ValidationError", None),
    # JSON: an unknown id is never matched, so the call ends in the SDK's read timeout.
    ("json", "wrong_id"): (False, "MCPError", -32001),
    ("json", "malformed_json"): (False, "MCPError", -32700),
    ("json", "result_and_error"): (False, "MCPError", -32603),
    ("json", "content_not_array"): (False, "ValidationError", None),
}


@pytest.mark.parametrize("kind", REWRITES)
@pytest.mark.parametrize("framing", ["sse", "json"])
def test_rewrite_python_client(kind: str, framing: str, request: pytest.FixtureRequest) -> None:
    server: ServerProcess = request.getfixturevalue("stateless" if framing == "sse" else "stateless_json")
    ctl = control(server)
    ctl.faults({"match": {"tool": "echo"}, "action": {"rewrite": kind}})
    run = run_py_client(server.mcp_url, ALL_STEPS[1:2], mode="legacy", step_timeout=1.5)
    [echo] = run["steps"]
    error = echo["error"] or {}
    assert (echo["ok"], error.get("type"), error.get("code")) == REWRITE_OUTCOMES[(framing, kind)], echo
    assert posts_for(ctl.log(), "echo")[0]["fault"] == 0
