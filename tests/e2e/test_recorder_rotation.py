"""A recorder left running: size rotation under load, retention, a stream that spans a rotation, SIGKILL.

Real processes: the test MCP server, mitmdump with the addon writing rotated files (``mcp_write``,
``mcp_rotate_size``, ``mcp_keep``), and the official Python SDK client or raw HTTP. What each call
should be is taken from what the client itself got, never from the analyzer.
"""

from __future__ import annotations

import json
import stat
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

from mcp_blackbox.addon.rotation import rotated_files
from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.processes import ServerProcess, run_py_client, start_server
from tests.support.proxy import start_mitmdump
from tests.support.raw_http import http_request, mcp_headers

pytestmark = pytest.mark.e2e


def read_flows(path: Path) -> list[HTTPFlow]:
    """Every flow of the file, through mitmproxy's own reader (which raises on a damaged file)."""
    with path.open("rb") as f:
        return [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


def client_labels(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(tool, outcome, first text) of each tools/call, as the client saw it."""
    assert result["fatal"] is None, result["fatal"]
    labels = []
    for step in result["steps"]:
        if step["op"] != "call":
            continue
        assert step["ok"], step
        outcome = "TOOL_ERROR" if step["result"].get("isError") else "TOOL_SUCCESS"
        labels.append((step["tool"], outcome, step["result"]["content"][0]["text"]))
    return labels


def analyzer_labels(calls: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    labels = []
    for call in calls:
        if call["method"] != "tools/call":
            continue
        text = call["error_message"] if call["outcome"] == "TOOL_ERROR" else call["result_excerpt"]
        labels.append((call["tool"], call["outcome"], text))
    return labels


def steps(client: int, count: int) -> list[dict[str, Any]]:
    """Echo calls and, every fifth, a tool error: each with a text of its own, so the labels tell them apart."""
    return [
        {"op": "call", "tool": "tool_error", "args": {"message": f"c{client}-fail-{n}"}}
        if n % 5 == 4
        else {"op": "call", "tool": "echo", "args": {"text": f"c{client}-call-{n}"}}
        for n in range(count)
    ]


@pytest.fixture(scope="module")
def stateless() -> Iterator[ServerProcess]:
    with start_server("stateless", json_response=True) as server:
        yield server


def test_rotation_under_load_loses_nothing(stateless: ServerProcess, tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    options = {"mcp_write": str(caps), "mcp_rotate_size": "24k", "mcp_console": "false"}
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{stateless.port}", tmp_path, options=options)
    try:
        url = f"{proxy.url}/mcp"
        with ThreadPoolExecutor(3) as pool:  # three SDK clients at once
            results = list(pool.map(lambda n: run_py_client(url, steps(n, 40), mode="legacy", timeout=60), range(3)))
    finally:
        proxy.stop()
    assert "NOT written" not in proxy.log(), proxy.log()
    files = rotated_files(caps)
    assert len(files) >= 4, [p.name for p in files]
    rotated_ids: list[str] = []
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        flows = read_flows(path)
        assert flows, f"{path.name} is empty"
        rotated_ids += [flow.id for flow in flows]
    # The same flows as mitmproxy's own -w wrote beside it, each once.
    assert sorted(rotated_ids) == sorted(flow.id for flow in proxy.flows())
    assert len(set(rotated_ids)) == len(rotated_ids)
    analysis = analyze([caps])
    assert not analysis.read_problems and not analysis.skipped
    expected = sorted(label for result in results for label in client_labels(result))
    assert len(expected) == 120
    assert sorted(analyzer_labels(analysis.calls)) == expected


def test_retention_keeps_only_the_newest_files(stateless: ServerProcess, tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    options = {"mcp_write": str(caps), "mcp_rotate_size": "2k", "mcp_keep": "3", "mcp_console": "false"}
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{stateless.port}", tmp_path, options=options)
    try:
        for n in range(30):
            body = {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": f"t{n}"}},
            }
            assert http_request(proxy.port, "POST", "/mcp", body, mcp_headers()).status == 200
    finally:
        proxy.stop()
    files = rotated_files(caps)
    assert len(files) == 3, [p.name for p in files]
    numbers = [int(p.stem.rsplit("-", 1)[1]) for p in files]
    assert numbers == list(range(numbers[-1] - 2, numbers[-1] + 1)) and numbers[-1] >= 6, numbers
    kept = [json.loads(flow.request.content)["id"] for path in files for flow in read_flows(path)]
    assert kept == sorted(kept) and kept[-1] == 29, kept  # the newest calls, in order, up to the last


def test_a_stream_that_spans_rotations_is_whole(tmp_path: Path) -> None:
    """The 2024-11-05 transport answers every POST on one GET stream: the stream's flow is written when it
    ends, into the last file, while the calls it answers are in the files before."""
    caps = tmp_path / "caps"
    options = {"mcp_write": str(caps), "mcp_rotate_size": "4k", "mcp_console": "false"}
    with start_server("legacy-sse") as server:
        proxy = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path, options=options)
        try:
            result = run_py_client(f"{proxy.url}/sse", steps(0, 25), transport="sse", mode="legacy", timeout=60)
        finally:
            proxy.stop()
    files = rotated_files(caps)
    where = {path: [flow.request.method for flow in read_flows(path)] for path in files}
    assert len(files) >= 3, where
    (stream_file,) = [path for path, methods in where.items() if "GET" in methods]
    # The stream ended last, but for a POST the client abandoned as it closed (newer SDKs close while their
    # last notification's 202 is on its way): mitmproxy writes that flow after the stream's.
    later = [flow for path in files[files.index(stream_file) + 1 :] for flow in read_flows(path)]
    assert all(flow.request.method == "POST" and flow.error for flow in later), where
    expected = sorted(client_labels(result))
    assert sorted(analyzer_labels(analyze([caps]).calls)) == expected
    # Alone, the files before the stream's hold calls without their answers.
    alone = analyzer_labels(analyze(files[: files.index(stream_file)]).calls)
    assert alone and all(outcome not in ("TOOL_SUCCESS", "TOOL_ERROR") for _, outcome, _ in alone)


def test_sigkill_loses_at_most_the_open_flows(stateless: ServerProcess, tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    options = {"mcp_write": str(caps), "mcp_rotate_size": "3k", "mcp_console": "false"}
    proxy = start_mitmdump(f"reverse:http://127.0.0.1:{stateless.port}", tmp_path, options=options)
    answered: list[int] = []
    stop = threading.Event()

    def send(first: int) -> None:
        n = first
        while not stop.is_set():
            params = {"name": "echo", "arguments": {"text": f"k{n}"}}
            try:
                response = http_request(
                    proxy.port,
                    "POST",
                    "/mcp",
                    {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params},
                    mcp_headers(),
                    timeout=5,
                )
            except OSError:
                return  # the proxy is gone
            if response.status == 200 and response.complete:
                answered.append(n)
            n += 2

    senders = [threading.Thread(target=send, args=(first,)) for first in (0, 1)]
    for sender in senders:
        sender.start()
    try:
        deadline = time.monotonic() + 30
        while (len(answered) < 40 or len(rotated_files(caps)) < 5) and time.monotonic() < deadline:
            time.sleep(0.05)
        proxy.process.kill()  # SIGKILL while both clients are sending
        proxy.process.wait(10)
    finally:
        stop.set()
        for sender in senders:
            sender.join(15)
    files = rotated_files(caps)
    assert len(files) >= 5, [p.name for p in files]
    recorded: set[int] = set()
    for path in files[:-1]:  # every closed file whole
        recorded |= {json.loads(flow.request.content)["id"] for flow in read_flows(path)}
    analysis = analyze([caps])
    assert {problem["source"] for problem in analysis.read_problems} <= {str(files[-1])}
    for call in analysis.calls:
        recorded.add(call["jsonrpc_id"])
    # Every call whose answer reached its client had ended in mitmdump, so it is in a file.
    assert set(answered) <= recorded, sorted(set(answered) - recorded)
    assert len(answered) >= 40
