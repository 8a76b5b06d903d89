"""A minimal asyncio upstream and client for load tests of the recorder, all on 127.0.0.1.

Every body is derivable from the request alone, so client, upstream and flow file can be compared
by hash without keeping a copy anywhere:

- ``POST`` with a JSON-RPC ``tools/call`` of the tool ``stream`` is answered with a chunked
  ``text/event-stream`` of ``events`` events, one event per chunk, sized by ``event_sizes``; the
  last event carries the JSON-RPC result. With ``hold`` the upstream sends all but the last event,
  then waits until the test calls ``Upstream.release`` (so a test can look at the proxy while
  every stream is open and nearly complete);
- any other JSON-RPC ``POST`` is answered with a JSON result (Content-Length) sized from its id.

The client speaks HTTP/1.1 by hand over asyncio streams and keeps every byte it receives, so a
test can see exactly what had arrived at any moment. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

HOST = "127.0.0.1"
HOLD_LIMIT = 60.0  # seconds a held stream waits for its release at most
READ_TIMEOUT = 30.0  # seconds any single read may take


# --------------------------------------------------------------------------- bodies


@dataclass(frozen=True)
class StreamSpec:
    """One event stream: its id (the JSON-RPC id), event count and sizes, pacing."""

    id: int
    events: int
    low: int  # smallest event, bytes (at least MIN_EVENT)
    high: int  # largest event, bytes
    interval_ms: float = 0.0
    hold: bool = False

    def arguments(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "low": self.low,
            "high": self.high,
            "interval_ms": self.interval_ms,
            "hold": self.hold,
        }

    def request(self) -> bytes:
        params = {"name": "stream", "arguments": self.arguments(), "_meta": {"progressToken": self.id}}
        return _compact({"jsonrpc": "2.0", "id": self.id, "method": "tools/call", "params": params})

    def sizes(self) -> list[int]:
        return event_sizes(self.id, self.events, self.low, self.high)

    def event(self, index: int, size: int) -> bytes:
        pad = _padding(f"stream {self.id} event {index}")
        if index == self.events - 1:
            head = (
                f'id: {index}\nevent: message\ndata: {{"jsonrpc":"2.0","id":{self.id},'
                f'"result":{{"content":[{{"type":"text","text":"'
            )
            tail = '"}],"isError":false}}\n\n'
        else:
            head = (
                f'id: {index}\nevent: message\ndata: {{"jsonrpc":"2.0","method":"notifications/progress","params":'
                f'{{"progressToken":{self.id},"progress":{index + 1},"total":{self.events},"message":"'
            )
            tail = '"}}\n\n'
        room = size - len(head) - len(tail)
        if room < 0:
            raise ValueError(f"event of {size} bytes is too small for its framing")
        return (head + (pad * (room // len(pad) + 1))[:room] + tail).encode()

    def body(self) -> bytes:
        return b"".join(self.event(i, size) for i, size in enumerate(self.sizes()))

    def sha256(self) -> str:
        return hashlib.sha256(self.body()).hexdigest()


MIN_EVENT = 256


def event_sizes(stream_id: int, events: int, low: int, high: int) -> list[int]:
    """The pseudo-random sizes of a stream's events: the same for the same arguments."""
    if low < MIN_EVENT or high < low:
        raise ValueError(f"event sizes must satisfy {MIN_EVENT} <= low <= high")
    rng = random.Random(f"stream:{stream_id}:{events}:{low}:{high}")
    return [rng.randint(low, high) for _ in range(events)]


def post_request(request_id: int) -> bytes:
    params = {"name": "echo", "arguments": {"text": f"call {request_id}"}}
    return _compact({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def post_reply(request_id: int, low: int = 100, high: int = 8192) -> bytes:
    """The JSON answer to ``post_request(request_id)``: 100 B to 8 KB, derived from the id."""
    size = random.Random(f"post:{request_id}").randint(low, high)
    head = f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":[{{"type":"text","text":"'
    tail = '"}],"isError":false}}'
    room = max(0, size - len(head) - len(tail))
    pad = _padding(f"post {request_id}")
    return (head + (pad * (room // len(pad) + 1))[:room] + tail).encode()


def _padding(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- upstream


class Upstream:
    """The asyncio HTTP/1.1 server: ``async with Upstream() as upstream: upstream.port``."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.port = 0
        self.open_streams = 0
        self.peak_open_streams = 0
        self.streams_finished = 0
        self.posts_answered = 0
        self.held = 0  # streams waiting for their release now
        self._release = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Upstream:
        self.server = await asyncio.start_server(self._connection, HOST, 0, backlog=1024)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.wait_closed()

    def release(self) -> None:
        """Let every held stream send its last event and end."""
        self._release.set()

    def hold_again(self) -> None:
        """Streams started from now on are held again."""
        self._release.clear()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the proxy went away (a fault test stops it): nothing to answer
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is over."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        method, _, headers = parse_head(head)
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        request = json.loads(body) if method == "POST" and body else {}
        params = request.get("params") or {}
        if request.get("method") == "tools/call" and params.get("name") == "stream":
            arguments = params["arguments"]
            spec = StreamSpec(
                request["id"],
                arguments["events"],
                arguments["low"],
                arguments["high"],
                arguments["interval_ms"],
                arguments["hold"],
            )
            await self._stream(writer, spec)
            return False  # the stream ends with its connection
        if "id" in request:
            reply = post_reply(request["id"])
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(reply), reply)
            )
            await writer.drain()
            self.posts_answered += 1
            return True
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        return True

    async def _stream(self, writer: asyncio.StreamWriter, spec: StreamSpec) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        self.open_streams += 1
        self.peak_open_streams = max(self.peak_open_streams, self.open_streams)
        try:
            sizes = spec.sizes()
            for index, size in enumerate(sizes):
                if index == len(sizes) - 1 and spec.hold:
                    self.held += 1
                    try:
                        async with asyncio.timeout(HOLD_LIMIT):
                            await self._release.wait()
                    finally:
                        self.held -= 1
                elif index and spec.interval_ms:
                    await asyncio.sleep(spec.interval_ms / 1000)
                event = spec.event(index, size)
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            self.streams_finished += 1
        finally:
            self.open_streams -= 1


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(request method or HTTP version, target or status, lower-case headers) of a message head."""
    first, *lines = head.decode("latin-1").split("\r\n")
    start, middle, _ = [*first.split(" ", 2), "", ""][:3]
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return start, middle, headers


# --------------------------------------------------------------------------- client


@dataclass
class Exchange:
    """One request through the proxy and what came back, as it arrives."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    received: bytearray = field(default_factory=bytearray)
    complete: bool = False
    error: str | None = None


def request_bytes(port: int, body: bytes, target: str = "/mcp", *, stream: bool = False) -> bytes:
    accept = "text/event-stream" if stream else "application/json, text/event-stream"
    return (
        f"POST {target} HTTP/1.1\r\nhost: {HOST}:{port}\r\ncontent-type: application/json\r\n"
        f"accept: {accept}\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def read_response(reader: asyncio.StreamReader, exchange: Exchange) -> None:
    """Read one response into ``exchange``; ``complete`` says whether its body ended properly."""
    await read_head(reader, exchange)
    await read_body(reader, exchange)


async def read_head(reader: asyncio.StreamReader, exchange: Exchange) -> None:
    async with asyncio.timeout(READ_TIMEOUT):
        head = await reader.readuntil(b"\r\n\r\n")
    _, status, exchange.headers = parse_head(head)
    exchange.status = int(status)


async def read_body(reader: asyncio.StreamReader, exchange: Exchange) -> None:
    if "chunked" in exchange.headers.get("transfer-encoding", ""):
        while True:
            async with asyncio.timeout(READ_TIMEOUT):
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                    break
                exchange.received += await reader.readexactly(size)
                await reader.readexactly(2)
    else:
        async with asyncio.timeout(READ_TIMEOUT):
            exchange.received += await reader.readexactly(int(exchange.headers.get("content-length", "0")))
    exchange.complete = True


async def open_stream(port: int, spec: StreamSpec, exchange: Exchange, gate: asyncio.Semaphore | None = None) -> None:
    """POST the stream's call and read its event stream into ``exchange`` until it ends or breaks.

    ``gate`` bounds how many connections are being set up at once (until the response head has
    arrived): a burst of hundreds of connects would overflow the proxy's listen backlog.
    """
    writer = None
    try:
        async with gate or contextlib.nullcontext():
            async with asyncio.timeout(READ_TIMEOUT):
                reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(request_bytes(port, spec.request(), stream=True))
            await writer.drain()
            await read_head(reader, exchange)
        await read_body(reader, exchange)
    except (ConnectionError, asyncio.IncompleteReadError, TimeoutError) as e:
        exchange.error = f"{type(e).__name__}: {e}"[:200]
    finally:
        if writer is not None:
            writer.close()


async def post_many(port: int, request_ids: list[int]) -> list[Exchange]:
    """The POSTs one after another on one keep-alive connection."""
    async with asyncio.timeout(READ_TIMEOUT):
        reader, writer = await asyncio.open_connection(HOST, port)
    exchanges = []
    try:
        for request_id in request_ids:
            exchange = Exchange()
            writer.write(request_bytes(port, post_request(request_id)))
            await writer.drain()
            await read_response(reader, exchange)
            exchanges.append(exchange)
    finally:
        writer.close()
    return exchanges
