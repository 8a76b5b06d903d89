"""Write a small MCP-like capture with whatever mitmproxy runs this script: the committed flow files
``mitmproxy-<version>.flows`` beside it were made this way, each by an older mitmproxy, so that the
tests can check that mitmproxy 12 migrates them and the analyzer reads them, without needing the old
mitmproxy installed. The committed files: mitmproxy 11.1.3 (flow format 21, as mitmproxy 12),
10.4.2 (format 20) and 7.0.4 (format 14), the oldest that installs on Python 3.12 (6.x fails to
build zstandard). To make one again:

    python3.12 -m venv /tmp/m11 && /tmp/m11/bin/pip install 'mitmproxy==11.*'
    /tmp/m11/bin/python tests/analyzer/data/make_old_format_flows.py tests/analyzer/data

It uses only what mitmproxy 7 to 12 all have (tried with 7.0.4, 8.1.1, 9.0.1, 10.4.2, 11.1.3 and
12.3.1): ``mitmproxy.test.tflow.tflow()``, ``Request.make``,
``Response.make``, ``flow.Error`` and ``io.FlowWriter``. Flow ids and times are fixed; the
connection ids are mitmproxy's own (random). The flows, on one connection and one MCP session:

    0 POST /mcp initialize id=1                 -> 200 json result            SUCCESS
    1 POST /mcp notifications/initialized       -> 202                        ACCEPTED
    2 POST /mcp tools/call echo id=2            -> 200 sse result             TOOL_SUCCESS
    3 POST /mcp tools/call tool_error id=3      -> 200 json isError: true     TOOL_ERROR
    4 POST /mcp tools/call protocol_error id=4  -> 200 json error -32602      JSONRPC_ERROR
    5 POST /mcp tools/call write_record id=5    -> 503 text/plain             HTTP_ERROR
    6 POST /mcp tools/call slow id=6            -> no response, flow error    NO_RESPONSE
"""

import json
import sys
from pathlib import Path

from mitmproxy import flow as flow_module
from mitmproxy import http, io, version
from mitmproxy.test import tflow

SERVER = "http://127.0.0.1:8000/mcp"
SESSION = "0123456789abcdef0123456789abcdef"
T0 = 1785405600.0  # 2026-07-30 10:00:00 UTC


def rpc(rpc_id, method, params=None):
    message = {"jsonrpc": "2.0", "method": method}
    if rpc_id is not None:
        message["id"] = rpc_id
    if params is not None:
        message["params"] = params
    return message


def text_result(text, is_error=False):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


EXCHANGES = [
    # (request message, status, content type, response body or None, flow error or None)
    (
        rpc(
            1,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "old-format-writer", "version": "1"},
            },
        ),
        200,
        "application/json",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "old-format-server", "version": "1"},
            },
        },
        None,
    ),
    (rpc(None, "notifications/initialized"), 202, "application/json", b"", None),
    (
        rpc(2, "tools/call", {"name": "echo", "arguments": {"text": "hello old format"}}),
        200,
        "text/event-stream",
        b"id: 1\ndata: "
        + json.dumps({"jsonrpc": "2.0", "id": 2, "result": text_result("hello old format")}).encode()
        + b"\n\n",
        None,
    ),
    (
        rpc(3, "tools/call", {"name": "tool_error", "arguments": {}}),
        200,
        "application/json",
        {"jsonrpc": "2.0", "id": 3, "result": text_result("tool says no", is_error=True)},
        None,
    ),
    (
        rpc(4, "tools/call", {"name": "protocol_error", "arguments": {}}),
        200,
        "application/json",
        {"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "invalid params"}},
        None,
    ),
    (
        rpc(5, "tools/call", {"name": "write_record", "arguments": {"key": "k1"}}),
        503,
        "text/plain",
        b"injected 503",
        None,
    ),
    (rpc(6, "tools/call", {"name": "slow", "arguments": {}}), None, None, None, "Server disconnected."),
]


def make_flows():
    flows = []
    client_conn = None
    for n, (message, status, content_type, body, error) in enumerate(EXCHANGES):
        start = T0 + n
        f = tflow.tflow()
        f.id = f"00000000-0000-4000-8000-{n:012d}"
        if client_conn is None:
            client_conn = f.client_conn
        f.client_conn = client_conn
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if n:
            headers["mcp-session-id"] = SESSION
            headers["mcp-protocol-version"] = "2025-11-25"
        f.request = http.Request.make("POST", SERVER, json.dumps(message).encode(), headers)
        f.request.timestamp_start = start
        f.request.timestamp_end = start + 0.001
        f.response = None
        if status is not None:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            f.response = http.Response.make(status, content, {"content-type": content_type, "mcp-session-id": SESSION})
            f.response.timestamp_start = start + 0.01
            f.response.timestamp_end = start + 0.05
        f.error = None
        if error is not None:
            f.error = flow_module.Error(error)
            f.error.timestamp = start + 0.5
        if hasattr(f, "timestamp_created"):
            f.timestamp_created = start
        flows.append(f)
    return flows


def main():
    where = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    path = where / f"mitmproxy-{version.VERSION}.flows"
    with path.open("wb") as out:
        writer = io.FlowWriter(out)
        for f in make_flows():
            writer.add(f)
    print(f"{path}: mitmproxy {version.VERSION}, flow format {version.FLOW_FORMAT_VERSION}")


if __name__ == "__main__":
    main()
