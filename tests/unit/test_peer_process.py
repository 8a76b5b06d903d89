"""The recorder's process lookup (addon/peer_process.py) and what the analyzer takes of its record
(analyzer/read/load.py ``process_of``): a real socket's owner is found, and a record that names a gateway, or
is not well formed, names no client."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import psutil
import pytest

from mcp_blackbox.addon.peer_lookup import SocketDiag, SocketOwners, _owners_by_psutil, describe, owner_of, owners_of
from mcp_blackbox.addon.peer_process import HelperProcess, PeerProcesses, is_loopback
from mcp_blackbox.analyzer.model.identity import ClientProcess
from mcp_blackbox.analyzer.read.load import process_of


def test_one_scan_answers_a_burst_of_connections() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        clients = [socket.create_connection(server.getsockname()) for _ in range(5)]
        accepted = [server.accept()[0] for _ in clients]
        wanted = [(c.getsockname(), server.getsockname()) for c in clients] + [(("127.0.0.1", 1), server.getsockname())]
        found = owners_of(wanted)
        for sock in clients + accepted:
            sock.close()
    assert [f["pid"] if f else None for f in found] == [os.getpid()] * 5 + [None]


def test_the_owner_of_a_loopback_socket_is_this_process() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            found = owner_of(client.getsockname(), server.getsockname())
    assert found is not None
    me = psutil.Process()
    assert (found["pid"], found["name"], found["started_at"]) == (os.getpid(), me.name(), me.create_time())
    assert found["parents"][0]["pid"] == os.getppid() and "gateway" not in found


HOLDER = """
import socket, sys, time
ends = [tuple(end.split(",")) for end in sys.argv[1:]]
held = [socket.create_connection((host, int(port))) for host, port in ends]
print(" ".join(f"{s.getsockname()[0]},{s.getsockname()[1]}" for s in held), flush=True)
time.sleep(60)
"""


def _holder(*servers: tuple[str, int]) -> tuple[subprocess.Popen[str], list[tuple[str, int]]]:
    """A process holding one connection to each server; the client ends of its sockets."""
    ends = [f"{host},{port}" for host, port in servers]
    process = subprocess.Popen([sys.executable, "-c", HOLDER, *ends], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, [(host, int(port)) for host, port in (end.split(",") for end in process.stdout.readline().split())]


def test_each_socket_is_found_in_the_process_that_holds_it_over_ipv4_ipv6_and_dual_stack() -> None:
    """Three processes, each holding an IPv4, an IPv6 and a dual-stack (IPv4-mapped) connection. One lookup
    asks for the first's sockets, the next for the other two's: the process found first, looked at first the
    second time, must not be taken for the others' (psutil's full scan is the reference)."""
    v4 = socket.create_server(("127.0.0.1", 0))
    v6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
    dual = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    # The dual-stack listener's local end as mitmproxy names it, and the client's IPv4-mapped.
    local = [v4.getsockname()[:2], v6.getsockname()[:2], ("::ffff:127.0.0.1", dual.getsockname()[1])]
    holders = [_holder(*local) for _ in range(3)]
    try:
        for server in (v4, v6, dual):
            for _ in holders:
                server.accept()
        wanted = [[(end, local[i]) for i, end in enumerate(ends)] for _, ends in holders]
        owners = SocketOwners()
        assert owners.diag is not None, "Linux answers through sock_diag"
        first = owners(wanted[0])
        rest = owners(wanted[1] + wanted[2])
        pids = [f["pid"] if f else None for f in first + rest]
        assert pids == [process.pid for process, _ in holders for _ in range(3)]
        assert pids == [f["pid"] if f else None for f in _owners_by_psutil(wanted[0] + wanted[1] + wanted[2])]
    finally:
        for process, _ in holders:
            process.kill()
            process.wait()
        for server in (v4, v6, dual):
            server.close()


def test_a_kernel_that_finds_no_socket_leaves_the_lookup_to_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without the TCP diag module answers "no such socket" to every question: the helper's probe of
    a connection of its own sees it, and psutil answers instead of every owner being unknown."""
    monkeypatch.setattr(SocketDiag, "inode", lambda self, local, remote: None)
    owners = SocketOwners()
    assert owners.diag is None
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            found = owners([(client.getsockname(), server.getsockname())])
    assert [f["pid"] if f else None for f in found] == [os.getpid()]


def test_a_client_described_once_is_reused_until_its_pid_names_another_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client's next connections reuse its record (its parent chain costs a millisecond to read); a process
    started since under the same pid (another start time) is described anew."""
    import mcp_blackbox.addon.peer_lookup as peer_lookup

    described = []
    real = peer_lookup._described
    monkeypatch.setattr(peer_lookup, "_described", lambda pid: described.append(pid) or real(pid))
    owners = SocketOwners()
    with socket.create_server(("127.0.0.1", 0)) as server:
        clients = [socket.create_connection(server.getsockname()) for _ in range(3)]
        accepted = [server.accept()[0] for _ in clients]
        ends = [(c.getsockname(), server.getsockname()) for c in clients]
        first, second = owners(ends[:1]), owners(ends[1:2])
        assert first[0] is second[0] and described == [os.getpid()], "the second connection reused the record"
        monkeypatch.setattr(peer_lookup, "_start_ticks", lambda pid: "another start")
        third = owners(ends[2:])
        for sock in clients + accepted:
            sock.close()
    assert described == [os.getpid()] * 2 and third[0] is not None and third[0]["pid"] == os.getpid()


def test_a_socket_its_client_closed_has_no_owner() -> None:
    """Closed first by the client, its socket waits in TIME_WAIT with no process: unknown, not the server's
    process that still holds the other end."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        end = client.getsockname()
        client.close()
        with accepted:
            accepted.recv(1)
            assert SocketOwners()([(end, server.getsockname())]) == [None]
            assert owner_of(accepted.getpeername(), server.getsockname()) is None


def test_no_owner_for_a_socket_nobody_has() -> None:
    assert owner_of(("127.0.0.1", 1), ("127.0.0.1", 2)) is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("::ffff:127.0.0.1", True), ("10.0.0.7", False), ("host.example", False)],
)
def test_only_loopback_peers_are_looked_up(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_lookups_run_off_the_connection_and_none_found_is_unknown() -> None:
    release = threading.Event()

    def slow(wanted: list[Any]) -> list[Any]:
        release.wait(5)
        return [
            None if peer[1] == 2 else {"pid": 7, "name": "x", "started_at": 1.0, "parents": []} for peer, _ in wanted
        ]

    peers = PeerProcesses(slow)
    started = time.perf_counter()
    peers.connected("a", ("127.0.0.1", 1), ("127.0.0.1", 80))
    peers.connected("b", ("127.0.0.1", 2), ("127.0.0.1", 80))
    peers.connected("remote", ("10.0.0.7", 3), ("10.0.0.1", 80))
    assert time.perf_counter() - started < 0.5, "connected() does not wait for the lookup"
    assert peers.of("a") == (False, None), "pending while the lookup runs"
    release.set()
    peers.close_after_pending(5)
    assert peers.of("a") == (True, {"pid": 7, "name": "x", "started_at": 1.0, "parents": []})
    assert peers.of("b") == (True, None), "no process found: unknown"
    assert peers.count == 2 and peers.scans in (1, 2), "b, queued while a's scan ran, came with a or after it"
    assert peers.of("remote") == (False, None), "a remote peer is never looked up"


def test_a_scan_that_fails_leaves_its_connections_unknown() -> None:
    def denied(wanted: list[Any]) -> list[Any]:
        raise psutil.AccessDenied()

    peers = PeerProcesses(denied)
    peers.connected("a", ("127.0.0.1", 1), ("127.0.0.1", 80))
    peers.close_after_pending(5)
    assert peers.of("a") == (True, None)


@pytest.mark.parametrize(
    "recorded",
    [
        None,
        {"pid": 9, "name": "nginx", "started_at": 1.0, "gateway": True},
        {"pid": "9", "name": "x", "started_at": 1.0},
        {"pid": 9, "name": None, "started_at": 1.0},
        {"pid": 9, "name": "x"},
        ["not", "a", "record"],
    ],
)
def test_a_gateway_or_a_malformed_record_names_no_client(recorded: Any) -> None:
    assert process_of(recorded) is None


def test_a_client_record_is_read() -> None:
    assert process_of({"pid": 9, "name": "node", "started_at": 2, "parents": []}) == ClientProcess(9, "node", 2.0)


def test_a_lookup_cancelled_as_the_recorder_stops_is_unknown_not_an_error() -> None:
    """mitmproxy calls the flows' error hooks after the recorder's done hook closed the lookups."""
    release = threading.Event()
    peers = PeerProcesses(lambda wanted: [release.wait(5) and None for _ in wanted])
    peers.connected("running", ("127.0.0.1", 1), ("127.0.0.1", 80))
    peers.connected("queued", ("127.0.0.1", 2), ("127.0.0.1", 80))
    peers.close()
    release.set()
    assert peers.of("queued") == (False, None)


def test_the_helper_process_answers_a_batch_and_one_that_cannot_run_leaves_processes_unknown() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            helper = HelperProcess()
            try:
                found = helper([(client.getsockname(), server.getsockname()), (("127.0.0.1", 1), ("127.0.0.1", 2))])
            finally:
                helper.close()
    assert found[0] is not None and found[0]["pid"] == os.getpid() and found[1] is None
    broken = HelperProcess()
    broken.process = subprocess.Popen(
        [sys.executable, "-c", "pass"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    broken.process.wait()
    assert broken([(("127.0.0.1", 1), ("127.0.0.1", 2))]) == [None] and broken.failed
    assert broken([(("127.0.0.1", 1), ("127.0.0.1", 2))]) == [None], "not tried again"


def test_the_parent_chain_goes_into_the_first_flow_of_a_connection_only() -> None:
    record = {"pid": 7, "name": "x", "started_at": 1.0, "parents": [{"pid": 1, "name": "init"}]}
    peers = PeerProcesses(lambda wanted: [record for _ in wanted])
    peers.connected("a", ("127.0.0.1", 1), ("127.0.0.1", 80))
    peers.close_after_pending(5)
    assert peers.of("a") == (True, record)
    assert peers.of("a") == (True, {"pid": 7, "name": "x", "started_at": 1.0})


def test_a_forwarder_is_described_as_a_gateway(tmp_path: Any) -> None:
    """A peer whose executable is a proxy or a forwarder carries other processes' requests: a real process
    named socat (a copy of sleep) is described with ``gateway``, and the analysis names no client for it."""
    forwarder = tmp_path / "socat"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", forwarder)
    process = subprocess.Popen([str(forwarder), "5"])
    try:
        described = describe(psutil.Process(process.pid))
    finally:
        process.kill()
        process.wait()
    assert described["name"] == "socat" and described.get("gateway") is True
    assert process_of(described) is None


def test_a_connection_whose_flows_all_ended_before_its_lookup_is_named_on_a_later_flow() -> None:
    """A stateless client's connection of one request: its flow is written before the lookup is done, so the
    next flow written names it (FlowRecord.earlier_connections), once."""
    release = threading.Event()
    record = {"pid": 7, "name": "x", "started_at": 1.0, "parents": [{"pid": 1, "name": "init"}]}
    peers = PeerProcesses(lambda wanted: [release.wait(5) and record for _ in wanted])
    peers.connected("short", ("127.0.0.1", 1), ("127.0.0.1", 80))
    assert peers.of("short") == (False, None), "its only flow is written without it"
    assert peers.settled() == {}, "not found yet"
    release.set()
    peers.close_after_pending(5)
    assert peers.settled() == {"short": {"pid": 7, "name": "x", "started_at": 1.0}}
    assert peers.settled() == {}, "said once"
