"""One verdict per call: its outcome, the layer that failed, flags and the evidence.

``classify_call`` reads the answer top to bottom in the order of the layers:
transport (did an answer come, did the stream finish), protocol (is the answer
JSON, is it a JSON-RPC response, is it an error), interaction (is it an
``input_required`` round), application (did the tool fail); the first outcome
that applies wins, and each check that led to it is written into the evidence.
Then the rules that override that reading (``OVERRIDES``: the cancel, bytes
the capture dropped, an exception on stderr) apply in one order for every
transport. ARCHITECTURE, "Outcome precedence", states both steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_blackbox.analyzer.calls.gateway import gateway_sign
from mcp_blackbox.analyzer.calls.resumes import ResumeAttempt, attempts_after, describe
from mcp_blackbox.analyzer.calls.schema_check import SchemaCheck, check_structured_content
from mcp_blackbox.analyzer.calls.stdio_calls import exception_in, short_command
from mcp_blackbox.analyzer.model.records import C2S, Call, Exchange, Message, Verdict
from mcp_blackbox.analyzer.model.slim import MISSING, OMITTED, ResultShape, interned, json_kind
from mcp_blackbox.analyzer.model.vocabulary import Flag, Outcome
from mcp_blackbox.analyzer.wire.metadata import StreamEnd

MODERN = "2026-07-28"
# 2026-07-28 sends some JSON-RPC errors with an HTTP status of their own (as the official Python SDK maps
# them): there, such a status is the protocol working, not a mismatch. Any other code keeps 200.
MODERN_ERROR_STATUS = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}
# Ends the evidence that only the whole capture can give ("not resumed later in the capture"): the live
# verdict, which sees one exchange as it ends, leaves those lines out.
CAPTURE_WIDE = " in the capture"
# What the recorder's HTTP/2 reset endings mean: mitmproxy words a RST_STREAM from either peer "stream reset
# by client", so the words are not the side (addon/error_side.py reads it from mitmproxy's stream state).
RESET_SIDES = {
    StreamEnd.SERVER_RESET: "the server reset the HTTP/2 stream (RST_STREAM from the server's connection)",
    StreamEnd.STREAM_RESET: "an HTTP/2 stream reset; which side sent it is not known",
}


@dataclass
class CaptureFacts:
    """What the whole capture says that a single call's verdict needs."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> Tool from tools/list
    versions: dict[str, str] = field(default_factory=dict)  # scope -> negotiated protocol version
    servers: set[str] = field(default_factory=set)  # serverInfo "name/version" seen
    # scope -> GETs with Last-Event-ID that brought nothing (analyzer/calls/resumes.py): no pairing sees them
    refused_resumes: dict[str, list[ResumeAttempt]] = field(default_factory=dict)


@dataclass
class Ruling:
    """A verdict while it is being made: the rules below add evidence and flags as they read the call."""

    outcome: Outcome
    evidence: list[str]
    flags: list[Flag] = field(default_factory=list)
    error_code: int | None = None
    error_message: str | None = None

    def verdict(self, line: Callable[[str], str] = str) -> Verdict:
        evidence = tuple(line(text) for text in self.evidence)
        return Verdict(self.outcome, evidence, tuple(sorted(set(self.flags))), self.error_code, self.error_message)


def replayable(tool: str | None, facts: CaptureFacts) -> bool:
    """The capture's tools/list marks the tool read-only or idempotent: running it again changes nothing."""
    hints = (facts.tools.get(tool or "") or {}).get("annotations")
    return isinstance(hints, dict) and bool(hints.get("readOnlyHint") or hints.get("idempotentHint"))


def judge(call: Call, facts: CaptureFacts) -> Verdict:
    """The call's verdict, as the analysis keeps it: most evidence lines ("HTTP 200", "POST /mcp") recur
    across calls, so one copy of each."""
    return classify_call(call, facts, interned)


def protocol_version(call: Call, facts: CaptureFacts) -> str | None:
    if call.request.facts is not None and call.request.facts.version is not None:
        return call.request.facts.version
    return call.exchange.request_headers.get("mcp-protocol-version") or facts.versions.get(call.scope)


def classify_call(call: Call, facts: CaptureFacts, line: Callable[[str], str] = str) -> Verdict:
    """The call's verdict: what its answer says, read layer by layer over its transport, then the rules that
    override that reading (OVERRIDES), in one order for every transport. ``line`` keeps each evidence line."""
    ruling = _read_answer(call, facts)
    if call.request.kind == "request":  # a notification has no answer to cancel, cut or break
        for _, override in OVERRIDES:
            ruling = override(call, ruling)
    return ruling.verdict(line)


def _read_answer(call: Call, facts: CaptureFacts) -> Ruling:
    exchange = call.exchange
    if exchange.stdio is not None:
        return _classify_stdio(call, facts)
    evidence = [f"{exchange.method} {exchange.path}"]
    if call.request.kind == "notification":
        return _classify_notification(call, evidence)
    return _classify_request(call, facts, evidence)


def _partial_capture(call: Call, verdict: Ruling) -> Ruling:
    """TRUNCATED_IN_CAPTURE when a stream that carried the call was longer than the recorder kept
    (``mcp_stream_max_body``): the client got every byte, the capture has the head and the tail.
    The verdict is the one those show; the flag says that bytes in between are not in the file."""
    dropped = max(((e.stream or {}).get("dropped_bytes") or 0 for e in call.exchanges), default=0)
    if not isinstance(dropped, int) or dropped <= 0:
        return verdict
    verdict.flags.append(Flag.TRUNCATED_IN_CAPTURE)
    verdict.evidence.append(
        f"the capture dropped {dropped} bytes of the stream (mcp_stream_max_body); the client got them"
    )
    if verdict.outcome is Outcome.STREAM_INCOMPLETE and (call.exchange.stream or {}).get("ended") == StreamEnd.COMPLETE:
        verdict.evidence.append("the stream ended complete: its answer may be among the dropped bytes")
    return verdict


def _classify_request(call: Call, facts: CaptureFacts, evidence: list[str]) -> Ruling:
    exchange = call.exchange
    # Transport: an HTTP answer, and a finished one.
    if exchange.status is None and not call.responses:
        evidence.append(f"no HTTP response: {exchange.error or 'the capture ends before one'}")
        return Ruling(Outcome.NO_RESPONSE, evidence)
    if exchange.status is not None:
        evidence.append(f"HTTP {exchange.status}")
        if exchange.content_type:
            evidence.append(f"content-type {exchange.content_type}")
        if not 200 <= exchange.status < 300:
            return _classify_http_error(call, exchange.status, facts, evidence)
    answer = _final_answer(call.responses, evidence)
    if _cut_before_an_answer(exchange, answer):
        # Headers came, then the connection ended before the declared body did: a transfer cut, not a
        # server that wrote bad JSON (the bytes that came are partial by the transfer's own account).
        evidence.append(f"the response body was cut: {exchange.error}")
        ruling = Ruling(Outcome.STREAM_INCOMPLETE, evidence)
    elif answer is None:
        return _classify_unanswered(call, facts, evidence)
    else:
        ruling = _classify_answer(call, answer, facts, evidence, _answer_flags(call, answer, evidence))
    return _more_than_one(call.responses, ruling)


def _cut_before_an_answer(exchange: Exchange, answer: Message | None) -> bool:
    """The body was cut in transfer before an answer was read from it: none came, or only this cut body, unreadable."""
    return _body_cut(exchange) and (answer is None or (answer.kind == "invalid" and answer.exchange is exchange))


def _classify_answer(
    call: Call, answer: Message, facts: CaptureFacts, evidence: list[str], flags: list[Flag]
) -> Ruling:
    # Protocol: JSON, a JSON-RPC response, not an error.
    if answer.kind == "invalid":
        if answer.problem and answer.problem.startswith("not JSON"):
            evidence.append(f"response is {answer.problem}")
            return Ruling(Outcome.MALFORMED_JSON, evidence, flags)
        evidence.append(f"invalid JSON-RPC response: {answer.problem}")
        return Ruling(Outcome.INVALID_ENVELOPE, evidence, flags)
    if answer.error is not None:
        code, message = answer.error
        evidence.append(f"JSON-RPC error {code}: {message}")
        return Ruling(Outcome.JSONRPC_ERROR, evidence, flags, code, message)
    assert answer.shape is not None  # a result
    if call.method == "tools/call":
        return _classify_tool_result(call, answer.shape, facts, evidence, flags, cut=_cut_in_capture(answer))
    if answer.shape.result_type == "input_required":
        evidence.append('resultType "input_required": another round follows')
        return Ruling(Outcome.INPUT_REQUIRED, evidence, flags)
    evidence.append("result")
    return Ruling(Outcome.SUCCESS, evidence, flags)


def _after_cancel(call: Call, verdict: Ruling) -> Ruling:
    """The cancel ends the attempt when no answer came before it: CANCELLED instead of NO_RESPONSE or
    STREAM_INCOMPLETE, whatever the connection did afterwards, and instead of what a late answer said
    (kept, and flagged when it is a result: the server did the work anyway). A protocol fault the
    server made before the client gave up (a wrong id, a body that is not JSON) stays what it is."""
    cancelled_at = call.cancelled_at
    if cancelled_at is None:
        return verdict
    answer = call.responses[0] if call.responses else None
    late_answer = _answer_after(answer, cancelled_at)
    unanswered = verdict.outcome in (Outcome.NO_RESPONSE, Outcome.STREAM_INCOMPLETE)
    if late_answer is None and not unanswered and not _failed_after(call, answer, cancelled_at):
        return verdict
    evidence = [
        *verdict.evidence,
        f"the client sent notifications/cancelled {cancelled_at - call.request.t:.2f} s after the request",
    ]
    flags = list(verdict.flags)
    if late_answer is not None:
        late = f"{late_answer.t - cancelled_at:.2f} s after the cancel"
        if late_answer.kind == "result":
            evidence.append(f"the result arrived {late}: the server did the work anyway")
            flags.append(Flag.ANSWERED_AFTER_CANCEL)
        else:
            evidence.append(f"the error arrived {late}")
    return Ruling(Outcome.CANCELLED, evidence, flags, verdict.error_code, verdict.error_message)


def _answer_after(answer: Message | None, cancelled_at: float) -> Message | None:
    """The call's first response when it is a result or an error that came after the cancel."""
    if answer is not None and answer.t > cancelled_at and answer.kind in ("result", "error"):
        return answer
    return None


def _failed_after(call: Call, answer: Message | None, cancelled_at: float) -> bool:
    """Whether the transport failed or the server answered wrongly after the cancel: the client had given up."""
    exchange = call.exchange
    failed_at = answer.t if answer is not None else (exchange.t_response or exchange.t_error)
    return failed_at is not None and failed_at > cancelled_at


def _classify_notification(call: Call, evidence: list[str]) -> Ruling:
    """A notification's exchange: accepted, refused by HTTP, or answered with a JSON-RPC error it should not
    have had (what came back on the exchange is in ``call.stray``: pair.py)."""
    exchange = call.exchange
    if exchange.status is None:
        evidence.append(f"no HTTP response: {exchange.error or 'the capture ends before one'}")
        return Ruling(Outcome.NO_RESPONSE, evidence)
    evidence.append(f"HTTP {exchange.status}")
    errors = [m.error for m in call.stray if m.error is not None]
    if 200 <= exchange.status < 300 and errors:
        code, message = errors[0]
        evidence.append(f"the notification was answered with JSON-RPC error {code}: {message}")
        return Ruling(Outcome.JSONRPC_ERROR, evidence, error_code=code, error_message=message)
    if 200 <= exchange.status < 300:
        evidence.append("notification accepted")
        return Ruling(Outcome.ACCEPTED, evidence)
    if exchange.error_text:
        evidence.append(f"body: {exchange.error_text!r}")
    return Ruling(Outcome.HTTP_ERROR, evidence, error_message=exchange.error_text)


def _classify_http_error(call: Call, status: int, facts: CaptureFacts, evidence: list[str]) -> Ruling:
    on_exchange = [m for m in call.responses if m.exchange is call.exchange]
    errors = [m.error for m in on_exchange if m.error is not None]
    if errors:
        code, message = errors[0]
        evidence.append(f"JSON-RPC error {code}: {message}")
        flags = []
        if protocol_version(call, facts) == MODERN and MODERN_ERROR_STATUS.get(code) == status:
            evidence.append(f"HTTP {status} is the status 2026-07-28 gives error {code}")
        elif 400 <= status < 500:
            flags.append(Flag.HTTP_STATUS_MISMATCH)
        return Ruling(Outcome.JSONRPC_ERROR, evidence, flags, code, message)
    flags = []
    if any(m.kind == "result" for m in on_exchange):
        evidence.append(f"body holds a JSON-RPC result, but HTTP {status} failed the exchange")
        flags.append(Flag.HTTP_STATUS_MISMATCH)
    elif call.exchange.error_text:
        evidence.append(f"body is not a JSON-RPC error: {call.exchange.error_text!r}")
    else:
        evidence.append("body is not a JSON-RPC error")
    evidence.extend(_behind_a_gateway(call, status, facts))
    return Ruling(Outcome.HTTP_ERROR, evidence, flags, error_message=call.exchange.error_text)


def _behind_a_gateway(call: Call, status: int, facts: CaptureFacts) -> list[str]:
    """A gateway's 502 or 504 to a write: it may have reached the server, and the gateway may have sent it to
    more than one upstream; none of that is in a capture taken in front of it."""
    sign = gateway_sign(call.exchange) if status in (502, 504) else None
    if sign is None or call.method != "tools/call" or replayable(call.tool, facts):
        return []
    return [
        f"{sign[0]} answered {status} ({sign[1]}): the write may have run, possibly more than once "
        "(the gateway's own retries are invisible here)"
    ]


def _body_cut(exchange: Exchange) -> bool:
    """A plain (not event-stream) response whose transfer ended in an error after its headers."""
    return exchange.status is not None and not exchange.is_event_stream and bool(exchange.error)


def _final_answer(responses: list[Message], evidence: list[str]) -> Message | None:
    """The answer that counts: the first of them (``_more_than_one`` flags the others)."""
    answers = _answers(responses)
    if len(answers) > 1:
        evidence.append(f"{len(answers)} responses to one request; the first counts")
    return answers[0] if answers else None


def _answers(responses: list[Message]) -> list[Message]:
    return [m for m in responses if m.kind in ("result", "error", "invalid")]


def _more_than_one(responses: list[Message], ruling: Ruling) -> Ruling:
    if len(_answers(responses)) > 1:
        ruling.flags.append(Flag.DUPLICATE_RESPONSE)
    return ruling


def _answer_flags(call: Call, answer: Message, evidence: list[str]) -> list[Flag]:
    if answer.exchange is call.exchange:
        return []
    carrier = answer.exchange
    resumed = carrier.request_headers.get("last-event-id")
    if carrier.method == "GET" and resumed is not None:
        stream = call.exchange.stream or {}
        if stream.get("ended") == StreamEnd.COMPLETE and not call.exchange.error:
            # The server closed the stream cleanly after a priming event (and its retry:): the answer was
            # always going to come on the reconnect. Not late; planned.
            evidence.append(f"answer delivered on the planned reconnect (GET with Last-Event-ID {resumed})")
            return []
        evidence.append(f"answer arrived on a resumed GET (Last-Event-ID {resumed})")
        return [Flag.LATE_RESPONSE]
    evidence.append(f"answer arrived on {carrier.method} {carrier.path}")
    return []


def _classify_unanswered(call: Call, facts: CaptureFacts, evidence: list[str]) -> Ruling:
    """No JSON-RPC answer: a response with another id, an event stream that ended without one, a 202 whose
    answer never came on a stream, or a body with none in it."""
    exchange = call.exchange
    if call.stray:
        stray = call.stray[0]
        evidence.append(f"response id {stray.id!r} does not match request id {call.request.id!r}")
        return Ruling(Outcome.INVALID_ENVELOPE, evidence)
    if exchange.is_event_stream:
        return _unanswered_stream(call, facts, evidence)
    if exchange.status == 202:
        evidence.append("202 Accepted; the answer never arrived on a stream" + CAPTURE_WIDE)
        return Ruling(Outcome.NO_RESPONSE, evidence)
    evidence.append("no JSON-RPC response in the body")
    return Ruling(Outcome.MALFORMED_JSON, evidence)


def _unanswered_stream(call: Call, facts: CaptureFacts, evidence: list[str]) -> Ruling:
    """An event stream that ended without the answer: its events, how it ended, and whether it could be resumed."""
    exchange = call.exchange
    events = sum(1 for n in call.notifications if n.exchange is exchange)
    evidence.append(f"{events} events, no final response")
    evidence.extend(_how_stream_ended(exchange))
    if protocol_version(call, facts) == MODERN:
        evidence.append("2026-07-28: a closed stream cancels the request (cancellation or loss)")
    elif tried := attempts_after(call, facts.refused_resumes.get(call.scope, [])):
        evidence.append(f"{describe(call, tried)}; not resumed later" + CAPTURE_WIDE)
    else:
        evidence.append("not resumed later" + CAPTURE_WIDE)
    return Ruling(Outcome.STREAM_INCOMPLETE, evidence)


def _how_stream_ended(exchange: Exchange) -> list[str]:
    """The addon's record of the stream's end (and which side reset it); without one, the connection's error."""
    stream = exchange.stream
    if stream is None:
        if exchange.error:
            return [f"stream ended: {exchange.error}"]
        return ["capture without the addon: how the stream ended is not recorded"]
    why = f" ({stream['error']})" if stream.get("error") else ""
    lines = [f"stream ended: {stream.get('ended')}{why}"]
    if stream.get("ended") in RESET_SIDES:
        lines.append(RESET_SIDES[stream["ended"]])
    return lines


def _classify_tool_result(
    call: Call, result: ResultShape, facts: CaptureFacts, evidence: list[str], flags: list[Flag], *, cut: bool
) -> Ruling:
    if result.kind != "object":
        evidence.append(f"tools/call result is not an object but {json_article(result.kind)}")
        return Ruling(Outcome.INVALID_TOOL_RESULT, evidence, flags)
    # 2026-07-28: clients MUST treat an absent resultType as "complete".
    result_type = "complete" if result.result_type is MISSING else result.result_type
    if result_type == "input_required":
        evidence.append('resultType "input_required": another round follows')
        return Ruling(Outcome.INPUT_REQUIRED, evidence, flags)
    if result_type != "complete":
        evidence.append(f"unknown resultType {result_type!r}")
        return Ruling(Outcome.INVALID_TOOL_RESULT, evidence, flags)
    if result.content != "array":
        what = "missing" if result.content is MISSING else json_article(json_kind(result.content))
        evidence.append(f"content is {what}, not an array")
        return Ruling(Outcome.INVALID_TOOL_RESULT, evidence, flags)
    is_error = False if result.is_error is MISSING else result.is_error
    if not isinstance(is_error, bool):
        evidence.append(f"isError is {json_article(json_kind(is_error))}, not a boolean")
        return Ruling(Outcome.INVALID_TOOL_RESULT, evidence, flags)
    if is_error:
        evidence.append("isError: true")
        return Ruling(Outcome.TOOL_ERROR, evidence, flags, error_message=result.first_text)
    # 2026-07-28 defines resultType; earlier versions have none, and an absent one says nothing there.
    absent = result.result_type is MISSING and protocol_version(call, facts) == MODERN
    evidence.append("tool result complete" + (" (no resultType: complete)" if absent else ""))
    # After the completion line: what a flag says is the last word on the call.
    flags = [*flags, *_success_flags(call, result, facts, evidence, cut=cut)]
    return Ruling(Outcome.TOOL_SUCCESS, evidence, flags)


def json_article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _success_flags(
    call: Call, result: ResultShape, facts: CaptureFacts, evidence: list[str], *, cut: bool
) -> list[Flag]:
    """The flags of a tool result that completed; ``cut``: the capture kept only the head of the answer."""
    flags: list[Flag] = []
    if result.content_count == 0 and result.structured is MISSING:
        evidence.append("isError false, but nothing returned")
        flags.append(Flag.EMPTY_RESULT)
    if result.reads_like_error:
        evidence.append(f"isError false, but the content reads like an error: {(result.first_text or '')[:80]!r}")
        flags.append(Flag.SUSPECT_SOFT_ERROR)
    schema = (facts.tools.get(call.tool or "") or {}).get("outputSchema")
    if isinstance(schema, dict):
        flags.extend(_output_schema_flags(result, schema, evidence, cut=cut))
    return flags


def _output_schema_flags(result: ResultShape, schema: dict[str, Any], evidence: list[str], *, cut: bool) -> list[Flag]:
    """The structuredContent checked against the tool's outputSchema (from tools/list)."""
    if cut:
        # The client got the whole answer; the capture kept its head. A structuredContent missing from the
        # head, or cut in it, may be whole in what the client got: no verdict from bytes the capture lacks.
        evidence.append("structuredContent not checked against the outputSchema: the capture cut the answer")
        return []
    if result.structured is OMITTED:
        evidence.append("structuredContent too large to check against the outputSchema")
        return []
    if result.structured is MISSING:
        check = SchemaCheck(problems=("no structuredContent",))
    else:
        check = check_structured_content(result.structured, schema)
    flags: list[Flag] = []
    if check.problems:
        evidence.append(f"structuredContent breaks the tool's outputSchema: {'; '.join(check.problems)}")
        flags.append(Flag.OUTPUT_SCHEMA_VIOLATION)
    if check.unchecked is not None:
        evidence.append(f"structuredContent not checked against the outputSchema: {check.unchecked}")
    return flags


# ---------------------------------------------------------------------------- stdio (analyzer/read/stdio_load.py)


def _classify_stdio(call: Call, facts: CaptureFacts) -> Ruling:
    """A call over a stdio server's pipes: no HTTP, so no status; the transport fails when the server died
    or the client closed its stdin before the answer, and a line on stdout that is not JSON breaks the call
    that was waiting (the loader puts it on that call's stdin exchange)."""
    exchange, session = call.exchange, call.exchange.stdio
    assert session is not None
    where = "the server's stdin" if call.direction == C2S else "the server's stdout"
    evidence = [f"stdio: {call.request.kind} on {where} ({short_command(session.command_text)})"]
    if call.request.kind == "notification":
        evidence.append("notification written to the server")
        return Ruling(Outcome.ACCEPTED, evidence)
    # Lines that broke the call (not JSON) are on its own exchange; answers arrive on stdout lines of their own.
    broken = [m for m in call.responses if m.exchange is exchange and m.kind == "invalid"]
    answers = [m for m in call.responses if m not in broken]
    answer = _final_answer(answers, evidence)
    if broken:
        return _more_than_one(answers, _stdio_broken_line(call, broken, answer, evidence))
    if answer is None:
        return _stdio_unanswered(call, evidence)
    return _more_than_one(answers, _stdio_answered(call, answer, facts, evidence))


def _stdio_broken_line(call: Call, broken: list[Message], answer: Message | None, evidence: list[str]) -> Ruling:
    """A line that is not JSON, or JSON that is no JSON-RPC message (no id to pair it by), came while the call
    waited: the call is broken whether or not an answer came after it."""
    first = broken[0]
    not_json = (first.problem or "").startswith("not JSON")
    what = "a line that is not JSON" if not_json else "a line that is not JSON-RPC"
    if answer is not None:
        late = (answer.t - first.t) * 1000
        evidence.append(
            f"the answer ({answer.kind}) came {late:.0f} ms after {what}: a client that skips a bad line got "
            "it, one that stops at it did not"
        )
    else:
        evidence.append(_stdio_end(call, f"no answer after {what}"))
    if len(broken) > 1:
        evidence.append(f"{len(broken)} such lines during the call; the first:")
    # The cause last: it is the line a gate or a table shows (call_record.reason).
    said = first.problem if not_json else f"not JSON-RPC: {first.problem}"
    evidence.append(f"a line on stdout while the call waited is {said}")
    return Ruling(Outcome.MALFORMED_JSON if not_json else Outcome.INVALID_ENVELOPE, evidence)


def _stdio_unanswered(call: Call, evidence: list[str]) -> Ruling:
    """No answer: a response with another id, or none before the session or the capture ended."""
    if call.stray:
        stray = call.stray[0]
        evidence.append(f"response id {stray.id!r} does not match request id {call.request.id!r}")
        return Ruling(Outcome.INVALID_ENVELOPE, evidence)
    answered_on = "stdout" if call.direction == C2S else "stdin"
    return Ruling(Outcome.NO_RESPONSE, [*evidence, _stdio_end(call, f"no answer on {answered_on}")])


def _stdio_answered(call: Call, answer: Message, facts: CaptureFacts, evidence: list[str]) -> Ruling:
    """An answer, through the protocol and tool checks an HTTP one goes through (a line cut in the capture is
    judged on its head)."""
    flags: list[Flag] = []
    if _cut_in_capture(answer):
        evidence.append(f"the answer's line was {answer.problem}: the client got it whole; judged on its head")
        flags.append(Flag.TRUNCATED_IN_CAPTURE)
    return _classify_answer(call, answer, facts, evidence, flags)


def _cut_in_capture(answer: Message) -> bool:
    """The capture kept only the head of the answer (a stdio line past the wrapper's line_limit, which the
    loader reads from its head: analyzer/read/stdio_load.py); the client got it whole. An HTTP stream the
    recorder cut keeps whole events (its head and its tail), so an answer read from it is whole."""
    return bool(answer.problem and answer.problem.startswith("cut in the capture"))


def _exception_on_stderr(call: Call, ruling: Ruling) -> Ruling:
    """A success during which the stdio server printed an exception on stderr: flagged, the outcome kept."""
    if ruling.outcome in (Outcome.SUCCESS, Outcome.TOOL_SUCCESS) and (shown := exception_in(call.stderr)):
        after = (shown.t_first - call.request.t) * 1000
        ruling.evidence.append(
            f"stderr {after:.0f} ms after the request shows an exception: {shown.text[:120]!r} "
            f"({len(call.stderr)} stderr line(s) during the call)"
        )
        ruling.flags.append(Flag.STDERR_DURING_CALL)
    return ruling


def _stdio_end(call: Call, what: str) -> str:
    """How the session ended for a call without an answer: "no answer on stdout: the server exited ..."."""
    session = call.exchange.stdio
    assert session is not None
    ended = session.end_after(call.request.t)
    if ended is None:
        return f"{what}: still waiting when the capture ended"
    _, at, words = ended
    after = at - call.request.t
    return (
        f"{what}: {words} {after * 1000:.0f} ms after the request"
        if after < 1
        else f"{what}: {words} {after:.2f} s after the request"
    )


# What overrides the reading of a request's answer, in this order, whatever its transport; each is a no-op
# where it does not apply. ARCHITECTURE ("Outcome precedence") lists them by these names, in this order
# (tests/unit/test_precedence.py).
OVERRIDES: tuple[tuple[str, Callable[[Call, Ruling], Ruling]], ...] = (
    ("the client's cancel", _after_cancel),
    ("bytes the capture dropped", _partial_capture),
    ("an exception on a stdio server's stderr", _exception_on_stderr),
)
