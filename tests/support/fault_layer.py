"""ASGI fault-injection layer in front of the test MCP app, with JSON control endpoints.

Control (called directly on the server port, never through the proxy under test):
    POST /_control/faults  {"rules": [...]}  replace the rule list (and its use counters)
    GET  /_control/faults                    the rules with their use counters
    POST /_control/reset                     clear rules and the exchange log
    GET  /_control/log                       {"exchanges": [...]}, one per MCP request, arrival order

Rule: {"match": {"http_method", "path", "rpc_method", "tool"} (all optional),
       "times": 1 (default; null = unlimited), "action": {...}}
The first rule that matches and has uses left wins. rpc_method/tool come from the POST body
parsed as one JSON-RPC object (tool = params.name). Actions: see the `_act_*` functions.

Everything the layer sends goes through one recording `send`, so the log's response_body_b64
is exactly the body bytes handed to the server for the socket (before chunked framing).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.support.sse import line_ending, parse_event, parse_stream, split_events

CONTROL_PREFIX = "/_control/"
MATCH_KEYS = frozenset({"http_method", "path", "rpc_method", "tool"})
REWRITES = ("malformed_json", "wrong_id", "result_and_error", "content_not_array")
_DISCONNECT: Message = {"type": "http.disconnect"}


class StreamCut(Exception):
    """Raised to the ASGI server after a cut so it drops the connection without the final chunk."""


class _QuietCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], StreamCut))


def quiet_cut_logs() -> None:
    """Keep uvicorn from logging a traceback for every deliberate cut."""
    logging.getLogger("uvicorn.error").addFilter(_QuietCuts())


# ---------------------------------------------------------------- rules and log


@dataclass
class Rule:
    match: dict[str, Any]
    action: dict[str, Any]
    times: int | None
    used: int = 0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Rule:
        action = raw["action"]
        if not isinstance(action, dict) or not (_ACTIONS.keys() & action.keys()):
            raise ValueError(f"unknown action: {action!r}")
        if "rewrite" in action and action["rewrite"] not in REWRITES:
            raise ValueError(f"unknown rewrite {action['rewrite']!r}; expected one of {REWRITES}")
        match = raw.get("match") or {}
        if unknown := set(match) - MATCH_KEYS:
            raise ValueError(f"unknown match keys {sorted(unknown)}; expected some of {sorted(MATCH_KEYS)}")
        default_times = len(action["statuses"]) if "statuses" in action else 1
        return cls(match=match, action=action, times=raw.get("times", default_times))

    def has_uses_left(self) -> bool:
        return self.times is None or self.used < self.times

    def matches(self, request: dict[str, Any]) -> bool:
        return all(request.get(key) == want for key, want in self.match.items())

    def to_json(self) -> dict[str, Any]:
        return {"match": self.match, "action": self.action, "times": self.times, "used": self.used}


@dataclass
class Exchange:
    http_method: str
    path: str
    query: str
    request_headers: dict[str, str]
    request_body: str
    rpc_method: str | None
    tool: str | None
    t_start: float = field(default_factory=time.time)
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytearray = field(default_factory=bytearray)
    fault: int | None = None
    cut: bool = False
    t_end: float | None = None

    def to_json(self) -> dict[str, Any]:
        body = bytes(self.response_body)
        is_sse = self.response_headers.get("content-type", "").startswith("text/event-stream")
        events = (
            [{"event": e.event, "id": e.id, "data": e.data} for e in parse_stream(body) if e.has_data] if is_sse else []
        )
        return {
            "http_method": self.http_method,
            "path": self.path,
            "query": self.query,
            "request_headers": self.request_headers,
            "request_body": self.request_body,
            "rpc_method": self.rpc_method,
            "tool": self.tool,
            "status": self.status,
            "response_headers": self.response_headers,
            "response_body_b64": base64.b64encode(body).decode(),
            "events_sent": events,
            "fault": self.fault,
            "cut": self.cut,
            "t_start": self.t_start,
            "t_end": self.t_end,  # null while the response is still open
        }


def _header_dict(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def _rpc_fields(body: bytes) -> tuple[str | None, str | None]:
    try:
        message = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(message, dict):  # batches and junk match no rpc_method/tool rule
        return None, None
    params = message.get("params")
    tool = params.get("name") if isinstance(params, dict) and message.get("method") == "tools/call" else None
    method = message.get("method")
    return (method if isinstance(method, str) else None), (tool if isinstance(tool, str) else None)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


# ---------------------------------------------------------------- the downstream (what the MCP app sees)


class Downstream:
    """The receive/send pair handed to the MCP app for one request.

    `receive` replays the already-read body, then passes through to the client's receive;
    after `cut()` it reports a client disconnect, so the SDK tears the stream down exactly
    as it would for a real network cut (its event store keeps the unsent events).
    """

    def __init__(self, body: bytes, receive: Receive, send: Send, exchange: Exchange) -> None:
        self._body: bytes | None = body
        self._receive = receive
        self._send = send
        self.exchange = exchange
        self.cut_event = anyio.Event()
        self._started = False
        self._complete = False

    async def receive(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        if self.cut_event.is_set():
            return _DISCONNECT
        result: Message = _DISCONNECT
        async with anyio.create_task_group() as tg:

            async def real() -> None:
                nonlocal result
                result = await self._receive()
                tg.cancel_scope.cancel()

            async def cut() -> None:
                await self.cut_event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(real)
            tg.start_soon(cut)
        return result

    async def send(self, message: Message) -> None:
        """Record and forward to the socket. After a cut, drop silently, as uvicorn does once disconnected."""
        if self.cut_event.is_set():
            return
        if message["type"] == "http.response.start":
            if self._started:
                # The SDK's legacy /sse endpoint returns a second, empty Response once its stream
                # ends. uvicorn drops it if the client is gone and raises if not (server shutdown);
                # either way nothing reaches the wire, so drop it here, unlogged.
                return
            self._started = True
            self.exchange.status = message["status"]
            self.exchange.response_headers = _header_dict(list(message.get("headers", [])))
        elif message["type"] == "http.response.body" and not self._complete:
            self.exchange.response_body += message.get("body", b"")
            self._complete = not message.get("more_body", False)
        await self._send(message)

    def cut(self) -> None:
        self.exchange.cut = True
        self.cut_event.set()


SendFilter = Callable[[Message], Awaitable[None]]


async def _run(app: ASGIApp, scope: Scope, down: Downstream, send: SendFilter, cut_grace: float = 2.0) -> None:
    """Run the app; after a cut, give it a moment to notice the disconnect, then raise StreamCut."""
    finished = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def stop_after_cut() -> None:
            await down.cut_event.wait()
            with anyio.move_on_after(cut_grace):
                await finished.wait()
            tg.cancel_scope.cancel()  # the app ignored the disconnect: stop it anyway

        tg.start_soon(stop_after_cut)
        await app(scope, down.receive, send)
        finished.set()
        tg.cancel_scope.cancel()  # the app is done; stop the watcher
    if down.exchange.cut:
        raise StreamCut(f"stream cut by fault layer after {len(down.exchange.response_body)} body bytes")


# ---------------------------------------------------------------- actions


async def _respond(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    names = {k.lower() for k in headers}
    raw = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]
    if "content-type" not in names:
        raw.append((b"content-type", b"text/plain; charset=utf-8"))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _act_status(app: ASGIApp, scope: Scope, down: Downstream, action: dict[str, Any], k: int) -> None:
    """{"status": 503, "headers": {...}, "body": "...", "after_ms": N}: answer (N ms late, at once without
    after_ms), never reaching the MCP app: a server's own error after it worked on the request a while."""
    if action.get("after_ms"):
        await anyio.sleep(action["after_ms"] / 1000)
    body = action.get("body", f"injected {action['status']}").encode()
    await _respond(down.send, action["status"], body, action.get("headers") or {})


async def _act_statuses(app: ASGIApp, scope: Scope, down: Downstream, action: dict[str, Any], k: int) -> None:
    """{"statuses": [503, 200]}: the k-th match gets statuses[k]; a 2xx entry forwards normally."""
    status = action["statuses"][min(k, len(action["statuses"]) - 1)]
    if 200 <= status < 300:
        await _run(app, scope, down, down.send)
        return
    body = action.get("body", f"injected {status}").encode()
    await _respond(down.send, status, body, action.get("headers") or {})


async def _act_cut(app: ASGIApp, scope: Scope, down: Downstream, action: dict[str, Any], k: int) -> None:
    """{"cut_after_events": N}: pass N SSE events with data (priming events pass free), then abort.

    N=0 cuts at the first data event. A non-SSE response is forwarded untouched.
    """
    limit: int = action["cut_after_events"]
    passed = 0
    pending = b""
    is_sse = False

    async def send(message: Message) -> None:
        nonlocal passed, pending, is_sse
        if down.cut_event.is_set():
            return
        if message["type"] == "http.response.start":
            is_sse = (
                _header_dict(list(message.get("headers", []))).get("content-type", "").startswith("text/event-stream")
            )
            await down.send(message)
            return
        if not is_sse:
            await down.send(message)
            return
        events, pending = split_events(pending + message.get("body", b""))
        for raw in events:
            has_data = parse_event(raw).has_data
            if has_data and passed >= limit:
                down.cut()
                return
            await down.send({"type": "http.response.body", "body": raw, "more_body": True})
            passed += has_data
            if passed >= limit > 0:
                down.cut()
                return
        if not message.get("more_body", False):
            await down.send({"type": "http.response.body", "body": pending, "more_body": False})

    await _run(app, scope, down, send)


def _rewrite_message(kind: str, text: str) -> str | None:
    """Rewrite one JSON-RPC response; None if `text` is not a response with an id."""
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("id") is None or not ({"result", "error"} & message.keys()):
        return None
    if kind == "malformed_json":
        return text.rstrip()[:-1]  # drop the closing brace: still recognisable, no longer JSON
    if kind == "wrong_id":
        rid = message["id"]
        message["id"] = rid + 1000 if isinstance(rid, int) else f"{rid}+1000"
    elif kind == "result_and_error":
        message.setdefault("result", {})
        message.setdefault("error", {"code": -32603, "message": "injected error beside result"})
    elif kind == "content_not_array":
        if not isinstance(message.get("result"), dict):
            return None
        message["result"]["content"] = "not-an-array"
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def _rewrite_event(kind: str, raw: bytes) -> bytes | None:
    """Rewrite the data of one SSE event, keeping its other fields and its line endings."""
    event = parse_event(raw)
    new_data = _rewrite_message(kind, event.data) if event.has_data else None
    if new_data is None:
        return None
    eol = line_ending(raw)
    lines = [f"event: {event.event}".encode()]
    if event.id is not None:
        lines.append(f"id: {event.id}".encode())
    lines.extend(b"data: " + part.encode() for part in new_data.split("\n"))
    return eol.join(lines) + eol + eol


async def _act_rewrite(app: ASGIApp, scope: Scope, down: Downstream, action: dict[str, Any], k: int) -> None:
    """{"rewrite": kind}: corrupt the JSON-RPC response (JSON body, or the SSE event holding it)."""
    kind: str = action["rewrite"]
    held: Message | None = None  # JSON responses: hold the start until the body is rewritten
    body = b""
    mode = "passthrough"
    pending = b""
    done = False  # SSE: only the first response event is rewritten

    async def send(message: Message) -> None:
        nonlocal held, body, mode, pending, done
        if message["type"] == "http.response.start":
            content_type = _header_dict(list(message.get("headers", []))).get("content-type", "")
            if content_type.startswith("application/json"):
                mode, held = "json", message
                return
            mode = "sse" if content_type.startswith("text/event-stream") else "passthrough"
            await down.send(message)
            return
        more = message.get("more_body", False)
        if mode == "json":
            assert held is not None
            body += message.get("body", b"")
            if more:
                return
            rewritten = _rewrite_message(kind, body.decode("utf-8", errors="replace"))
            new_body = rewritten.encode() if rewritten is not None else body
            headers = [(n, v) for n, v in held.get("headers", []) if n.lower() != b"content-length"]
            headers.append((b"content-length", str(len(new_body)).encode()))
            await down.send({**held, "headers": headers})
            await down.send({"type": "http.response.body", "body": new_body, "more_body": False})
            return
        if mode == "passthrough":
            await down.send(message)
            return
        events, pending = split_events(pending + message.get("body", b""))
        for raw in events:
            new = None if done else _rewrite_event(kind, raw)
            done = done or new is not None
            await down.send({"type": "http.response.body", "body": new or raw, "more_body": True})
        if not more:
            await down.send({"type": "http.response.body", "body": pending, "more_body": False})

    await _run(app, scope, down, send)


async def _act_delay(app: ASGIApp, scope: Scope, down: Downstream, action: dict[str, Any], k: int) -> None:
    """{"delay_ms": N}: a slow upstream. The request runs as usual, but its response starts N ms late: a
    gateway that timed out meanwhile has gone, and the tool ran all the same (its answer goes nowhere)."""

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            await anyio.sleep(action["delay_ms"] / 1000)
        await down.send(message)

    await _run(app, scope, down, send)


Action = Callable[[ASGIApp, Scope, Downstream, dict[str, Any], int], Awaitable[None]]
_ACTIONS: dict[str, Action] = {
    "status": _act_status,
    "statuses": _act_statuses,
    "cut_after_events": _act_cut,
    "rewrite": _act_rewrite,
    "delay_ms": _act_delay,
}


# ---------------------------------------------------------------- the middleware


class FaultLayer:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.rules: list[Rule] = []
        self.log: list[Exchange] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan must reach the SDK's session manager
            await self.app(scope, receive, send)
        elif scope["path"].startswith(CONTROL_PREFIX):
            await self._control(scope, receive, send)
        else:
            await self._proxy(scope, receive, send)

    def _pick(self, request: dict[str, Any]) -> tuple[int, Rule] | None:
        for index, rule in enumerate(self.rules):
            if rule.has_uses_left() and rule.matches(request):
                rule.used += 1
                return index, rule
        return None

    async def _proxy(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        rpc_method, tool = _rpc_fields(body) if scope["method"] == "POST" else (None, None)
        exchange = Exchange(
            http_method=scope["method"],
            path=scope["path"],
            query=scope.get("query_string", b"").decode("latin-1"),
            request_headers=_header_dict(list(scope["headers"])),
            request_body=body.decode("utf-8", errors="replace"),
            rpc_method=rpc_method,
            tool=tool,
        )
        self.log.append(exchange)
        down = Downstream(body, receive, send, exchange)
        picked = self._pick(
            {"http_method": scope["method"], "path": scope["path"], "rpc_method": rpc_method, "tool": tool}
        )
        try:
            if picked is None:
                await _run(self.app, scope, down, down.send)
                return
            index, rule = picked
            exchange.fault = index
            kind = next(name for name in _ACTIONS if name in rule.action)
            await _ACTIONS[kind](self.app, scope, down, rule.action, rule.used - 1)
        finally:
            exchange.t_end = time.time()

    async def _control(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        route = (scope["method"], scope["path"].removeprefix(CONTROL_PREFIX).rstrip("/"))
        status = 200
        payload: dict[str, Any] = {"ok": True}
        try:
            if route == ("POST", "faults"):
                self.rules = [Rule.from_json(raw) for raw in json.loads(body or b"{}").get("rules", [])]
                payload = {"ok": True, "rules": len(self.rules)}
            elif route == ("GET", "faults"):
                payload = {"rules": [rule.to_json() for rule in self.rules]}
            elif route == ("POST", "reset"):
                self.rules, self.log = [], []
            elif route == ("GET", "log"):
                payload = {"exchanges": [exchange.to_json() for exchange in self.log]}
            else:
                status, payload = 404, {"error": f"no control route {route[0]} {route[1]}"}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            status, payload = 400, {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(payload).encode()
        await _respond(send, status, data, {"content-type": "application/json"})
