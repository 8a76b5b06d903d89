"""Per-event times of a content-encoded event stream, worked out from the recorder's chunk times."""

from __future__ import annotations

import zlib

import brotli  # type: ignore[import-untyped]
import pytest

from mcp_blackbox.analyzer.read.stream_times import encoded_event_times

EVENTS = [
    f'data: {{"jsonrpc":"2.0","method":"notifications/progress","params":{{"n":{n}}}}}\n\n'.encode() for n in range(5)
]


def gzip_pieces(events: list[bytes]) -> list[bytes]:
    """One flushed gzip piece per event, as a server that flushes after each event sends them."""
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    pieces = [compressor.compress(e) + compressor.flush(zlib.Z_SYNC_FLUSH) for e in events]
    pieces[-1] += compressor.flush()
    return pieces


def brotli_pieces(events: list[bytes]) -> list[bytes]:
    compressor = brotli.Compressor()
    pieces = [compressor.process(e) + compressor.flush() for e in events]
    pieces[-1] += compressor.finish()
    return pieces


@pytest.mark.parametrize(("coding", "encode"), [("gzip", gzip_pieces), ("br", brotli_pieces)])
def test_each_event_is_dated_by_the_chunk_that_completed_it(coding: str, encode: object) -> None:
    pieces = encode(EVENTS)  # type: ignore[operator]
    chunks = [[100.0 + n, len(piece)] for n, piece in enumerate(pieces)]
    assert encoded_event_times(b"".join(pieces), coding, chunks) == [100.0 + n for n in range(5)]


def test_an_event_split_across_chunks_has_the_time_of_its_last_piece() -> None:
    pieces = gzip_pieces(EVENTS)
    whole = b"".join(pieces)
    cut = len(pieces[0]) + len(pieces[1]) + len(pieces[2]) // 2  # the third event's piece in two chunks
    times = encoded_event_times(whole, "gzip", [[1.0, cut], [2.0, len(whole) - cut]])
    assert times == [1.0, 1.0, 2.0, 2.0, 2.0]


def test_what_cannot_be_worked_out_is_none_not_a_guess() -> None:
    whole = b"".join(gzip_pieces(EVENTS))
    assert encoded_event_times(whole, "gzip, br", [[1.0, len(whole)]]) is None  # chained codings
    assert encoded_event_times(whole, "compress", [[1.0, len(whole)]]) is None  # unknown coding
    assert encoded_event_times(whole, "gzip", [["soon", len(whole)]]) is None  # not [time, size]
    assert encoded_event_times(whole, "gzip", None) is None
    # A corrupt piece: the events before it keep their times, the rest have none.
    pieces = gzip_pieces(EVENTS)
    broken = [*pieces[:2], b"\x00garbage", *pieces[3:]]
    times = encoded_event_times(b"".join(broken), "gzip", [[float(n), len(p)] for n, p in enumerate(broken)])
    assert times == [0.0, 1.0]
