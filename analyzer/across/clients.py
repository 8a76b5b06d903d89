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

from mcp_blackbox.analyzer.model.identity import CONNECTION_PREFIX, ClientIdentity, ClientProcess, is_session_unit
from mcp_blackbox.analyzer.model.records import Call, Exchange
from mcp_blackbox.analyzer.wire.inputs import recording_marker, recording_of

STATELESS_PREFIX = "exchange:"
OPENING_METHODS = frozenset({"server/discover", "initialize"})
IDLE_WINDOW = 300.0  # seconds: as long as a retry may follow its failure (retries.RETRY_WINDOW)
# Seconds between a client's session going quiet and the next session of the same software: within it, one
# running program opened its next session (in-process re-initializes in the truth corpus took 40-300 ms);
# beyond it a new process may have started (a Python or Node client's start took 0.8-1.5 s there). Asked
# only when the recorder named no process for the unit: the process, measured, answers instead.
NEW_PROCESS_GAP = 0.5


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
        """The recording it is in: lineages never join units of two recordings, but the files of one
        recording are one (analyzer/wire/inputs.recording_of: what the recorder wrote in them). A stdio
        capture from before recordings were written joins the others of the client process that started
        its server (the header's client_process: measured, not guessed from their content)."""
        exchange = self.first.exchange
        if exchange.stdio is not None and self.process is not None and recording_marker(exchange.source) is None:
            return f"stdio servers of pid {self.process.pid} started {self.process.started_at:.6f}"
        return recording_of(exchange.source)


@dataclass(slots=True)
class _Lineage:
    name: str
    number: int
    software: tuple[str | None, str | None]
    host: str | None
    source: str
    end: float
    process: ClientProcess | None = None  # the first its units name (the recorder measured it)
    run: int = 0  # its joins that may have been a next run of the application (ClientIdentity.run)

    @property
    def kind(self) -> _Kind:
        return (self.software, self.host, self.source)


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
        # session scope -> when the client last sent an exchange of it that is no call (a GET stream, a DELETE),
        # and the process one of them named, for sessions not fed yet: a session lasts until the client let go
        # of it, not until its last answer, and its long-lived GET stream is named when its short POSTs are not.
        self.seen: dict[str, tuple[float, ClientProcess | None]] = {}

    def touch(self, scope: str, t: float, process: ClientProcess | None) -> None:
        """The client sent an exchange of the session that is no call (its GET stream, its DELETE) at ``t``,
        from a connection of ``process`` (None: not named)."""
        unit = self.units.get(scope)
        if unit is None:
            seen, named = self.seen.get(scope, (t, None))
            self.seen[scope] = (max(seen, t), named or process)
            return
        if unit.identity is None:
            unit.process = unit.process or process
        if t > unit.end:
            unit.end = t
            if unit.lineage is not None:
                self.lineages.extend(unit.lineage, t)

    def feed(self, call: Call) -> None:
        """Add ``call`` to its unit: a linked unit's lineage grows with it at once; an unlinked unit keeps
        it, and what it says of the client, until ``link``."""
        unit = self._unit_of(call)
        self._note_processes(call.exchange, unit.end)
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
            seen, process = self.seen.pop(name, (end, None))
            unit = self.units[name] = _Unit(name, call.request.t, max(end, seen), call, process=process)
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

    def _note_processes(self, exchange: Exchange, seen: float) -> None:
        """The processes an exchange names, its own connection's and earlier ones' (any unit's call may
        name them: the recorder names a connection on the flows that end after its lookup)."""
        if exchange.client_process is not None and exchange.client_conn:
            self.processes[exchange.client_conn] = (exchange.client_process, seen)
        for connection, process in exchange.earlier_processes:
            self.processes[connection] = (process, seen)

    def _wait_for_link(self, unit: _Unit, call: Call) -> None:
        """An unlinked unit's call waits with it; the first User-Agent, clientInfo and version said are kept."""
        exchange = call.exchange
        unit.waiting.append(call)
        if exchange.client_conn:
            unit.connections.setdefault(exchange.client_conn)
        unit.user_agent = unit.user_agent or exchange.request_headers.get("user-agent")
        unit.process = unit.process or exchange.client_process
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
        for scope in [s for s, (seen, _) in self.seen.items() if seen < before]:
            del self.seen[scope]
        self.lineages.forget(before)


class _Ends:
    """Lineages sorted by when they last ended: how many went idle in a window is a bisection, not a scan
    (a capture may hold 100,000 sessions)."""

    def __init__(self) -> None:
        self.entries: list[tuple[float, int, _Lineage]] = []

    def add(self, lineage: _Lineage) -> None:
        bisect.insort(self.entries, (lineage.end, lineage.number, lineage))

    def remove(self, lineage: _Lineage) -> None:
        at = bisect.bisect_left(self.entries, (lineage.end, lineage.number))
        if at < len(self.entries) and self.entries[at][2] is lineage:  # not forgotten
            del self.entries[at]

    def idle(self, start: float) -> tuple[int, _Lineage | None]:
        """How many ended in the retry window before ``start``, and the last of them."""
        low = bisect.bisect_left(self.entries, (start - IDLE_WINDOW,))
        high = bisect.bisect_right(self.entries, (start, float("inf")))
        return high - low, self.entries[high - 1][2] if high > low else None

    def forget(self, before: float) -> None:
        del self.entries[: bisect.bisect_left(self.entries, (before - IDLE_WINDOW,))]


_Kind = tuple[tuple[str | None, str | None], str | None, str]  # (software, address, recording)


class _Lineages:
    """The lineages so far, with each kind's ends kept sorted, all of them and by the process the recorder
    named for them (None: named none), so that a unit whose process is known is asked about the lineages
    that may be its own (its process's, or unnamed) and not about other processes' lineages."""

    def __init__(self) -> None:
        self.count = 0
        # connection -> (the lineage of the last unit on it, when that unit ended, when it began)
        self.by_connection: dict[str, tuple[_Lineage, float, float]] = {}
        # (kind, process) -> the lineage of its connections outside sessions; (kind, None): the first of the
        # kind's, which a connection whose process is unknown joins (unknown is not different).
        self.stateless: dict[tuple[_Kind, ClientProcess | None], _Lineage] = {}
        self.ends: dict[_Kind, _Ends] = defaultdict(_Ends)
        self.ends_by_process: dict[tuple[_Kind, ClientProcess | None], _Ends] = defaultdict(_Ends)

    def pool(self, kind: _Kind, process: ClientProcess | None) -> _Lineage | None:
        """The lineage a stateless unit of this kind joins: its process's; without one of its own yet, the
        kind's first, which _link still refuses if another process is named on it."""
        return self.stateless.get((kind, process)) or self.stateless.get((kind, None))

    def pooled(self, kind: _Kind, process: ClientProcess | None, lineage: _Lineage) -> None:
        self.stateless.setdefault((kind, process), lineage)
        self.stateless.setdefault((kind, None), lineage)

    def new(self, unit: _Unit) -> _Lineage:
        self.count += 1
        lineage = _Lineage(f"k{self.count}", self.count, unit.software, unit.host, unit.source, unit.end)
        self._index(lineage)
        return lineage

    def _index(self, lineage: _Lineage) -> None:
        self.ends[lineage.kind].add(lineage)
        self.ends_by_process[(lineage.kind, lineage.process)].add(lineage)

    def _unindex(self, lineage: _Lineage) -> None:
        self.ends[lineage.kind].remove(lineage)
        self.ends_by_process[(lineage.kind, lineage.process)].remove(lineage)

    def extend(self, lineage: _Lineage, end: float, process: ClientProcess | None = None) -> None:
        """The lineage lasts until ``end``; the first process named on it becomes its process."""
        named = lineage.process is None and process is not None
        if end <= lineage.end and not named:
            return
        self._unindex(lineage)
        lineage.end = max(lineage.end, end)
        lineage.process = lineage.process or process
        self._index(lineage)

    def used(self, connection: str, lineage: _Lineage, start: float, end: float) -> None:
        """The unit that began at ``start`` used the connection: the last unit on it, unless a later one did."""
        known = self.by_connection.get(connection)
        if known is None or known[2] <= start:
            self.by_connection[connection] = (lineage, end, start)

    def forget(self, before: float) -> None:
        """What no unit that begins after ``before`` reads: connections idle since, ends out of its window."""
        for connection in [c for c, (_, end, _) in self.by_connection.items() if end < before]:
            del self.by_connection[connection]
        for ends in (*self.ends.values(), *self.ends_by_process.values()):
            ends.forget(before)

    def idle(self, unit: _Unit) -> tuple[int, _Lineage | None]:
        """How many lineages that may be the unit's went idle in the retry window before it began, and the last.

        Only that window: a client idle for longer is no candidate a retry could come from, and without
        the bound one ambiguous moment would leave every later session of that kind on its own. A unit
        whose process the recorder named may be a lineage of that process, or of none named; another
        process's lineage is another client (measured), so it is no candidate. Its own process's lineages
        come first: what was measured outweighs what was not (the lookup misses short connections on a busy
        machine, and such a lineage must not make the measured one ambiguous).
        """
        kind = (unit.software, unit.host, unit.source)
        if unit.process is None:
            return self.ends[kind].idle(unit.start) if kind in self.ends else (0, None)
        if (kind, unit.process) in self.ends_by_process:
            count, last = self.ends_by_process[kind, unit.process].idle(unit.start)
            if count:
                return count, last
        found = [
            self.ends_by_process[key].idle(unit.start)
            for key in ((kind, unit.process), (kind, None))
            if key in self.ends_by_process
        ]
        lasts = [last for _, last in found if last is not None]
        return sum(count for count, _ in found), max(lasts, key=lambda lineage: lineage.end, default=None)


def _link(units: list[_Unit], lineages: _Lineages) -> None:
    for unit in units:
        lineage, joined, next_run = _lineage_for(unit, lineages)
        if lineage is not None and unit.process is not None and _other_process(unit, lineage):
            # Measured, not inferred: two processes are two clients, whatever the rest of the wire says.
            joined = f"first seen (pid {unit.process.pid}, not {lineage.name}'s process)"
            lineage = None
        elif lineage is not None and next_run:
            lineage.run += 1
        if lineage is None:
            lineage = lineages.new(unit)
            if not is_session_unit(unit.name) and unit.software != (None, None):
                lineages.pooled((unit.software, unit.host, unit.source), unit.process, lineage)
        lineages.extend(lineage, unit.end, unit.process)
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
            run=lineage.run,
        )
        for call in unit.waiting:
            call.client = identity
        unit.lineage, unit.identity, unit.waiting, unit.connections = lineage, identity, [], {}


def _lineage_for(unit: _Unit, lineages: _Lineages) -> tuple[_Lineage | None, str, bool]:
    """The unit's lineage (None: a new one), why, and whether the join may be the application's next run."""
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
        return sequential[0], "same connection as an earlier session of this client", False
    if unit.software == (None, None):
        return None, "first seen (no User-Agent or clientInfo to follow it by)", False
    kind = (unit.software, unit.host, unit.source)
    if not is_session_unit(unit.name) and (pooled := lineages.pool(kind, unit.process)) is not None:
        # Outside sessions nothing tells a client's pooled connections from another client's: one lineage
        # per software and address, and links across its connections are never "high" (retries.py).
        why = f"stateless: same software and {_origin(unit)} (one client's connections or several clients')"
        return pooled, why, False
    return _idle_lineage(unit, lineages)


def _idle_lineage(unit: _Unit, lineages: _Lineages) -> tuple[_Lineage | None, str, bool]:
    """The lineage a unit continues after it went idle, if the capture can tell which, why, and whether it
    may be the application's next run instead.

    The one idle candidate is it; if nothing measured says so and it went quiet long enough before for a
    new process to have started (NEW_PROCESS_GAP), the unit may as well be the application's next run: it
    joins, as a possible next run. Among several, the capture cannot tell which."""
    count, last = lineages.idle(unit)
    if count == 0 or last is None:
        return None, "first seen", False
    only = f"same software and {_origin(unit)}, the only such client idle when this one began"
    if count == 1 and not _maybe_a_new_process(unit, last):
        return last, only, False
    if count == 1:
        gap = unit.start - last.end
        why = (
            f"{only}, {gap:.2f} s after it went quiet: as long as a new process takes to start, so this may be the "
            "application's next run (no process was recorded to tell)"
        )
        return last, why, True
    return None, f"first seen ({count} idle clients of the same software: cannot tell which)", False


def _maybe_a_new_process(unit: _Unit, lineage: _Lineage) -> bool:
    """Nothing measured says whose the unit is, and it began long enough after the lineage went quiet for
    another process to have started: the next run of the application looks just like its re-initialize."""
    measured = unit.process is not None and lineage.process == unit.process
    return not measured and unit.start - lineage.end > NEW_PROCESS_GAP


def _origin(unit: _Unit) -> str:
    """What the unit shares with its lineage besides the software: a recorded process, else the address."""
    return f"process (pid {unit.process.pid})" if unit.process is not None else "address"


def _other_process(unit: _Unit, lineage: _Lineage) -> bool:
    """The recorder named a process for both, and not the same one. A unit it named none for (its flows
    ended before the lookup) may still join: unknown is not different."""
    return unit.process is not None and lineage.process is not None and unit.process != lineage.process
