"""The analysis of stdio captures (issue 13, part 2): real stdio servers recorded by ``record --stdio``, driven by
the official Python and TypeScript SDK stdio clients, then analyzed by the commands people run.

Labels come from what the clients saw (a step ``ok`` or not, a crash) and from what the test servers are written
to do (tests/stdio_servers/py_server.py, tests/clients/ts/stdio_server.mjs): ``swallow`` logs an exception and
returns an empty success, ``chatty`` logs an info line and succeeds (the look-alike), ``log_to_stdout`` prints on
the protocol's channel, ``crash`` dies mid-call. Never from the analyzer's own output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_stdio_record import run_client, server_command, wrapped
from tests.support.processes import REPO_ROOT, child_env

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).with_name("mcp-blackbox"))
SUCCESS = {"SUCCESS", "TOOL_SUCCESS"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, env=child_env(), cwd=REPO_ROOT)


def export(*captures: Path) -> dict[str, Any]:
    done = cli("export", *map(str, captures), "--format", "json", "-o", "-")
    assert done.returncode == 0, done.stderr
    exported: dict[str, Any] = json.loads(done.stdout)
    return exported


def tool_calls(exported: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in exported["calls"] if c["method"] == "tools/call"]


def record_session(client: str, server: str, steps: list[dict[str, Any]], capture: Path, *extra: str) -> dict[str, Any]:
    return run_client(client, wrapped(capture, server_command(server, *extra)), steps)


def stderr_text(call: dict[str, Any]) -> str:
    return "\n".join(line["text"] for line in call["stderr"])


# The calls that log on stderr are followed by a pause, as an application's calls are (a model thinks between
# them): the wrapper dates a stderr line when its thread reads it, which on a loaded machine can be a few ms
# after the answer the server wrote it before, and a line read once the next request is in flight is that
# request's (docs/ARCHITECTURE.md, "The analysis of a stdio capture"). Back-to-back calls within that lag are
# the documented limit, not what this test labels.
PAUSE: dict[str, Any] = {"op": "pause", "seconds": 0.1}
SESSION_STEPS: list[dict[str, Any]] = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "hello"}},
    {"op": "call", "tool": "chatty", "args": {"text": "look-alike"}},
    PAUSE,
    {"op": "call", "tool": "swallow"},
    PAUSE,
    {"op": "call", "tool": "echo", "args": {"text": "after"}},
    {"op": "call", "tool": "crash", "args": {"how": "exit"}},
]


@pytest.mark.parametrize("server", ["py", "ts"])
@pytest.mark.parametrize("client", ["py", "ts"])
def test_sdk_sessions_get_verdicts_from_what_the_clients_saw(client: str, server: str, tmp_path: Path) -> None:
    capture = tmp_path / "session.stdio.jsonl"
    seen = record_session(client, server, SESSION_STEPS, capture)
    steps = seen["steps"]
    assert [s["ok"] for s in steps] == [True, True, True, True, True, False], seen  # the crash: no answer
    exported = export(capture)
    calls = tool_calls(exported)
    assert [c["tool"] for c in calls] == [s["tool"] for s in SESSION_STEPS if s["op"] == "call"]
    scope = calls[0]["scope"]
    assert scope.startswith("stdio:session.stdio.jsonl:") and all(c["scope"] == scope for c in exported["calls"])
    assert all(c["carrier"] == "stdio" and c["endpoint"].startswith("stdio://") for c in exported["calls"])
    assert exported["calls"][0]["client"]["unit"] == scope

    for call, step in zip(calls, [s for s in steps if s["op"] == "call"], strict=True):
        if step["ok"]:  # the client got a result: success, whatever the stderr said
            assert call["outcome"] in SUCCESS, call
        else:
            assert call["outcome"] == "NO_RESPONSE", call
            assert (
                call["ending"]["ended_by"] == "server-cut"
                and call["ending"]["detail"] == "the server exited with code 3"
            )
            assert "exited with code 3" in call["reason"]
    echo, chatty, swallow, after, crash = calls
    # The swallowed exception is flagged; the clean calls, one of them logging an info line, are not.
    assert "STDERR_DURING_CALL" in swallow["flags"], swallow  # (the TypeScript one returns no content: EMPTY_RESULT)
    assert "exception" in swallow["evidence"][-1]
    assert "FileNotFoundError" in stderr_text(swallow) or "ENOENT" in stderr_text(swallow)
    assert "STDERR_DURING_CALL" not in chatty["flags"] and chatty["flags"] == []
    assert [line["text"] for line in chatty["stderr"]] == [
        f"{'INFO' if server == 'py' else 'info'} chatty: echoing 10 characters, no errors"
    ], "its log line is attached to it"
    assert echo["stderr"] == [] and after["stderr"] == [] and echo["flags"] == after["flags"] == []
    assert "crash: dying by exit" in stderr_text(crash)
    assert all(line["t"] >= swallow["t_start"] for line in swallow["stderr"])

    # check: the crash fails the gate by default; the swallowed exception when named.
    done = cli("check", str(capture))
    assert done.returncode == 1 and crash["call_id"] in done.stdout and swallow["call_id"] not in done.stdout
    done = cli("check", str(capture), "--fail-on", "stderr_during_call")
    assert done.returncode == 1 and swallow["call_id"] in done.stdout and chatty["call_id"] not in done.stdout, done


@pytest.mark.parametrize("client", ["py", "ts"])
def test_a_server_killed_mid_call_is_no_response(client: str, tmp_path: Path) -> None:
    capture = tmp_path / "killed.stdio.jsonl"
    steps = [
        {"op": "call", "tool": "echo", "args": {"text": "x"}},
        {"op": "call", "tool": "crash", "args": {"how": "signal"}},
    ]
    seen = record_session(client, "py", steps, capture)
    assert [s["ok"] for s in seen["steps"]] == [True, False]
    echo, crash = tool_calls(export(capture))
    assert echo["outcome"] == "TOOL_SUCCESS"
    assert crash["outcome"] == "NO_RESPONSE" and crash["ending"]["detail"] == "the server was killed by SIGKILL"


@pytest.mark.parametrize("client", ["py", "ts"])
def test_a_log_line_on_stdout_breaks_the_call_it_was_written_in(client: str, tmp_path: Path) -> None:
    capture = tmp_path / "stdout-log.stdio.jsonl"
    steps = [
        {"op": "call", "tool": "echo", "args": {"text": "before"}},
        {"op": "call", "tool": "log_to_stdout"},
        {"op": "call", "tool": "echo", "args": {"text": "after"}},
    ]
    seen = record_session(client, "ts", steps, capture)
    assert [s["ok"] for s in seen["steps"]] == [True, True, True], "both SDK clients skip the bad line"
    exported = export(capture)
    before, logged, after = tool_calls(exported)
    assert before["outcome"] == after["outcome"] == "TOOL_SUCCESS"
    assert logged["outcome"] == "MALFORMED_JSON" and logged["layer"] == "protocol", logged
    assert any("handling log_to_stdout" in line for line in logged["evidence"])
    assert any("the answer (result) came" in line for line in logged["evidence"]), "the answer after it is said"
    assert "handling log_to_stdout" in logged["reason"], "the gate's line names the stray line"
    assert exported["stream_events"] == []


def test_a_greeting_on_stdout_breaks_the_negotiation_it_was_written_in(tmp_path: Path) -> None:
    # The SDK client sends its first request as soon as the server starts: the greeting comes while it waits
    # (the Python SDK client logs "Failed to parse JSONRPC message from server" and goes on).
    capture = tmp_path / "banner.stdio.jsonl"
    seen = record_session("py", "py", [{"op": "call", "tool": "echo", "args": {"text": "hi"}}], capture, "--banner")
    assert seen["steps"][0]["ok"]
    exported = export(capture)
    first, *rest = exported["calls"]
    assert first["method"] in ("server/discover", "initialize") and first["outcome"] == "MALFORMED_JSON", first
    assert any("stdio-testbed 1.0.0 starting" in line for line in first["evidence"])
    assert {c["outcome"] for c in rest} <= SUCCESS and exported["stream_events"] == []


# --------------------------------------------------------------------------------------------------
# Raw servers: what no SDK does on purpose


def raw_session(
    tmp_path: Path, server_code: str, client_lines: list[bytes], *, pause: float = 0.0, read_between: int = 0
) -> Path:
    """The wrapper runs ``python -c server_code``; the test writes ``client_lines`` on its stdin (``pause``
    seconds apart, after reading ``read_between`` lines of its stdout: what the server wrote is in the capture
    before the next line is sent, however slowly a loaded machine starts it) and closes it."""
    capture = tmp_path / "raw.stdio.jsonl"
    proc = subprocess.Popen(
        wrapped(capture, [sys.executable, "-c", server_code]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        cwd=REPO_ROOT,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    for n, line in enumerate(client_lines):
        for _ in range(read_between if n else 0):
            proc.stdout.readline()
        if n and pause:
            time.sleep(pause)
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()
    proc.stdin.close()
    proc.stdin = None  # closed: communicate() must not flush it
    proc.communicate(timeout=30)
    return capture


def request(n: int, tool: str) -> bytes:
    message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    return json.dumps(message).encode()


def test_a_bad_line_with_two_calls_waiting_goes_to_the_oldest_and_says_so(tmp_path: Path) -> None:
    # Reads two requests, writes a line that is not JSON, then answers both.
    server = (
        "import sys, json\n"
        "a = json.loads(sys.stdin.readline()); b = json.loads(sys.stdin.readline())\n"
        "print('oops, not JSON', flush=True)\n"
        "for m in (a, b):\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'content': []}}), flush=True)\n"
        "sys.stdin.read()\n"
    )
    capture = raw_session(tmp_path, server, [request(1, "first"), request(2, "second")])
    first, second = tool_calls(export(capture))
    assert first["outcome"] == "MALFORMED_JSON", first
    assert any("2 requests were waiting" in line and "the others: 2" in line for line in first["evidence"])
    assert second["outcome"] == "TOOL_SUCCESS" and second["flags"] == ["EMPTY_RESULT"]


def test_a_bad_line_while_no_call_waits_is_an_event_of_the_session(tmp_path: Path) -> None:
    # Answers the first request, then writes a line that is not JSON; the second request comes 0.5 s after both.
    server = (
        "import sys, json\n"
        "for n, line in enumerate(sys.stdin):\n"
        "    m = json.loads(line)\n"
        "    ok = {'content': [{'type': 'text', 'text': 'ok'}]}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': ok}))\n"
        "    if n == 0:\n"
        "        print('between calls')\n"
        "    sys.stdout.flush()\n"
    )
    capture = raw_session(tmp_path, server, [request(1, "a"), request(2, "b")], pause=0.5, read_between=2)
    exported = export(capture)
    assert [c["outcome"] for c in tool_calls(exported)] == ["TOOL_SUCCESS", "TOOL_SUCCESS"]
    [event] = exported["stream_events"]
    assert event["method"] == "STDOUT" and "between calls" in event["what"]


def test_the_client_closing_stdin_before_the_answer_is_no_response(tmp_path: Path) -> None:
    # Reads a request, waits for the end of its stdin, and exits without an answer.
    server = "import sys\nsys.stdin.readline()\nsys.stdin.read()\nsys.exit(0)\n"
    capture = raw_session(tmp_path, server, [request(7, "slow")])
    [call] = tool_calls(export(capture))
    assert call["outcome"] == "NO_RESPONSE"
    assert call["ending"]["ended_by"] == "client-close", call
    assert "the client closed the server's stdin" in call["reason"]


def test_stdio_and_flow_captures_in_one_directory(tmp_path: Path) -> None:
    directory = tmp_path / "caps"
    directory.mkdir()
    seen = run_client("py", wrapped(str(directory) + os.sep, server_command("py")), SESSION_STEPS[:3])
    assert all(s["ok"] for s in seen["steps"])
    sample = REPO_ROOT / "sample_captures" / "py-2025-session-tools.flows"
    (directory / sample.name).write_bytes(sample.read_bytes())
    exported = export(directory)
    carriers = {c["carrier"] for c in exported["calls"]}
    assert carriers == {"http", "stdio"}
    assert exported["skipped"] == [] and exported["summary"]["read_problems"] == []


def test_summary_diff_and_otlp_carry_stdio_calls(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    before, after = tmp_path / "before.stdio.jsonl", tmp_path / "after.stdio.jsonl"
    steps = [{"op": "call", "tool": "echo", "args": {"text": "x"}}, {"op": "call", "tool": "swallow"}, PAUSE]
    assert all(s["ok"] for s in record_session("py", "py", steps, before)["steps"])
    steps = [*steps, {"op": "call", "tool": "crash", "args": {"how": "exit"}}]
    assert [s["ok"] for s in record_session("py", "py", steps, after)["steps"]] == [True, True, False]

    done = cli("summary", str(after))
    assert done.returncode == 0 and "swallow" in done.stdout and "[STDERR_DURING_CALL]" in done.stdout, done.stdout
    done = cli("summary", "--format", "markdown", str(after))
    assert done.returncode == 0, done.stderr
    assert "written to the server's stdin" in done.stdout and "the server exited with code 3" in done.stdout

    done = cli("diff", str(before), str(after), "--format", "json")
    compared = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert [c["after"]["outcome"] for c in compared["new_failures"]] == ["NO_RESPONSE"], compared["new_failures"]

    done = cli("export", str(after), "--format", "otlp", "-o", "-")
    assert done.returncode == 0, done.stderr
    spans = [span for rs in json.loads(done.stdout)["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    by_name = {span["name"]: span for span in spans}
    swallow, crash = by_name["tools/call swallow"], by_name["tools/call crash"]
    attributes = {a["key"]: next(iter(a["value"].values())) for a in swallow["attributes"]}
    assert attributes["network.transport"] == "pipe" and "http.request.method" not in attributes
    assert "STDERR_DURING_CALL" in str(attributes["mcp.blackbox.flags"])
    assert any(e["name"] == "mcp.blackbox.stderr" for e in swallow["events"])
    assert crash["status"]["code"] == "STATUS_CODE_ERROR" or crash["status"].get("code") == 2


# --------------------------------------------------------------------------------------------------
# A bridge between stdio and HTTP, recorded on both sides


MCP_REMOTE = REPO_ROOT / "tests" / "truth" / "peers" / "node" / "node_modules" / "mcp-remote" / "dist" / "proxy.js"


def test_a_bridge_recorded_on_both_sides_is_one_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python SDK stdio client runs mcp-remote (stdio to Streamable HTTP) through record --stdio; mcp-remote
    speaks HTTP to the test server through the recording mitmdump. One report holds both sides."""
    from mcp_blackbox.analyzer.review.report import build_report
    from tests.report.layout import column
    from tests.support.processes import start_server
    from tests.support.proxy import start_mitmdump

    if shutil.which("node") is None or not MCP_REMOTE.exists():
        pytest.fail(f"needs node and {MCP_REMOTE}: npm ci in tests/truth/peers/node (make test)")
    monkeypatch.setenv("MCP_REMOTE_CONFIG_DIR", str(tmp_path / "mcp-remote"))  # its lock and auth files
    capture = tmp_path / "bridge.stdio.jsonl"
    steps = [
        {"op": "list_tools"},
        {"op": "call", "tool": "echo", "args": {"text": "across the bridge"}},
        {"op": "call", "tool": "tool_error", "args": {"message": "tool says no"}},
    ]
    with start_server("stateful") as server:
        proxy = start_mitmdump(f"reverse:{server.url('')}", tmp_path, name="bridge")
        try:
            seen = run_client(
                "py", wrapped(capture, [shutil.which("node") or "node", str(MCP_REMOTE), proxy.url + "/mcp"]), steps
            )
        finally:
            assert proxy.stop() == 0, proxy.log()
    assert seen["fatal"] is None and all(s["ok"] for s in seen["steps"]), seen
    assert [s["result"]["isError"] for s in seen["steps"][1:]] == [False, True], "what the client saw"

    exported = export(capture, proxy.flow_file)
    by_carrier: dict[str, list[tuple[str, str]]] = {"stdio": [], "http": []}
    for call in tool_calls(exported):
        by_carrier[call["carrier"]].append((call["tool"], call["outcome"]))
    expected = [("echo", "TOOL_SUCCESS"), ("tool_error", "TOOL_ERROR")]
    assert by_carrier["stdio"] == expected, "the client's side"
    assert by_carrier["http"] == expected, "the server's side, behind the bridge"

    data = build_report([capture, proxy.flow_file])
    labels = [lane[1] for lane in data["lanes"]]
    assert any(label.startswith("stdio pid ") for label in labels) and any(
        label.startswith("session ") for label in labels
    )
    assert set(column(data, "carrier")) == {"stdio", "http"}
