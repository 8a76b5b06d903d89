"""SSE helpers for the fault layer and the tests.

The fault layer must forward events byte for byte, so it cuts raw events (terminator
included) off a buffer here; their fields are read by ``addon.sse_framing``, the one
place that knows the WHATWG framing rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_blackbox.analyzer.wire.sse_framing import split_sse

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE = re.compile(rb"\r\n|\r|\n")


@dataclass
class SseEvent:
    raw: bytes  # the event exactly as framed on the wire, terminator included
    event: str
    data: str
    id: str | None
    retry: int | None

    @property
    def has_data(self) -> bool:
        return self.data != ""


def split_events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Cut complete events (terminator included) off the front of `buffer`; return them and the rest."""
    events: list[bytes] = []
    start = 0
    while match := _EVENT_END.search(buffer, start):
        events.append(buffer[start : match.end()])
        start = match.end()
    return events, buffer[start:]


def parse_event(raw: bytes) -> SseEvent:
    """The fields of one raw event, read by the same framing rules the recorder uses."""
    parsed, _ = split_sse(raw if _EVENT_END.search(raw) else raw + b"\n\n")
    if not parsed:  # only comments
        return SseEvent(raw=raw, event="message", data="", id=None, retry=None)
    event = parsed[0]
    return SseEvent(raw=raw, event=event.event, data=event.data, id=event.id, retry=event.retry)


def parse_stream(body: bytes) -> list[SseEvent]:
    """All complete events in `body`; a trailing partial event (cut stream) is dropped."""
    events, _rest = split_events(body)
    return [parse_event(raw) for raw in events]


def line_ending(raw: bytes) -> bytes:
    """The line terminator an event uses, so a rewritten event keeps the server's framing style."""
    match = _LINE.search(raw)
    return match.group(0) if match else b"\n"
