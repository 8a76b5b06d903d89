"""The client-side findings (issue 22, part 2; analyzer/across/patterns/clients.py), each on a capture of real
processes on 127.0.0.1 where it fires, and on a look-alike where it must not.

- auth_refresh_loop: the TypeScript SDK's OAuth client against the Python SDK's OAuth server, whose resource server
  is then made to refuse every token (tests/support/oauth_loop_server.py, oauth_loop_client.mjs): 401, refresh,
  401, the app reconnects, again. Look-alike: the truth corpus's OAuth run (an expired token refreshed, a revoked
  one re-authorized, each then answered 200).
- unusable_sse_endpoint: a legacy (2024-11-05) server behind nginx under /tools/: its endpoint event names
  /messages/, which nginx answers 404; the Python SDK client hangs until its deadline. Look-alike: the same server
  and client without the prefix.
- lost_session_affinity: nginx balancing two stateful servers without stickiness (as tests/e2e/test_lost_affinity.py).
  Look-alike: sample_captures/py-session-expired.flows (a session that worked, then 404).
- stdio_server_crash: the Python SDK stdio client and server through ``record --stdio``, the server killing
  itself mid-call. Look-alikes: a session the client ends cleanly; a client that closes the server's stdin with
  a request in flight.

Labels come from what each test set up and what the clients reported, never from the analyzer's output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.model.contract import FindingRecord
from tests.e2e.test_stdio_record import run_client, server_command, wrapped
from tests.support.processes import REPO_ROOT, child_env, run_py_client, start_server, stop_process, wait_listening
from tests.support.proxy import free_port, start_mitmdump
from tests.truth.family_gateway import running_nginx
from tests.truth.family_process import BALANCER_CONF

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("node") is None or shutil.which("nginx") is None, reason="needs node and nginx"),
]

OURS = {"auth_refresh_loop", "unusable_sse_endpoint", "lost_session_affinity", "stdio_server_crash"}
SAMPLES = REPO_ROOT / "sample_captures"
LOOP_CLIENT = REPO_ROOT / "tests" / "support" / "oauth_loop_client.mjs"
RECONNECTS = 3  # the app's reconnections once every token is refused: each one a round, after the first


def findings(capture: Path, rule: str | None = None) -> list[FindingRecord]:
    return [f for f in analyze([capture]).findings if f["rule"] in OURS and rule in (None, f["rule"])]


# --------------------------------------------------------------------------------------------------------------
# An auth refresh loop


@pytest.fixture(scope="module")
def auth_loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The loop's capture and what the app reported."""
    tmp = tmp_path_factory.mktemp("auth-loop")
    upstream = free_port()
    recorder = start_mitmdump(f"reverse:http://127.0.0.1:{upstream}", tmp, name="loop")
    log = tmp / "server.log"
    with log.open("wb") as stderr:
        argv = [sys.executable, "-m", "tests.support.oauth_loop_server", "--port", str(upstream)]
        server = subprocess.Popen([*argv, "--public-url", recorder.url], stderr=stderr, env=child_env(), cwd=REPO_ROOT)
    try:
        wait_listening(server, upstream, log, 20, "the oauth loop server")
        command = [
            "node",
            str(LOOP_CLIENT),
            "--url",
            f"{recorder.url}/mcp",
            "--control",
            f"http://127.0.0.1:{upstream}",
        ]
        done = subprocess.run(
            [*command, "--attempts", str(RECONNECTS)], capture_output=True, text=True, timeout=60, check=False
        )
    finally:
        stop_process(server)
        recorder.stop()
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["fatal"] is None, report
    return recorder.flow_file, report


@pytest.fixture(scope="module")
def oauth_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.truth.family_oauth import record_family
    from tests.truth.harness import Plan

    out = tmp_path_factory.mktemp("oauth-run")
    record_family("oauth", out, Plan(runs=1))  # checks itself that each 401 was followed by a 200
    return out / "oauth.flows"


def test_an_auth_refresh_loop_is_found_with_its_rounds(auth_loop: tuple[Path, dict[str, Any]]) -> None:
    capture, report = auth_loop
    outcomes = [(a["what"], a["outcome"]) for a in report["attempts"]]
    assert outcomes[0] == ("echo before", "ok") and all(outcome == "error" for _, outcome in outcomes[1:]), outcomes
    # Set up: the call on the first transport and each reconnection: 401, a refresh, 401.
    rounds = 1 + RECONNECTS
    assert report["refreshes"] == rounds
    [loop] = findings(capture, "auth_refresh_loop")
    assert f"{rounds} rounds of 401, new token, 401: {rounds} token request(s)" in loop["evidence"][1], loop
    assert f"HTTP 200 ×{rounds}" in loop["evidence"][1]
    assert f": {2 * rounds} requests answered 401 in " in loop["evidence"][0], loop
    assert f"{2 * rounds} of the {2 * rounds} requests answered 401 carried an Authorization header" in loop["evidence"]
    assert len(loop["calls"]) == 2 * rounds and loop["end"] > loop["start"]


def test_a_refreshed_or_reauthorized_token_that_works_is_no_loop(oauth_run: Path) -> None:
    steps = [s["step"] for s in analyze([oauth_run]).auth_steps]
    assert steps.count("token exchange") >= 3, steps  # the test sees refreshes and re-authorizations
    assert findings(oauth_run) == []


# --------------------------------------------------------------------------------------------------------------
# A client stuck on an unusable HTTP+SSE endpoint

PREFIX_CONF = """
daemon off;
worker_processes 1;
error_log {tmp}/error.log;
pid {tmp}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    server {{
        listen 127.0.0.1:{port};
        location /tools/ {{
            proxy_pass http://127.0.0.1:{upstream}/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
        location / {{
            return 404;
        }}
    }}
}}
"""
HANG_S = 3.0  # the client's overall deadline: how long it waits for an answer that cannot come
LEGACY: dict[str, Any] = {"transport": "sse", "mode": "legacy"}


@pytest.fixture(scope="module")
def legacy_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any], Path]]:
    """(behind the prefix, what the client saw, direct): the same legacy server and Python SDK client, once
    through nginx under /tools/ (the server announces /messages/, without the prefix), once directly."""
    tmp = tmp_path_factory.mktemp("legacy")
    steps = [{"op": "list_tools"}]
    with start_server("legacy-sse") as server:
        port, workdir = free_port(), tmp / "nginx"
        workdir.mkdir()
        with running_nginx(PREFIX_CONF.format(tmp=workdir, port=port, upstream=server.port), port, workdir):
            behind = start_mitmdump(f"reverse:http://127.0.0.1:{port}", tmp, name="prefixed")
            direct = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp, name="direct")
            try:
                with ThreadPoolExecutor() as pool:  # at once: the hang need not wait for the other
                    hanging = pool.submit(run_py_client, f"{behind.url}/tools/sse", steps, **LEGACY, timeout=HANG_S)
                    working = pool.submit(run_py_client, f"{direct.url}/sse", steps, **LEGACY, timeout=20)
                    hung, worked = hanging.result(), working.result()
            finally:
                behind.stop()
                direct.stop()
    assert worked["fatal"] is None and [s["ok"] for s in worked["steps"]] == [True], worked
    yield behind.flow_file, hung, direct.flow_file


def test_a_client_hanging_on_an_endpoint_without_the_prefix_is_found(
    legacy_sessions: tuple[Path, dict[str, Any], Path],
) -> None:
    capture, hung, _ = legacy_sessions
    assert hung["fatal"]["type"] == "TimeoutError" and hung["steps"] == [], hung  # it never got to list tools
    [stuck] = findings(capture, "unusable_sse_endpoint")
    first, streams, posts, life = stuck["evidence"][:4]
    assert (
        first.startswith("GET http://127.0.0.1:")
        and "/tools/sse (HTTP 200) announced the endpoint '/messages/?session_id=" in first
    )
    assert "its path /messages/ is outside the stream's /tools/, and every POST to it was answered 404" in first
    assert streams.startswith("1 stream(s)") and posts == "1 POST(s) to their sessions: HTTP 404 ×1"
    assert "ended client-abort" in life and len(stuck["calls"]) == 1
    assert stuck["end"] - stuck["start"] >= HANG_S - 1  # the stream stayed open while the client waited


def test_a_legacy_session_whose_posts_are_accepted_is_not_stuck(
    legacy_sessions: tuple[Path, dict[str, Any], Path],
) -> None:
    _, _, direct = legacy_sessions
    assert findings(direct) == []
    assert findings(SAMPLES / "py-2024-legacy-sse.flows") == []


# --------------------------------------------------------------------------------------------------------------
# Lost session affinity

STEPS = [{"op": "list_tools"}, {"op": "call", "tool": "echo", "args": {"text": "hi"}}]


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("balanced")
    with start_server("stateful") as a, start_server("stateful") as b:
        port, workdir = free_port(), tmp / "nginx"
        workdir.mkdir()
        with running_nginx(BALANCER_CONF.format(tmp=workdir, port=port, a=a.port, b=b.port), port, workdir):
            recorder = start_mitmdump(f"reverse:http://127.0.0.1:{port}", tmp, name="balanced")
            try:
                # One after the other: nginx's round robin then sends each client's requests to A and B in turn.
                seen = [run_py_client(f"{recorder.url}/mcp", STEPS, mode="legacy", timeout=20) for _ in range(4)]
            finally:
                recorder.stop()
    return recorder.flow_file, seen


def test_sessions_sent_to_another_instance_are_found(balanced: tuple[Path, list[dict[str, Any]]]) -> None:
    capture, seen = balanced
    # Set up: round robin without stickiness; some runs had a step fail (a 404 on their session), others none.
    hurt = [run for run in seen if not all(step["ok"] for step in run["steps"])]
    assert 0 < len(hurt) < len(seen), seen
    [lost] = findings(capture, "lost_session_affinity")
    calls = {c["call_id"]: c for c in analyze([capture]).calls}
    assert lost["calls"] and all(calls[c]["http_status"] == 404 for c in lost["calls"]), lost
    sessions = {calls[c]["session_id"] for c in lost["calls"]}
    assert (
        f"{len(sessions)} session(s) had {len(lost['calls'])} request(s) answered 404 within 10 s"
        in lost["evidence"][0]
    )
    assert lost["evidence"][1].startswith("at least ") and "load balancer without stickiness" in lost["summary"]


def test_a_session_that_expired_is_no_lost_affinity() -> None:
    expired = SAMPLES / "py-session-expired.flows"
    assert any(c["http_status"] == 404 for c in analyze([expired]).calls)  # the look-alike has its 404
    assert findings(expired) == []


# --------------------------------------------------------------------------------------------------------------
# A stdio server that died mid-call


@pytest.fixture(scope="module")
def stdio_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("stdio")
    runs = {
        "crash": [
            {"op": "call", "tool": "echo", "args": {"text": "a"}},
            {"op": "call", "tool": "crash", "args": {"how": "signal"}},
        ],
        "clean": [{"op": "call", "tool": "echo", "args": {"text": "a"}}, {"op": "list_tools"}],
    }
    with ThreadPoolExecutor() as pool:  # independent processes: at once
        started = {
            name: pool.submit(run_client, "py", wrapped(tmp / f"{name}.stdio.jsonl", server_command("py")), steps)
            for name, steps in runs.items()
        }
        return {name: (tmp / f"{name}.stdio.jsonl", future.result()) for name, future in started.items()}


def test_a_stdio_server_killed_mid_call_is_found(stdio_runs: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    capture, seen = stdio_runs["crash"]
    assert [s["ok"] for s in seen["steps"]] == [True, False], seen  # echo answered, crash never
    [crash] = findings(capture, "stdio_server_crash")
    assert crash["evidence"][0].endswith(": the server was killed by SIGKILL"), crash
    assert crash["evidence"][1].startswith("1 request(s) in flight got no answer: tools/call crash (id ")
    assert crash["evidence"][2].endswith("'crash: dying by signal'")
    assert len(crash["calls"]) == 1 and crash["title"].startswith("stdio server died mid-call: was killed by SIGKILL")
    [sample] = findings(SAMPLES / "stdio-faults.stdio.jsonl", "stdio_server_crash")  # the recorded sample: exit 3
    assert "the server exited with code 3" in sample["evidence"][0] and "tools/call crash" in sample["evidence"][1]


def test_a_clean_stdio_shutdown_is_no_crash(stdio_runs: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    capture, seen = stdio_runs["clean"]
    assert seen["fatal"] is None and all(s["ok"] for s in seen["steps"]), seen
    assert findings(capture) == []


def test_a_client_closing_stdin_with_a_request_in_flight_is_no_crash(tmp_path: Path) -> None:
    # The server reads a request, waits for the end of its stdin and exits 1 without answering: the client's close
    # came first.
    server = "import sys\nsys.stdin.readline()\nsys.stdin.read()\nsys.exit(1)\n"
    capture = tmp_path / "closed.stdio.jsonl"
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}
    done = subprocess.run(
        wrapped(capture, [sys.executable, "-c", server]),
        input=json.dumps(request).encode() + b"\n",
        capture_output=True,
        env=child_env(),
        cwd=REPO_ROOT,
        timeout=30,
        check=False,
    )
    assert done.stdout == b""  # no answer came
    [call] = analyze([capture]).calls
    assert call["http_status"] is None and call["outcome"] == "NO_RESPONSE"
    assert findings(capture) == []


# --------------------------------------------------------------------------------------------------------------
# The samples: only the stdio crash is one of these patterns


def test_no_client_finding_on_the_samples_but_the_stdio_crash() -> None:
    fired = {path.name: [f["rule"] for f in findings(path)] for path in sorted(SAMPLES.glob("*.flows"))}
    assert fired and all(rules == [] for rules in fired.values()), fired
    assert [f["rule"] for f in findings(SAMPLES / "stdio-faults.stdio.jsonl")] == ["stdio_server_crash"]
