"""The recorder when things go wrong: clients hang up, mitmdump is stopped mid-stream; and every proxy mode."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess, start_server
from tests.support.proxy import Mitmdump, start_mitmdump
from tests.support.raw_http import mcp_headers

pytestmark = pytest.mark.e2e


def progress_call(steps: int, delay_ms: int) -> bytes:
    params = {"name": "progress", "arguments": {"steps": steps, "delay_ms": delay_ms}, "_meta": {"progressToken": 1}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


class StreamReader:
    """Reads an SSE response through the proxy, noting when each event arrived."""

    def __init__(self, port: int, target: str, body: bytes) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        self.connection.request("POST", target, body, {"content-type": "application/json", **mcp_headers()})
        self.response = self.connection.getresponse()
        self.received = b""
        self.arrivals: list[float] = []

    def read_events(self, count: int) -> None:
        while self.received.count(b"\n\n") + self.received.count(b"\r\n\r\n") < count:
            chunk = self.response.read1(65536)
            if not chunk:
                return
            self.received += chunk
            self.arrivals.append(time.time())

    def read_all(self) -> None:
        try:
            while chunk := self.response.read1(65536):
                self.received += chunk
                self.arrivals.append(time.time())
        except (http.client.IncompleteRead, ConnectionError, OSError):
            pass

    def close(self) -> None:
        if self.connection.sock is not None:
            self.connection.sock.close()  # hang up now, mid-body, as a crashing client would
        self.connection.close()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with start_server("stateless") as process:
        yield process


def reverse(server: ServerProcess) -> str:
    return f"reverse:http://127.0.0.1:{server.port}"


def only_stream(proxy: Mitmdump) -> tuple[object, dict]:
    (flow,) = [f for f in proxy.flows() if "stream" in f.metadata.get("mcp_blackbox", {})]
    return flow, flow.metadata["mcp_blackbox"]["stream"]


def test_client_abort_keeps_the_partial_stream(server: ServerProcess, tmp_path: Path) -> None:
    proxy = start_mitmdump(reverse(server), tmp_path)
    reader = StreamReader(proxy.port, "/mcp", progress_call(steps=10, delay_ms=150))
    reader.read_events(2)
    reader.close()
    time.sleep(0.5)
    proxy.stop()
    flow, stream = only_stream(proxy)
    assert stream["ended"] == "client-abort"
    # The proxy may have forwarded a little more than the client read before hanging up.
    assert reader.received and flow.response.raw_content.startswith(reader.received)
    # Written as it ended, before the live verdict (which the analyzer makes anew): the console said it.
    (line,) = [line for line in proxy.log().splitlines() if " POST tools/call " in line]
    assert "FAILED: STREAM_INCOMPLETE:" in line and "stream ended: client-abort" in line, line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopping_mitmdump_mid_stream_writes_the_partial_stream(
    server: ServerProcess, tmp_path: Path, sig: signal.Signals
) -> None:
    proxy = start_mitmdump(reverse(server), tmp_path)
    reader = StreamReader(proxy.port, "/mcp", progress_call(steps=50, delay_ms=100))
    reader.read_events(3)
    proxy.stop(sig)
    reader.read_all()
    flow, stream = only_stream(proxy)
    assert stream["ended"] == "proxy-shutdown"
    assert flow.response.raw_content == reader.received, "the file holds exactly what the client got"
    assert reader.received.count(b"notifications/progress") >= 3
    assert flow.comment.startswith("MCP: STREAM_INCOMPLETE:") and "stream ended: proxy-shutdown" in flow.comment


def assert_streamed_live(reader: StreamReader) -> None:
    """Events spaced 150 ms apart upstream must not arrive in one burst."""
    assert b"done 4" in reader.received
    assert reader.arrivals[-1] - reader.arrivals[0] > 0.3, reader.arrivals


def test_regular_proxy_mode(server: ServerProcess, tmp_path: Path) -> None:
    proxy = start_mitmdump("regular", tmp_path)
    reader = StreamReader(proxy.port, f"http://127.0.0.1:{server.port}/mcp", progress_call(steps=4, delay_ms=150))
    reader.read_all()
    proxy.stop()
    assert_streamed_live(reader)
    flow, stream = only_stream(proxy)
    assert stream["ended"] == "complete" and flow.response.raw_content == reader.received
    assert len(stream["event_times"]) >= 5


def test_upstream_proxy_mode(server: ServerProcess, tmp_path: Path) -> None:
    outer = start_mitmdump("regular", tmp_path, name="outer")
    proxy = start_mitmdump(f"upstream:http://127.0.0.1:{outer.port}", tmp_path, name="inner")
    try:
        reader = StreamReader(proxy.port, f"http://127.0.0.1:{server.port}/mcp", progress_call(steps=4, delay_ms=150))
        reader.read_all()
    finally:
        proxy.stop()
        outer.stop()
    assert_streamed_live(reader)
    flow, stream = only_stream(proxy)
    assert stream["ended"] == "complete" and flow.response.raw_content == reader.received


def test_record_command_runs_mitmdump_with_the_addon(server: ServerProcess, tmp_path: Path) -> None:
    listen_file, flow_file = tmp_path / "listen.json", tmp_path / "capture.flows"
    command = [str(Path(sys.executable).with_name("mcp-blackbox")), "record", "--upstream", server.url("")]
    command += ["-p", "0", "--listen-file", str(listen_file), "-w", str(flow_file)]
    log = (tmp_path / "record.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not listen_file.exists():
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "record.log").read_text()
            time.sleep(0.05)
        port = json.loads(listen_file.read_text())["listen_addrs"][0][1]
        reader = StreamReader(port, "/mcp", progress_call(steps=2, delay_ms=10))
        reader.read_all()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(15)
    proxy = Mitmdump(process, port, flow_file, tmp_path / "record.log")
    flow, stream = only_stream(proxy)
    assert stream["ended"] == "complete" and b"done 2" in flow.response.raw_content
    console = proxy.log()
    assert "POST tools/call progress id=1 200 text/event-stream" in console, console
