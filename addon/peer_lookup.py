"""The helper process of addon/peer_process.py: which local process owns each of a batch of TCP sockets.

    python peer_lookup.py    (started by the recorder; JSON lines on stdin and stdout)

Each line in is a JSON list of [peer host, peer port, local host, local port]; each line out is a JSON list
of the same length: the process record of each socket's owner (pid, name, start time, parents, and
``gateway`` for a proxy), or null. A process of its own, not a thread of mitmdump's: a scan of the machine's
sockets is Python work that would otherwise hold mitmdump's GIL while requests wait. It imports only the
standard library and psutil, so it runs by path beside a script-loaded recorder.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import struct
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
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
PROC = Path("/proc")
RECENT_OWNERS = 32  # processes looked at first: a client opens many connections


def _plain(host: str) -> str:
    """An IPv4-mapped IPv6 address as the IPv4 one psutil reports for the peer's own socket."""
    return host.removeprefix("::ffff:")


class SocketOwners:
    """Which process owns each of a batch of client sockets, as fast as the machine allows: a short-lived
    connection's socket is gone a few milliseconds after its last response, and a lookup that comes later
    finds nothing.

    On Linux the kernel finds each socket by its two ends (sock_diag, what ``ss`` uses: microseconds, where
    reading /proc/net/tcp walks the whole connection table, 5 ms even on an idle machine), and its owner is
    the process with a file descriptor on its inode. The processes that owned the last sockets are looked
    at first (a client opens many connections), then the rest, newest first, until every socket is found:
    a burst of a known client's connections costs a few directory reads, where ``psutil.net_connections``
    reads every process's descriptors (20 to 75 ms on a loaded 2-core machine, long enough to miss a
    connection). Elsewhere, or if the kernel refuses, psutil answers."""

    def __init__(self) -> None:
        # The last owners found, most recent last, each with its record once described and the start time it
        # was described at: a client's next connections reuse it (describing one, its parent chain, costs a
        # millisecond of CPU that the proxied traffic shares), while a new process with the pid does not.
        self.recent: OrderedDict[int, tuple[str, ProcessRecord] | None] = OrderedDict()
        self.diag = SocketDiag.open()

    def __call__(self, wanted: list[tuple[Address, Address]]) -> list[ProcessRecord | None]:
        if self.diag is None:
            return _owners_by_psutil(wanted)
        inodes = [self.diag.inode(peer, local) for peer, local in wanted]
        pids = self._owners_of({inode for inode in inodes if inode is not None})
        return _records([pids.get(inode) if inode is not None else None for inode in inodes], self._record_of)

    def _record_of(self, pid: int) -> ProcessRecord | None:
        started = _start_ticks(pid)
        known = self.recent.get(pid)
        if started is not None and known is not None and known[0] == started:
            return known[1]
        record = _described(pid)
        if started is not None and record is not None and pid in self.recent:
            self.recent[pid] = (started, record)
        return record

    def _owners_of(self, inodes: set[int]) -> dict[int, int]:
        links = {f"socket:[{inode}]": inode for inode in inodes}
        owners: dict[int, int] = {}
        for pid in self._candidates():
            if not links:
                break
            for link in _socket_links(pid) & links.keys():
                owners[links.pop(link)] = pid
                self.recent.setdefault(pid, None)
                self.recent.move_to_end(pid)
        while len(self.recent) > RECENT_OWNERS:
            self.recent.popitem(last=False)
        return owners

    def _candidates(self) -> Iterator[int]:
        recent = list(reversed(self.recent))
        yield from recent
        others = {int(entry) for entry in os.listdir(PROC) if entry.isdigit()} - set(recent)
        yield from sorted(others, reverse=True)


class SocketDiag:
    """Linux's sock_diag over netlink, asked for one TCP socket by its two ends (inet_diag_req_v2 without
    NLM_F_DUMP: the kernel's own hash lookup). The layouts are the kernel's ABI, linux/inet_diag.h."""

    REQUEST = struct.Struct("=IHHIIBBBxIHH16s16sIII")  # nlmsghdr (16 bytes), then inet_diag_req_v2 (56)
    HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
    INODE_AT = 16 + 4 + 48 + 16  # nlmsghdr, family..retrans, inet_diag_sockid, expires..uid
    SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLM_F_REQUEST, NETLINK_SOCK_DIAG = 20, 2, 1, 4
    ALL_STATES, NO_COOKIE = 0xFFFFFFFF, 0xFFFFFFFF

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.sequence = 0

    @classmethod
    def open(cls) -> SocketDiag | None:
        """The channel, if it finds a connection of this process's own (a kernel without the TCP diag module,
        or a sandbox that refuses it, answers "no such socket" to every question: then psutil answers)."""
        if not hasattr(socket, "AF_NETLINK") or not (PROC / "self" / "fd").is_dir():
            return None
        try:
            diag = cls(socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, cls.NETLINK_SOCK_DIAG))
        except OSError:
            return None
        diag.channel.settimeout(1.0)
        try:
            with (
                socket.create_server(("127.0.0.1", 0)) as server,
                socket.create_connection(server.getsockname()) as probe,
            ):
                if diag.inode(probe.getsockname(), server.getsockname()) == os.fstat(probe.fileno()).st_ino:
                    return diag
        except OSError:
            pass
        diag.channel.close()
        return None

    def inode(self, local: Address, remote: Address) -> int | None:
        """The inode of the TCP socket from ``local`` to ``remote``; None if there is none, or no process
        holds it any more (a socket in TIME_WAIT has inode 0)."""
        try:
            family, source = _packed(local[0])
            remote_family, destination = _packed(remote[0])
        except ValueError:
            return None
        if family != remote_family:
            return None
        self.sequence += 1
        request = self.REQUEST.pack(
            self.REQUEST.size, self.SOCK_DIAG_BY_FAMILY, self.NLM_F_REQUEST, self.sequence, 0,
            family, socket.IPPROTO_TCP, 0, self.ALL_STATES,
            socket.htons(local[1]), socket.htons(remote[1]), source, destination, 0, self.NO_COOKIE, self.NO_COOKIE,
        )  # fmt: skip
        try:
            self.channel.send(request)
            while True:
                answer = self.channel.recv(8192)
                _, kind, _, sequence, _ = self.HEADER.unpack_from(answer)
                if sequence == self.sequence:
                    break
        except OSError:
            return None
        if kind == self.NLMSG_ERROR or len(answer) < self.INODE_AT + 4:
            return None  # ENOENT: no such socket
        inode: int = struct.unpack_from("=I", answer, self.INODE_AT)[0]
        return inode or None


def _packed(host: str) -> tuple[int, bytes]:
    """An address family and the 16 bytes inet_diag_sockid holds (an IPv4-mapped address as IPv4: the
    kernel finds a dual-stack socket connected to an IPv4 address by its IPv4 ends)."""
    ip = ipaddress.ip_address(_plain(host))
    if ip.version == 4:
        return socket.AF_INET, ip.packed.ljust(16, b"\0")
    return socket.AF_INET6, ip.packed


def owners_of(wanted: list[tuple[Address, Address]]) -> list[ProcessRecord | None]:
    """The process whose TCP socket goes from each ``peer`` to ``local`` (this proxy's listening address), or
    None."""
    return SocketOwners()(wanted)


def _start_ticks(pid: int) -> str | None:
    """When a process started, in clock ticks since boot (/proc/PID/stat's 22nd field), as written: what
    tells a process from a later one with its pid. None if it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after the name, which may hold spaces: field 3 on
    return fields[19].decode() if len(fields) > 19 else None


def _socket_links(pid: int) -> set[str]:
    """What a process's file descriptors point to ("socket:[inode]" for a socket); empty if it is gone or
    not ours to read."""
    links = set()
    try:
        with os.scandir(PROC / str(pid) / "fd") as descriptors:
            for descriptor in descriptors:
                with contextlib.suppress(OSError):
                    links.add(os.readlink(descriptor.path))
    except OSError:
        pass
    return links


def _owners_by_psutil(wanted: list[tuple[Address, Address]]) -> list[ProcessRecord | None]:
    pids = {}
    for connection in psutil.net_connections("tcp"):
        if connection.pid is not None and (ends := _ends(connection.laddr, connection.raddr)) is not None:
            pids[ends] = connection.pid
    owners = [pids.get(((_plain(peer[0]), peer[1]), (_plain(local[0]), local[1]))) for peer, local in wanted]
    return _records(owners, _described)


def _records(pids: list[int | None], record_of: Callable[[int], ProcessRecord | None]) -> list[ProcessRecord | None]:
    """Each socket's owner's record (None where no owner was found), each process described once."""
    described = {pid: record_of(pid) for pid in set(pids) if pid is not None}
    return [described[pid] if pid is not None else None for pid in pids]


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
    owners = SocketOwners()
    for line in sys.stdin:
        wanted = [((peer, peer_port), (local, local_port)) for peer, peer_port, local, local_port in json.loads(line)]
        try:
            found: list[Any] = owners(wanted)
        except Exception:  # psutil failed: unknown, never a failed connection
            found = [None] * len(wanted)
        sys.stdout.write(json.dumps(found) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
