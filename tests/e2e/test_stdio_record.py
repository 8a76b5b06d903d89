"""``mcp-blackbox record --stdio`` between real stdio clients and servers (issue 13, part 1).

Every client runs twice, against the server itself and against the wrapper in its place, and must get the
same: results, errors, and the server's stderr. The capture then has to hold what went by: each line of
stdin, stdout and stderr with its times, the client's disconnect, the child's exit. Servers: the official
Python SDK (tests/stdio_servers/py_server.py) and TypeScript SDK (tests/clients/ts/stdio_server.mjs), with
the faults of the field (a log line on stdout, a swallowed exception logged to stderr, a crash mid-call);
clients: the Python SDK's stdio_client and the TypeScript SDK's StdioClientTransport. The raw-pipe tests
drive the wrapper with bytes no SDK would send (not UTF-8, lines of several MB, half lines), signals and
SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.addon.stdio_recorder import DRAIN_GRACE
from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.wire import stdio_capture as fmt
from tests.support.processes import REPO_ROOT, child_env, run_json_command, stop_process

pytestmark = pytest.mark.e2e

WRAPPER = str(Path(sys.executable).with_name("mcp-blackbox"))
TS_DIR = REPO_ROOT / "tests" / "clients" / "ts"
PY_SERVER = [sys.executable, str(REPO_ROOT / "tests" / "stdio_servers" / "py_server.py")]
BIG = 3_000_000  # characters of the big result: about 3.6 MB of UTF-8 on one line
PATTERN = "0123456789abcdé€"  # both servers' big text
SKEW = 0.05  # seconds a line on one pipe may be timed after a line the child wrote later on another


def node() -> str:
    found = shutil.which("node")
    if found is None or not (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("node and tests/clients/ts/node_modules are needed: run `make test` (npm ci in tests/clients/ts)")
    return found


def server_command(kind: str, *extra: str) -> list[str]:
    return [*PY_SERVER, *extra] if kind == "py" else [node(), str(TS_DIR / "stdio_server.mjs"), *extra]


def wrapped(capture: Path | str, command: list[str]) -> list[str]:
    return [WRAPPER, "record", "--stdio", "-w", str(capture), "--", *command]


def run_client(kind: str, command: list[str], steps: list[dict[str, Any]], timeout: float = 30) -> dict[str, Any]:
    if kind == "py":
        argv = [sys.executable, "-m", "tests.clients.py_stdio_client", "--timeout", str(timeout)]
        argv += ["--command", command[0], "--args", json.dumps(command[1:]), "--steps", json.dumps(steps)]
    else:
        argv = [node(), str(TS_DIR / "stdio_client.mjs"), "--timeout-ms", str(int(timeout * 1000))]
        argv += ["--command", command[0], "--args", json.dumps(command[1:]), "--steps", json.dumps(steps)]
    return run_json_command(argv, timeout=timeout + 30)


def direct_and_wrapped(
    client: str, command: list[str], steps: list[dict[str, Any]], capture: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    return run_client(client, command, steps), run_client(client, wrapped(capture, command), steps)


def read(capture: Path) -> tuple[dict[str, Any], list[dict[str, Any]], fmt.CaptureReading]:
    reading = fmt.CaptureReading(str(capture))
    records = list(fmt.read_capture(capture, reading))
    assert reading.header is not None, reading.problems
    return reading.header, records, reading


def checked(capture: Path, command: list[str]) -> list[dict[str, Any]]:
    """The records of a capture the wrapper finished, after what holds for every one of them."""
    header, records, reading = read(capture)
    assert reading.problems == [] and not reading.torn_tail
    assert header["format"] == fmt.FORMAT and header["version"] == fmt.VERSION
    assert header["command"] == command and header["cwd"] == str(REPO_ROOT) and header["line_limit"] == fmt.LINE_LIMIT
    assert header["recorder"].startswith("mcp-blackbox ")
    assert records[0]["type"] == fmt.SPAWN and isinstance(records[0]["pid"], int)
    assert records[-1]["type"] == fmt.EXIT, "the exit is recorded after the last lines"
    assert [r for r in records if r["type"] == fmt.EXIT] == [records[-1]]
    for stream in fmt.STREAMS:
        lines = [r for r in records if r["type"] == fmt.LINE and r["stream"] == stream]
        assert all(r["t_first"] <= r["t"] for r in lines)
        assert [r["t"] for r in lines] == sorted(r["t"] for r in lines)
        assert all(header["t"] <= r["t"] <= records[-1]["t"] + DRAIN_GRACE for r in lines)
    assert (capture.stat().st_mode & 0o777) == 0o600
    return records


def lines(records: list[dict[str, Any]], stream: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == fmt.LINE and r["stream"] == stream]


def messages(records: list[dict[str, Any]], stream: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(record, JSON-RPC message) for each line of the stream that is a whole JSON object."""
    found = []
    for record in lines(records, stream):
        if record.get("truncated"):
            continue
        try:
            message = json.loads(fmt.line_payload(record))
        except ValueError:
            continue
        if isinstance(message, dict):
            found.append((record, message))
    return found


def call_of(records: list[dict[str, Any]], tool: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The stdin line of the last tools/call of ``tool`` and the stdout line that answered it (or None)."""
    request, message = [(r, m) for r, m in messages(records, fmt.STDIN) if m.get("params", {}).get("name") == tool][-1]
    answers = [r for r, m in messages(records, fmt.STDOUT) if m.get("id") == message["id"] and "method" not in m]
    return request, answers[0] if answers else None


def text_of(step: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in step["result"]["content"])


# --------------------------------------------------------------------------------------------------
# The SDK clients and servers


STEPS: list[dict[str, Any]] = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "héllo ✓ \u2028"}},
    {"op": "call", "tool": "swallow"},
    {"op": "call", "tool": "big", "args": {"size": BIG}},
    {"op": "call", "tool": "echo", "args": {"text": "after the big one"}},
]


@pytest.mark.parametrize("server", ["py", "ts"])
@pytest.mark.parametrize("client", ["py", "ts"])
def test_sdk_clients_get_the_same_through_the_wrapper(client: str, server: str, tmp_path: Path) -> None:
    command = server_command(server)
    capture = tmp_path / "cap.stdio.jsonl"
    direct, through = direct_and_wrapped(client, command, STEPS, capture)

    assert direct["fatal"] is None, direct
    assert through == direct, "the client got something else through the wrapper"
    assert [step["ok"] for step in through["steps"]] == [True] * len(STEPS)
    assert text_of(through["steps"][3]) == (PATTERN * BIG)[:BIG], "the huge line passed whole"

    records = checked(capture, command)
    requests = messages(records, fmt.STDIN)
    answers = {m["id"]: r for r, m in messages(records, fmt.STDOUT) if "id" in m and "method" not in m}
    for record, message in requests:
        if "id" in message and "method" in message and message["method"] != "tools/call":
            assert answers[message["id"]]["t"] >= record["t"], message
    # Every line of the client's is in the capture: the same count of tools/call as steps that call.
    calls = [m for _, m in requests if m.get("method") == "tools/call"]
    assert [c["params"]["name"] for c in calls] == [s["tool"] for s in STEPS if s["op"] == "call"]

    # The huge answer: whole for the client, its head in the capture, with its length and the marker. (Cut,
    # it is no JSON: the TypeScript SDK writes the id last.)
    big_request, _ = call_of(records, "big")
    [big_answer] = [r for r in lines(records, fmt.STDOUT) if r.get("truncated")]
    assert big_answer["t"] >= big_request["t"]
    assert big_answer["bytes"] > len((PATTERN * BIG)[:BIG].encode()) > fmt.LINE_LIMIT
    head = fmt.line_payload(big_answer)
    assert fmt.LINE_LIMIT - 3 <= len(head) <= fmt.LINE_LIMIT and head.startswith(b"{")
    assert big_answer["t_first"] < big_answer["t"], "a line of several reads keeps the time of its first byte"
    after_request, after_answer = call_of(records, "echo")
    assert after_answer is not None and after_request["t"] >= big_answer["t"]

    # The swallowed exception: its traceback on stderr, recorded while the call was open; the answer is
    # an empty success.
    swallow_request, swallow_answer = call_of(records, "swallow")
    assert swallow_answer is not None
    # Two pipes read by two threads: a line written just before the answer may be read just after it.
    during = [r for r in lines(records, fmt.STDERR) if swallow_request["t"] <= r["t"] <= swallow_answer["t"] + SKEW]
    assert any(re.search(r"FileNotFoundError|ENOENT", fmt.line_payload(r).decode()) for r in during), (
        swallow_request["t"],
        swallow_answer["t"],
        lines(records, fmt.STDERR),
    )
    assert "".join(fmt.line_payload(r).decode() + "\n" for r in lines(records, fmt.STDERR)) == through["stderr"]

    # The client closed the server's stdin, then the server ended (on EOF, or on the client's SIGTERM).
    [disconnect] = [r for r in records if r["type"] == fmt.EOF and r["stream"] == fmt.STDIN]
    exit_record = records[-1]
    assert disconnect["t"] <= exit_record["t"]
    if exit_record["code"] is None:
        assert exit_record["signal"] == "SIGTERM" and exit_record["status"] == 128 + signal.SIGTERM
        [sent] = [r for r in records if r["type"] == fmt.SIGNAL]
        assert sent["signal"] == "SIGTERM" and sent["forwarded_to"] == records[0]["pid"]
    else:
        assert exit_record["code"] == 0 and exit_record["status"] == 0


@pytest.mark.parametrize(
    ("client", "server", "extra", "steps", "log_line"),
    [
        (
            "py",
            "py",
            ["--banner"],
            [{"op": "call", "tool": "echo", "args": {"text": "hi"}}],
            "stdio-testbed 1.0.0 starting",
        ),
        ("ts", "ts", [], [{"op": "call", "tool": "log_to_stdout"}], "handling log_to_stdout"),
        ("py", "ts", [], [{"op": "call", "tool": "log_to_stdout"}], "handling log_to_stdout"),
    ],
    ids=["py-banner", "ts-console-log", "py-client-ts-console-log"],
)
def test_a_log_line_on_stdout_is_recorded_as_it_is_and_passed_on(
    client: str, server: str, extra: list[str], steps: list[dict[str, Any]], log_line: str, tmp_path: Path
) -> None:
    command = server_command(server, *extra)
    capture = tmp_path / "cap.stdio.jsonl"
    direct, through = direct_and_wrapped(client, command, steps, capture)
    assert through == direct and through["steps"][0]["ok"], through

    records = checked(capture, command)
    [line] = [r for r in lines(records, fmt.STDOUT) if r.get("text") == log_line]
    assert line["bytes"] == len(log_line) and "truncated" not in line
    if steps[0]["tool"] == "log_to_stdout":
        request, answer = call_of(records, "log_to_stdout")
        assert answer is not None and request["t"] <= line["t"] <= answer["t"], "written during the call"


@pytest.mark.parametrize(("server", "how"), [("py", "exit"), ("py", "signal"), ("ts", "exit"), ("ts", "signal")])
@pytest.mark.parametrize("client", ["py", "ts"])
def test_a_server_that_dies_mid_call_is_recorded(client: str, server: str, how: str, tmp_path: Path) -> None:
    command = server_command(server)
    capture = tmp_path / "cap.stdio.jsonl"
    steps = [
        {"op": "call", "tool": "echo", "args": {"text": "before"}},
        {"op": "call", "tool": "crash", "args": {"how": how}},
    ]
    direct, through = direct_and_wrapped(client, command, steps, capture)
    assert through == direct, "the client saw the crash as it sees it without the wrapper"
    assert through["steps"][0]["ok"] and not through["steps"][1]["ok"]

    records = checked(capture, command)
    request, answer = call_of(records, "crash")
    assert answer is None, "no answer to the call the server died in"
    assert any(r.get("text") == f"crash: dying by {how}" for r in lines(records, fmt.STDERR))
    exit_record = records[-1]
    if how == "exit":
        assert (exit_record["code"], exit_record["signal"], exit_record["status"]) == (3, None, 3)
    else:
        assert (exit_record["code"], exit_record["signal"], exit_record["status"]) == (None, "SIGKILL", 137)
    assert exit_record["t"] >= request["t"]
    assert all(r["t"] <= exit_record["t"] + DRAIN_GRACE for r in records[:-1])


# --------------------------------------------------------------------------------------------------
# Raw pipes


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        stop_process(proc)


def start(procs: list[subprocess.Popen[bytes]], argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    kwargs.setdefault("stderr", subprocess.PIPE)
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO_ROOT, env=child_env(), **kwargs
    )
    procs.append(proc)
    return proc


def python_child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def read_until(fd: int, wanted: bytes, timeout: float = 10) -> bytes:
    got = b""
    deadline = time.monotonic() + timeout
    while wanted not in got:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"{wanted!r} did not arrive in {timeout}s; got {got[-200:]!r}")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"EOF before {wanted!r}; got {got[-200:]!r}")
        got += chunk
    return got


def test_bytes_pass_through_unchanged_and_are_recorded_losslessly(tmp_path: Path) -> None:
    huge = b'{"jsonrpc":"2.0","id":9,"result":"' + bytes(range(32, 127)) * 50_000 + b'"}'
    sent = b"".join(
        [
            b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
            b"not json at all\n",
            b"\xff\xfe bytes that are not UTF-8 \xc3\n",
            b"a line ending in CRLF\r\n",
            b"\n",
            "caf\u00e9 \u2028 \U0001f600\n".encode(),
            huge + b"\n",
            b"no newline at the end",
        ]
    )
    # The child echoes stdin to stdout and writes it reversed to stderr, each as one piece at the end.
    child = python_child(
        "import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(data); sys.stdout.flush(); "
        "sys.stderr.buffer.write(data[::-1])"
    )
    capture = tmp_path / "raw.stdio.jsonl"
    done = subprocess.run(
        wrapped(capture, child), input=sent, capture_output=True, timeout=60, env=child_env(), cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == sent and done.stderr == sent[::-1], "byte for byte, both ways"

    records = checked(capture, child)
    for stream, data in ((fmt.STDIN, sent), (fmt.STDOUT, sent), (fmt.STDERR, sent[::-1])):
        recorded = lines(records, stream)
        expected = data.split(b"\n")
        assert len(recorded) == len(expected) - (expected[-1] == b"")
        for record, original in zip(recorded, expected, strict=False):
            assert record["bytes"] == len(original)
            if len(original) > fmt.LINE_LIMIT:
                assert record["truncated"] is True and original.startswith(fmt.line_payload(record))
                assert len(fmt.line_payload(record)) >= fmt.LINE_LIMIT - 3
            else:
                assert fmt.line_payload(record) == original and "truncated" not in record
        assert recorded[-1].get("unterminated") is (True if not data.endswith(b"\n") else None)
    [bad] = [r for r in lines(records, fmt.STDIN) if r["bytes"] == len(b"\xff\xfe bytes that are not UTF-8 \xc3")]
    assert "b64" in bad and "text" not in bad
    [crlf] = [r for r in lines(records, fmt.STDOUT) if r.get("text", "").startswith("a line ending")]
    assert crlf["text"] == "a line ending in CRLF\r"
    assert lines(records, fmt.STDOUT)[1]["text"] == "not json at all"


def test_chunks_are_forwarded_as_read_not_per_line(tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    """Half a line reaches the other side before its newline, both ways; the line keeps its first byte's time."""
    child = python_child(
        "import os, sys\n"
        "os.write(1, b'half a line')\n"
        "got = os.read(0, 100)\n"  # what the client sent so far: no newline yet
        "os.write(1, b' / child read ' + repr(got).encode() + b'\\n')\n"
        "sys.stdin.buffer.readline()\n"
    )
    capture = tmp_path / "cap.stdio.jsonl"
    proc = start(procs, wrapped(capture, child))
    assert proc.stdin is not None and proc.stdout is not None
    assert read_until(proc.stdout.fileno(), b"half a line") == b"half a line"
    time.sleep(0.2)
    proc.stdin.write(b"abc")
    proc.stdin.flush()
    assert read_until(proc.stdout.fileno(), b"\n") == b" / child read b'abc'\n"
    proc.stdin.write(b"def\n")
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0

    records = checked(capture, child)
    [out] = lines(records, fmt.STDOUT)
    assert out["text"] == "half a line / child read b'abc'" and out["t"] - out["t_first"] >= 0.2
    [sent] = lines(records, fmt.STDIN)
    assert sent["text"] == "abcdef" and sent["t_first"] < sent["t"]


def test_the_client_disconnect_closes_the_child_stdin(tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    child = python_child(
        "import sys\nfor line in sys.stdin: print('got', line.strip(), flush=True)\n"
        "print('stdin closed', file=sys.stderr, flush=True)\n"
    )
    capture = tmp_path / "cap.stdio.jsonl"
    proc = start(procs, wrapped(capture, child))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    proc.stdin.flush()
    read_until(proc.stdout.fileno(), b"got")
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0

    records = checked(capture, child)
    [disconnect] = [r for r in records if r["type"] == fmt.EOF and r["stream"] == fmt.STDIN]
    [closed] = lines(records, fmt.STDERR)
    assert closed["text"] == "stdin closed" and disconnect["t"] <= closed["t"]
    assert records[-1] | {"t": 0} == {"type": fmt.EXIT, "t": 0, "code": 0, "signal": None, "status": 0}


def test_a_client_that_stops_reading_breaks_the_server_pipe_as_without_the_wrapper(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    command = ["sh", "-c", "while echo tick; do sleep 0.02; done"]
    statuses = []
    for argv in (command, wrapped(tmp_path / "cap.stdio.jsonl", command)):
        proc = start(procs, argv)
        assert proc.stdout is not None
        read_until(proc.stdout.fileno(), b"tick\n")
        proc.stdout.close()
        statuses.append(proc.wait(timeout=10))
    assert statuses == [-signal.SIGPIPE, 128 + signal.SIGPIPE], "the shell dies of SIGPIPE either way"

    records = checked(tmp_path / "cap.stdio.jsonl", command)
    [failed] = [r for r in records if r["type"] == fmt.WRITE_FAILED]
    assert (failed["stream"], failed["error"]) == (fmt.STDOUT, "EPIPE")
    assert all(r["text"] == "tick" for r in lines(records, fmt.STDOUT))
    assert records[-1]["signal"] == "SIGPIPE" and records[-1]["t"] >= failed["t"]


def test_a_server_that_closes_its_stdin_is_recorded_and_the_client_meets_the_broken_pipe(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    command = ["sh", "-c", "exec 0<&-; echo closed; sleep 5"]
    capture = tmp_path / "cap.stdio.jsonl"
    proc = start(procs, wrapped(capture, command))
    assert proc.stdin is not None and proc.stdout is not None
    read_until(proc.stdout.fileno(), b"closed")
    with pytest.raises(BrokenPipeError):  # the wrapper took the first line, then closed its stdin
        for _ in range(50):
            proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            proc.stdin.flush()
            time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)

    records = checked(capture, command)
    [failed] = [r for r in records if r["type"] == fmt.WRITE_FAILED]
    assert (failed["stream"], failed["error"]) == (fmt.STDIN, "EPIPE")
    [sent] = lines(records, fmt.STDIN)
    assert sent["text"] == '{"jsonrpc":"2.0","id":1,"method":"ping"}' and sent["t"] <= failed["t"]
    # The client ended the server (SIGTERM, forwarded by the wrapper) with its ping unanswered: no crash.
    assert [f["rule"] for f in analyze([str(capture)]).findings] == []


TRAP = (
    "import os, signal, sys, time\n"
    "got = []\n"
    "for name in ('SIGINT', 'SIGTERM', 'SIGHUP'):\n"
    "    signal.signal(getattr(signal, name), lambda n, f: got.append(signal.Signals(n).name))\n"
    "print('ready', flush=True)\n"
    "while not got: time.sleep(0.01)\n"
    "time.sleep(0.3)\n"  # a second delivery of the same signal would arrive in this time
    "print('child got', ','.join(got), file=sys.stderr, flush=True)\n"
    "sys.exit(0)\n"
)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
@pytest.mark.parametrize("to_group", [False, True], ids=["to-wrapper", "to-its-group"])
def test_signals_reach_the_child_once(
    name: str, to_group: bool, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Sent to the wrapper, or to its process group as the Python SDK client kills a server: the child gets it once."""
    child = python_child(TRAP)
    capture = tmp_path / "cap.stdio.jsonl"
    proc = start(procs, wrapped(capture, child), start_new_session=True)
    assert proc.stdout is not None
    read_until(proc.stdout.fileno(), b"ready")
    number = getattr(signal, name)
    if to_group:
        os.killpg(proc.pid, number)
    else:
        proc.send_signal(number)
    assert proc.wait(timeout=10) == 0, "the wrapper leaves with the child's status"

    records = checked(capture, child)
    [sent] = [r for r in records if r["type"] == fmt.SIGNAL]
    assert (sent["signal"], sent["number"], sent["forwarded_to"]) == (name, number, records[0]["pid"])
    assert [r["text"] for r in lines(records, fmt.STDERR)] == [f"child got {name}"]


@pytest.mark.parametrize(
    ("script", "status", "code", "signal_name"),
    [
        ("exit 7", 7, 7, None),
        ("kill -TERM $$", 143, None, "SIGTERM"),
        ("kill -KILL $$", 137, None, "SIGKILL"),
        ("kill -SEGV $$", 139, None, "SIGSEGV"),
    ],
)
def test_the_exit_status_passes_through(
    script: str, status: int, code: int | None, signal_name: str | None, tmp_path: Path
) -> None:
    capture = tmp_path / "cap.stdio.jsonl"
    command = ["sh", "-c", script]
    done = subprocess.run(
        wrapped(capture, command), stdin=subprocess.DEVNULL, capture_output=True, timeout=30, cwd=REPO_ROOT
    )
    assert done.returncode == status, done.stderr
    exit_record = checked(capture, command)[-1]
    assert (exit_record["code"], exit_record["signal"], exit_record["status"]) == (code, signal_name, status)


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    capture = tmp_path / "cap.stdio.jsonl"
    done = subprocess.run(wrapped(capture, ["/nonexistent/server"]), capture_output=True, timeout=30, cwd=REPO_ROOT)
    assert done.returncode == 127 and b"cannot run /nonexistent/server" in done.stderr and done.stdout == b""
    _, records, reading = read(capture)
    assert reading.problems == []
    assert records[0]["type"] == fmt.SPAWN and records[0]["pid"] is None and "No such file" in records[0]["error"]
    assert records[-1]["status"] == 127


def test_sigkill_of_the_wrapper_leaves_a_readable_capture(tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    command = server_command("py")
    capture = tmp_path / "cap.stdio.jsonl"
    proc = start(procs, wrapped(capture, command), stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    for message in (initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    read_until(proc.stdout.fileno(), b'"id":2')
    # The wrapper passes a line on before it records it (the client never waits for the capture), so the
    # kill waits for the answer's record: what is tested is that a SIGKILL loses nothing already written.
    deadline = time.monotonic() + 10
    while 2 not in [m.get("id") for _, m in messages(read(capture)[1], fmt.STDOUT)]:
        assert time.monotonic() < deadline, "the answer the client got was never recorded"
        time.sleep(0.01)
    proc.kill()
    proc.wait(timeout=10)

    header, records, reading = read(capture)
    assert reading.problems == [] and header["format"] == fmt.FORMAT
    assert [m.get("id") for _, m in messages(records, fmt.STDIN)] == [1, None, 2]
    assert [m.get("id") for _, m in messages(records, fmt.STDOUT)] == [1, 2]
    assert records[-1]["type"] != fmt.EXIT, "killed outright: no exit record, everything before it kept"
    # The orphaned server meets the end of its stdin and goes.
    pid = records[0]["pid"]
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower():
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the server outlived the wrapper's SIGKILL by 10 s")
        time.sleep(0.05)


def test_the_capture_is_owner_only_and_a_directory_keeps_every_run(tmp_path: Path) -> None:
    existing = tmp_path / "old.stdio.jsonl"
    existing.write_text("old")
    existing.chmod(0o644)
    command = ["true"]
    old_umask = os.umask(0o022)
    try:
        subprocess.run(wrapped(existing, command), check=True, timeout=30, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
        runs = tmp_path / "runs"
        for _ in range(2):
            subprocess.run(
                wrapped(f"{runs}/", command), check=True, timeout=30, stdin=subprocess.DEVNULL, cwd=REPO_ROOT
            )
    finally:
        os.umask(old_umask)
    assert (existing.stat().st_mode & 0o777) == 0o600 and checked(existing, command)[-1]["status"] == 0
    files = sorted(runs.iterdir())
    assert len(files) == 2 and all(re.fullmatch(r"mcp-stdio-\d{8}T\d{6}Z-\d+\.stdio\.jsonl", f.name) for f in files)
    for file in files:
        assert fmt.is_stdio_capture(file) and checked(file, command)[-1]["status"] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["record", "--stdio", "-w", "x.stdio.jsonl"], "needs the server's command after --"),
        (["record", "--stdio", "--", "true"], "-w/--write"),
        (
            ["record", "--stdio", "--upstream", "http://127.0.0.1:1", "-w", "x", "--", "true"],
            "--upstream: not with --stdio",
        ),
        (["record", "-w", "x.flows"], "--upstream is required"),
    ],
)
def test_record_stdio_usage_errors(argv: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run([WRAPPER, *argv], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == [], "nothing written"


def documented_stdio_section() -> str:
    """docs/recording.md, "Recording a stdio server": up to the next section, or the end of the page."""
    page = (REPO_ROOT / "docs" / "recording.md").read_text()
    start = page.index("\n## Recording a stdio server\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def as_here(argv: list[str], capture: Path) -> list[str]:
    """The documented argv with its placeholders made real: the capture, the test server, this Python."""
    places = {"python": sys.executable, "server.py": PY_SERVER[1], ".venv/bin/mcp-blackbox": WRAPPER}
    return [str(capture) if a.endswith(fmt.SUFFIX) else places.get(a, a) for a in argv]


def test_the_documented_command_and_client_configuration_run(tmp_path: Path) -> None:
    """The command and claude_desktop_config.json of docs/recording.md ("Recording a stdio server"), the command
    also the README's quick start, as written but for their paths, started by the Python SDK client as a client
    starts a server."""
    section = documented_stdio_section()
    [command] = re.findall(r"^    (\.venv/bin/mcp-blackbox record --stdio .*)$", section, re.MULTILINE)
    readme = (REPO_ROOT / "README.md").read_text()
    assert re.findall(r"^    (\.venv/bin/mcp-blackbox record --stdio .*)$", readme, re.MULTILINE) == [command]
    start = section.index("    {")
    config = json.loads(section[start : section.index("\n\n", start)])
    [server] = config["mcpServers"].values()
    assert server["command"] == "mcp-blackbox"
    steps = [{"op": "call", "tool": "echo", "args": {"text": "hi"}}]
    for n, argv in enumerate([shlex.split(command), [WRAPPER, *server["args"]]]):
        capture = tmp_path / f"{n}{fmt.SUFFIX}"
        out = run_client("py", as_here(argv, capture), steps)
        assert out["steps"][0]["ok"] and text_of(out["steps"][0]) == "hi", out
        assert fmt.is_stdio_capture(capture)
