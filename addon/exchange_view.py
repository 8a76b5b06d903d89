"""What the console says about one MCP exchange: its facts, and the analyzer's live verdict.

Whether it failed is not judged here: ``analyzer.live`` applies the analyzer's own rules to
the exchange (docs/ARCHITECTURE.md, "The live verdict").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl

from mitmproxy import http

from mcp_blackbox.addon.mcp_detect import SESSION_HEADER, decoded_body, header_value
from mcp_blackbox.addon.stream_tap import StreamTap
from mcp_blackbox.analyzer.calls.live import LiveVerdict
from mcp_blackbox.analyzer.wire.jsonrpc import (
    JsonObject,
    is_response,
    tool_name,
)
from mcp_blackbox.analyzer.wire.sse_framing import SseEvent, split_sse


@dataclass(frozen=True, slots=True)
class ExchangeView:
    started: float
    session: str | None
    http_method: str
    rpc_method: str | None
    tool: str | None
    rpc_id: object
    status: int | None
    content_type: str
    duration_ms: float | None
    events: int | None
    verdict: str | None  # "FAILED: ..." or "pending: ..." (LiveVerdict.text), None when all is well


def describe(flow: http.HTTPFlow, tap: StreamTap | None, requests: list[JsonObject]) -> ExchangeView:
    """The exchange's facts, without the verdict (``with_verdict``); ``requests``: the JSON-RPC messages of the
    request body (``request_messages``)."""
    first = requests[0] if requests else {}
    response = flow.response
    end = (tap.end_time if tap else None) or (response.timestamp_end if response else None)
    if end is None and flow.error is not None:
        end = flow.error.timestamp
    return ExchangeView(
        started=flow.request.timestamp_start,
        session=_session(flow),
        http_method=flow.request.method,
        rpc_method=_rpc_method(requests),
        tool=tool_name(first),
        rpc_id=first.get("id"),
        status=response.status_code if response else None,
        content_type=((header_value(response.headers, b"content-type") or "") if response else "").split(";")[0],
        duration_ms=(end - flow.request.timestamp_start) * 1000 if end else None,
        events=None,
        verdict=None,
    )


def with_verdict(view: ExchangeView, verdict: LiveVerdict) -> ExchangeView:
    """The view with what the verdict's reading found: a GET's method is what it delivered."""
    return replace(view, rpc_method=view.rpc_method or verdict.delivered, events=verdict.events, verdict=verdict.text)


def recorded_events(flow: http.HTTPFlow) -> list[SseEvent]:
    """The complete events of a recorded stream, decoded first if compressed."""
    body = decoded_body(flow.response) if flow.response is not None else None
    events, _ = split_sse(body or b"")
    return events


def _session(flow: http.HTTPFlow) -> str | None:
    for headers in (flow.request.headers, flow.response.headers if flow.response else None):
        if headers is not None and (session := header_value(headers, SESSION_HEADER)) is not None:
            return session
    # From the path, not request.query: that parses request.url, which raises for a path such as "x[y".
    query = dict(parse_qsl(flow.request.path.partition("?")[2]))
    return query.get("sessionId") or query.get("session_id")


def _rpc_method(requests: list[JsonObject]) -> str | None:
    """None for a GET stream: its method is what it delivered, e.g. a server request (``with_verdict``)."""
    for message in requests:
        if isinstance(message.get("method"), str):
            return message["method"]
    if requests and any(is_response(m) for m in requests):
        return "(response)"
    return None


def console_line(view: ExchangeView) -> str:
    clock = time.strftime("%H:%M:%S", time.localtime(view.started)) + f".{int(view.started % 1 * 1000):03d}"
    parts = [
        clock,
        f"session={view.session[:8]}" if view.session else "session=-",
        view.http_method,
        view.rpc_method or "-",
    ]
    if view.tool:
        parts.append(view.tool)
    if view.rpc_id is not None:
        parts.append(f"id={view.rpc_id}")
    parts.append(str(view.status) if view.status is not None else "---")
    parts.append(view.content_type or "-")
    parts.append(f"{view.duration_ms:.0f}ms" if view.duration_ms is not None else "?ms")
    if view.events is not None:
        parts.append(f"{view.events} events")
    if view.verdict:
        parts.append(view.verdict)
    return " ".join(parts)
