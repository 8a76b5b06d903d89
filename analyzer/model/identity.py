"""Who sent a call, as the analysis names it (analyzer/across/clients.py finds it): shared by every call of
one client unit."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_blackbox.analyzer.model.contract import ClientRecord, ProcessRecord

CONNECTION_PREFIX = "connection:"  # a unit outside sessions: the client's TCP connection


@dataclass(frozen=True, slots=True)
class ClientProcess:
    """The process that owned a loopback client's socket (addon/peer_process.py): measured, not inferred.
    One process may still host several independent clients."""

    pid: int
    name: str
    started_at: float  # with the pid, one process even if its pid was used again later

    def record(self) -> ProcessRecord:
        return {"pid": self.pid, "name": self.name, "started_at": self.started_at}


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
    # The unit is a client's own start: a session, or a connection whose first request negotiated
    # (server/discover, initialize), as a new run of a stateless client begins. Other connections outside
    # sessions may be any of a pool's.
    opened: bool = True
    process: ClientProcess | None = None  # the local process that sent its calls, when the recorder knew it
    # Counts the joins of the lineage that may have been the application's next run rather than the same
    # run going on (nothing measured, and the gap as long as a process takes to start): units of two runs
    # are linked, but never surely (analyzer/across/clients.py).
    run: int = 0

    @property
    def unit_is_session(self) -> bool:
        return is_session_unit(self.unit)

    def record(self) -> ClientRecord:
        return {
            "lineage": self.lineage,
            "unit": self.unit,
            "address": self.address,
            "session": self.session,
            "user_agent": self.user_agent,
            "client_info": self.client_info,
            "protocol_version": self.protocol_version,
            "joined": self.joined,
            "process": self.process.record() if self.process is not None else None,
        }


def is_session_unit(unit: str) -> bool:
    """A session unit (MCP or SSE session) rather than a connection outside sessions."""
    return not unit.startswith(CONNECTION_PREFIX)
