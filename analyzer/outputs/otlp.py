"""OpenTelemetry out: one span per call, as the MCP semantic conventions describe an MCP client span.

``export --format otlp`` writes OTLP/JSON (an ExportTraceServiceRequest in the protobuf JSON mapping, with
trace and span ids in hex as OTLP/JSON requires); ``export --otlp-endpoint URL`` POSTs OTLP/HTTP protobuf to
``URL/v1/traces``. The spans are made by the OpenTelemetry SDK and encoded by its OTLP exporter and
opentelemetry-proto, which are the optional extra ``mcp-blackbox[otlp]``.

Choices (docs/ARCHITECTURE.md, "OpenTelemetry"): one trace per client unit (an MCP session, a 2024-11-05 SSE
session, or outside sessions the TCP connection of a stateless client's run), every call a root span in it;
trace and span ids are digests of the unit and of the stable call id, so exporting the same capture again
gives the same ids. A call whose request carried a valid W3C ``traceparent`` (in ``params._meta``, else as
an HTTP request header) joins the sender's trace instead: that trace id, that span as its parent, its
``tracestate``. A retry attempt links to the attempt before it. Notifications, answers and how a call
without an answer ended are span events. The verdict and everything else the export has go in
``mcp.blackbox.*`` attributes, redacted as the export is.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from mcp_blackbox.analyzer.model.contract import CallRecord, ClientRecord, EndingRecord
from mcp_blackbox.analyzer.model.records import C2S, STDIO_SCHEME, Call, Message
from mcp_blackbox.analyzer.model.slim import TRACEPARENT, TRACEPARENT_LIMIT, TRACESTATE, TRACESTATE_LIMIT
from mcp_blackbox.analyzer.model.vocabulary import Outcome
from mcp_blackbox.analyzer.outputs.analysis import Analysis
from mcp_blackbox.analyzer.outputs.export import iter_records
from mcp_blackbox.analyzer.outputs.extras import install_hint, require_extra
from mcp_blackbox.analyzer.redaction.redactor import REDACTED, Redactor
from mcp_blackbox.analyzer.version import installed_version

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Link, SpanKind

INSTALL_HINT = install_hint("otlp")
TRACES_PATH = "/v1/traces"
BATCH = 512  # spans per OTLP request (the SDK's batch processor's default size)
SERVICE_NAME = "mcp-blackbox"  # unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names one
TOOL_ERROR = "tool_error"  # error.type for isError: true (the conventions' own value)
# OTLP/JSON differs from protobuf's JSON mapping in this only: these bytes fields are hex, not base64.
HEX_FIELDS = ("traceId", "spanId", "parentSpanId")


def require_otlp() -> None:
    """Raise ExtraMissing, saying how to install them, unless the SDK, the exporter and the protos import."""
    require_extra(
        "otlp",
        "OpenTelemetry export needs the OpenTelemetry SDK and OTLP exporter",
        (
            "opentelemetry.exporter.otlp.proto.http.trace_exporter",
            "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            "opentelemetry.sdk.trace",
        ),
    )


def trace_id_of(unit: str) -> int:
    """A 128-bit trace id from the client unit: the same unit, the same trace, in every export."""
    return _nonzero(hashlib.blake2b(f"mcp-blackbox trace\0{unit}".encode("utf-8", "surrogatepass"), digest_size=16))


def span_id_of(call_id: str) -> int:
    """A 64-bit span id from the stable call id (analyzer/across/call_ids.py)."""
    return _nonzero(hashlib.blake2b(f"mcp-blackbox span\0{call_id}".encode("utf-8", "surrogatepass"), digest_size=8))


def _nonzero(digest: Any) -> int:
    return int.from_bytes(digest.digest(), "big") or 1  # an all-zero id is invalid in OTLP


def trace_unit(call: Call) -> str:
    """What a trace is: the call's client unit (session, or connection outside sessions); else its scope."""
    return call.client.unit if call.client is not None else call.scope


# W3C Trace Context, level 1 (https://www.w3.org/TR/trace-context/): version-traceid-parentid-flags in lower-case
# hex; a later version may add fields after a dash. Optional blanks around the value (RFC 9110's OWS).
_TRACEPARENT = re.compile(r"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*", re.DOTALL)
# A tracestate list member: key=value, the key simple or tenant@system, the value printable ASCII without , and =.
_MEMBER = re.compile(
    r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
TRACESTATE_MEMBERS = 32  # at most, by the spec


@dataclass(frozen=True, slots=True)
class TraceParent:
    """The sender's span a call joins: from a valid W3C ``traceparent`` and, if valid, its ``tracestate``."""

    trace_id: int
    span_id: int
    flags: int
    state: tuple[tuple[str, str], ...]  # the tracestate's members, in order; () when none or invalid
    carrier: str  # where it came from: "params._meta" or "http.header"


def parse_traceparent(value: str) -> tuple[int, int, int] | None:
    """(trace id, parent span id, flags) of a valid ``traceparent``; None for an invalid one, which the spec
    says to ignore: not its format (length, upper-case or other non-hex digits), version ff, an all-zero trace
    or parent id, or version 00 with anything after the flags."""
    if len(value) > TRACEPARENT_LIMIT:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_id, span_id, flags, more = match.groups()
    if version == "ff" or (version == "00" and more) or not int(trace_id, 16) or not int(span_id, 16):
        return None
    return int(trace_id, 16), int(span_id, 16), int(flags, 16)


def parse_tracestate(value: str | None) -> tuple[tuple[str, str], ...]:
    """A ``tracestate``'s members, in order; () when absent or invalid (a malformed member, a key twice, more
    than 32 members): the spec drops the whole of an invalid one, and keeps the traceparent."""
    if value is None or len(value) > TRACESTATE_LIMIT:
        return ()
    members: dict[str, str] = {}
    for member in value.split(","):
        member = member.strip(" \t")
        if not member:
            continue  # empty list members are allowed
        if _MEMBER.fullmatch(member) is None:
            return ()
        key, _, text = member.partition("=")
        if key in members:
            return ()
        members[key] = text
    return tuple(members.items()) if len(members) <= TRACESTATE_MEMBERS else ()


def trace_parent(call: Call) -> TraceParent | None:
    """The span a call's request names as its parent, if it names a valid one.

    ``params._meta.traceparent`` first (SEP-414; the MCP semantic conventions' carrier): it is the message's
    own context, where an HTTP header is the HTTP request's, which may carry several messages or, from an
    instrumented HTTP client, names the HTTP span beneath the client's MCP span. Then the ``traceparent``
    header of the HTTP request that carried it (a client's request only: a server's request to the client
    travels in a response). Each with the ``tracestate`` beside it, never the other carrier's; an invalid
    traceparent is as if absent, so an invalid one in _meta leaves the header's.
    """
    request = call.request
    facts = request.facts
    if facts is not None and facts.trace is not None and (ids := parse_traceparent(facts.trace[0])):
        return TraceParent(*ids, parse_tracestate(facts.trace[1]), "params._meta")
    if request.direction != C2S or request.kind not in ("request", "notification"):
        return None
    headers = request.exchange.request_headers
    header = headers.get(TRACEPARENT)
    if header is not None and (ids := parse_traceparent(header)):
        return TraceParent(*ids, parse_tracestate(headers.get(TRACESTATE)), "http.header")
    return None


def trace_id_for(call: Call) -> int:
    """The trace a call's span is in: its sender's when its request named a valid parent, else its unit's."""
    parent = trace_parent(call)
    return parent.trace_id if parent is not None else trace_id_of(trace_unit(call))


def error_type(record: CallRecord) -> str | None:
    """``error.type`` of a failed call, None for one that did not fail (Outcome.is_failure decides).

    The conventions: the JSON-RPC error code as a string, ``tool_error`` for isError. Where they say nothing
    (the HTTP-only and transport failures): the HTTP status as a string, as the HTTP conventions have it,
    and for a failure without a code or status the outcome's name (NO_RESPONSE, STREAM_INCOMPLETE, ...).
    """
    outcome = Outcome(record["outcome"])
    if not outcome.is_failure:
        return None
    if outcome is Outcome.TOOL_ERROR:
        return TOOL_ERROR
    if record["error_code"] is not None:
        return str(record["error_code"])
    if outcome is Outcome.HTTP_ERROR and record["http_status"] is not None:
        return str(record["http_status"])
    return outcome.value


def span_name(record: CallRecord) -> str:
    """``{mcp.method.name} {target}``: the tool for tools/call, the prompt for prompts/get; the method alone
    otherwise (a resource's URI is left out of the name, as the conventions advise for its cardinality: it is
    the ``mcp.resource.uri`` attribute). An answer to no request has no method: ``orphan response``."""
    method = record["method"]
    if method is None:
        return "orphan response"
    target = record["tool"] or record["prompt"]
    return f"{method} {target}" if target else method


def _client_facts(client: ClientRecord | None) -> tuple[str | None, ...]:
    """The client's unit, lineage, address, clientInfo and User-Agent; all None when the call has no client."""
    if client is None:
        return (None,) * 5
    return client["unit"], client["lineage"], client["address"], client["client_info"], client["user_agent"]


def _ended_by(ending: EndingRecord | None) -> str | None:
    return ending["ended_by"] if ending is not None else None


def _server_port(address: SplitResult) -> int | None:
    try:
        return address.port
    except ValueError:  # a captured host that urllib cannot read
        return None


def _as_text(value: Any) -> str | None:
    """A JSON-RPC id or error code as the string attribute the conventions ask for; None stays None."""
    return None if value is None else str(value)


def span_attributes(call: Call, record: CallRecord, redactor: Redactor = REDACTED) -> dict[str, Any]:
    """The MCP semantic conventions' attributes, then mcp.blackbox.* for the verdict and its context (``record``
    is the export's, already through ``redactor``; the URL as sent is not in it)."""
    exchange = call.exchange
    address = urlsplit(exchange.endpoint)
    port = _server_port(address)
    unit, lineage, address_of_client, client_info, user_agent = _client_facts(record["client"])
    failed = error_type(record)
    attributes: dict[str, Any] = {
        "mcp.method.name": record["method"],
        "jsonrpc.request.id": _as_text(record["jsonrpc_id"]),
        "mcp.session.id": record["session_id"],
        "mcp.protocol.version": record["protocol_version"],
        "gen_ai.tool.name": record["tool"],
        "gen_ai.prompt.name": record["prompt"],
        "mcp.resource.uri": record["resource_uri"],
        "gen_ai.operation.name": "execute_tool" if record["method"] == "tools/call" else None,
        "rpc.response.status_code": _as_text(record["error_code"]),
        "error.type": failed,
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "server.address": address.hostname,
        "server.port": port,
        "http.request.method": exchange.method,
        "http.response.status_code": record["http_status"],
        "url.full": redactor.url(exchange.url),
        "user_agent.original": user_agent,
        "mcp.blackbox.call_id": record["call_id"],
        "mcp.blackbox.outcome": record["outcome"],
        "mcp.blackbox.layer": record["layer"],
        "mcp.blackbox.flags": [str(flag) for flag in record["flags"]],
        "mcp.blackbox.reason": record["reason"],
        "mcp.blackbox.evidence": list(record["evidence"]),
        "mcp.blackbox.direction": record["direction"],
        "mcp.blackbox.scope": record["scope"],
        "mcp.blackbox.exchanges": list(record["exchanges"]),
        "mcp.blackbox.source": record["source"],
        "mcp.blackbox.arguments_digest": record["arguments_digest"],
        "mcp.blackbox.duration_ms": record["duration_ms"],
        "mcp.blackbox.sse_events": record["sse_events"],
        "mcp.blackbox.retry.group": record["retry_group"],
        "mcp.blackbox.retry.attempt": record["attempt"] if record["retry_group"] else None,
        "mcp.blackbox.retry.origin": record["retry_origin"],
        "mcp.blackbox.retry.confidence": record["retry_confidence"],
        "mcp.blackbox.client.unit": unit,
        "mcp.blackbox.client.lineage": lineage,
        "mcp.blackbox.client.address": address_of_client,
        "mcp.blackbox.client.info": client_info,
        "mcp.blackbox.ending.ended_by": _ended_by(record["ending"]),
        "mcp.blackbox.trace_parent": parent.carrier if (parent := trace_parent(call)) is not None else None,
    }
    if exchange.stdio is not None:
        _as_stdio(attributes, record)
    return _otlp_values(attributes)


def _as_stdio(attributes: dict[str, Any], record: CallRecord) -> None:
    """A stdio server's pipes: the conventions' network.transport "pipe"; no HTTP, no address (ours: the
    command, redacted like the export's endpoint)."""
    for key in ("network.protocol.name", "server.address", "server.port", "http.request.method", "url.full"):
        attributes[key] = None
    attributes["network.transport"] = "pipe"
    attributes["mcp.blackbox.carrier"] = record["carrier"]
    attributes["mcp.blackbox.stdio.command"] = record["endpoint"].removeprefix(STDIO_SCHEME)
    attributes["mcp.blackbox.stdio.stderr_lines"] = len(record["stderr"] or [])


def _otlp_values(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes that have a value (no None, no empty list), in their order; enum members (StrEnum) as
    plain strings: OTLP attribute values are str, bool, int, float or their lists."""
    return {
        k: (str(v) if isinstance(v, str) else v)
        for k, v in attributes.items()
        if v is not None and v != [] and not (k == "mcp.blackbox.flags" and not v)
    }


SpanEvent = tuple[str, float, dict[str, Any]]  # a span event: its name, when (epoch seconds), its attributes


def span_events(call: Call, record: CallRecord) -> list[SpanEvent]:
    """What happened during the call, with its time: response headers, each notification (progress, log,
    the client's cancel), each answer (and whether it came on an event stream), and how a call without an
    answer ended (the timeout anatomy, analyzer/calls/anatomy.py)."""
    events = [
        *_response_headers_event(call),
        *(_notification_event(message) for message in call.notifications),
        *(_answer_event(message) for message in call.responses),
        *_stderr_events(record),
        *_ending_event(call, record),
    ]
    # Stable: events at the same instant keep the order above.
    events.sort(key=lambda event: event[1])
    return events


def _response_headers_event(call: Call) -> list[SpanEvent]:
    """When the HTTP response headers came, with the status (none for stdio, or before any answer)."""
    exchange = call.exchange
    if exchange.t_response is None or exchange.status is None:
        return []
    return [("mcp.blackbox.http.response", exchange.t_response, {"http.response.status_code": exchange.status})]


def _sse_attributes(message: Message, attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` with the SSE event id the message came under, and whether it came on an event stream."""
    if message.event_id:
        attributes["mcp.blackbox.sse.event_id"] = message.event_id
    if message.exchange.is_event_stream:
        attributes["mcp.blackbox.sse"] = True
    return attributes


def _notification_event(message: Message) -> SpanEvent:
    attributes = _sse_attributes(
        message, {"mcp.method.name": message.method or "", "mcp.blackbox.direction": message.direction}
    )
    attributes["mcp.blackbox.flow"] = message.exchange.flow_id
    return (message.method or "notification", message.t, attributes)


def _answer_event(message: Message) -> SpanEvent:
    attributes: dict[str, Any] = {"mcp.blackbox.kind": message.kind, "mcp.blackbox.flow": message.exchange.flow_id}
    if message.error is not None:
        attributes["rpc.response.status_code"] = str(message.error[0])
    return ("mcp.blackbox.response", message.t, _sse_attributes(message, attributes))


def _stderr_events(record: CallRecord) -> list[SpanEvent]:
    """A stdio server's stderr lines during the call (the export's, redacted)."""
    return [
        ("mcp.blackbox.stderr", line["t"], {"mcp.blackbox.stderr.text": line["text"]})
        for line in record["stderr"] or []
    ]


def _ending_event(call: Call, record: CallRecord) -> list[SpanEvent]:
    """How a call without an answer ended, when its wait is known (the ending anatomy)."""
    anatomy = record["ending"]
    if anatomy is None or anatomy["waited_ms"] is None:
        return []
    attributes: dict[str, Any] = {
        "mcp.blackbox.ending.ended_by": anatomy["ended_by"],
        "mcp.blackbox.ending.waited_ms": anatomy["waited_ms"],
        "mcp.blackbox.ending.progress": anatomy["server_sent"]["progress"],
        "mcp.blackbox.ending.other_notifications": anatomy["server_sent"]["other_notifications"],
    }
    if anatomy["reached_server_ms"] is not None:
        attributes["mcp.blackbox.ending.reached_server_ms"] = anatomy["reached_server_ms"]
    if anatomy["detail"]:
        attributes["mcp.blackbox.ending.detail"] = anatomy["detail"]
    return [("mcp.blackbox.ending", call.request.t + anatomy["waited_ms"] / 1000, attributes)]


# The spans' instrumentation scope: the module's name when the exporter was written. A collector's
# pipelines may filter on it, so it stays as it is wherever the module lives.
INSTRUMENTATION_SCOPE = "mcp_blackbox.analyzer.otlp"


def _ns(t: float) -> int:
    """Epoch nanoseconds, to the microsecond: a float of epoch seconds holds no more."""
    return round(t * 1e6) * 1000


def _end(call: Call, record: CallRecord, events: list[SpanEvent]) -> float:
    """The call's end (``t_end``); for one still open when the capture ended, the last thing seen of it."""
    if record["t_end"] is not None:
        return float(record["t_end"])
    return max([call.request.t, *(t for _, t, _ in events)])


def iter_spans(analysis: Analysis, *, redact: bool = True, batch: int = BATCH) -> Iterator[list[ReadableSpan]]:
    """The calls as finished SDK spans, ``batch`` at a time, in the order of the export."""
    require_otlp()
    from opentelemetry import context as context_api
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON
    from opentelemetry.trace import Status, StatusCode

    class GivenIds(IdGenerator):
        """The SDK asks for a root span's ids; it gets the ones made from the capture."""

        trace_id = span_id = 1

        def generate_trace_id(self) -> int:
            return self.trace_id

        def generate_span_id(self) -> int:
            return self.span_id

    ids = GivenIds()
    collected = InMemorySpanExporter()
    provider = TracerProvider(
        resource=_resource(),
        id_generator=ids,
        sampler=ALWAYS_ON,
        # Every notification of a long call is an event; the environment's limits do not apply to a replay.
        span_limits=SpanLimits(max_events=10_000, max_links=16, max_span_attributes=256, max_event_attributes=32),
    )
    provider.add_span_processor(SimpleSpanProcessor(collected))
    tracer = provider.get_tracer(INSTRUMENTATION_SCOPE, installed_version())
    no_parent = context_api.Context()  # a root span of its unit's trace, unless the request named a parent
    attempts = {group.group_id: group.members for group in analysis.retry_groups}
    pending = 0
    for call, record in zip(analysis.call_objects, iter_records(analysis, redact=redact), strict=True):
        parent = trace_parent(call)
        ids.trace_id, ids.span_id = trace_id_of(trace_unit(call)), span_id_of(record["call_id"])
        links = _previous_attempt_links(record, attempts)
        kind = _span_kind(call, record)
        events = span_events(call, record)
        span = tracer.start_span(
            span_name(record),
            context=no_parent if parent is None else _remote_parent(parent),
            kind=kind,
            attributes=span_attributes(call, record, Redactor.of(redact)),
            links=links,
            start_time=_ns(call.request.t),
        )
        for name, t, attributes in events:
            span.add_event(name, attributes, _ns(t))
        if Outcome(record["outcome"]).is_failure:
            span.set_status(Status(StatusCode.ERROR, _failure_description(record)))
        span.end(_ns(_end(call, record, events)))
        pending += 1
        if pending >= batch:
            yield list(collected.get_finished_spans())
            collected.clear()
            pending = 0
    if spans := collected.get_finished_spans():
        yield list(spans)
    provider.shutdown()


def _remote_parent(parent: TraceParent) -> Context:
    """A context whose current span is the sender's (remote): the SDK takes its trace id and tracestate."""
    from opentelemetry.context import Context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, set_span_in_context

    remote = SpanContext(parent.trace_id, parent.span_id, True, TraceFlags(parent.flags), TraceState(parent.state))
    return set_span_in_context(NonRecordingSpan(remote), Context())


def _resource() -> Resource:
    """The SDK's resource, with OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, less the random instance id it
    adds: exporting the same capture again gives the same file. Unnamed, the service is mcp-blackbox."""
    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_KEY
    from opentelemetry.sdk.resources import Resource

    detected = Resource.create()
    attributes = {k: v for k, v in detected.attributes.items() if k != "service.instance.id"}
    if str(attributes.get(SERVICE_KEY, "")).startswith("unknown_service"):
        attributes[SERVICE_KEY] = SERVICE_NAME
    return Resource(attributes, detected.schema_url)


def _previous_attempt_links(record: CallRecord, attempts: dict[str, list[Call]]) -> list[Link]:
    """A retry attempt's link to the attempt before it in its group; none for a first attempt or a lone call."""
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    members = attempts.get(record["retry_group"] or "")
    if not members or record["attempt"] <= 1:
        return []
    before = members[record["attempt"] - 2]
    flags = TraceFlags(TraceFlags.SAMPLED)
    linked = SpanContext(trace_id_for(before), span_id_of(before.call_id), False, flags)
    attributes: dict[str, Any] = {
        "mcp.blackbox.link": "previous-attempt",
        "mcp.blackbox.retry.group": str(record["retry_group"]),
        "mcp.blackbox.retry.attempt": record["attempt"],
        "mcp.blackbox.retry.origin": str(record["retry_origin"]),
        "mcp.blackbox.retry.confidence": str(record["retry_confidence"]),
        "mcp.blackbox.call_id": before.call_id,
    }
    return [Link(linked, attributes)]


def _span_kind(call: Call, record: CallRecord) -> SpanKind:
    from opentelemetry.trace import SpanKind

    if call.request.kind not in ("request", "notification"):
        return SpanKind.INTERNAL  # an answer to no request in the capture
    if record["direction"] != C2S:
        return SpanKind.SERVER  # a server's request to the client (sampling, elicitation): the client serves it
    return SpanKind.CLIENT


def _failure_description(record: CallRecord) -> str | None:
    """A failed span's status description: the JSON-RPC error's message, else the verdict's reason."""
    description = record["error_message"] if record["error_code"] is not None else record["reason"]
    return description or None


def encode(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    """The OTLP request for these spans, by the exporter's own encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans)


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: protobuf's JSON mapping (lowerCamelCase names, enums as integers, 64-bit integers as
    strings) with trace and span ids as hex strings instead of base64."""
    from google.protobuf import json_format

    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    _convert_ids(document, _base64_to_hex)
    return document


def from_otlp_json(document: dict[str, Any]) -> ExportTraceServiceRequest:
    """Read OTLP/JSON back (hex ids) with protobuf's json_format."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    copy = json.loads(json.dumps(document))
    _convert_ids(copy, _hex_to_base64)
    request = ExportTraceServiceRequest()
    json_format.ParseDict(copy, request)
    return request


def _convert_ids(value: Any, convert: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in HEX_FIELDS and isinstance(item, str):
                value[key] = convert(item)
            else:
                _convert_ids(item, convert)
    elif isinstance(value, list):
        for item in value:
            _convert_ids(item, convert)


def _base64_to_hex(text: str) -> str:
    return base64.b64decode(text).hex()


def _hex_to_base64(text: str) -> str:
    return base64.b64encode(bytes.fromhex(text)).decode("ascii")


def write_otlp_json(analysis: Analysis, out: IO[str], *, redact: bool = True) -> int:
    """One ExportTraceServiceRequest as OTLP/JSON on one line (what the Collector's otlpjsonfile receiver
    reads, and what a POST of Content-Type application/json to /v1/traces carries). Returns the span count.

    Written batch by batch, a ResourceSpans per batch (a request may repeat a resource): the file of a large
    capture is never held whole."""
    require_otlp()
    out.write('{"resourceSpans":[')
    count = written = 0
    for spans in iter_spans(analysis, redact=redact):
        for resource_spans in to_otlp_json(encode(spans)).get("resourceSpans", []):
            out.write("," if written else "")
            out.write(json.dumps(resource_spans, ensure_ascii=False, separators=(",", ":")))
            written += 1
        count += len(spans)
    out.write("]}\n")
    return count


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (``http://collector:4318``); a URL that already
    ends in /v1/traces is taken as it is."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def send_otlp(analysis: Analysis, endpoint: str, *, redact: bool = True, timeout: float = 10.0) -> int:
    """POST the spans as OTLP/HTTP protobuf, BATCH spans a request. Returns the span count; raises
    RuntimeError when the collector refused a batch or could not be reached (the exporter retries 429, 502,
    503 and 504 within ``timeout``). Headers (an API key) come from OTEL_EXPORTER_OTLP_HEADERS."""
    require_otlp()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    url = traces_url(endpoint)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    sent = 0
    try:
        for spans in iter_spans(analysis, redact=redact):
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                raise RuntimeError(f"{url} did not take the spans ({sent} sent before); see the exporter's log above")
            sent += len(spans)
    finally:
        exporter.shutdown()
    return sent
