"""Telling MCP exchanges from other traffic passing through the proxy.

An exchange is MCP when its request carries MCP headers or a JSON-RPC body,
when its response hands out an MCP session, or when it goes to an endpoint
already seen speaking MCP (the GET streams and DELETEs of a session carry no
JSON-RPC body of their own). A legacy (2024-11-05) SSE stream names its POST
endpoint in an ``endpoint`` event; that endpoint is learnt too.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

from mitmproxy import http

from mcp_blackbox.analyzer.wire.jsonrpc import (
    MCP_REQUEST_HEADERS,
    JsonObject,
    is_jsonrpc,
    is_mcp_method,
    parse_messages,
)

# JSON-RPC bodies are small; a large upload is not worth parsing on the proxy's path.
MAX_PEEK_BYTES = 1 << 20
SESSION_HEADER = b"mcp-session-id"

Endpoint = tuple[str, int, str]


def endpoint_of(flow: http.HTTPFlow) -> Endpoint:
    # request.host, not pretty_host: the latter parses the Host header on every call.
    return (flow.request.host, flow.request.port, flow.request.path.split("?", 1)[0])


def header_names(headers: http.Headers) -> frozenset[bytes]:
    """The names of ``headers``, lower case, in one pass over its fields: ``name in headers`` converts every
    field for each name asked (some 4 µs each), and the recorder asks for several on every exchange. Header
    names the MCP headers could equal are ASCII, where bytes and str agree on lower case."""
    return frozenset(name.lower() for name, _ in headers.fields)


def header_value(headers: http.Headers, name: bytes) -> str | None:
    """The first value of the header ``name`` (lower case), as ``headers.get`` decodes it; None without one."""
    for field, value in headers.fields:
        if field.lower() == name:
            return value.decode("utf-8", "surrogateescape")
    return None


def request_messages(flow: http.HTTPFlow) -> list[JsonObject]:
    """The JSON-RPC messages in the request body (empty if there are none)."""
    return _jsonrpc_messages(flow.request)


def decoded_body(message: http.Message) -> bytes | None:
    """The body without its content-encoding; as on the wire when it cannot be decoded.

    ``get_content(strict=False)`` still raises TypeError for a text-to-text codec named as the
    content-encoding (``rot13``): a header any peer can send.
    """
    try:
        return message.get_content(strict=False)
    except TypeError:
        return message.raw_content


def _jsonrpc_messages(message: http.Message) -> list[JsonObject]:
    raw = message.raw_content
    if not raw or len(raw) > MAX_PEEK_BYTES:
        return []
    body = decoded_body(message)
    if not body or b'"jsonrpc"' not in body[:4096]:
        return []
    return [m for m in parse_messages(body) or [] if is_jsonrpc(m)]


class McpEndpoints:
    """The endpoints seen speaking MCP during this run."""

    def __init__(self) -> None:
        self.known: set[Endpoint] = set()

    def recognise(self, flow: http.HTTPFlow, requests: list[JsonObject]) -> str | None:
        """Why this exchange is MCP, or None if nothing says it is.

        ``requests``: the JSON-RPC messages of the request body (``request_messages``).
        """
        reason = self._reason(flow, requests)
        if reason:
            self.known.add(endpoint_of(flow))
        return reason

    def _reason(self, flow: http.HTTPFlow, requests: list[JsonObject]) -> str | None:
        names = header_names(flow.request.headers)
        for name in MCP_REQUEST_HEADERS:
            if name.encode() in names:
                return f"request header {name}"
        methods = [m["method"] for m in requests if isinstance(m.get("method"), str)]
        if requests and (not methods or any(is_mcp_method(m) for m in methods)):
            return "JSON-RPC request body"
        if flow.response is not None and SESSION_HEADER in header_names(flow.response.headers):
            return "response header mcp-session-id"
        if endpoint_of(flow) in self.known:
            return "known MCP endpoint"
        return None

    def learn_legacy_endpoint(self, flow: http.HTTPFlow, endpoint_data: str) -> None:
        """Remember the POST endpoint an HTTP+SSE ``endpoint`` event names."""
        self.known.add(endpoint_of(flow))
        try:
            target = urlsplit(urljoin(flow.request.url, endpoint_data.strip()))
            port = target.port or (443 if target.scheme == "https" else 80)
        except ValueError:  # not a URL (an unclosed "[", a port out of range): nothing more to learn
            return
        self.known.add((target.hostname or flow.request.host, port, target.path))
