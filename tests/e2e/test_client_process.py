"""Who sent it, measured (issue 21): through `record` in reverse mode, every call names the pid of the
process that sent it, and calls of two processes are never one retry chain or one client's duplicate.

Three real SDK client processes run the same steps against a stateless server (no session tells them
apart, and all come from 127.0.0.1 with the same User-Agent): two at once, a third after them. The pids
are the processes' own, from the operating system that started them, never from the analyzer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.review.summary_markdown import summary_markdown
from mcp_blackbox.analyzer.review.summary_text import summary_text
from tests.e2e.test_stdio_record import WRAPPER, server_command, wrapped
from tests.support.processes import REPO_ROOT, child_env, start_server
from tests.support.proxy import start_mitmdump

pytestmark = pytest.mark.e2e

# A failure first (an application would retry it), then a write (run twice, it would be a duplicate).
STEPS = [
    {"op": "call", "tool": "tool_error", "args": {"message": "backend down"}},
    {"op": "call", "tool": "write_record", "args": {"key": "order-1", "value": "paid"}},
]


def start_client(url: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.clients.py_client", "--url", url, "--steps", json.dumps(STEPS)]
    return subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def finished(client: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, _ = client.communicate(timeout=60)
    assert client.returncode == 0
    result: dict[str, Any] = json.loads(out)
    assert result["fatal"] is None and len(result["steps"]) == len(STEPS), result
    return result


def test_each_call_names_the_process_that_sent_it_and_no_chain_spans_two(tmp_path: Path) -> None:
    with start_server("stateless") as server:
        proxy = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path)
        try:
            at_once = [start_client(f"{proxy.url}/mcp"), start_client(f"{proxy.url}/mcp")]
            for client in at_once:
                finished(client)
            after = start_client(f"{proxy.url}/mcp")
            finished(after)
        finally:
            proxy.stop()
    pids = {client.pid for client in [*at_once, after]}
    analysis = analyze([proxy.flow_file])
    calls = analysis.calls
    assert all(c["client"]["process"] is not None for c in calls), "every call came from a local process"
    sent = Counter(c["client"]["process"]["pid"] for c in calls if c["method"] == "tools/call")
    assert sent == dict.fromkeys(pids, len(STEPS)), "each process's own tool calls, and no other's"
    assert {c["client"]["process"]["name"] for c in calls} == {Path(sys.executable).name}
    pid_of = {c["call_id"]: c["client"]["process"]["pid"] for c in calls}
    for group in analysis.retry_groups:
        assert len({pid_of[m] for m in group.record()["members"]}) == 1, group.record()
    for duplicate in analysis.duplicate_executions:
        assert len({pid_of[c] for c in duplicate.record()["calls"]}) == 1, duplicate.record()
    assert not [c for c in calls if "DUPLICATE_EXECUTION" in c["flags"]], "each process wrote once"
    # The summaries name them: the terminal's counts and the incident document's header.
    named = [f"pid {pid} ({Path(sys.executable).name})" for pid in sorted(pids)]
    text = summary_text(analyze([proxy.flow_file]), width=200)
    assert all(name in text.split("client processes:")[1].splitlines()[0] for name in named), text
    markdown = summary_markdown(analyze([proxy.flow_file]), [str(proxy.flow_file)])
    (line,) = [line for line in markdown.splitlines() if line.startswith("- Client processes:")]
    assert all(name in line for name in named), line


def test_a_stdio_call_names_the_client_that_started_the_server(tmp_path: Path) -> None:
    """record --stdio: the client is the process that started the wrapper as its server."""
    capture = tmp_path / "cap.stdio.jsonl"
    command = wrapped(capture, server_command("py"))
    argv = [sys.executable, "-m", "tests.clients.py_stdio_client", "--timeout", "30", "--command", command[0]]
    argv += ["--args", json.dumps(command[1:]), "--steps", json.dumps([{"op": "list_tools"}])]
    client = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = client.communicate(timeout=60)
    assert client.returncode == 0 and json.loads(out)["fatal"] is None, out
    calls = analyze([capture]).calls
    assert calls and {c["client"]["process"]["pid"] for c in calls} == {client.pid}
    assert {c["client"]["process"]["name"] for c in calls} == {Path(sys.executable).name}


def test_a_stdio_server_restarted_by_its_client_is_one_recording_and_the_re_send_is_linked(tmp_path: Path) -> None:
    """The client's server died mid-call; it started the server again (a second wrapper, a second file in the
    directory) and sent the call again. Both files name the same client process: one recording, and the
    re-send is a retry of the call the crash ended. Two clients' files are never joined."""
    captures = tmp_path / "caps"
    captures.mkdir()
    once = tmp_path / "crashed-once"
    command = [WRAPPER, "record", "--stdio", "-w", f"{captures}/", "--", *server_command("py")]
    argv = [sys.executable, "-m", "tests.clients.py_stdio_restart", "--command", command[0]]
    argv += ["--args", json.dumps(command[1:]), "--tool", "crash"]
    argv += ["--tool-args", json.dumps({"how": "exit", "once": str(once)})]
    client = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = client.communicate(timeout=90)
    attempts = json.loads(out)["attempts"]
    assert [a["ok"] for a in attempts] == [False, True], attempts
    files = sorted(captures.iterdir())
    assert len(files) == 2, files
    headers = [json.loads(f.read_text().splitlines()[0]) for f in files]
    assert len({h["recording"]["id"] for h in headers}) == 1, "the client's servers are one recording"
    assert sorted(h["recording"]["file"] for h in headers) == [1, 2]
    analysis = analyze([captures])
    crashes = [c for c in analysis.calls if c["tool"] == "crash"]
    assert [c["outcome"] for c in crashes] == ["NO_RESPONSE", "TOOL_SUCCESS"], crashes
    assert {c["client"]["process"]["pid"] for c in crashes} == {client.pid}
    assert crashes[0]["client"]["lineage"] == crashes[1]["client"]["lineage"], "one client across the restart"
    assert crashes[0]["retry_group"] is not None and crashes[0]["retry_group"] == crashes[1]["retry_group"], crashes
    assert crashes[1]["attempt"] == 2
