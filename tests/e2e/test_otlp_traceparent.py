"""The OpenTelemetry export joins the agent's trace, through real processes (issue 22, item 9).

An agent instrumented with the OpenTelemetry SDK (tests/clients/py_otel_client.py) calls the test MCP server
with the official Python SDK client, through mitmdump with the recording addon. The agent's turn span puts its
context in the HTTP client's headers (``opentelemetry.propagate.inject``: ``traceparent``, ``tracestate``);
the SDK makes a CLIENT span per request and puts that span's context in the request's ``params._meta``
(SEP-414). ``export --format otlp`` of the capture then has every call in the agent's trace, with the
agent's tracestate: each request's span a child of the SDK's span for that request (``_meta`` wins over the
header), a notification's (no ``_meta``) a child of the turn span (the header). The ids are compared with
the ones the client's own SDK made, not with anything the analyzer computed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.outputs.otlp import from_otlp_json
from mcp_blackbox.cli.main import main
from tests.analyzer.test_otlp_export import attributes, spans_of
from tests.support.processes import run_json_command, start_server
from tests.support.proxy import start_mitmdump

pytestmark = pytest.mark.e2e

TRACESTATE = "agent=turn-1,vendor@tenant=x"


def run_agent(url: str, mode: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tests.clients.py_otel_client", "--url", url, "--mode", mode]
    return run_json_command([*argv, "--tracestate", TRACESTATE], timeout=60)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_calls_spans_join_the_agents_trace(tmp_path: Path, mode: str) -> None:
    with start_server("stateful") as server:
        proxy = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path)
        try:
            agent = run_agent(f"{proxy.url}/mcp", mode)
        finally:
            proxy.stop()
    assert agent["called"]["content"] == [{"type": "text", "text": "traced"}]
    turn = agent["turn"]
    assert agent["headers"]["traceparent"] == f"00-{turn['trace_id']}-{turn['span_id']}-01"
    assert turn["trace_state"] == TRACESTATE
    # The SDK's own span for each request, by method and JSON-RPC id.
    sdk = {(s["attributes"]["mcp.method.name"], s["attributes"]["jsonrpc.request.id"]): s for s in agent["sdk_spans"]}
    assert ("tools/call", "3") in sdk or ("tools/call", "2") in sdk, agent["sdk_spans"]

    out = tmp_path / "spans.json"
    assert main(["export", str(proxy.flow_file), "--format", "otlp", "-o", str(out)]) == 0
    spans = spans_of(from_otlp_json(json.loads(out.read_text(encoding="utf-8"))))
    methods = [attributes(s)["mcp.method.name"] for s in spans]
    assert "tools/list" in methods and "tools/call" in methods, methods
    if mode == "legacy":
        assert "notifications/initialized" in methods, methods
    for span in spans:
        found = attributes(span)
        assert span.trace_id.hex() == turn["trace_id"], found  # every call in the agent's trace
        assert span.trace_state == TRACESTATE
        key = (found["mcp.method.name"], found.get("jsonrpc.request.id"))
        if key in sdk:
            # A request: the child of the span the client's SDK made for it (its _meta), not of the turn.
            assert span.parent_span_id.hex() == sdk[key]["span_id"] != turn["span_id"], found
            assert sdk[key]["parent_span_id"] == turn["span_id"]
            assert found["mcp.blackbox.trace_parent"] == "params._meta"
        else:
            # A notification: no _meta trace context, so the HTTP header's: the turn span.
            assert "jsonrpc.request.id" not in found, found
            assert span.parent_span_id.hex() == turn["span_id"], found
            assert found["mcp.blackbox.trace_parent"] == "http.header"
    assert len(spans) == len(sdk) + methods.count("notifications/initialized")
