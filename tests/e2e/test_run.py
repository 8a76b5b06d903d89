"""`mcp-blackbox run -- COMMAND` through real processes on 127.0.0.1 (issue 14).

- The official Python and TypeScript SDK clients, unchanged, each run twice at once by one command (an
  "agent" talking to two MCP servers): one server over plain HTTP (the test server, stateful), one over
  HTTPS (the test server behind hypercorn, its certificate from a trustme CA passed as --upstream-ca).
  Both servers are recorded, each MCP call with the outcome a reverse-mode recording (`record --upstream`)
  of the same clients gives, and what the clients saw agrees. On the wire: the clients honoured the proxy
  (every exchange in the capture) and trusted the run's CA (TLS with the client for the HTTPS server).
- pydantic-ai (TestModel calling a tool through MCPToolset over Streamable HTTP), unchanged.
- Clients that ignore the proxy (httpx with trust_env=False, Node 20's fetch without the preload) and one
  that does not trust the run's CA get the message that says so and what to do.
- COMMAND's exit status, its death by a signal, and SIGHUP/SIGINT/SIGTERM passed on once each.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.http import HTTPFlow
from mitmproxy.io import FlowReader

from mcp_blackbox.analyzer.model.vocabulary import is_failure
from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.processes import (
    REPO_ROOT,
    TS_CLIENT,
    ServerProcess,
    child_env,
    start_server,
)
from tests.support.proxy import Mitmdump, start_mitmdump
from tests.support.tls import Tls, https_mcp_server, make_tls

pytestmark = pytest.mark.e2e

MCP_BLACKBOX = str(Path(sys.executable).with_name("mcp-blackbox"))
STEPS = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "through run"}},
    {"op": "call", "tool": "tool_error", "args": {"message": "tool says no"}},
    {"op": "call", "tool": "protocol_error", "args": {"message": "bad params"}},
    {"op": "call", "tool": "progress", "args": {"steps": 3, "delay_ms": 50}},
]
EXPECTED = {"echo": "TOOL_SUCCESS", "tool_error": "TOOL_ERROR", "protocol_error": "JSONRPC_ERROR"}
EXPECTED["progress"] = "TOOL_SUCCESS"
NO_MCP = "no MCP exchange was seen"
NEEDS_NODE = pytest.mark.skipif(
    shutil.which("node") is None or not (TS_CLIENT.parent / "node_modules").exists(), reason="node, npm ci"
)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_url(tls: Tls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The test MCP server (stateless) over TLS, by hypercorn."""
    with https_mcp_server(tls, tmp_path_factory.mktemp("hypercorn")) as port:
        yield f"https://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def http_server() -> Iterator[ServerProcess]:
    with start_server("stateful") as server:
        yield server


def server_of(url: str) -> str:
    return url.rsplit("/", 1)[0]


def run_blackbox(
    options: list[str], command: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    argv = [MCP_BLACKBOX, "run", *options, "--", *command]
    return subprocess.run(
        argv, cwd=REPO_ROOT, env=env or child_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def client_shell(client: str, url: str, out: Path) -> str:
    """One SDK client run (tests/clients), as a shell command writing its JSON result to ``out``."""
    steps = json.dumps(STEPS)
    if client == "py":
        argv = [sys.executable, "-m", "tests.clients.py_client", "--url", url, "--steps", steps, "--timeout", "40"]
    else:
        argv = ["node", str(TS_CLIENT), "--url", url, "--steps", steps, "--timeout-ms", "40000"]
    return f"{shlex.join(argv)} > {shlex.quote(str(out))} 2>> {shlex.quote(str(out))}.err"


def two_at_once(client: str, urls: list[str], outputs: list[Path]) -> list[str]:
    """The "agent": one command that runs the client against both servers at the same time."""
    runs = " & ".join(client_shell(client, url, out) for url, out in zip(urls, outputs, strict=True))
    return ["bash", "-c", f"{runs} & wait"]


def outcomes(flow_file: Path) -> dict[str, Counter[tuple[str, str | None, str]]]:
    """Per server (scheme://host:port), the calls' (method, tool, outcome), counted."""
    per_server: dict[str, Counter[tuple[str, str | None, str]]] = {}
    for call in analyze([str(flow_file)]).call_objects:
        counter = per_server.setdefault(call.exchange.server, Counter())
        counter[(str(call.method), call.tool, str(call.outcome))] += 1
    return per_server


def record_reverse(upstream: str, workdir: Path, name: str, after: list[str]) -> Mitmdump:
    """`mcp-blackbox record --upstream URL -p 0 ...`: the reverse-mode recording to compare with."""
    listen, flows, log = workdir / f"{name}.listen.json", workdir / f"{name}.flows", workdir / f"{name}.log"
    command = [MCP_BLACKBOX, "record", "--upstream", upstream, "-p", "0", "--listen-file", str(listen)]
    command += ["-w", str(flows), "-q", "--", *after]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not listen.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"record did not start: {log.read_text(errors='replace')}")
        time.sleep(0.05)
    return Mitmdump(process, json.loads(listen.read_text())["listen_addrs"][0][1], flows, log)


def client_saw(result: dict[str, Any]) -> dict[str, str]:
    """What the client saw, in the analyzer's words (the steps of STEPS only)."""
    saw = {}
    for step in result["steps"]:
        if step["op"] != "call":
            continue
        if not step["ok"]:
            saw[step["tool"]] = "JSONRPC_ERROR" if step["error"] and step["error"].get("code") else "error"
        else:
            saw[step["tool"]] = "TOOL_ERROR" if step["result"].get("isError") else "TOOL_SUCCESS"
    return saw


@pytest.mark.parametrize("client", ["py", pytest.param("ts", marks=NEEDS_NODE)])
def test_an_sdk_client_talking_to_two_servers_is_recorded_as_in_reverse_mode(
    client: str, http_server: ServerProcess, https_url: str, tls: Tls, tmp_path: Path
) -> None:
    urls = [http_server.url("/mcp"), https_url]
    outputs = [tmp_path / "http.json", tmp_path / "https.json"]
    capture = tmp_path / "run.flows"
    done = run_blackbox(["-w", str(capture), "--upstream-ca", str(tls.ca_file)], two_at_once(client, urls, outputs))
    assert done.returncode == 0, done.stderr
    results = [json.loads(out.read_text()) for out in outputs]
    for result in results:
        assert result["fatal"] is None and len(result["steps"]) == len(STEPS), result
        assert client_saw(result) == EXPECTED, result

    recorded = outcomes(capture)
    assert set(recorded) == {server_of(url) for url in urls}, "both servers recorded"
    for url in urls:
        tools = {tool: outcome for (method, tool, outcome) in recorded[server_of(url)] if method == "tools/call"}
        assert tools == EXPECTED, (url, recorded[server_of(url)])
        calls = sum(recorded[server_of(url)].values())
        failed = sum(n for (_, _, outcome), n in recorded[server_of(url)].items() if is_failure(outcome))
        assert f"MCP server {server_of(url)}: {calls} calls, {failed} failed" in done.stderr, done.stderr
    assert f"capture: {capture}" in done.stderr and NO_MCP not in done.stderr and "TLS" not in done.stderr

    # On the wire: every exchange went through the recorder, the HTTPS one inside TLS with the client
    # (the run's CA trusted) and with the server (its CA passed as --upstream-ca).
    with capture.open("rb") as f:
        flows = [flow for flow in FlowReader(f).stream() if isinstance(flow, HTTPFlow)]
    assert flows and all("mcp" in f.metadata["mcp_blackbox"] for f in flows), "only MCP exchanges, all of them"

    # Who sent them, measured (addon/peer_process.py): each server's calls came from one client process, the
    # two clients are two processes, and each is a descendant of the command run started (bash).
    pids = {server_of(url): set[int]() for url in urls}
    for call in analyze([str(capture)]).call_objects:
        assert call.client is not None and call.client.process is not None, call.call_id
        pids[call.exchange.server].add(call.client.process.pid)
    assert [len(senders) for senders in pids.values()] == [1, 1] and len(set.union(*pids.values())) == 2, pids
    # A flow that ended before its connection's lookup did has none; the others name the process.
    recorded_processes = [f.metadata["mcp_blackbox"].get("client_process") or {} for f in flows]
    chains = [process.get("parents") for process in recorded_processes]
    assert all(any(p["name"] == "bash" for p in chain) for chain in chains if chain is not None), chains
    assert any(chain is not None for chain in chains), "the first flow of a connection carries the parent chain"
    https_flows = [f for f in flows if f.request.scheme == "https"]
    assert https_flows and all(f.client_conn.tls_established and f.server_conn.tls_established for f in https_flows)
    assert oct(capture.stat().st_mode & 0o777) == "0o600"

    # The same clients recorded in reverse mode, one recorder per server: the same calls, the same outcomes.
    reverse = [
        record_reverse(f"http://127.0.0.1:{http_server.port}", tmp_path, "reverse-http", []),
        record_reverse(
            server_of(https_url), tmp_path, "reverse-https", ["--set", f"ssl_verify_upstream_trusted_ca={tls.ca_file}"]
        ),
    ]
    try:
        proxied = [f"{proxy.url}/mcp" for proxy in reverse]
        reverse_outputs = [tmp_path / "reverse-http.json", tmp_path / "reverse-https.json"]
        subprocess.run(two_at_once(client, proxied, reverse_outputs), cwd=REPO_ROOT, env=child_env(), timeout=90)
    finally:
        for proxy in reverse:
            proxy.stop()
    for proxy, url in zip(reverse, urls, strict=True):
        (baseline,) = outcomes(proxy.flow_file).values()
        assert recorded[server_of(url)] == baseline, (url, recorded[server_of(url)], baseline)


def test_an_agent_framework_runs_unchanged(https_url: str, tls: Tls, tmp_path: Path) -> None:
    """pydantic-ai's MCPToolset (on the fastmcp client, httpx) with TestModel calling echo, over HTTPS."""
    capture = tmp_path / "agent.flows"
    command = [sys.executable, "-m", "tests.clients.pydantic_agent", "--url", https_url, "--tool", "echo"]
    done = run_blackbox(["-w", str(capture), "--upstream-ca", str(tls.ca_file)], command)
    assert done.returncode == 0, done.stderr
    returns = json.loads(done.stdout)["tool_returns"]
    assert [(r["tool"], r["outcome"]) for r in returns] == [("echo", "success")], returns
    (recorded,) = outcomes(capture).values()
    assert {tool: outcome for (method, tool, outcome) in recorded if method == "tools/call"} == {"echo": "TOOL_SUCCESS"}
    assert f"MCP server {server_of(https_url)}: {sum(recorded.values())} calls, 0 failed" in done.stderr


IGNORES_PROXY = {
    # httpx told not to read the environment: straight to the server.
    "httpx-trust-env-false": [
        sys.executable,
        "-c",
        "import httpx2, sys; httpx2.Client(trust_env=False).post(sys.argv[1], json={'jsonrpc': '2.0', 'id': 1, "
        "'method': 'ping'}, headers={'accept': 'application/json, text/event-stream'})",
    ],
    # Node 20's fetch without the preload (NODE_OPTIONS emptied): it ignores HTTP_PROXY.
    "node-fetch-without-preload": [
        "env",
        "-u",
        "NODE_OPTIONS",
        "node",
        "--input-type=module",
        "-e",
        "await fetch(process.argv[1], {method: 'POST', body: JSON.stringify({jsonrpc: '2.0', id: 1, method: "
        "'ping'}), headers: {'content-type': 'application/json', accept: 'application/json, text/event-stream'}})",
    ],
}


@pytest.mark.parametrize("client", list(IGNORES_PROXY))
def test_a_client_that_ignores_the_proxy_gets_the_message(
    client: str, http_server: ServerProcess, tmp_path: Path
) -> None:
    argv = [*IGNORES_PROXY[client], http_server.url("/mcp")]
    capture = tmp_path / "nothing.flows"
    done = run_blackbox(["-w", str(capture)], argv)
    assert done.returncode == 0, done.stderr
    assert f"{NO_MCP}: no HTTP request came through the recorder" in done.stderr, done.stderr
    assert "mcp-blackbox record --upstream URL" in done.stderr and "proxy option" in done.stderr
    assert "MCP server" not in done.stderr and capture.exists() and capture.stat().st_size == 0


def test_a_client_that_does_not_trust_the_ca_gets_the_message(https_url: str, tls: Tls, tmp_path: Path) -> None:
    """httpx honouring HTTPS_PROXY but verifying against certifi's bundle alone (as a pinned client would)."""
    code = (
        "import certifi, httpx2, ssl, sys\n"
        "try:\n"
        "    httpx2.Client(verify=ssl.create_default_context(cafile=certifi.where())).post(sys.argv[1], json={})\n"
        "except httpx2.ConnectError as e:\n"
        "    print('refused:', e)\n"
    )
    capture = tmp_path / "refused.flows"
    done = run_blackbox(
        ["-w", str(capture), "--upstream-ca", str(tls.ca_file)], [sys.executable, "-c", code, https_url]
    )
    assert done.returncode == 0 and done.stdout.startswith("refused:"), done.stdout + done.stderr
    assert "1 TLS handshake(s) with the client failed (127.0.0.1)" in done.stderr, done.stderr
    assert "does not trust the run's CA or pins certificates" in done.stderr
    assert "mcp-blackbox record --upstream URL" in done.stderr and NO_MCP in done.stderr
    assert "--passthrough HOST" in done.stderr


def test_passthrough_hosts_are_tunnelled_untouched(https_url: str, tls: Tls, tmp_path: Path) -> None:
    """A client that trusts only its server's own CA (pinned) reaches it through --passthrough: its TLS is
    the server's, end to end, and nothing is recorded."""
    code = (
        "import httpx2, ssl, sys\n"
        "context = ssl.create_default_context(cafile=sys.argv[2])\n"
        "print(httpx2.Client(verify=context).post(sys.argv[1], json={'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}, "
        "headers={'accept': 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18'})"
        ".status_code)\n"
    )
    capture = tmp_path / "tunnelled.flows"
    command = [sys.executable, "-c", code, https_url, str(tls.ca_file)]
    done = run_blackbox(["-w", str(capture), "--passthrough", r"^127\.0\.0\.1:"], command)
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stdout + done.stderr  # the server answered
    assert "TLS handshake" not in done.stderr and capture.stat().st_size == 0
    assert f"{NO_MCP}: no HTTP request came through the recorder (hosts passed through aside)" in done.stderr


def test_commands_exit_status_is_passed_through(tmp_path: Path) -> None:
    done = run_blackbox(["-w", str(tmp_path / "a.flows")], ["sh", "-c", "exit 7"])
    assert done.returncode == 7, done.stderr
    done = run_blackbox(["-w", str(tmp_path / "b.flows")], ["sh", "-c", "kill -TERM $$"])
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    done = run_blackbox(["-w", str(tmp_path / "c.flows")], ["no-such-command-here"])
    assert done.returncode == 127 and "command not found" in done.stderr


SIGNAL_CHILD = """
import os, signal, sys, time
seen = []
def on(number, frame):
    seen.append(signal.Signals(number).name)
    open(sys.argv[1], "a").write(signal.Signals(number).name + "\\n")
    if number == signal.SIGTERM:
        sys.exit(3)
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
    signal.signal(s, on)
open(sys.argv[1] + ".ready", "w").write(str(os.getpid()))
while True:
    time.sleep(0.05)
"""


def test_signals_reach_the_command_once_and_the_capture_is_closed(tmp_path: Path) -> None:
    log, capture = tmp_path / "signals.log", tmp_path / "signals.flows"
    argv = [MCP_BLACKBOX, "run", "-w", str(capture), "--", sys.executable, "-c", SIGNAL_CHILD, str(log)]
    process = subprocess.Popen(
        argv, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        ready = Path(f"{log}.ready")
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)

        def delivered(count: int) -> None:
            deadline = time.monotonic() + 10
            while (len(log.read_text().split()) if log.exists() else 0) < count:
                assert time.monotonic() < deadline, "signal not passed on"
                time.sleep(0.05)

        os.kill(process.pid, signal.SIGHUP)
        delivered(1)
        os.killpg(process.pid, signal.SIGINT)  # to run's process group, as a terminal's Ctrl-C is sent
        delivered(2)
        os.kill(process.pid, signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 3, stderr
    assert log.read_text().split() == ["SIGHUP", "SIGINT", "SIGTERM"], "each signal once, in order"
    assert f"capture: {capture}" in stderr and capture.exists()
    child = int(Path(f"{log}.ready").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def flow_paths(capture: Path) -> list[str]:
    with capture.open("rb") as f:
        return [flow.request.path for flow in FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


MIXED = (
    "import httpx2, sys\n"
    "with httpx2.Client() as c:\n"
    "    print(c.get(sys.argv[1] + '/not-mcp').status_code)\n"
    "    print(c.post(sys.argv[1] + '/mcp', json={'jsonrpc': '2.0', 'id': 1, 'method': 'ping'},\n"
    "                 headers={'accept': 'application/json, text/event-stream'}).status_code)\n"
)


def test_other_traffic_passes_through_and_is_recorded_only_with_all(http_server: ServerProcess, tmp_path: Path) -> None:
    command = [sys.executable, "-c", MIXED, http_server.url("")]
    only_mcp = run_blackbox(["-w", str(tmp_path / "mcp.flows")], command)
    everything = run_blackbox(["-w", str(tmp_path / "all.flows"), "--all"], command)
    assert only_mcp.returncode == everything.returncode == 0, only_mcp.stderr + everything.stderr
    assert only_mcp.stdout == everything.stdout and only_mcp.stdout.split()[0] == "404", "passed through"
    assert flow_paths(tmp_path / "mcp.flows") == ["/mcp"]
    assert "1 other HTTP exchange(s) passed through unrecorded (--all records them)" in only_mcp.stderr
    assert flow_paths(tmp_path / "all.flows") == ["/not-mcp", "/mcp"]
    assert f"MCP server {http_server.url('')}: 1 call" in everything.stderr, everything.stderr


def test_a_server_certificate_the_recorder_cannot_verify_is_said(https_url: str, tmp_path: Path) -> None:
    ping = (
        "import httpx2, sys; print(httpx2.post(sys.argv[1], json={'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}, "
        "headers={'accept': 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18'}).status_code)"
    )
    command = [sys.executable, "-c", ping, https_url]
    refused = run_blackbox(["-w", str(tmp_path / "refused.flows")], command)
    assert refused.returncode == 0 and refused.stdout.strip() == "502", refused.stdout + refused.stderr
    assert f"the recorder could not verify the server 127.0.0.1:{https_url.split(':')[2].split('/')[0]}" in (
        refused.stderr
    )
    assert "--upstream-ca FILE (or --insecure-upstream)" in refused.stderr
    insecure = run_blackbox(["-w", str(tmp_path / "insecure.flows"), "--insecure-upstream"], command)
    assert insecure.returncode == 0 and insecure.stdout.strip() == "200", insecure.stdout + insecure.stderr
    assert f"MCP server {server_of(https_url)}: 1 call, 0 failed" in insecure.stderr, insecure.stderr


NODE_PEERS = REPO_ROOT / "tests" / "truth" / "peers" / "node" / "node_modules"


@pytest.mark.skipif(shutil.which("node") is None or not (NODE_PEERS / "undici").exists(), reason="node, undici")
def test_the_node_preload_uses_undici_when_the_program_can_resolve_it(
    http_server: ServerProcess, tmp_path: Path
) -> None:
    """Node 20: with undici in the program's node_modules, its EnvHttpProxyAgent; the built-in dispatcher
    otherwise (the TypeScript SDK client above, whose folder has no undici)."""
    (tmp_path / "node_modules").symlink_to(NODE_PEERS)
    (tmp_path / "ping.mjs").write_text(
        "const r = await fetch(process.argv[2], {method: 'POST', body: JSON.stringify({jsonrpc: '2.0', id: 1, "
        "method: 'ping'}), headers: {'content-type': 'application/json', accept: 'application/json, "
        "text/event-stream'}});\nconsole.log(r.status);\n"
    )
    env = {**child_env(), "MCP_BLACKBOX_PRELOAD_REPORT": "1"}
    done = run_blackbox(
        ["-w", str(tmp_path / "undici.flows")], ["node", str(tmp_path / "ping.mjs"), http_server.url()], env
    )
    assert done.returncode == 0, done.stderr
    assert "mcp-blackbox proxy preload: undici" in done.stderr, done.stderr
    assert f"MCP server {http_server.url('')}: 1 call" in done.stderr


def npm_undici() -> Path | None:
    """The undici npm bundles (6.x here), which warns when its first EnvHttpProxyAgent is made."""
    npm = shutil.which("npm")
    undici = Path(npm).resolve().parents[1] / "node_modules" / "undici" if npm else None
    agent = undici / "lib" / "dispatcher" / "env-http-proxy-agent.js" if undici else None
    return undici if agent is not None and agent.is_file() and UNDICI_WARNING in agent.read_text() else None


UNDICI_WARNING = "EnvHttpProxyAgent is experimental"
# undici 7 (the peers') with undici 6's warning when the first EnvHttpProxyAgent is made, word for word: for
# a machine without npm's undici 6.
STAND_IN = """
const real = require(process.env.REAL_UNDICI);
let warned = false;
exports.setGlobalDispatcher = real.setGlobalDispatcher;
exports.EnvHttpProxyAgent = class EnvHttpProxyAgent extends real.EnvHttpProxyAgent {
    constructor(opts) {
        super(opts);
        if (!warned) {
            warned = true;
            process.emitWarning('EnvHttpProxyAgent is experimental, expect them to change at any time.', {
                code: 'UNDICI-EHPA',
            });
        }
    }
};
"""


@pytest.mark.parametrize("undici", ["npm's undici 6", "stand-in"])
def test_the_preloads_undici_warning_stays_off_the_commands_stderr(
    undici: str, http_server: ServerProcess, tmp_path: Path
) -> None:
    """undici 6 warns "EnvHttpProxyAgent is experimental" when the preload makes its agent: not the program's
    doing, so not on its stderr. A warning the program emits itself still is."""
    # Node, npm and the peers' undici are on every machine make test sets up: without them this fails.
    assert shutil.which("node") is not None and (NODE_PEERS / "undici").exists(), "node and the peers' undici"
    package = tmp_path / "node_modules" / "undici"
    if undici == "stand-in":
        package.mkdir(parents=True)
        (package / "package.json").write_text('{"name": "undici", "main": "index.js"}')
        (package / "index.js").write_text(STAND_IN)
    else:
        bundled = npm_undici()
        assert bundled is not None, "npm's bundled undici 6 (it warns) is part of Node 20's npm here"
        package.parent.mkdir()
        package.symlink_to(bundled)
    (tmp_path / "ping.mjs").write_text(
        "process.emitWarning('the program warns about its own things', 'ProgramWarning');\n"
        "const r = await fetch(process.argv[2], {method: 'POST', body: JSON.stringify({jsonrpc: '2.0', id: 1, "
        "method: 'ping'}), headers: {'content-type': 'application/json', accept: 'application/json, "
        "text/event-stream'}});\nconsole.log(r.status);\n"
    )
    env = {**child_env(), "MCP_BLACKBOX_PRELOAD_REPORT": "1", "REAL_UNDICI": str(NODE_PEERS / "undici")}
    done = run_blackbox(
        ["-w", str(tmp_path / "warned.flows")], ["node", str(tmp_path / "ping.mjs"), http_server.url()], env
    )
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stdout + done.stderr  # the server answered
    assert "mcp-blackbox proxy preload: undici" in done.stderr, done.stderr
    assert f"MCP server {http_server.url('')}: 1 call" in done.stderr, "through the recorder"
    assert UNDICI_WARNING not in done.stderr, done.stderr
    assert "ProgramWarning: the program warns about its own things" in done.stderr, done.stderr


def test_the_documented_run_command_runs_as_written(http_server: ServerProcess, tmp_path: Path) -> None:
    """docs/recording.md, "Run a command under the recorder": the first recording command shown, which is also the
    README's first quick start, in a folder with .venv, an agent.py (pydantic-ai against the test server) and
    `python` the venv's, as in an activated venv."""
    page = (REPO_ROOT / "docs" / "recording.md").read_text(encoding="utf-8")
    record = page[page.index("\n## Run a command under the recorder\n") :]
    first = next(line[4:] for line in record.splitlines() if line.startswith("    .venv/bin/"))
    assert first == ".venv/bin/mcp-blackbox run -w capture.flows -- python agent.py", first
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    quick_starts = readme[readme.index("\n## Quick starts\n") :]
    assert next(line[4:] for line in quick_starts.splitlines() if line.startswith("    .venv/bin/")) == first
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    (tmp_path / "agent.py").write_text(
        "import sys\nfrom tests.clients.pydantic_agent import main\n"
        f"sys.argv = ['agent.py', '--url', {http_server.url('/mcp')!r}]\nsys.exit(main())\n"
    )
    env = {**child_env(), "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    done = subprocess.run(["bash", "-c", first], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"mcp-blackbox run: MCP server {http_server.url('')}: " in done.stderr, done.stderr
    assert "mcp-blackbox run: capture: capture.flows" in done.stderr and (tmp_path / "capture.flows").stat().st_size


class Terminal:
    """An interactive bash on a pseudo-terminal, as a person at a terminal runs `run`."""

    def __init__(self) -> None:
        env = {**child_env(), "PS1": "PROMPT$ ", "TERM": "dumb"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: bash with job control on the terminal
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
        self.out = b""
        self.expect("PROMPT$ ")

    def expect(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.out:
            assert time.monotonic() < deadline, f"no {text!r} on the terminal:\n{self.out.decode(errors='replace')}"
            if select.select([self.fd], [], [], 0.1)[0]:
                self.out += os.read(self.fd, 65536)
        self.out = self.out[self.out.index(text.encode()) + len(text) :]

    def send(self, data: str) -> None:
        os.write(self.fd, data.encode())

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash")
def test_at_a_terminal_the_command_reads_it_and_gets_ctrl_c_and_ctrl_z(tmp_path: Path) -> None:
    """The command has the terminal while it runs: it reads it, Ctrl-C reaches it (once: run is not in its
    process group), Ctrl-Z stops it and run with it (the shell's job), `fg` continues both."""
    terminal = Terminal()
    run = f"{shlex.quote(MCP_BLACKBOX)} run -w {shlex.quote(str(tmp_path))}"
    try:
        read = "import sys; print('got', sys.stdin.readline().strip())"
        terminal.send(f"{run}/a.flows -- {shlex.quote(sys.executable)} -c {shlex.quote(read)}\n")
        terminal.expect("recording through")
        terminal.send("typed at the terminal\n")
        terminal.expect("got typed at the terminal")
        terminal.expect("PROMPT$ ")
        terminal.send("echo status=$?\n")
        terminal.expect("status=0")

        terminal.send(f"{run}/b.flows -- sleep 30\n")
        terminal.expect("recording through")
        time.sleep(0.3)
        terminal.send("\x03")  # Ctrl-C
        terminal.expect(f"capture: {tmp_path}/b.flows")
        terminal.send("echo status=$?\n")
        terminal.expect("status=130")

        terminal.send(f"{run}/c.flows -- sleep 30\n")
        terminal.expect("recording through")
        time.sleep(0.3)
        terminal.send("\x1a")  # Ctrl-Z
        terminal.expect("Stopped")
        terminal.send("fg\n")
        time.sleep(0.5)
        terminal.send("\x03")
        terminal.expect(f"capture: {tmp_path}/c.flows")
        terminal.send("echo status=$?\n")
        terminal.expect("status=130")
    finally:
        terminal.close()


def test_an_upstream_proxy_gets_the_traffic_on(http_server: ServerProcess, tmp_path: Path) -> None:
    """--upstream-proxy: the recorder sends on through another proxy (plain mitmdump standing for a
    corporate proxy), which sees the request; the capture has it too."""
    corporate = start_mitmdump("regular", tmp_path, name="corporate", addon=False)
    try:
        done = run_blackbox(
            ["-w", str(tmp_path / "chained.flows"), "--upstream-proxy", corporate.url],
            [sys.executable, "-c", MIXED, http_server.url("")],
        )
    finally:
        corporate.stop()
    assert done.returncode == 0 and done.stdout.split() == ["404", "400"], done.stdout + done.stderr
    assert flow_paths(tmp_path / "chained.flows") == ["/mcp"]
    assert [f.request.path for f in corporate.flows()] == ["/not-mcp", "/mcp"], "both went through it"
