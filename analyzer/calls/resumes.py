"""Resume attempts that brought nothing: a client whose event stream was cut sends GET with Last-Event-ID,
and the connection is refused (no response: mitmproxy's "Connect call failed") or the server refuses it (a
non-2xx status). Such a GET carries no message, so pairing never sees it; the cut call's verdict names it
instead of saying the stream was never resumed."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_blackbox.analyzer.model.records import Call, Exchange

# How long after a stream's end a GET with Last-Event-ID is taken for its resume. The SDKs give up within
# seconds (TS and Python after 2 tries, Go after 5, 1 s x 1.5^n); a server's retry: may ask for longer.
RESUME_WINDOW = 60.0
SHOWN = 3  # attempts described one by one; the others counted


@dataclass(frozen=True, slots=True)
class ResumeAttempt:
    t: float  # when the GET was sent
    last_event_id: str
    refusal: str  # the connection's error, or the status that refused it


def refused_resume(exchange: Exchange, messages: int) -> ResumeAttempt | None:
    """The exchange as a refused resume attempt: a GET with Last-Event-ID that got no 2xx and no message."""
    last_event_id = exchange.request_headers.get("last-event-id")
    if exchange.method != "GET" or last_event_id is None or messages or exchange.ok:
        return None
    refusal = f"HTTP {exchange.status}" if exchange.status is not None else exchange.error or "no response"
    return ResumeAttempt(exchange.t_request, last_event_id, refusal)


def attempts_after(call: Call, attempts: list[ResumeAttempt]) -> list[ResumeAttempt]:
    """The attempts (of the call's scope) that resumed this call's stream: sent within RESUME_WINDOW of its
    end, naming an event id the stream carried (any, when its only id was a priming event's)."""
    exchange = call.exchange
    ended = exchange.t_error or exchange.t_end or exchange.t_response or exchange.t_request
    ids = {m.event_id for m in (*call.notifications, *call.responses) if m.exchange is exchange and m.event_id}
    return [
        a for a in attempts if exchange.t_request < a.t <= ended + RESUME_WINDOW and (not ids or a.last_event_id in ids)
    ]


def describe(call: Call, attempts: list[ResumeAttempt]) -> str:
    """ "resume tried 2 times (GET with Last-Event-ID 0), refused each time: 1.0 s after the stream ended:
    Connect call failed ...; 2.5 s after: ...", without its ending (the caller's "not resumed later")."""
    exchange = call.exchange
    ended = exchange.t_error or exchange.t_end or exchange.t_response or exchange.t_request
    ids = ", ".join(dict.fromkeys(a.last_event_id for a in attempts))
    times = "time" if len(attempts) == 1 else "times"
    each = [f"{a.t - ended:.1f} s after the stream ended: {a.refusal}" for a in attempts[:SHOWN]]
    if len(attempts) > SHOWN:
        each.append(f"{len(attempts) - SHOWN} more")
    return f"resume tried {len(attempts)} {times} (GET with Last-Event-ID {ids}), refused each time: {'; '.join(each)}"
