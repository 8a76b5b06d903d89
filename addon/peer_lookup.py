"""The helper process of addon/peer_process.py: which local process owns each of a batch of TCP sockets.

    python peer_lookup.py    (started by the recorder; JSON lines on stdin and stdout)

Each line in is a JSON list of [peer host, peer port, local host, local port]; each line out is a JSON list
of the same length: the process record of each socket's owner (pid, name, start time, parents, and
``gateway`` for a proxy), or null. A process of its own, not a thread of mitmdump's: a scan of the machine's
sockets is Python work that would otherwise hold mitmdump's GIL while requests wait. It imports only the
standard library and psutil, so it runs by path beside a script-loaded recorder.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.wire.metadata import ParentRecord, ProcessRecord

Address = tuple[str, int]
# Executables that carry other processes' requests: a peer named so is a gateway, not the client. Proxies,
# and the forwarders a container's or a tunnel's traffic arrives through.
PROXIES = frozenset({
    "nginx", "haproxy", "caddy", "envoy", "traefik", "mcp-proxy", "mitmdump", "mitmproxy",
    "docker-proxy", "rootlessport", "slirp4netns", "socat", "kubectl", "ssh", "sshd",
})  # fmt: skip
PARENTS = 8  # how far up the parent chain the record goes (enough to reach `run`'s command)


def _plain(host: str) -> str:
    """An IPv4-mapped IPv6 address as the IPv4 one psutil reports for the peer's own socket."""
    return host.removeprefix("::ffff:")


def owners_of(wanted: list[tuple[Address, Address]]) -> list[ProcessRecord | None]:
    """The process whose TCP socket goes from each ``peer`` to ``local`` (this proxy's listening address), or
    None: one scan of the machine's sockets answers them all (a burst of connections costs one scan)."""
    pids = {}
    for connection in psutil.net_connections("tcp"):
        if connection.pid is not None and (ends := _ends(connection.laddr, connection.raddr)) is not None:
            pids[ends] = connection.pid
    described: dict[int, ProcessRecord | None] = {}
    found = []
    for peer, local in wanted:
        pid = pids.get(((_plain(peer[0]), peer[1]), (_plain(local[0]), local[1])))
        if pid is not None and pid not in described:
            described[pid] = _described(pid)
        found.append(described.get(pid) if pid is not None else None)
    return found


def owner_of(peer: Address, local: Address) -> ProcessRecord | None:
    return owners_of([(peer, local)])[0]


def _described(pid: int) -> ProcessRecord | None:
    try:
        return describe(psutil.Process(pid))
    except psutil.Error:  # gone since, or not ours to read
        return None


def _ends(laddr: Any, raddr: Any) -> tuple[Address, Address] | None:
    """A socket's (local, remote) ends as (host, port) pairs; None while it has no remote end (a listener)."""
    if len(laddr) != 2 or len(raddr) != 2:
        return None
    return (_plain(laddr[0]), laddr[1]), (_plain(raddr[0]), raddr[1])


def describe(process: psutil.Process) -> ProcessRecord:
    with process.oneshot():
        name, started = process.name(), process.create_time()
    parents: list[ParentRecord] = [{"pid": parent.pid, "name": _name(parent)} for parent in process.parents()[:PARENTS]]
    record: ProcessRecord = {"pid": process.pid, "name": name, "started_at": started, "parents": parents}
    if name.lower().removesuffix(".exe") in PROXIES:
        record["gateway"] = True
    return record


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return "?"


def parent_process() -> ProcessRecord | None:
    """This process's parent: the client that started ``record --stdio`` as its server (None if unreadable)."""
    return _described(psutil.Process().ppid())


def main() -> None:
    for line in sys.stdin:
        wanted = [((peer, peer_port), (local, local_port)) for peer, peer_port, local, local_port in json.loads(line)]
        try:
            found: list[Any] = owners_of(wanted)
        except Exception:  # psutil failed: unknown, never a failed connection
            found = [None] * len(wanted)
        sys.stdout.write(json.dumps(found) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
