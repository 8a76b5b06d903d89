"""One call as the export contract has it (docs/ARCHITECTURE.md, "Export contract")."""

from __future__ import annotations

from mcp_blackbox.analyzer.calls.anatomy import ending, ending_in_brief
from mcp_blackbox.analyzer.model.contract import CALL_COLUMNS, CallRecord, EndingRecord, StderrRecord
from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.model.vocabulary import Outcome
from mcp_blackbox.analyzer.outputs.wallclock import iso_utc
from mcp_blackbox.analyzer.wire.inputs import capture_name

COLUMNS = list(CALL_COLUMNS)  # the CSV's and the frame's columns: CallRecord's keys, in order
STDERR_LIMIT = 50  # stderr lines a call's record carries (the first ones: an exception's start is there)


def call_record(call: Call, version: str | None) -> CallRecord:
    assert call.outcome is not None and call.layer is not None, "a call is judged before it is recorded"
    exchange = call.exchange
    anatomy = ending(call)
    t_end = call.t_end
    from_streams = [m for m in (*call.responses, *call.notifications) if m.exchange.is_event_stream]
    return CallRecord(
        call_id=call.call_id,
        scope=call.scope,
        direction=call.direction,
        method=call.method,
        tool=call.tool,
        prompt=_target(call, prompt=True),
        resource_uri=_target(call, prompt=False),
        jsonrpc_id=call.request.id,
        outcome=call.outcome,
        layer=call.layer,
        http_status=exchange.status,
        error_code=call.error_code,
        error_message=call.error_message,
        reason=reason(call, anatomy),
        result_excerpt=_result_excerpt(call),
        flags=list(call.flags),
        t_start=call.request.t,
        t_end=t_end,
        started_at=iso_utc(call.request.t),
        ended_at=iso_utc(t_end),
        duration_ms=round((t_end - call.request.t) * 1000, 3) if t_end is not None else None,
        ending=anatomy,
        sse_events=len(from_streams),
        exchanges=[e.flow_id for e in call.exchanges],
        retry_group=call.retry_group,
        attempt=call.attempt,
        retry_origin=call.retry_origin,
        retry_confidence=call.retry_confidence,
        client=call.client.record() if call.client is not None else None,
        session_id=exchange.session_id or exchange.legacy_session,
        # Of the params without _meta (for tools/call: the tool's name and arguments); equal digests, equal calls.
        arguments_digest=call.request.facts.digest if call.request.facts is not None else None,
        protocol_version=version,
        evidence=list(call.evidence),
        source=capture_name(exchange.source),  # the file's name, not the machine's directories
        carrier=exchange.transport,  # http or stdio
        endpoint=exchange.endpoint,  # the URL without its query, or stdio://<the server's command>
        stderr=_stderr(call),
    )


def _stderr(call: Call) -> list[StderrRecord] | None:
    """A stdio call's stderr lines (analyzer/calls/stdio_calls.py): when each was read, and its text (the first
    500 characters); null for an HTTP call."""
    if call.exchange.stdio is None:
        return None
    return [StderrRecord(t=line.t, text=line.text) for line in call.stderr[:STDERR_LIMIT]]


def _result_excerpt(call: Call) -> str | None:
    """The start of the result's first text block (at most analyzer.slim.TEXT_LIMIT characters)."""
    shape = call.responses[0].shape if call.responses else None
    return shape.first_text if shape is not None else None


def reason(call: Call, anatomy: EndingRecord | None) -> str:
    """Why the call has its verdict, in one line: what a gate, a summary or a table row shows.

    A failure is named by its cause (the JSON-RPC error, the HTTP status and what its body said, the
    tool's error text, how a call without an answer ended), which the evidence states before its
    context; anything else by the evidence's last line (for a call that succeeded, what a flag says).
    """
    if call.outcome in (Outcome.NO_RESPONSE, Outcome.STREAM_INCOMPLETE) and anatomy is not None:
        return f"no answer: {ending_in_brief(anatomy)}"
    failed = call.outcome is not None and call.outcome.is_failure
    cause = _failure_cause(call) if failed else None
    if cause is not None:
        return cause
    return call.evidence[-1] if call.evidence else str(call.outcome)


def _failure_cause(call: Call) -> str | None:
    """A failed call's cause, when the call states one: the JSON-RPC error, the HTTP status and what its body
    said, the tool's error text. None: the evidence names it."""
    if call.error_code is not None:
        return f"JSON-RPC error {call.error_code}: {call.error_message or ''}".rstrip(": ")
    if call.outcome is Outcome.HTTP_ERROR and call.exchange.status is not None:
        return f"HTTP {call.exchange.status}" + (f": {call.error_message}" if call.error_message else "")
    if call.outcome is Outcome.TOOL_ERROR:
        return f"isError: {call.error_message}" if call.error_message else "isError: true"
    return None


def _target(call: Call, prompt: bool) -> str | None:
    """The prompt's name (``prompts/get``) or the resource's URI (``resources/...``) that the request names."""
    facts, method = call.request.facts, call.method or ""
    if facts is None or (method == "prompts/get") != prompt:
        return None
    return facts.target
