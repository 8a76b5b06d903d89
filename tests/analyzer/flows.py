"""Building small captures for analyzer tests with mitmproxy's own flow classes and writer."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from mitmproxy import io as flow_io
from mitmproxy.http import Headers, HTTPFlow, Request, Response
from mitmproxy.test import tflow

_clock = itertools.count(1)


def rpc(rpc_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def tool_call(rpc_id: Any, tool: str = "synthetic", **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {}}
    if meta:
        params["_meta"] = meta
    return rpc(rpc_id, "tools/call", params)


def result(rpc_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": value}


def error(rpc_id: Any, code: int = -32602, message: str = "bad") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}


def text_result(text: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def sse(*messages: Any, ids: bool = False) -> bytes:
    events = []
    for n, message in enumerate(messages):
        data = message if isinstance(message, str) else json.dumps(message)
        events.append((f"id: {n}\n" if ids else "") + f"data: {data}\n\n")
    return "".join(events).encode()


def exchange(
    request: Any = None,
    *,
    status: int | None = 200,
    body: Any = None,
    content_type: str = "application/json",
    method: str = "POST",
    path: str = "/mcp",
    request_headers: dict[str, str] | None = None,
    response_headers: dict[str, str] | None = None,
    error_message: str | None = None,
    stream: dict[str, Any] | None = None,
    at: float | None = None,
    duration: float = 0.5,
    server: str = "http://127.0.0.1:8000",
) -> HTTPFlow:
    """One HTTP exchange; bodies given as objects are JSON-encoded, bytes are sent as they are.

    ``at``: when the request started (default: one second after the previous exchange built).
    """
    start = float(next(_clock)) if at is None else at
    content = request if isinstance(request, bytes) else (json.dumps(request).encode() if request is not None else b"")
    flow = tflow.tflow()
    flow.request = Request.make(
        method, f"{server}{path}", content, {"content-type": "application/json", **(request_headers or {})}
    )
    flow.request.timestamp_start = start
    flow.request.timestamp_end = start + 0.001
    flow.response = None
    if status is not None:
        raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
        headers = Headers(content_type=content_type, **(response_headers or {}))
        flow.response = Response.make(status, b"", headers)
        flow.response.raw_content = raw
        flow.response.timestamp_start = start + 0.01
        flow.response.timestamp_end = start + duration
    if error_message is not None:
        flow.error = tflow.terr(error_message)
        flow.error.timestamp = start + duration
    if stream is not None:
        flow.metadata["mcp_blackbox"] = {"version": 1, "mcp": "test", "stream": stream}
    return flow


def from_process(pid: int, *flows: HTTPFlow, started_at: float = 1.0, name: str = "python3") -> list[HTTPFlow]:
    """The flows as the recorder writes them when it named the loopback client's process (FlowRecord)."""
    for flow in flows:
        record = flow.metadata.setdefault("mcp_blackbox", {"version": 1, "mcp": "test"})
        record["client_process"] = {"pid": pid, "name": name, "started_at": started_at}
    return list(flows)


def write(tmp_path: Path, *flows: HTTPFlow, name: str = "capture.flows") -> Path:
    path = tmp_path / name
    with path.open("wb") as f:
        writer = flow_io.FlowWriter(f)
        for flow in flows:
            writer.add(flow)
    return path
