"""One exchange decoded: its JSON-RPC messages, its OAuth step, its error text; the per-exchange part of the
analysis, which the decoding workers (analyzer/read/parallel.py) and the stdio reader
(analyzer/read/stdio_load.py) both produce."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_blackbox.analyzer.model.pickling import pickled_by_fields
from mcp_blackbox.analyzer.model.records import Exchange
from mcp_blackbox.analyzer.read.auth import auth_record, auth_step
from mcp_blackbox.analyzer.read.extract import Extracted, error_text, extract_messages

KEPT_STREAM_FIELDS = ("ended", "error", "dropped_bytes")  # what the analysis keeps of a stream record


@pickled_by_fields
@dataclass(slots=True)
class Decoded:
    """One exchange as the analysis's cross-exchange steps read it (analyzer/outputs/analysis.py).

    ``auth``: its OAuth step's record when it is one (then nothing else applies); ``error_text`` and
    ``without_times`` are read from its body and stream record before they are dropped."""

    exchange: Exchange
    extracted: Extracted
    auth: dict[str, Any] | None
    error_text: str | None
    without_times: bool


def decode_exchange(exchange: Exchange, keep_details: bool) -> Decoded:
    """The per-exchange part of the analysis: its messages, auth step, error text; without
    ``keep_details`` its bodies dropped (and its stream record cut unless it is an auth step)."""
    extracted = extract_messages(exchange, whole=keep_details)
    step = None if extracted.claims_jsonrpc else auth_step(exchange)
    if step is not None:
        # An OAuth exchange stays one even with MCP headers on it (the TypeScript SDK sends
        # MCP-Protocol-Version on its metadata requests), unless it carries JSON-RPC.
        decoded = Decoded(exchange, extracted, auth_record(exchange, step), None, False)
    else:
        without_times = exchange.is_event_stream and (exchange.stream or {}).get("event_times") is None
        decoded = Decoded(exchange, extracted, None, error_text(exchange), without_times)
        if not keep_details and exchange.stream is not None:  # event times are in the messages now
            exchange.stream = {k: exchange.stream.get(k) for k in KEPT_STREAM_FIELDS}
    if not keep_details:
        exchange.request_body = exchange.response_body = None
        if extracted.sse_events:  # the analysis reads the messages, not the events
            extracted.sse_events = []
    return decoded
