"""Pairing requests with what answered them, keyed by (scope, direction, id).

The scope is the MCP session (Mcp-Session-Id), else the 2024-11-05 SSE session
(the ``session_id`` the ``endpoint`` event names), else the single HTTP exchange
(2026-07-28 is stateless, and so is a 2025 server without sessions). Ids are never
matched alone: both SDKs count from 0 in every session, and client and server
number their requests independently.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from mcp_blackbox.analyzer.model.records import C2S, S2C, Call, Exchange, Finding, Message, Stage
from mcp_blackbox.analyzer.model.vocabulary import Flag
from mcp_blackbox.analyzer.wire.jsonrpc import CANCELLED, PROGRESS


def scope_of(exchange: Exchange, legacy_streams: dict[str, str]) -> str:
    # Interned: every exchange of a session shares one copy.
    if exchange.stdio is not None:  # a stdio server's run (analyzer/read/stdio_load.py)
        return exchange.stdio.scope
    if session := exchange.session_id:
        return sys.intern(f"session:{session}")
    if session := exchange.legacy_session:
        return sys.intern(f"sse-session:{session}")
    if (session := legacy_streams.get(exchange.flow_id)) is not None:
        return sys.intern(f"sse-session:{session}")
    return f"exchange:{exchange.flow_id}"


def legacy_session_of_endpoint(endpoint: str) -> str | None:
    """The session an HTTP+SSE ``endpoint`` event names in its URL's query."""
    # Split by hand: urlsplit() raises on what an event may carry (an unclosed "[" in the host).
    query = dict(parse_qsl(endpoint.partition("?")[2].partition("#")[0]))
    return query.get("sessionId") or query.get("session_id")


@dataclass
class Pairing:
    calls: list[Call] = field(default_factory=list)
    orphans: list[Message] = field(default_factory=list)  # answers to no request in the capture


def _opposite(direction: str) -> str:
    return S2C if direction == C2S else C2S


def pair_messages(messages: list[Message]) -> Pairing:
    """``messages`` in the order they happened, each in the scope of its exchange."""
    pairer = Pairer()
    for message in messages:
        pairer.feed(message)
    return pairer.out


class Pairer:
    """Pairing fed one message at a time, in the order they happened: ``out`` grows as they come.

    A windowed analysis (analyzer/windowed.py) drops what no later message can refer to: ``forget_flow``
    once an exchange's messages are all in, ``forget_call`` once a call is final."""

    def __init__(self) -> None:
        self.out = Pairing()
        self.by_key: dict[tuple[str, str, str], Call] = {}
        self.by_request_exchange: dict[str, list[Call]] = {}
        self.by_progress_token: dict[tuple[str, str], Call] = {}

    def feed(self, message: Message) -> None:
        out, by_key = self.out, self.by_key
        by_request_exchange, by_progress_token = self.by_request_exchange, self.by_progress_token
        scope = message.exchange.scope
        if message.kind == "request" or (message.kind == "notification" and message.direction == C2S):
            call = Call(request=message, scope=scope)
            call.add_exchange(message.exchange)
            out.calls.append(call)
            by_request_exchange.setdefault(message.exchange.flow_id, []).append(call)
            if message.kind == "request":
                key = (scope, message.direction, message.key_id)
                if key in by_key and not _resent_unanswered(by_key[key], message):
                    call.found(Finding(Stage.PAIRING, f"id {message.id!r} was used before in {scope}", Flag.ID_REUSED))
                by_key[key] = call
                if message.facts is not None and message.facts.token is not None:
                    by_progress_token[(scope, message.facts.token)] = call
            elif message.method == CANCELLED:
                _attach_cancel(message, scope, by_key)
            return
        if message.kind == "notification":
            # A server notification tied to no call (list_changed, a stray log) is part of no verdict.
            target = _notification_target(message, scope, by_progress_token, by_request_exchange)
            if target is not None:
                target.note(message)
                target.add_exchange(message.exchange)
            return
        # A result, an error, or something that should have been one.
        key = (scope, _opposite(message.direction), message.key_id)
        answered = by_key.get(key) if message.id is not None else None
        if answered is None:
            carried = by_request_exchange.get(message.exchange.flow_id, [])
            on_exchange = _answerable(carried, message)
            if on_exchange is None and (refused := _lone_notification(carried, message)) is not None:
                # The exchange's answer to a notification (a 404 "Session not found", say): that notification's
                # row says it, never a second row for the same body.
                refused.note_stray(message)
                return
            if message.id is None or message.kind == "invalid":
                # Unreadable, or an error without a usable id: it answers the exchange that carried it.
                if on_exchange is not None:
                    on_exchange.responses.append(message)
                    return
            elif on_exchange is not None:
                on_exchange.note_stray(message)
            out.orphans.append(message)
            return
        answered.responses.append(message)
        answered.add_exchange(message.exchange)

    def forget_flow(self, flow_id: str) -> None:
        self.by_request_exchange.pop(flow_id, None)

    def forget_call(self, call: Call) -> None:
        request = call.request
        key = (call.scope, request.direction, request.key_id)
        if self.by_key.get(key) is call:
            del self.by_key[key]
        if request.facts is not None and request.facts.token is not None:
            token = (call.scope, request.facts.token)
            if self.by_progress_token.get(token) is call:
                del self.by_progress_token[token]


def _answerable(calls: list[Call], message: Message) -> Call | None:
    """The one request on this exchange that a response travelling the other way could answer."""
    requests = [c for c in calls if c.request.kind == "request" and c.request.direction != message.direction]
    return requests[0] if len(requests) == 1 else None


def _lone_notification(calls: list[Call], message: Message) -> Call | None:
    """The notification an answer travelling the other way came back on, when the exchange carried it alone."""
    opposite = [c for c in calls if c.request.direction != message.direction]
    if len(opposite) == 1 and opposite[0].request.kind == "notification":
        return opposite[0]
    return None


def _notification_target(
    message: Message,
    scope: str,
    by_progress_token: dict[tuple[str, str], Call],
    by_request_exchange: dict[str, list[Call]],
) -> Call | None:
    if message.method == PROGRESS and (call := by_progress_token.get((scope, message.ref or ""))):
        return call
    # Log messages and the like belong to the request whose stream carried them.
    requests = [
        c
        for c in by_request_exchange.get(message.exchange.flow_id, [])
        if c.request.kind == "request" and c.request.direction != message.direction
    ]
    return requests[0] if len(requests) == 1 else None


def _attach_cancel(message: Message, scope: str, by_key: dict[tuple[str, str, str], Call]) -> None:
    if message.ref is None:
        return
    target = by_key.get((scope, message.direction, message.ref))
    if target is not None:
        target.note(message)


def _resent_unanswered(earlier: Call, message: Message) -> bool:
    """The same request again under its id, after the first was refused before any JSON-RPC answer (the
    TypeScript SDK re-sends it so after a 401 and new credentials): one request, not a reused id."""
    before, now = earlier.request.facts, message.facts
    status = earlier.exchange.status
    return (
        status is not None
        and status >= 400
        and not any(r.key_id == earlier.request.key_id for r in earlier.responses)
        and earlier.request.method == message.method
        and before is not None
        and now is not None
        and before.digest == now.digest
    )
