"""End-to-end tests of the TypeScript-SDK client runner (tests/clients/ts/client.mjs).

The runner is driven against the test bed's MCP server (tests/support/mcp_server.py) in every
mode, directly (no proxy): these tests pin down what the official TS client does on the wire
so the recorder tests can rely on it.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.processes import REPO_ROOT, ServerProcess, child_env, start_server

pytestmark = pytest.mark.e2e

TS_DIR = REPO_ROOT / "tests" / "clients" / "ts"
CLIENT = TS_DIR / "client.mjs"
SDK_PACKAGE = TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"

ALL_TOOLS = {"echo", "add", "raise_error", "tool_error", "protocol_error", "progress", "ask_name", "write_record"}


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH; the TS client tests need Node >= 18 (see the Makefile)")
    if not SDK_PACKAGE.exists():
        pytest.fail(f"{TS_DIR / 'node_modules'} is missing: run `make test` (it runs `npm ci` in tests/clients/ts)")
    return node


def run_client(
    url: str,
    steps: list[dict[str, Any]],
    *,
    transport: str | None = None,
    auth_token: str | None = None,
    timeout_ms: int | None = None,
    wall_timeout: float = 60,
) -> tuple[dict[str, Any], str]:
    """Run client.mjs; return its one JSON object and its stderr (the per-request log)."""
    cmd = [_node(), str(CLIENT), "--url", url, "--steps", json.dumps(steps)]
    if transport:
        cmd += ["--transport", transport]
    if auth_token:
        cmd += ["--auth-token", auth_token]
    if timeout_ms:
        cmd += ["--timeout-ms", str(timeout_ms)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_timeout, cwd=REPO_ROOT, env=child_env())
    assert proc.returncode == 0, f"client.mjs exited {proc.returncode}\nstderr:\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one JSON line on stdout, got:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    out = json.loads(lines[0])
    assert out["client"] == "typescript-sdk"
    assert out["sdk_version"] == json.loads(SDK_PACKAGE.read_text())["version"]
    assert set(out) == {"client", "sdk_version", "steps", "fatal"}
    return out, proc.stderr


def _ok(step: dict[str, Any], stderr: str) -> dict[str, Any]:
    assert step["ok"] is True, f"step failed: {step}\nclient stderr:\n{stderr}"
    assert step["error"] is None
    assert step["t_start"] <= step["t_end"]
    return step["result"]


def _check_progress(step: dict[str, Any], steps: int, stderr: str, *, final_may_drop: bool = False) -> None:
    """Progress arrived in order, once each, between t_start and t_end.

    final_may_drop: the SDK's Protocol hands notifications to their handler in a microtask but
    settles a response synchronously (and drops the request's progress handler). The legacy SSE
    transport (eventsource) dispatches every event of one network chunk synchronously, so when the
    last progress event and the response share a chunk, the last progress is dropped with
    onerror "Received a progress notification for an unknown token". Timing decides; allow exactly
    that case and require the SDK's own error line for it.
    """
    progress = step["progress"]
    got = [p["progress"] for p in progress]
    expected = steps
    if final_may_drop and got == list(range(1, steps)):
        assert re.search(rf'unknown token: .*"progress":{steps}[,}}]', stderr), stderr
        expected = steps - 1
    assert got == list(range(1, expected + 1)), progress
    assert all(p["total"] == steps for p in progress)
    assert [p["message"] for p in progress] == [f"step {i}" for i in range(1, expected + 1)]
    times = [p["t"] for p in progress]
    assert times == sorted(times)
    assert step["t_start"] <= times[0] and times[-1] <= step["t_end"]


def _text(result: dict[str, Any]) -> str:
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


# --------------------------------------------------------------------------------------------------
# Servers


@pytest.fixture(scope="module")
def stateful() -> Iterator[ServerProcess]:
    with start_server("stateful") as server:
        yield server


@pytest.fixture(scope="module")
def stateless() -> Iterator[ServerProcess]:
    with start_server("stateless") as server:
        yield server


@pytest.fixture(scope="module")
def legacy() -> Iterator[ServerProcess]:
    with start_server("legacy-sse") as server:
        yield server


def _post_json(url: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200, resp.status


def _exchanges(server: ServerProcess) -> list[dict[str, Any]]:
    """The fault layer's log of every MCP request the server received, in arrival order."""
    with urllib.request.urlopen(server.url("/_control/log"), timeout=10) as resp:
        return json.loads(resp.read())["exchanges"]


@contextmanager
def _http_stub(status: int, body: bytes) -> Iterator[str]:
    """A plain HTTP server answering every request with `status` (no MCP at all)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()


# --------------------------------------------------------------------------------------------------
# The runner itself


def test_usage_errors_exit_nonzero() -> None:
    node = _node()
    for args in (
        [],
        ["--url", "http://127.0.0.1:1/mcp"],
        ["--url", "x", "--steps", "[]"],
        ["--url", "http://127.0.0.1:1/mcp", "--steps", '[{"op": "nope"}]'],
        ["--url", "http://127.0.0.1:1/mcp", "--steps", "[]", "--transport", "ws"],
    ):
        proc = subprocess.run([node, str(CLIENT), *args], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stdout == ""
        assert "usage:" in proc.stderr


def test_connection_refused_is_fatal_and_host_is_redacted() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # nothing listens on `port` now
    out, _ = run_client(f"http://127.0.0.1:{port}/mcp", [{"op": "list_tools"}])
    assert out["steps"] == []
    assert out["fatal"] is not None
    assert out["fatal"]["type"] == "TypeError"  # Node's fetch: "fetch failed"
    assert "ECONNREFUSED" in out["fatal"]["message"]
    assert str(port) not in out["fatal"]["message"]
    assert "<HOST>" in out["fatal"]["message"]


def test_http_503_on_initialize_is_fatal() -> None:
    with _http_stub(503, b"overloaded") as url:
        out, stderr = run_client(url, [{"op": "call", "tool": "echo", "args": {"text": "hi"}}])
    assert out["steps"] == []
    assert out["fatal"] == {
        "type": "StreamableHTTPError",
        "message": "Streamable HTTP error: Error POSTing to endpoint: overloaded",
    }
    assert re.search(r"POST http://127\.0\.0\.1:\d+/mcp -> 503", stderr), stderr


# --------------------------------------------------------------------------------------------------
# Against the test bed's server

BASIC_STEPS = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "hello wire"}},
    {"op": "call", "tool": "add", "args": {"a": 2, "b": 3}},
    {"op": "call", "tool": "progress", "args": {"steps": 4, "delay_ms": 30}},
    {"op": "call", "tool": "tool_error", "args": {"message": "tool says no"}},
    {"op": "call", "tool": "protocol_error", "args": {"message": "bad params"}},
    {"op": "call", "tool": "echo", "args": {"text": "still alive"}},
]


def _check_basic(out: dict[str, Any], stderr: str, *, legacy: bool = False) -> None:
    assert out["fatal"] is None, f"{out['fatal']}\n{stderr}"
    steps = out["steps"]
    assert [(s["op"], s["tool"]) for s in steps] == [(s["op"], s.get("tool")) for s in BASIC_STEPS]
    tools, echo, add, progress, tool_error, protocol_error, echo2 = steps

    assert {t["name"] for t in _ok(tools, stderr)["tools"]} == ALL_TOOLS
    assert tools["progress"] == []

    assert _text(_ok(echo, stderr)) == "hello wire"
    assert not _ok(echo, stderr).get("isError")
    assert _ok(add, stderr)["structuredContent"] == {"sum": 5}

    assert _text(_ok(progress, stderr)) == "done 4"
    _check_progress(progress, 4, stderr, final_may_drop=legacy)

    result = _ok(tool_error, stderr)
    assert result["isError"] is True
    assert _text(result) == "tool says no"

    assert protocol_error["ok"] is False
    assert protocol_error["result"] is None
    assert protocol_error["error"]["type"] == "McpError"
    assert protocol_error["error"]["code"] == -32602
    assert "bad params" in protocol_error["error"]["message"]
    assert protocol_error["t_start"] <= protocol_error["t_end"]

    # a failed step does not stop the run
    assert _text(_ok(echo2, stderr)) == "still alive"


def test_stateful_basic(stateful: ServerProcess) -> None:
    out, stderr = run_client(stateful.mcp_url, BASIC_STEPS)
    _check_basic(out, stderr)


def test_stateless_basic(stateless: ServerProcess) -> None:
    out, stderr = run_client(stateless.mcp_url, BASIC_STEPS)
    _check_basic(out, stderr)


def test_legacy_sse_basic(legacy: ServerProcess) -> None:
    out, stderr = run_client(legacy.mcp_url, BASIC_STEPS, transport="sse")
    _check_basic(out, stderr, legacy=True)
    # 2024-11-05 transport: one GET opens the stream, every POST goes to the announced endpoint and gets 202
    assert re.search(r"GET http://127\.0\.0\.1:\d+/sse -> 200 text/event-stream", stderr), stderr
    assert re.findall(r"POST \S+ -> (\d+)", stderr) and set(re.findall(r"POST \S+ -> (\d+)", stderr)) == {"202"}


@pytest.mark.parametrize("mode", ["stateful", "legacy-sse"])
def test_elicitation_answers_ada(mode: str, stateful: ServerProcess, legacy: ServerProcess) -> None:
    if mode == "stateful":
        out, stderr = run_client(stateful.mcp_url, [{"op": "call", "tool": "ask_name"}])
    else:
        out, stderr = run_client(legacy.mcp_url, [{"op": "call", "tool": "ask_name"}], transport="sse")
    assert out["fatal"] is None, out["fatal"]
    assert _text(_ok(out["steps"][0], stderr)) == "hello Ada"
    assert "elicitation/create" in stderr


def test_bearer_token_is_sent_on_every_request() -> None:
    with start_server("stateful", auth_token="s3cret") as server:
        out, stderr = run_client(server.mcp_url, BASIC_STEPS[:4], auth_token="s3cret")
        assert out["fatal"] is None, f"{out['fatal']}\n{stderr}"
        assert all(s["ok"] for s in out["steps"]), out["steps"]
        assert " -> 401" not in stderr
        exchanges = _exchanges(server)
        # initialize, initialized, the standalone GET, 3 calls, list: all with the header
        assert {e["http_method"] for e in exchanges} >= {"POST", "GET"}
        assert all(e["request_headers"].get("authorization") == "Bearer s3cret" for e in exchanges), exchanges

        out, stderr = run_client(server.mcp_url, BASIC_STEPS[:1])
        assert out["steps"] == []
        assert out["fatal"]["type"] == "StreamableHTTPError"
        assert "unauthorized" in out["fatal"]["message"]
        assert " -> 401" in stderr


def test_cut_progress_stream_is_resumed_with_last_event_id() -> None:
    # A dedicated server: fault rules are process-wide.
    with start_server("stateful") as server:
        rule = {"match": {"tool": "progress"}, "action": {"cut_after_events": 2}}
        _post_json(server.url("/_control/faults"), {"rules": [rule]})
        steps = [
            {"op": "call", "tool": "progress", "args": {"steps": 5, "delay_ms": 100}},
            {"op": "call", "tool": "echo", "args": {"text": "after"}},
        ]
        out, stderr = run_client(server.mcp_url, steps)
        exchanges = _exchanges(server)

    assert out["fatal"] is None, out["fatal"]
    progress, echo = out["steps"]
    assert _text(_ok(progress, stderr)) == "done 5", stderr
    _check_progress(progress, 5, stderr)
    assert _text(_ok(echo, stderr)) == "after"

    # The POST stream broke after two data events; the SDK resumed with GET + Last-Event-ID
    # (default delay 1 s without a server retry: value) and never re-sent the POST.
    assert "SSE stream disconnected" in stderr, stderr
    resumes = re.findall(r"GET \S+ Last-Event-ID=(\S+) -> (\d+)", stderr)
    assert len(resumes) == 1, stderr
    assert resumes[0][1] == "200"
    assert progress["t_end"] - progress["t_start"] >= 1.0

    # Server side: one POST for the call (cut), one GET carrying the id of the last event it got.
    calls = [e for e in exchanges if e["tool"] == "progress"]
    assert len(calls) == 1 and calls[0]["cut"] is True, calls
    gets = [e for e in exchanges if e["http_method"] == "GET" and "last-event-id" in e["request_headers"]]
    assert [g["request_headers"]["last-event-id"] for g in gets] == [resumes[0][0]]
    assert gets[0]["t_start"] - calls[0]["t_start"] >= 1.0


def test_error_response_on_a_primed_stream_triggers_a_resume_get(stateful: ServerProcess) -> None:
    # SDK quirk worth knowing when reading captures: _handleSseStream only counts a *result* as
    # "response received", so after a JSON-RPC error on a POST stream that carried event ids it
    # schedules a GET with Last-Event-ID (1 s later) although nothing is missing.
    steps = [
        {"op": "call", "tool": "protocol_error", "args": {"message": "x"}},
        {"op": "call", "tool": "progress", "args": {"steps": 6, "delay_ms": 250}},
    ]
    out, stderr = run_client(stateful.mcp_url, steps)
    error, progress = out["steps"]
    assert error["error"]["code"] == -32602
    _check_progress(progress, 6, stderr)
    resumes = re.findall(r"\[ts-client ([0-9.]+)\] GET \S+ Last-Event-ID=\S+ -> 200", stderr)
    assert len(resumes) == 1, stderr
    assert 0.9 <= float(resumes[0]) - error["t_end"] <= 2.0, stderr


def test_timeout_ms_is_per_request_and_reset_by_progress(stateful: ServerProcess) -> None:
    steps = [
        # 4 x 300 ms = 1.2 s > the 700 ms timeout, but every progress resets it
        {"op": "call", "tool": "progress", "args": {"steps": 4, "delay_ms": 300}},
        # nothing for 1.5 s: times out
        {"op": "call", "tool": "progress", "args": {"steps": 1, "delay_ms": 1500}},
        {"op": "call", "tool": "echo", "args": {"text": "after timeout"}},
    ]
    out, stderr = run_client(stateful.mcp_url, steps, timeout_ms=700)
    slow_ok, timed_out, echo = out["steps"]
    assert _text(_ok(slow_ok, stderr)) == "done 4"
    _check_progress(slow_ok, 4, stderr)
    assert timed_out["ok"] is False
    assert timed_out["error"]["type"] == "McpError"
    assert timed_out["error"]["code"] == -32001  # SDK-local RequestTimeout, never on the wire
    assert 0.6 <= timed_out["t_end"] - timed_out["t_start"] < 1.5
    assert _text(_ok(echo, stderr)) == "after timeout"
