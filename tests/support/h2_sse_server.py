"""A minimal HTTP/2 server over TLS, on the `h2` library, that answers every POST with an event stream.

What hypercorn or uvicorn cannot be told to do on cue: reset one stream (RST_STREAM) in the middle of its
event stream while the connection stays up, as an HTTP/2 load balancer does when its upstream dies.

    server = H2SseServer(tls.server_context())   # serves on 127.0.0.1, a free port, in a thread
    server.port, server.resets                   # resets: stream ids it reset, in order

The request's path says what to do: ``/reset`` sends two progress events, then resets the stream with
CANCEL (the code clients use too, so only the side tells the two apart); anything else sends ``steps``
progress events 100 ms apart (``?steps=N``, default 50) and then the tool's result.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from urllib.parse import parse_qs, urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

GAP = 0.1


def progress(n: int) -> bytes:
    params = {"progressToken": 1, "progress": n, "total": 50}
    message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
    return b"data: " + json.dumps(message).encode() + b"\n\n"


def result(request_id: object) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "done"}]}}
    return b"data: " + json.dumps(message).encode() + b"\n\n"


class H2SseServer:
    def __init__(self, context: ssl.SSLContext) -> None:
        context.set_alpn_protocols(["h2"])
        self.context = context
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = int(self.listener.getsockname()[1])
        self.resets: list[int] = []  # streams this server reset
        self.reset_by_peer: list[tuple[int, int]] = []  # (stream id, error code) the peer reset
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            sock = self.context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        lock = threading.Lock()  # one writer at a time: the reader thread and each stream's sender
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        requests: dict[int, tuple[str, bytearray]] = {}
        try:
            while data := sock.recv(65536):
                with lock:
                    events = conn.receive_data(data)
                    sock.sendall(conn.data_to_send())
                for event in events:
                    if isinstance(event, h2.events.RequestReceived):
                        # header_encoding="utf-8": names and values come as str
                        path = next((str(v) for k, v in event.headers or [] if k == ":path"), "/")
                        requests[event.stream_id] = (path, bytearray())
                    elif isinstance(event, h2.events.DataReceived):
                        requests[event.stream_id][1].extend(event.data)
                        with lock:
                            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                            sock.sendall(conn.data_to_send())
                    elif isinstance(event, h2.events.StreamEnded):
                        path, body = requests.pop(event.stream_id)
                        args = (sock, conn, lock, event.stream_id, path, bytes(body))
                        threading.Thread(target=self._answer, args=args, daemon=True).start()
                    elif isinstance(event, h2.events.StreamReset):
                        self.reset_by_peer.append((event.stream_id, event.error_code))
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
        except OSError:
            pass
        finally:
            sock.close()

    def _answer(
        self, sock: ssl.SSLSocket, conn: h2.connection.H2Connection, lock: threading.Lock, stream_id: int, path: str,
        body: bytes,
    ) -> None:  # fmt: skip
        url = urlsplit(path)
        request_id = json.loads(body or b"{}").get("id")
        headers = [(":status", "200"), ("content-type", "text/event-stream"), ("cache-control", "no-cache")]
        try:
            with lock:
                conn.send_headers(stream_id, headers)
                sock.sendall(conn.data_to_send())
            steps = 2 if url.path == "/reset" else int(parse_qs(url.query).get("steps", ["50"])[0])
            for n in range(1, steps + 1):
                time.sleep(GAP)
                with lock:
                    conn.send_data(stream_id, progress(n))
                    sock.sendall(conn.data_to_send())
            time.sleep(GAP)
            with lock:
                if url.path == "/reset":
                    conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                    self.resets.append(stream_id)
                else:
                    conn.send_data(stream_id, result(request_id), end_stream=True)
                sock.sendall(conn.data_to_send())
        except (OSError, h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            return  # the peer reset the stream or left: nothing more to send
