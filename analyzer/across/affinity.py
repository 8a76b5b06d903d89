"""Lost session affinity (issue 21, part 6): a session the server created, whose very next requests are
answered 404 within moments, while other sessions of the same server work: a load balancer without
stickiness sent them to an instance that never saw the session. A session that worked first and then got
404 was forgotten or expired (a server restart, an idle timeout): not this.

Fed every call in the order they started; keeps the sessions of the last AFFINITY_WINDOW seconds only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.model.vocabulary import Outcome

AFFINITY_WINDOW = 10.0  # seconds after a session's initialize in which a 404 on it is not an expiry
LISTED = 5  # sessions named in the note


@dataclass(slots=True)
class _Server:
    hurt: dict[str, list[str]] = field(default_factory=dict)  # session -> its calls answered 404
    working: set[str] = field(default_factory=set)  # sessions with an answered call, up to two kept


class Affinity:
    def __init__(self) -> None:
        self.opened: dict[str, float] = {}  # session id -> when its initialize was answered
        self.used: set[str] = set()  # sessions of ``opened`` that had a request answered after it
        self.servers: dict[str, _Server] = {}

    def feed(self, call: Call) -> None:
        exchange = call.exchange
        session = exchange.session_id
        if exchange.stdio is not None or not session:
            return
        self._forget(call.request.t)
        server = self.servers.setdefault(exchange.server, _Server())
        if call.method == "initialize" and call.outcome is Outcome.SUCCESS:
            self.opened[session] = call.t_end or call.request.t
        elif exchange.status == 404 and session in self.opened and session not in self.used:
            server.hurt.setdefault(session, []).append(call.call_id)
        elif exchange.ok and session in self.opened and session not in server.hurt:
            self.used.add(session)
            if len(server.working) < 2:
                server.working.add(session)

    def _forget(self, now: float) -> None:
        for session in [s for s, t in self.opened.items() if t < now - AFFINITY_WINDOW]:
            del self.opened[session]
            self.used.discard(session)

    def notes(self) -> list[str]:
        """One note per server whose sessions lost their instance while others worked."""
        notes = []
        for name, server in self.servers.items():
            if not server.hurt or not server.working - set(server.hurt):
                continue
            sessions = list(server.hurt.items())
            listed = "; ".join(f"session {s[:12]}: {', '.join(calls)}" for s, calls in sessions[:LISTED])
            more = f"; and {len(sessions) - LISTED} more" if len(sessions) > LISTED else ""
            notes.append(
                f"lost session affinity at {name}: {len(sessions)} session(s) got 404 within "
                f"{AFFINITY_WINDOW:g} s of a successful initialize while other sessions of the same server "
                f"worked ({listed}{more}). The usual cause is a load balancer without stickiness in front of "
                "stateful MCP servers: a session's requests reach an instance that never saw it"
            )
        return notes
