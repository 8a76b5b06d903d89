"""Which side ended a stream: the words mitmproxy gives and the side read from its stream state.

The side itself is read from mitmproxy's live layers (addon/error_side.py), checked through real
mitmdump in tests/e2e/test_transports.py; here, what the recorder and the analyzer make of it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from mitmproxy.test import taddons, tflow

from mcp_blackbox.addon import error_side as error_side_module
from mcp_blackbox.addon.error_side import error_side
from mcp_blackbox.addon.mcp_recorder import stream_end_reason
from mcp_blackbox.analyzer.calls.anatomy import _how_it_ended
from mcp_blackbox.analyzer.model.vocabulary import Ending

H2_RESET = "stream reset by client (CANCEL)"


@pytest.mark.parametrize(
    ("message", "side", "reason"),
    [
        (H2_RESET, "server", "server-reset"),
        (H2_RESET, "client", "client-abort"),
        (H2_RESET, None, "stream-reset"),  # never a guessed client-abort
        ("peer closed connection", "client", "client-abort"),  # HTTP/2 words a closed connection alike too
        ("peer closed connection", "server", "upstream-error"),
        ("Client disconnected.", None, "client-abort"),  # HTTP/1 names the side
        ("Connection killed.", "client", "killed"),
    ],
)
def test_the_side_comes_before_the_words(message: str, side: str | None, reason: str) -> None:
    assert stream_end_reason(message, side) == reason  # type: ignore[arg-type]


def states(client: str, server: str) -> SimpleNamespace:
    def named(name: str) -> object:
        return SimpleNamespace(__name__=name)

    return SimpleNamespace(client_state=named(client), server_state=named(server))


@pytest.mark.parametrize(
    ("client", "server", "side"),
    [
        ("state_errored", "state_stream_response_body", "client"),  # marked before the hook: the client's
        ("state_done", "state_stream_response_body", "server"),
        ("state_done", "state_wait_for_response_headers", "server"),
        ("state_consume_request_body", "state_uninitialized", None),
    ],
)
def test_the_side_read_from_the_stream_state(client: str, server: str, side: str | None) -> None:
    flow = tflow.tflow()
    stream = states(client, server)
    stream.flow = flow
    http_layer = SimpleNamespace(streams={1: stream}, child_layer=None)
    root = SimpleNamespace(child_layer=SimpleNamespace(layer=http_layer))
    handler = SimpleNamespace(layer=root)
    proxyserver = SimpleNamespace(connections={flow.client_conn.id: handler})
    master = SimpleNamespace(addons=SimpleNamespace(get=lambda name: proxyserver if name == "proxyserver" else None))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(error_side_module, "ctx", SimpleNamespace(master=master))
        assert error_side(flow) == side


def test_no_live_connection_is_an_unknown_side() -> None:
    with taddons.context():
        assert error_side(tflow.tflow()) is None


def exchange(ended: str | None, error: str | None) -> SimpleNamespace:
    stream = {"ended": ended, "error": error} if ended else None
    return SimpleNamespace(stream=stream, error=error, t_end=None, t_error=2.0, status=200, t_response=1.0)


@pytest.mark.parametrize(
    ("ended", "ending", "detail"),
    [
        ("server-reset", Ending.SERVER_CUT, "the server reset the HTTP/2 stream (RST_STREAM CANCEL)"),
        ("client-abort", Ending.CLIENT_CLOSE, "the client reset the HTTP/2 stream (RST_STREAM CANCEL)"),
        ("stream-reset", Ending.RESET, "HTTP/2 stream reset (RST_STREAM CANCEL), by a side the capture does not know"),
        (None, Ending.RESET, "HTTP/2 stream reset (RST_STREAM CANCEL), by a side the capture does not know"),
    ],
)
def test_the_anatomy_reads_the_side(ended: str | None, ending: Ending, detail: str) -> None:
    call = SimpleNamespace(cancelled_at=None, notifications=[])
    how, at, said = _how_it_ended(call, exchange(ended, H2_RESET))  # type: ignore[arg-type]
    assert (how, at, said) == (ending, 2.0, detail)
