"""Truth family: a stdio client behind the `mcp-remote` bridge (stdio -> remote Streamable HTTP).

The client is the official Python SDK's stdio client; it spawns `node .../mcp-remote/dist/proxy.js URL`
as its "server", and mcp-remote speaks HTTP to the test server through the recording mitmdump. On the
wire this looks unlike a direct SDK client: every bridge first opens a throw-away test session
(clientInfo "mcp-remote-fallback-test"), renames the real client to "X (via mcp-remote V)", keeps the
stdio client's JSON-RPC ids, never sends DELETE, and after a 404 on its session re-initializes and
re-sends the same request (same id) on the new session by itself.

Per run (plan.runs):
  app retry     one bridge (legacy era); echo gets a 503 once and the application retries it in the same
                stdio session: a new id on the same HTTP session (app-retry). Then a 404 on the session:
                mcp-remote re-initializes and re-sends the identical request, which the client never
                knew about: that copy is the bridge's retry (session-reinit), labelled from the capture
                and mcp-remote's own log (harness.write_relabels).
  auto retry    one bridge with `--protocol auto`: a server/discover probe instead of the test session,
                then stateless 2026-07-28 requests (no session at all); the same 503 and app retry.
  look-alikes   in each era, LOOKALIKE_BRIDGES bridges (separate node processes) make the identical call at
                the same moment; the first LOOKALIKE_FAILURES get a 503 and each of those retries once:
                only a bridge's own second call is a retry.

mcp-remote is installed from tests/truth/peers/node (npm ci there); without it the family cannot run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mitmproxy.http import HTTPFlow

from tests.support.processes import start_server
from tests.support.raw_http import Control
from tests.truth.driver import CLIENT_MODE, READ_TIMEOUT_S, Attempt, call
from tests.truth.harness import Plan, ScenarioFailed, expect, read_flows, recording, tools_call, write_relabels
from tests.truth.labels import Label

NODE_PEERS = Path(__file__).resolve().parent / "peers" / "node"
MCP_REMOTE = NODE_PEERS / "node_modules" / "mcp-remote" / "dist" / "proxy.js"

RETRY_INTERVAL_MS = 100
APP_RETRY_DELAY_S = 0.5  # the application retries a failed call half a second later
LOOKALIKE_BRIDGES = 3  # look-alikes: bridges calling at the same moment
LOOKALIKE_FAILURES = 2  # ... of which this many get a 503
SESSION_REINIT = "session-reinit"
EXPIRY_SUFFIX = "-expiry"  # the request name of the call whose session expires
# mcp-remote's own stderr lines (dist/chunk-*.js, doReinitializeSession and sendToServer): its log is
# the truth that it, not the client, re-sent a request.
EXPIRED_LINE = "Remote session expired, re-initializing"
REESTABLISHED_PREFIX = "Re-established session "
TEST_SESSION_CLIENT = "mcp-remote-fallback-test"

Era = Literal["legacy", "auto"]
ERAS: tuple[Era, ...] = ("legacy", "auto")


def fail_with(status: int, tool: str = "echo", times: int = 1) -> dict[str, Any]:
    """A fault rule: the next `times` calls of `tool` get `status` from the fault layer, never reaching the tool."""
    return {"match": {"rpc_method": "tools/call", "tool": tool}, "action": {"status": status}, "times": times}


# ---------------------------------------------------------------- one bridge


@dataclass
class Bridge:
    """One mcp-remote process and the stdio client session that spawned it."""

    era: Era
    stderr_path: Path
    client: Client | None = None
    attempts: list[Attempt] = field(default_factory=list)
    # label key -> what the server (the fault layer's log) saw of each copy: status, session, JSON-RPC id
    server_saw: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    async def call(self, tool: str, arguments: dict[str, Any], label: Label) -> Attempt:
        """driver.call through this bridge, kept per bridge so its own retries can be told apart."""
        assert self.client is not None, "the bridge is not open"
        attempt = await call(self.client, tool, arguments, label)
        self.attempts.append(attempt)
        return attempt


@asynccontextmanager
async def open_bridge(url: str, era: Era, workdir: Path) -> AsyncIterator[Bridge]:
    """Spawn mcp-remote as the stdio client's server; its stderr goes to a file we read as its log.

    MCP_REMOTE_CONFIG_DIR is per bridge: mcp-remote keeps OAuth state and lock files there, and
    concurrent bridges must not share them (nor write into the user's ~/.mcp-auth).
    """
    node = shutil.which("node")
    if node is None or not MCP_REMOTE.exists():
        raise ScenarioFailed(f"needs node and {MCP_REMOTE} (cd {NODE_PEERS} && npm ci --no-audit --no-fund)")
    home = Path(tempfile.mkdtemp(prefix="mcp-remote-", dir=workdir))
    args = [str(MCP_REMOTE), url] + (["--protocol", "auto"] if era == "auto" else [])  # default http-first
    params = StdioServerParameters(command=node, args=args, env={"MCP_REMOTE_CONFIG_DIR": str(home)})
    bridge = Bridge(era=era, stderr_path=home / "stderr.log")
    with bridge.stderr_path.open("w") as errlog:
        client = Client(stdio_client(params, errlog=errlog), mode=CLIENT_MODE, read_timeout_seconds=READ_TIMEOUT_S)
        async with client:
            bridge.client = client
            yield bridge
        bridge.client = None


# ---------------------------------------------------------------- scenarios


async def app_retry(url: str, control: Control, family: str, run: int, era: Era, workdir: Path) -> Bridge:
    """One bridge: a 503, the application's retry in the same stdio session; in the legacy era then a 404."""
    control.reset()
    async with open_bridge(url, era, workdir) as bridge:
        arguments = {"text": f"{family} {era} run {run}"}
        request = f"{family}/r{run}/{era}-echo"
        control.faults(fail_with(503))
        first = await bridge.call("echo", arguments, Label(request, 1, "first"))
        expect(
            first.outcome == "error" and "503" in (first.error or ""), f"{request}: the 503 reaches the client", [first]
        )
        await anyio.sleep(APP_RETRY_DELAY_S)
        # echo is readOnlyHint: running it again is no duplicate execution
        retry = await bridge.call("echo", arguments, Label(request, 2, "retry", origin="app-retry"))
        expect(retry.outcome == "ok", f"{request}: the app's retry succeeds", bridge.attempts)
        if era == "legacy":
            await session_expiry(bridge, control, family, run)
    observe(control, [bridge])
    expect(test_session_first(control, era), f"{request}: mcp-remote opened its test session first", bridge.attempts)
    return bridge


def observe(control: Control, bridges: list[Bridge]) -> None:
    """Keep what the server saw of each labelled call (for corpus.json): same session? same id?"""
    for exchange in control.log():
        if exchange["rpc_method"] != "tools/call":
            continue
        message = json.loads(exchange["request_body"])
        label = Label.from_params(message.get("params"))
        seen = {"status": exchange["status"], "session": exchange["request_headers"].get("mcp-session-id")}
        for bridge in bridges:
            if label is not None and any(a.label == label for a in bridge.attempts):
                bridge.server_saw.setdefault(label.key, []).append({**seen, "id": message.get("id")})


def test_session_first(control: Control, era: Era) -> bool:
    """The first handshake the server saw is mcp-remote's throw-away one, then the real client's."""
    method = "initialize" if era == "legacy" else "server/discover"
    handshakes = [e["request_body"] for e in control.log() if e["rpc_method"] == method]
    return len(handshakes) >= 2 and TEST_SESSION_CLIENT in handshakes[0] and TEST_SESSION_CLIENT not in handshakes[1]


async def session_expiry(bridge: Bridge, control: Control, family: str, run: int) -> None:
    """A 404 on the session: mcp-remote re-initializes and re-sends; the client sees one successful call."""
    request = f"{family}/r{run}/legacy{EXPIRY_SUFFIX}"
    control.faults(fail_with(404))
    attempt = await bridge.call("echo", {"text": f"{family} run {run} after expiry"}, Label(request, 1, "first"))
    expect(attempt.outcome == "ok", f"{request}: the bridge hides the 404 from the client", bridge.attempts)
    expect(EXPIRED_LINE in bridge.stderr(), f"{request}: mcp-remote logged '{EXPIRED_LINE}'", bridge.attempts)


async def lookalikes(url: str, control: Control, family: str, run: int, era: Era, workdir: Path) -> list[Bridge]:
    """Separate bridges send the identical call at once; only each one's own re-send is a retry.

    In the auto era there is no session to tell the bridges apart: only their connections.
    """
    control.reset()
    arguments = {"text": f"{family} the same question {run}"}  # the same in both eras, too
    bridges: list[Bridge] = []
    ready = 0
    go = anyio.Event()
    everyone_called = anyio.Event()
    first_calls = 0

    async def one(index: int) -> None:
        nonlocal ready, first_calls
        request = f"{family}/r{run}/{era}-bridge{index}"
        async with open_bridge(url, era, workdir) as bridge:
            bridges.append(bridge)
            ready += 1
            if ready == LOOKALIKE_BRIDGES:
                control.faults(fail_with(503, times=LOOKALIKE_FAILURES))
                go.set()
            await go.wait()
            first = await bridge.call("echo", arguments, Label(request, 1, "first"))
            first_calls += 1
            if first_calls == LOOKALIKE_BRIDGES:
                everyone_called.set()
            if first.outcome == "error":
                await everyone_called.wait()  # the 503s are used up before any retry goes out
                await anyio.sleep(APP_RETRY_DELAY_S)
                await bridge.call("echo", arguments, Label(request, 2, "retry", origin="app-retry"))

    async with anyio.create_task_group() as tg:
        for index in range(1, LOOKALIKE_BRIDGES + 1):
            tg.start_soon(one, index)
    observe(control, bridges)
    attempts = [a for b in bridges for a in b.attempts]
    failed = [a for a in attempts if a.label.attempt == 1 and a.outcome == "error"]
    expect(len(failed) == LOOKALIKE_FAILURES, f"run {run} {era}: {LOOKALIKE_FAILURES} first calls get a 503", attempts)
    expect(
        all(a.outcome == "ok" for a in attempts if a.label.attempt == 2), f"run {run} {era}: retries succeed", attempts
    )
    return bridges


async def scenarios(url: str, control: Control, family: str, plan: Plan, workdir: Path) -> list[Bridge]:
    """Every scenario, plan.runs times; one bridge process after another, or several at once."""
    bridges: list[Bridge] = []
    for run in range(1, plan.runs + 1):
        for era in ERAS:
            bridges.append(await app_retry(url, control, family, run, era, workdir))
        for era in ERAS:
            bridges += await lookalikes(url, control, family, run, era, workdir)
    return bridges


# ---------------------------------------------------------------- the bridge's copies, from the capture


def bridge_copies(capture: Path, expiries: list[Bridge]) -> dict[str, Label]:
    """Flow id -> label of each copy mcp-remote re-sent after a 404, checked against its log.

    Both copies carry the client's label; in start order the first got the 404 on the old session,
    the second went out on the session mcp-remote's log says it re-established.
    """
    by_label: dict[str, list[HTTPFlow]] = {}
    for flow in read_flows(capture):
        if (found := tools_call(flow)) and (label := found[1]):
            by_label.setdefault(label.key, []).append(flow)
    relabels: dict[str, Label] = {}
    for bridge in expiries:
        label = next(a.label for a in bridge.attempts if a.label.request.endswith(EXPIRY_SUFFIX))
        log = bridge.stderr()
        sessions = [
            line.split(REESTABLISHED_PREFIX, 1)[1].split()[0]
            for line in log.splitlines()
            if REESTABLISHED_PREFIX in line
        ]
        copies = by_label.get(label.key, [])
        statuses = [f.response.status_code if f.response else None for f in copies]
        if len(copies) != 2 or statuses != [404, 200] or len(sessions) != 1:
            raise ScenarioFailed(f"{label.key}: expected a 404 then one re-sent copy, saw {statuses}, log {sessions}")
        old, new = (f.request.headers.get("mcp-session-id") for f in copies)
        if old is None or new != sessions[0] or old == new:
            raise ScenarioFailed(
                f"{label.key}: the copy should go out on the new session {sessions[0]}: {old} -> {new}"
            )
        relabels[copies[1].id] = Label(label.request, 2, "retry", origin=SESSION_REINIT)
    return relabels


# ---------------------------------------------------------------- recording


def _records(bridges: list[Bridge], relabels: dict[str, Label]) -> list[dict[str, Any]]:
    """What each client saw, what the server saw of it, and the copies only the bridge knew of."""
    records: list[dict[str, Any]] = []
    for index, bridge in enumerate(bridges, 1):
        for attempt in bridge.attempts:
            seen = bridge.server_saw.get(attempt.label.key, [])
            records.append({**attempt.record(), "bridge": index, "era": bridge.era, "server_saw": seen})
    for flow_id, label in relabels.items():  # what the bridge did on its own, invisible to the client
        records.append({"label": label.meta()["truth"], "tool": "echo", "bridge_copy_flow": flow_id})
    return records


def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
    """Record out/<name>.flows: stdio clients behind mcp-remote in front of the test server."""
    with tempfile.TemporaryDirectory(prefix="mcp-truth-bridge-") as tmp:
        with start_server("stateful", retry_interval_ms=RETRY_INTERVAL_MS) as server:
            control = Control(server.port)
            with recording(f"http://127.0.0.1:{server.port}", name, out) as url:
                bridges = anyio.run(scenarios, f"{url}/mcp", control, name, plan, Path(tmp))
            server.assert_alive()
        relabels = bridge_copies(out / f"{name}.flows", [b for b in bridges if b.era == "legacy" and _expired(b)])
        write_relabels(out, name, relabels)
        return _records(bridges, relabels)


def _expired(bridge: Bridge) -> bool:
    """The bridge had its session expire, so it made a copy to relabel."""
    return any(a.label.request.endswith(EXPIRY_SUFFIX) for a in bridge.attempts)
