"""OpenTelemetry out (analyzer/outputs/otlp.py): what `export --otlp-endpoint` POSTs, decoded by a receiver
in the test with opentelemetry-proto, and what `export --format otlp` writes, read back with protobuf's
json_format."""

from __future__ import annotations

import gzip
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.model.vocabulary import Outcome, is_failure
from mcp_blackbox.analyzer.outputs.otlp import INSTALL_HINT, from_otlp_json, span_name
from mcp_blackbox.cli.main import main
from tests.analyzer.flows import error, exchange, result, rpc, text_result, tool_call, write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_captures"
CAPTURES = sorted(SAMPLES.glob("*.flows"))


class Receiver:
    """An OTLP/HTTP traces endpoint on 127.0.0.1: keeps each ExportTraceServiceRequest POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.content_types.append(self.headers.get("content-type", ""))
                if receiver.status != 200:
                    self.send_response(receiver.status)
                    self.end_headers()
                    return
                receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Span]:
        return [span for request in self.requests for span in spans_of(request)]


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def attributes(span: Span | Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            out[kv.key] = getattr(value, kind)
    return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    # A short poll: shutdown() waits for the loop's next look, 0.5 s by default, in every test's teardown.
    thread = threading.Thread(target=receiver.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(5)


def sent(receiver: Receiver, *captures: Path | str, extra: tuple[str, ...] = ()) -> list[Span]:
    before = len(receiver.requests)
    assert main(["export", *map(str, captures), "--otlp-endpoint", receiver.url, *extra]) == 0
    return [span for request in receiver.requests[before:] for span in spans_of(request)]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_one_span_per_call_with_the_conventions_name_kind_and_status(receiver: Receiver, capture: Path) -> None:
    calls = analyze([capture]).calls
    spans = sent(receiver, capture)
    assert receiver.content_types and set(receiver.content_types) == {"application/x-protobuf"}
    assert len(spans) == len(calls)
    for call, span in zip(calls, spans, strict=True):
        found = attributes(span)
        assert span.name == span_name(call)
        assert found["mcp.blackbox.call_id"] == call["call_id"]
        assert found["mcp.blackbox.outcome"] == call["outcome"]
        assert found.get("mcp.method.name") == call["method"]
        if call["method"] == "tools/call":
            assert span.name == f"tools/call {call['tool']}"
            assert found["gen_ai.tool.name"] == call["tool"]
            assert found["gen_ai.operation.name"] == "execute_tool"
        if call["jsonrpc_id"] is not None:
            assert found["jsonrpc.request.id"] == str(call["jsonrpc_id"])
        if call["session_id"]:
            assert found["mcp.session.id"] == call["session_id"]
        if call["protocol_version"]:
            assert found["mcp.protocol.version"] == call["protocol_version"]
        if call["http_status"] is not None:
            assert found["http.response.status_code"] == call["http_status"]
        assert found["network.transport"] == "tcp"
        assert found["server.address"] == "127.0.0.1" and isinstance(found["server.port"], int)
        if call["direction"] == "client->server" and call["method"] is not None:
            assert span.kind == Span.SPAN_KIND_CLIENT
        elif call["method"] is not None:
            assert span.kind == Span.SPAN_KIND_SERVER  # a server's request, served by the client
        # The one rule for failure: Outcome.is_failure.
        failed = is_failure(call["outcome"])
        assert (span.status.code == Status.STATUS_CODE_ERROR) is failed
        assert ("error.type" in found) is failed
        assert span.start_time_unix_nano == round(call["t_start"] * 1e6) * 1000
        if call["t_end"] is not None:
            assert span.end_time_unix_nano == round(call["t_end"] * 1e6) * 1000


def test_error_types_jsonrpc_code_tool_error_http_status_and_outcome(receiver: Receiver, tmp_path: Path) -> None:
    session = {"mcp-session-id": "s1"}
    capture = write(
        tmp_path,
        exchange(rpc(1, "initialize", {}), body=result(1, {"protocolVersion": "2025-11-25"}), response_headers=session),
        exchange(tool_call(2, "bad"), body=error(2, -32602, "no such argument"), request_headers=session),
        exchange(tool_call(3, "fails"), body=result(3, text_result("boom", isError=True)), request_headers=session),
        exchange(tool_call(4, "busy"), status=503, body=b"overloaded", content_type="text/plain"),
        exchange(tool_call(5, "gone"), status=None, error_message="Connection reset by peer"),
    )
    spans = {span.name: span for span in sent(receiver, capture)}
    bad, fails = attributes(spans["tools/call bad"]), attributes(spans["tools/call fails"])
    busy, gone = attributes(spans["tools/call busy"]), attributes(spans["tools/call gone"])
    assert bad["error.type"] == bad["rpc.response.status_code"] == "-32602"
    assert spans["tools/call bad"].status.message == "no such argument"  # JSONRPCError.message
    assert fails["error.type"] == "tool_error" and "rpc.response.status_code" not in fails
    assert busy["error.type"] == "503" and busy["mcp.blackbox.outcome"] == Outcome.HTTP_ERROR
    assert gone["error.type"] == Outcome.NO_RESPONSE == gone["mcp.blackbox.outcome"]
    assert "http.response.status_code" not in gone
    assert gone["mcp.blackbox.ending.ended_by"]
    # How the call without an answer ended is an event (the timeout anatomy).
    assert [e.name for e in spans["tools/call gone"].events][-1] == "mcp.blackbox.ending"
    assert attributes(spans["initialize"])["mcp.session.id"] == "s1"
    assert spans["initialize"].status.code == Status.STATUS_CODE_UNSET


def test_the_retry_after_503_links_to_the_attempt_before(receiver: Receiver) -> None:
    capture = SAMPLES / "py-app-retry-after-503.flows"
    calls = analyze([capture]).calls
    spans = sent(receiver, capture)
    by_call = {attributes(s)["mcp.blackbox.call_id"]: s for s in spans}
    retried = [c for c in calls if c["retry_group"] and c["attempt"] > 1]
    assert retried, "the sample has a retry"
    for call in retried:
        span = by_call[call["call_id"]]
        first = next(
            c for c in calls if c["retry_group"] == call["retry_group"] and c["attempt"] == call["attempt"] - 1
        )
        (link,) = span.links
        assert (link.trace_id, link.span_id) == (by_call[first["call_id"]].trace_id, by_call[first["call_id"]].span_id)
        linked = attributes(link)
        assert linked["mcp.blackbox.retry.origin"] == call["retry_origin"]
        assert linked["mcp.blackbox.call_id"] == first["call_id"]
        assert attributes(span)["mcp.blackbox.retry.attempt"] == call["attempt"]
        assert by_call[first["call_id"]].status.code == Status.STATUS_CODE_ERROR
        assert attributes(by_call[first["call_id"]])["error.type"] == "503"
    assert all(
        not s.links for s in spans if attributes(s)["mcp.blackbox.call_id"] not in {c["call_id"] for c in retried}
    )


def test_one_trace_per_client_unit(receiver: Receiver) -> None:
    capture = SAMPLES / "py-app-retry-after-503.flows"
    calls = analyze([capture]).calls
    spans = sent(receiver, capture)
    units = {c["call_id"]: c["client"]["unit"] for c in calls}
    traces: dict[str, set[bytes]] = {}
    for span in spans:
        traces.setdefault(units[attributes(span)["mcp.blackbox.call_id"]], set()).add(span.trace_id)
    assert all(len(ids) == 1 for ids in traces.values())
    assert len({next(iter(ids)) for ids in traces.values()}) == len(traces) == 2  # two sessions
    assert all(not span.parent_span_id for span in spans)


@pytest.mark.parametrize("name", ["plain-mitmdump-progress", "py-2025-session-tools"])
def test_progress_notifications_are_span_events(receiver: Receiver, name: str) -> None:
    spans = sent(receiver, SAMPLES / f"{name}.flows")
    progress = [(s, e) for s in spans for e in s.events if e.name == "notifications/progress"]
    assert progress
    for span, event in progress:
        assert span.start_time_unix_nano <= event.time_unix_nano
        assert attributes(event)["mcp.method.name"] == "notifications/progress"
    answered = [s for s in spans if any(e.name == "mcp.blackbox.response" for e in s.events)]
    assert answered


def test_ids_are_the_same_in_every_export_and_the_file_is_what_was_sent(receiver: Receiver, tmp_path: Path) -> None:
    capture = SAMPLES / "py-2025-session-tools.flows"
    first, second = sent(receiver, capture), sent(receiver, capture)
    assert [(s.trace_id, s.span_id) for s in first] == [(s.trace_id, s.span_id) for s in second]
    assert len({s.span_id for s in first}) == len(first)
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["export", str(capture), "--format", "otlp", "-o", str(out_a)]) == 0
    assert main(["export", str(capture), "--format", "otlp", "-o", str(out_b)]) == 0
    assert out_a.read_bytes() == out_b.read_bytes()
    document = json.loads(out_a.read_text(encoding="utf-8"))
    # OTLP/JSON: hex ids, enums as integers, lowerCamelCase.
    raw = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(raw["traceId"]) == 32 and len(raw["spanId"]) == 16 and int(raw["traceId"], 16)
    assert raw["kind"] == Span.SPAN_KIND_CLIENT
    from_file = spans_of(from_otlp_json(document))
    assert [s.SerializeToString(deterministic=True) for s in from_file] == [
        s.SerializeToString(deterministic=True) for s in first
    ]
    service = {kv.key: kv.value.string_value for kv in from_otlp_json(document).resource_spans[0].resource.attributes}
    assert service["service.name"] == "mcp-blackbox" and "service.instance.id" not in service


def test_evidence_and_messages_redacted_unless_no_redact(receiver: Receiver, tmp_path: Path) -> None:
    capture = write(
        tmp_path, exchange(tool_call(1, "db"), body=error(1, -32603, "login failed: api_key=sk-abcdef123456"))
    )
    (span,) = sent(receiver, capture)
    assert "sk-abcdef123456" not in span.SerializeToString().decode("utf-8", "replace")
    assert "[redacted" in attributes(span)["mcp.blackbox.reason"] and "[redacted" in span.status.message
    (kept,) = sent(receiver, capture, extra=("--no-redact",))
    assert "sk-abcdef123456" in attributes(kept)["mcp.blackbox.reason"]


def test_a_collector_that_refuses_is_exit_1(receiver: Receiver, capsys: pytest.CaptureFixture[str]) -> None:
    receiver.status = 400
    assert main(["export", str(CAPTURES[0]), "--otlp-endpoint", receiver.url]) == 1
    assert "did not take the spans" in capsys.readouterr().err


def test_otlp_endpoint_is_not_for_another_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(CAPTURES[0]), "--format", "csv", "--otlp-endpoint", "http://127.0.0.1:1"]) == 2
    assert "--otlp-endpoint" in capsys.readouterr().err


def test_without_the_extra_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    assert main(["export", str(CAPTURES[0]), "--format", "otlp"]) == 2
    err = capsys.readouterr().err
    assert INSTALL_HINT in err and "Traceback" not in err
