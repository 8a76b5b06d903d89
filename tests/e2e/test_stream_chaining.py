"""Through real mitmdump, the recorder chained behind another addon's stream callable loses no bytes.

mitmdump loads a small addon before the recorder; it sets ``flow.response.stream`` to a function that
returns a generator, as mitmproxy allows. The client must receive every byte the server sent, and the
flow file must hold the same body.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import start_server
from tests.support.proxy import ADDON, MITMDUMP, Mitmdump
from tests.support.raw_http import Control, http_request, mcp_headers

pytestmark = pytest.mark.e2e

PIECE = 7  # the addon before ours hands each chunk on in pieces this long

ADDON_BEFORE = f"""
def responseheaders(flow):
    if "event-stream" in flow.response.headers.get("content-type", ""):
        flow.response.stream = lambda chunk: (chunk[i : i + {PIECE}] for i in range(0, len(chunk), {PIECE}))
"""


def start_mitmdump_after(script: Path, mode: str, workdir: Path, timeout: float = 20) -> Mitmdump:
    """``mitmdump -s SCRIPT -s addon/mcp_recorder.py``: the script's hooks run before the recorder's."""
    listen_file, flow_file, log_file = (workdir / f"mitmdump.{ext}" for ext in ("listen.json", "flows", "log"))
    command = [MITMDUMP, "--mode", mode, "--listen-host", "127.0.0.1", "-p", "0", "-w", str(flow_file)]
    command += ["-s", str(script), "-s", str(ADDON), "--set", f"mcp_listen_file={listen_file}"]
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    deadline = time.monotonic() + timeout
    while not listen_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"mitmdump did not start; log:\n{log_file.read_text(errors='replace')}")
        time.sleep(0.05)
    port = json.loads(listen_file.read_text())["listen_addrs"][0][1]
    return Mitmdump(process, port, flow_file, log_file)


def progress_call(steps: int, delay_ms: int) -> dict[str, Any]:
    params = {"name": "progress", "arguments": {"steps": steps, "delay_ms": delay_ms}, "_meta": {"progressToken": 1}}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def finished_exchanges(control: Control, timeout: float = 5) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        log = control.log()
        if all(e["t_end"] is not None for e in log) or time.monotonic() > deadline:
            return log
        time.sleep(0.05)


def test_stream_callable_returning_a_generator_before_the_recorder_loses_no_bytes(tmp_path: Path) -> None:
    script = tmp_path / "addon_before.py"
    script.write_text(ADDON_BEFORE)
    with start_server("stateless") as server:
        control = Control(server.port)
        control.reset()
        proxy = start_mitmdump_after(script, f"reverse:http://127.0.0.1:{server.port}", tmp_path)
        try:
            received = http_request(proxy.port, "POST", "/mcp", progress_call(steps=3, delay_ms=50), mcp_headers())
            (exchange,) = finished_exchanges(control)
        finally:
            proxy.stop()

    sent = base64.b64decode(exchange["response_body_b64"])
    assert b"done 3" in sent and received.complete
    assert received.body == sent, "the client got every byte the server sent"
    (flow,) = [f for f in proxy.flows() if "stream" in f.metadata.get("mcp_blackbox", {})]
    assert flow.response.raw_content == sent, "the flow file holds the same body"
    stream = flow.metadata["mcp_blackbox"]["stream"]
    assert stream["ended"] == "complete" and stream["tap_failures"] == 0
    assert stream["bytes"] == len(sent)
    assert max(size for _, size in stream["chunks"]) <= PIECE, "the bytes came through the addon before ours"
