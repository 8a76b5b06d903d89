"""What the recorder writes into a flow beside the exchange: ``flow.metadata[METADATA_KEY]``.

The addon writes it (addon/mcp_recorder.py, addon/stream_tap.py); the analyzer reads it back from the
flow file (analyzer/read/load.py); ``redact`` and the rotating writer carry it over. The key and the names
of a stream's ending are defined here once, for both sides.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

METADATA_KEY = "mcp_blackbox"  # flow.metadata[METADATA_KEY]: the recorder's record of the flow
METADATA_VERSION = 1


class StreamEnd(StrEnum):
    """How the recorder saw an event stream end (``StreamRecord.ended``)."""

    COMPLETE = "complete"  # the stream's response ended normally (its body may still lack the answer)
    CLIENT_ABORT = "client-abort"  # the client's side closed or reset it
    SERVER_RESET = "server-reset"  # the server reset the HTTP/2 stream
    STREAM_RESET = "stream-reset"  # an HTTP/2 reset whose side is not known
    UPSTREAM_ERROR = "upstream-error"  # the server's side failed or closed it
    PROXY_SHUTDOWN = "proxy-shutdown"  # mitmproxy stopped while it was open
    KILLED = "killed"  # the flow was killed in mitmproxy


class StreamRecord(TypedDict, total=False):
    """The recorder's record of an event stream (addon/stream_tap.py ``StreamTap.metadata``): when each
    chunk arrived, how the stream ended, and what the capture kept of it."""

    started: float
    ended: StreamEnd | None
    end_time: float | None
    error: str | None
    error_side: str | None  # "client" or "server": whose connection the error came from, when known
    chunks: list[list[Any]]  # [arrival time, size] of each chunk passed on
    unrecorded_chunks: int
    bytes: int
    stored_bytes: int
    dropped_bytes: int
    dropped_range: list[int] | None
    event_times: list[float | None] | None
    tap_failures: int


class ParentRecord(TypedDict):
    pid: int
    name: str


class ProcessRecord(TypedDict, total=False):
    """The local process that owned the client's socket (addon/peer_process.py)."""

    pid: int
    name: str  # the executable's name
    started_at: float  # epoch seconds: with the pid, names one process even after its pid is reused
    parents: list[ParentRecord]  # its parent, grandparent, ... (up to 8)
    gateway: bool  # a proxy (nginx, HAProxy, ...) carrying other processes' requests: not the client


class FlowRecord(TypedDict, total=False):
    """``flow.metadata[METADATA_KEY]``: what the recorder wrote of one flow."""

    version: int  # METADATA_VERSION
    mcp: str  # why the exchange was taken as MCP
    failure: str | None  # the live verdict, when the exchange failed (analyzer/calls/live.py)
    pending: str | None  # the live verdict, when the answer may still come on another exchange
    stream: StreamRecord  # an event stream's record
    # The process that sent it, when the recorder looked it up: None for a remote client or a lookup that
    # found none; absent when not recorded (an older recorder, or the flow ended before the lookup did).
    client_process: ProcessRecord | None
    # The processes of earlier connections all of whose flows ended before their lookups did (a stateless
    # client's connection of one request), by mitmproxy's client connection id: said on the next flow.
    earlier_connections: dict[str, ProcessRecord | None]


def stream_end_reason(error_message: str, side: str | None = None) -> StreamEnd:
    """Why a stream ended early, from mitmproxy's error message and the side it came from.

    ``side`` (addon/error_side.py) comes first: over HTTP/2 mitmproxy words a reset from either peer
    "stream reset by client". Without it, an HTTP/2 reset is ``stream-reset`` (side unknown), never a
    guessed client-abort; the other words are HTTP/1's, which name the side.
    """
    text = error_message.lower()
    if "killed" in text:
        return StreamEnd.KILLED
    if "shutdown" in text or "shut down" in text:
        return StreamEnd.PROXY_SHUTDOWN
    reset = "stream reset" in text
    if side == "client":
        return StreamEnd.CLIENT_ABORT
    if side == "server":
        return StreamEnd.SERVER_RESET if reset else StreamEnd.UPSTREAM_ERROR
    if reset:
        return StreamEnd.STREAM_RESET
    if "client" in text:
        return StreamEnd.CLIENT_ABORT
    return StreamEnd.UPSTREAM_ERROR
