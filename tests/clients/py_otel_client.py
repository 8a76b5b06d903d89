"""An agent instrumented with OpenTelemetry, calling an MCP server with the official Python SDK client.

    python -m tests.clients.py_otel_client --url URL [--mode legacy|auto|2026-07-28] [--tracestate STATE]

The agent serves a turn it was called for: its span ("agent turn") continues the caller's trace, given as a
random W3C traceparent with ``--tracestate``. Inside that span it opens an MCP client whose HTTP headers get
the turn's context by ``opentelemetry.propagate.inject`` (``traceparent``, ``tracestate``), lists the tools
and calls one. The SDK (mcp >= 2) makes its own CLIENT span for each request and injects that span's context
into the request's ``params._meta`` (SEP-414); notifications get none.

Prints one JSON object: the turn's span and every span the SDK made (names, ids in hex, attributes), and
the headers given to the HTTP client.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from typing import Any

import anyio
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# Before the SDK's first span: its tracer (mcp.shared._otel) is the global provider's.
PROVIDER = TracerProvider()
SPANS = InMemorySpanExporter()
PROVIDER.add_span_processor(SimpleSpanProcessor(SPANS))
trace.set_tracer_provider(PROVIDER)

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402


def described(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent is not None else None,
        "trace_state": context.trace_state.to_header(),
        "attributes": dict(span.attributes or {}),
    }


async def run(url: str, mode: Any, tracestate: str) -> dict[str, Any]:
    caller = {"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01", "tracestate": tracestate}
    tracer = PROVIDER.get_tracer("agent")
    with anyio.fail_after(30), tracer.start_as_current_span("agent turn", context=propagate.extract(caller)):
        headers: dict[str, str] = {}
        propagate.inject(headers)
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        async with Client(transport, mode=mode) as client:
            tools = await client.list_tools()
            called = await client.call_tool("echo", {"text": "traced"})
    (turn,) = [s for s in SPANS.get_finished_spans() if s.name == "agent turn"]
    return {
        "headers": headers,
        "turn": described(turn),
        "sdk_spans": [described(s) for s in SPANS.get_finished_spans() if s.name != "agent turn"],
        "tools": [tool.name for tool in tools.tools],
        "called": called.model_dump(mode="json", exclude_none=True),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", default="legacy", choices=["legacy", "auto", "2026-07-28"])
    parser.add_argument("--tracestate", default="agent=turn-1")
    args = parser.parse_args(argv)
    result = anyio.run(run, args.url, args.mode, args.tracestate)
    PROVIDER.shutdown()
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
