"""The capture stays faithful to what the client got, through real mitmdump with the addon:
a stream longer than the recorder keeps, a JSON body cut before its declared length, and a
gzip-compressed event stream whose events still get their own arrival times."""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.processes import ServerProcess, start_server
from tests.support.proxy import start_mitmdump
from tests.support.raw_http import mcp_headers

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def tools_call(name: str, arguments: dict[str, object], rpc_id: int = 1) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": {"progressToken": rpc_id}}
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}).encode()


def post(port: int, body: bytes) -> tuple[int, bytes]:
    """What the client got: the status and every byte of the body (or the connection's error)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/mcp", body, {"content-type": "application/json", **mcp_headers()})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with start_server("stateless") as process:
        yield process


def test_a_stream_over_the_body_cap_is_judged_on_what_the_client_got(server: ServerProcess, tmp_path: Path) -> None:
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path, options={"mcp_stream_max_body": "4k"})
    try:
        status, received = post(proxy.port, tools_call("progress", {"steps": 120, "delay_ms": 2}))
    finally:
        proxy.stop()
    # What the client got: every progress event and the final result.
    assert status == 200 and received.count(b"notifications/progress") == 120 and b'"result"' in received
    (call,) = [c for c in analyze([str(proxy.flow_file)]).calls if c["method"] == "tools/call"]
    assert call["outcome"] == "TOOL_SUCCESS", call["evidence"]
    assert "TRUNCATED_IN_CAPTURE" in call["flags"]
    (flow,) = [f for f in proxy.flows() if "stream" in f.metadata.get("mcp_blackbox", {})]
    kept = flow.response.raw_content
    assert len(kept) < len(received) and received.endswith(kept[-200:]), "the tail the client got is kept"
    # A capture's limit is not a transport failure: the gate passes.
    gate = subprocess.run(
        [sys.executable, "-m", "mcp_blackbox.cli.main", "check", str(proxy.flow_file)],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr


def one_shot_server(respond: Callable[[socket.socket], None]) -> int:
    """A raw HTTP/1.1 server on a free port that reads one request per connection and lets ``respond`` answer."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            connection, _ = listener.accept()
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
            )
            while len(body) < length:
                body += connection.recv(65536)
            try:
                respond(connection)
            finally:
                connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1])


def test_a_json_answer_cut_before_its_length_is_a_transport_cut(tmp_path: Path) -> None:
    def headers_then_hang_up(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 234\r\n\r\n")
        time.sleep(0.2)

    port = one_shot_server(headers_then_hang_up)
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{port}", tmp_path)
    try:
        status, _ = post(proxy.port, tools_call("echo", {"text": "hi"}))
    finally:
        proxy.stop()
    assert status == 502, "the client got the proxy's Bad Gateway, not an answer"
    (call,) = analyze([str(proxy.flow_file)]).calls
    assert call["outcome"] == "STREAM_INCOMPLETE" and call["layer"] == "transport", call["evidence"]
    assert "expected 234" in call["evidence"][-1] and call["ending"]["ended_by"] == "server-cut"


def test_a_gzip_event_stream_keeps_per_event_times(tmp_path: Path) -> None:
    events = [
        json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": n}}
        )
        for n in range(4)
    ] + [json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "done"}]}})]
    gap = 0.25

    def gzip_stream(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        for n, event in enumerate(events):
            piece = compressor.compress(f"data: {event}\n\n".encode()) + compressor.flush(zlib.Z_SYNC_FLUSH)
            if n == len(events) - 1:
                piece += compressor.flush()
            connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            time.sleep(gap)
        connection.sendall(b"0\r\n\r\n")

    port = one_shot_server(gzip_stream)
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{port}", tmp_path)
    try:
        status, _ = post(proxy.port, tools_call("progress", {"steps": 4}))
    finally:
        proxy.stop()
    assert status == 200
    analysis = analyze([str(proxy.flow_file)])
    assert not any("without per-event times" in note for note in analysis.notes), analysis.notes
    (call,) = analysis.call_objects
    times = [m.t for m in (*call.notifications, *call.responses)]
    assert len(times) == 5 and times == sorted(times)
    steps = [b - a for a, b in itertools.pairwise(times)]
    assert all(step > gap / 2 for step in steps), f"events dated apart, as they arrived: {steps}"
    assert call.outcome == "TOOL_SUCCESS"
