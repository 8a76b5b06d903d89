"""The report of a stdio capture in real headless Chromium: its calls on the timeline with their stderr marks, the
stderr lines in the details of the call they were written during, as text (a server's log is untrusted content).

The capture is recorded by ``record --stdio`` around a real process, a small server that logs hostile markup and a
traceback on stderr while it answers a tool call with an empty success, then crashes in the next call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from mcp_blackbox.analyzer.review.report import write_report
from tests.report.layout import column
from tests.support.browser import inspect_report
from tests.support.processes import REPO_ROOT, child_env

WRAPPER = str(Path(sys.executable).with_name("mcp-blackbox"))
PAYLOAD = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
# Reads requests; "swallow" writes the payload and a traceback on stderr, then answers with empty content;
# "crash" writes a line on stderr and exits 3 without an answer.
SERVER = f"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    name = m["params"]["name"]
    if name == "crash":
        print("dying now", file=sys.stderr, flush=True)
        sys.exit(3)
    if name == "swallow":
        print({PAYLOAD!r}, file=sys.stderr)
        print("Traceback (most recent call last):", file=sys.stderr)
        print('  File "server.py", line 1, in swallow', file=sys.stderr)
        print(f"KeyError: 'settings-{{40 + 2}}'", file=sys.stderr, flush=True)
    print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{"content": []}}}}), flush=True)
"""


def record(tmp_path: Path) -> Path:
    """Sends "swallow", waits for its answer, sends "crash", waits for the server to die; stdin stays open."""
    capture = tmp_path / "hostile.stdio.jsonl"
    proc = subprocess.Popen(
        [WRAPPER, "record", "--stdio", "-w", str(capture), "--", sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        cwd=REPO_ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for n, name in ((1, "swallow"), (2, "crash")):
            message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": {}}}
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if name == "swallow":
                assert json.loads(proc.stdout.readline())["id"] == 1
                # A client's pause before its next call: the wrapper may read stderr a moment after the answer
                # it preceded, and a line read once the next call is in flight is that call's (stdio_calls.py).
                time.sleep(0.2)
        assert proc.wait(timeout=30) == 3
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    return capture


def test_stdio_report_shows_calls_and_their_stderr_as_text(tmp_path: Path) -> None:
    capture = record(tmp_path)
    report = tmp_path / "stdio.html"
    data = write_report([capture], report)
    ids, outcomes = column(data, "id"), column(data, "outcome")
    assert outcomes == ["TOOL_SUCCESS", "NO_RESPONSE"]
    assert column(data, "flags")[0] == "EMPTY_RESULT STDERR_DURING_CALL"
    assert column(data, "carrier") == ["stdio", "stdio"]
    assert [row[0] for row in data["stderr_ticks"]] == [0, 1], "each call's stderr lines are ticked on its bar"
    assert [lane[1][: len("stdio pid ")] for lane in data["lanes"]] == ["stdio pid "]
    swallow, crash = ids
    assert data["details"][swallow]["stderr"][0]["text"] == PAYLOAD

    injected = "img, iframe, [onerror], [onload]"
    actions = [
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
        {"do": "count", "selector": injected},
        {"do": "count", "selector": "script"},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{swallow}"]'},
        {"do": "eval", "expression": "document.getElementById('details').textContent"},
        {"do": "count", "selector": "#details .stderr-line"},
        {"do": "count", "selector": injected},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{crash}"]'},
        {"do": "eval", "expression": "document.getElementById('details').textContent"},
        {"do": "fill", "selector": "#search", "value": "settings-42"},  # in the log, not in the command
        {"do": "text", "selector": "#count"},
    ]
    seen = inspect_report(report, actions)
    assert seen["dialogs"] == [] and seen["page_errors"] == [] and seen["console_errors"] == []
    assert seen["requests"] == []
    bars, before, scripts, _, swallow_text, stderr_rows, after, _, crash_text, _, count = (
        r.get("value") for r in seen["results"]
    )
    assert int(bars) == 2
    assert before == after == 0, "the stderr line's markup never became an element"
    assert scripts == 2, "only the report's own data and code scripts"
    assert stderr_rows == 4 and PAYLOAD in swallow_text and "KeyError: 'settings-42'" in swallow_text
    assert "stderr during the call (4 lines)" in swallow_text and "STDERR_DURING_CALL" in swallow_text
    assert "stdin line at" in swallow_text and "stdout line at" in swallow_text
    assert "dying now" in crash_text and "the server exited with code 3" in crash_text
    assert "written to the server's stdin" in crash_text and "HTTP" not in crash_text.split("Evidence")[0]
    assert count == "1 of 2 calls", "search finds a call by its stderr"
