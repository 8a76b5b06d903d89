"""Family g: a real gateway (nginx) that re-sends POSTs to a second server, recorded in front of it and behind it.

    client (mcp.Client) -> mitmdump "g-front" -> nginx -> mitmdump "g-behind" (two listeners) -> server A
                                                                                               -> server B (backup)

nginx has `proxy_next_upstream error timeout http_503 non_idempotent`: after a 503 from A, or after A
did not answer within `proxy_read_timeout`, it sends the same POST, under the same X-Request-ID, to B.
The client sees one request. Scenarios per run:
  503      echo answered 503 by A: nginx re-sends it to B at once;
  timeout  write_record delayed 1.5 s by A (which then still runs it): nginx gives up after 1 s and B runs
           it too: the write ran twice, behind the gateway;
  both     echo refused by A and B: the client gets the 503 and re-sends it itself (app-retry) 1 s later;
  crowd    several clients send the identical echo at the same moment (look-alikes, never linked).

Labels. In front, each tools/call carries the client's label. Behind, every copy carries the client's label
too; the gateway's own log (its access log: $request_id, $upstream_addr, $upstream_status) says which copy
it made and where it sent it, so the copies are relabelled from that log (tests/truth/harness.py,
write_relabels): a logical request's copies in time order, the gateway's as retries of origin proxy.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mitmproxy.http import HTTPFlow

from tests.support.mcp_server import WRITE_LOG_PREFIX
from tests.support.processes import ServerProcess, start_server, wait_listening
from tests.support.proxy import Mitmdump, free_port, start_mitmdump
from tests.support.raw_http import Control
from tests.truth.driver import Attempt, call, open_session
from tests.truth.harness import Plan, ScenarioFailed, expect, read_flows, tools_call, write_relabels
from tests.truth.labels import Label

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
READ_TIMEOUT_S = 1  # nginx's proxy_read_timeout: A's delay must exceed it
SLOW_UPSTREAM_MS = 1500
APP_RETRY_DELAY_S = 1.0
CROWD = 6

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 256; }}
http {{
    log_format gateway '$request_id $upstream_addr|$upstream_status|$status';
    access_log {tmp}/access.log gateway;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    upstream mcp {{
        server 127.0.0.1:{a} max_fails=0;
        server 127.0.0.1:{b} backup;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Request-ID $request_id;
            proxy_buffering off;
            proxy_read_timeout {timeout}s;
            proxy_next_upstream error timeout http_503 non_idempotent;
            proxy_next_upstream_tries 2;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class GatewayTry:
    """One request as nginx logged it: the upstreams it tried, in order, with their statuses."""

    request_id: str
    upstreams: list[str]
    statuses: list[str]

    @classmethod
    def parse(cls, line: str) -> GatewayTry:
        request_id, rest = line.split(" ", 1)
        addresses, statuses, _ = rest.split("|")
        return cls(request_id, [a.strip() for a in addresses.split(",")], [s.strip() for s in statuses.split(",")])


@contextmanager
def nginx(port: int, a: int, b: int, workdir: Path) -> Iterator[Path]:
    """nginx in the foreground with the config above; yields its access log."""
    with running_nginx(NGINX_CONF.format(tmp=workdir, port=port, a=a, b=b, timeout=READ_TIMEOUT_S), port, workdir):
        yield workdir / "access.log"


@contextmanager
def running_nginx(conf: str, port: int, workdir: Path) -> Iterator[None]:
    """nginx in the foreground with ``conf`` (its temporary folders in ``workdir``), listening on ``port``."""
    for folder in ("body", "proxy"):
        (workdir / folder).mkdir()
    (workdir / "nginx.conf").write_text(conf)
    process = subprocess.Popen(
        [NGINX, "-p", str(workdir), "-c", str(workdir / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(process, port, workdir / "error.log", 10, "nginx")
        yield
    finally:
        process.terminate()  # SIGTERM: fast shutdown, the access log is flushed
        process.wait(10)


def fail(tool: str, action: dict[str, Any]) -> dict[str, Any]:
    return {"match": {"rpc_method": "tools/call", "tool": tool}, "action": action, "times": 1}


async def scenarios(url: str, server_a: Control, server_b: Control, plan: Plan) -> list[Attempt]:
    attempts: list[Attempt] = []
    for run in range(1, plan.runs + 1):
        async with open_session(url) as session:
            server_a.faults(fail("echo", {"status": 503}))
            attempts.append(await call(session, "echo", {"text": f"g{run} 503"}, Label(f"g/r{run}/503", 1, "first")))
            server_a.faults(fail("write_record", {"delay_ms": SLOW_UPSTREAM_MS}))
            write = {"key": f"g-order-{run}", "value": "paid"}
            attempts.append(await call(session, "write_record", write, Label(f"g/r{run}/timeout", 1, "first")))
            server_a.faults(fail("echo", {"status": 503}))
            server_b.faults(fail("echo", {"status": 503}))
            both = {"text": f"g{run} both"}
            attempts.append(await call(session, "echo", both, Label(f"g/r{run}/both", 1, "first")))
            await anyio.sleep(APP_RETRY_DELAY_S)
            attempts.append(await call(session, "echo", both, Label(f"g/r{run}/both", 2, "retry", origin="app-retry")))
        expect(
            [a.outcome for a in attempts[-4:]] == ["ok", "ok", "error", "ok"],
            f"run {run}: the gateway hides the 503 and the timeout, not the double 503",
            attempts[-4:],
        )
        attempts += await crowd(url, run)
    return attempts


async def crowd(url: str, run: int) -> list[Attempt]:
    """Identical calls from independent clients at the same moment: nothing links them."""
    attempts: list[Attempt] = []
    go = anyio.Event()
    ready = 0

    async def client(index: int) -> None:
        nonlocal ready
        async with open_session(url) as session:
            ready += 1
            if ready == CROWD:
                go.set()
            await go.wait()
            label = Label(f"g/r{run}/crowd{index}", 1, "first")
            attempts.append(await call(session, "echo", {"text": "the same question"}, label))

    async with anyio.create_task_group() as tg:
        for index in range(1, CROWD + 1):
            tg.start_soon(client, index)
    expect(all(a.outcome == "ok" for a in attempts), f"run {run}: every look-alike succeeds", attempts)
    return attempts


def relabel_copies(behind: Path, access_log: Path, listeners: dict[int, int], ran_twice: set[str]) -> dict[str, Label]:
    """Each copy behind the gateway, labelled from nginx's log: the copies of one logical request in time
    order; a copy under the X-Request-ID of the one before it is the gateway's re-send (origin proxy).
    ``listeners`` maps each server's port to the recorder's port in front of it, which nginx logged."""
    tries = {t.request_id: t for t in map(GatewayTry.parse, access_log.read_text().splitlines())}
    recorded = read_flows(behind)
    _check_every_copy_recorded(recorded, tries)
    client_labels: dict[str, Label] = {}
    copies: dict[str, list[HTTPFlow]] = defaultdict(list)  # logical request -> its copies, in start order
    for flow in recorded:
        if (found := tools_call(flow)) and (label := found[1]):
            client_labels[flow.id] = label
            copies[label.request].append(flow)
    relabels: dict[str, Label] = {}
    for request, flows in copies.items():
        for attempt, flow in enumerate(flows, 1):
            request_id = flow.request.headers.get("x-request-id", "")
            gateway = tries.get(request_id)
            if gateway is None:
                raise ScenarioFailed(f"{request}: X-Request-ID {request_id!r} is not in the gateway's log")
            nth = sum(1 for f in flows[:attempt] if f.request.headers.get("x-request-id") == request_id)
            where = f"127.0.0.1:{listeners[flow.request.port]}"
            if len(gateway.upstreams) < nth or gateway.upstreams[nth - 1] != where:
                raise ScenarioFailed(f"{request}: copy {nth} reached {where}; the gateway logged {gateway.upstreams}")
            label = client_labels[flow.id]
            if nth > 1:  # the gateway's re-send of the copy before it
                label = Label(request, attempt, "retry", origin="proxy", reexecutes=request in ran_twice)
            elif attempt > 1:  # the client's own re-send, after the gateway gave up
                label = Label(request, attempt, "retry", origin=label.origin)
            relabels[flow.id] = label
    return relabels


def _check_every_copy_recorded(recorded: list[HTTPFlow], tries: dict[str, GatewayTry]) -> None:
    """The capture behind the gateway holds as many copies of each request as the gateway logged tries."""
    seen = Counter(flow.request.headers.get("x-request-id", "") for flow in recorded)
    wrong = {rid: (seen[rid], len(t.upstreams)) for rid, t in tries.items() if seen[rid] != len(t.upstreams)}
    if wrong:
        raise ScenarioFailed(f"copies recorded behind the gateway vs tries it logged: {wrong}")


def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
    with (
        start_server("stateless") as a,
        start_server("stateless") as b,
        tempfile.TemporaryDirectory(prefix="mcp-truth-gateway-") as tmp,
    ):
        work = Path(tmp)
        server_a, server_b = Control(a.port), Control(b.port)
        listen_a, listen_b, gateway_port = free_port(), free_port(), free_port()
        behind = start_mitmdump(
            f"reverse:http://127.0.0.1:{a.port}@{listen_a}",
            work,
            name="behind",
            extra_modes=[f"reverse:http://127.0.0.1:{b.port}@{listen_b}"],
        )
        try:
            with nginx(gateway_port, listen_a, listen_b, work) as access_log:
                front = start_mitmdump(f"reverse:http://127.0.0.1:{gateway_port}", work, name="front")
                try:
                    attempts = anyio.run(scenarios, f"{front.url}/mcp", server_a, server_b, plan)
                finally:
                    _stop(front)
        finally:
            _stop(behind)
        ran = _ran_twice([a, b], attempts)
        shutil.copyfile(front.flow_file, out / f"{name}-front.flows")
        shutil.copyfile(behind.flow_file, out / f"{name}-behind.flows")
        write_relabels(
            out,
            f"{name}-behind",
            relabel_copies(out / f"{name}-behind.flows", access_log, {a.port: listen_a, b.port: listen_b}, ran),
        )
        a.assert_alive()
        b.assert_alive()
    return [attempt.record() for attempt in attempts]


def _ran_twice(servers: list[ServerProcess], attempts: list[Attempt]) -> set[str]:
    """The logical requests whose write ran more than once, counted from the servers' own logs."""
    runs = Counter(
        line.removeprefix(WRITE_LOG_PREFIX)
        for server in servers
        for line in server.stderr_lines()
        if line.startswith(WRITE_LOG_PREFIX)
    )
    return {a.label.request for a in attempts if a.tool == "write_record" and runs[a.arguments["key"]] > 1}


def _stop(proxy: Mitmdump) -> None:
    code = proxy.stop()
    if code != 0:
        raise RuntimeError(f"mitmdump exited with {code}; log:\n{proxy.log()}")
