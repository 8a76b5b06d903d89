"""Who sent each call: a client identity from what the capture holds, and a lineage across sessions.

A *unit* is what one client certainly owns: an MCP session (or a 2024-11-05 SSE session), or, for calls
outside any session (2026-07-28 is stateless), the client's TCP connection. Units carry what identifies
the software (User-Agent, clientInfo), the connections they used and when they were alive.

A *lineage* links one client's successive units, as far as the capture shows it:
- a unit that used a connection an earlier unit used belongs to that unit's lineage (a connection has
  one client);
- otherwise it joins the lineage of the same software, from the same address and in the same capture
  file, whose last unit had ended when this one began, if exactly one such lineage exists. Another
  capture is another recording: its clients are other processes as far as anything shows. Units
  alive at the same time are different clients (docs/ARCHITECTURE.md, "Client identity"); two or
  more candidates mean the capture cannot tell, and the unit starts a lineage of its own rather
  than guess.
"""

from __future__ import annotations

import bisect
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from mcp_blackbox.analyzer.records import Call

STATELESS_PREFIX = "exchange:"


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Shared by every call of one unit."""

    lineage: str  # "k1", "k2", ...: one client's successive units
    unit: str  # the session scope, or "connection:<id>" outside a session
    address: str | None  # "address:port" the unit's first request came from
    session: str | None
    user_agent: str | None
    client_info: str | None  # clientInfo "name/version"
    protocol_version: str | None
    joined: str  # why the unit is in its lineage

    def record(self) -> dict[str, Any]:
        return {
            "lineage": self.lineage,
            "unit": self.unit,
            "address": self.address,
            "session": self.session,
            "user_agent": self.user_agent,
            "client_info": self.client_info,
            "protocol_version": self.protocol_version,
            "joined": self.joined,
        }


@dataclass(slots=True)
class _Unit:
    name: str
    start: float
    end: float
    calls: list[Call] = field(default_factory=list)
    connections: set[str] = field(default_factory=set)
    user_agent: str | None = None
    client_info: str | None = None
    protocol_version: str | None = None

    @property
    def software(self) -> tuple[str | None, str | None]:
        return (self.user_agent, self.client_info)

    @property
    def host(self) -> str | None:
        address = self.calls[0].exchange.client_addr
        return address.rpartition(":")[0] if address else None

    @property
    def source(self) -> str:
        return self.calls[0].exchange.source


@dataclass(slots=True)
class _Lineage:
    name: str
    software: tuple[str | None, str | None]
    host: str | None
    source: str
    end: float


def unit_of(call: Call) -> str:
    if not call.scope.startswith(STATELESS_PREFIX):
        return call.scope
    return sys.intern(f"connection:{call.exchange.client_conn or call.scope}")


def identify_clients(calls: list[Call], versions: dict[str, str]) -> None:
    """Set ``call.client`` on every call (``calls`` in the order they started)."""
    units: dict[str, _Unit] = {}
    for call in calls:
        name = unit_of(call)
        end = call.t_end or call.request.t
        unit = units.get(name)
        if unit is None:
            unit = units[name] = _Unit(name, call.request.t, end)
        unit.end = max(unit.end, end)
        unit.calls.append(call)
        exchange = call.exchange
        if exchange.client_conn:
            unit.connections.add(exchange.client_conn)
        unit.user_agent = unit.user_agent or exchange.request_headers.get("user-agent")
        facts = call.request.facts
        if facts is not None:
            unit.client_info = unit.client_info or facts.client
            unit.protocol_version = unit.protocol_version or facts.version
        unit.protocol_version = unit.protocol_version or exchange.request_headers.get("mcp-protocol-version")
    for unit in units.values():
        unit.protocol_version = unit.protocol_version or versions.get(unit.name)
    _link(sorted(units.values(), key=lambda u: u.start))


class _Lineages:
    """The lineages so far, with each kind's (software, address, capture) ends kept sorted: how many of a
    kind were idle when a unit began is a bisection, not a scan (a capture may hold 100,000 sessions)."""

    def __init__(self) -> None:
        self.count = 0
        self.by_connection: dict[str, _Lineage] = {}
        self.ends: dict[tuple[Any, ...], list[tuple[float, int, _Lineage]]] = defaultdict(list)

    def new(self, unit: _Unit) -> _Lineage:
        self.count += 1
        lineage = _Lineage(f"k{self.count}", unit.software, unit.host, unit.source, unit.end)
        bisect.insort(self.ends[self._kind(lineage)], (lineage.end, self.count, lineage))
        return lineage

    def extend(self, lineage: _Lineage, end: float) -> None:
        if end <= lineage.end:
            return
        ends = self.ends[self._kind(lineage)]
        number = int(lineage.name[1:])
        del ends[bisect.bisect_left(ends, (lineage.end, number))]
        lineage.end = end
        bisect.insort(ends, (end, number, lineage))

    def idle(self, unit: _Unit) -> list[_Lineage]:
        """The lineages of the unit's kind whose last unit had ended when it began."""
        ends = self.ends.get((unit.software, unit.host, unit.source), [])
        return [entry[2] for entry in ends[: bisect.bisect_right(ends, (unit.start, float("inf")))]]

    @staticmethod
    def _kind(lineage: _Lineage) -> tuple[Any, ...]:
        return (lineage.software, lineage.host, lineage.source)


def _link(units: list[_Unit]) -> None:
    lineages = _Lineages()
    for unit in units:
        lineage, joined = _lineage_for(unit, lineages)
        if lineage is None:
            lineage = lineages.new(unit)
        lineages.extend(lineage, unit.end)
        for connection in unit.connections:
            lineages.by_connection.setdefault(connection, lineage)
        first = unit.calls[0].exchange
        identity = ClientIdentity(
            lineage=lineage.name,
            unit=unit.name,
            address=first.client_addr,
            session=first.session_id or first.legacy_session,
            user_agent=unit.user_agent,
            client_info=unit.client_info,
            protocol_version=unit.protocol_version,
            joined=joined,
        )
        for call in unit.calls:
            call.client = identity


def _lineage_for(unit: _Unit, lineages: _Lineages) -> tuple[_Lineage | None, str]:
    for connection in unit.connections:
        if (known := lineages.by_connection.get(connection)) is not None:
            return known, "same connection as an earlier session of this client"
    if unit.software == (None, None):
        return None, "first seen (no User-Agent or clientInfo to follow it by)"
    free = lineages.idle(unit)
    if len(free) == 1:
        return free[0], "same software and address, the only such client idle when this one began"
    if free:
        return None, f"first seen ({len(free)} idle clients of the same software: cannot tell which)"
    return None, "first seen"
