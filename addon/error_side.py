"""Which side an exchange's error came from: the client's connection or the server's.

mitmproxy's words do not say it on every transport. Over HTTP/2 a RST_STREAM from
either peer becomes ``stream reset by client (CODE)`` (the h2 layer's shared base
class words both the same; only the event type differs, RequestProtocolError from
the client's connection, ResponseProtocolError from the server's, and the flow's
``Error`` keeps the message alone), and a closed connection is ``peer closed
connection`` on both sides. Behind HTTP/2 load balancers a server reset is the usual
way a stream dies, so the words would blame the client backwards.

What does say it is mitmproxy's state for the flow's HTTP stream while the ``error``
hook runs (read, never changed). ``HttpStream.handle_protocol_error`` marks the
client's leg errored *before* it calls the hook when the client failed while the
server's leg was open (it forwards the error upstream first), and marks the server's
leg errored only *after* the hook. So, during the hook:

- client leg ``state_errored``: the client reset or closed (client side);
- client leg finished sending (``state_done``, or still streaming its body), server
  leg open (waiting for headers or passing the body): the error came from the server;
- anything else, or the stream not found (an older or newer mitmproxy whose layers
  differ, mitmproxy's test helpers): unknown, and the recorder says so.

The stream is found from the proxyserver addon's live connection handlers (keyed by the
client connection's id, as ``proxyserver.inject_event`` finds them) down the layer stack
to the ``HttpLayer`` and the ``HttpStream`` that carries this flow. Checked against
mitmproxy 12 by tests/e2e/test_transports.py, which resets streams from each side.
"""

from __future__ import annotations

from typing import Any, Literal

from mitmproxy import ctx, http

Side = Literal["client", "server"]

# The server's leg is open: its request is on its way, or its response body is passing through.
SERVER_LEG_OPEN = ("state_wait_for_response_headers", "state_stream_response_body", "state_consume_response_body")
# The client's leg has sent its request (or is streaming its body): an error of its own would have marked it.
CLIENT_LEG_SENT = ("state_done", "state_stream_request_body")
MAX_LAYERS = 1000  # layers looked at for one flow: a handful per stream the connection has open


def error_side(flow: http.HTTPFlow) -> Side | None:
    """The side whose connection the flow's error came from, or None when mitmproxy's state does not say."""
    try:
        stream = _http_stream(flow)
        if stream is None:
            return None
        client, server = _state(stream, "client_state"), _state(stream, "server_state")
    except Exception:  # mitmproxy's internals are not a contract: unknown, never an error
        return None
    if client == "state_errored":
        return "client"
    if server == "state_errored" or (client in CLIENT_LEG_SENT and server in SERVER_LEG_OPEN):
        return "server"
    return None


def _state(stream: Any, name: str) -> str | None:
    state = getattr(stream, name, None)
    return getattr(state, "__name__", None)


def _http_stream(flow: http.HTTPFlow) -> Any:
    master = getattr(ctx, "master", None)
    proxyserver = master.addons.get("proxyserver") if master is not None else None
    handler = getattr(proxyserver, "connections", {}).get(flow.client_conn.id)
    pending = [getattr(handler, "layer", None)]
    for _ in range(MAX_LAYERS):
        if not pending:
            return None
        layer = pending.pop()
        if layer is None:
            continue
        if getattr(layer, "flow", None) is flow and hasattr(layer, "client_state"):
            return layer  # the HttpStream that carries this flow (a WebSocket layer has the flow too)
        # An HttpLayer holds its HttpStreams in streams (a CONNECT's stream holds the tunnel's layers as its
        # child_layer); a layer wraps the next as child_layer; NextLayer holds the one it chose as layer.
        streams = getattr(layer, "streams", None)
        if isinstance(streams, dict):
            pending.extend(streams.values())
        pending.extend((getattr(layer, "child_layer", None), getattr(layer, "layer", None)))
    return None
