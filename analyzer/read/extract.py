"""Finding the JSON-RPC messages in an exchange: JSON bodies, batches and SSE events.

Bodies are decoded first (gzip, deflate, br, zstd; any charset). Each SSE event
gets its arrival time from the addon's record; a capture without one (plain
mitmdump, HAR) gives every event the time the response ended.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from mitmproxy.net import encoding

from mcp_blackbox.analyzer.model.pickling import pickled_by_fields
from mcp_blackbox.analyzer.model.records import C2S, S2C, Exchange, Message
from mcp_blackbox.analyzer.model.slim import (
    capture_wide_body,
    error_facts,
    interned,
    reference,
    request_facts,
    result_shape,
)
from mcp_blackbox.analyzer.wire.sse_framing import SseEvent, split_sse

ID_DEPTH = 32  # levels of a list or object id that are kept (see _shallow)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


# Python's json reads NaN and Infinity, which are not JSON (a browser's JSON.parse refuses them): a body
# holding one is malformed, and must not carry them into the export and the report.
STRICT_JSON = json.JSONDecoder(parse_constant=_not_json)


@pickled_by_fields
@dataclass(slots=True)
class Extracted:
    """The messages of one exchange and what could not be read in it."""

    messages: list[Message] = field(default_factory=list)
    sse_events: list[SseEvent] = field(default_factory=list)
    endpoint: str | None = None  # a 2024-11-05 stream's `endpoint` event
    claims_jsonrpc: bool = False  # some object in it has a "jsonrpc" member, valid or not
    problems: list[str] = field(default_factory=list)


def decode_body(body: bytes | None, headers: dict[str, str]) -> tuple[str | None, str | None]:
    """The body as text, or (None, why not)."""
    if not body:
        return None, None
    data = body
    for coding in reversed([c.strip().lower() for c in headers.get("content-encoding", "").split(",") if c.strip()]):
        if coding == "identity":
            continue
        try:
            decoded = encoding.decode(data, coding)
        except (ValueError, TypeError) as e:  # TypeError: a text-to-text codec (rot13) named as the coding
            return None, f"cannot decode {coding} body: {e}"
        if not isinstance(decoded, bytes):  # a bytes-to-text codec (utf-8) named as the coding
            return None, f"cannot decode {coding} body: {coding} is not a content-encoding"
        data = decoded
    charset = "utf-8"
    for part in headers.get("content-type", "").split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            charset = value.strip('"').lower()
    try:
        text, problem = data.decode(charset), None
    except LookupError:  # unknown, or not a text encoding (base64)
        return data.decode("utf-8", "replace"), f"unknown charset {charset}, read as UTF-8"
    except ValueError:  # not valid in it; some codecs (idna) fail even with "replace"
        try:
            text, problem = data.decode(charset, "replace"), f"body is not valid {charset}"
        except ValueError:
            return data.decode("utf-8", "replace"), f"body is not valid {charset}, read as UTF-8"
    if charset not in ("utf-8", "utf8") and not text.isascii():
        # Some codecs (raw_unicode_escape, utf-7) yield lone surrogates, which no UTF-8 output can hold.
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text, problem


def message_from(
    value: Any, exchange: Exchange, direction: str, t: float, event_id: str | None = None, *, whole: bool = False
) -> Message:
    """Judge one parsed JSON value as a JSON-RPC 2.0 message; ``whole`` keeps the parsed value."""
    if not isinstance(value, dict):
        return Message(exchange, direction, "invalid", None, None, None, t, "not a JSON object", event_id)
    rpc_id = _shallow(interned(value.get("id")))
    method = interned(value["method"]) if isinstance(value.get("method"), str) else None
    kind, problem = _kind(value, rpc_id, method)
    message = Message(exchange, direction, kind, rpc_id, method, value if whole else None, t, problem, event_id)
    params = value.get("params")
    if kind == "request" and method is not None:
        message.detail = request_facts(method, params)
    elif kind == "notification" and isinstance(params, dict):
        message.detail = reference(params.get("progressToken", params.get("requestId")))
    elif kind == "result":
        message.detail = result_shape(value["result"])
        if not whole:
            message.body = capture_wide_body(value["result"])
    elif kind == "error":
        message.detail = error_facts(value["error"])
    return message


def _shallow(value: Any, depth: int = ID_DEPTH) -> Any:
    """An id as kept: a list or an object (an invalid id) cut below ``depth`` levels, its deeper parts "...";
    a number too large for a float (1e999) as its text.

    The export and the report nest an id a few levels deeper than the body did, so an id nested as deep as
    the JSON parser goes would make documents that no JSON parser reads back; an infinite one, no JSON at all.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, list):
        return [_shallow(item, depth - 1) for item in value] if depth else "..."
    if isinstance(value, dict):
        return {key: _shallow(item, depth - 1) for key, item in value.items()} if depth else "..."
    return value


def _kind(value: dict[str, Any], rpc_id: Any, method: str | None) -> tuple[str, str | None]:
    """The message's kind, and why it is not valid JSON-RPC 2.0 (then the kind is "invalid")."""
    if "method" in value:
        if method is None:
            return "invalid", "method is not a string"
        if "id" in value and not (isinstance(rpc_id, str | int) and not isinstance(rpc_id, bool)):
            return "invalid", f"request id {rpc_id!r} is not a string or an integer"
        kind = "request" if "id" in value else "notification"
    elif "result" in value and "error" in value:
        return "invalid", "both result and error"
    elif "result" in value:
        kind = "result"
    elif "error" in value:
        error = value["error"]
        valid = isinstance(error, dict) and isinstance(error.get("code"), int)
        if not (valid and isinstance(error.get("message"), str)):
            return "invalid", "error is not an object with an integer code and a string message"
        kind = "error"
    else:
        return "invalid", "neither method, result nor error"
    if value.get("jsonrpc") != "2.0":
        return "invalid", 'jsonrpc member is not "2.0"'
    return kind, None


def _read_text(
    out: Extracted, text: str, exchange: Exchange, direction: str, t: float, event_id: str | None, whole: bool
) -> None:
    """The messages in one body or event, added to ``out``."""
    try:
        value = STRICT_JSON.decode(text)
    except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than the parser goes
        # The start of the text goes into the problem: it is what a reader needs to see.
        problem = f"not JSON: {e}: {text[:120]!r}"
        out.messages.append(Message(exchange, direction, "invalid", None, None, None, t, problem, event_id))
        return
    items = value if isinstance(value, list) else [value]
    if not items:
        out.messages.append(Message(exchange, direction, "invalid", None, None, None, t, "empty batch", event_id))
    for item in items:
        out.claims_jsonrpc = out.claims_jsonrpc or (isinstance(item, dict) and "jsonrpc" in item)
        out.messages.append(message_from(item, exchange, direction, t, event_id, whole=whole))


def extract_messages(exchange: Exchange, *, whole: bool = False) -> Extracted:
    """``whole`` keeps every message as parsed (for a report's details) instead of slimmed."""
    out = Extracted()
    text, problem = decode_body(exchange.request_body, exchange.request_headers)
    if problem:
        out.problems.append(f"request: {problem}")
    if text and text.strip():
        _read_text(out, text, exchange, C2S, exchange.t_request, None, whole)
    if exchange.status is None:
        return out
    text, problem = decode_body(exchange.response_body, exchange.response_headers)
    if problem:
        out.problems.append(f"response: {problem}")
    if exchange.is_event_stream:
        _extract_events(exchange, text or "", out, whole)
    elif text and text.strip() and (_looks_like_json(exchange, text)):
        t = exchange.t_end or exchange.t_response or exchange.t_request
        _read_text(out, text, exchange, S2C, t, None, whole)
    return out


ERROR_TEXT_LIMIT = 300  # characters of an HTTP error's body kept for the verdict and the export


def error_text(exchange: Exchange) -> str | None:
    """What an HTTP error's body said ("upstream overloaded"), whitespace folded and cut: the only
    part of a body the analysis keeps once the messages are read."""
    if exchange.status is None or exchange.status < 400:
        return None
    text, problem = decode_body(exchange.response_body, exchange.response_headers)
    folded = " ".join((text or "").split())
    if not folded:
        return problem
    return folded if len(folded) <= ERROR_TEXT_LIMIT else folded[: ERROR_TEXT_LIMIT - 1] + "…"


def _looks_like_json(exchange: Exchange, text: str) -> bool:
    """A JSON content type, or a body that starts like JSON (servers mislabel error bodies)."""
    return "json" in exchange.content_type or text.lstrip()[:1] in ("{", "[")


def _extract_events(exchange: Exchange, text: str, out: Extracted, whole: bool) -> None:
    events, _ = split_sse(text.encode("utf-8"))
    out.sse_events = events
    times = (exchange.stream or {}).get("event_times") or []
    fallback = exchange.t_end or exchange.t_error or exchange.t_response or exchange.t_request
    retries = [e.retry for e in events if e.retry is not None]
    exchange.sse_retry = retries[-1] if retries else None
    for position, event in enumerate(events):
        t = times[position] if position < len(times) and times[position] is not None else fallback
        t = max(t, exchange.t_request)  # an answer cannot precede its request, whatever a clock said
        if event.event == "endpoint":
            out.endpoint = event.data.strip()
            continue
        if not event.data:
            continue  # priming event, or a retry-only event
        _read_text(out, event.data, exchange, S2C, t, event.id, whole)
