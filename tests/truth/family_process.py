"""Family p: separate client processes, each one the official Python SDK's client in a process of its own
(tests/truth/process_client.py), so that the recorder measures which process sent each call.

What the analyzer used to get wrong across calls (issue 21), each scenario with its look-alike:
  runs      sequential runs of one script: identical calls from processes one after another; the first
            run's echo fails (503) and nothing retries it. Then a process that does retry: after the 503
            it starts its job over on a new session (the write again: a rerun that re-executes; the echo:
            app-retry), and after it another run of that script (identical calls, another client).
  crowd     processes at once, identical calls: two get a 503 and retry in their own session; their
            identical writes are each their own.
  restart   the server is killed during a streaming call and started again on its port; the client
            sends the call again on a new session (app-retry; the tool had started). A later process
            sends the identical call.
  affinity  nginx round robin over two stateful servers without stickiness: a session made on one
            instance gets 404 from the other; the client starts a new session and sends the call again
            until it lands (session-reinit). Two processes, one after the other.
  stdio     the SDK's stdio client starts its server through `mcp-blackbox record --stdio -w DIR/`; the
            server dies mid-call, the client starts it again (a second file) and sends the call again
            (app-retry, the tool may have run). A later process runs the identical call: its own file,
            another client.

Labels are what each process did (its script and what it saw), never the analyzer's output.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.support.processes import REPO_ROOT, child_env, start_server
from tests.support.proxy import free_port
from tests.support.raw_http import Control
from tests.truth.driver import Attempt
from tests.truth.family_gateway import running_nginx
from tests.truth.harness import Plan, ScenarioFailed, expect, recording
from tests.truth.labels import Kind, Label

WRAPPER = str(Path(sys.executable).with_name("mcp-blackbox"))
PROCESS_TIMEOUT_S = 60
CROWD = 4
CROWD_FAILURES = 2
START_SPREAD_S = 6.0  # the crowd's processes start within this; they call together after it

Call = dict[str, Any]


def labelled(request: str, tool: str, args: dict[str, Any], kind: Kind = "first", **retry: Any) -> Call:
    """One call of a script: its first attempt's label, and how the process retries it if it fails."""
    step: Call = {"tool": tool, "args": args, "label": asdict(Label(request, 1, kind))}
    if retry:
        step["retry"] = retry
    return step


def rerun(request: str, tool: str, args: dict[str, Any], *, reexecutes: bool) -> Call:
    """A call the application makes again when it starts its job over (after it had succeeded)."""
    return {"tool": tool, "args": args, "label": asdict(Label(request, 2, "rerun", reexecutes=reexecutes))}


def fail_with(tool: str, status: int, times: int) -> dict[str, Any]:
    return {"match": {"rpc_method": "tools/call", "tool": tool}, "action": {"status": status}, "times": times}


# ---------------------------------------------------------------- the client processes


class Client:
    """A process_client child; what it saw, once it has ended."""

    def __init__(self, where: list[str], script: list[Call], start_at: float | None = None) -> None:
        argv = [sys.executable, "-m", "tests.truth.process_client", *where, "--script", json.dumps(script)]
        if start_at is not None:
            argv += ["--start-at", str(start_at)]
        self.process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )

    def attempts(self) -> list[Attempt]:
        out, _ = self.process.communicate(timeout=PROCESS_TIMEOUT_S)
        if self.process.returncode != 0:
            raise ScenarioFailed(f"client process {self.process.pid} exited {self.process.returncode}")
        seen = json.loads(out)
        return [attempt_of(record) for record in seen["attempts"]]


def attempt_of(record: dict[str, Any]) -> Attempt:
    fields = {**record, "label": Label(**record["label"])}
    return Attempt(**fields)


def run_one(where: list[str], script: list[Call]) -> list[Attempt]:
    return Client(where, script).attempts()


def outcomes(attempts: list[Attempt]) -> list[tuple[str, str]]:
    return [(a.label.key, a.outcome) for a in attempts]


# ---------------------------------------------------------------- scenarios on the test server


def sequential_runs(url: str, control: Control, plan: Plan) -> list[Attempt]:
    where = ["--url", url]
    attempts: list[Attempt] = []
    control.reset()
    control.faults(fail_with("echo", 503, 1))
    for run in range(1, plan.runs + 2):  # the same script, run after run: each run its own client
        kind: Kind = "first" if run == 1 else "independent"
        script = [
            labelled(f"p/runs/run{run}/write", "write_record", {"key": "p-order", "value": "paid"}, kind),
            labelled(f"p/runs/run{run}/status", "echo", {"text": "p status"}, kind),
        ]
        attempts += run_one(where, script)
    expect(outcomes(attempts)[1][1] == "error", "the first run's echo fails", attempts)
    # A process that starts its job over on a new session after the 503, then a run of the same script.
    control.faults(fail_with("echo", 503, 1))
    write = {"key": "p-order-b", "value": "paid"}
    again = [rerun("p/runs/loop/write", "write_record", write, reexecutes=True)]
    script = [
        labelled("p/runs/loop/write", "write_record", write),
        labelled("p/runs/loop/status", "echo", {"text": "p status b"}, times=1, delay=0.3, new_session=True,
                 origin="app-retry", rerun=again),
    ]  # fmt: skip
    loop = run_one(where, script)
    expect([o for _, o in outcomes(loop)] == ["ok", "error", "ok", "ok"], "the loop's retry succeeds", loop)
    after = [
        labelled("p/runs/after/write", "write_record", write, "independent"),
        labelled("p/runs/after/status", "echo", {"text": "p status b"}, "independent"),
    ]
    return attempts + loop + run_one(where, after)


def crowd_of_processes(url: str, control: Control, plan: Plan) -> list[Attempt]:
    control.reset()
    control.faults(fail_with("echo", 503, CROWD_FAILURES))
    start_at = time.time() + START_SPREAD_S
    clients = []
    for index in range(1, CROWD + 1):
        kind: Kind = "first" if index == 1 else "independent"
        script = [
            labelled(f"p/crowd/c{index}/ask", "echo", {"text": "the crowd's question"}, times=1, delay=0.5,
                     origin="app-retry"),
            labelled(f"p/crowd/c{index}/write", "write_record", {"key": "crowd-order", "value": "paid"}, kind),
        ]  # fmt: skip
        clients.append(Client(["--url", url], script, start_at))
    attempts = [attempt for client in clients for attempt in client.attempts()]
    failed = [a for a in attempts if a.label.attempt == 1 and a.outcome == "error"]
    expect(len(failed) == CROWD_FAILURES, f"{CROWD_FAILURES} of the crowd's first calls fail", attempts)
    expect(all(a.outcome == "ok" for a in attempts if a.label.attempt == 2), "every retry succeeds", attempts)
    return attempts


def on_test_server(
    scenario: Callable[[str, Control, Plan], list[Attempt]],
) -> Callable[[str, Path, Plan], list[Attempt]]:
    def record(name: str, out: Path, plan: Plan) -> list[Attempt]:
        with start_server("stateful") as server, recording(f"http://127.0.0.1:{server.port}", name, out) as url:
            attempts = scenario(f"{url}/mcp", Control(server.port), plan)
        return attempts

    return record


# ---------------------------------------------------------------- a server killed and started again


def restarted_server(name: str, out: Path, plan: Plan) -> list[Attempt]:
    port = free_port()
    progress = {"steps": 6, "delay_ms": 250}
    script = [
        labelled("p/restart/job", "progress", progress, times=1, delay=1.0, new_session=True,
                 origin="app-retry", reexecutes=True) | {"progress": True},
    ]  # fmt: skip
    with recording(f"http://127.0.0.1:{port}", name, out) as url:
        with start_server("stateful", port=port) as first:
            client = Client(["--url", f"{url}/mcp"], script)
            _wait_for_call(Control(first.port), "progress")
            first.proc.send_signal(signal.SIGKILL)  # mid-call: the stream is cut, the tool had started
            first.proc.wait(10)
        with start_server("stateful", port=port):
            attempts = client.attempts()
            expect([o for _, o in outcomes(attempts)] == ["error", "ok"], "cut, then done on the new server", attempts)
            later = [labelled("p/restart/later", "progress", progress, "independent") | {"progress": True}]
            attempts += run_one(["--url", f"{url}/mcp"], later)
    return attempts


def _wait_for_call(control: Control, tool: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(e["tool"] == tool for e in control.log()):
        if time.monotonic() > deadline:
            raise ScenarioFailed(f"no {tool} call reached the server within {timeout} s")
        time.sleep(0.02)


# ---------------------------------------------------------------- a balancer without stickiness

# Weighted round robin, no stickiness: a session's requests mostly reach the instance that made it, and
# now and then the other one, which answers 404.
BALANCER_CONF = """
daemon off;
worker_processes 1;
error_log {tmp}/error.log;
pid {tmp}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    upstream mcp {{
        server 127.0.0.1:{a} weight=3;
        server 127.0.0.1:{b} weight=1;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_next_upstream off;
        }}
    }}
}}
"""
AFFINITY_TRIES = 8


def lost_affinity(name: str, out: Path, plan: Plan) -> list[Attempt]:
    attempts: list[Attempt] = []
    with start_server("stateful") as a, start_server("stateful") as b, tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        conf = BALANCER_CONF.format(tmp=tmp, port=port, a=a.port, b=b.port)
        with running_nginx(conf, port, Path(tmp)), recording(f"http://127.0.0.1:{port}", name, out) as url:
            for run in (1, 2, 3):
                kind: Kind = "first" if run == 1 else "independent"
                script = [
                        labelled(f"p/affinity/run{run}/ask", "echo", {"text": "balanced"}, kind,
                                 times=AFFINITY_TRIES, delay=0.1, new_session=True, origin="session-reinit"),
                    ]  # fmt: skip
                attempts += run_one(["--url", f"{url}/mcp"], script)
    expect(any(a.outcome == "error" for a in attempts), "some session lost its instance", attempts)
    expect(all(a.outcome == "ok" for a in _last_attempts(attempts)), "each client's call lands at last", attempts)
    return attempts


def _last_attempts(attempts: list[Attempt]) -> list[Attempt]:
    last = {a.label.request: a for a in attempts}
    return list(last.values())


# ---------------------------------------------------------------- a stdio server restarted by its client


def restarted_stdio_server(name: str, out: Path, plan: Plan) -> list[Attempt]:
    captures = out / name
    captures.mkdir()
    with tempfile.TemporaryDirectory() as tmp:
        once = str(Path(tmp) / "crashed-once")
        server = [WRAPPER, "record", "--stdio", "-w", f"{captures}/", "--", sys.executable, "-m"]
        server += ["tests.stdio_servers.py_server"]
        crash = {"how": "exit", "once": once}
        script = [
            labelled("p/stdio/job", "crash", crash, times=1, delay=0.2, new_session=True, origin="app-retry",
                     reexecutes=True),
        ]  # fmt: skip
        attempts = run_one(["--stdio", json.dumps(server)], script)
        expect([o for _, o in outcomes(attempts)] == ["error", "ok"], "the server dies, then answers", attempts)
        attempts += run_one(["--stdio", json.dumps(server)], [labelled("p/stdio/later", "crash", crash, "independent")])
    return attempts


# ---------------------------------------------------------------- the family


PARTS: dict[str, Callable[[str, Path, Plan], list[Attempt]]] = {
    "runs": on_test_server(sequential_runs),
    "crowd": on_test_server(crowd_of_processes),
    "restart": restarted_server,
    "affinity": lost_affinity,
    "stdio": restarted_stdio_server,
}


def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
    """out/p-<part>.flows for each part, and out/p-stdio/ (a directory of stdio captures: one capture)."""
    attempts: list[Attempt] = []
    for part, record in PARTS.items():
        attempts += record(f"{name}-{part}", out, plan)
    return [attempt.record() for attempt in attempts]
