"""The addon's hooks, driven with mitmproxy's own test helpers."""

from __future__ import annotations

import gzip
import io

import pytest
from mitmproxy import exceptions
from mitmproxy import io as flow_io
from mitmproxy.http import Headers, HTTPFlow
from mitmproxy.test import taddons, tflow, tutils

from mcp_blackbox.addon.mcp_recorder import FAILURE_MARKER, METADATA_KEY, McpRecorder, stream_end_reason
from mcp_blackbox.addon.stream_tap import StreamTap

PROGRESS = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'
RESULT = b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}\n\n'
TOOL_CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}'


def sse_flow(request_body: bytes = TOOL_CALL, **response_headers: str) -> HTTPFlow:
    flow = tflow.tflow(req=tutils.treq(method=b"POST", path=b"/mcp", content=request_body))
    headers = Headers(content_type="text/event-stream", **response_headers)
    flow.response = tutils.tresp(headers=headers, content=None)
    return flow


def stream(recorder: McpRecorder, flow: HTTPFlow, chunks: list[bytes]) -> list[bytes]:
    """Run the chunks through the stream callable the addon installed, as mitmproxy does."""
    recorder.responseheaders(flow)
    tap = flow.response.stream
    assert callable(tap)
    forwarded = []
    for chunk in [*chunks, b""]:
        out = tap(chunk)
        forwarded.extend([out] if isinstance(out, bytes) else out)
    return [c for c in forwarded if c]


def roundtrip(flow: HTTPFlow) -> HTTPFlow:
    """Write and read the flow as mitmdump -w would: metadata must be JSON-like."""
    buffer = io.BytesIO()
    flow_io.FlowWriter(buffer).add(flow)
    buffer.seek(0)
    (read,) = list(flow_io.FlowReader(buffer).stream())
    return read


def test_stream_passes_through_unchanged_and_body_is_restored(recorder: McpRecorder) -> None:
    flow = sse_flow()
    chunks = [PROGRESS[:10], PROGRESS[10:] + RESULT[:5], RESULT[5:]]
    assert stream(recorder, flow, chunks) == chunks
    recorder.response(flow)
    saved = roundtrip(flow)
    assert saved.response.raw_content == PROGRESS + RESULT
    record = saved.metadata[METADATA_KEY]
    assert record["mcp"] == "JSON-RPC request body"
    assert record["failure"] is None and not saved.marked
    meta = record["stream"]
    assert [size for _, size in meta["chunks"]] == [len(c) for c in chunks]
    assert meta["ended"] == "complete" and meta["bytes"] == len(PROGRESS + RESULT)
    # Each event arrived with the chunk that closed it.
    assert meta["event_times"] == [meta["chunks"][1][0], meta["chunks"][2][0]]
    assert recorder.open_streams == {}


def test_cut_stream_keeps_partial_body_and_reason(recorder: McpRecorder) -> None:
    flow = sse_flow()
    stream(recorder, flow, [PROGRESS])
    flow.error = tflow.terr("HTTP/1 protocol error: peer closed connection without sending complete message body")
    recorder.error(flow)
    saved = roundtrip(flow)
    assert saved.response.raw_content == PROGRESS
    meta = saved.metadata[METADATA_KEY]["stream"]
    assert meta["ended"] == "upstream-error" and "peer closed" in meta["error"]
    assert saved.marked == FAILURE_MARKER
    assert saved.comment.startswith("MCP: STREAM_INCOMPLETE:") and "stream ended: upstream-error" in saved.comment


def test_stream_without_final_response_is_a_failure(recorder: McpRecorder) -> None:
    flow = sse_flow()
    stream(recorder, flow, [PROGRESS])
    recorder.response(flow)
    failure = flow.metadata[METADATA_KEY]["failure"]
    assert failure.startswith("STREAM_INCOMPLETE: 1 events, no final response"), failure


def test_stream_closed_by_the_client_after_the_answer_is_no_failure(recorder: McpRecorder) -> None:
    """SDKs close the stream once the final event is in: mitmproxy calls that a client abort."""
    flow = sse_flow()
    stream(recorder, flow, [PROGRESS, RESULT])
    flow.error = tflow.terr("Client disconnected.")
    recorder.error(flow)
    record = flow.metadata[METADATA_KEY]
    assert record["stream"]["ended"] == "client-abort"
    assert record["failure"] is None and record["pending"] is None
    assert not flow.marked and not flow.comment


def test_cut_stream_with_an_event_id_is_pending_not_failed(recorder: McpRecorder) -> None:
    """The client can resume it with Last-Event-ID and still get the answer on a GET."""
    flow = sse_flow()
    stream(recorder, flow, [b"id: ev-1\n" + PROGRESS])
    flow.error = tflow.terr("peer closed connection without sending complete message body")
    recorder.error(flow)
    record = flow.metadata[METADATA_KEY]
    assert record["failure"] is None and "before the answer; it can be resumed" in record["pending"]
    assert not flow.marked


def test_cut_2026_stream_is_a_failure_even_with_an_event_id(recorder: McpRecorder) -> None:
    """2026-07-28 has no resumption: closing the stream cancels the request."""
    flow = sse_flow()
    flow.request.headers["mcp-protocol-version"] = "2026-07-28"
    stream(recorder, flow, [b"id: ev-1\n" + PROGRESS])
    flow.error = tflow.terr("peer closed connection without sending complete message body")
    recorder.error(flow)
    record = flow.metadata[METADATA_KEY]
    assert record["pending"] is None and record["failure"].startswith("STREAM_INCOMPLETE:")
    assert flow.marked == FAILURE_MARKER


def test_live_reason_quoting_the_server_is_redacted(recorder: McpRecorder) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"upstream refused access_token=SECRET12345"}}'
    flow = tflow.tflow(
        req=tutils.treq(method=b"POST", content=TOOL_CALL),
        resp=tutils.tresp(headers=Headers(content_type="application/json"), content=body),
    )
    recorder.response(flow)
    assert "SECRET12345" not in flow.metadata[METADATA_KEY]["failure"] and "SECRET12345" not in flow.comment
    assert "access_token=[redacted" in flow.comment


def test_request_answered_202_is_pending(recorder: McpRecorder) -> None:
    flow = tflow.tflow(
        req=tutils.treq(method=b"POST", path=b"/messages?session_id=abc", content=TOOL_CALL),
        resp=tutils.tresp(status_code=202, headers=Headers(), content=b"Accepted"),
    )
    recorder.response(flow)
    record = flow.metadata[METADATA_KEY]
    assert record["failure"] is None and record["pending"].startswith("202 Accepted")
    assert not flow.marked


def test_refused_get_stream_is_no_call_and_no_failure(recorder: McpRecorder) -> None:
    """A 405 on the session's GET stream is an event of that stream, not a failed call."""
    flow = tflow.tflow(
        req=tutils.treq(method=b"GET", path=b"/mcp", headers=Headers(mcp_session_id="s1"), content=b""),
        resp=tutils.tresp(status_code=405, headers=Headers(content_type="application/json"), content=b"{}"),
    )
    recorder.response(flow)
    assert flow.metadata[METADATA_KEY]["failure"] is None and not flow.marked


def test_open_streams_are_closed_at_shutdown(recorder: McpRecorder) -> None:
    flow = sse_flow()
    recorder.responseheaders(flow)
    flow.response.stream(PROGRESS)
    recorder.done()
    meta = roundtrip(flow).metadata[METADATA_KEY]["stream"]
    assert meta["ended"] == "proxy-shutdown" and flow.response.raw_content == PROGRESS


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("peer closed connection without sending complete message body", "upstream-error"),
        ("Client disconnected.", "client-abort"),
        ("Connection killed.", "killed"),
    ],
)
def test_stream_end_reasons(message: str, reason: str) -> None:
    assert stream_end_reason(message) == reason


def test_memory_bound_drops_the_rest_and_says_so(recorder: McpRecorder) -> None:
    with taddons.context(recorder) as tctx:
        tctx.configure(recorder, mcp_stream_max_body="100", mcp_console=False)
        flow = sse_flow()
        chunks = [PROGRESS] * 5
        assert stream(recorder, flow, chunks) == chunks, "the client still gets everything"
        recorder.response(flow)
    meta = flow.metadata[METADATA_KEY]["stream"]
    assert len(flow.response.raw_content) == meta["stored_bytes"] == 100
    assert meta["dropped_bytes"] == 5 * len(PROGRESS) - 100


def test_json_responses_are_annotated_and_failures_marked(recorder: McpRecorder) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}'
    flow = tflow.tflow(
        req=tutils.treq(method=b"POST", content=TOOL_CALL),
        resp=tutils.tresp(headers=Headers(content_type="application/json"), content=body),
    )
    recorder.responseheaders(flow)
    assert flow.response.stream is False, "JSON is not streamed"
    recorder.response(flow)
    assert flow.metadata[METADATA_KEY]["failure"] == "JSONRPC_ERROR: JSON-RPC error -32602: bad"
    assert flow.marked == FAILURE_MARKER


def test_session_streams_are_recognised_by_endpoint(recorder: McpRecorder) -> None:
    post = sse_flow()
    stream(recorder, post, [RESULT])
    recorder.response(post)
    get = tflow.tflow(req=tutils.treq(method=b"GET", path=b"/mcp", content=b""))
    get.response = tutils.tresp(headers=Headers(content_type="text/event-stream"), content=None)
    stream(recorder, get, [PROGRESS])
    recorder.response(get)
    assert get.metadata[METADATA_KEY]["mcp"] == "known MCP endpoint"


def test_other_traffic_is_left_alone(recorder: McpRecorder) -> None:
    flow = tflow.tflow(req=tutils.treq(path=b"/index.html", content=b"<html>"), resp=True)
    before = flow.get_state()
    recorder.responseheaders(flow)
    recorder.response(flow)
    assert flow.get_state() == before


def test_filter_narrows_what_is_annotated(recorder: McpRecorder) -> None:
    with taddons.context(recorder) as tctx:
        tctx.configure(recorder, mcp_filter="~d elsewhere.example", mcp_console=False)
        flow = tflow.tflow(req=tutils.treq(method=b"POST", content=TOOL_CALL), resp=True)
        recorder.response(flow)
    assert METADATA_KEY not in flow.metadata and not flow.marked


def test_bad_options_are_refused(recorder: McpRecorder) -> None:
    with taddons.context(recorder) as tctx:
        with pytest.raises(exceptions.OptionsError, match="mcp_filter"):
            tctx.configure(recorder, mcp_filter="~~~(")
        with pytest.raises(exceptions.OptionsError, match="mcp_stream_max_body"):
            tctx.configure(recorder, mcp_stream_max_body="lots")


GARBAGE_BODIES = [
    b"\x00\xff\xfe binary \x89PNG\r\n",
    b'{"jsonrpc": "2.0", "id": [1], "method": 5',
    b"\xff\xfe\xfd" * 100,
    b'[1, "two", {"jsonrpc": "2.0"}]',
]


@pytest.mark.parametrize("garbage", GARBAGE_BODIES)
def test_garbage_never_raises_and_passes_through(recorder: McpRecorder, garbage: bytes) -> None:
    flow = sse_flow(request_body=garbage)
    assert stream(recorder, flow, [garbage, garbage[:3]]) == [garbage, garbage[:3]]
    recorder.response(flow)
    assert flow.response.raw_content == garbage + garbage[:3]
    roundtrip(flow)


def test_gzip_event_stream_is_kept_raw_and_decoded_for_the_summary(recorder: McpRecorder) -> None:
    compressed = gzip.compress(PROGRESS + RESULT)
    flow = sse_flow(content_encoding="gzip")
    assert stream(recorder, flow, [compressed[:7], compressed[7:]]) == [compressed[:7], compressed[7:]]
    recorder.response(flow)
    saved = roundtrip(flow)
    assert saved.response.raw_content == compressed
    assert saved.response.get_content() == PROGRESS + RESULT
    record = saved.metadata[METADATA_KEY]
    assert record["stream"]["event_times"] is None, "compressed bytes cannot be framed"
    assert record["failure"] is None


def test_hooks_survive_missing_parts(recorder: McpRecorder) -> None:
    flow = tflow.tflow(req=tutils.treq(content=None, headers=Headers()))
    flow.response = None
    recorder.responseheaders(flow)
    recorder.response(flow)
    flow.error = None
    recorder.error(flow)
    recorder.done()
    broken_gzip = sse_flow(content_encoding="gzip")
    stream(recorder, broken_gzip, [b"not gzip at all"])
    recorder.response(broken_gzip)
    assert broken_gzip.response.raw_content == b"not gzip at all"


def test_tap_forwards_even_when_the_callable_before_it_fails() -> None:
    def broken(_chunk: bytes) -> bytes:
        raise RuntimeError("boom")

    tap = StreamTap(None, upstream=broken)
    assert tap(b"data: x\n\n") == b"data: x\n\n"
    assert tap.failures == 1


def test_tap_chains_a_previous_stream_callable() -> None:
    tap = StreamTap(None, upstream=lambda chunk: [chunk, chunk])
    assert tap(b"ab") == [b"ab", b"ab"]
    assert bytes(tap.body) == b"abab" and tap.total_bytes == 4
