"""Per-event times of a content-encoded event stream, from the recorder's chunk times.

The recorder dates each event of a plain stream itself; an encoded one (gzip, br,
zstd, deflate) it cannot split before decoding, so it records only when each
chunk arrived and how large it was. Decoding chunk by chunk gives how much of the
decoded stream had arrived at each chunk's time, so each event is dated by the
chunk that completed it, as for a plain stream.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import brotli  # type: ignore[import-untyped]

from mcp_blackbox.analyzer.wire.sse_framing import split_sse

try:  # as mitmproxy decodes zstd: the standard library's from 3.14, else the backport it depends on
    from compression import zstd  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the Python version
    from backports import zstd  # type: ignore[import-not-found,no-redef,unused-ignore]

Decoder = Callable[[bytes], bytes]


def _decoder(coding: str) -> Decoder | None:
    """An incremental decoder for one content-coding; None for one we cannot decode piece by piece."""
    if coding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
    if coding == "deflate":
        return zlib.decompressobj().decompress
    if coding == "br":
        return brotli.Decompressor().process  # type: ignore[no-any-return,unused-ignore]
    if coding == "zstd":
        return zstd.ZstdDecompressor().decompress  # type: ignore[no-any-return,unused-ignore]
    return None


def encoded_event_times(raw: bytes, content_encoding: str, chunks: Any) -> list[float | None] | None:
    """The arrival time of each SSE event of an encoded stream, in order; None if it cannot be worked out
    (an unknown or chained coding, chunk records that are not [time, size] pairs)."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip() and c.strip() != "identity"]
    decode = _decoder(codings[0]) if len(codings) == 1 else None
    if decode is None or not _pairs(chunks):
        return None
    decoded = bytearray()
    marks: list[int] = []  # decoded length once each chunk had arrived
    times: list[float] = []
    offset = 0
    for t, size in chunks:
        try:
            decoded += decode(raw[offset : offset + int(size)])
        except Exception:  # a corrupt or truncated piece: the events after it have no time
            break
        offset += int(size)
        marks.append(len(decoded))
        times.append(float(t))
    events, _ = split_sse(bytes(decoded))
    out: list[float | None] = []
    for event in events:
        index = bisect.bisect_left(marks, event.end)
        out.append(times[index] if index < len(times) else None)
    return out


def _pairs(chunks: Any) -> bool:
    return isinstance(chunks, Sequence) and all(
        isinstance(c, Sequence)
        and len(c) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in c)
        for c in chunks
    )
