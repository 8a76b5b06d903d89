"""The callable that mitmproxy hands each chunk of a streamed response.

It forwards every chunk unchanged, notes when each arrived and how large it
was, and keeps a copy of the body up to a bound so the flow file can hold it.
It must never raise: mitmproxy would lose the chunk for the client.

Past the bound it still keeps the stream's last bytes: a tool call's answer is
its stream's last event, so a long stream is judged on what the client got
(the capture then holds the head and the tail, cut at event boundaries, and
says how many bytes in between it dropped).
"""

from __future__ import annotations

import bisect
import itertools
import re
import time
from collections.abc import Callable, Iterable

from mcp_blackbox.analyzer.wire.metadata import StreamEnd, StreamRecord
from mcp_blackbox.analyzer.wire.sse_framing import split_sse

# Beyond this many chunks only totals are kept: a day-long stream must not grow
# the metadata without bound.
MAX_CHUNK_RECORDS = 100_000

# The end of a long stream kept beside the head: enough for the answer event of a tool call.
TAIL_LIMIT = 1024 * 1024
# A blank line: one line end right after another (CRLF counts as one).
BLANK_LINE = re.compile(rb"(?:\r\n|\n|\r)(?:\r\n|\n|\r)")

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
        self.tail = bytearray()  # the stream's last bytes, once the body is full
        self.tail_limit = TAIL_LIMIT if max_body is None else min(max_body, TAIL_LIMIT)
        # (offset in the kept body, offset in the stream, length) of each kept piece; one until it is cut.
        self.segments: list[tuple[int, int, int]] = []
        self.chunks: list[list[float | int]] = []
        self.total_bytes = 0
        self.dropped_bytes = 0  # past the head's bound (the tail keeps the last of them)
        self.unrecorded_chunks = 0
        self.ended: StreamEnd | None = None
        self.end_time: float | None = None
        self.error: str | None = None
        self.error_side: str | None = None  # "client" or "server": whose connection the error came from
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
            self.tail += piece[room:]
            if len(self.tail) > 2 * self.tail_limit:  # trimmed now and then, not on every chunk
                del self.tail[: len(self.tail) - self.tail_limit]

    def finish(self, reason: StreamEnd, error: str | None = None, side: str | None = None) -> None:
        """Close the record once: the first reason given is the true one."""
        if self.ended is None:
            self.ended = reason
            self.end_time = self.clock()
            self.error = error
            self.error_side = side

    def kept(self, *, framed: bool) -> bytes:
        """The body the flow file keeps: all of it, or, past the bound, the head and the tail.

        ``framed`` (plain SSE): the head is cut after its last complete event and the tail starts at
        its first event boundary, so the kept body is a valid stream with events missing in between.
        An encoded body cannot be cut that way (its tail alone does not decode): only its head is kept.
        """
        tail = self.tail[-self.tail_limit :]
        tail_start = self.total_bytes - len(tail)  # where the tail begins in the stream
        if not self.dropped_bytes or not framed or not tail:
            self.segments = [(0, 0, len(self.body))]
            return bytes(self.body)
        if tail_start <= len(self.body):  # the two overlap: nothing is missing
            whole = self.body + tail[len(self.body) - tail_start :]
            self.segments = [(0, 0, len(whole))]
            return bytes(whole)
        _, head_end = split_sse(bytes(self.body))
        boundary = BLANK_LINE.search(tail)
        tail_from = boundary.end() if boundary else len(tail)
        kept_tail = bytes(tail[tail_from:])
        if not kept_tail:  # not one whole event at the end: the head as it came is worth more
            self.segments = [(0, 0, len(self.body))]
            return bytes(self.body)
        self.segments = [(0, 0, head_end), (head_end, tail_start + tail_from, len(kept_tail))]
        return bytes(self.body[:head_end]) + kept_tail

    def stream_offset(self, kept_end: int) -> int:
        """Where an event that ends at ``kept_end`` in the kept body (exclusive) ended in the stream."""
        for start, origin, length in reversed(self.segments):
            if kept_end > start:
                return origin + min(kept_end - start, length)
        return kept_end

    def event_times(self, kept: bytes) -> list[float | None]:
        """Arrival time of each complete SSE event in the kept body.

        An event has arrived when the chunk holding its closing blank line has;
        None where that chunk was past the recorded ones.
        """
        events, _ = split_sse(kept)
        ends = list(itertools.accumulate(int(size) for _, size in self.chunks))
        times: list[float | None] = []
        for event in events:
            index = bisect.bisect_left(ends, self.stream_offset(event.end))
            times.append(float(self.chunks[index][0]) if index < len(ends) else None)
        return times

    def metadata(self, kept: bytes, *, framed: bool) -> StreamRecord:
        """JSON-like record for ``flow.metadata`` (anything else breaks the flow writer).

        ``kept``: what ``kept()`` returned; ``framed``: the kept bytes are plain SSE (no content-encoding),
        so event boundaries can be found in them.
        """
        gap = self.segments[1][1] - self.segments[0][2] if len(self.segments) > 1 else None
        return {
            "started": self.started,
            "ended": self.ended,
            "end_time": self.end_time,
            "error": self.error,
            # Known from mitmproxy's stream state, not its words (addon/error_side.py); null: not known.
            "error_side": self.error_side,
            "chunks": self.chunks,
            "unrecorded_chunks": self.unrecorded_chunks,
            "bytes": self.total_bytes,
            "stored_bytes": len(kept),
            "dropped_bytes": self.total_bytes - len(kept),  # what the capture does not have
            # Where the bytes the capture dropped were: [start, end) in the stream (head, gap, tail).
            "dropped_range": [self.segments[0][2], self.segments[0][2] + gap] if gap is not None else None,
            # A content-encoded body cannot be split before decoding: the analyzer does it.
            "event_times": self.event_times(kept) if framed else None,
            "tap_failures": self.failures,
        }
