"""OpenTelemetry spans join the sender's trace (analyzer/outputs/otlp.py, ``trace_parent``): a request that
carried a valid W3C ``traceparent`` in ``params._meta`` (SEP-414) or as an HTTP request header gets a span in
that trace, with that span as its parent and the ``tracestate`` beside it. ``_meta`` wins over the header;
an invalid traceparent (the look-alikes below, each beside a valid twin) is ignored, as the W3C spec says,
and the span is what it was without one: a root span of its client unit's trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.http import HTTPFlow
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.otlp import (
    from_otlp_json,
    parse_traceparent,
    parse_tracestate,
    span_id_of,
    trace_id_of,
)
from mcp_blackbox.cli.main import main
from tests.analyzer.flows import exchange, result, rpc, sse, text_result, tool_call, write
from tests.analyzer.test_otlp_export import attributes, spans_of

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
OTHER_TRACE, OTHER_PARENT = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
OTHER = f"00-{OTHER_TRACE}-{OTHER_PARENT}-01"
# Span.flags: bit 8 says whether the parent is remote is known, bit 9 that it is (OTLP's SpanFlags).
HAS_IS_REMOTE, IS_REMOTE = 0x100, 0x200

# Invalid traceparents, each a look-alike of a valid one: the spec says to ignore them.
INVALID = {
    "trace id one digit short": f"00-{TRACE[:-1]}-{PARENT}-01",
    "trace id one digit long": f"00-{TRACE}a-{PARENT}-01",
    "parent id one digit short": f"00-{TRACE}-{PARENT[:-1]}-01",
    "all-zero trace id": f"00-{'0' * 32}-{PARENT}-01",
    "all-zero parent id": f"00-{TRACE}-{'0' * 16}-01",
    "version ff": f"ff-{TRACE}-{PARENT}-01",
    "non-hex digit": f"00-{TRACE[:-1]}g-{PARENT}-01",
    "upper-case hex": VALID.upper(),
    "version 00 with a field after the flags": f"{VALID}-extra",
    "no flags": f"00-{TRACE}-{PARENT}",
    "underscores for dashes": VALID.replace("-", "_"),
    "empty": "",
}
# Their valid twins: a later version may add fields after the flags; blanks around the value are allowed.
VALID_TWINS = {
    "version 00": VALID,
    "a later version with a field after the flags": f"01-{TRACE}-{PARENT}-01-extra",
    "flags not sampled": f"00-{TRACE}-{PARENT}-00",
    "blanks around": f" {VALID}\t",
}


def export(tmp_path: Path, *flows: HTTPFlow) -> dict[str, Span]:
    """The spans of ``export --format otlp``, by JSON-RPC id (a notification's by method)."""
    out = tmp_path / "spans.json"
    assert main(["export", str(write(tmp_path, *flows)), "--format", "otlp", "-o", str(out)]) == 0
    spans = spans_of(from_otlp_json(json.loads(out.read_text(encoding="utf-8"))))
    return {str(attributes(s).get("jsonrpc.request.id") or attributes(s)["mcp.method.name"]): s for s in spans}


def unit_trace(tmp_path: Path, rpc_id: str) -> bytes:
    """The trace id a call's span has without a parent: its client unit's (as before this feature)."""
    (call,) = [c for c in analyze([tmp_path / "capture.flows"]).calls if str(c["jsonrpc_id"]) == rpc_id]
    return trace_id_of(call["client"]["unit"]).to_bytes(16, "big")


def assert_joined(span: Span, trace: str, parent: str, state: str, carrier: str) -> None:
    assert span.trace_id.hex() == trace
    assert span.parent_span_id.hex() == parent
    assert span.trace_state == state
    assert span.flags & (HAS_IS_REMOTE | IS_REMOTE) == HAS_IS_REMOTE | IS_REMOTE
    assert attributes(span)["mcp.blackbox.trace_parent"] == carrier
    # The span's own id is still the digest of the stable call id: exporting again gives the same.
    assert span.span_id == span_id_of(attributes(span)["mcp.blackbox.call_id"]).to_bytes(8, "big")


def assert_root(tmp_path: Path, span: Span, rpc_id: str) -> None:
    assert not span.parent_span_id and span.trace_state == ""
    assert span.trace_id == unit_trace(tmp_path, rpc_id)
    assert span.flags & IS_REMOTE == 0
    assert "mcp.blackbox.trace_parent" not in attributes(span)


def answered(message: dict[str, Any], **kw: Any) -> HTTPFlow:
    return exchange(message, body=result(message["id"], text_result("done")), **kw)


def test_meta_traceparent_and_tracestate_make_the_span_a_child_of_the_senders_span(tmp_path: Path) -> None:
    spans = export(
        tmp_path,
        answered(tool_call(1, "joined", traceparent=VALID, tracestate=STATE)),
        answered(tool_call(2, "alone")),
    )
    assert_joined(spans["1"], TRACE, PARENT, STATE, "params._meta")
    assert_root(tmp_path, spans["2"], "2")


def test_the_http_header_traceparent_and_tracestate(tmp_path: Path) -> None:
    headers = {"traceparent": VALID, "tracestate": STATE}
    spans = export(tmp_path, answered(tool_call(1, "joined"), request_headers=headers))
    assert_joined(spans["1"], TRACE, PARENT, STATE, "http.header")


def test_meta_wins_over_a_different_header_and_the_tracestate_is_its_own(tmp_path: Path) -> None:
    headers = {"traceparent": OTHER, "tracestate": "header=1"}
    spans = export(
        tmp_path,
        answered(tool_call(1, "both", traceparent=VALID), request_headers=headers),
        answered(tool_call(2, "both-with-state", traceparent=VALID, tracestate=STATE), request_headers=headers),
    )
    # The header's tracestate belongs to the header's traceparent: never put on _meta's.
    assert_joined(spans["1"], TRACE, PARENT, "", "params._meta")
    assert_joined(spans["2"], TRACE, PARENT, STATE, "params._meta")


def test_an_invalid_meta_traceparent_is_absent_so_the_header_counts(tmp_path: Path) -> None:
    headers = {"traceparent": OTHER, "tracestate": "header=1"}
    spans = export(tmp_path, answered(tool_call(1, "x", traceparent=INVALID["version ff"]), request_headers=headers))
    assert_joined(spans["1"], OTHER_TRACE, OTHER_PARENT, "header=1", "http.header")


@pytest.mark.parametrize("value", INVALID.values(), ids=INVALID.keys())
def test_an_invalid_traceparent_is_ignored_in_meta_and_in_the_header(tmp_path: Path, value: str) -> None:
    assert parse_traceparent(value) is None
    spans = export(
        tmp_path,
        answered(tool_call(1, "meta", traceparent=value, tracestate=STATE)),
        answered(tool_call(2, "header"), request_headers={"traceparent": value, "tracestate": STATE}),
    )
    assert_root(tmp_path, spans["1"], "1")
    assert_root(tmp_path, spans["2"], "2")


@pytest.mark.parametrize("value", VALID_TWINS.values(), ids=VALID_TWINS.keys())
def test_the_valid_twins_are_taken(tmp_path: Path, value: str) -> None:
    assert parse_traceparent(value) == (int(TRACE, 16), int(PARENT, 16), int(value.split("-")[3], 16))
    spans = export(
        tmp_path,
        answered(tool_call(1, "meta", traceparent=value)),
        answered(tool_call(2, "header"), request_headers={"traceparent": value}),
    )
    assert_joined(spans["1"], TRACE, PARENT, "", "params._meta")
    assert_joined(spans["2"], TRACE, PARENT, "", "http.header")


def test_not_a_string_in_meta_and_two_traceparent_headers_are_ignored(tmp_path: Path) -> None:
    twice = answered(tool_call(2, "header twice"), request_headers={"traceparent": VALID})
    twice.request.headers.add("traceparent", OTHER)  # two values: which one is meant is unknown
    spans = export(tmp_path, answered(tool_call(1, "number", traceparent=123, tracestate=STATE)), twice)
    assert_root(tmp_path, spans["1"], "1")
    assert_root(tmp_path, spans["2"], "2")


@pytest.mark.parametrize(
    "state",
    [
        "rojo=1,rojo=2",  # a key twice
        "Rojo=1",  # an upper-case key
        "rojo=1,congo",  # a member without a value
        "rojo=a,b",  # , in a value is a new member without =
        ",".join(f"k{n}=v" for n in range(33)),  # more than 32 members
    ],
)
def test_an_invalid_tracestate_is_dropped_and_the_traceparent_kept(tmp_path: Path, state: str) -> None:
    assert parse_tracestate(state) == ()
    spans = export(tmp_path, answered(tool_call(1, "x", traceparent=VALID, tracestate=state)))
    assert_joined(spans["1"], TRACE, PARENT, "", "params._meta")


def test_tracestate_members_and_blanks(tmp_path: Path) -> None:
    assert parse_tracestate(" rojo=00f067aa0ba902b7 ,, tenant@vendor=x y ,") == (
        ("rojo", "00f067aa0ba902b7"),
        ("tenant@vendor", "x y"),
    )
    assert len(parse_tracestate(",".join(f"k{n}=v" for n in range(32)))) == 32


def test_a_servers_request_is_not_the_child_of_the_clients_http_header(tmp_path: Path) -> None:
    """A server's request to the client travels in the response to a client's POST: the POST's header is the
    client's context, not the server's request's. Its own _meta still counts."""
    asked = rpc("e1", "elicitation/create", {"message": "name?", "requestedSchema": {"type": "object"}})
    traced = rpc("e2", "sampling/createMessage", {"messages": [], "_meta": {"traceparent": OTHER}})
    spans = export(
        tmp_path,
        exchange(
            tool_call(1, "ask"),
            body=sse(asked, traced, result(1, text_result("done"))),
            content_type="text/event-stream",
            request_headers={"traceparent": VALID},
        ),
    )
    assert_joined(spans["1"], TRACE, PARENT, "", "http.header")
    assert spans["e1"].kind == Span.SPAN_KIND_SERVER
    assert_root(tmp_path, spans["e1"], "e1")
    assert_joined(spans["e2"], OTHER_TRACE, OTHER_PARENT, "", "params._meta")


def test_a_retry_links_to_the_attempt_before_in_the_trace_that_attempt_joined(tmp_path: Path) -> None:
    session = {"mcp-session-id": "s1", "user-agent": "client/1"}
    first = tool_call(2, "lookup", traceparent=VALID)
    again = tool_call(3, "lookup", traceparent=OTHER)
    spans = export(
        tmp_path,
        exchange(rpc(1, "tools/list"), body=result(1, {"tools": [{"name": "lookup"}]}), request_headers=session),
        exchange(first, status=503, body=b"busy", content_type="text/plain", request_headers=session),
        answered(again, request_headers=session),
    )
    assert attributes(spans["3"])["mcp.blackbox.retry.attempt"] == 2
    (link,) = spans["3"].links
    assert (link.trace_id, link.span_id) == (spans["2"].trace_id, spans["2"].span_id)
    assert link.trace_id.hex() == TRACE
    assert_joined(spans["3"], OTHER_TRACE, OTHER_PARENT, "", "params._meta")
    # The call without a traceparent is in its unit's trace, as before.
    assert_root(tmp_path, spans["1"], "1")
