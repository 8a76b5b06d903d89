"""Family q, held out: cross-call scenarios written after the analyzer's rules and never tuned against, so that
retry linking, origin and duplicate execution are scored on traffic the rules were not written for.

Real processes through mitmdump with the recording addon, against the test server behind its fault layer,
one capture per part (q-<part>.flows). Most clients are the official TypeScript SDK's (tests/truth/peers/
script_client.mjs: one node process per run, a new Client and transport in the same process for a new
session, no DELETE on close); some are the Python SDK's (tests/truth/process_client.py) with other timings.

  runs        three TypeScript processes one after another, each the same script (a write, then a read), with
              gaps of 0.3 s and 2 s: each run its own requests (independent), nothing retried.
  cut         the write's answer is cut before its result (the write ran) and the SDK's resumption is refused,
              so the call fails; the process opens a new session and sends the write again (app-retry: the
              write runs twice, reexecutes). Once from TypeScript (request timeout 3.5 s, retry 0.5 s later),
              once from Python (retry 1.5 s later); then a later TypeScript process writes the same (independent).
  refused     the fault layer answers the write 503 before the app (nothing ran); the process sends it again on
              a new session (app-retry, no re-execution). TypeScript 0.8 s later, Python 0.2 s later.
  lookalike   two TypeScript processes started at the same moment make identical calls (the second:
              independent); a TypeScript process writes the same record twice as two user actions 0.8 s
              apart, and a Python process does so back to back: two logical requests each (independent).
  throttled   the write gets 429 with Retry-After (1 s, then 2 s in a second process); the client waits what
              it was told and sends it again in the same session (app-retry; the 429 ran nothing).

Labels say what each process did (its script, checked against what it saw and against the server's own log
of the writes it ran), never the analyzer's output. A write sent again as a new logical request is labelled
independent and not reexecutes, as in family p (tests/truth/family_process.py): `reexecutes` is the truth
for DUPLICATE_EXECUTION, a logical request that ran again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.mcp_server import WRITE_LOG_PREFIX
from tests.support.processes import REPO_ROOT, ServerProcess, child_env, start_server
from tests.support.raw_http import Control
from tests.truth.driver import Attempt
from tests.truth.family_process import Call, attempt_of, fail_with, labelled, outcomes
from tests.truth.family_process import Client as PythonClient
from tests.truth.harness import Plan, ScenarioFailed, expect, recording
from tests.truth.labels import Kind

SCRIPT_CLIENT = Path(__file__).resolve().parent / "peers" / "script_client.mjs"
PROCESS_TIMEOUT_S = 60
RUN_GAPS_S = (0.3, 2.0)  # runs: between run 1 and 2, and between run 2 and 3
CUT_TIMEOUT_MS = 3500  # cut: the TypeScript call gives up past the SDK's two refused resumptions (1 s + 1.5 s)
START_SPREAD_S = 3.0  # lookalike: the twins start within this and call together after it

WRITE = "write_record"


def write_args(key: str) -> dict[str, Any]:
    return {"key": key, "value": "paid"}


# The write's result event is cut (the priming event passes): the tool ran, the client gets no result.
CUT_WRITE = {"match": {"rpc_method": "tools/call", "tool": WRITE}, "action": {"cut_after_events": 0}, "times": 1}
# Both SDKs resume a cut stream with GET + Last-Event-ID, which the event store would answer with the result:
# refuse every GET (the standalone GET stream too: nothing here needs it).
REFUSE_GETS = {"match": {"http_method": "GET"}, "action": {"status": 503}, "times": None}


def throttle(tool: str, seconds: int) -> dict[str, Any]:
    action = {"status": 429, "headers": {"Retry-After": str(seconds)}, "body": "slow down"}
    return {"match": {"rpc_method": "tools/call", "tool": tool}, "action": action, "times": 1}


# ---------------------------------------------------------------- the TypeScript client processes


class TsClient:
    """A script_client.mjs child; what it saw, once it has ended."""

    def __init__(self, url: str, script: list[Call], start_at: float | None = None, timeout_ms: int = 10000) -> None:
        node = shutil.which("node")
        if node is None:
            raise ScenarioFailed("family q needs node (and tests/clients/ts/node_modules: npm ci there)")
        argv = [node, str(SCRIPT_CLIENT), "--url", url, "--script", json.dumps(script), "--timeout-ms", str(timeout_ms)]
        if start_at is not None:
            argv += ["--start-at", str(start_at)]
        self.process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.wire: list[dict[str, Any]] = []

    def attempts(self) -> list[Attempt]:
        out, _ = self.process.communicate(timeout=PROCESS_TIMEOUT_S)
        if self.process.returncode != 0:
            raise ScenarioFailed(f"script_client {self.process.pid} exited {self.process.returncode}")
        seen = json.loads(out)
        if seen["fatal"]:
            raise ScenarioFailed(f"script_client {seen['pid']}: {seen['fatal']}")
        self.wire = seen["wire"]
        return [attempt_of(record) for record in seen["attempts"]]


def run_ts(url: str, script: list[Call], **options: Any) -> list[Attempt]:
    return TsClient(url, script, **options).attempts()


def run_python(url: str, script: list[Call]) -> list[Attempt]:
    return PythonClient(["--url", url], script).attempts()


def writes_ran(server: ServerProcess) -> Counter[str]:
    """The server's side of the truth: how often each key's write ran (whatever reached the client)."""
    lines = server.stderr_lines()
    return Counter(line.removeprefix(WRITE_LOG_PREFIX) for line in lines if line.startswith(WRITE_LOG_PREFIX))


def seen(attempts: list[Attempt]) -> list[str]:
    return [outcome for _, outcome in outcomes(attempts)]


# ---------------------------------------------------------------- the parts


def sequential_runs(url: str, server: ServerProcess, plan: Plan) -> list[Attempt]:
    attempts: list[Attempt] = []
    for run, gap in enumerate((0.0, *RUN_GAPS_S), start=1):
        time.sleep(gap)
        kind: Kind = "first" if run == 1 else "independent"
        script = [
            labelled(f"q/runs/run{run}/save", WRITE, write_args("q-order"), kind),
            labelled(f"q/runs/run{run}/check", "echo", {"text": "q order status"}, kind),
        ]
        attempts += run_ts(url, script)
    expect(seen(attempts) == ["ok"] * 6, "every run's calls succeed", attempts)
    expect(writes_ran(server)["q-order"] == 3, "each run's write ran once", attempts)
    return attempts


def cut_write(url: str, server: ServerProcess, plan: Plan) -> list[Attempt]:
    control = Control(server.port)
    attempts: list[Attempt] = []
    for client, key, delay in (("ts", "q-cut-ts", 0.5), ("py", "q-cut-py", 1.5)):
        control.reset()
        control.faults(CUT_WRITE, REFUSE_GETS)
        script = [
            labelled(f"q/cut/{client}/save", WRITE, write_args(key), times=1, delay=delay, new_session=True,
                     origin="app-retry", reexecutes=True),
        ]  # fmt: skip
        run = run_ts(url, script, timeout_ms=CUT_TIMEOUT_MS) if client == "ts" else run_python(url, script)
        expect(seen(run) == ["error", "ok"], f"{client}: the cut write fails, the new session's succeeds", run)
        expect(writes_ran(server)[key] == 2, f"{client}: the write ran twice (the cut one ran)", run)
        attempts += run
    control.reset()
    later = run_ts(url, [labelled("q/cut/later/save", WRITE, write_args("q-cut-ts"), "independent")])
    expect(seen(later) == ["ok"], "the later process's write succeeds", later)
    return attempts + later


def refused_write(url: str, server: ServerProcess, plan: Plan) -> list[Attempt]:
    control = Control(server.port)
    attempts: list[Attempt] = []
    for client, key, delay in (("ts", "q-503-ts", 0.8), ("py", "q-503-py", 0.2)):
        control.reset()
        control.faults(fail_with(WRITE, 503, 1))
        script = [
            labelled(f"q/refused/{client}/save", WRITE, write_args(key), times=1, delay=delay, new_session=True,
                     origin="app-retry"),
        ]  # fmt: skip
        run = run_ts(url, script) if client == "ts" else run_python(url, script)
        expect(seen(run) == ["error", "ok"], f"{client}: 503, then the new session's write succeeds", run)
        expect(writes_ran(server)[key] == 1, f"{client}: the 503 ran nothing: the write ran once", run)
        attempts += run
    return attempts


def lookalikes(url: str, server: ServerProcess, plan: Plan) -> list[Attempt]:
    Control(server.port).reset()
    start_at = time.time() + START_SPREAD_S
    twins = []
    for index in (1, 2):
        kind: Kind = "first" if index == 1 else "independent"
        script = [
            labelled(f"q/lookalike/twin{index}/save", WRITE, write_args("q-twin"), kind),
            labelled(f"q/lookalike/twin{index}/check", "echo", {"text": "q twin status"}, kind),
        ]
        twins.append(TsClient(url, script, start_at=start_at))
    attempts = [attempt for twin in twins for attempt in twin.attempts()]
    expect(seen(attempts) == ["ok"] * 4, "both twins' calls succeed", attempts)
    starts = [a.t_start for a in attempts if a.tool == WRITE]
    expect(abs(starts[0] - starts[1]) < 0.5, "the twins write at the same moment", attempts)
    # One user saves the same record twice, on purpose: two logical requests, one session.
    twice = [
        labelled("q/lookalike/twice-ts/save1", WRITE, write_args("q-twice-ts")),
        labelled("q/lookalike/twice-ts/save2", WRITE, write_args("q-twice-ts"), "independent") | {"pause": 0.8},
    ]
    attempts += run_ts(url, twice)
    back_to_back = [
        labelled("q/lookalike/twice-py/save1", WRITE, write_args("q-twice-py")),
        labelled("q/lookalike/twice-py/save2", WRITE, write_args("q-twice-py"), "independent"),
    ]
    attempts += run_python(url, back_to_back)
    ran = writes_ran(server)
    expect(seen(attempts) == ["ok"] * 8, "every look-alike call succeeds", attempts)
    expect([ran["q-twin"], ran["q-twice-ts"], ran["q-twice-py"]] == [2, 2, 2], "each write ran", attempts)
    return attempts


def throttled_write(url: str, server: ServerProcess, plan: Plan) -> list[Attempt]:
    control = Control(server.port)
    attempts: list[Attempt] = []
    for run, told in ((1, 1), (2, 2)):
        key = f"q-throttled-{run}"
        control.reset()
        control.faults(throttle(WRITE, told))
        script = [
            labelled(f"q/throttled/run{run}/save", WRITE, write_args(key), times=1, delay=0.1, retry_after=True,
                     origin="app-retry"),
            labelled(f"q/throttled/run{run}/check", "echo", {"text": f"q throttled {run}"}),
        ]  # fmt: skip
        client = TsClient(url, script)
        this_run = client.attempts()
        expect(seen(this_run) == ["error", "ok", "ok"], f"run {run}: 429, then the write and read succeed", this_run)
        told_seen = [w["retry_after"] for w in client.wire if w["status"] == 429]
        waited = this_run[1].t_start - this_run[0].t_end
        expect(told_seen == [str(told)] and waited >= told - 0.05, f"run {run}: waited the Retry-After", this_run)
        expect(writes_ran(server)[key] == 1, f"run {run}: the 429 ran nothing: the write ran once", this_run)
        attempts += this_run
    return attempts


# ---------------------------------------------------------------- the family

Part = Callable[[str, ServerProcess, Plan], list[Attempt]]
PARTS: dict[str, Part] = {
    "runs": sequential_runs,
    "cut": cut_write,
    "refused": refused_write,
    "lookalike": lookalikes,
    "throttled": throttled_write,
}


def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
    """out/q-<part>.flows for each part, each through its own test server and mitmdump."""
    attempts: list[Attempt] = []
    for part, scenario in PARTS.items():
        started = time.monotonic()
        with start_server("stateful") as server:
            with recording(f"http://127.0.0.1:{server.port}", f"{name}-{part}", out) as url:
                attempts += scenario(f"{url}/mcp", server, plan)
            server.assert_alive()
        print(f"  {name}-{part}: {time.monotonic() - started:.1f} s", file=sys.stderr)
    return [attempt.record() for attempt in attempts]
