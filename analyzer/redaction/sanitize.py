"""A capture that can be shared: the secrets of a flow replaced by consistent pseudonyms.

The rules are those of the report (``analyzer/redaction/redact.py``: names, suffixes, OAuth's parameters, the
allow-list of MCP fields); what differs is how a secret is shown. ``Pseudonyms`` gives the same secret the same
stand-in everywhere, so the analysis of the sanitized capture reaches the same verdicts, retry chains and
duplicate executions as the original's. Used by ``mcp-blackbox redact`` (files) and by the recorder's
``mcp_redact`` option (the copy of each flow that goes to disk; never the live flow).

What is rewritten in an HTTP flow: every header (request, response, trailers), the query string and the
URL's password, the bodies (decoded first: JSON, event streams line by line, other text; bytes that are no
text only lose the secrets already known), the error message, the comment and the metadata (the addon's
record: its verdict's reason, a stream's error). A body that changed gets its Content-Length and, when the
addon recorded it as a stream, its record's byte counts put right. A body in a content-encoding it cannot
decode is dropped, and the flow's metadata says so. Flows that are not HTTP (TCP, UDP, DNS) are not
written at all: the analyzer does not read them, and their bytes have no names to go by.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy.io import FlowReader, FlowWriter
from mitmproxy.net import encoding
from mitmproxy.websocket import WebSocketData

from mcp_blackbox.analyzer.redaction.redact import (
    Pseudonyms,
    _redact_free_text,
    _redact_query,
    is_secret_name,
    redact_headers,
    redact_json,
    redact_url,
)
from mcp_blackbox.analyzer.wire.metadata import METADATA_KEY

DROPPED_BODY = "dropped_body"  # in the addon's record: a body that could not be decoded to be redacted
LINE_END = re.compile(r"(\r\n|\r|\n)")
# Bodies read as text although they do not say so: anything that decodes as UTF-8, and these types.
TEXT_TYPES = ("text/", "json", "xml", "javascript", "x-www-form-urlencoded", "event-stream", "yaml")
BINARY_TYPES = ("image/", "audio/", "video/", "font/", "application/octet-stream", "application/zip")


@dataclass
class Sanitizer:
    """Applies one run's pseudonyms to flows. Not thread-safe (mitmproxy calls addons on one thread)."""

    pseudonyms: Pseudonyms = field(default_factory=Pseudonyms)
    dropped_bodies: int = 0

    def copy(self, flow: mflow.Flow) -> http.HTTPFlow | None:
        """A redacted copy of ``flow``, made from its state: ``flow`` itself is never touched. None for a flow
        that is not HTTP (it is not written)."""
        if not isinstance(flow, http.HTTPFlow):
            return None
        copy = http.HTTPFlow.from_state(flow.get_state())
        assert isinstance(copy, http.HTTPFlow)
        self.sanitize(copy)
        return copy

    def sanitize(self, flow: http.HTTPFlow) -> None:
        """Redact ``flow`` in place: by the rules first (which learns the secrets it names), then every part
        again for the secrets learned meanwhile (a token named in the response, quoted in the request)."""
        _rewrite(flow, self, by_rules=True)
        _rewrite(flow, self, by_rules=False)

    # ---------------------------------------------------------------- what each part becomes

    def _by_rules(self, text: str) -> str:
        return _redact_free_text(text, self.pseudonyms)

    def header(self, name: str, value: str) -> str:
        return redact_headers({name: value}, self.pseudonyms)[name]

    def path(self, path: str) -> str:
        base, mark, query = path.partition("?")
        return base + mark + _redact_query(query, self.pseudonyms) if mark else path

    def url(self, url: str) -> str:
        return redact_url(url, self.pseudonyms)

    def metadata_value(self, value: Any, text: Callable[[str], str], name: str | None = None) -> Any:
        if name is not None and is_secret_name(name) and value not in (None, ""):
            try:
                return self.pseudonyms.json_value(value)
            except (TypeError, ValueError):
                return self.pseudonyms.of(repr(value))
        if isinstance(value, dict):
            return {k: self.metadata_value(v, text, k if isinstance(k, str) else None) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.metadata_value(v, text) for v in value)
        if isinstance(value, str):
            return text(value)
        if isinstance(value, bytes):
            return self.pseudonyms.scrub_bytes(value)
        return value

    def _body_by_rules(self, body: bytes, content_type: str) -> bytes:
        text = _as_text(body, content_type)
        if text is None:
            return self.pseudonyms.scrub_bytes(body)
        if "event-stream" in content_type:
            redacted = _event_stream(text, self._data_by_rules, self._by_rules)
        else:
            redacted = self._data_by_rules(text)
        return body if redacted == text else redacted.encode("utf-8", "surrogateescape")

    def _data_by_rules(self, text: str) -> str:
        """A body or an event's data: JSON member by member if it is JSON, else free text."""
        if text.lstrip()[:1] in ("{", "["):
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                pass
            else:
                try:
                    return self.pseudonyms.dump_json(redact_json(value, self.pseudonyms), value, text)
                except RecursionError:  # nested deeper than redaction goes: not written as it was
                    return self.pseudonyms.of(text)
        return _redact_free_text(text, self.pseudonyms)

    def _body_scrub(self, body: bytes, content_type: str) -> bytes:
        text = _as_text(body, content_type)
        if text is None:
            return self.pseudonyms.scrub_bytes(body)
        scrubbed = self.pseudonyms.scrub(text)
        return body if scrubbed == text else scrubbed.encode("utf-8", "surrogateescape")


def _as_text(body: bytes, content_type: str) -> str | None:
    kind = content_type.lower()
    if any(t in kind for t in BINARY_TYPES):
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        # Not UTF-8 but said to be text (Latin-1, or a stream cut inside a character): read so that every
        # byte goes back as it was.
        return body.decode("utf-8", "surrogateescape") if any(t in kind for t in TEXT_TYPES) else None


def _event_stream(text: str, data: Callable[[str], str], comment: Callable[[str], str]) -> str:
    """Each ``data:`` line's value redacted; framing, ids, event names and line ends as they were, so the
    events, their number and their order are the same."""
    pieces = LINE_END.split(text)
    for i in range(0, len(pieces), 2):
        line = pieces[i]
        if line.startswith("data:"):
            space = " " if line.startswith("data: ") else ""
            value = line[5 + len(space) :]
            pieces[i] = f"data:{space}{data(value)}"
        elif line.startswith(":"):  # a comment: nobody reads it, and it may say anything
            pieces[i] = comment(line)
    return "".join(pieces)


def _rewrite(flow: http.HTTPFlow, sanitizer: Sanitizer, *, by_rules: bool) -> None:
    """One pass over every part of ``flow`` that can hold a secret: by the rules (headers and the query by
    name, bodies by their kind), or replacing the secrets learned so far wherever they are."""
    text = sanitizer._by_rules if by_rules else sanitizer.pseudonyms.scrub
    body = sanitizer._body_by_rules if by_rules else sanitizer._body_scrub
    header = sanitizer.header if by_rules else lambda _, v: text(v)
    _rewrite_path(flow.request, sanitizer.path if by_rules else text)
    for message in (flow.request, flow.response):
        if message is not None:
            _rewrite_headers(message, header)
            _message_body(flow, message, body, sanitizer)
    _rewrite_notes(flow, text, sanitizer)
    if flow.websocket is not None:
        _rewrite_websocket(flow.websocket, body)


def _rewrite_path(request: http.Request, path: Callable[[str], str]) -> None:
    """The request's path and query, set again only when they changed."""
    raw_path = request.data.path.decode("utf-8", "surrogateescape")
    new_path = path(raw_path)
    if new_path != raw_path:
        request.data.path = new_path.encode("utf-8", "surrogateescape")


def _rewrite_headers(message: http.Message, header: Callable[[str, str], str]) -> None:
    for headers in (message.headers, message.trailers):
        if headers is not None:
            _headers(headers, header)


def _rewrite_notes(flow: http.HTTPFlow, text: Callable[[str], str], sanitizer: Sanitizer) -> None:
    """What the proxy and the recorder wrote about the flow: the error, the comment and the metadata."""
    if flow.error is not None:
        flow.error.msg = text(flow.error.msg)
    if flow.comment:
        flow.comment = text(flow.comment)
    if flow.metadata:
        flow.metadata = sanitizer.metadata_value(flow.metadata, text)


def _rewrite_websocket(websocket: WebSocketData, body: Callable[[bytes, str], bytes]) -> None:
    for ws_message in websocket.messages:
        content = ws_message.content
        ws_message.content = body(content, "text/plain" if ws_message.is_text else "")


def _headers(headers: http.Headers, value: Callable[[str, str], str]) -> None:
    fields = []
    for name, raw in headers.fields:
        text = raw.decode("utf-8", "surrogateescape")
        fields.append((name, value(name.decode("latin-1"), text).encode("utf-8", "surrogateescape")))
    headers.fields = tuple(fields)


def _message_body(
    flow: http.HTTPFlow, message: http.Message, body: Callable[[bytes, str], bytes], sanitizer: Sanitizer
) -> None:
    raw = message.raw_content
    if not raw:
        return
    ce = message.headers.get("content-encoding", "").strip().lower()
    content_type = message.headers.get("content-type", "")
    plain: bytes | None = raw
    whole = True
    if ce and ce != "identity":
        plain, whole = _decode(raw, ce)
    if plain is None:
        # Compressed in a way this cannot read (a stream cut inside brotli or zstd, an unknown coding): it
        # cannot be redacted, so it is not written.
        new_raw = b""
        _note(flow, f"{'request' if message is flow.request else 'response'} body in content-encoding {ce!r} "
              "could not be decoded to be redacted: dropped")  # fmt: skip
        sanitizer.dropped_bodies += 1
        del message.headers["content-encoding"]
    else:
        redacted = body(plain, content_type)
        if redacted == plain:
            return
        new_raw = redacted
        if ce and ce != "identity":
            try:
                if not whole:  # a cut stream, decoded as far as it goes: not made whole by encoding it again
                    raise ValueError(ce)
                new_raw = encoding.encode(redacted, ce)
            except ValueError:
                del message.headers["content-encoding"]  # stored decoded, and the headers say so
    _set_raw(flow, message, raw, new_raw)


def _decode(raw: bytes, ce: str) -> tuple[bytes | None, bool]:
    """The decoded body, and whether it was whole; (None, False) when it cannot be decoded."""
    try:
        decoded = encoding.decode(raw, ce)
        return (decoded if isinstance(decoded, bytes) else None), True
    except ValueError:
        pass
    if ce in ("gzip", "x-gzip", "deflate"):  # a stream cut short: what can be decoded of it
        for wbits in (16 + zlib.MAX_WBITS,) if ce != "deflate" else (zlib.MAX_WBITS, -zlib.MAX_WBITS):
            try:
                return zlib.decompressobj(wbits).decompress(raw), False
            except zlib.error:
                continue
    return None, False


def _set_raw(flow: http.HTTPFlow, message: http.Message, old: bytes, new: bytes) -> None:
    message.raw_content = new
    delta = len(new) - len(old)
    length = message.headers.get("content-length")
    if length is not None and length.strip().isdigit():
        # Said for the body as it was stored, or for more than was kept (a stream over the addon's bound).
        message.headers["content-length"] = str(len(new) if int(length) == len(old) else int(length) + delta)
    if message is flow.response:
        record = flow.metadata.get(METADATA_KEY)
        stream = record.get("stream") if isinstance(record, dict) else None
        if isinstance(stream, dict):
            for key in ("stored_bytes", "bytes"):
                if isinstance(stream.get(key), int):
                    stream[key] += delta


def _note(flow: http.HTTPFlow, text: str) -> None:
    record = flow.metadata.get(METADATA_KEY)
    if isinstance(record, dict):
        record.setdefault(DROPPED_BODY, []).append(text)
    else:
        flow.comment = f"{flow.comment}\n{text}".strip()


# ---------------------------------------------------------------- files


@dataclass
class RedactResult:
    flows_written: int = 0
    not_http: int = 0
    dropped_bodies: int = 0
    problems: list[str] = field(default_factory=list)


def _read(paths: Iterable[str | Path], problems: list[str] | None) -> Iterator[mflow.Flow]:
    for path in paths:
        read = 0
        try:
            with open(path, "rb") as f:
                for read, item in enumerate(FlowReader(f).stream(), 1):  # noqa: B007 - counted for the message
                    yield item
        except OSError as e:
            if problems is not None:
                problems.append(f"{path}: cannot read: {e.strerror or e}")
        except Exception as e:  # FlowReadException, or whatever a damaged record makes mitmproxy raise
            if problems is not None:
                problems.append(f"{path}: not readable after {read} flow(s): {e}")


def redact_files(paths: list[str | Path], out: BinaryIO, sanitizer: Sanitizer | None = None) -> RedactResult:
    """Every HTTP flow of ``paths`` redacted into ``out``. The files are read twice: first to learn every
    secret their flows name, so that one quoted before it was named is replaced too."""
    sanitizer = sanitizer or Sanitizer()
    for item in _read(paths, None):
        if isinstance(item, http.HTTPFlow):
            sanitizer.sanitize(item)
    sanitizer.dropped_bodies = 0
    result = RedactResult()
    writer = FlowWriter(out)
    for item in _read(paths, result.problems):
        copy = sanitizer.copy(item)
        if copy is None:
            result.not_http += 1
            continue
        writer.add(copy)
        result.flows_written += 1
    result.dropped_bodies = sanitizer.dropped_bodies
    return result
