"""Secrets never on disk, through real processes: the official Python SDK client with a Bearer token, the
test server that requires it, mitmdump with the addon and ``--set mcp_redact=true``.

Secrets are planted in every place a capture holds them: the Authorization header, a cookie, an X-Api-Key
header, the query string (?api_key=), tool arguments (password, access_token), a tool result that carries
an sk- key and the password back, a tool error whose text (and so the addon's metadata, the live verdict's
reason) quotes the password, event-stream data, the session ids. In the same mitmdump a second writer
(tests/e2e/unredacted_twin.py) keeps the original of the same flows. Then:

- the client and the server saw the real secrets (the traffic is not changed);
- no planted secret is anywhere in the redacted file, bodies decompressed;
- the analysis of the redacted and of the original capture is the same: per call (flow id and JSON-RPC id)
  the outcome, flags, retry group, origin and confidence; the retry groups and their members; the
  duplicate executions;
- ``mcp-blackbox redact`` of the original gives the same, and mitmweb opens its output (REST API).
"""

from __future__ import annotations

import io
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.cli.main import main
from tests.support.processes import ServerProcess, run_py_client, start_server
from tests.support.proxy import ADDON, MITMDUMP, Mitmdump, free_port
from tests.support.raw_http import Control, http_request, mcp_headers

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
BEARER = "bearer-Secret-0123456789abcdef"
API_KEY = "query-Key-fedcba9876543210"
X_API_KEY = "header-Key-00aa11bb22cc33dd"
COOKIE = "cookie-Session-99887766554433"
PASSWORD = "Hunter2-Horse-Battery-Staple"
ACCESS = "ya29.access-Token-0123456789"
SK = "sk-proj-Planted0123456789abcdefXYZ"
PLANTED = (BEARER, API_KEY, X_API_KEY, COOKIE, PASSWORD, ACCESS, SK)

STEPS: list[dict[str, Any]] = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": f"key {SK}; pw {PASSWORD}", "password": PASSWORD,
                                            "access_token": ACCESS}},
    {"op": "call", "tool": "tool_error", "args": {"message": f"wrong password {PASSWORD}"}},
    # A JSON-RPC error's message is quoted in the live verdict's reason: the addon's metadata carries the password.
    {"op": "call", "tool": "protocol_error", "args": {"message": f"refused {PASSWORD} for k1"}},
    {"op": "call", "tool": "write_record", "args": {"key": "k1", "value": PASSWORD}},  # a write run twice:
    {"op": "call", "tool": "add", "args": {"a": 2, "b": 3}},  # 503 once (below), then again: a retry chain,
    {"op": "call", "tool": "add", "args": {"a": 2, "b": 3}},
    {"op": "call", "tool": "write_record", "args": {"key": "k1", "value": PASSWORD}},  # and after it, again
    {"op": "call", "tool": "progress", "args": {"steps": 2, "delay_ms": 20}},  # progressToken survives
]  # fmt: skip
ADD_503 = {
    "match": {"rpc_method": "tools/call", "tool": "add"},
    "times": 1,
    "action": {"status": 503, "body": f"upstream down, login {PASSWORD} refused"},
}


def start_recorder(upstream: str, workdir: Path, timeout: float = 20) -> tuple[Mitmdump, Path]:
    """mitmdump -s addon -s unredacted_twin --set mcp_redact=true -w redacted.flows --set twin_file=..."""
    listen_file, flow_file, twin = workdir / "listen.json", workdir / "redacted.flows", workdir / "original.flows"
    log_file = workdir / "mitmdump.log"
    command = [MITMDUMP, "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1", "-p", "0"]
    command += ["-w", str(flow_file), "-s", str(ADDON), "-s", str(HERE / "unredacted_twin.py")]
    command += ["--set", f"mcp_listen_file={listen_file}", "--set", "mcp_redact=true", "--set", f"twin_file={twin}"]
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    deadline = time.monotonic() + timeout
    while not listen_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"mitmdump did not start; log:\n{log_file.read_text(errors='replace')}")
        time.sleep(0.05)
    port = json.loads(listen_file.read_text())["listen_addrs"][0][1]
    return Mitmdump(process, port, flow_file, log_file), twin


def read(path: Path) -> list[HTTPFlow]:
    with path.open("rb") as f:
        return [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


def everything_in(path: Path) -> bytes:
    """The file's bytes and every body decoded (a compressed body hides nothing from this search)."""
    parts = [path.read_bytes()]
    for flow in read(path):
        for message in (flow.request, flow.response):
            if message is not None:
                parts.append(message.get_content(strict=False) or b"")
    return b"\n".join(parts)


CALL_FIELDS = ("call_id", "outcome", "flags", "retry_group", "attempt", "retry_origin", "retry_confidence",
               "method", "tool")  # fmt: skip
GROUP_FIELDS = ("retry_group", "origin", "confidence", "members", "final_outcome", "safety")


def verdicts(path: Path) -> dict[str, Any]:
    """Each call by the flow that carried it and its JSON-RPC id; the retry groups; the duplicate executions
    (not their arguments' digest: the arguments hold pseudonyms, equal where they were equal)."""
    out = io.StringIO()
    write_json(analyze([path]), out, redact=False)
    document = json.loads(out.getvalue())
    calls = {}
    for c in document["calls"]:
        key = (c["exchanges"][0] if c["exchanges"] else None, json.dumps(c["jsonrpc_id"]))
        calls[key] = {k: c[k] for k in CALL_FIELDS}
    return {
        "calls": calls,
        "retry_groups": [{k: g[k] for k in GROUP_FIELDS} for g in document["retry_groups"]],
        "duplicate_executions": [
            {k: v for k, v in d.items() if k != "arguments_digest"} for d in document["duplicate_executions"]
        ],
        "skipped": document["skipped"],
    }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("redaction")
    with start_server("stateful", auth_token=BEARER) as server:
        proxy, twin = start_recorder(f"http://127.0.0.1:{server.port}", workdir)
        try:
            control = Control(server.port)
            control.reset()
            control.faults(ADD_503)
            run = run_py_client(
                f"{proxy.url}/mcp?api_key={API_KEY}", STEPS, mode="legacy", auth_token=BEARER, timeout=40,
                step_timeout=10,
            )  # fmt: skip
            retried = run_py_client(f"{proxy.url}/mcp", [{"op": "list_tools"}], mode="legacy",
                                    auth_retry_token=BEARER, timeout=30)  # fmt: skip
            raw = http_request(proxy.port, "POST", "/mcp", body=initialize(), headers=mcp_headers(planted_headers()))
            server_log = wait_for(control, server)
        finally:
            assert proxy.stop() == 0, proxy.log()
    yield {"run": run, "retried": retried, "raw": raw, "server_log": server_log, "redacted": proxy.flow_file,
           "original": twin, "log": proxy.log(), "workdir": workdir}  # fmt: skip


def initialize() -> dict[str, Any]:
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def planted_headers() -> dict[str, str]:
    return {"authorization": f"Bearer {BEARER}", "cookie": f"sid={COOKIE}", "x-api-key": X_API_KEY}


def wait_for(control: Control, server: ServerProcess, timeout: float = 5) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while any(e["t_end"] is None for e in control.log()) and time.monotonic() < deadline:
        time.sleep(0.05)
    server.assert_alive()
    return control.log()


def test_the_client_and_the_server_saw_the_real_secrets(recorded: dict[str, Any]) -> None:
    run = recorded["run"]
    assert run["fatal"] is None, run
    echoed = json.dumps(run["steps"][1])
    assert SK in echoed and PASSWORD in echoed, "the client got the tool's answer as the server sent it"
    assert recorded["retried"]["fatal"] is None and recorded["raw"].status == 200
    log = recorded["server_log"]
    assert all(e["request_headers"].get("authorization") == f"Bearer {BEARER}" for e in log if e["status"] != 401)
    assert any(API_KEY in e["query"] for e in log)
    assert any(PASSWORD in e["request_body"] and ACCESS in e["request_body"] for e in log)
    raw = [e for e in log if e["request_headers"].get("x-api-key")]
    assert raw and raw[0]["request_headers"]["x-api-key"] == X_API_KEY
    assert raw[0]["request_headers"]["cookie"] == f"sid={COOKIE}"


def test_the_original_holds_every_planted_secret_and_the_redacted_file_none(recorded: dict[str, Any]) -> None:
    original, redacted = everything_in(recorded["original"]), everything_in(recorded["redacted"])
    for secret in PLANTED:
        assert secret.encode() in original, f"{secret} was not planted"
        assert secret.encode() not in redacted, secret
    sessions = {f.response.headers["mcp-session-id"] for f in read(recorded["original"]) if f.response and
                "mcp-session-id" in f.response.headers}  # fmt: skip
    assert sessions and not any(s.encode() in redacted for s in sessions), "session ids have pseudonyms"
    metadata = [f.metadata["mcp_blackbox"] for f in read(recorded["original"]) if "mcp_blackbox" in f.metadata]
    # A flow is written as it ends, before its live verdict (whose reason, here, would quote the 503's password):
    # the records hold facts only. Redacting a verdict in a record (streams open at shutdown, earlier captures)
    # is tested in tests/analyzer/test_sanitize.py.
    assert metadata and not any(m.get("failure") or m.get("pending") for m in metadata), metadata
    assert b'"progressToken"' in redacted
    assert "Traceback" not in recorded["log"] and "NOT written" not in recorded["log"], recorded["log"]


def test_the_redacted_capture_reaches_the_originals_verdicts(recorded: dict[str, Any]) -> None:
    original, redacted = verdicts(recorded["original"]), verdicts(recorded["redacted"])
    assert [f.id for f in read(recorded["redacted"])] == [f.id for f in read(recorded["original"])]
    assert redacted == original
    origins = {g["origin"] for g in original["retry_groups"]}
    assert {"auth-retry", "app-retry"} <= origins, original["retry_groups"]
    assert original["duplicate_executions"], "the write run twice"
    outcomes = {c["outcome"] for c in original["calls"].values()}
    assert {"TOOL_ERROR", "HTTP_ERROR", "TOOL_SUCCESS"} <= outcomes


def test_redact_afterwards_gives_the_same_and_mitmweb_lists_its_flows(recorded: dict[str, Any]) -> None:
    shared = recorded["workdir"] / "shared.flows"
    assert main(["redact", str(recorded["original"]), "-o", str(shared)]) == 0
    everything = everything_in(shared)
    for secret in PLANTED:
        assert secret.encode() not in everything, secret
    assert verdicts(shared) == verdicts(recorded["original"])
    ids = [f.id for f in read(shared)]
    assert sorted(flow["id"] for flow in mitmweb_flows(shared, recorded["workdir"])) == sorted(ids)


def mitmweb_flows(path: Path, workdir: Path, timeout: float = 30) -> list[dict[str, Any]]:
    """Open ``path`` in mitmweb (``-r``) and list its flows through the REST API (GET /flows, with the
    web_password as a Bearer token, as mitmweb 11+ requires)."""
    web_port, password = free_port(), "test-web-password"
    log = workdir / "mitmweb.log"
    mitmweb = str(Path(MITMDUMP).with_name("mitmweb"))
    command = [mitmweb, "--no-web-open-browser", "--web-port", str(web_port), "--web-host", "127.0.0.1"]
    command += ["--listen-host", "127.0.0.1", "-p", str(free_port()), "--set", f"web_password={password}"]
    command += ["-r", str(path)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        deadline = time.monotonic() + timeout
        while True:
            request = urllib.request.Request(
                f"http://127.0.0.1:{web_port}/flows", headers={"Authorization": f"Bearer {password}"}
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    flows = json.loads(response.read())
                if flows or time.monotonic() > deadline:  # the file is read shortly after start-up
                    return flows
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"mitmweb did not answer; log:\n{log.read_text(errors='replace')}") from None
            time.sleep(0.2)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_record_with_mcp_redact_writes_no_secret(tmp_path: Path) -> None:
    """``mcp-blackbox record ... --redact`` (mcp_redact): the addon's own writer (mcp_write) redacts too."""
    capture, listen_file, log_file = tmp_path / "rec.flows", tmp_path / "listen.json", tmp_path / "record.log"
    cli = str(Path(MITMDUMP).with_name("mcp-blackbox"))
    with start_server("stateful", auth_token=BEARER) as server:
        command = [cli, "record", "--upstream", f"http://127.0.0.1:{server.port}", "-p", "0", "-w", str(capture)]
        command += ["--listen-file", str(listen_file), "--redact"]
        with log_file.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        proxy = Mitmdump(process, 0, capture, log_file)
        try:
            deadline = time.monotonic() + 20
            while not listen_file.exists():
                assert process.poll() is None and time.monotonic() < deadline, proxy.log()
                time.sleep(0.05)
            proxy.port = json.loads(listen_file.read_text())["listen_addrs"][0][1]
            run = run_py_client(f"{proxy.url}/mcp?api_key={API_KEY}", STEPS[:2], mode="legacy", auth_token=BEARER)
        finally:
            assert proxy.stop() == 0, proxy.log()
    assert run["fatal"] is None and SK in json.dumps(run["steps"][1])
    everything = everything_in(capture)
    assert b"REDACTED-" in everything and b"tools/call" in everything
    for secret in (BEARER, API_KEY, PASSWORD, ACCESS, SK):
        assert secret.encode() not in everything, secret
