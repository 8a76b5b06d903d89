"""Record the labelled truth corpus through real processes on 127.0.0.1.

    .venv/bin/python tests/truth/record_corpus.py --out DIR [--quick]
    make truth

Each family records its own capture(s), DIR/<family>[-part].flows, through its own servers and
mitmdump with the recording addon (tests/truth/harness.py). Families a-d use the test MCP server
(tests/support/mcp_server.py: the official SDK behind the fault layer) and the official Python SDK's
`mcp.Client`, driven from this process (tests/truth/driver.py) so that each scenario decides its own
retries; the others bring ecosystem peers (their modules say which).
Every tools/call carries its truth label in params._meta (tests/truth/labels.py); the labels say
what the client did, and the scorer (tests/truth/score.py) reads them back from the captures.

Families:
  a  concurrent look-alikes: N independent sessions call echo with identical arguments at the same
     moment; the fault layer answers the first K with 503 and each of those clients retries once,
     in its own session, 1 s later.
  b  an app loop: write_record, then progress, whose stream is cut (and its resumption refused);
     the application re-runs the whole sequence on a fresh session: the write runs twice (a rerun,
     no retry), the progress call is retried (app-retry).
  c  a test-suite look-alike: test 1 gets a 503 and ends its session; test 2, ~20 ms later on a
     new session, sends the identical request as a new logical request (independent, no retry).
  d  an agent re-call: tool_error answers isError, and the same session calls the tool again with
     changed arguments within 100 ms (agent-retry); later a new session calls it with other
     arguments (independent).
  e  an agent framework (pydantic-ai with a scripted FunctionModel, on the fastmcp client) against a
     FastMCP server: re-calls after isError with changed arguments, later runs and a crowd of runs
     (tests/truth/family_agent.py).
  f  a bridge (mcp-remote, npm) between the official SDK's stdio client and the test server: its
     throw-away test session, a 503 retried by the app, a 404 it re-initializes after, stateless
     (--protocol auto) bridges and look-alike bridges at once (tests/truth/family_bridge.py).
  g  a real gateway (nginx, tests/truth/family_gateway.py) re-sending POSTs to a second server after a
     503 and after its upstream timeout, recorded in front of it (g-front) and behind it (g-behind).
  h  OAuth: the TypeScript SDK's client auth against the Python SDK's authorization and resource
     server: discovery, registration, token, refresh after a revoked token, a 403 look-alike
     (tests/truth/family_oauth.py).
  p  separate client processes (tests/truth/process_client.py, one process per run): sequential runs
     of one script, a crowd of processes at once, a server killed mid-call and restarted, lost
     session affinity behind round-robin nginx, and a stdio server restarted by its client (p-stdio/,
     a directory of one recording), each with a later look-alike process (tests/truth/family_process.py).
  q  held out (for linking; see score.HELD_OUT): TypeScript SDK and Python client processes: sequential
     runs, a cut write re-sent on a new session (it ran twice), a 503'd write re-sent (it ran once),
     processes at the same moment and a write saved twice on purpose, a 429 whose Retry-After the client
     honours (tests/truth/family_holdout.py).

DIR/corpus.json keeps what each client saw, for debugging; the scorer does not read it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.support and tests.truth, when run as a script

import anyio  # noqa: E402

from tests.support.processes import start_server  # noqa: E402
from tests.support.raw_http import Control  # noqa: E402
from tests.truth import (  # noqa: E402
    family_agent,
    family_bridge,
    family_gateway,
    family_holdout,
    family_oauth,
    family_process,
)
from tests.truth.driver import Attempt, call, open_session  # noqa: E402
from tests.truth.harness import Plan, ScenarioFailed, expect, recording  # noqa: E402
from tests.truth.labels import Label  # noqa: E402

# The SDK resumes a cut stream after the server's retry interval (else after 1 s): keep it short.
RETRY_INTERVAL_MS = 100
APP_RETRY_DELAY_S = 1.0  # family a: each failing client retries once, 1 s later
TEST_GAP_S = 0.02  # family c: the next test starts ~20 ms after the last one ended
AGENT_GAP_S = 0.05  # family d: the agent re-calls within 100 ms of the isError
LOOKALIKE_GAP_S = 0.2  # family d: the independent session comes later


# ---------------------------------------------------------------- fault rules


def fail_with_503(tool: str, times: int) -> dict[str, Any]:
    return {"match": {"rpc_method": "tools/call", "tool": tool}, "action": {"status": 503}, "times": times}


# One progress notification passes, then the connection drops before the result: the tool has started.
CUT_PROGRESS = {"match": {"rpc_method": "tools/call", "tool": "progress"}, "action": {"cut_after_events": 1}}
# The SDK then resumes with GET + Last-Event-ID; the event store would replay the result, so refuse
# every GET until the call has failed for the client (the standalone GET stream is already open).
REFUSE_RESUME = {"match": {"http_method": "GET"}, "action": {"status": 503}, "times": None}


async def wait_for_open_get(control: Control, timeout: float = 5.0) -> None:
    """Wait until the session's standalone GET stream is open, so that REFUSE_RESUME cannot hit it."""
    with anyio.fail_after(timeout):
        while not any(e["http_method"] == "GET" and e["status"] == 200 for e in control.log()):
            await anyio.sleep(0.02)


def progress_was_cut_midway(control: Control) -> bool:
    """The server's side of the cut: the progress stream reached the client with an event, then broke,
    so the tool had started (it may have run): the truth behind the rerun's `reexecutes`."""
    cut = [e for e in control.log() if e["tool"] == "progress" and e["cut"]]
    return len(cut) == 1 and len(cut[0]["events_sent"]) >= 1


# ---------------------------------------------------------------- the families


async def concurrent_lookalikes(url: str, control: Control, plan: Plan) -> list[Attempt]:
    """Family a: every client's call looks like every other's; only a client's own second call is a retry."""
    attempts: list[Attempt] = []
    for round_no in range(1, plan.rounds + 1):
        control.reset()
        control.faults(fail_with_503("echo", plan.failures))
        this_round = await _concurrent_round(url, plan, round_no)
        failed = [a for a in this_round if a.label.attempt == 1 and a.outcome == "error"]
        expect(len(failed) == plan.failures, f"round {round_no}: {plan.failures} first calls should fail", this_round)
        expect(all(a.outcome == "ok" for a in this_round if a.label.attempt == 2), "every retry succeeds", this_round)
        attempts += this_round
    return attempts


async def _concurrent_round(url: str, plan: Plan, round_no: int) -> list[Attempt]:
    arguments = {"text": "the same question"}
    attempts: list[Attempt] = []
    ready = 0
    go = anyio.Event()

    async def client(index: int) -> None:
        nonlocal ready
        request = f"a/r{round_no}/client{index:02d}"
        async with open_session(url) as session:
            ready += 1
            if ready == plan.clients:
                go.set()  # every session is up: all call at the same moment
            await go.wait()
            first = await call(session, "echo", arguments, Label(request, 1, "first"))
            attempts.append(first)
            if first.outcome == "error":
                await anyio.sleep(APP_RETRY_DELAY_S)
                # echo is readOnlyHint: running it again is no duplicate execution
                retry = Label(request, 2, "retry", origin="app-retry")
                attempts.append(await call(session, "echo", arguments, retry))

    async with anyio.create_task_group() as tg:
        for index in range(1, plan.clients + 1):
            tg.start_soon(client, index)
    return attempts


async def app_loop_rerun(url: str, control: Control, plan: Plan) -> list[Attempt]:
    """Family b: the write succeeded and is re-run (a duplicate execution, no retry); the cut call is retried."""
    attempts: list[Attempt] = []
    for run in range(1, plan.runs + 1):
        write_args = {"key": f"order-{run}", "value": "paid"}
        progress_args = {"steps": 3, "delay_ms": 20 + run}  # other arguments per run: runs do not look alike
        write, progress = f"b/r{run}/write", f"b/r{run}/progress"
        control.reset()
        async with open_session(url) as session:
            attempts.append(await call(session, "write_record", write_args, Label(write, 1, "first")))
            await wait_for_open_get(control)
            control.faults(CUT_PROGRESS, REFUSE_RESUME)
            first = Label(progress, 1, "first")
            attempts.append(await call(session, "progress", progress_args, first, with_progress=True))
            expect(progress_was_cut_midway(control), f"run {run}: the progress stream is cut after an event", attempts)
            control.reset()
        # The application starts over on a fresh session. The write ran (it answered); the progress
        # call may have run (a progress event came out before the cut): both execute again.
        async with open_session(url) as session:
            rerun = Label(write, 2, "rerun", reexecutes=True)
            attempts.append(await call(session, "write_record", write_args, rerun))
            retry = Label(progress, 2, "retry", origin="app-retry", reexecutes=True)
            attempts.append(await call(session, "progress", progress_args, retry, with_progress=True))
        outcomes = [a.outcome for a in attempts[-4:]]
        expect(outcomes == ["ok", "error", "ok", "ok"], f"run {run}: write ok, progress cut, rerun ok", attempts[-4:])
    return attempts


async def test_suite_lookalike(url: str, control: Control, plan: Plan) -> list[Attempt]:
    """Family c: two tests send the identical request; the second is a new request, not a retry."""
    attempts: list[Attempt] = []
    for run in range(1, plan.runs + 1):
        arguments = {"text": f"suite case {run}"}
        control.reset()
        control.faults(fail_with_503("echo", 1))
        async with open_session(url) as session:  # test 1: fails, and the test ends
            attempts.append(await call(session, "echo", arguments, Label(f"c/r{run}/test1", 1, "first")))
        await anyio.sleep(TEST_GAP_S)
        async with open_session(url) as session:  # test 2: its own request, identical on the wire
            attempts.append(await call(session, "echo", arguments, Label(f"c/r{run}/test2", 1, "independent")))
        outcomes = [a.outcome for a in attempts[-2:]]
        expect(outcomes == ["error", "ok"], f"run {run}: test 1 fails, test 2 succeeds", attempts[-2:])
    return attempts


async def agent_recall(url: str, control: Control, plan: Plan) -> list[Attempt]:
    """Family d: changed arguments right after isError in the same session is an agent's retry."""
    attempts: list[Attempt] = []
    control.reset()
    for run in range(1, plan.runs + 1):
        request = f"d/r{run}/lookup"
        async with open_session(url) as session:
            attempts.append(await call(session, "tool_error", {"message": f"order {run}?"}, Label(request, 1, "first")))
            await anyio.sleep(AGENT_GAP_S)
            retry = Label(request, 2, "retry", origin="agent-retry")  # other arguments: nothing runs twice
            attempts.append(await call(session, "tool_error", {"message": f"order {run} in the archive?"}, retry))
        await anyio.sleep(LOOKALIKE_GAP_S)
        async with open_session(url) as session:  # a later conversation asks something else
            other = Label(f"d/r{run}/other", 1, "independent")
            attempts.append(await call(session, "tool_error", {"message": f"invoice {run}?"}, other))
        outcomes = [a.outcome for a in attempts[-3:]]
        expect(outcomes == ["tool-error"] * 3, f"run {run}: every call answers isError", attempts[-3:])
    return attempts


Family = Callable[[str, Control, Plan], Awaitable[list[Attempt]]]
SDK_FAMILIES: dict[str, Family] = {
    "a": concurrent_lookalikes,
    "b": app_loop_rerun,
    "c": test_suite_lookalike,
    "d": agent_recall,
}


# ---------------------------------------------------------------- recording


def on_test_server(family: Family) -> RecordFamily:
    """A family of the official SDK's client against the test server (tests/support/mcp_server.py)."""

    def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
        with start_server("stateful", retry_interval_ms=RETRY_INTERVAL_MS) as server:
            control = Control(server.port)
            with recording(f"http://127.0.0.1:{server.port}", name, out) as url:
                attempts = anyio.run(family, f"{url}/mcp", control, plan)
            server.assert_alive()
        return [a.record() for a in attempts]

    return record_family


# A family records out/<name>.flows through real processes and returns what each client saw (for
# corpus.json); the labels travel in the capture. Ecosystem families live in their own modules.
RecordFamily = Callable[[str, Path, Plan], list[dict[str, Any]]]
FAMILIES: dict[str, RecordFamily] = {
    **{name: on_test_server(family) for name, family in SDK_FAMILIES.items()},
    "e": family_agent.record_family,
    "f": family_bridge.record_family,
    "g": family_gateway.record_family,
    "h": family_oauth.record_family,
    "p": family_process.record_family,
    "q": family_holdout.record_family,
}


def record(out: Path, plan: Plan, families: list[str]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.flows"):
        stale.unlink()  # the scorer reads every capture in the directory, and each recording directory
    for stale_directory in (p for p in out.iterdir() if p.is_dir()):
        shutil.rmtree(stale_directory)
    corpus: dict[str, Any] = {"plan": plan.__dict__, "families": {}}
    for name in families:
        started = time.monotonic()
        attempts = FAMILIES[name](name, out, plan)
        corpus["families"][name] = {
            "capture": f"{name}.flows",
            "seconds": round(time.monotonic() - started, 2),
            "attempts": attempts,
        }
        print(f"recorded {name}.flows: {len(attempts)} labelled tools/call, {time.monotonic() - started:.1f} s")
    (out / "corpus.json").write_text(json.dumps(corpus, indent=1) + "\n")
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="record_corpus.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for <family>.flows and corpus.json")
    parser.add_argument("--quick", action="store_true", help="a reduced corpus (the pytest test's)")
    parser.add_argument("--only", nargs="+", choices=sorted(FAMILIES), default=sorted(FAMILIES))
    args = parser.parse_args(argv)
    plan = Plan.quick() if args.quick else Plan()
    started = time.monotonic()
    try:
        record(args.out, plan, args.only)
    except ScenarioFailed as exc:
        print(f"scenario did not behave as labelled: {exc}", file=sys.stderr)
        return 1
    print(f"corpus in {args.out} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
