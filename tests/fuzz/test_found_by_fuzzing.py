"""What property-based fuzzing found, each failing example kept as a plain test (not marked fuzz).

Addon: a hook that raised logged "traffic is unaffected" and left the flow unannotated (or its stream
record lost); analyzer: `analyze`, the report or an export raised, or a secret reached an export.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from mitmproxy.http import Headers, HTTPFlow
from mitmproxy.io import tnetstring
from mitmproxy.test import tflow, tutils

from mcp_blackbox.addon.mcp_recorder import METADATA_KEY, McpRecorder
from mcp_blackbox.addon.stream_tap import StreamTap
from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.calls.schema_check import check_structured_content
from mcp_blackbox.analyzer.model.slim import reads_like_error
from mcp_blackbox.analyzer.outputs.export import write_csv, write_json
from mcp_blackbox.analyzer.read.extract import decode_body
from mcp_blackbox.analyzer.redaction.redact import redact_text, redact_url
from mcp_blackbox.analyzer.review.report import build_report, write_report
from mcp_blackbox.analyzer.wire.sse_framing import split_sse
from mcp_blackbox.analyzer.wire.tnetstring_reader import READ_PIECE, read_record
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write
from tests.fuzz import properties

TOOL_CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}'
RESULT = b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}\n\n'
DEEP = b"[" * 100_000  # deeper than json.loads goes: RecursionError, not ValueError
DEEP_RPC = b'{"jsonrpc": "2.0", "id": ' + DEEP  # the addon parses a body only if it names "jsonrpc" early

# ---------------------------------------------------------------- the addon


def exchange_through(recorder: McpRecorder, flow: HTTPFlow, chunks: list[bytes] | None = None) -> dict:
    recorder.responseheaders(flow)
    if chunks is not None:
        for chunk in [*chunks, b""]:
            flow.response.stream(chunk)
    recorder.response(flow)
    return flow.metadata[METADATA_KEY]


def post(content: bytes, path: bytes = b"/mcp", **headers: str) -> HTTPFlow:
    request = tutils.treq(method=b"POST", path=path, content=content, headers=Headers(**headers))
    return tflow.tflow(req=request, resp=tutils.tresp(headers=Headers(content_type="application/json")))


def sse(request: bytes = TOOL_CALL, method: bytes = b"POST") -> HTTPFlow:
    flow = tflow.tflow(req=tutils.treq(method=method, path=b"/mcp", content=request))
    flow.response = tutils.tresp(headers=Headers(content_type="text/event-stream"), content=None)
    return flow


def test_a_codec_that_is_no_content_encoding(recorder: McpRecorder) -> None:
    """mitmproxy's get_content(strict=False) raises TypeError for rot13 (text to text)."""
    record = exchange_through(recorder, post(TOOL_CALL, content_encoding="rot13"))
    assert record["mcp"] == "JSON-RPC request body", "read as it came"


def test_a_failing_stream_callable_before_ours_still_leaves_the_chunk_recorded() -> None:
    def broken(_chunk: bytes) -> bytes:
        raise RuntimeError("an addon before us failed")

    tap = StreamTap(None, upstream=broken)
    assert tap(b"\x00") == b"\x00"
    assert bytes(tap.body) == b"\x00" and tap.total_bytes == 1 and tap.failures == 1


def test_a_path_that_is_no_url(recorder: McpRecorder) -> None:
    """request.query parses request.url, which raises "Invalid IPv6 URL" for this path."""
    assert exchange_through(recorder, post(TOOL_CALL, path=b"x[y"))["mcp"] == "JSON-RPC request body"


def test_a_body_nested_deeper_than_the_json_parser_goes(recorder: McpRecorder) -> None:
    flow = post(DEEP_RPC, mcp_protocol_version="2025-11-25")
    assert exchange_through(recorder, flow)["mcp"] == "request header mcp-protocol-version"


@pytest.mark.parametrize("retry", [b"\xc2\xb2", b"9" * 5000])
def test_a_retry_field_that_int_refuses(recorder: McpRecorder, retry: bytes) -> None:
    """str.isdigit() takes "²"; int() refuses it, and 5,000 digits too."""
    events, _ = split_sse(b"retry: " + retry + b"\ndata: x\n\n")
    assert [e.retry for e in events] == [None]
    record = exchange_through(recorder, sse(), [b"retry: " + retry + b"\n\n" + RESULT])
    assert len(record["stream"]["event_times"]) == 2


@pytest.mark.parametrize("endpoint", [b"http://[::1", b"http://h:99999/x"])
def test_an_endpoint_event_that_is_no_url(recorder: McpRecorder, endpoint: bytes) -> None:
    record = exchange_through(recorder, sse(b"", b"GET"), [b"event: endpoint\ndata: " + endpoint + b"\n\n"])
    assert record["mcp"] == "HTTP+SSE endpoint event"


# ---------------------------------------------------------------- the analyzer


def check_outputs(paths: list[Path], tmp_path: Path) -> None:
    """The report, both exports and both text commands are written, as the command line writes them."""
    analysis = analyze(paths)
    assert analysis.flows_read == analysis.analyzed + len(analysis.skipped)
    write_report(paths, tmp_path / "report.html", analysis=analysis)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    start = page.index(properties.PAYLOAD_OPEN) + len(properties.PAYLOAD_OPEN)
    properties.strict_json(page[start : page.index("</script>", start)])  # as the page's JSON.parse reads it
    with open(tmp_path / "calls.csv", "w", newline="", encoding="utf-8") as f:
        write_csv(analysis, f)
    with open(tmp_path / "calls.json", "w", encoding="utf-8") as f:
        write_json(analysis, f)
    properties.strict_json((tmp_path / "calls.json").read_text(encoding="utf-8"))
    for command in ("summary", "check"):
        properties.run_cli([command, *map(str, paths)])


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"content-encoding": "rot13"}, b"{}"),  # TypeError from a text-to-text codec
        ({"content-encoding": "utf-8"}, b"{}"),  # a codec that gives text, not bytes
        ({"content-type": "application/json; charset=idna"}, b"\xff"),  # UnicodeError, even with "replace"
        ({"content-type": "application/json; charset=punycode"}, b"a..b"),
        ({"content-type": "application/json; charset=utf\x00"}, b"{}"),  # ValueError: embedded null
        ({"content-type": "text/event-stream; charset=raw_unicode_escape"}, b"data: \\ud800\n\n"),  # a surrogate
    ],
)
def test_bodies_no_codec_reads(headers: dict[str, str], body: bytes) -> None:
    text, _ = decode_body(body, headers)
    (text or "").encode("utf-8")


def test_json_nested_deeper_than_the_parser_goes(tmp_path: Path) -> None:
    capture = write(tmp_path, exchange(tool_call(1), body=DEEP))
    assert [c["outcome"] for c in analyze([capture]).calls] == ["MALFORMED_JSON"]
    check_outputs([capture], tmp_path)
    assert reads_like_error("{" + "[" * 100_000) is False
    assert redact_text("[" * 100_000).startswith("[")


@pytest.mark.parametrize(
    ("request_body", "response_body"),
    [
        (b'{"jsonrpc":"","id":Infinity,"":""}', None),  # Python's json reads NaN and Infinity; JSON has neither
        (None, b'{"jsonrpc":"2.0","id":NaN,"result":{}}'),
        (None, b'{"jsonrpc":"2.0","id":1e999,"result":{}}'),  # valid JSON, but a float reads it as infinity
    ],
)
def test_numbers_that_json_has_not(tmp_path: Path, request_body: bytes | None, response_body: bytes | None) -> None:
    flow = exchange(request_body or tool_call(1), body=response_body or result(1, text_result()))
    check_outputs([write(tmp_path, flow)], tmp_path)


def test_a_lone_surrogate_in_a_tool_name(tmp_path: Path) -> None:
    """A JSON "\\ud800" (JSON.stringify of a string cut inside a surrogate pair) cannot be written as UTF-8."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800"}}'
    capture = write(tmp_path, exchange(body, body=result(1, text_result())))
    assert analyze([capture]).calls[0]["tool"] == "\ud800"
    check_outputs([capture], tmp_path)


def test_a_path_that_is_no_url_in_the_report(tmp_path: Path) -> None:
    flow = exchange(tool_call(1), body=result(1, text_result()))
    flow.request.path = "x[y?token=abcdefgh"
    check_outputs([write(tmp_path, flow)], tmp_path)
    assert "abcdefgh" not in redact_url("http://127.0.0.1:8000x[y?token=abcdefgh")


def test_an_endpoint_event_that_is_no_url_in_the_analysis(tmp_path: Path) -> None:
    body = b"event: endpoint\ndata: http://[::1?sessionId=x\n\n"
    flow = exchange(None, method="GET", path="/sse", body=body, content_type="text/event-stream")
    check_outputs([write(tmp_path, flow)], tmp_path)


def test_a_record_nested_deeper_than_python_recurses(tmp_path: Path) -> None:
    record = b"0:~"
    for _ in range(3000):
        record = b"%d:%s]" % (len(record), record)
    good = tnetstring.dumps(exchange(tool_call(1), body=result(1, text_result())).get_state())
    capture = tmp_path / "deep.flows"
    capture.write_bytes(record + good)
    analysis = analyze([capture])
    assert analysis.flows_read == 2 and len(analysis.skipped) == 1 and analysis.analyzed == 1


def test_a_length_prefix_of_25_gigabytes_is_not_read_at_once() -> None:
    asked: list[int] = []

    class Spy(io.BufferedReader):
        def read(self, size: int | None = -1) -> bytes:
            asked.append(size if size is not None else -1)
            return super().read(size)

    with contextlib.suppress(ValueError):
        read_record(Spy(io.BytesIO(b"25276514520:" + b"x" * 100)))
    assert max(asked) <= READ_PIECE


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("request", "content"), True),
        (("response", "content"), "text, not bytes"),
        (("response", "timestamp_end"), float("nan")),
        (("response", "timestamp_end"), 10**400),
        (("metadata", METADATA_KEY), {"version": 1, "stream": {"event_times": "not a list"}}),
        (("metadata", METADATA_KEY), {"version": 1, "stream": {"ended": float("inf")}}),  # quoted in the report
        (("id",), ["a", "list"]),  # the flow id keys the report's details
    ],
)
def test_a_flow_record_with_a_value_of_the_wrong_type(tmp_path: Path, where: tuple[str, ...], value: object) -> None:
    state = exchange(tool_call(1), body=("data: " + json.dumps(result(1, text_result())) + "\n\n").encode(),
                     content_type="text/event-stream").get_state()  # fmt: skip
    parent = state
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = value
    capture = tmp_path / "typed.flows"
    capture.write_bytes(tnetstring.dumps(state))
    check_outputs([capture], tmp_path)


@pytest.mark.parametrize(("request_headers", "response_headers"), [
    ({"x-envoy-attempt-count": "²"}, {}),  # isdigit() takes "²", int() does not
    ({}, {"retry-after": "²"}),
])  # fmt: skip
def test_retry_headers_that_are_no_ascii_numbers(
    tmp_path: Path, request_headers: dict[str, str], response_headers: dict[str, str]
) -> None:
    failed = exchange(
        tool_call(1, "w"),
        status=429,
        body=b"slow down",
        content_type="text/plain",
        at=100.0,
        response_headers=response_headers,
    )
    again = exchange(tool_call(2, "w"), body=result(2, text_result()), request_headers=request_headers, at=101.0)
    check_outputs([write(tmp_path, failed, again)], tmp_path)  # fmt: skip


def test_output_schemas_that_are_odd(tmp_path: Path) -> None:
    odd = check_structured_content({"a": 1}, {"type": "object", "required": 5})
    assert odd.problems == () and odd.unchecked is not None
    schema, value = '{"type":"array"}', "[]"
    for _ in range(1200):  # one level of schema per level of value: deeper than Python recurses
        schema, value = '{"items":' + schema + "}", "[" + value + "]"
    tools = '{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"w","outputSchema":' + schema + "}]}}"
    answer = '{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":' + value + "}}"
    capture = write(tmp_path, exchange(rpc(1, "tools/list"), body=tools.encode(), at=10.0),
                    exchange(tool_call(2, "w"), body=answer.encode(), at=11.0))  # fmt: skip
    check_outputs([capture], tmp_path)


def test_an_id_nested_as_deep_as_the_parser_goes(tmp_path: Path) -> None:
    """The report and the export nest an id deeper than the body did: no JSON reader would read them."""
    body = b'{"jsonrpc":"2.0","id":' + b"[" * 1490 + b"]" * 1490 + b',"result":{}}'
    check_outputs([write(tmp_path, exchange(tool_call(1), body=body))], tmp_path)


def test_a_secret_field_in_a_cut_tool_answer() -> None:
    """The answer's text is cut after 100 characters (error_message, evidence): free text, no JSON to parse;
    "client_secret" did not match the free-text pattern (no word boundary after "_"), whatever the value."""
    secret = "0\x1f\x1f\x1f\x1f\x07\x07\U00010000"
    s = properties.Secrets(
        authorization="0000", cookie="0000", api_key_header="0000", api_key_query="0000", token_query="0000",
        password="0000", access_token="0000", client_secret=secret, padding=0, reads_like_error=True,
        is_error=True, stream=False,
    )  # fmt: skip
    outputs = properties.redacted_outputs(s)
    assert not [form for form in properties.leak_forms(secret) for text in outputs if form in text]
    assert redact_text('{"note": "", "client_secret": "ab cd') == '{"note": "", "client_secret": "[redacted 5 chars]"'


def test_a_query_parameter_with_a_blank_value_is_shown(tmp_path: Path) -> None:
    """parse_qsl() drops "debug=" unless told to keep blank values: the report's request line lost it."""
    flow = exchange(tool_call(1), body=result(1, text_result()))
    flow.request.path = "/mcp?debug=&page=1"
    data = build_report([write(tmp_path, flow)], redact=False)
    assert data["details"][data["calls"][0][0]]["exchanges"][0]["request"]["line"].endswith("/mcp?debug=&page=1")
