"""mitmproxy addon: record every MCP HTTP/SSE exchange without changing it.

    mitmdump -s addon/mcp_recorder.py --mode reverse:http://127.0.0.1:8000 -p 8080 -w capture.flows

Server-Sent Event streams are passed to the client live, chunk by chunk and
byte for byte; the arrival time and size of every chunk go into
``flow.metadata["mcp_blackbox"]`` and the body is put back into the flow when
the stream ends, however it ends (complete, cut upstream, aborted by the
client, or still open when mitmdump stops). One line per MCP exchange goes to
the console; failing exchanges are marked for mitmweb users. The verdict is
made in a process of its own (addon/verdict_worker.py) and, with the console
line, comes after the response is passed on (addon/after_response.py).

Loaded with ``-s`` this script runs before the ``-w`` writer (and its own,
``mcp_write``: addon/rotation.py), so the record of facts it puts into a flow
reaches the file. The flow is written before the response is passed on (a
recorder killed outright loses only the exchanges still open), so before the
live verdict: the file holds the capture, and the analyzer judges it. Streams
still open at shutdown are judged before they are written.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, "") or __name__.startswith("__mitmproxy_script__"):
    # Loaded as a script by path (`mitmdump -s .../mcp_recorder.py`), from a checkout or from an
    # installed package: bind the package mcp_blackbox to the folder that holds this file's folder,
    # so its modules load from beside this file, installed or not. On mitmproxy's reload (it re-runs
    # this file when it changes) the old modules are dropped, so new hooks never call old helpers.
    import importlib.machinery
    import importlib.util

    for _name in [m for m in sys.modules if m == "mcp_blackbox" or m.startswith("mcp_blackbox.")]:
        del sys.modules[_name]
    _spec = importlib.machinery.ModuleSpec("mcp_blackbox", None, is_package=True)
    _spec.submodule_search_locations = [str(Path(__file__).resolve().parent.parent)]
    sys.modules["mcp_blackbox"] = importlib.util.module_from_spec(_spec)

from mitmproxy import connection, ctx, exceptions, flowfilter, hooks, http
from mitmproxy.utils import human

from mcp_blackbox.addon.after_response import AfterResponse
from mcp_blackbox.addon.error_side import Side, error_side
from mcp_blackbox.addon.exchange_view import ExchangeView, console_line, describe, recorded_events, with_verdict
from mcp_blackbox.addon.mcp_detect import McpEndpoints, header_value, request_messages
from mcp_blackbox.addon.peer_process import PeerProcesses
from mcp_blackbox.addon.record_redaction import RecordRedaction
from mcp_blackbox.addon.rotation import CaptureWriter
from mcp_blackbox.addon.stream_tap import StreamTap
from mcp_blackbox.addon.verdict_worker import VerdictWorker
from mcp_blackbox.analyzer.calls.live import LiveVerdict, judge_flow
from mcp_blackbox.analyzer.wire.jsonrpc import JsonObject
from mcp_blackbox.analyzer.wire.metadata import (
    METADATA_KEY,
    METADATA_VERSION,
    FlowRecord,
    StreamEnd,
    stream_end_reason,
)

logger = logging.getLogger("mcp_blackbox")

FAILURE_MARKER = ":exclamation:"
SHUTDOWN = "mitmproxy stopped while the stream was open"


def never_raises[Hook: Callable[..., Any]](hook: Hook) -> Hook:
    """An exception in a hook must not reach mitmproxy: log it and carry on."""

    @functools.wraps(hook)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return hook(*args, **kwargs)
        except exceptions.OptionsError:
            raise  # a bad option must stop mitmdump at start-up, with its message
        except Exception:
            logger.exception("mcp_blackbox: %s failed; traffic is unaffected", hook.__name__)
            return None

    # functools.wraps gives the wrapper the hook's signature; mypy types it as _Wrapped, not Hook.
    return guarded  # type: ignore[return-value]


def is_event_stream(response: http.Response) -> bool:
    content_type = header_value(response.headers, b"content-type") or ""
    return content_type.split(";")[0].strip().lower() == "text/event-stream"


class McpRecorder:
    def __init__(self) -> None:
        self.after = AfterResponse()  # what waits until the response is passed on: the verdict's sending
        self.endpoints = McpEndpoints()
        self.open_streams: dict[str, tuple[http.HTTPFlow, StreamTap]] = {}
        self.filter: flowfilter.TFilter | None = None
        self.max_body: int | None = None
        self.console = True
        self.console_is_tty = sys.stdout.isatty()
        self.redaction = RecordRedaction()
        self.peers = PeerProcesses()
        self.verdicts = VerdictWorker()
        self.starting: asyncio.Task[None] | None = None  # the verdict worker's start, referenced while it runs

    def load(self, loader: Any) -> None:
        loader.add_option(
            "mcp_filter",
            str | None,
            None,
            "mitmproxy filter expression that narrows which MCP exchanges are annotated "
            "(e.g. '~d api.example.com'). Event streams are always passed through live.",
        )
        loader.add_option(
            "mcp_stream_max_body",
            str,
            "64m",
            "Largest part of one event stream kept in the flow (e.g. 64m, 512k). "
            "The rest still reaches the client; how much was dropped is recorded.",
        )
        loader.add_option(
            "mcp_listen_file", str | None, None, "Write the proxy's listening addresses to this file (JSON)."
        )
        loader.add_option("mcp_console", bool, True, "Print one line per MCP exchange.")
        loader.add_option(
            "mcp_client_process",
            bool,
            True,
            "Record the local process behind each loopback client connection (pid, name, start time), looked up "
            "once per connection by a helper process, off the traffic's path.",
        )
        loader.add_option(
            "mcp_redact",
            bool,
            False,
            "Write each flow to the flow file (-w, mcp_write) with its secrets replaced by consistent pseudonyms, "
            "by the report's rules. The traffic and what mitmweb shows are unchanged.",
        )

    def configure(self, updated: set[str]) -> None:
        if "mcp_filter" in updated:
            expression = ctx.options.mcp_filter
            try:
                self.filter = flowfilter.parse(expression) if expression else None
            except ValueError as e:
                raise exceptions.OptionsError(f"mcp_filter: {e}") from e
        if {"mcp_redact", "hardump"} & updated:
            self.redaction.configure(ctx.options.mcp_redact)
        if {"mcp_console", "termlog_verbosity"} & updated:
            # Printed directly, not logged: mitmproxy's log path costs more than the rest of the addon.
            # `mitmdump -q` (termlog_verbosity=error) silences it like mitmdump's own lines.
            self.console = ctx.options.mcp_console and getattr(ctx.options, "termlog_verbosity", "info") != "error"
        if "mcp_client_process" in updated:
            self.peers.enabled = ctx.options.mcp_client_process
        if "mcp_stream_max_body" in updated:
            try:
                self.max_body = human.parse_size(ctx.options.mcp_stream_max_body)
            except ValueError as e:
                raise exceptions.OptionsError(f"mcp_stream_max_body: {e}") from e

    @never_raises
    def running(self) -> None:
        self.peers.start()
        self.starting = asyncio.get_running_loop().create_task(self.verdicts.start())
        path = ctx.options.mcp_listen_file
        if not path:
            return
        addresses = [list(a)[:2] for a in ctx.master.addons.get("proxyserver").listen_addrs()]
        write_atomically(Path(path), json.dumps({"listen_addrs": addresses}))

    @never_raises
    def client_connected(self, client: connection.Client) -> None:
        # Handed to a worker thread: the connection goes on at once (addon/peer_process.py).
        self.peers.connected(client.id, client.peername, client.sockname)

    @never_raises
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if response is None or not is_event_stream(response):
            return
        upstream = response.stream if callable(response.stream) else None
        tap = StreamTap(self.max_body, upstream=upstream)
        response.stream = tap
        self.open_streams[flow.id] = (flow, tap)

    @never_raises
    def response(self, flow: http.HTTPFlow) -> None:
        self._close(flow, StreamEnd.COMPLETE, None)

    @never_raises
    def error(self, flow: http.HTTPFlow) -> None:
        message = flow.error.msg if flow.error else "unknown error"
        # Read now, for a stream's record: mitmproxy's stream state moves on once the hook returns.
        side = error_side(flow) if flow.id in self.open_streams else None
        self._close(flow, stream_end_reason(message, side), message, side)

    @never_raises
    def done(self) -> None:
        # Streams still open at shutdown are written by the -w writer after us: give them their partial
        # body and say why they stopped. Every body is kept first, at one instant as close to the stop as
        # can be; then each is judged, one flow's failure never costing another its record. What waited for
        # a response to be passed on runs now: the loop may not get to it.
        self.verdicts.settle()  # the flows the worker has not answered are judged here
        self.after.flush()
        closing = [
            (flow, self._keep_body(flow, StreamEnd.PROXY_SHUTDOWN, SHUTDOWN))
            for flow, _ in list(self.open_streams.values())
        ]
        for flow, (tap, record) in closing:
            try:
                self._annotate(flow, tap, record)
            except Exception:
                logger.exception("mcp_blackbox: judging %s at shutdown failed; its body is kept", flow.id)
        self.after.flush()
        self.peers.close()

    def _close(self, flow: http.HTTPFlow, reason: StreamEnd, error: str | None, side: Side | None = None) -> None:
        tap, record = self._keep_body(flow, reason, error, side)
        self._annotate(flow, tap, record)

    def _keep_body(
        self, flow: http.HTTPFlow, reason: StreamEnd, error: str | None, side: Side | None = None
    ) -> tuple[StreamTap | None, FlowRecord]:
        """Put a streamed body back into the flow and make its record; (None, record) for the rest."""
        entry = self.open_streams.pop(flow.id, None)
        tap = entry[1] if entry else None
        record: FlowRecord = {"version": METADATA_VERSION}
        if tap is not None and flow.response is not None:
            tap.finish(reason, error if reason != StreamEnd.COMPLETE else None, side)
            framed = "content-encoding" not in flow.response.headers
            kept = tap.kept(framed=framed)
            flow.response.raw_content = kept
            record["stream"] = tap.metadata(kept, framed=framed)
            tap.body.clear()  # free the buffers now, not when the flow is dropped
            tap.tail.clear()
        return tap, record

    def _annotate(self, flow: http.HTTPFlow, tap: StreamTap | None, record: FlowRecord) -> None:
        """Put the record into the flow: judged, if the exchange is MCP and passes mcp_filter; as it is for any
        other streamed response; a flow that is neither is left alone."""
        requests = request_messages(flow)
        reason = self._mcp_reason(flow, tap, requests)
        if reason is not None and (self.filter is None or self.filter(flow)):
            self._judge(flow, tap, requests, record, reason)
        if tap is not None or "mcp" in record:
            flow.metadata[METADATA_KEY] = record

    def _mcp_reason(self, flow: http.HTTPFlow, tap: StreamTap | None, requests: list[JsonObject]) -> str | None:
        """Why the exchange is MCP (its endpoint, headers or messages; for an event stream, also what it carried),
        or None."""
        reason = self.endpoints.recognise(flow, requests)
        if reason is None and tap is not None:
            reason = self._recognise_legacy_stream(flow)
        return reason

    def _judge(
        self,
        flow: http.HTTPFlow,
        tap: StreamTap | None,
        requests: list[JsonObject],
        record: FlowRecord,
        reason: str,
    ) -> None:
        """The record's facts now, for the file; the rest once the response has been passed on."""
        record["mcp"] = reason
        known, process = self.peers.of(flow.client_conn.id)
        if known:
            record["client_process"] = process
        if self.peers.owed and (earlier := self.peers.settled()):
            record["earlier_connections"] = earlier
        # In the state before judging it: the verdict reads the stream record like the analyzer does.
        flow.metadata[METADATA_KEY] = record
        self.after.defer(functools.partial(self._send_for_verdict, flow, tap, requests, record))

    def _send_for_verdict(
        self, flow: http.HTTPFlow, tap: StreamTap | None, requests: list[JsonObject], record: FlowRecord
    ) -> None:
        """The console line's view, and the flow to the verdict worker (judged here where it cannot take it).

        After the response is passed on: describing the flow, taking its state and sending it were some 40% of
        the recorder's time in the response hook (109 -> 64 µs per POST, timed under load; issue 23). The flow
        is complete by then (a stream's body is back in it)."""
        view = describe(flow, tap, requests) if self.console else None
        if not self.verdicts.judge(flow, functools.partial(self._answered, flow, record, view)):
            self._verdict(flow, record, view, None)

    def _answered(
        self, flow: http.HTTPFlow, record: FlowRecord, view: ExchangeView | None, verdict: LiveVerdict | None
    ) -> None:
        """The worker's verdict (None: judge it here)."""
        try:
            self._verdict(flow, record, view, verdict)
        except Exception:
            logger.exception("mcp_blackbox: the verdict of %s failed; traffic is unaffected", flow.id)

    def _verdict(
        self, flow: http.HTTPFlow, record: FlowRecord, view: ExchangeView | None, verdict: LiveVerdict | None
    ) -> None:
        """The live verdict into the record (and onto the flow, marked for mitmweb if it failed); its console
        line if asked for."""
        if verdict is None:
            verdict = judge_flow(flow)
        record["failure"] = verdict.reason if verdict.failed else None
        record["pending"] = verdict.reason if verdict.pending else None
        if verdict.failed:
            flow.marked = flow.marked or FAILURE_MARKER
            flow.comment = flow.comment or f"MCP: {verdict.reason}"
            ctx.master.addons.trigger(hooks.UpdateHook([flow]))  # mitmweb shows the mark
        if view is not None:
            print(console_line(with_verdict(view, verdict)), flush=self.console_is_tty)

    def _recognise_legacy_stream(self, flow: http.HTTPFlow) -> str | None:
        for event in recorded_events(flow):
            if event.event == "endpoint" and event.data:
                self.endpoints.learn_legacy_endpoint(flow, event.data)
                return "HTTP+SSE endpoint event"
            if '"jsonrpc"' in event.data:
                return "JSON-RPC in event stream"
        return None


def write_atomically(path: Path, text: str) -> None:
    """Readers polling for the file never see it half-written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# The writer (mcp_write, mcp_rotate_size, mcp_keep: addon/rotation.py) after the recorder: mitmproxy calls
# the recorder's hook first, so each flow is written with its record.
addons = [McpRecorder(), CaptureWriter()]
