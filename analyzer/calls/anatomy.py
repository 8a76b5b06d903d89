"""Timeout anatomy: for a call that got no answer, what happened between its request and its end.

Every MCP client's "Request timed out" thread asks the same four things: did the
request reach the server, what did the server send before the end, how did it
end (and who ended it), and how long did the client wait. The wire answers them.
Times are milliseconds after the request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from mcp_blackbox.analyzer.model.contract import EndingRecord, ServerSent
from mcp_blackbox.analyzer.model.records import C2S, Call, Exchange
from mcp_blackbox.analyzer.model.stdio_session import StdioSession
from mcp_blackbox.analyzer.model.vocabulary import Ending, Transport
from mcp_blackbox.analyzer.wire.jsonrpc import CANCELLED, PROGRESS
from mcp_blackbox.analyzer.wire.metadata import StreamEnd

# mitmproxy's words for an HTTP/2 RST_STREAM from either peer (it says "by client" for both).
H2_RESET = "stream reset by client"
RESET_CODE = re.compile(H2_RESET + r" \((\w+)\)")
# mitmproxy's words for a connection to the server it could not make, or for being told to drop one.
PROXY_WORDS = ("connect call failed", "connection refused", "name or service not known", "resolve", "killed", "shut")


def ending(call: Call) -> EndingRecord | None:
    """The anatomy of a request that got no JSON-RPC answer before it ended; None for the others."""
    if call.request.kind != "request" or call.direction != C2S or _answered_in_time(call):
        return None
    exchange = call.exchange
    start = call.request.t
    how, at, detail = _how_it_ended(call, exchange)
    return EndingRecord(
        reached_server_ms=_ms(exchange.t_response, start),
        server_sent=_server_sent(call, at, start),
        ended_by=how.value,
        waited_ms=_ms(at, start),  # till the end: the cancel, the close, the status, the capture's end
        detail=detail,
    )


def _answered_in_time(call: Call) -> bool:
    """A result or an error came, and not after the client's cancel."""
    answer = next((m for m in call.responses if m.kind in ("result", "error")), None)
    return answer is not None and (call.cancelled_at is None or answer.t <= call.cancelled_at)


def _server_sent(call: Call, at: float | None, start: float) -> ServerSent:
    """The notifications the server sent on the call up to its end (``at``; all of them if it has none)."""
    sent = [m for m in call.notifications if m.direction != C2S and (at is None or m.t <= at)]
    progress = sum(1 for m in sent if m.method == PROGRESS)
    return ServerSent(
        progress=progress,
        other_notifications=len(sent) - progress,
        last_ms=_ms(max((m.t for m in sent), default=None), start),
    )


def _how_it_ended(call: Call, exchange: Exchange) -> tuple[Ending, float | None, str | None]:
    """Who or what ended a call that got no answer, when, and in whose words: the client's cancel first (it
    ends the call whatever the connection did next), then the stdio session's end or the HTTP exchange's."""
    if call.cancelled_at is not None:
        return Ending.CLIENT_CANCEL, call.cancelled_at, CANCELLED
    session = getattr(exchange, "stdio", None)  # (tests hand in look-alikes of an Exchange)
    if session is not None:
        return _how_stdio_ended(call, session)
    return _how_http_ended(call, exchange)


def _how_stdio_ended(call: Call, session: StdioSession) -> tuple[Ending, float | None, str | None]:
    """A stdio server's run: its exit, its stdout closing, the client closing stdin; else the capture's end."""
    ended = session.end_after(call.request.t)
    if ended is not None:
        return ended
    return (
        Ending.CAPTURE_END,
        max((m.t for m in call.notifications), default=call.request.t),
        "still open when the capture ended",
    )


@dataclass(frozen=True)
class _HttpEnd:
    """What an HTTP exchange's record says about its end, read once for the rules of ``_HTTP_ENDINGS``. The
    properties read the exchange only when a rule asks (tests hand in look-alikes with only some attributes)."""

    exchange: Exchange
    ended: Any  # the recorder's word for the end ("server-reset", "client-abort", "complete", ...), if any
    error: Any  # the connection's or the stream's error, if any
    at: float | None  # when the exchange ended or failed
    said: str | None  # the recorder's and mitmproxy's words, as the detail
    text: str  # the same, lowercased, to search

    @classmethod
    def of(cls, exchange: Exchange) -> _HttpEnd:
        stream = exchange.stream or {}
        ended, error = stream.get("ended"), exchange.error or stream.get("error")
        said = " ".join(str(part) for part in (ended, error) if part) or None
        text = said.lower() if said else ""
        return cls(exchange, ended, error, exchange.t_end or exchange.t_error, said, text)

    @property
    def h2_reset(self) -> bool:
        return H2_RESET in self.text

    @property
    def reset_code(self) -> str:
        return _reset_code(self.text)

    @property
    def proxy_said_so(self) -> bool:
        return any(word in self.text for word in PROXY_WORDS) or self.ended in (
            StreamEnd.KILLED,
            StreamEnd.PROXY_SHUTDOWN,
        )

    @property
    def error_status(self) -> bool:
        return self.exchange.status is not None and self.exchange.status >= 400

    @property
    def closed_with_status(self) -> bool:
        """Headers came, then the exchange ended."""
        return self.exchange.status is not None and self.exchange.t_end is not None


class _Rule(NamedTuple):
    """A condition on how an exchange ended, and the ending, detail and time it gives."""

    when: Callable[[_HttpEnd], bool]
    ending: Ending
    detail: Callable[[_HttpEnd], str | None]
    at: Callable[[_HttpEnd], float | None] = lambda end: end.at


# How an unanswered HTTP exchange ended: the first rule whose condition holds wins. A side the recorder read
# (addon/error_side.py) beats mitmproxy's words; the client's words beat the proxy's; an HTTP error status
# beats the close that followed it; a close with no words is the server's.
_HTTP_ENDINGS: tuple[_Rule, ...] = (
    # The recorder saw the reset come from the server (addon/error_side.py).
    _Rule(
        lambda end: end.ended == StreamEnd.SERVER_RESET,
        Ending.SERVER_CUT,
        lambda end: f"the server reset the HTTP/2 stream{end.reset_code}",
    ),
    # An HTTP/2 reset whose side is not known: mitmproxy words one from either peer "by client".
    _Rule(
        lambda end: end.ended == StreamEnd.STREAM_RESET or (end.ended is None and end.h2_reset),
        Ending.RESET,
        lambda end: f"HTTP/2 stream reset{end.reset_code}, by a side the capture does not know",
    ),
    _Rule(
        lambda end: end.ended == StreamEnd.CLIENT_ABORT and end.h2_reset,
        Ending.CLIENT_CLOSE,
        lambda end: f"the client reset the HTTP/2 stream{end.reset_code}",
    ),
    _Rule(
        lambda end: end.ended == StreamEnd.CLIENT_ABORT or "client" in end.text,
        Ending.CLIENT_CLOSE,
        lambda end: end.said,
    ),
    _Rule(lambda end: end.proxy_said_so, Ending.PROXY, lambda end: end.said),
    _Rule(
        lambda end: end.error_status,
        Ending.HTTP_STATUS,
        lambda end: f"HTTP {end.exchange.status}",
        at=lambda end: end.exchange.t_response or end.at,
    ),
    # The stream or connection closed from the server's side: cleanly ("complete") or not.
    _Rule(lambda end: end.ended is not None or bool(end.error), Ending.SERVER_CUT, lambda end: end.said),
    _Rule(
        lambda end: end.closed_with_status and end.exchange.is_event_stream,
        Ending.SERVER_CUT,
        lambda end: "the stream closed without the answer",
    ),
    _Rule(
        lambda end: end.closed_with_status,
        Ending.NEVER_ANSWERED,
        lambda end: f"HTTP {end.exchange.status} without the answer",
    ),
)


def _how_http_ended(call: Call, exchange: Exchange) -> tuple[Ending, float | None, str | None]:
    """The first of ``_HTTP_ENDINGS`` that holds; else the exchange was still open when the capture ended."""
    end = _HttpEnd.of(exchange)
    for rule in _HTTP_ENDINGS:
        if rule.when(end):
            return rule.ending, rule.at(end), rule.detail(end)
    last = max((m.t for m in call.notifications), default=exchange.t_response)
    return Ending.CAPTURE_END, last, "still open when the capture ended"


def _reset_code(text: str) -> str:
    """`` (RST_STREAM CANCEL)`` from mitmproxy's "stream reset by client (CANCEL)"; empty if it has none."""
    code = RESET_CODE.search(text)
    return f" (RST_STREAM {code.group(1).upper()})" if code else ""


def _ms(t: float | None, start: float) -> float | None:
    return None if t is None else round((t - start) * 1000, 3)


def describe(anatomy: EndingRecord, transport: str = Transport.HTTP) -> str:
    """The anatomy as one sentence, for the report's details and the Markdown summary."""
    parts = []
    reached = anatomy["reached_server_ms"]
    if transport == Transport.STDIO:  # no headers: the line went to the server's stdin as it was written
        parts.append("written to the server's stdin")
    else:
        parts.append(
            "no response headers came back" if reached is None else f"response headers after {_seconds(reached)}"
        )
    sent = anatomy["server_sent"]
    if sent["progress"] or sent["other_notifications"]:
        counted = ((sent["progress"], "progress"), (sent["other_notifications"], "other"))
        what = " and ".join(f"{n} {name}" for n, name in counted if n)
        parts.append(f"then the server sent {what} notification(s), the last at {_seconds(sent['last_ms'])}")
    else:
        parts.append("the server sent nothing before the end")
    ended = Ending(anatomy["ended_by"])
    detail = f" ({anatomy['detail']})" if anatomy["detail"] else ""
    waited = anatomy["waited_ms"]
    if ended is Ending.CAPTURE_END:
        parts.append(f"no end: still waiting {_seconds(waited)} after the request when the capture ended")
    else:
        parts.append(f"ended by {ended.value}{detail}; the client waited {_seconds(waited)}")
    return "; ".join(parts)


def ending_in_brief(anatomy: EndingRecord) -> str:
    """Who ended it and when: ``server-cut after 56 ms (upstream-error ...)``."""
    detail = f" ({anatomy['detail']})" if anatomy["detail"] else ""
    return f"{anatomy['ended_by']} after {_seconds(anatomy['waited_ms'])}{detail}"


def _seconds(ms: float | None) -> str:
    if ms is None:
        return "an unknown time"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"
