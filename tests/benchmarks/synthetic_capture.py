"""A large, realistic, deterministic synthetic MCP capture for benchmarking the analyzer.

    .venv/bin/python tests/benchmarks/synthetic_capture.py --calls N -o FILE [--seed S] [--clients C]

Writes real mitmproxy flows (``mitmproxy.http.HTTPFlow`` with ``connection.Client``/``Server``,
format 21) through ``mitmproxy.io.FlowWriter``, streaming: only the session being generated on
each client lane is held in memory, never the capture.

What one capture looks like, shaped after ``sample_captures/*.flows`` (recorded with the official
SDK clients through the addon), in reverse-proxy mode in front of ``http://127.0.0.1:8000/mcp``:

- ``--clients`` (default 4) client lanes run concurrently; each runs sessions back to back, so
  sessions of different lanes overlap in time. A session is a Python-SDK-shaped client (ids from
  1, httpx headers, a new connection per request) or a TypeScript-SDK-shaped one (ids from 0,
  node headers, keep-alive connections reused), 50/50. Protocol 2025-11-25, Streamable HTTP.
- Per session: ``initialize`` POST answered by an event stream (priming event + result) that hands
  out ``Mcp-Session-Id``; ``notifications/initialized`` POST -> 202; a standalone GET event
  stream that stays open (empty) until the session ends; then the calls; then ``DELETE`` -> 200.
  The standalone GET then ends ``complete`` (Python: the server closes it after DELETE) or
  ``client-abort`` with "Client disconnected." (TypeScript: the client closes it).
- Each call slot after ``initialize`` is one of (weights in percent, ``SCENARIOS``):
    json_ok          55  tools/call answered ``application/json``
    sse_progress_ok  25  tools/call answered ``text/event-stream``: priming, 1-5 progress, result
    tools_list        5  tools/list answered ``application/json`` (tools with annotations)
    http_5xx_retry    3  tools/call -> 503 text/plain (which ran nothing), every second one a 502 (the
                         upstream failed after it took the request: it may have run); after 1/2/4 s
                         the same call with a new id
    http_429_retry    2  tools/call -> 429 + Retry-After; the same call with a new id, usually after
                         Retry-After, one time in five sooner
    jsonrpc_error     3  a JSON-RPC ``error`` (-32602/-32603/-32601), in JSON or in an event stream
    tool_is_error     3  a result with ``isError: true``, in JSON or in an event stream
    sse_cut_resume    2  event stream cut upstream after priming + 1-3 progress events (no
                         result; ``flow.error`` set; addon metadata ``ended="upstream-error"``),
                         then a GET with ``Last-Event-ID`` that replays the rest and the result
    malformed_json    1  the answer is not JSON (a truncated JSON body, or truncated SSE data);
                         TypeScript clients then time out and POST ``notifications/cancelled``
    no_response       1  ``flow.error`` and no response (client timeout or server closed)
- The addon's record on every MCP flow (``flow.metadata["mcp_blackbox"]``: ``version``, ``mcp``,
  ``failure`` and ``pending`` from the addon's own live verdict, and for event streams ``stream``
  with ``chunks``, ``event_times``, ``ended``, ``error``, ``end_time``, ...), and
  ``flow.marked``/``flow.comment`` on failures, as the addon writes them. Event ids increase per
  client lane (one event store per server behind it).
- A few non-MCP flows so that skipping is exercised: ``GET /favicon.ico`` (404 text/html),
  ``GET /healthz`` (200 plain JSON, not JSON-RPC) and TCP flows; at least one of each per capture.
- Flows are written in completion order, as mitmproxy writes them (a standalone GET stream
  comes after the calls it spanned).

What ``--calls N`` counts: JSON-RPC requests sent by the clients, exactly N: ``initialize``,
``tools/list``, ``tools/call`` and every retry (a 5xx or 429 followed by its retry counts 2).
Notifications, GET streams, DELETEs and non-MCP flows are not counted. A session takes 20-50 of
them (the last sessions may be shorter). ``generate`` returns the counts of everything it wrote.

Deterministic: the same ``--seed``, ``--calls`` and ``--clients`` give the same bytes (flow and
connection ids come from the seeded generator, timestamps from a fixed epoch).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any, BinaryIO

from mitmproxy import connection, flow, http, tcp
from mitmproxy import io as flow_io
from mitmproxy.proxy.mode_specs import ProxyMode

from mcp_blackbox.analyzer.calls.live import judge_flow

# The generator has methods named connection and flow: its annotations name the types through these.
ClientConnection = connection.Client
ServerConnection = connection.Server
Connections = tuple[connection.Client, connection.Server]
AnyFlow = flow.Flow

GENERATOR_VERSION = 2
EPOCH = 1_796_000_000.0  # Nov 2026, like the sample captures; fixed so that output is deterministic
UPSTREAM = ("127.0.0.1", 8000)
LISTEN = ("127.0.0.1", 8080)
PROXY_MODE = ProxyMode.parse(f"reverse:http://{UPSTREAM[0]}:{UPSTREAM[1]}")
PROTOCOL_VERSION = "2025-11-25"
METADATA_KEY = "mcp_blackbox"
FAILURE_MARKER = ":exclamation:"
CUT_ERROR = (
    "HTTP/1 protocol error: peer closed connection without sending complete message body (incomplete chunked read)"
)
CLIENT_GONE = "Client disconnected."
CHUNK_SIZE = 16_384  # a large event reaches the proxy in several network chunks
SESSION_SIZE = (20, 50)  # JSON-RPC requests per session, initialize included

SCENARIOS: tuple[tuple[str, int], ...] = (
    ("json_ok", 55),
    ("sse_progress_ok", 25),
    ("tools_list", 5),
    ("http_5xx_retry", 3),
    ("http_429_retry", 2),
    ("jsonrpc_error", 3),
    ("tool_is_error", 3),
    ("sse_cut_resume", 2),
    ("malformed_json", 1),
    ("no_response", 1),
)
TWO_REQUEST_SCENARIOS = {"http_5xx_retry", "http_429_retry"}

# name, annotations, whether it reports progress when it streams
TOOLS: tuple[tuple[str, dict[str, bool], bool], ...] = (
    ("search_docs", {"readOnlyHint": True}, False),
    ("read_file", {"readOnlyHint": True}, False),
    ("get_weather", {"readOnlyHint": True, "openWorldHint": True}, False),
    ("add", {"readOnlyHint": True}, False),
    ("write_record", {"destructiveHint": False, "idempotentHint": True}, False),
    ("create_ticket", {"destructiveHint": False, "idempotentHint": False}, False),
    ("send_email", {"destructiveHint": True, "openWorldHint": True}, False),
    ("run_query", {"readOnlyHint": True}, True),
    ("build_report", {"readOnlyHint": False}, True),
    ("index_repository", {"idempotentHint": True}, True),
)
QUICK_TOOLS = [t for t in TOOLS if not t[2]]
QUICK_WEIGHTS = [30, 22, 10, 8, 10, 8, 4]
SLOW_TOOLS = [t for t in TOOLS if t[2]]
WORDS = tuple(
    " ".join(
        (
            "the request was handled by the upstream service and returned a list of matching records with their",
            "identifiers timestamps owners and current status; see the attached summary for details about latency",
            "cache hits retries quota usage region deployment build pipeline ticket customer invoice order shipment",
            "repository branch commit review approval incident alert metric dashboard query index shard replica",
        )
    ).split()
)
JSONRPC_ERRORS = (
    (-32602, "Invalid params: missing required argument", 6),
    (-32603, "Internal error", 3),
    (-32601, "Method not found", 1),
)


def compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def tools_list_result() -> dict[str, Any]:
    tools = []
    for name, hints, _ in TOOLS:
        tool: dict[str, Any] = {
            "annotations": hints,
            "description": f"{name.replace('_', ' ').capitalize()}.",
            "inputSchema": {
                "properties": {"query": {"title": "Query", "type": "string"}},
                "required": ["query"],
                "type": "object",
                "title": f"{name}Arguments",
            },
            "name": name,
        }
        if name == "add":
            tool["inputSchema"] = {
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "type": "object",
            }
            tool["outputSchema"] = {
                "properties": {"sum": {"title": "Sum", "type": "integer"}},
                "required": ["sum"],
                "type": "object",
                "title": "AddResult",
            }
        tools.append(tool)
    return {"tools": tools}


TOOLS_LIST_RESULT = tools_list_result()


class Stats(Counter):
    """Counts of what was written, by name (``requests`` is what ``--calls`` counts)."""


class CaptureGenerator:
    def __init__(self, calls: int, seed: int = 0, clients: int = 4) -> None:
        if calls < 1 or clients < 1:
            raise ValueError("calls and clients must be at least 1")
        self.rng = random.Random(seed)
        self.remaining = calls
        self.clients = clients
        self.stats = Stats()
        self.scenario_names = [name for name, _ in SCENARIOS]
        self.scenario_weights = [weight for _, weight in SCENARIOS]
        rng = random.Random(seed ^ 0x5EED)
        self.texts = [" ".join(rng.choices(WORDS, k=rng.randint(4, 80))) for _ in range(512)]
        self.big_texts = [" ".join(rng.choices(WORDS, k=rng.randint(600, 2500))) for _ in range(32)]
        self._dates: dict[int, bytes] = {}

    # ------------------------------------------------------------------ driving

    def flows(self) -> Iterator[AnyFlow]:
        """Every flow of the capture, in completion order."""
        for _, f in self.timed_flows():
            yield f

    def timed_flows(self) -> Iterator[tuple[float, AnyFlow]]:
        """Every flow of the capture with its completion time (when the recorder writes it), in that order."""
        lanes = [self._lane(n) for n in range(self.clients)]
        for completed, *_, f in heapq.merge(*lanes):
            yield completed, f

    def write(self, fo: BinaryIO) -> Stats:
        writer = flow_io.FlowWriter(fo)
        for f in self.flows():
            writer.add(f)
            self.stats["flows"] += 1
        return self.stats

    def _lane(self, lane: int) -> Iterator[tuple[float, int, int, AnyFlow]]:
        # (completion time, lane, index in session, flow): unique before the flow, so that merging
        # lanes never compares flows.
        lane_state = {"event_id": 0, "port": 40000 + 2000 * lane}
        t = EPOCH + 0.37 * lane
        first = True
        while self.remaining > 0:
            quota = min(self.remaining, self.rng.randint(*SESSION_SIZE))
            self.remaining -= quota
            session = Session(self, lane_state, t, quota, extras=first and lane == 0)
            first = False
            items = sorted(session.run(), key=lambda item: (item[0], item[1]))
            for completed, index, f in items:
                yield completed, lane, index, f
            t = items[-1][0] + self.rng.uniform(0.2, 8.0)

    # ------------------------------------------------------------------ helpers used by sessions

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def date(self, t: float) -> bytes:
        second = int(t)
        value = self._dates.get(second)
        if value is None:
            if len(self._dates) > 4096:
                self._dates.clear()
            value = self._dates[second] = formatdate(second, usegmt=True).encode()
        return value

    def scenario(self) -> str:
        return self.rng.choices(self.scenario_names, self.scenario_weights)[0]


class Session:
    """One MCP session of one client: builds its flows (with completion times), not in order."""

    def __init__(self, gen: CaptureGenerator, lane: dict[str, int], start: float, quota: int, *, extras: bool):
        self.gen = gen
        self.rng = gen.rng
        self.lane = lane
        self.t = start
        self.quota = quota
        self.extras = extras
        self.flavor = "py" if self.rng.random() < 0.5 else "ts"
        self.next_id = 1 if self.flavor == "py" else 0
        self.session_id = f"{self.rng.getrandbits(128):032x}".encode()
        self.items: list[tuple[float, int, flow.Flow]] = []
        self.open_streams: list[tuple[http.HTTPFlow, list[tuple[float, bytes]], float]] = []
        self.keepalive: Connections | None = None
        self.last_arguments: dict[str, Any] = {}

    # ------------------------------------------------------------------ the session's script

    def run(self) -> list[tuple[float, int, AnyFlow]]:
        stats = self.gen.stats
        stats["sessions"] += 1
        stats[f"sessions_{self.flavor}"] += 1
        self.initialize()
        self.notify("notifications/initialized", None)
        self.standalone_get()
        if self.extras:
            self.non_mcp(favicon=True, health=True, tcp_flow=True)
        while self.quota > 0:
            self.t += 0.02 + self.rng.expovariate(1 / 0.6)
            if self.rng.random() < 0.002:
                self.non_mcp(favicon=self.rng.random() < 0.5, health=True, tcp_flow=self.rng.random() < 0.3)
            scenario = self.gen.scenario()
            if scenario in TWO_REQUEST_SCENARIOS and self.quota < 2:
                scenario = "json_ok"
            stats[f"scenario_{scenario}"] += 1
            getattr(self, scenario)()
        self.t += 0.05 + self.rng.expovariate(1 / 0.3)
        self.delete()
        self.close_streams()
        return self.items

    # ------------------------------------------------------------------ scenarios

    def json_ok(self) -> None:
        name, rid, body = self.tool_request()
        self.post_json(body, self.answer(rid, self.tool_result(name, rid)), latency=self.latency())

    def sse_progress_ok(self) -> None:
        name, rid, body = self.tool_request(slow=True)
        events = [*self.progress_events(rid, self.rng.randint(1, 5)), self.answer(rid, self.tool_result(name, rid))]
        self.post_sse(body, events)

    def tools_list(self) -> None:
        rid = self.take_id()
        body = self.request_body(rid, "tools/list", None)
        self.post_json(body, self.answer(rid, TOOLS_LIST_RESULT), latency=self.latency() / 3)

    def http_5xx_retry(self) -> None:
        name, _, body = self.tool_request()
        # Alternating, not drawn: the random stream, and so every other flow of the capture, stays as it was.
        if self.gen.stats["scenario_http_5xx_retry"] % 2:
            self.post_plain(body, 503, b"Service Unavailable", b"upstream unavailable")
        else:
            self.post_plain(body, 502, b"Bad Gateway", b"upstream reset the connection")
        self.t += self.rng.choice((1.0, 2.0, 4.0)) + self.rng.uniform(0, 0.05)
        self.gen.stats["retries"] += 1
        retry_id = self.take_id()
        retry_body = self.request_body(retry_id, "tools/call", self.retarget(body, retry_id))
        self.post_json(retry_body, self.answer(retry_id, self.tool_result(name, retry_id)), latency=self.latency())

    def http_429_retry(self) -> None:
        name, _, body = self.tool_request()
        retry_after = self.rng.randint(1, 5)
        self.post_plain(
            body,
            429,
            b"Too Many Requests",
            b"rate limit exceeded",
            extra=((b"retry-after", str(retry_after).encode()),),
        )
        if self.rng.random() < 0.2:
            self.gen.stats["retries_before_retry_after"] += 1
            self.t += self.rng.uniform(0.1, 0.8) * retry_after
        else:
            self.t += retry_after + self.rng.uniform(0.01, 0.5)
        self.gen.stats["retries"] += 1
        retry_id = self.take_id()
        retry_body = self.request_body(retry_id, "tools/call", self.retarget(body, retry_id))
        self.post_json(retry_body, self.answer(retry_id, self.tool_result(name, retry_id)), latency=self.latency())

    def jsonrpc_error(self) -> None:
        _, rid, body = self.tool_request()
        code, message, _ = self.rng.choices(JSONRPC_ERRORS, [w for *_, w in JSONRPC_ERRORS])[0]
        answer = compact({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})
        if self.rng.random() < 0.5:
            self.post_json(body, answer, latency=self.latency() / 2)
        else:
            self.post_sse(body, [answer])

    def tool_is_error(self) -> None:
        name, rid, body = self.tool_request()
        text = f"Error executing tool {name}: {self.rng.choice(self.gen.texts)[:120]}"
        answer = self.answer(rid, {"content": [{"type": "text", "text": text}], "isError": True})
        if self.rng.random() < 0.6:
            self.post_json(body, answer, latency=self.latency())
        else:
            self.post_sse(body, [answer])

    def sse_cut_resume(self) -> None:
        name, rid, body = self.tool_request(slow=True)
        total = self.rng.randint(3, 6)
        before = self.rng.randint(1, min(3, total - 1))
        progress = self.progress_events(rid, total)
        cut = self.post_sse(body, progress[:before], cut=True)
        # The client reconnects after its back-off with the last event id it saw.
        self.t = cut + 1.0 + self.rng.uniform(0.0, 0.05)
        self.gen.stats["resume_gets"] += 1
        replay = [*progress[before:], self.answer(rid, self.tool_result(name, rid))]
        self.get_stream(last_event_id=self.lane["event_id"], replay=replay)

    def malformed_json(self) -> None:
        name, rid, body = self.tool_request()
        whole = self.answer(rid, self.tool_result(name, rid))
        broken = whole[: max(20, len(whole) - self.rng.randint(2, 40))]
        if self.rng.random() < 0.5:
            self.post_json(body, broken, latency=self.latency())
        else:
            self.post_sse(body, [broken])
        if self.flavor == "ts":  # its request timeout fires, then it cancels
            self.t += 60.0
            reason = "McpError: MCP error -32001: Request timed out"
            self.notify("notifications/cancelled", {"requestId": rid, "reason": reason})

    def no_response(self) -> None:
        _, _, body = self.tool_request()
        client, server = self.connection()
        start, end = self.t, self.t + self.rng.uniform(0.0003, 0.001)
        request = self.request(b"POST", body, start, end)
        if self.rng.random() < 0.5:
            message, at = CLIENT_GONE, end + 30.0  # the client's timeout
        else:
            message, at = "server closed connection", end + self.latency()
        f = self.flow(client, server, request, None, error=(message, at))
        self.annotate(f)
        self.add(f, at)
        self.t = at

    # ------------------------------------------------------------------ handshake and session end

    def initialize(self) -> None:
        rid = self.take_id()
        if self.flavor == "py":
            params = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"elicitation": {"form": {}, "url": {}}},
                "clientInfo": {"name": "mcp", "version": "0.1.0"},
            }
        else:
            params = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "agent-runner", "version": "2.4.1"},
            }
        result = {
            "capabilities": {
                "prompts": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False},
            },
            "protocolVersion": PROTOCOL_VERSION,
            "serverInfo": {"name": "synthetic-mcp-server", "version": "1.0.0"},
        }
        self.post_sse(self.request_body(rid, "initialize", params), [self.answer(rid, result)], initialize=True)

    def notify(self, method: str, params: dict[str, Any] | None) -> None:
        self.t += 0.005 + self.rng.uniform(0, 0.01)
        body = self.request_body(None, method, params)
        self.gen.stats["notifications"] += 1
        self.exchange_empty(b"POST", body, 202, b"Accepted")

    def delete(self) -> None:
        self.gen.stats["deletes"] += 1
        self.exchange_empty(b"DELETE", b"", 200, b"OK")

    def standalone_get(self) -> None:
        self.t += 0.002
        self.gen.stats["standalone_gets"] += 1
        self.get_stream(last_event_id=None, replay=[])

    def close_streams(self) -> None:
        """The open GET streams end when the session does: closed by the server after DELETE
        (Python client) or by the client going away (TypeScript client)."""
        for f, events, started in self.open_streams:
            end = self.t + self.rng.uniform(0.0005, 0.003)
            assert f.response is not None
            if self.flavor == "py":
                f.response.timestamp_end = end
                meta = self.stream_meta(events, started, end + 0.0001, "complete", None)
            else:
                f.error = flow.Error(CLIENT_GONE, end)
                meta = self.stream_meta(events, started, end + 0.0001, "client-abort", CLIENT_GONE)
            self.annotate(f, meta)
            self.add(f, end + 0.0001)
        self.open_streams.clear()

    # ------------------------------------------------------------------ non-MCP traffic

    def non_mcp(self, *, favicon: bool, health: bool, tcp_flow: bool) -> None:
        at = self.t + self.rng.uniform(0.01, 0.2)
        if favicon:
            self.gen.stats["non_mcp_favicon"] += 1
            self.plain_http(b"/favicon.ico", at, 404, b"Not Found", b"text/html; charset=utf-8", b"<h1>Not Found</h1>")
        if health:
            self.gen.stats["non_mcp_health"] += 1
            self.plain_http(b"/healthz", at + 0.3, 200, b"OK", b"application/json", b'{"status":"ok"}')
        if tcp_flow:
            self.gen.stats["non_mcp_tcp"] += 1
            client, server = self.new_connection(at + 0.5)
            f = tcp.TCPFlow(client, server)
            f.id = self.gen.uid()
            f.timestamp_created = at + 0.5
            f.messages = [
                tcp.TCPMessage(True, b"\x00\x00\x00\x08\x04\xd2\x16\x2f", at + 0.501),
                tcp.TCPMessage(False, b"N", at + 0.502),
                tcp.TCPMessage(True, b"Q\x00\x00\x00\x0dSELECT 1;\x00", at + 0.503),
            ]
            self.add(f, at + 0.6)

    def plain_http(self, path: bytes, at: float, status: int, reason: bytes, ctype: bytes, body: bytes) -> None:
        client, server = self.new_connection(at)
        headers = (
            (b"host", b"%s:%d" % (UPSTREAM[0].encode(), UPSTREAM[1])),
            (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64; rv:131.0) Gecko/20100101 Firefox/131.0"),
            (b"accept", b"*/*"),
            (b"accept-encoding", b"gzip, deflate"),
            (b"connection", b"keep-alive"),
        )
        request = http.Request(
            UPSTREAM[0], UPSTREAM[1], b"GET", b"http", b"", path, b"HTTP/1.1", headers, b"", None, at, at + 0.0002
        )
        response = http.Response(
            b"HTTP/1.1",
            status,
            reason,
            (
                (b"date", self.gen.date(at)),
                (b"server", b"uvicorn"),
                (b"content-type", ctype),
                (b"content-length", str(len(body)).encode()),
            ),
            body,
            None,
            at + 0.002,
            at + 0.0025,
        )
        f = self.flow(client, server, request, response)
        self.add(f, at + 0.0025)

    # ------------------------------------------------------------------ exchanges

    def post_json(self, body: bytes, answer: bytes, *, latency: float) -> None:
        client, server = self.connection()
        req_end = self.t + self.rng.uniform(0.0003, 0.001)
        request = self.request(b"POST", body, self.t, req_end)
        resp_start = req_end + latency
        resp_end = resp_start + 0.0002 + len(answer) * 2e-9
        headers = (
            (b"date", self.gen.date(resp_start)),
            (b"server", b"uvicorn"),
            (b"content-type", b"application/json"),
            (b"mcp-session-id", self.session_id),
            (b"content-length", str(len(answer)).encode()),
        )
        response = http.Response(b"HTTP/1.1", 200, b"OK", headers, answer, None, resp_start, resp_end)
        f = self.flow(client, server, request, response)
        self.annotate(f)
        self.add(f, resp_end)
        self.t = resp_end
        self.gen.stats["json_responses"] += 1

    def post_plain(
        self,
        body: bytes,
        status: int,
        reason: bytes,
        text: bytes,
        *,
        extra: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        client, server = self.connection()
        req_end = self.t + self.rng.uniform(0.0003, 0.001)
        request = self.request(b"POST", body, self.t, req_end)
        resp_start = req_end + self.rng.uniform(0.001, 0.05)
        headers = (
            (b"date", self.gen.date(resp_start)),
            (b"server", b"uvicorn"),
            *extra,
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(text)).encode()),
        )
        response = http.Response(b"HTTP/1.1", status, reason, headers, text, None, resp_start, resp_start + 0.0004)
        f = self.flow(client, server, request, response)
        self.annotate(f)
        self.add(f, resp_start + 0.0004)
        self.t = resp_start + 0.0004
        self.gen.stats[f"http_{status}"] += 1

    def post_sse(
        self,
        body: bytes,
        messages: list[bytes],
        *,
        cut: bool = False,
        initialize: bool = False,
    ) -> float:
        """A POST answered by an event stream: priming event, then ``messages`` paced like a tool
        working; ``cut``: the upstream drops the connection after them. Returns when it ended."""
        client, server = self.connection()
        req_end = self.t + self.rng.uniform(0.0003, 0.001)
        request = self.request(b"POST", body, self.t, req_end, initialize=initialize)
        resp_start = req_end + self.rng.uniform(0.002, 0.01)
        started = resp_start + 0.0002
        at = started + self.rng.uniform(0.0005, 0.002)
        events = [(at, self.event(None))]
        for index, message in enumerate(messages):
            if index < len(messages) - 1:
                at += self.rng.uniform(0.05, 0.8)  # progress: a tool working through its steps
            elif len(messages) > 1:
                at += self.rng.uniform(0.0002, 0.003)  # the result right after the last step
            else:
                at += self.latency()
            events.append((at, self.event(message)))
        if cut:
            end = at + self.rng.uniform(0.05, 0.8)
            response = http.Response(b"HTTP/1.1", 200, b"OK", self.sse_headers(resp_start), b"", None, resp_start, None)
            f = self.flow(client, server, request, response, error=(CUT_ERROR, end))
            meta = self.stream_meta(events, started, end + 0.0001, "upstream-error", CUT_ERROR)
            self.gen.stats["cut_streams"] += 1
        else:
            end = at + 0.0002
            response = http.Response(b"HTTP/1.1", 200, b"OK", self.sse_headers(resp_start), b"", None, resp_start, end)
            f = self.flow(client, server, request, response)
            meta = self.stream_meta(events, started, end + 0.0001, "complete", None)
        assert f.response is not None
        f.response.raw_content = b"".join(data for _, data in events)
        self.annotate(f, meta, initialize=initialize)
        self.add(f, end + 0.0001)
        self.t = end
        self.gen.stats["sse_responses"] += 1
        return end

    def get_stream(self, *, last_event_id: int | None, replay: list[bytes]) -> None:
        """A GET event stream left open until the session ends: the standalone stream, or a resumption
        that replays the missed events at once, then gets a priming event of its own."""
        client, server = self.connection(dedicated=True)
        host = b"%s:%d" % (UPSTREAM[0].encode(), UPSTREAM[1])
        session = ((b"mcp-session-id", self.session_id), (b"mcp-protocol-version", PROTOCOL_VERSION.encode()))
        resume = ((b"last-event-id", str(last_event_id).encode()),) if last_event_id is not None else ()
        if self.flavor == "py":
            headers: tuple[tuple[bytes, bytes], ...] = (
                (b"Host", host),
                (b"Accept-Encoding", b"gzip, deflate, br, zstd"),
                (b"Connection", b"keep-alive"),
                (b"User-Agent", b"python-httpx2/2.16.2"),
                (b"Cache-Control", b"no-store"),
                (b"accept", b"application/json, text/event-stream"),
                (b"content-type", b"application/json"),
                *session,
                *resume,
            )
        else:
            headers = (
                (b"host", host),
                (b"connection", b"keep-alive"),
                *session,
                (b"Accept", b"text/event-stream"),
                *resume,
                (b"accept-language", b"*"),
                (b"sec-fetch-mode", b"cors"),
                (b"user-agent", b"node"),
                (b"accept-encoding", b"gzip, deflate"),
            )
        start = self.t
        request = http.Request(
            *UPSTREAM, b"GET", b"http", b"", b"/mcp", b"HTTP/1.1", headers, b"", None, start, start + 0.0006
        )
        resp_start = start + self.rng.uniform(0.002, 0.01)
        started = resp_start + 0.0002
        events: list[tuple[float, bytes]] = []
        at = started + 0.0008
        for message in replay:
            events.append((at, self.event(message)))
            at += self.rng.uniform(0.00003, 0.0001)
        if replay:
            events.append((at, self.event(None)))
        response = http.Response(b"HTTP/1.1", 200, b"OK", self.sse_headers(resp_start), b"", None, resp_start, None)
        response.raw_content = b"".join(data for _, data in events)
        f = self.flow(client, server, request, response)
        self.open_streams.append((f, events, started))
        self.gen.stats["sse_responses"] += 1
        self.t = at + 0.001 if replay else start + 0.001

    def exchange_empty(self, method: bytes, body: bytes, status: int, reason: bytes) -> None:
        client, server = self.connection()
        req_end = self.t + self.rng.uniform(0.0003, 0.001)
        request = self.request(method, body, self.t, req_end)
        resp_start = req_end + self.rng.uniform(0.001, 0.004)
        headers = (
            (b"date", self.gen.date(resp_start)),
            (b"server", b"uvicorn"),
            (b"content-type", b"application/json"),
            (b"mcp-session-id", self.session_id),
            (b"content-length", b"0"),
        )
        response = http.Response(b"HTTP/1.1", status, reason, headers, b"", None, resp_start, resp_start + 0.0004)
        f = self.flow(client, server, request, response)
        self.annotate(f)
        self.add(f, resp_start + 0.0004)
        self.t = resp_start + 0.0004

    # ------------------------------------------------------------------ building blocks

    def take_id(self) -> int:
        rid = self.next_id
        self.next_id += 1
        self.quota -= 1
        self.gen.stats["requests"] += 1
        return rid

    def latency(self) -> float:
        return min(8.0, self.rng.lognormvariate(math.log(0.04), 0.9))

    def tool_request(self, *, slow: bool = False) -> tuple[str, int, bytes]:
        name = self.rng.choice(SLOW_TOOLS)[0] if slow else self.rng.choices(QUICK_TOOLS, QUICK_WEIGHTS)[0][0]
        rid = self.take_id()
        self.last_arguments = self.arguments(name)
        params = {"name": name, "arguments": self.last_arguments, "_meta": {"progressToken": rid}}
        self.gen.stats[f"tool_{name}"] += 1
        return name, rid, self.request_body(rid, "tools/call", params)

    def retarget(self, body: bytes, rid: int) -> dict[str, Any]:
        """The same tools/call params under a new id (and progress token)."""
        params = json.loads(body)["params"]
        params["_meta"]["progressToken"] = rid
        return params

    def arguments(self, name: str) -> dict[str, Any]:
        rng = self.rng
        if name == "add":
            return {"a": rng.randint(-1000, 1000), "b": rng.randint(-1000, 1000)}
        if name == "read_file":
            return {"path": f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"}
        if name == "write_record":
            return {"key": f"{rng.choice(WORDS)}-{rng.randint(1, 9999)}", "value": rng.choice(WORDS)}
        if name == "get_weather":
            return {"city": rng.choice(("Berlin", "Lisbon", "Osaka", "Denver", "Nairobi"))}
        return {"query": " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))}

    def tool_result(self, name: str, rid: int) -> dict[str, Any]:
        rng = self.rng
        if name == "add":
            total = self.last_arguments["a"] + self.last_arguments["b"]
            return {"content": [{"type": "text", "text": f'{{"sum": {total}}}'}], "structuredContent": {"sum": total}}
        if name == "read_file" and rng.random() < 0.15:
            text = rng.choice(self.gen.big_texts)
        else:
            text = rng.choice(self.gen.texts)
        return {"content": [{"type": "text", "text": text}], "isError": False}

    def progress_events(self, rid: int, total: int) -> list[bytes]:
        return [
            compact(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": rid, "progress": step, "total": total, "message": f"step {step}"},
                }
            )
            for step in range(1, total + 1)
        ]

    def answer(self, rid: int, result: dict[str, Any]) -> bytes:
        return compact({"jsonrpc": "2.0", "id": rid, "result": result})

    def request_body(self, rid: int | None, method: str, params: dict[str, Any] | None) -> bytes:
        # Key order as each SDK serialises it.
        if self.flavor == "py":
            obj: dict[str, Any] = {"jsonrpc": "2.0"}
            if rid is not None:
                obj["id"] = rid
            obj["method"] = method
            if params is not None:
                obj["params"] = params
        else:
            obj = {"method": method}
            if params is not None:
                obj["params"] = params
            obj["jsonrpc"] = "2.0"
            if rid is not None:
                obj["id"] = rid
        return compact(obj)

    def event(self, data: bytes | None) -> bytes:
        self.lane["event_id"] += 1
        eid = self.lane["event_id"]
        if data is None:
            return b"id: %d\r\ndata: \r\n\r\n" % eid
        return b"id: %d\r\nevent: message\r\ndata: %s\r\n\r\n" % (eid, data)

    def request(
        self, method: bytes, body: bytes, start: float, end: float, *, initialize: bool = False
    ) -> http.Request:
        session = () if initialize else ((b"mcp-session-id", self.session_id),)
        version = () if initialize else ((b"mcp-protocol-version", PROTOCOL_VERSION.encode()),)
        host = b"%s:%d" % (UPSTREAM[0].encode(), UPSTREAM[1])
        length = str(len(body)).encode()
        if self.flavor == "py":
            headers: tuple[tuple[bytes, bytes], ...] = (
                (b"Host", host),
                (b"Accept-Encoding", b"gzip, deflate, br, zstd"),
                (b"Connection", b"keep-alive"),
                (b"User-Agent", b"python-httpx2/2.16.2"),
                (b"accept", b"application/json, text/event-stream"),
                (b"content-type", b"application/json"),
                *session,
                *version,
                *(((b"Content-Length", length),) if body or method == b"POST" else ()),
            )
        else:
            headers = (
                (b"host", host),
                (b"connection", b"keep-alive"),
                *session,
                *version,
                (b"content-type", b"application/json"),
                (b"accept", b"application/json, text/event-stream"),
                (b"accept-language", b"*"),
                (b"sec-fetch-mode", b"cors"),
                (b"user-agent", b"node"),
                (b"accept-encoding", b"gzip, deflate"),
                *(((b"content-length", length),) if body or method == b"POST" else ()),
            )
        return http.Request(
            UPSTREAM[0], UPSTREAM[1], method, b"http", b"", b"/mcp", b"HTTP/1.1", headers, body, None, start, end
        )

    def sse_headers(self, at: float) -> tuple[tuple[bytes, bytes], ...]:
        return (
            (b"date", self.gen.date(at)),
            (b"server", b"uvicorn"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"connection", b"keep-alive"),
            (b"content-type", b"text/event-stream"),
            (b"mcp-session-id", self.session_id),
            (b"x-accel-buffering", b"no"),
            (b"Transfer-Encoding", b"chunked"),
        )

    def stream_meta(
        self, events: list[tuple[float, bytes]], started: float, end: float, ended: str, error: str | None
    ) -> dict[str, Any]:
        chunks: list[list[float | int]] = []
        event_times: list[float | None] = []
        for at, data in events:
            for offset in range(0, len(data), CHUNK_SIZE):
                chunks.append([at + offset * 1e-8, len(data[offset : offset + CHUNK_SIZE])])
            event_times.append(chunks[-1][0])
        size = sum(len(data) for _, data in events)
        # Same keys, in the same order, as addon.stream_tap.StreamTap.metadata.
        return {
            "started": started,
            "ended": ended,
            "end_time": end,
            "error": error,
            "chunks": chunks,
            "unrecorded_chunks": 0,
            "bytes": size,
            "stored_bytes": size,
            "dropped_bytes": 0,
            "event_times": event_times,
            "tap_failures": 0,
        }

    def connection(self, *, dedicated: bool = False) -> Connections:
        """Python's client opens a connection per request; node keeps one alive for sequential POSTs
        (and now and then opens another). A GET stream holds its connection for itself."""
        if dedicated or self.flavor == "py":
            return self.new_connection(self.t - 0.0015)
        if self.keepalive is None or self.rng.random() < 0.1:
            self.keepalive = self.new_connection(self.t - 0.0015)
        return self.keepalive

    def new_connection(self, at: float) -> Connections:
        self.lane["port"] = self.lane["port"] + 1 if self.lane["port"] < 60999 else 40000
        client = connection.Client(
            peername=("127.0.0.1", self.lane["port"]),
            sockname=LISTEN,
            timestamp_start=at,
            id=self.gen.uid(),
            proxy_mode=PROXY_MODE,
        )
        server = connection.Server(
            address=UPSTREAM,
            peername=UPSTREAM,
            sockname=("127.0.0.1", 20000 + self.lane["port"] % 20000),
            timestamp_start=at + 0.0003,
            timestamp_tcp_setup=at + 0.0007,
            id=self.gen.uid(),
        )
        return client, server

    def flow(
        self,
        client: ClientConnection,
        server: ServerConnection,
        request: http.Request,
        response: http.Response | None,
        *,
        error: tuple[str, float] | None = None,
    ) -> http.HTTPFlow:
        f = http.HTTPFlow(client, server)
        f.id = self.gen.uid()
        f.timestamp_created = request.timestamp_start + 0.0002
        f.request = request
        f.response = response
        if error is not None:
            f.error = flow.Error(*error)
        return f

    def annotate(self, f: http.HTTPFlow, stream: dict[str, Any] | None = None, *, initialize: bool = False) -> None:
        """What the addon puts on an MCP flow; its verdict by the addon's own rule (analyzer.live)."""
        record: dict[str, Any] = {"version": 1}
        if stream is not None:
            record["stream"] = stream
        record["mcp"] = "JSON-RPC request body" if initialize else "request header mcp-session-id"
        f.metadata[METADATA_KEY] = record
        verdict = judge_flow(f)
        record["failure"] = verdict.reason if verdict.failed else None
        record["pending"] = verdict.reason if verdict.pending else None
        if verdict.failed:
            f.marked = FAILURE_MARKER
            f.comment = f"MCP: {verdict.reason}"

    def add(self, f: AnyFlow, completed: float) -> None:
        self.items.append((completed, len(self.items), f))


def generate(path: Path | str, calls: int, seed: int = 0, clients: int = 4) -> Stats:
    """Write a capture of ``calls`` JSON-RPC requests to ``path``; return what was written."""
    with open(path, "wb", buffering=1 << 20) as fo:
        return CaptureGenerator(calls, seed, clients).write(fo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, required=True, help="JSON-RPC requests from the clients (exactly)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="flow file to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clients", type=int, default=4, help="concurrent client lanes (default 4)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    stats = generate(args.output, args.calls, args.seed, args.clients)
    elapsed = time.perf_counter() - began
    size = args.output.stat().st_size
    print(
        f"wrote {args.output}: {stats['flows']} flows, {stats['requests']} JSON-RPC requests, "
        f"{stats['sessions']} sessions, {size / 1e6:.1f} MB in {elapsed:.1f} s",
        file=sys.stderr,
    )
    print(json.dumps(dict(sorted(stats.items())), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
