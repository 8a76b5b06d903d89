"""One call as the export contract has it (docs/ARCHITECTURE.md, "Export contract")."""

from __future__ import annotations

from typing import Any

from mcp_blackbox.analyzer.anatomy import ending
from mcp_blackbox.analyzer.records import Call
from mcp_blackbox.analyzer.wallclock import iso_utc

COLUMNS = [
    "call_id",
    "scope",
    "direction",
    "method",
    "tool",
    "jsonrpc_id",
    "outcome",
    "layer",
    "http_status",
    "error_code",
    "error_message",
    "result_excerpt",
    "flags",
    "t_start",
    "t_end",
    "started_at",
    "ended_at",
    "duration_ms",
    "ending",
    "sse_events",
    "exchanges",
    "retry_group",
    "attempt",
    "retry_origin",
    "retry_confidence",
    "client",
    "session_id",
    "arguments_digest",
    "protocol_version",
    "evidence",
    "source",
]


def call_record(call: Call, version: str | None) -> dict[str, Any]:
    exchange = call.exchange
    t_end = call.t_end
    from_streams = [m for m in (*call.responses, *call.notifications) if m.exchange.is_event_stream]
    return {
        "call_id": call.call_id,
        "scope": call.scope,
        "direction": call.direction,
        "method": call.method,
        "tool": call.tool,
        "jsonrpc_id": call.request.id,
        "outcome": call.outcome,
        "layer": call.layer,
        "http_status": exchange.status,
        "error_code": call.error_code,
        "error_message": call.error_message,
        "result_excerpt": _result_excerpt(call),
        "flags": list(call.flags),
        "t_start": call.request.t,
        "t_end": t_end,
        "started_at": iso_utc(call.request.t),
        "ended_at": iso_utc(t_end),
        "duration_ms": round((t_end - call.request.t) * 1000, 3) if t_end is not None else None,
        "ending": ending(call),
        "sse_events": len(from_streams),
        "exchanges": [e.flow_id for e in call.exchanges],
        "retry_group": call.retry_group,
        "attempt": call.attempt,
        "retry_origin": call.retry_origin,
        "retry_confidence": call.retry_confidence,
        "client": call.client.record() if call.client is not None else None,
        "session_id": exchange.session_id or exchange.legacy_session,
        # Of the params without _meta (for tools/call: the tool's name and arguments); equal digests, equal calls.
        "arguments_digest": call.request.facts.digest if call.request.facts is not None else None,
        "protocol_version": version,
        "evidence": list(call.evidence),
        "source": exchange.source,
    }


def _result_excerpt(call: Call) -> str | None:
    """The start of the result's first text block (at most analyzer.slim.TEXT_LIMIT characters)."""
    shape = call.responses[0].shape if call.responses else None
    return shape.first_text if shape is not None else None
