"""Timeout anatomy: for a call that got no answer, what happened between its request and its end.

Every MCP client's "Request timed out" thread asks the same four things: did the
request reach the server, what did the server send before the end, how did it
end (and who ended it), and how long did the client wait. The wire answers them.
Times are milliseconds after the request.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_blackbox.analyzer.model.records import C2S, Call, Exchange
from mcp_blackbox.analyzer.model.vocabulary import Ending, Transport

PROGRESS = "notifications/progress"
# mitmproxy's words for an HTTP/2 RST_STREAM from either peer (it says "by client" for both).
H2_RESET = "stream reset by client"
RESET_CODE = re.compile(H2_RESET + r" \((\w+)\)")
# mitmproxy's words for a connection to the server it could not make, or for being told to drop one.
PROXY_WORDS = ("connect call failed", "connection refused", "name or service not known", "resolve", "killed", "shut")


def ending(call: Call) -> dict[str, Any] | None:
    """The anatomy of a request that got no JSON-RPC answer before it ended; None for the others."""
    if call.request.kind != "request" or call.direction != C2S:
        return None
    answer = next((m for m in call.responses if m.kind in ("result", "error")), None)
    if answer is not None and (call.cancelled_at is None or answer.t <= call.cancelled_at):
        return None
    exchange = call.exchange
    start = call.request.t
    how, at, detail = _how_it_ended(call, exchange)
    sent = [m for m in call.notifications if m.direction != C2S and (at is None or m.t <= at)]
    progress = sum(1 for m in sent if m.method == PROGRESS)
    return {
        "reached_server_ms": _ms(exchange.t_response, start),
        "server_sent": {
            "progress": progress,
            "other_notifications": len(sent) - progress,
            "last_ms": _ms(max((m.t for m in sent), default=None), start),
        },
        "ended_by": how.value,
        "waited_ms": _ms(at, start),  # till the end: the cancel, the close, the status, the capture's end
        "detail": detail,
    }


def _how_it_ended(call: Call, exchange: Exchange) -> tuple[Ending, float | None, str | None]:
    if call.cancelled_at is not None:
        return Ending.CLIENT_CANCEL, call.cancelled_at, "notifications/cancelled"
    session = getattr(exchange, "stdio", None)  # (tests hand in look-alikes of an Exchange)
    if session is not None:  # a stdio server's run: its exit, its stdout closing, the client closing stdin
        ended = session.end_after(call.request.t)
        if ended is not None:
            return ended
        return (
            Ending.CAPTURE_END,
            max((m.t for m in call.notifications), default=call.request.t),
            ("still open when the capture ended"),
        )
    stream = exchange.stream or {}
    ended, error = stream.get("ended"), exchange.error or stream.get("error")
    at = exchange.t_end or exchange.t_error
    said = " ".join(str(part) for part in (ended, error) if part) or None
    text = said.lower() if said else ""
    if ended == "server-reset":  # the recorder saw the reset come from the server (addon/error_side.py)
        return Ending.SERVER_CUT, at, f"the server reset the HTTP/2 stream{_reset_code(text)}"
    if ended == "stream-reset" or (ended is None and H2_RESET in text):
        # An HTTP/2 reset whose side is not known: mitmproxy words one from either peer "by client".
        return Ending.RESET, at, f"HTTP/2 stream reset{_reset_code(text)}, by a side the capture does not know"
    if ended == "client-abort" and H2_RESET in text:
        return Ending.CLIENT_CLOSE, at, f"the client reset the HTTP/2 stream{_reset_code(text)}"
    if ended == "client-abort" or "client" in text:
        return Ending.CLIENT_CLOSE, at, said
    if any(word in text for word in PROXY_WORDS) or ended in ("killed", "proxy-shutdown"):
        return Ending.PROXY, at, said
    if exchange.status is not None and exchange.status >= 400:
        return Ending.HTTP_STATUS, exchange.t_response or at, f"HTTP {exchange.status}"
    if ended is not None or error:
        # The stream or connection closed from the server's side: cleanly ("complete") or not.
        return Ending.SERVER_CUT, at, said
    if exchange.status is not None and exchange.t_end is not None:
        if exchange.is_event_stream:
            return Ending.SERVER_CUT, at, "the stream closed without the answer"
        return Ending.NEVER_ANSWERED, at, f"HTTP {exchange.status} without the answer"
    last = max((m.t for m in call.notifications), default=exchange.t_response)
    return Ending.CAPTURE_END, last, "still open when the capture ended"


def _reset_code(text: str) -> str:
    """`` (RST_STREAM CANCEL)`` from mitmproxy's "stream reset by client (CANCEL)"; empty if it has none."""
    code = RESET_CODE.search(text)
    return f" (RST_STREAM {code.group(1).upper()})" if code else ""


def _ms(t: float | None, start: float) -> float | None:
    return None if t is None else round((t - start) * 1000, 3)


def describe(anatomy: dict[str, Any], transport: str = Transport.HTTP) -> str:
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


def ending_in_brief(anatomy: dict[str, Any]) -> str:
    """Who ended it and when: ``server-cut after 56 ms (upstream-error ...)``."""
    detail = f" ({anatomy['detail']})" if anatomy["detail"] else ""
    return f"{anatomy['ended_by']} after {_seconds(anatomy['waited_ms'])}{detail}"


def _seconds(ms: float | None) -> str:
    if ms is None:
        return "an unknown time"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"
