"""The verdict of one exchange as it ends: what the recorder says on its console and marks in mitmweb.

The same rules as the offline analysis (extract, pair, ``classify_call``, ``Outcome.is_failure``),
applied to the one exchange that just ended. What one exchange cannot know yet is said as
*pending*, never as a failure: an answer announced by 202 comes later on a stream, and a
stream cut after an event id can be resumed (GET with Last-Event-ID) and still deliver it.
Server-to-client requests are answered by a later POST. Only the client's own requests on
this exchange are judged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from mitmproxy import http
from mitmproxy.version import FLOW_FORMAT_VERSION

from mcp_blackbox.analyzer.calls.classify import (
    CAPTURE_WIDE,
    MODERN,
    CaptureFacts,
    classify_call,
    protocol_version,
)
from mcp_blackbox.analyzer.calls.pair import pair_messages, scope_of
from mcp_blackbox.analyzer.model.records import C2S, S2C, Call, Exchange, Message, Verdict
from mcp_blackbox.analyzer.model.vocabulary import Outcome
from mcp_blackbox.analyzer.read.extract import extract_messages
from mcp_blackbox.analyzer.read.load import LoadReport, exchange_from_state
from mcp_blackbox.analyzer.redaction.redactor import REDACTED
from mcp_blackbox.analyzer.wire.jsonrpc import PROGRESS

REASON_LIMIT = 240  # characters of evidence on a console line or a mitmweb comment


@dataclass(frozen=True, slots=True)
class LiveVerdict:
    failed: bool
    pending: bool  # an answer may still arrive on another exchange
    reason: str | None  # "OUTCOME: evidence" of the first failing (or pending) call
    # Facts the console line shows, from the same reading (so the exchange is parsed once):
    events: int | None = None  # SSE events with data or a retry (not priming), for an event stream
    delivered: str | None = None  # the first method the server sent on it, progress aside (what a GET carried)

    @property
    def text(self) -> str | None:
        if self.failed:
            return f"FAILED: {self.reason}"
        if self.pending:
            return f"pending: {self.reason}"
        return None


NOTHING_TO_SAY = LiveVerdict(False, False, None)


def judge_flow(flow: http.HTTPFlow) -> LiveVerdict:
    """The verdict of a flow as it ends (its metadata already holding the addon's stream record)."""
    return judge_flow_state(flow_state(flow))


def flow_state(flow: http.HTTPFlow) -> dict[str, Any]:
    """The parts of ``flow.get_state()`` that the analysis reads (``FLOW_FIELDS``, as the file reader
    decodes them): the whole state would copy both connections, which costs more than the verdict."""
    return {
        "id": flow.id,
        "type": flow.type,
        "version": FLOW_FORMAT_VERSION,
        "request": flow.request.get_state(),
        "response": flow.response.get_state() if flow.response is not None else None,
        "error": flow.error.get_state() if flow.error is not None else None,
        "metadata": flow.metadata,
        "client_conn": {"id": flow.client_conn.id, "peername": flow.client_conn.peername},
        "timestamp_created": flow.timestamp_created,
        "websocket": flow.websocket is not None or None,
    }


def judge_flow_state(state: dict[str, Any]) -> LiveVerdict:
    """The verdict of a flow's state, as a flow file holds it."""
    exchange = exchange_from_state(state, "live", 0, LoadReport(), keep_all=False)
    return judge_exchange(exchange) if exchange is not None else NOTHING_TO_SAY


def judge_exchange(exchange: Exchange) -> LiveVerdict:
    exchange.scope = scope_of(exchange, {})
    extracted = extract_messages(exchange)
    messages = extracted.messages
    # A client resumes a cut stream only if it saw an event id (a priming event counts).
    resumable = exchange.is_event_stream and any(event.id for event in extracted.sse_events)
    verdict = _verdict(_client_calls(exchange, messages), resumable)
    # The console line's facts, from this same reading: the exchange is parsed once.
    events = sum(1 for e in extracted.sse_events if not e.is_priming) if exchange.is_event_stream else None
    return replace(verdict, events=events, delivered=_first_delivered(messages))


def _client_calls(exchange: Exchange, messages: list[Message]) -> list[Call]:
    """The calls the client made on this exchange, paired with what came back on it (``messages`` is sorted
    in place)."""
    # As the analysis orders them: requests before answers stamped with the same instant.
    messages.sort(key=attrgetter("direction"))
    messages.sort(key=attrgetter("t"))
    return [
        call for call in pair_messages(messages).calls if call.request.exchange is exchange and call.direction == C2S
    ]


def _first_delivered(messages: list[Message]) -> str | None:
    """The first method the server sent on the exchange, progress aside (what a GET carried)."""
    sent = (m.method for m in messages if m.direction == S2C and m.method is not None and m.method != PROGRESS)
    return next(sent, None)


def _verdict(calls: list[Call], resumable: bool) -> LiveVerdict:
    pending: LiveVerdict | None = None
    for call in calls:
        verdict = classify_call(call, CaptureFacts())
        if not verdict.outcome.is_failure:
            continue
        if _may_still_be_answered(call, verdict, resumable):
            pending = pending or LiveVerdict(False, True, _pending_reason(call, verdict))
            continue
        return LiveVerdict(True, False, _reason(call, verdict))
    return pending or NOTHING_TO_SAY


def _may_still_be_answered(call: Call, verdict: Verdict, resumable: bool) -> bool:
    if verdict.outcome is Outcome.NO_RESPONSE and call.exchange.status == 202:
        return True  # the answer comes on the session's stream (2024-11-05, or a 2025 server's choice)
    # 2026-07-28 has no resumption: a closed stream cancels the request.
    modern = protocol_version(call, CaptureFacts()) == MODERN
    return verdict.outcome is Outcome.STREAM_INCOMPLETE and resumable and not modern


def _pending_reason(call: Call, verdict: Verdict) -> str:
    if verdict.outcome is Outcome.NO_RESPONSE:
        return "202 Accepted: the answer comes on the session's stream"
    stream = call.exchange.stream or {}
    return f"stream ended ({stream.get('ended') or call.exchange.error}) before the answer; it can be resumed"


def _reason(call: Call, verdict: Verdict) -> str:
    exchange = call.exchange
    # The console line shows the status and content type of a successful exchange already; what the whole
    # capture would add ("not resumed later in the capture") is not known yet.
    said = {f"HTTP {exchange.status}", f"content-type {exchange.content_type}"} if exchange.ok else set()
    lines = [line for line in verdict.evidence[1:] if line not in said and not line.endswith(CAPTURE_WIDE)]
    # It quotes what the server said (an error message, a body that is not JSON): redacted, like the export.
    text = f"{verdict.outcome}: {REDACTED.text('; '.join(lines))}" if lines else str(verdict.outcome)
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"
