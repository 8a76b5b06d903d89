"""Raw HTTP helpers for tests: see exactly what crossed the socket, and drive the control endpoints.

`http_request` uses http.client (de-chunked body, `complete=False` on a cut). `socket_request`
goes lower: it returns the undecoded transfer bytes, so a test can check that a cut stream
really lacks the terminating `0\\r\\n\\r\\n` chunk.
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any

HOST = "127.0.0.1"


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    complete: bool  # False when the connection closed before the body's end

    def json(self) -> Any:
        return json.loads(self.body)


def http_request(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> RawResponse:
    """One request on a fresh connection; `body` is JSON-encoded unless it is already bytes/str."""
    payload = body if body is None or isinstance(body, bytes | str) else json.dumps(body)
    sent_headers = {"content-type": "application/json", **(headers or {})}
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, payload, sent_headers)
        response = conn.getresponse()
        chunks: list[bytes] = []
        complete = True
        try:
            while chunk := response.read1(65536):
                chunks.append(chunk)
        except http.client.IncompleteRead as exc:
            chunks.append(exc.partial)
            complete = False
        return RawResponse(
            status=response.status,
            headers={k.lower(): v for k, v in response.getheaders()},
            body=b"".join(chunks),
            complete=complete,
        )
    finally:
        conn.close()


def mcp_headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"accept": "application/json, text/event-stream", **(extra or {})}


def socket_request(
    port: int, method: str, path: str, body: bytes, headers: dict[str, str], timeout: float = 10.0
) -> tuple[bytes, bytes]:
    """Send one HTTP/1.1 request by hand and read until the server closes; return (head, transfer body)."""
    lines = [f"{method} {path} HTTP/1.1", f"host: {HOST}:{port}", f"content-length: {len(body)}", "connection: close"]
    lines += [f"{name}: {value}" for name, value in {"content-type": "application/json", **headers}.items()]
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        received = bytearray()
        while data := sock.recv(65536):
            received += data
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    return head, rest


def dechunk(raw: bytes) -> tuple[bytes, bool]:
    """Decode a chunked transfer body; return (payload, saw the terminating zero-size chunk)."""
    payload = bytearray()
    position = 0
    while True:
        line_end = raw.find(b"\r\n", position)
        if line_end < 0:
            return bytes(payload), False
        size = int(raw[position:line_end].split(b";")[0], 16)
        if size == 0:
            return bytes(payload), raw[line_end:].startswith(b"\r\n\r\n") or raw[line_end:] == b"\r\n"
        start = line_end + 2
        if start + size > len(raw):
            payload += raw[start:]
            return bytes(payload), False
        payload += raw[start : start + size]
        position = start + size + 2


class Control:
    """The fault layer's control endpoints on the server port (never through a proxy)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        response = http_request(self.port, method, f"/_control/{path}", body)
        if response.status != 200:
            raise RuntimeError(f"control {method} {path} -> {response.status}: {response.body!r}")
        return response.json()

    def faults(self, *rules: dict[str, Any]) -> None:
        self._call("POST", "faults", {"rules": list(rules)})

    def reset(self) -> None:
        self._call("POST", "reset", {})

    def log(self) -> list[dict[str, Any]]:
        return self._call("GET", "log")["exchanges"]


def read_sse_until(
    port: int,
    path: str,
    headers: dict[str, str],
    done: Any,
    *,
    method: str = "GET",
    body: Any = None,
    timeout: float = 10.0,
) -> RawResponse:
    """Read an SSE response until `done(body_so_far)` is true or the server ends it, then hang up.

    For streams the server keeps open after the interesting part (a resumed GET tails live events).
    """
    payload = body if body is None or isinstance(body, bytes | str) else json.dumps(body)
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, payload, {"content-type": "application/json", **headers})
        response = conn.getresponse()
        received = b""
        complete = True
        try:
            while not done(received) and (chunk := response.read1(65536)):
                received += chunk
        except http.client.IncompleteRead as exc:
            received += exc.partial
            complete = False
        return RawResponse(response.status, {k.lower(): v for k, v in response.getheaders()}, received, complete)
    finally:
        conn.close()
