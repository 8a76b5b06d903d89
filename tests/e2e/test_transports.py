"""Faithful on every transport, through real processes on 127.0.0.1 (issue 12, part 5).

- TLS upstream: the test MCP server behind TLS (hypercorn, a certificate made here with trustme),
  recorded by `mcp-blackbox record --upstream https://...` with `-- --ssl-insecure` or with the CA
  trusted (`ssl_verify_upstream_trusted_ca`), the client speaking plain HTTP to the recorder; and the
  intercepting regular mode, the client trusting mitmproxy's CA through SSL_CERT_FILE.
- HTTP/2 end to end: an h2 client (httpx2, http2=True) through mitmdump to hypercorn serving h2.
- HTTP/2 resets: which side ended a stream. mitmproxy words a RST_STREAM from either peer "stream reset
  by client (CODE)"; the recorder reads the side from mitmproxy's stream state (addon/error_side.py).
  A raw h2 server resets a stream mid-event-stream (with CANCEL, the code clients use, so only the
  side tells them apart), a raw h2 client resets one, and an httpx2 client closes its connection
  mid-stream (httpx2 sends no RST_STREAM when a response is closed early: it closes the connection).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import httpx2
import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.h2_sse_server import H2SseServer
from tests.support.processes import REPO_ROOT, run_json_command
from tests.support.proxy import Mitmdump, start_mitmdump
from tests.support.raw_http import mcp_headers
from tests.support.tls import Tls, https_mcp_server, make_tls

pytestmark = pytest.mark.e2e

STEPS = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "over tls"}},
    {"op": "call", "tool": "tool_error", "args": {"message": "tool says no"}},
    {"op": "call", "tool": "protocol_error", "args": {"message": "bad params"}},
    {"op": "call", "tool": "progress", "args": {"steps": 3, "delay_ms": 50}},
]
EXPECTED = {
    "echo": "TOOL_SUCCESS",
    "tool_error": "TOOL_ERROR",
    "protocol_error": "JSONRPC_ERROR",
    "progress": "TOOL_SUCCESS",
}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_server(tls: Tls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The test MCP server (stateless) served by hypercorn over TLS, offering h2 and http/1.1."""
    with https_mcp_server(tls, tmp_path_factory.mktemp("hypercorn")) as port:
        yield port


def verdicts(flow_file: Path) -> dict[str, str]:
    calls = analyze([str(flow_file)]).calls
    return {c["tool"]: c["outcome"] for c in calls if c["method"] == "tools/call"}


def run_client(url: str) -> dict[str, Any]:
    """The official Python SDK client (tests/clients/py_client) running STEPS, in its own process (with this
    process's environment)."""
    argv = [sys.executable, "-m", "tests.clients.py_client", "--url", url, "--steps", json.dumps(STEPS)]
    return run_json_command([*argv, "--mode", "legacy", "--timeout", "30"], timeout=45)


def record(upstream: str, workdir: Path, after_dashes: list[str]) -> Mitmdump:
    """`mcp-blackbox record --upstream URL -p 0 --listen-file F -w FILE -- ...`, as docs/transports.md has it."""
    listen_file, flow_file, log_file = workdir / "listen.json", workdir / "capture.flows", workdir / "record.log"
    command = [str(Path(sys.executable).with_name("mcp-blackbox")), "record", "--upstream", upstream, "-p", "0"]
    command += ["--listen-file", str(listen_file), "-w", str(flow_file), "--", *after_dashes]
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not listen_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"record did not start; log:\n{log_file.read_text(errors='replace')}")
        time.sleep(0.05)
    port = json.loads(listen_file.read_text())["listen_addrs"][0][1]
    return Mitmdump(process, port, flow_file, log_file)


@pytest.mark.parametrize("trust", ["ssl-insecure", "trusted-ca"])
def test_a_tls_upstream_is_recorded_with_its_verdicts(https_server: int, tls: Tls, tmp_path: Path, trust: str) -> None:
    after = (
        ["--ssl-insecure"] if trust == "ssl-insecure" else ["--set", f"ssl_verify_upstream_trusted_ca={tls.ca_file}"]
    )
    proxy = record(f"https://127.0.0.1:{https_server}", tmp_path, after)
    try:
        result = run_client(f"{proxy.url}/mcp")  # the client speaks plain HTTP to the recorder
    finally:
        proxy.stop(signal.SIGINT)
    assert len(result["steps"]) == len(STEPS), result
    assert verdicts(proxy.flow_file) == EXPECTED
    upstream = [f for f in proxy.flows() if f.request.path.startswith("/mcp")]
    assert upstream and all(f.request.scheme == "https" and f.server_conn.tls_established for f in upstream)


def test_a_tls_upstream_without_trust_is_a_recorded_refusal(https_server: int, tmp_path: Path) -> None:
    """Without --ssl-insecure or the CA, mitmproxy refuses the server's certificate: a 502, on the record."""
    proxy = start_mitmdump(
        f"reverse:https://127.0.0.1:{https_server}", tmp_path, options={"connection_strategy": "lazy"}
    )
    try:
        response = httpx2.post(f"{proxy.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=20)
    finally:
        proxy.stop()
    assert response.status_code == 502 and "certificate" in response.text.lower()
    (flow,) = proxy.flows()
    assert flow.error is not None and "certificate" in flow.error.msg.lower()


def test_regular_mode_intercepts_https_with_mitmproxys_ca(
    https_server: int, tls: Tls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--mode regular: the client sends CONNECT and trusts mitmproxy's CA (SSL_CERT_FILE), mitmproxy trusts
    the server's (ssl_verify_upstream_trusted_ca)."""
    confdir = tmp_path / "confdir"
    options = {"confdir": str(confdir), "ssl_verify_upstream_trusted_ca": str(tls.ca_file)}
    proxy = start_mitmdump("regular", tmp_path, options=options)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(confdir / "mitmproxy-ca-cert.pem"))
    for name in ("NO_PROXY", "no_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    try:
        run_client(f"https://127.0.0.1:{https_server}/mcp")
    finally:
        proxy.stop()
    assert verdicts(proxy.flow_file) == EXPECTED
    flows = [f for f in proxy.flows() if f.request.path.startswith("/mcp")]
    assert flows and all(f.client_conn.tls_established and f.server_conn.tls_established for f in flows)


def h2_mitmdump(upstream_port: int, workdir: Path) -> tuple[Mitmdump, Path]:
    """mitmdump in reverse mode to an HTTPS upstream, its own CA in a confdir the client trusts."""
    confdir = workdir / "confdir"
    options = {"confdir": str(confdir), "ssl_insecure": "true"}
    proxy = start_mitmdump(f"reverse:https://127.0.0.1:{upstream_port}", workdir, options=options)
    return proxy, confdir / "mitmproxy-ca-cert.pem"


def tools_call(name: str, arguments: dict[str, Any], rpc_id: int) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": {"progressToken": rpc_id}}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


def test_http2_end_to_end_keeps_the_streams_and_verdicts(https_server: int, tmp_path: Path) -> None:
    proxy, ca = h2_mitmdump(https_server, tmp_path)
    headers = mcp_headers({"mcp-protocol-version": "2025-06-18"})
    try:
        with httpx2.Client(http2=True, verify=ssl.create_default_context(cafile=str(ca)), timeout=20) as client:
            answers = [
                client.post(f"https://127.0.0.1:{proxy.port}/mcp", json=tools_call(name, args, n), headers=headers)
                for n, (name, args) in enumerate(
                    [("echo", {"text": "h2"}), ("tool_error", {"message": "no"}), ("progress", {"steps": 4})], 1
                )
            ]
    finally:
        proxy.stop()
    assert [a.http_version for a in answers] == ["HTTP/2"] * 3 and all(a.status_code == 200 for a in answers)
    flows = proxy.flows()
    assert {f.request.http_version for f in flows} == {"HTTP/2.0"}
    assert {f.server_conn.alpn for f in flows} == {b"h2"}, "h2 upstream too"
    analysis = analyze([str(proxy.flow_file)])
    assert {c["tool"]: c["outcome"] for c in analysis.calls} == {
        "echo": "TOOL_SUCCESS",
        "tool_error": "TOOL_ERROR",
        "progress": "TOOL_SUCCESS",
    }
    (progress,) = [c for c in analysis.call_objects if c.request.method == "tools/call" and len(c.notifications) == 4]
    times = [m.t for m in (*progress.notifications, *progress.responses)]
    assert times == sorted(times) and times[-1] - times[0] > 0.2, "each event dated as it arrived over h2"


def h2_request(port: int, ca: Path, path: str, *, reset_after_events: int | None = None) -> tuple[bytes, str]:
    """One POST over a raw HTTP/2 connection; with ``reset_after_events``, RST_STREAM(CANCEL) after that many
    events. Returns what the client got and how its stream ended."""
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        request = [(":method", "POST"), (":path", path), (":scheme", "https"), (":authority", f"127.0.0.1:{port}")]
        request += [("content-type", "application/json"), *mcp_headers({"mcp-protocol-version": "2025-06-18"}).items()]
        conn.send_headers(1, request)
        conn.send_data(1, json.dumps(tools_call("progress", {"steps": 50}, 1)).encode(), end_stream=True)
        sock.sendall(conn.data_to_send())
        received, ended = b"", "connection closed"
        while ended == "connection closed" and (data := sock.recv(65536)):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    received += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                    if reset_after_events and received.count(b"\n\n") >= reset_after_events:
                        conn.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
                        ended = "reset by the client"
                        break
                elif isinstance(event, h2.events.StreamReset):
                    ended = f"reset by the proxy ({h2.errors.ErrorCodes(event.error_code).name})"
                elif isinstance(event, h2.events.StreamEnded):
                    ended = "complete"
            sock.sendall(conn.data_to_send())
        time.sleep(0.3)  # let the reset travel on before the connection closes
    return received, ended


def stream_of(proxy: Mitmdump, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The addon's stream record of the flow to ``path`` and the analysis's record of its call."""
    (flow,) = [f for f in proxy.flows() if f.request.path == path]
    (call,) = [c for c in analyze([str(proxy.flow_file)]).calls if c["exchanges"][:1] == [flow.id]]
    return flow.metadata["mcp_blackbox"]["stream"], call


def test_which_side_reset_an_http2_stream(tls: Tls, tmp_path: Path) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.ca.issue_cert("127.0.0.1").configure_cert(context)
    server = H2SseServer(context)
    proxy, ca = h2_mitmdump(server.port, tmp_path)
    try:
        by_server, server_end = h2_request(proxy.port, ca, "/reset")
        by_client, client_end = h2_request(proxy.port, ca, "/slow", reset_after_events=2)
        time.sleep(0.3)
    finally:
        proxy.stop()
        server.close()
    # What happened on the wire: the server reset stream 1 of its connection, mitmproxy passed the reset on;
    # the client reset its stream, mitmproxy passed that on to the server. Both with CANCEL.
    assert server.resets == [1] and server_end == "reset by the proxy (CANCEL)"
    assert client_end == "reset by the client" and server.reset_by_peer == [(1, h2.errors.ErrorCodes.CANCEL)]
    assert by_server.count(b"notifications/progress") == 2 and by_client.count(b"notifications/progress") >= 2

    # mitmproxy's words are the same for both ...
    server_stream, server_call = stream_of(proxy, "/reset")
    client_stream, client_call = stream_of(proxy, "/slow")
    assert server_stream["error"] == client_stream["error"] == "stream reset by client (CANCEL)"
    # ... the capture still tells them apart.
    assert (server_stream["ended"], server_stream["error_side"]) == ("server-reset", "server")
    assert (client_stream["ended"], client_stream["error_side"]) == ("client-abort", "client")
    assert server_call["outcome"] == client_call["outcome"] == "STREAM_INCOMPLETE"
    assert server_call["ending"]["ended_by"] == "server-cut"
    assert server_call["ending"]["detail"] == "the server reset the HTTP/2 stream (RST_STREAM CANCEL)"
    assert "the server reset the HTTP/2 stream (RST_STREAM from the server's connection)" in server_call["evidence"]
    assert client_call["ending"]["ended_by"] == "client-close"
    assert client_call["ending"]["detail"] == "the client reset the HTTP/2 stream (RST_STREAM CANCEL)"


def test_an_http2_client_closing_its_connection_mid_stream_is_the_clients_doing(tls: Tls, tmp_path: Path) -> None:
    """httpx2 leaves an early-closed h2 stream open; closing the client closes the connection (GOAWAY).
    mitmproxy words that "peer closed connection" or "HTTP/2 connection closed" whichever side it was."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.ca.issue_cert("127.0.0.1").configure_cert(context)
    server = H2SseServer(context)
    proxy, ca = h2_mitmdump(server.port, tmp_path)
    try:
        client = httpx2.Client(http2=True, verify=ssl.create_default_context(cafile=str(ca)), timeout=20)
        body = tools_call("progress", {"steps": 50}, 1)
        headers = mcp_headers({"mcp-protocol-version": "2025-06-18"})
        with client.stream("POST", f"https://127.0.0.1:{proxy.port}/slow", json=body, headers=headers) as response:
            assert response.http_version == "HTTP/2"
            events = 0
            for line in response.iter_lines():
                events += line.startswith("data:")
                if events == 2:
                    break
        client.close()
        time.sleep(0.5)
    finally:
        proxy.stop()
        server.close()
    stream, call = stream_of(proxy, "/slow")
    # mitmproxy's words for a closed h2 connection, the same from either side
    assert stream["error"] == "peer closed connection" or stream["error"].startswith("HTTP/2 connection closed")
    assert stream["ended"] == "client-abort" and stream["error_side"] == "client", stream
    assert call["ending"]["ended_by"] == "client-close"


NODE_MODULES = REPO_ROOT / "tests" / "truth" / "peers" / "node" / "node_modules"


@pytest.mark.skipif(shutil.which("node") is None or not (NODE_MODULES / "undici").exists(), reason="node or undici")
def test_the_documented_node_recipe_goes_through_the_recorder(https_server: int, tls: Tls, tmp_path: Path) -> None:
    """docs/transports.md, "Intercepting": Node's fetch through regular mode with undici's EnvHttpProxyAgent
    loaded by --import and mitmproxy's CA in NODE_EXTRA_CA_CERTS, the page's file and command as written (but for
    the port)."""
    page = (REPO_ROOT / "docs" / "transports.md").read_text(encoding="utf-8")
    agent = re.search(r"^    (import \{ setGlobalDispatcher.*\n    setGlobalDispatcher\(.*\);)$", page, re.MULTILINE)
    command = re.search(r"^    (HTTPS_PROXY=\S+ NODE_EXTRA_CA_CERTS=.* node --import .*)$", page, re.MULTILINE)
    assert agent and command, "docs/transports.md's Node recipe"
    (tmp_path / "proxy-env.mjs").write_text(agent.group(1).replace("\n    ", "\n") + "\n")
    (tmp_path / "node_modules").symlink_to(NODE_MODULES)
    call = json.dumps(tools_call("echo", {"text": "from node"}, 1))
    (tmp_path / "client.mjs").write_text(
        f"const r = await fetch('https://127.0.0.1:{https_server}/mcp', {{method: 'POST', body: {json.dumps(call)}, "
        "headers: {'content-type': 'application/json', accept: 'application/json, text/event-stream', "
        "'mcp-protocol-version': '2025-06-18'}});\nconsole.log(r.status, await r.text());\n"
    )
    # mitmproxy's default confdir is ~/.mitmproxy: HOME is the test's folder for both.
    options = {"confdir": str(tmp_path / ".mitmproxy"), "ssl_verify_upstream_trusted_ca": str(tls.ca_file)}
    proxy = start_mitmdump("regular", tmp_path, options=options)
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "http_proxy", "all_proxy")}
    try:
        done = subprocess.run(
            ["bash", "-c", command.group(1).replace("127.0.0.1:8080", f"127.0.0.1:{proxy.port}")],
            cwd=tmp_path, env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        proxy.stop()
    assert done.returncode == 0 and done.stdout.startswith("200"), done.stdout + done.stderr
    assert verdicts(proxy.flow_file) == {"echo": "TOOL_SUCCESS"}, "the call went through the recorder"
