"""Server-Sent Events framing (WHATWG HTML, "event stream interpretation").

Events end at a blank line; CRLF, LF and CR all end a line. ``data:`` lines join
with "\n", lines starting with ":" are comments, a single leading space after the
colon is dropped. Offsets are kept so that arrival times recorded per network
chunk can be mapped onto events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A line ends with CRLF, LF or CR; a blank line (two line ends in a row) ends an event.
_LINE_END = re.compile(rb"\r\n|\n|\r")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event; ``end`` is the byte offset just past its blank line."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    comments: int = 0
    start: int = 0
    end: int = 0

    @property
    def is_priming(self) -> bool:
        """An event with an id and no data only primes Last-Event-ID (2025-11-25)."""
        return self.data == "" and self.id is not None


def split_sse(body: bytes) -> tuple[list[SseEvent], int]:
    """Split a (possibly partial) SSE body into complete events.

    Returns the events and the offset where the unterminated rest begins, so
    ``body[rest:]`` is what a cut stream left half-sent.
    """
    events: list[SseEvent] = []
    fields: dict[str, list[str]] = {}
    comments = 0
    event_start = 0
    line_start = 0
    pos = 0
    # A BOM may open the stream; it is not part of the first field name.
    if body.startswith(b"\xef\xbb\xbf"):
        event_start = line_start = pos = 3
    for match in _LINE_END.finditer(body, pos):
        if match.group() == b"\r" and match.end() == len(body):
            break  # a trailing CR may be the first half of a CRLF still in flight
        line = body[line_start : match.start()]
        line_start = match.end()
        if line:
            if line.startswith(b":"):
                comments += 1
            else:
                name, _, value = line.partition(b":")
                if value.startswith(b" "):
                    value = value[1:]
                fields.setdefault(name.decode("utf-8", "replace"), []).append(value.decode("utf-8", "replace"))
            continue
        if fields:  # a block of only comments is a keep-alive, not an event
            events.append(_make_event(fields, comments, event_start, line_start))
        fields, comments = {}, 0
        event_start = line_start
    return events, event_start


def _make_event(fields: dict[str, list[str]], comments: int, start: int, end: int) -> SseEvent:
    # ASCII digits only (str.isdigit() also takes "²", which int() refuses), and at most 15 of them: a
    # delay of 30,000 years, past which the value is no delay, and int() never meets its digit limit.
    retry_values = [v for v in fields.get("retry", []) if v.isascii() and v.isdigit() and len(v) <= 15]
    ids = [v for v in fields.get("id", []) if "\0" not in v]
    return SseEvent(
        data="\n".join(fields.get("data", [])),
        event=(fields.get("event") or ["message"])[-1] or "message",
        id=ids[-1] if ids else None,
        retry=int(retry_values[-1]) if retry_values else None,
        comments=comments,
        start=start,
        end=end,
    )
