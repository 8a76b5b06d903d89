"""Who sent a connection's requests: the local process that owns a loopback client's socket (issue 21).

When a client connects from this machine, the process at the other end of its socket is looked up once, in
a worker thread, so no request waits for it: its pid, executable name, start time and parent chain. Each
MCP flow of the connection carries what was found (``FlowRecord.client_process``) once the lookup is done;
a flow that ends before it is written without it, and the analyzer takes the process from the connection's
other flows. A lookup that fails (the process already gone, another user's process we may not read) gives
None, and never fails or delays the connection.

What this does not say: one process can host many independent clients (an agent host, a worker pool), and
a peer that is itself a proxy (nginx, HAProxy, Caddy, Envoy, an MCP gateway) carries other processes'
requests: it is recorded with ``gateway`` set, and the analysis does not take it as the client. A remote
client's process is unknown: nothing is invented.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psutil

from mcp_blackbox.analyzer.wire.metadata import ParentRecord, ProcessRecord

logger = logging.getLogger("mcp_blackbox")

Address = tuple[str, int]
# Executables that carry other processes' requests: a peer named so is a gateway, not the client.
PROXIES = frozenset({"nginx", "haproxy", "caddy", "envoy", "traefik", "mcp-proxy", "mitmdump", "mitmproxy"})
PARENTS = 8  # how far up the parent chain the record goes (enough to reach `run`'s command)
REMEMBERED = 4096  # connections whose lookup is kept; the oldest are dropped first


def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _plain(host: str) -> str:
    """An IPv4-mapped IPv6 address as the IPv4 one psutil reports for the peer's own socket."""
    return host.removeprefix("::ffff:")


def owner_of(peer: Address, local: Address) -> ProcessRecord | None:
    """The process whose TCP socket goes from ``peer`` to ``local`` (this proxy's listening address), or None."""
    wanted = ((_plain(peer[0]), peer[1]), (_plain(local[0]), local[1]))
    for connection in psutil.net_connections("tcp"):
        if connection.pid is not None and _ends(connection.laddr, connection.raddr) == wanted:
            return describe(psutil.Process(connection.pid))
    return None


def _ends(laddr: Any, raddr: Any) -> tuple[Address, Address] | None:
    """A socket's (local, remote) ends as (host, port) pairs; None while it has no remote end (a listener)."""
    if len(laddr) != 2 or len(raddr) != 2:
        return None
    return (_plain(laddr[0]), laddr[1]), (_plain(raddr[0]), raddr[1])


def describe(process: psutil.Process) -> ProcessRecord:
    with process.oneshot():
        name, started = process.name(), process.create_time()
    parents = [ParentRecord(pid=parent.pid, name=_name(parent)) for parent in process.parents()[:PARENTS]]
    record: ProcessRecord = {"pid": process.pid, "name": name, "started_at": started, "parents": parents}
    if name.lower().removesuffix(".exe") in PROXIES:
        record["gateway"] = True
    return record


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return "?"


class PeerProcesses:
    """The lookups of the connections seen, by mitmproxy's client connection id."""

    def __init__(self, lookup: Callable[[Address, Address], ProcessRecord | None] = owner_of) -> None:
        self.lookup = lookup
        self.pool: ThreadPoolExecutor | None = None
        self.found: OrderedDict[str, Future[ProcessRecord | None]] = OrderedDict()
        self.seconds = 0.0  # spent in lookups, for the benchmark
        self.count = 0

    def connected(self, connection_id: str, peer: Address | None, local: Address | None) -> None:
        """Start looking up a loopback peer's process; a remote one's stays unknown."""
        if peer is None or local is None or not is_loopback(str(peer[0])):
            return
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-blackbox-peer")
        self.found[connection_id] = self.pool.submit(self._timed, (str(peer[0]), peer[1]), (str(local[0]), local[1]))
        while len(self.found) > REMEMBERED:
            self.found.popitem(last=False)

    def _timed(self, peer: Address, local: Address) -> ProcessRecord | None:
        start = time.perf_counter()
        try:
            return self.lookup(peer, local)
        except Exception:  # gone, not ours to read, or psutil failed: unknown, never a failed connection
            logger.debug("mcp_blackbox: no process for %s", peer, exc_info=True)
            return None
        finally:
            self.seconds += time.perf_counter() - start
            self.count += 1

    def of(self, connection_id: str) -> tuple[bool, ProcessRecord | None]:
        """(known, the process): known is False while the lookup runs, or for a connection never looked up."""
        future = self.found.get(connection_id)
        if future is None or not future.done() or future.cancelled():  # cancelled: the recorder is stopping
            return False, None
        return True, future.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def close_after_pending(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the lookups under way, then close (for tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        for future in list(self.found.values()):
            # A lookup's own failure is already None; a timeout leaves it pending.
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.0, deadline - time.monotonic()))
        self.close()
