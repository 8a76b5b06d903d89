"""Who sent each call: a client identity from what the capture holds, and a lineage across sessions.

A *unit* is what one client certainly owns: an MCP session (or a 2024-11-05 SSE session), or, for calls
outside any session (2026-07-28 is stateless), the client's TCP connection. Units carry what identifies
the software (User-Agent, clientInfo), the connections they used and when they were alive.

A *lineage* links one client's successive units, as far as the capture shows it:
- a unit that used a connection an earlier unit used, which had ended when this one began, belongs to
  that unit's lineage (a connection has one client at a time; units alive on one connection at once are
  a pool's, not one client's);
- outside sessions, the connections of one software from one address are one lineage: a client's pool
  and several clients cannot be told apart, and retries across its connections are never "high";
- otherwise it joins the lineage of the same software, from the same address and in the same capture
  file, whose last unit had ended within the retry window before this one began, if exactly one such
  lineage exists. Another
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

from mcp_blackbox.analyzer.model.identity import CONNECTION_PREFIX, ClientIdentity, ClientProcess, is_session_unit
from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.wire.inputs import recording_of

STATELESS_PREFIX = "exchange:"
OPENING_METHODS = frozenset({"server/discover", "initialize"})
IDLE_WINDOW = 300.0  # seconds: as long as a retry may follow its failure (retries.RETRY_WINDOW)


@dataclass(slots=True)
class _Unit:
    name: str
    start: float
    end: float
    first: Call
    waiting: list[Call] = field(default_factory=list)  # its calls until it is linked
    connections: dict[str, None] = field(default_factory=dict)  # in the order first used, until linked
    user_agent: str | None = None
    client_info: str | None = None
    protocol_version: str | None = None
    process: ClientProcess | None = None  # the first its calls' exchanges name (the recorder measured it)
    lineage: _Lineage | None = None
    identity: ClientIdentity | None = None

    @property
    def software(self) -> tuple[str | None, str | None]:
        return (self.user_agent, self.client_info)

    @property
    def host(self) -> str | None:
        address = self.first.exchange.client_addr
        return address.rpartition(":")[0] if address else None

    @property
    def source(self) -> str:
        """The recording it is in: lineages never join units of two recordings, but a rotated recording's
        files are one (analyzer/inputs.recording_of), and so are the stdio captures of one client process:
        each run of a server it started is a file of its own (record --stdio -w DIR/), and the process that
        started them all is measured (the header's client_process), not guessed from their content."""
        exchange = self.first.exchange
        if exchange.stdio is not None and self.process is not None:
            return f"stdio servers of pid {self.process.pid} started {self.process.started_at:.6f}"
        return recording_of(exchange.source)


@dataclass(slots=True)
class _Lineage:
    name: str
    software: tuple[str | None, str | None]
    host: str | None
    source: str
    end: float
    process: ClientProcess | None = None  # the first its units name (the recorder measured it)


def unit_of(call: Call) -> str:
    if not call.scope.startswith(STATELESS_PREFIX):
        return call.scope
    return sys.intern(f"{CONNECTION_PREFIX}{call.exchange.client_conn or call.scope}")


class Clients:
    """Client identity worked out as calls come, in the order they started.

    ``feed`` adds a call to its unit; ``link`` puts the units fed since the last ``link`` into their
    lineages, in the order they began, with what their calls so far said (User-Agent, clientInfo,
    version). Fed everything and linked once, this is the whole capture's answer; a windowed analysis
    links a unit once the calls of a window after its start are fed (whether the lineages before it were
    idle when it began depends on their later calls), and ``forget`` drops units and connections idle for
    longer than any later unit could look back.
    """

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = versions
        self.units: dict[str, _Unit] = {}
        self.fresh: list[_Unit] = []
        self.lineages = _Lineages()
        # connection -> (its process, when last seen): the recorder names a connection's process on the
        # flows that ended after its lookup did, so a unit whose own flows ended first takes it from there.
        self.processes: dict[str, tuple[ClientProcess, float]] = {}

    def feed(self, call: Call) -> None:
        """Add ``call`` to its unit: a linked unit's lineage grows with it at once; an unlinked unit keeps
        it, and what it says of the client, until ``link``."""
        unit = self._unit_of(call)
        if unit.identity is not None:  # linked: its calls join its lineage as they come
            self._join_lineage(unit, call)
        else:
            self._wait_for_link(unit, call)

    def _unit_of(self, call: Call) -> _Unit:
        """The call's unit, new if it is the unit's first call, alive at least until the call ended."""
        name = unit_of(call)
        end = call.t_end or call.request.t
        unit = self.units.get(name)
        if unit is None:
            unit = self.units[name] = _Unit(name, call.request.t, end, call)
            self.fresh.append(unit)
        unit.end = max(unit.end, end)
        return unit

    def _join_lineage(self, unit: _Unit, call: Call) -> None:
        """A linked unit's call: it gets the unit's identity, and the lineage lasts (and uses its connection)."""
        call.client = unit.identity
        assert unit.lineage is not None
        self.lineages.extend(unit.lineage, unit.end)
        connection = call.exchange.client_conn
        if connection:
            self.lineages.used(connection, unit.lineage, unit.start, unit.end)

    def _wait_for_link(self, unit: _Unit, call: Call) -> None:
        """An unlinked unit's call waits with it; the first User-Agent, clientInfo and version said are kept."""
        exchange = call.exchange
        unit.waiting.append(call)
        if exchange.client_conn:
            unit.connections.setdefault(exchange.client_conn)
        unit.user_agent = unit.user_agent or exchange.request_headers.get("user-agent")
        unit.process = unit.process or exchange.client_process
        if exchange.client_process is not None and exchange.client_conn:
            self.processes[exchange.client_conn] = (exchange.client_process, unit.end)
        for connection, process in exchange.earlier_processes:
            self.processes[connection] = (process, unit.end)
        facts = call.request.facts
        if facts is not None:
            unit.client_info = unit.client_info or facts.client
            unit.protocol_version = unit.protocol_version or facts.version
        unit.protocol_version = (
            unit.protocol_version
            or exchange.request_headers.get("mcp-protocol-version")
            or self.versions.get(call.scope)  # negotiated by the scope's initialize
        )

    def link(self, before: float = float("inf")) -> None:
        """Link the units fed so far that began before ``before``, in the order they began."""
        fresh = sorted(self.fresh, key=lambda u: u.start)
        ready = [u for u in fresh if u.start < before]
        self.fresh = fresh[len(ready) :]
        for unit in ready:
            if unit.process is None:
                known = (self.processes.get(c) for c in unit.connections)
                unit.process = next((found[0] for found in known if found is not None), None)
        _link(ready, self.lineages)

    def forget(self, before: float) -> None:
        """Drop linked units that ended before ``before``, and what only they used."""
        for name in [n for n, u in self.units.items() if u.identity is not None and u.end < before]:
            del self.units[name]
        for connection in [c for c, (_, seen) in self.processes.items() if seen < before]:
            del self.processes[connection]
        self.lineages.forget(before)


class _Lineages:
    """The lineages so far, with each kind's (software, address, capture) ends kept sorted: how many of a
    kind were idle when a unit began is a bisection, not a scan (a capture may hold 100,000 sessions)."""

    def __init__(self) -> None:
        self.count = 0
        # connection -> (the lineage of the last unit on it, when that unit ended, when it began)
        self.by_connection: dict[str, tuple[_Lineage, float, float]] = {}
        # (kind, process) -> the lineage of its connections outside sessions; (kind, None): the first of the
        # kind's, which a connection whose process is unknown joins (unknown is not different).
        self.stateless: dict[tuple[tuple[Any, ...], ClientProcess | None], _Lineage] = {}
        self.ends: dict[tuple[Any, ...], list[tuple[float, int, _Lineage]]] = defaultdict(list)

    def pool(self, kind: tuple[Any, ...], process: ClientProcess | None) -> _Lineage | None:
        """The lineage a stateless unit of this kind joins: its process's; without one of its own yet, the
        kind's first, which _link still refuses if another process is named on it."""
        return self.stateless.get((kind, process)) or self.stateless.get((kind, None))

    def pooled(self, kind: tuple[Any, ...], process: ClientProcess | None, lineage: _Lineage) -> None:
        self.stateless.setdefault((kind, process), lineage)
        self.stateless.setdefault((kind, None), lineage)

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
        at = bisect.bisect_left(ends, (lineage.end, number))
        if at < len(ends) and ends[at][2] is lineage:  # not forgotten
            del ends[at]
        lineage.end = end
        bisect.insort(ends, (end, number, lineage))

    def used(self, connection: str, lineage: _Lineage, start: float, end: float) -> None:
        """The unit that began at ``start`` used the connection: the last unit on it, unless a later one did."""
        known = self.by_connection.get(connection)
        if known is None or known[2] <= start:
            self.by_connection[connection] = (lineage, end, start)

    def forget(self, before: float) -> None:
        """What no unit that begins after ``before`` reads: connections idle since, ends out of its window."""
        for connection in [c for c, (_, end, _) in self.by_connection.items() if end < before]:
            del self.by_connection[connection]
        for ends in self.ends.values():
            del ends[: bisect.bisect_left(ends, (before - IDLE_WINDOW,))]

    def idle(self, unit: _Unit) -> tuple[int, _Lineage | None]:
        """How many lineages of the unit's kind went idle in the retry window before it began, and the last.

        Only that window: a client idle for longer is no candidate a retry could come from, and without
        the bound one ambiguous moment would leave every later session of that kind on its own.
        """
        ends = self.ends.get((unit.software, unit.host, unit.source), [])
        low = bisect.bisect_left(ends, (unit.start - IDLE_WINDOW,))
        high = bisect.bisect_right(ends, (unit.start, float("inf")))
        return high - low, ends[high - 1][2] if high > low else None

    @staticmethod
    def _kind(lineage: _Lineage) -> tuple[Any, ...]:
        return (lineage.software, lineage.host, lineage.source)


def _link(units: list[_Unit], lineages: _Lineages) -> None:
    for unit in units:
        lineage, joined = _lineage_for(unit, lineages)
        if lineage is not None and unit.process is not None and _other_process(unit, lineage):
            # Measured, not inferred: two processes are two clients, whatever the rest of the wire says.
            joined = f"first seen (pid {unit.process.pid}, not {lineage.name}'s process)"
            lineage = None
        if lineage is None:
            lineage = lineages.new(unit)
            if not is_session_unit(unit.name) and unit.software != (None, None):
                lineages.pooled((unit.software, unit.host, unit.source), unit.process, lineage)
        lineage.process = lineage.process or unit.process
        lineages.extend(lineage, unit.end)
        for connection in unit.connections:
            lineages.used(connection, lineage, unit.start, unit.end)
        first = unit.first.exchange
        identity = ClientIdentity(
            lineage=lineage.name,
            unit=unit.name,
            address=first.client_addr,
            session=first.session_id or first.legacy_session,
            user_agent=unit.user_agent,
            client_info=unit.client_info,
            protocol_version=unit.protocol_version,
            joined=joined,
            opened=is_session_unit(unit.name) or unit.first.method in OPENING_METHODS,
            process=unit.process,
        )
        for call in unit.waiting:
            call.client = identity
        unit.lineage, unit.identity, unit.waiting, unit.connections = lineage, identity, [], {}


def _lineage_for(unit: _Unit, lineages: _Lineages) -> tuple[_Lineage | None, str]:
    # A connection has one client at a time: an earlier unit on it that had ended when this one began.
    # Units alive on one connection at once share a pool (a gateway's), not a client.
    sequential = [
        lineage
        for connection in unit.connections
        if (known := lineages.by_connection.get(connection)) is not None
        for lineage, ended, _ in [known]
        if ended <= unit.start
    ]
    if len({lineage.name for lineage in sequential}) == 1:
        return sequential[0], "same connection as an earlier session of this client"
    if unit.software == (None, None):
        return None, "first seen (no User-Agent or clientInfo to follow it by)"
    kind = (unit.software, unit.host, unit.source)
    if not is_session_unit(unit.name) and (pooled := lineages.pool(kind, unit.process)) is not None:
        # Outside sessions nothing tells a client's pooled connections from another client's: one lineage
        # per software and address, and links across its connections are never "high" (retries.py).
        return pooled, f"stateless: same software and {_origin(unit)} (one client's connections or several clients')"
    count, last = lineages.idle(unit)
    if count == 1:
        return last, f"same software and {_origin(unit)}, the only such client idle when this one began"
    if count:
        return None, f"first seen ({count} idle clients of the same software: cannot tell which)"
    return None, "first seen"


def _origin(unit: _Unit) -> str:
    """What the unit shares with its lineage besides the software: a recorded process, else the address."""
    return f"process (pid {unit.process.pid})" if unit.process is not None else "address"


def _other_process(unit: _Unit, lineage: _Lineage) -> bool:
    """The recorder named a process for both, and not the same one. A unit it named none for (its flows
    ended before the lookup) may still join: unknown is not different."""
    return unit.process is not None and lineage.process is not None and unit.process != lineage.process
