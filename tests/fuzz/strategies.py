"""Hypothesis strategies for what passes through mcp-blackbox: bodies, SSE framing, headers, flows, flow files.

Values are drawn from small pools (ids, session ids, methods, tool names) often enough that requests and
answers pair up, retries link and sessions form; and from anything at all the rest of the time.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st
from mitmproxy import flow, http
from mitmproxy.io import tnetstring
from mitmproxy.net import encoding
from mitmproxy.test import tflow

# ---------------------------------------------------------------- JSON values

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats()  # NaN and the infinities too: json.dumps writes them and json.loads reads them back
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)

RPC_IDS = st.one_of(
    st.integers(-1, 4),
    st.sampled_from(["1", "a", "", "0"]),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, max_value=3, min_value=-1),
    json_values,
)
METHODS = st.one_of(
    st.sampled_from(
        [
            "initialize",
            "tools/call",
            "tools/list",
            "ping",
            "server/discover",
            "resources/read",
            "sampling/createMessage",
            "elicitation/create",
            "notifications/initialized",
            "notifications/progress",
            "notifications/cancelled",
            "notifications/message",
        ]
    ),
    st.text(max_size=12),
    json_values,
)
TOOL_NAMES = st.sampled_from(["echo", "write_record", "slow", ""]) | st.text(max_size=10) | json_values
VERSIONS = st.sampled_from(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]) | json_values
SESSIONS = st.sampled_from(["s1", "s2", "", "ØŠ"]) | st.text(max_size=6)

schemas = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])
            | st.lists(st.sampled_from(["object", "string", "null"]) | json_values, max_size=3)
            | json_values,
            "required": st.lists(st.text(max_size=4), max_size=3) | json_values,
            "enum": st.lists(json_values, max_size=3) | json_values,
            "const": json_values,
            "additionalProperties": st.booleans() | json_values,
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "type": st.just("object") | st.just("array"),
            "properties": st.dictionaries(st.text(max_size=4), inner, max_size=3) | json_values,
            "items": inner | json_values,
            "additionalProperties": inner,
            "required": st.lists(st.text(max_size=4), max_size=3) | json_values,
        },
    ),
    max_leaves=6,
)

# ---------------------------------------------------------------- JSON-RPC envelopes

ERROR_TEXTS = st.sampled_from(
    [
        "Error: the tool failed",
        "Traceback (most recent call last):",
        '{"error": "boom"}',
        '{"code": 1, "message": "x"}',
        '{"ok": false}',
        "{not json",
        "",
        "fine",
    ]
)
content_blocks = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image", "resource"]) | json_values},
        optional={"text": ERROR_TEXTS | st.text(max_size=30) | json_values, "data": json_values},
    )
    | json_values,
    max_size=3,
)
tool_results = st.fixed_dictionaries(
    {},
    optional={
        "content": content_blocks | json_values,
        "isError": st.booleans() | json_values,
        "resultType": st.sampled_from(["complete", "input_required", "bogus"]) | json_values,
        "structuredContent": json_values,
        "inputRequests": json_values,
    },
)
tool_list_results = st.fixed_dictionaries(
    {
        "tools": st.lists(
            st.fixed_dictionaries(
                {"name": TOOL_NAMES},
                optional={
                    "annotations": st.fixed_dictionaries(
                        {},
                        optional={
                            "readOnlyHint": st.booleans() | json_values,
                            "idempotentHint": st.booleans() | json_values,
                            "destructiveHint": st.booleans() | json_values,
                        },
                    )
                    | json_values,
                    "outputSchema": schemas | json_values,
                    "inputSchema": json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values
    }
)
initialize_results = st.fixed_dictionaries(
    {},
    optional={
        "protocolVersion": VERSIONS,
        "serverInfo": st.fixed_dictionaries({"name": st.text(max_size=8) | json_values, "version": json_values})
        | json_values,
        "capabilities": json_values,
    },
)
results = tool_results | tool_list_results | initialize_results | json_values
errors = (
    st.fixed_dictionaries(
        {"code": st.integers(-32700, 500) | json_values, "message": st.text(max_size=30) | json_values},
        optional={"data": json_values},
    )
    | json_values
)
meta = st.dictionaries(
    st.sampled_from(["progressToken", "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientInfo"]),
    RPC_IDS | VERSIONS | st.fixed_dictionaries({"name": st.text(max_size=5), "version": st.text(max_size=5)}),
    max_size=3,
)
params = st.one_of(
    st.fixed_dictionaries(
        {"name": TOOL_NAMES},
        optional={"arguments": json_values, "_meta": meta | json_values, "inputResponses": json_values},
    ),
    st.fixed_dictionaries({"progressToken": RPC_IDS, "progress": json_values}),
    st.fixed_dictionaries({"requestId": RPC_IDS}, optional={"reason": st.text(max_size=10)}),
    st.fixed_dictionaries(
        {"protocolVersion": VERSIONS},
        optional={"clientInfo": st.fixed_dictionaries({"name": st.text(max_size=6), "version": json_values})},
    ),
    json_values,
)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    """One JSON-RPC message, valid or nearly so."""
    kind = draw(st.sampled_from(["request", "request", "notification", "result", "result", "error", "junk"]))
    if kind == "junk":
        return draw(json_values)
    message: dict[str, Any] = {"jsonrpc": draw(st.just("2.0") | st.sampled_from(["1.0", 2.0, None]))}
    if kind in ("request", "result", "error"):
        message["id"] = draw(RPC_IDS)
    if kind in ("request", "notification"):
        message["method"] = draw(METHODS)
        if draw(st.booleans()):
            message["params"] = draw(params)
    elif kind == "result":
        message["result"] = draw(results)
    else:
        message["error"] = draw(errors)
    # Break it a little: drop a member, or add result and error together.
    for key in draw(st.lists(st.sampled_from(["jsonrpc", "id", "method", "result", "error"]), max_size=1)):
        if key in message:
            del message[key]
        else:
            message[key] = draw(json_values)
    return message


batches = st.lists(envelopes(), max_size=4)
json_messages = envelopes() | batches


def dumps(value: Any) -> str:
    return json.dumps(value)


@st.composite
def near_json(draw: st.DrawFn) -> str:
    """JSON-RPC text, then broken: cut, spliced, deeply nested, with BOMs, lone surrogates, huge numbers."""
    text = dumps(draw(json_messages))
    for op in draw(
        st.lists(st.sampled_from(["cut", "insert", "delete", "nest", "bom", "escape", "number"]), max_size=3)
    ):
        at = draw(st.integers(0, len(text)))
        if op == "cut":
            text = text[:at]
        elif op == "insert":
            text = (
                text[:at]
                + draw(st.sampled_from(['"', "{", "}", "[", "]", ",", ":", "\\", "\x00"]) | st.text(max_size=3))
                + text[at:]
            )
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 4)) :]
        elif op == "nest":
            depth = draw(st.sampled_from([10, 500, 990, 1200, 5000, 100_000]))
            text = text[:at] + "[" * depth + "]" * draw(st.sampled_from([0, depth])) + text[at:]
        elif op == "bom":
            text = "\ufeff" + text
        elif op == "escape":
            text = (
                text[:at]
                + draw(st.sampled_from(['"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', "NaN", "-Infinity"]))
                + text[at:]
            )
        else:
            text = text[:at] + draw(st.sampled_from(["1" * 5000, "1e999", "-0", "1.5e-400", "0x10"])) + text[at:]
    return text


json_bodies = json_messages.map(lambda v: dumps(v).encode())
bodies = st.one_of(
    st.just(b""),
    st.binary(max_size=120),
    near_json().map(lambda t: t.encode("utf-8", "surrogatepass")),
    json_bodies,
    json_bodies,
)

# ---------------------------------------------------------------- SSE framing

LINE_ENDS = st.sampled_from(["\n", "\r", "\r\n"])
ENDPOINTS = st.sampled_from(
    [
        "/messages?sessionId=s1",
        "/messages/?session_id=abc",
        "http://[::1",  # not a URL: an unclosed IPv6 literal
        "http://h:99999/x",  # a port out of range
        "http://h:port/x",
        "//other.example/mcp",
        "",
    ]
) | st.text(max_size=20)


@st.composite
def sse_lines(draw: st.DrawFn) -> list[str]:
    """The lines of one event (no line ends in them)."""
    lines = []
    kinds = st.sampled_from(["data", "data", "data", "id", "event", "retry", "comment", "other"])
    for kind in draw(st.lists(kinds, min_size=1, max_size=5)):
        if kind == "data":
            payload = draw(json_messages.map(dumps) | near_json() | st.text(max_size=30) | ENDPOINTS)
            lines.append(draw(st.sampled_from(["data: ", "data:", "data:  "])) + payload)
        elif kind == "id":
            lines.append("id: " + draw(st.sampled_from(["1", "abc", "a\x00b", ""]) | st.text(max_size=8)))
        elif kind == "event":
            lines.append("event: " + draw(st.sampled_from(["message", "endpoint", "ping", ""]) | st.text(max_size=8)))
        elif kind == "retry":
            retry = st.sampled_from(["1000", "0", "²", "١٢", "9" * 5000, "-5", "1.5"])
            lines.append("retry: " + draw(retry | retry | st.text(max_size=5)))
        elif kind == "comment":
            lines.append(":" + draw(st.text(max_size=10)))
        else:
            lines.append(draw(st.text(max_size=10)))
    # Line breaks inside a "line" would make it several: split them out as line ends of their own.
    return [part for line in lines for part in line.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


@st.composite
def sse_bodies(draw: st.DrawFn) -> bytes:
    out = draw(st.sampled_from(["", "", "\ufeff"]))
    for lines in draw(st.lists(sse_lines(), min_size=1, max_size=5)):
        for line in lines:
            out += line + draw(LINE_ENDS)
        out += draw(LINE_ENDS)  # the blank line that dispatches the event
    data = out.encode("utf-8", "surrogatepass")
    if data and draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\r"])) + data[at:]
    if data and draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]  # a partial event: the stream was cut
    return data


# ---------------------------------------------------------------- headers

CHARSETS = st.sampled_from(
    [
        "utf-8",
        "UTF-8",
        '"utf-8"',
        "latin-1",
        "utf-16",
        "utf-32",
        "ascii",
        "utf-7",
        "idna",
        "punycode",
        "rot13",
        "raw_unicode_escape",
        "unicode_escape",
        "base64",
        "hex",
        "bogus",
        "utf\x00",
        "",
    ]
) | st.text(max_size=8)
CONTENT_TYPES = st.builds(
    lambda base, charset: base + (f"; charset={charset}" if charset is not None else ""),
    st.sampled_from(
        ["application/json", "text/event-stream", "TEXT/EVENT-STREAM", "text/plain", "text/html", "", "json"]
    )
    | st.text(max_size=10),
    st.none() | CHARSETS,
)
CODINGS = ["gzip", "br", "zstd", "deflate"]
CONTENT_ENCODINGS = st.sampled_from(
    [*CODINGS, "identity", "gzip, br", "br,gzip", "x-gzip", "rot13", "utf-8", "hex", "base64", "bz2", "zlib", " , "]
) | st.text(max_size=8)
HEADER_NAMES = st.sampled_from(
    [
        "content-type",
        "content-encoding",
        "mcp-session-id",
        "Mcp-Session-Id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "retry-after",
        "user-agent",
        "x-envoy-attempt-count",
        "authorization",
        "www-authenticate",
        "cookie",
        "x-api-key",
    ]
) | st.text(min_size=1, max_size=10)
HEADER_VALUES = {
    "retry-after": st.sampled_from(["1", "0", "²", "120", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "9" * 400]),
    "x-envoy-attempt-count": st.sampled_from(["1", "2", "²", "١", "3 ", "x"]),
    "mcp-session-id": SESSIONS,
    "mcp-protocol-version": VERSIONS.map(str),
    "last-event-id": st.sampled_from(["0", "1", "abc"]),
}


@st.composite
def header_fields(draw: st.DrawFn, *, content_type: str | None = None) -> list[tuple[bytes, bytes]]:
    fields = []
    if content_type is not None:
        fields.append((b"content-type", content_type.encode("utf-8", "surrogateescape")))
    for _ in range(draw(st.integers(0, 4))):
        name = draw(HEADER_NAMES)
        value = draw(HEADER_VALUES.get(name.lower(), st.text(max_size=20)) | st.text(max_size=6))
        fields.append((name.encode("utf-8", "surrogateescape"), value.encode("utf-8", "surrogateescape")))
    if draw(st.booleans()):
        fields.append((b"content-encoding", draw(CONTENT_ENCODINGS).encode("utf-8", "surrogateescape")))
    return fields


def encoded(body: bytes, fields: list[tuple[bytes, bytes]], really: bool) -> bytes:
    """``body`` content-encoded as its headers say, when they name a coding mitmproxy can write."""
    codings = [v.decode("utf-8", "replace").strip().lower() for k, v in fields if k.lower() == b"content-encoding"]
    if really and codings and codings[-1] in CODINGS:
        # The codec itself, not encoding.encode: that returns the encoded bytes of mitmproxy's one-entry cache
        # when the last decode gave the same bytes, and the code under test decodes bodies of its own, so the
        # same draw would give other bytes (hypothesis: "data generation depending on external state").
        return encoding.custom_encode[codings[-1]](body)
    return body


# ---------------------------------------------------------------- flows

TIMES = st.floats(1.7e9, 1.7e9 + 600) | st.sampled_from([0.0, 1.0, -5.0, 1e12])
PATHS = (
    st.sampled_from(["/mcp", "/mcp", "/sse", "/messages?sessionId=s1", "/messages?session_id=s2", "/"])
    | st.text(max_size=12).map(lambda t: t if t.startswith("/") else "/" + t)
    | st.sampled_from(["*", "x[y", "mcp?x=[", ""])
)
HTTP_METHODS = st.sampled_from(["POST", "POST", "GET", "DELETE", "OPTIONS"]) | st.text(min_size=1, max_size=6)
STATUSES = st.sampled_from([200, 200, 202, 204, 400, 401, 403, 404, 429, 500, 502, 503]) | st.integers(0, 999)
CONNECTIONS = st.sampled_from(["conn-a", "conn-b"])

stream_records = st.fixed_dictionaries(
    {},
    optional={
        "ended": st.sampled_from(["complete", "upstream-error", "client-abort", "proxy-shutdown", "killed"])
        | json_values,
        "error": st.none() | st.text(max_size=20) | json_values,
        "end_time": st.none() | TIMES | json_values,
        "event_times": st.none() | st.lists(st.none() | TIMES, max_size=6) | json_values,
        "chunks": st.lists(st.tuples(TIMES, st.integers(0, 100)).map(list), max_size=4) | json_values,
        "bytes": st.integers(0, 10**6) | json_values,
        "stored_bytes": st.integers(0, 10**6),
        "dropped_bytes": st.integers(0, 10**6) | json_values,
        "started": TIMES,
    },
)
addon_records = st.fixed_dictionaries(
    {"version": st.just(1) | json_values},
    optional={
        "mcp": st.text(max_size=10) | json_values,
        "failure": st.none() | st.text(max_size=10),
        "stream": stream_records | json_values,
    },
)


@st.composite
def http_flows(draw: st.DrawFn) -> http.HTTPFlow:
    """An HTTP exchange as mitmproxy records it: any method, path, headers, bodies, status, error, metadata."""
    start = draw(TIMES)
    request_fields = draw(header_fields(content_type=draw(st.none() | CONTENT_TYPES)))
    request_body = draw(bodies)
    request = http.Request(
        host=draw(st.just("127.0.0.1") | st.sampled_from(["[::1", "ex ample", "h"]) | st.text(max_size=6)),
        port=draw(st.just(8000) | st.integers(0, 65535)),
        method=draw(HTTP_METHODS).encode("utf-8", "surrogateescape"),
        scheme=draw(st.sampled_from([b"http", b"https", b""])),
        authority=b"",
        path=draw(PATHS).encode("utf-8", "surrogateescape"),
        http_version=b"HTTP/1.1",
        headers=http.Headers(request_fields),
        content=encoded(request_body, request_fields, draw(st.booleans())),
        trailers=None,
        timestamp_start=start,
        timestamp_end=start + 0.001,
    )
    f = tflow.tflow(req=request)
    f.client_conn.id = draw(CONNECTIONS)
    f.response = None
    status = draw(st.none() | STATUSES)
    if status is not None:
        stream = draw(st.booleans())
        content_type = draw(st.just("text/event-stream") if stream else CONTENT_TYPES)
        response_fields = draw(header_fields(content_type=content_type))
        body = draw(sse_bodies() if stream else bodies)
        f.response = http.Response(
            http_version=b"HTTP/1.1",
            status_code=status,
            reason=b"",
            headers=http.Headers(response_fields),
            content=encoded(body, response_fields, draw(st.booleans())),
            trailers=None,
            timestamp_start=start + 0.01,
            timestamp_end=draw(st.none() | st.just(start + 0.5) | TIMES),
        )
    if status is None or draw(st.integers(0, 4)) == 0:
        f.error = flow.Error(
            draw(st.sampled_from(["Client disconnected.", "peer closed connection"]) | st.text(max_size=20))
        )
        f.error.timestamp = draw(TIMES)
    if draw(st.booleans()):
        f.metadata["mcp_blackbox"] = draw(addon_records | json_values)
    return f


@st.composite
def any_flows(draw: st.DrawFn) -> flow.Flow:
    """Mostly HTTP exchanges; sometimes TCP, UDP, DNS or WebSocket flows (not MCP: they must be skipped)."""
    kind = draw(st.sampled_from(["http"] * 12 + ["tcp", "udp", "dns", "websocket"]))
    if kind == "http":
        return draw(http_flows())
    return {
        "tcp": tflow.ttcpflow,
        "udp": tflow.tudpflow,
        "dns": tflow.tdnsflow,
        "websocket": tflow.twebsocketflow,
    }[kind]()


class Flows:
    """Flows that print whole in a failing example (mitmproxy's repr leaves out headers and bodies)."""

    def __init__(self, flows: list[flow.Flow]) -> None:
        self.flows = flows

    def __iter__(self) -> Iterator[flow.Flow]:
        return iter(self.flows)

    def __len__(self) -> int:
        return len(self.flows)

    def __repr__(self) -> str:
        return "[\n" + "".join(f"  {describe_flow(f)},\n" for f in self.flows) + "]"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how hypothesis prints a failing example
        printer.text(repr(self))


def describe_flow(f: flow.Flow) -> str:
    if not isinstance(f, http.HTTPFlow):
        return repr(f)
    request, response = f.request, f.response
    parts = [f"request={request.method!r} {request.path!r} {request.headers.fields!r} {request.raw_content!r}"]
    if response is not None:
        parts.append(f"response={response.status_code} {response.headers.fields!r} {response.raw_content!r}")
    if f.error is not None:
        parts.append(f"error={f.error.msg!r}")
    if f.metadata:
        parts.append(f"metadata={f.metadata!r}")
    return ", ".join(parts)


@st.composite
def captures(draw: st.DrawFn) -> Flows:
    """A few flows; sometimes two sharing an id (a capture concatenated with itself)."""
    flows = draw(st.lists(any_flows(), min_size=1, max_size=6))
    if len(flows) > 1 and draw(st.integers(0, 5)) == 0:
        flows[1].id = flows[0].id
    return Flows(flows)


@st.composite
def retry_captures(draw: st.DrawFn) -> Flows:
    """One request sent again and again (new ids, new sessions, resumed streams) after answers of any kind."""
    method = draw(st.sampled_from(["tools/call", "tools/call", "initialize", "tools/list"]) | METHODS)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if draw(st.booleans()):
        message["params"] = draw(params)
    flows = []
    start = 1.7e9
    for _ in range(draw(st.integers(2, 4))):
        start += draw(st.sampled_from([0.0, 0.1, 0.3, 1.0, 1.5, 2.0, 30.0, 90.0, 400.0]))
        f = draw(http_flows())
        f.request.headers.pop("content-encoding", None)
        f.request.raw_content = json.dumps({**message, "id": draw(RPC_IDS)}).encode()
        f.request.method = draw(st.sampled_from(["POST", "POST", "GET"]))
        f.request.timestamp_start = start
        if f.response is not None:
            f.response.timestamp_start = start + 0.01
            f.response.timestamp_end = start + draw(st.sampled_from([0.02, 0.5, 3.0]))
        if f.error is not None:
            f.error.timestamp = start + 1.0
        flows.append(f)
    return Flows(flows)


def flow_bytes(flows: list[flow.Flow]) -> bytes:
    return b"".join(tnetstring.dumps(f.get_state()) for f in flows)


# ---------------------------------------------------------------- raw flow-file bytes

tnet_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.binary(max_size=10) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | st.binary(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            out += _paths(item, (*prefix, n))
    return out


@st.composite
def mutated_states(draw: st.DrawFn) -> Any:
    """A real flow's state with a few members deleted or given values of any type."""
    state = draw(http_flows()).get_state()
    paths = _paths(state)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        parent = state
        try:
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and draw(st.integers(0, 3)) == 0:
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(tnet_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced the way there
    if draw(st.integers(0, 3)) == 0:
        state["version"] = draw(st.integers(1, 25))  # an older format: mitmproxy's migration runs on it
    return state


@st.composite
def flow_file_bytes(draw: st.DrawFn) -> bytes:
    """Records that are flows, almost flows or random tnetstring values, then broken at the byte level."""
    records = []
    for kind in draw(
        st.lists(st.sampled_from(["flow", "mutated", "mutated", "value", "deep", "bytes"]), min_size=1, max_size=5)
    ):
        if kind == "flow":
            records.append(tnetstring.dumps(draw(http_flows()).get_state()))
        elif kind == "mutated":
            records.append(tnetstring.dumps(draw(mutated_states())))
        elif kind == "value":
            records.append(tnetstring.dumps(draw(tnet_values)))
        elif kind == "deep":
            depth = draw(st.sampled_from([10, 900, 3000]))
            inner = b"0:~"
            for _ in range(depth):
                inner = b"%d:%s]" % (len(inner), inner)
            records.append(inner)
        else:
            records.append(
                draw(
                    st.binary(max_size=30)
                    | st.sampled_from([b"999999999999:", b"5:hello", b"12345678901234:x", b"0:}"])
                )
            )
    data = b"".join(records)
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if op == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
        elif op == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + 1 :]
        elif op == "cut":
            data = data[:at]
    return data


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` four times in five: one odd member spoils a whole HAR file for mitmproxy's importer.

    (Not by an integer's extremes: hypothesis draws 0 and the bounds far more often than the rest.)
    """
    return st.integers(0, 4).flatmap(lambda n: odd if n == 3 else usual)


@st.composite
def har_files(draw: st.DrawFn) -> bytes:
    """HAR files (mitmproxy imports them): entries as browsers write them, now and then a member missing or odd."""

    def headers() -> list[Any]:
        return [{"name": n, "value": draw(st.text(max_size=12))} for n in draw(st.lists(HEADER_NAMES, max_size=3))]

    urls = st.sampled_from(["http://127.0.0.1:8000/mcp", "https://h/mcp?sessionId=s1", "http://h/mcp"])
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        entry: dict[str, Any] = {
            "startedDateTime": draw(
                mostly(st.sampled_from(["2025-01-01T00:00:00Z", "2025-01-01T00:00:00.5+01:00"]), json_values)
            ),
            "time": draw(mostly(st.sampled_from([0, 12.5]), st.sampled_from([1e308, -1e20]) | json_values)),
            "request": {
                "method": draw(mostly(st.sampled_from(["POST", "GET"]), HTTP_METHODS | json_values)),
                "url": draw(mostly(urls, st.just("http://[::1/x") | st.text(max_size=12))),
                "httpVersion": draw(st.sampled_from(["HTTP/1.1", "http/2.0", "HTTP/3"])),
                "headers": headers(),
                "postData": {"text": draw(json_messages.map(dumps) | near_json() | st.text(max_size=20))},
            },
            "response": {
                "status": draw(mostly(st.sampled_from([200, 202, 400, 404, 500]), STATUSES | json_values)),
                "httpVersion": "HTTP/1.1",
                "headers": headers(),
                "content": {
                    "text": draw(
                        mostly(
                            json_messages.map(dumps)
                            | sse_bodies().map(lambda b: b.decode("utf-8", "replace"))
                            | st.text(max_size=20),
                            json_values,
                        )
                    ),
                    "mimeType": draw(CONTENT_TYPES),
                    **({"encoding": "base64"} if draw(st.integers(0, 4)) == 3 else {}),
                },
            },
        }
        if draw(st.integers(0, 9)) == 5:
            del entry[draw(st.sampled_from(["request", "response", "time", "startedDateTime"]))]
        entries.append(entry)
    return (draw(st.sampled_from(["", "\ufeff"])) + json.dumps({"log": {"entries": entries}})).encode()


# ---------------------------------------------------------------- the addon's hooks

ERROR_MESSAGES = st.sampled_from(
    [
        "Client disconnected.",
        "Connection killed.",
        "peer closed connection without sending complete message body",
        "mitmproxy shut down",
    ]
) | st.text(max_size=20)


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut into network chunks at random places (mitmproxy never hands over an empty one)."""
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=6))))
    bounds = [0, *[c for c in cuts if c < len(data)], len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@st.composite
def stream_plans(draw: st.DrawFn) -> Any:
    from tests.fuzz.properties import StreamPlan  # the plan type lives with its property

    request_fields = draw(header_fields(content_type=draw(st.none() | CONTENT_TYPES)))
    request = http.Request(
        host=draw(st.sampled_from(["127.0.0.1", "example.com"])),
        port=draw(st.sampled_from([8000, 443])),
        method=draw(HTTP_METHODS).encode("utf-8", "surrogateescape"),
        scheme=b"http",
        authority=b"",
        path=draw(PATHS).encode("utf-8", "surrogateescape"),
        http_version=b"HTTP/1.1",
        headers=http.Headers(request_fields),
        content=encoded(draw(bodies), request_fields, draw(st.booleans())),
        trailers=None,
        timestamp_start=1.7e9,
        timestamp_end=1.7e9 + 0.001,
    )
    f = tflow.tflow(req=request)
    f.response = None
    chunks: list[bytes] = []
    if draw(st.integers(0, 5)):
        stream = draw(st.integers(0, 3)) > 0
        fields = draw(header_fields(content_type="text/event-stream" if stream else draw(CONTENT_TYPES)))
        body = draw(sse_bodies() | sse_bodies() | st.binary(max_size=60)) if stream else draw(bodies)
        body = encoded(body, fields, draw(st.booleans()))
        f.response = http.Response(
            http_version=b"HTTP/1.1",
            status_code=draw(STATUSES),
            reason=b"",
            headers=http.Headers(fields),
            content=None if stream else body,
            trailers=None,
            timestamp_start=1.7e9 + 0.01,
            timestamp_end=None if stream else 1.7e9 + 0.02,
        )
        if stream:
            chunks = draw(chunked(body))
    end = draw(st.sampled_from(["response", "error", "done"]) if f.response is not None else st.just("error"))
    return StreamPlan(
        f, chunks, draw(st.sampled_from([None, None, "same", "split", "raise"])), end, draw(ERROR_MESSAGES)
    )


@st.composite
def hook_runs(draw: st.DrawFn) -> Any:
    from tests.fuzz.properties import HookRun

    return HookRun(
        plans=draw(st.lists(stream_plans(), min_size=1, max_size=3)),
        max_body=draw(st.sampled_from(["0", "1", "10", "100", "64m"])),
        console=draw(st.booleans()),
        filter=draw(st.sampled_from([None, None, "~m POST", "~d example.com", "~q", "!~s"])),
    )


# ---------------------------------------------------------------- captured text for the report

HOSTILE_PIECES = st.sampled_from(
    [
        "<script>alert(1)</script>",
        "</script><script>alert(2)</script>",
        "</SCRIPT >",
        "<!--",
        "-->",
        "<img src=x onerror=alert(3)>",
        "\"'><svg onload=alert(4)>",
        "<b>bold</b>",
        "&amp;&lt;&#60;",
        "\u2028\u2029",
        "\x00",
        "{{7*7}}{% raw %}",
        "</style>",
        "<![CDATA[",
        "\\u003c/script>",
        "javascript:alert(5)",
    ]
)
# Surrogate-free: a page is UTF-8, and lone surrogates are fuzzed through the analyzer's properties.
PLAIN_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
captured_text = st.lists(HOSTILE_PIECES | PLAIN_TEXT, min_size=1, max_size=4).map("".join)
