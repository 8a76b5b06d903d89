"""The details panel's data: the bytes of the calls worth opening, read from the capture files a second time.

The analysis keeps no bodies, so the chosen calls' exchanges (report.DETAIL_LIMIT of them, eventful ones
first) are read again, and only theirs are kept: each request and response with its headers and body (an
event stream's as its events), how its stream ended, and a stdio line as such; everything a peer wrote
passes through the redactor.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from typing import Any

from mcp_blackbox.analyzer.model.records import Exchange
from mcp_blackbox.analyzer.read.extract import decode_body
from mcp_blackbox.analyzer.read.load import LoadReport, read_exchanges
from mcp_blackbox.analyzer.read.stdio_load import is_stdio_capture, stdio_exchanges
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.report_calls import Kept
from mcp_blackbox.analyzer.wire.inputs import expand_captures
from mcp_blackbox.analyzer.wire.sse_framing import split_sse

BODY_LIMIT = 16_384  # characters of one body shown
EVENTS_SHOWN = 500  # events of one event stream shown


def details(paths: list[str], chosen: Iterable[Kept], origin: float, redactor: Redactor) -> dict[str, Any]:
    """The details of the ``chosen`` calls, by call id in their order: evidence, exchanges (with their bytes)
    and stderr lines."""
    chosen = list(chosen)
    exchanges = _exchange_details(paths, chosen, origin, redactor)
    return {kept.call_id: _call_detail(kept, exchanges, origin) for kept in chosen}


def _call_detail(kept: Kept, exchanges: dict[str, dict[str, Any]], origin: float) -> dict[str, Any]:
    """One call's details: ``exchanges`` holds its exchanges' (by flow id); its texts were redacted when kept."""
    return {
        "evidence": list(kept.evidence),
        "exchanges": [exchanges[flow] for flow in kept.flow_ids if flow in exchanges],
        # A stdio server's stderr lines written during the call: its own text, untrusted like any other.
        "stderr": [{"t": round((t - origin) * 1000, 3), "text": text} for t, text in kept.stderr],
    }


def _exchange_details(
    paths: list[str], chosen: list[Kept], origin: float, redactor: Redactor
) -> dict[str, dict[str, Any]]:
    """The detail of each exchange of the ``chosen`` calls, by flow id."""
    wanted = {flow for kept in chosen for flow in kept.flow_ids}
    # A second pass over the files for the chosen flows only: the analysis kept no bodies.
    stdio = [path for path in expand_captures(paths) if is_stdio_capture(path)]
    flows = [path for path in paths if path not in stdio]
    exchanges = _http_details(flows, wanted, origin, redactor)
    # The stdio captures are read a second time only if a chosen call is a stdio one.
    if any(kept.stdio for kept in chosen):
        exchanges.update(_stdio_details(stdio, wanted, origin, redactor))
    return exchanges


def _http_details(paths: list[str], wanted: set[str], origin: float, redactor: Redactor) -> dict[str, dict[str, Any]]:
    """The detail of each ``wanted`` exchange of the captures ``paths`` (all but stdio ones), by flow id."""
    return {
        exchange.flow_id: _exchange_detail(exchange, origin, redactor)
        for exchange in read_exchanges(paths, LoadReport(), keep_all=True, only=wanted)
        if exchange.flow_id in wanted  # a HAR's entries are all read
    }


def _stdio_details(paths: list[str], wanted: set[str], origin: float, redactor: Redactor) -> dict[str, dict[str, Any]]:
    """The detail of each ``wanted`` line of the stdio captures ``paths``, by flow id."""
    return {
        exchange.flow_id: _stdio_detail(exchange, origin, redactor)
        for path in paths
        for exchange in stdio_exchanges(path)
        if exchange.flow_id in wanted
    }


def _stdio_detail(exchange: Exchange, origin: float, redactor: Redactor) -> dict[str, Any]:
    """A line of a stdio capture, in the shape of an exchange's detail: the line is the "request" body whichever
    way it went, and ``stdio`` says which (the page draws it as a line, not as an HTTP request)."""
    facts = (exchange.stream or {}).get("stdio_line") or {}
    body = exchange.request_body if exchange.request_body is not None else exchange.response_body
    command = exchange.stdio.command_text if exchange.stdio is not None else exchange.path
    return {
        "flow": exchange.flow_id,
        "t": round((exchange.t_request - origin) * 1000, 3),
        "request": {
            "line": f"{exchange.method} {redactor.text(command)}",
            "headers": {},
            "body": _shown(redactor.text((body or b"").decode("utf-8", "replace"))),
        },
        "response": None,
        "error": exchange.error,
        "stream": {"ended": None, "error": None, "bytes": facts.get("bytes"), "dropped_bytes": None},
        "stdio": {
            "stream": facts.get("stream"),
            "bytes": facts.get("bytes"),
            "truncated": facts.get("truncated", False),
            "not_utf8": facts.get("not_utf8", False),
        },
    }


def _exchange_detail(exchange: Exchange, origin: float, redactor: Redactor) -> dict[str, Any]:
    """An HTTP exchange as the page's detail shows it: the request (line, headers, body), the response if one
    came (an event stream's body as its events), the error, how the stream ended; each through ``redactor``."""
    request_text, _ = decode_body(exchange.request_body, exchange.request_headers)
    response_text, problem = decode_body(exchange.response_body, exchange.response_headers)
    detail: dict[str, Any] = {
        "flow": exchange.flow_id,
        "t": round((exchange.t_request - origin) * 1000, 3),
        "request": {
            "line": f"{exchange.method} {redactor.url(exchange.url)}",
            "headers": redactor.headers(exchange.request_headers),
            "body": _shown(redactor.text(request_text or "")),
        },
        "response": None,
        "error": exchange.error,
        "stream": _stream_end(exchange),
    }
    if exchange.status is not None:
        detail["response"] = _response(exchange, response_text or problem, redactor)
        if exchange.is_event_stream:
            detail["events"] = _events(exchange, response_text or "", origin, redactor)
    return detail


def _stream_end(exchange: Exchange) -> dict[str, Any]:
    """How the response's stream ended, its error, its bytes and the bytes dropped (None where unknown)."""
    return {k: (exchange.stream or {}).get(k) for k in ("ended", "error", "bytes", "dropped_bytes")}


def _response(exchange: Exchange, text: str | None, redactor: Redactor) -> dict[str, Any]:
    """The response's status, headers and body (``text``: the decoded body, or why it could not be decoded);
    an event stream's body is none here: its events are shown instead."""
    return {
        "status": exchange.status,
        "headers": redactor.headers(exchange.response_headers),
        "body": None if exchange.is_event_stream else _shown(redactor.text(text or "")),
    }


def _events(exchange: Exchange, text: str, origin: float, redactor: Redactor) -> list[dict[str, Any]]:
    events, _ = split_sse(text.encode("utf-8"))
    times = (exchange.stream or {}).get("event_times") or []
    out = []
    for n, event in enumerate(events[:EVENTS_SHOWN]):
        t = times[n] if n < len(times) and times[n] is not None else exchange.t_end
        out.append({
            "t": round((t - origin) * 1000, 3) if t else None,
            "id": event.id,
            "event": event.event,
            "data": _shown(redactor.text(event.data)),
        })  # fmt: skip
    return out


def _shown(text: str) -> str:
    """Pretty JSON where the text is JSON; cut to BODY_LIMIT characters."""
    with contextlib.suppress(ValueError, RecursionError):  # RecursionError: nested too deeply to indent
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text if len(text) <= BODY_LIMIT else text[:BODY_LIMIT] + f"\n… {len(text) - BODY_LIMIT} more characters"
