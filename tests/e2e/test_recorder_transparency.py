"""Through mitmdump with the addon, real SDK clients see exactly what they see talking to the server directly.

Each scenario runs twice against the same kind of server: once direct, once through the proxy. The
clients' observations (results, errors, progress order) must be equal, every exchange the server
saw must be in the flow file with byte-identical response bodies, and per-event arrival times in the
capture must agree with the client's own clock.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.wire.sse_framing import split_sse
from tests.support.processes import run_py_client, run_ts_client, start_server
from tests.support.proxy import Mitmdump, start_mitmdump
from tests.support.raw_http import Control

pytestmark = pytest.mark.e2e

TOOLS = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "hello <b>"}},
    {"op": "call", "tool": "add", "args": {"a": 2, "b": 3}},
    {"op": "call", "tool": "tool_error", "args": {"message": "tool says no"}},
    {"op": "call", "tool": "protocol_error", "args": {"message": "bad params"}},
    {"op": "call", "tool": "raise_error", "args": {"message": "boom"}},
    {"op": "call", "tool": "progress", "args": {"steps": 4, "delay_ms": 60}},
    {"op": "call", "tool": "ask_name", "args": {}},
]
ECHO = {"op": "call", "tool": "echo", "args": {"text": "again"}}
PROGRESS_5 = {"op": "call", "tool": "progress", "args": {"steps": 5, "delay_ms": 100}}


def on_tool(tool: str, action: dict[str, Any], times: int = 1) -> dict[str, Any]:
    return {"match": {"rpc_method": "tools/call", "tool": tool}, "times": times, "action": action}


# name: (server mode, client, client mode, steps, fault rules)
SCENARIOS: dict[str, tuple[str, str, str, list[dict[str, Any]], list[dict[str, Any]]]] = {
    "ts-tools": ("stateful", "ts", "", TOOLS, []),
    "py-2025-tools": ("stateful", "py", "legacy", TOOLS, []),
    "py-2026-tools": ("stateless", "py", "auto", TOOLS, []),
    "py-legacy-sse-tools": ("legacy-sse", "py", "legacy", TOOLS[:6], []),
    "ts-503-then-ok": ("stateful", "ts", "", [ECHO, ECHO], [on_tool("echo", {"status": 503, "body": "down"})]),
    "py-503-then-ok": ("stateful", "py", "legacy", [ECHO, ECHO], [on_tool("echo", {"status": 503})]),
    "ts-429-retry-after": (
        "stateful",
        "ts",
        "",
        [ECHO, ECHO],
        [on_tool("echo", {"status": 429, "headers": {"Retry-After": "1"}, "body": "slow down"})],
    ),
    "ts-cut-resumes": ("stateful", "ts", "", [PROGRESS_5, ECHO], [on_tool("progress", {"cut_after_events": 2})]),
    "py-2025-cut-resumes": (
        "stateful",
        "py",
        "legacy",
        [PROGRESS_5, ECHO],
        [on_tool("progress", {"cut_after_events": 2})],
    ),
    "py-2026-cut-fails": (
        "stateless",
        "py",
        "auto",
        [PROGRESS_5, ECHO],
        [on_tool("progress", {"cut_after_events": 2})],
    ),
    "ts-rewrites": (
        "stateful",
        "ts",
        "",
        [ECHO, ECHO, ECHO, ECHO, ECHO],
        [on_tool("echo", {"rewrite": kind}) for kind in ("malformed_json", "result_and_error", "content_not_array")],
    ),
    "py-rewrites": (
        "stateful",
        "py",
        "legacy",
        [ECHO, ECHO, ECHO, ECHO],
        [on_tool("echo", {"rewrite": kind}) for kind in ("malformed_json", "result_and_error", "content_not_array")],
    ),
}

# The TS client's per-request timeout. A response the SDK's transport cannot parse (malformed_json) or
# validate (result_and_error) is dropped with onerror, so that request is never answered and ends only
# at this SDK-local timeout (-32001). For ts-rewrites, 2 s is past the resume GET (Last-Event-ID) that
# the SDK sends 1 s after the primed stream ends without a result, so that GET stays in the scenario.
TS_TIMEOUT_MS = 8000
TS_UNANSWERED_TIMEOUT_MS = {"ts-rewrites": 2000}


def run_client(
    client: str, mode: str, url: str, steps: list[dict[str, Any]], ts_timeout_ms: int = TS_TIMEOUT_MS
) -> dict[str, Any]:
    if client == "ts":
        return run_ts_client(url, steps, timeout_ms=ts_timeout_ms)
    transport = "sse" if url.endswith("/sse") else "streamable-http"
    return run_py_client(url, steps, transport=transport, mode=mode, timeout=30, step_timeout=8)


def observed(run: dict[str, Any]) -> dict[str, Any]:
    """What a client saw, without its clock readings."""
    steps = [
        {
            **{k: v for k, v in step.items() if k not in ("t_start", "t_end", "progress")},
            "progress": [{k: v for k, v in p.items() if k != "t"} for p in step["progress"]],
        }
        for step in run["steps"]
    ]
    return {"steps": steps, "fatal": run["fatal"]}


def request_key(method: str, path: str, body: bytes) -> tuple[str, str, str]:
    return (method, path.split("?")[0], hashlib.sha256(body).hexdigest())


def assert_capture_matches_server(flows: list[Any], server_log: list[dict[str, Any]]) -> None:
    """Every exchange the server saw is in the capture with the status and bytes the server sent.

    Exchanges pair up by request and start order. Where the client hung up first (the Python SSE
    client drops its last 202 once the answer came on the stream), the proxy can only hold what
    arrived before that: a prefix of what the server sent.
    """
    captured: dict[tuple, list[Any]] = {}
    for flow in sorted(flows, key=lambda f: f.request.timestamp_start):
        captured.setdefault(request_key(flow.request.method, flow.request.path, flow.request.raw_content), []).append(
            flow
        )
    served: dict[tuple, list[dict[str, Any]]] = {}
    for entry in sorted(server_log, key=lambda e: e["t_start"]):
        key = request_key(entry["http_method"], entry["path"], entry["request_body"].encode())
        served.setdefault(key, []).append(entry)
    assert {k: len(v) for k, v in captured.items()} == {k: len(v) for k, v in served.items()}
    for key, entries in served.items():
        for flow, entry in zip(captured[key], entries, strict=True):
            sent = base64.b64decode(entry["response_body_b64"])
            assert flow.response is not None and flow.response.status_code == entry["status"], key
            body = flow.response.raw_content or b""
            client_left = flow.error is not None and flow.error.msg == "Client disconnected."
            assert body == sent or (client_left and sent.startswith(body)), (key, body[:200], sent[:200])


@pytest.fixture
def run_through_proxy(tmp_path: Path) -> Iterator[Callable[..., tuple[dict, dict, Mitmdump, list[dict]]]]:
    """Run a scenario direct and proxied on one fresh server; hand back both runs, the proxy and the server log."""
    started: list[Mitmdump] = []

    def run(
        server_mode: str, client: str, client_mode: str, steps: list, rules: list, ts_timeout_ms: int = TS_TIMEOUT_MS
    ) -> tuple:
        with start_server(server_mode) as server:
            control = Control(server.port)
            path = "/sse" if server_mode == "legacy-sse" else "/mcp"
            control.reset()
            control.faults(*rules)
            direct = run_client(client, client_mode, server.url(path), steps, ts_timeout_ms)
            proxy = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path)
            started.append(proxy)
            control.reset()
            control.faults(*rules)
            proxied = run_client(client, client_mode, proxy.url + path, steps, ts_timeout_ms)
            wait_for_open_exchanges(control)
            server_log = control.log()
            proxy.stop()
            return direct, proxied, proxy, server_log

    yield run
    for proxy in started:
        proxy.stop()


def wait_for_open_exchanges(control: Control, timeout: float = 5) -> None:
    """A client that hangs up leaves its GET stream to be closed by the server a moment later."""
    deadline = time.monotonic() + timeout
    while any(e["t_end"] is None for e in control.log()) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_client_observes_the_same_through_the_recorder(name: str, run_through_proxy: Callable[..., tuple]) -> None:
    ts_timeout_ms = TS_UNANSWERED_TIMEOUT_MS.get(name, TS_TIMEOUT_MS)
    direct, proxied, proxy, server_log = run_through_proxy(*SCENARIOS[name], ts_timeout_ms=ts_timeout_ms)

    assert observed(proxied) == observed(direct)

    flows = proxy.flows()
    assert_capture_matches_server(flows, server_log)
    for flow in flows:
        record = flow.metadata.get("mcp_blackbox")
        assert record and record.get("mcp"), f"{flow.request.method} {flow.request.path} not annotated"
        if flow.response is not None and "event-stream" in flow.response.headers.get("content-type", ""):
            assert record["stream"]["ended"] is not None
            assert record["stream"]["dropped_bytes"] == 0


def progress_arrivals(flows: list[Any]) -> list[tuple[float, float]]:
    """(progress value, capture time) of every progress notification the capture holds, in stream order."""
    found: list[tuple[float, float]] = []
    for flow in flows:
        record = flow.metadata.get("mcp_blackbox", {}).get("stream")
        if not record or not record["event_times"]:
            continue
        events, _ = split_sse(flow.response.raw_content)
        for event, t in zip(events, record["event_times"], strict=True):
            if '"notifications/progress"' in event.data:
                found.append((json.loads(event.data)["params"]["progress"], t))
    return found


@pytest.mark.parametrize("client", ["ts", "py"])
def test_event_times_agree_with_the_client_clock(client: str, run_through_proxy: Callable[..., tuple]) -> None:
    mode = "legacy" if client == "py" else ""
    _, proxied, proxy, _ = run_through_proxy("stateful", client, mode, [PROGRESS_5], [])
    seen = proxied["steps"][0]["progress"]
    assert [p["progress"] for p in seen] == [1, 2, 3, 4, 5]
    captured = dict(progress_arrivals(proxy.flows()))
    assert sorted(captured) == [1, 2, 3, 4, 5]
    skew = [abs(p["t"] - captured[p["progress"]]) for p in seen]
    assert max(skew) < 0.050, skew


def test_cut_stream_is_recorded_with_partial_body_and_reason(run_through_proxy: Callable[..., tuple]) -> None:
    _, proxied, proxy, server_log = run_through_proxy(*SCENARIOS["ts-cut-resumes"])
    assert proxied["steps"][0]["result"]["content"][0]["text"] == "done 5"
    flows = proxy.flows()
    (cut,) = [f for f in flows if f.metadata["mcp_blackbox"].get("stream", {}).get("ended") == "upstream-error"]
    (sent,) = [e for e in server_log if e["cut"]]
    assert cut.request.method == "POST" and cut.response.raw_content == base64.b64decode(sent["response_body_b64"])
    # Cut after an event id, the stream is resumable: pending, not a failure (its answer came on the GET). The
    # flow is written as it ends, before the live verdict: the console line says it.
    rpc_id = json.loads(cut.request.content or b"{}")["id"]
    (line,) = [line for line in proxy.log().splitlines() if " POST tools/call " in line and f" id={rpc_id} " in line]
    assert "FAILED" not in line and "before the answer; it can be resumed" in line, line
    resumed = [f for f in flows if f.request.method == "GET" and "last-event-id" in f.request.headers]
    assert resumed, "the client resumed through the proxy"
    assert b"done 5" in resumed[0].response.raw_content
    kinds = Counter((f.request.method, f.response.status_code if f.response else None) for f in flows)
    assert kinds[("POST", 202)] >= 1, "the initialized notification's 202 is in the capture"


def test_python_session_capture_holds_every_kind_of_exchange(run_through_proxy: Callable[..., tuple]) -> None:
    _, _, proxy, _ = run_through_proxy(*SCENARIOS["py-2025-tools"])
    methods = Counter(f.request.method for f in proxy.flows())
    statuses = Counter(f.response.status_code for f in proxy.flows() if f.response)
    assert methods["GET"] >= 1 and methods["DELETE"] >= 1 and methods["POST"] >= len(TOOLS)
    assert statuses[202] >= 2, "initialized notification and the elicitation answer"
