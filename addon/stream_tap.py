"""The callable that mitmproxy hands each chunk of a streamed response.

It forwards every chunk unchanged, notes when each arrived and how large it
was, and keeps a copy of the body up to a bound so the flow file can hold it.
It must never raise: mitmproxy would lose the chunk for the client.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from mcp_blackbox.addon.sse_framing import split_sse

# Beyond this many chunks only totals are kept: a day-long stream must not grow
# the metadata without bound.
MAX_CHUNK_RECORDS = 100_000

# What mitmproxy accepts from a stream callable: bytes, or any iterable of bytes (a generator too).
Forward = Callable[[bytes], bytes | Iterable[bytes]]


class StreamTap:
    """Records one streamed response body while passing it through."""

    def __init__(
        self,
        max_body: int | None,
        *,
        upstream: Forward | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_body = max_body
        self.upstream = upstream  # a stream callable another addon set before us
        self.clock = clock
        self.started = clock()
        self.body = bytearray()
        self.chunks: list[list[float | int]] = []
        self.total_bytes = 0
        self.dropped_bytes = 0
        self.unrecorded_chunks = 0
        self.ended: str | None = None
        self.end_time: float | None = None
        self.error: str | None = None
        self.failures = 0

    def __call__(self, chunk: bytes) -> bytes | list[bytes]:
        forwarded = self._call_upstream(chunk)
        try:
            for piece in [forwarded] if isinstance(forwarded, bytes) else forwarded:
                self._record(piece)
        except Exception:  # whatever happens, the bytes must flow
            self.failures += 1
        return forwarded

    def _call_upstream(self, chunk: bytes) -> bytes | list[bytes]:
        """What the callable before us makes of the chunk, read exactly once.

        An iterable it returns may be a generator: reading it to record the
        pieces would leave nothing for mitmproxy, so the pieces are kept in a
        list that is both recorded and forwarded.
        """
        if self.upstream is None:
            return chunk
        try:
            returned = self.upstream(chunk)
        except Exception:  # the callable before us failed: the chunk goes on as it came, and is recorded
            self.failures += 1
            return chunk
        if isinstance(returned, bytes):
            return returned  # b"" must stay bytes: at the end mitmproxy reads it as "nothing more"
        pieces: list[bytes] = []
        try:
            for piece in returned:
                pieces.append(piece)
        except Exception:
            self.failures += 1
            # Pieces it already produced may be its rewrite of this chunk: they go on alone, since adding the
            # chunk would send its bytes twice. If it failed before producing any, that is the same as the
            # call failing (a generator's body only runs when read), so the chunk goes on as it came.
            if not pieces:
                return chunk
        return pieces

    def _record(self, piece: bytes) -> None:
        if not piece:
            return  # b"" marks the end of the stream, it is not data
        size = len(piece)
        self.total_bytes += size
        if len(self.chunks) < MAX_CHUNK_RECORDS:
            self.chunks.append([self.clock(), size])
        else:
            self.unrecorded_chunks += 1
        room = size if self.max_body is None else max(0, self.max_body - len(self.body))
        if room >= size:
            self.body += piece
        else:
            self.body += piece[:room]
            self.dropped_bytes += size - room

    def finish(self, reason: str, error: str | None = None) -> None:
        """Close the record once: the first reason given is the true one."""
        if self.ended is None:
            self.ended = reason
            self.end_time = self.clock()
            self.error = error

    def event_times(self) -> list[float | None]:
        """Arrival time of each complete SSE event in the kept body.

        An event has arrived when the chunk holding its closing blank line has;
        None where that chunk was past the recorded ones.
        """
        events, _ = split_sse(bytes(self.body))
        ends = list(itertools.accumulate(int(size) for _, size in self.chunks))
        times: list[float | None] = []
        for event in events:
            index = bisect.bisect_left(ends, event.end)
            times.append(float(self.chunks[index][0]) if index < len(ends) else None)
        return times

    def metadata(self, *, framed: bool) -> dict[str, Any]:
        """JSON-like record for ``flow.metadata`` (anything else breaks the flow writer).

        ``framed``: the kept bytes are plain SSE (no content-encoding), so
        event boundaries can be found in them.
        """
        return {
            "started": self.started,
            "ended": self.ended,
            "end_time": self.end_time,
            "error": self.error,
            "chunks": self.chunks,
            "unrecorded_chunks": self.unrecorded_chunks,
            "bytes": self.total_bytes,
            "stored_bytes": len(self.body),
            "dropped_bytes": self.dropped_bytes,
            # A content-encoded body cannot be split before decoding: the analyzer does it.
            "event_times": self.event_times() if framed else None,
            "tap_failures": self.failures,
        }
