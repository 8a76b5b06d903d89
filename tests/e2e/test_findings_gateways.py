"""Findings about gateways and HTTP failures (issue 22, item 2; analyzer/across/patterns/gateways.py), each on a
real capture where it fires and a look-alike where it must not.

Every capture is recorded once per module: mitmdump with the addon in reverse mode in front of real peers on
127.0.0.1 (the test bed's MCP servers with their fault layer, a real nginx, FastMCP's proxy as an MCP
aggregator), driven by the official Python SDK's client. The figures asserted come from what each scenario set
up (nginx's configuration, the faults, the client's retry loop), never from the analyzer's output.

    capture          set-up                                                       fires / must not
    marked_down      nginx, 2 slow upstreams, max_fails=1, proxy_read_timeout 1 s  upstream_marked_down
    dead_upstream    nginx in front of a server killed after initialize            not upstream_marked_down
    timeouts         nginx, 1 slow upstream, proxy_read_timeout 1 s                gateway_timeout
    server_errors    nginx (10 s timeout) passing the server's own 504s at varied  not gateway_timeout,
                     times, its 503s without Retry-After, slow successes           not rate_limited
    storm            429 + Retry-After 2 s, the client re-sends after 20 ms        rate_limited (ignored),
                                                                                   retry_storm
    honoured         a busy client; 2 calls get 429 + Retry-After 1 s, re-sent     rate_limited (honoured),
                     after 1.2 s                                                   not retry_storm
    aggregator_ok    FastMCP's proxy, backend up: a tool's isError for some inputs not dead_backend_is_error
    aggregator_dead  the same proxy once its backend was killed                    dead_backend_is_error
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mitmproxy.http import HTTPFlow
from mitmproxy.io import FlowReader

from mcp_blackbox.analyzer.model.contract import FindingRecord
from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.mcp_aggregator import start_aggregator
from tests.support.processes import ServerProcess, start_server
from tests.support.proxy import Mitmdump, free_port, start_mitmdump
from tests.support.raw_http import Control
from tests.truth.driver import open_session
from tests.truth.family_gateway import running_nginx

pytestmark = pytest.mark.e2e

SLOW_MS = 2500  # a slow upstream: longer than the 1 s timeouts below, so nginx gives up first
NGINX_TIMEOUT_S = 1  # proxy_read_timeout of the captures where nginx cuts calls
FAIL_TIMEOUT_S = 30  # nginx keeps a failed upstream down this long: longer than any capture here
# Peers and recorders start a few at a time (each takes seconds of CPU to import); on a busy machine a start
# can take far longer than alone.
PARALLEL_STARTS = 4
STARTUP_S = 60.0

NGINX_HEAD = """\
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    upstream mcp {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout {timeout}s;
            proxy_next_upstream off;
        }}
    }}
}}
"""


@dataclass
class Recorded:
    flow_file: Path
    findings: list[FindingRecord]
    client: list[str]  # what the client saw of each tools/call, in order
    gateway_log: str = ""  # nginx's error log, when the capture was made in front of one

    def named(self, rule: str) -> list[FindingRecord]:
        return [finding for finding in self.findings if finding["rule"] == rule]


# ---------------------------------------------------------------- peers and the client


@contextmanager
def nginx_in_front(upstreams: list[int], workdir: Path, *, timeout_s: int, max_fails: int = 0) -> Iterator[Gateway]:
    """A real nginx proxying to ``upstreams`` (ports); ``max_fails``: each is marked down after that many
    failures for FAIL_TIMEOUT_S (nginx ignores it with a single upstream; 0: never)."""
    port = free_port()
    folder = workdir / f"nginx-{port}"
    folder.mkdir()
    marking = f" max_fails={max_fails} fail_timeout={FAIL_TIMEOUT_S}s"
    servers = "\n".join(f"        server 127.0.0.1:{upstream}{marking};" for upstream in upstreams)
    conf = NGINX_HEAD.format(tmp=folder, servers=servers, port=port, timeout=timeout_s)
    with running_nginx(conf, port, folder):
        yield Gateway(port, folder / "error.log")


@dataclass(frozen=True)
class Gateway:
    port: int
    error_log: Path


@contextmanager
def recording(upstream_port: int, workdir: Path, name: str) -> Iterator[Mitmdump]:
    """mitmdump with the addon in reverse mode in front of ``upstream_port``."""
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{upstream_port}", workdir, name=name, timeout=STARTUP_S)
    try:
        yield proxy
    finally:
        proxy.stop()


def enter_all(stack: ExitStack, *managers: AbstractContextManager[Any]) -> list[Any]:
    """Enter ``managers`` at once (each peer takes seconds to start), each left to ``stack`` to exit."""
    with ThreadPoolExecutor(PARALLEL_STARTS) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
    for manager, future in zip(managers, futures, strict=True):
        if future.exception() is None:
            stack.push(manager)
    return [future.result() for future in futures]  # the first failure raises; the stack exits the others


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """One tools/call as the client saw it: "ok", "isError", or the error the SDK raised."""
    try:
        result = await client.call_tool(tool, arguments)
    except Exception as exc:  # a 5xx or a 429: the SDK raises, the session lives on
        return f"error: {exc}"
    return "isError" if result.is_error else "ok"


async def call_retrying(
    client: Client, tool: str, arguments: dict[str, Any], *, attempts: int, wait_s: float
) -> list[str]:
    """An application's retry loop: the same call again ``wait_s`` after each failure, ``attempts`` at most."""
    seen: list[str] = []
    for _ in range(attempts):
        seen.append(await call(client, tool, arguments))
        if seen[-1] == "ok":
            break
        await anyio.sleep(wait_s)
    return seen


def echo_rule(action: dict[str, Any], times: int | None = None) -> dict[str, Any]:
    return {"match": {"rpc_method": "tools/call", "tool": "echo"}, "action": action, "times": times}


@contextmanager
def faults(server: ServerProcess, *rules: dict[str, Any]) -> Iterator[None]:
    control = Control(server.port)
    control.faults(*rules)
    try:
        yield
    finally:
        control.reset()


# ---------------------------------------------------------------- the scenarios


@dataclass(frozen=True)
class Bed:
    """The peers every capture is made against."""

    a: ServerProcess  # stateless, an upstream of nginx
    b: ServerProcess  # stateless, an upstream of nginx
    stateful: ServerProcess
    backend: ServerProcess  # stateless, behind FastMCP's proxy and an nginx of its own; killed last


async def echo_calls(url: str, count: int, prefix: str) -> list[str]:
    async with open_session(url) as client:
        return [await call(client, "echo", {"text": f"{prefix} {n}"}) for n in range(1, count + 1)]


MARKED_DOWN_CALLS = 6


def marked_down(bed: Bed, url: str) -> list[str]:
    """Both upstreams hold echo for SLOW_MS: the first echo times out on one (504, marked down), the second on
    the other (504, marked down), the rest find no live upstream."""
    with faults(bed.a, echo_rule({"delay_ms": SLOW_MS})), faults(bed.b, echo_rule({"delay_ms": SLOW_MS})):
        return anyio.run(echo_calls, url, MARKED_DOWN_CALLS, "down")


TIMEOUT_CALLS = 3


def timeouts(bed: Bed, url: str) -> list[str]:
    """TIMEOUT_CALLS clients, each with its own session, call echo at once; the one upstream holds it for
    SLOW_MS, and nginx gives up on each after its 1 s proxy_read_timeout."""
    seen: list[str] = []

    async def one(n: int) -> None:
        seen.extend(await echo_calls(url, 1, f"client {n}"))

    async def together() -> None:
        async with anyio.create_task_group() as group:
            for n in range(TIMEOUT_CALLS):
                group.start_soon(one, n)

    with faults(bed.a, echo_rule({"delay_ms": SLOW_MS})):
        anyio.run(together)
    return seen


SERVER_504_AFTER_MS = (100, 450, 900)  # the server's own 504s, each after its own time
SLOW_SUCCESS_MS = (200, 600)


def server_errors(bed: Bed, url: str) -> list[str]:
    """Behind nginx with a 10 s timeout that never fires: the server's own 504s after varied times, two 503s
    without Retry-After, and slow successes."""
    rules = [echo_rule({"status": 504, "after_ms": ms, "body": "upstream busy"}, 1) for ms in SERVER_504_AFTER_MS]
    rules += [echo_rule({"status": 503, "body": "overloaded"}, 2)]
    rules += [echo_rule({"delay_ms": ms}, 1) for ms in SLOW_SUCCESS_MS]
    with faults(bed.b, *rules):
        return anyio.run(echo_calls, url, 7, "varied")


STORM_CALLS = 3
STORM_LIMITED = 5  # 429s per call before it passes
STORM_WAIT_S = 0.02  # the client's pause before re-sending: it ignores Retry-After
STORM_RETRY_AFTER = "2"


async def storm_client(url: str) -> list[str]:
    async with open_session(url) as client:
        seen: list[str] = []
        for n in range(STORM_CALLS):
            arguments = {"text": f"storm {n}"}
            seen += await call_retrying(client, "echo", arguments, attempts=STORM_LIMITED + 1, wait_s=STORM_WAIT_S)
        return seen


def storm(bed: Bed, url: str) -> list[str]:
    """Each of STORM_CALLS echo calls gets STORM_LIMITED 429s (Retry-After: 2) and then passes; the client
    re-sends after 20 ms."""
    statuses = ([429] * STORM_LIMITED + [200]) * STORM_CALLS
    action = {"statuses": statuses, "headers": {"retry-after": STORM_RETRY_AFTER}, "body": "slow down"}
    with faults(bed.stateful, echo_rule(action, len(statuses))):
        return anyio.run(storm_client, url)


BUSY_CALLS = 16  # distinct echo calls of a busy client
HONOURED_LIMITED = 2  # add calls that get one 429 each
HONOURED_RETRY_AFTER_S = 1
HONOURED_WAIT_S = 1.2


async def busy_client(url: str) -> list[str]:
    async with open_session(url) as client:
        seen = [await call(client, "echo", {"text": f"busy {n}"}) for n in range(BUSY_CALLS // 2)]
        for n in range(HONOURED_LIMITED):
            seen += await call_retrying(client, "add", {"a": n, "b": 1}, attempts=2, wait_s=HONOURED_WAIT_S)
        seen += [await call(client, "echo", {"text": f"busy {n}"}) for n in range(BUSY_CALLS // 2, BUSY_CALLS)]
        return seen


def honoured(bed: Bed, url: str) -> list[str]:
    """A busy client: BUSY_CALLS distinct echo calls and HONOURED_LIMITED add calls; each add is refused once
    with 429 + Retry-After: 1, and the client waits 1.2 s before re-sending it."""
    statuses = [429, 200] * HONOURED_LIMITED
    action = {"statuses": statuses, "headers": {"retry-after": str(HONOURED_RETRY_AFTER_S)}}
    with faults(bed.stateful, {"match": {"tool": "add"}, "action": action, "times": len(statuses)}):
        return anyio.run(busy_client, url)


async def legitimate_tool_errors(url: str) -> list[str]:
    """A tool that reports isError for some inputs (the same text but for the order number), other calls fine."""
    async with open_session(url) as client:
        seen = [await call(client, "tool_error", {"message": f"order {n} not found"}) for n in (17, 18, 19)]
        seen.append(await call(client, "echo", {"text": "still fine"}))
        seen.append(await call(client, "tool_error", {"message": "order 20 not found"}))
        seen.append(await call(client, "add", {"a": 2, "b": 3}))
        return seen


def aggregator_ok(bed: Bed, url: str) -> list[str]:
    return anyio.run(legitimate_tool_errors, url)


DEAD_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("echo", {"text": "a"}),
    ("add", {"a": 1, "b": 2}),
    ("write_record", {"key": "k", "value": "v"}),
    ("echo", {"text": "b"}),
)


async def calls_after_kill(backend: ServerProcess, via_proxy_url: str, via_nginx_url: str) -> list[list[str]]:
    """A client through each gateway opens its session; the backend is killed; each calls several tools."""
    async with open_session(via_proxy_url) as via_proxy, open_session(via_nginx_url) as via_nginx:
        backend.proc.kill()  # a crash: no graceful shutdown
        backend.proc.wait()
        seen: list[list[str]] = [[], []]
        for tool, arguments in DEAD_CALLS:
            seen[0].append(await call(via_proxy, tool, arguments))
            seen[1].append(await call(via_nginx, tool, arguments))
        return seen


# One after another (they share servers and their faults); the backend dies in the last two, together.
SCENARIOS: dict[str, Callable[[Bed, str], list[str]]] = {
    "marked_down": marked_down,
    "timeouts": timeouts,
    "server_errors": server_errors,
    "storm": storm,
    "honoured": honoured,
    "aggregator_ok": aggregator_ok,
}


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Recorded]]:
    """Every capture of the module, recorded once: the peers and the recorders start together, the scenarios
    run one after another, then every recorder stops and each flow file is analyzed."""
    workdir = tmp_path_factory.mktemp("findings-gateways")
    backend_port = free_port()
    with ExitStack() as stack:
        a, b, stateful, backend, aggregator = enter_all(
            stack,
            start_server("stateless", startup_timeout=STARTUP_S),
            start_server("stateless", startup_timeout=STARTUP_S),
            start_server("stateful", startup_timeout=STARTUP_S),
            start_server("stateless", port=backend_port, startup_timeout=STARTUP_S),
            start_aggregator(f"http://127.0.0.1:{backend_port}/mcp", timeout=STARTUP_S),
        )
        bed = Bed(a, b, stateful, backend)
        gateways = {
            "marked_down": nginx_in_front([a.port, b.port], workdir, timeout_s=NGINX_TIMEOUT_S, max_fails=1),
            "timeouts": nginx_in_front([a.port], workdir, timeout_s=NGINX_TIMEOUT_S),
            "server_errors": nginx_in_front([b.port], workdir, timeout_s=10),
            "dead_upstream": nginx_in_front([backend.port], workdir, timeout_s=10),
        }
        nginx: dict[str, Gateway] = {name: stack.enter_context(manager) for name, manager in gateways.items()}
        targets = {name: gateway.port for name, gateway in nginx.items()}
        targets |= {"storm": stateful.port, "honoured": stateful.port}
        targets |= {"aggregator_ok": aggregator, "aggregator_dead": aggregator}
        proxies: dict[str, Mitmdump] = dict(
            zip(
                targets,
                enter_all(stack, *(recording(port, workdir, name) for name, port in targets.items())),
                strict=True,
            )
        )
        seen = {name: scenario(bed, f"{proxies[name].url}/mcp") for name, scenario in SCENARIOS.items()}
        urls = (f"{proxies['aggregator_dead'].url}/mcp", f"{proxies['dead_upstream'].url}/mcp")
        seen["aggregator_dead"], seen["dead_upstream"] = anyio.run(calls_after_kill, backend, *urls)
        logs = {name: gateway.error_log.read_text() for name, gateway in nginx.items()}
        with ThreadPoolExecutor(len(proxies)) as pool:  # each takes a second or two to write its file and exit
            assert list(pool.map(lambda proxy: proxy.stop(), proxies.values())) == [0] * len(proxies)
    yield {
        name: Recorded(proxy.flow_file, analyze([proxy.flow_file]).findings, seen[name], logs.get(name, ""))
        for name, proxy in proxies.items()
    }


# ---------------------------------------------------------------- the tests


def wire_requests(flow_file: Path) -> int:
    """JSON-RPC requests the client sent, counted from the flows themselves (not through the analyzer)."""
    with flow_file.open("rb") as f:
        bodies = [flow.request.content for flow in FlowReader(f).stream() if isinstance(flow, HTTPFlow)]
    messages = [json.loads(body) for body in bodies if body]
    flat = [m for message in messages for m in (message if isinstance(message, list) else [message])]
    return sum(1 for m in flat if isinstance(m, dict) and "method" in m and m.get("id") is not None)


def seconds_in(text: str) -> list[float]:
    """Every duration a finding's text states, in seconds."""
    found = re.findall(r"(\d+(?:\.\d+)?) (ms|s)\b", text)
    return [float(value) / (1000 if unit == "ms" else 1) for value, unit in found]


def test_upstream_marked_down_after_504s_then_fast_502s(captures: dict[str, Recorded]) -> None:
    recorded = captures["marked_down"]
    assert [seen.split(":")[0] for seen in recorded.client] == ["error"] * MARKED_DOWN_CALLS, recorded.client
    # nginx's own log: one timeout on each upstream (max_fails=1 marks it down), then no live upstream.
    assert recorded.gateway_log.count("upstream timed out") == 2, recorded.gateway_log
    assert recorded.gateway_log.count("no live upstreams") == MARKED_DOWN_CALLS - 2, recorded.gateway_log
    (finding,) = recorded.named("upstream_marked_down")
    timeouts, fast = finding["evidence"][:2]
    assert timeouts.startswith("2 HTTP 504 from nginx (Server: nginx/"), timeouts
    waited = seconds_in(timeouts.split("each after")[1].split(",")[0])
    assert waited and all(NGINX_TIMEOUT_S <= s < NGINX_TIMEOUT_S + 0.5 for s in waited), timeouts
    assert fast.startswith(f"then {MARKED_DOWN_CALLS - 2} HTTP 502 from it, each within "), fast
    assert max(seconds_in(fast.split("each within")[1].split(",")[0])) < 0.25, fast
    assert finding["title"] == "upstream marked down behind nginx: 504 timeouts, then fast 502s"
    assert len(finding["calls"]) == MARKED_DOWN_CALLS


def test_a_dead_upstream_is_not_marked_down(captures: dict[str, Recorded]) -> None:
    """Fast 502s with no timeout before them: the upstream refuses connections, nothing timed out."""
    recorded = captures["dead_upstream"]
    assert all(seen.startswith("error") for seen in recorded.client), recorded.client
    # nginx's own log: every call (and the tools/list the SDK adds) refused; nothing timed out or was marked down.
    assert recorded.gateway_log.count("Connection refused") >= len(DEAD_CALLS), recorded.gateway_log
    assert "timed out" not in recorded.gateway_log and "no live upstreams" not in recorded.gateway_log
    assert not recorded.named("upstream_marked_down"), recorded.findings
    assert not recorded.named("gateway_timeout"), recorded.findings


def test_gateway_timeout_at_its_configured_duration(captures: dict[str, Recorded]) -> None:
    recorded = captures["timeouts"]
    assert all(seen.startswith("error") for seen in recorded.client), recorded.client
    assert recorded.gateway_log.count("upstream timed out") == TIMEOUT_CALLS, recorded.gateway_log
    (finding,) = recorded.named("gateway_timeout")
    assert finding["title"] == f"nginx's timeout is ~{NGINX_TIMEOUT_S} s: it cut {TIMEOUT_CALLS} calls", finding
    first = finding["evidence"][0]
    assert first.startswith(f"{TIMEOUT_CALLS} of {TIMEOUT_CALLS} HTTP 504 from "), finding
    assert all(NGINX_TIMEOUT_S <= s < NGINX_TIMEOUT_S + 0.5 for s in seconds_in(first.split("came after")[1])), first
    assert len(finding["calls"]) == TIMEOUT_CALLS
    # 504s only: nginx kept trying its single upstream (it never marks a lone upstream down).
    assert not recorded.named("upstream_marked_down"), recorded.findings


def test_server_504s_at_varied_times_and_503s_without_retry_after_are_no_finding(
    captures: dict[str, Recorded],
) -> None:
    recorded = captures["server_errors"]
    assert recorded.client.count("ok") == len(SLOW_SUCCESS_MS), recorded.client
    assert not recorded.gateway_log.count("upstream timed out"), recorded.gateway_log
    assert not recorded.named("gateway_timeout"), recorded.findings
    assert not recorded.named("rate_limited"), recorded.findings
    assert not recorded.named("upstream_marked_down"), recorded.findings


def test_rate_limited_with_retry_after_ignored(captures: dict[str, Recorded]) -> None:
    recorded = captures["storm"]
    assert recorded.client.count("ok") == STORM_CALLS, recorded.client
    (finding,) = recorded.named("rate_limited")
    limited = STORM_CALLS * STORM_LIMITED
    assert finding["title"].endswith(f": {limited} HTTP 429, Retry-After ignored"), finding
    assert finding["evidence"][0].startswith(f"{limited} HTTP 429 from "), finding
    assert finding["evidence"][1] == f"Retry-After asked for {STORM_RETRY_AFTER} s", finding
    assert finding["evidence"][2].startswith(f"{limited} retries came "), finding
    assert finding["evidence"][2].endswith("sooner than asked (RETRY_AFTER_IGNORED)"), finding


def test_retry_storm_with_its_amplification_factor(captures: dict[str, Recorded]) -> None:
    recorded = captures["storm"]
    (finding,) = recorded.named("retry_storm")
    # Every request on the wire (the SDK adds initialize and a tools/list of its own) is a logical call but the
    # client's re-sends after each 429.
    requests, resent = wire_requests(recorded.flow_file), STORM_CALLS * STORM_LIMITED
    assert requests >= STORM_CALLS * (STORM_LIMITED + 1) + 1
    found = re.search(r"retry storm: ([\d.]+) requests per logical call", finding["title"])
    assert found is not None, finding
    assert float(found[1]) == pytest.approx(requests / (requests - resent), abs=0.05), finding
    assert finding["evidence"][0].startswith(f"{requests} requests to "), finding
    assert f"for {requests - resent} logical calls" in finding["evidence"][0], finding
    assert finding["evidence"][0].endswith(f": {resent} were retries"), finding
    assert finding["evidence"][1] == f"who retried: app-retry {resent}", finding


def test_rate_limited_with_retry_after_honoured(captures: dict[str, Recorded]) -> None:
    recorded = captures["honoured"]
    assert recorded.client.count("ok") == BUSY_CALLS + HONOURED_LIMITED, recorded.client
    (finding,) = recorded.named("rate_limited")
    assert finding["title"].endswith(f": {HONOURED_LIMITED} HTTP 429, Retry-After honoured"), finding
    assert finding["evidence"][1] == f"Retry-After asked for {HONOURED_RETRY_AFTER_S} s", finding
    waited = finding["evidence"][2]
    assert waited.startswith(f"{HONOURED_LIMITED} retries waited "), finding
    assert all(HONOURED_WAIT_S <= s < HONOURED_WAIT_S + 0.5 for s in seconds_in(waited)), waited


def test_a_busy_client_with_one_retry_each_is_no_storm(captures: dict[str, Recorded]) -> None:
    recorded = captures["honoured"]
    assert not recorded.named("retry_storm"), recorded.findings


def test_dead_backend_behind_an_aggregator_answers_is_error(captures: dict[str, Recorded]) -> None:
    recorded = captures["aggregator_dead"]
    assert recorded.client == ["isError"] * len(DEAD_CALLS), recorded.client
    (finding,) = recorded.named("dead_backend_is_error")
    tools = sorted({tool for tool, _ in DEAD_CALLS})
    assert finding["evidence"][0].startswith(f"{len(DEAD_CALLS)} tools/call in a row to "), finding
    assert finding["evidence"][0].endswith(f"across {len(tools)} tools ({', '.join(tools)})"), finding
    assert finding["evidence"][2] == "no tools/call to it succeeded after that in the capture", finding
    assert len(finding["calls"]) == len(DEAD_CALLS)


def test_a_tool_that_reports_is_error_for_some_inputs_is_no_dead_backend(captures: dict[str, Recorded]) -> None:
    recorded = captures["aggregator_ok"]
    assert recorded.client == ["isError"] * 3 + ["ok", "isError", "ok"], recorded.client
    assert not recorded.named("dead_backend_is_error"), recorded.findings
