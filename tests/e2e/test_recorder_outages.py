"""`mcp-blackbox record` when the upstream is down or resets, and when its own port is taken.

mitmproxy's default (eager) connection strategy connects upstream as soon as a client connects and,
when that fails, drops the client before any flow exists: the outage left a 0-byte capture. `record`
connects lazily (connection_strategy=lazy), so each request is a flow with the connect error in it.
"""

from __future__ import annotations

import json
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.proxy import free_port
from tests.support.raw_http import http_request, mcp_headers

pytestmark = pytest.mark.e2e

MCP_BLACKBOX = str(Path(sys.executable).with_name("mcp-blackbox"))


@contextmanager
def recording(upstream: str, tmp_path: Path, *extra: str) -> Iterator[int]:
    """`mcp-blackbox record` on a free port; stopped with Ctrl-C, as a person stops it."""
    listen_file, log_path = tmp_path / "listen.json", tmp_path / "record.log"
    command = [MCP_BLACKBOX, "record", "--upstream", upstream, "-p", "0", "--listen-file", str(listen_file), *extra]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not listen_file.exists():
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        yield json.loads(listen_file.read_text())["listen_addrs"][0][1]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, log_path.read_text()


def tool_call(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}


def client_got_no_answer(port: int, n: int) -> bool:
    """One raw POST through the proxy; True when no JSON-RPC answer came back (a 502 page, or nothing)."""
    try:
        response = http_request(port, "POST", "/mcp", tool_call(n), mcp_headers(), timeout=10)
    except OSError:
        return True
    return response.status >= 500 and b'"jsonrpc"' not in response.body


@contextmanager
def resetting_upstream() -> Iterator[int]:
    """A server that accepts each connection, reads the request and resets it (RST, no response)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            with suppress(OSError):
                conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_a_dead_upstream_is_recorded_as_no_response(tmp_path: Path) -> None:
    capture = tmp_path / "capture.flows"
    dead = free_port()  # nothing listens there
    with recording(f"http://127.0.0.1:{dead}", tmp_path, "-w", str(capture)) as port:
        assert all(client_got_no_answer(port, n) for n in (1, 2, 3))
    assert stat.S_IMODE(capture.stat().st_mode) == 0o600
    calls = analyze([capture]).calls
    assert [c["jsonrpc_id"] for c in calls] == [1, 2, 3]
    for call in calls:
        assert call["outcome"] == "NO_RESPONSE", call
        assert any("Connect call failed" in line for line in call["evidence"]), call["evidence"]
        assert "Connect call failed" in call["reason"] and call["ending"]["ended_by"] == "proxy", call


def test_a_reset_upstream_is_recorded_as_no_response(tmp_path: Path) -> None:
    capture = tmp_path / "capture.flows"
    with (
        resetting_upstream() as upstream,
        recording(f"http://127.0.0.1:{upstream}", tmp_path, "-w", str(capture)) as port,
    ):
        assert all(client_got_no_answer(port, n) for n in (1, 2))
    calls = analyze([capture]).calls
    assert [c["outcome"] for c in calls] == ["NO_RESPONSE", "NO_RESPONSE"], calls
    for call in calls:
        evidence = " ".join(call["evidence"]).lower()
        assert "reset" in evidence or "disconnect" in evidence or "closed" in evidence, call["evidence"]


def test_a_port_in_use_is_said_and_leaves_no_capture(tmp_path: Path) -> None:
    capture = tmp_path / "capture.flows"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [MCP_BLACKBOX, "record", "--upstream", "http://127.0.0.1:9", "-p", str(port), "-w", str(capture)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert f"port {port} is in use: choose another with -p, or -p 0 for any free port" in done.stderr, done.stderr
    assert not capture.exists()
