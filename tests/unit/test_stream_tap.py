"""StreamTap chained behind a stream callable another addon set: the client gets what that callable made, and so
does the record.

mitmproxy accepts bytes or any iterable of bytes from a stream callable and iterates what it gets, once;
at the end it calls the callable with b"" and sends nothing for a returned b"".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from mcp_blackbox.addon.stream_tap import StreamTap

CHUNKS = [b"data: one\n\n", b"data: tw", b"o\n\n"]


def as_mitmproxy_forwards(returned: bytes | Iterable[bytes], *, end: bool = False) -> list[bytes]:
    """The pieces mitmproxy sends to the client for one return value of the stream callable."""
    if end and returned == b"":
        return []
    if isinstance(returned, bytes):
        return [returned]
    return list(returned)


def run(tap: StreamTap, chunks: list[bytes]) -> bytes:
    """Feed the chunks and the closing b"" as mitmproxy does; return the bytes the client got."""
    sent = [piece for chunk in chunks for piece in as_mitmproxy_forwards(tap(chunk))]
    sent += as_mitmproxy_forwards(tap(b""), end=True)
    return b"".join(sent)


def in_halves(chunk: bytes) -> Iterator[bytes]:
    middle = len(chunk) // 2
    yield chunk[:middle]
    yield chunk[middle:]


def test_a_generator_from_the_callable_before_reaches_the_client_and_the_record() -> None:
    tap = StreamTap(None, upstream=in_halves)
    assert run(tap, CHUNKS) == b"".join(CHUNKS)
    assert bytes(tap.body) == b"".join(CHUNKS)
    assert [size for _, size in tap.chunks] == [len(p) for c in CHUNKS for p in in_halves(c) if p]
    assert tap.failures == 0


def test_a_list_from_the_callable_before_is_forwarded_and_recorded_as_it_is() -> None:
    tap = StreamTap(None, upstream=lambda chunk: [chunk, b"!"])
    sent = run(tap, CHUNKS)
    assert sent == b"".join(c + b"!" for c in [*CHUNKS, b""])
    assert bytes(tap.body) == sent and tap.failures == 0


def test_bytes_from_the_callable_before_are_forwarded_and_recorded_as_they_are() -> None:
    tap = StreamTap(None, upstream=bytes.upper)
    first = tap(CHUNKS[0])
    assert isinstance(first, bytes), "bytes go back to mitmproxy as bytes"
    sent = b"".join(as_mitmproxy_forwards(first)) + run(tap, CHUNKS[1:])
    assert sent == b"".join(CHUNKS).upper()
    assert bytes(tap.body) == sent and tap.failures == 0


def test_the_closing_empty_chunk_stays_bytes_and_what_a_buffering_callable_releases_then_is_kept() -> None:
    held = bytearray()

    def hold_until_the_end(chunk: bytes) -> Iterator[bytes]:
        held.extend(chunk)
        if not chunk:
            yield bytes(held)

    tap = StreamTap(None, upstream=hold_until_the_end)
    assert run(tap, CHUNKS) == b"".join(CHUNKS)
    assert bytes(tap.body) == b"".join(CHUNKS)

    plain = StreamTap(None, upstream=lambda chunk: chunk)
    assert plain(b"") == b"", "mitmproxy sends nothing for b'' only when it is bytes"


def test_a_generator_that_fails_midway_forwards_and_records_what_it_produced() -> None:
    def fails_after_the_first_piece(chunk: bytes) -> Iterator[bytes]:
        yield chunk[:3]
        raise RuntimeError("the addon before us broke")

    tap = StreamTap(None, upstream=fails_after_the_first_piece)
    returned = tap(CHUNKS[0])
    sent = as_mitmproxy_forwards(returned)
    assert sent == [CHUNKS[0][:3]], "its output alone, not followed by the chunk it was rewriting"
    assert bytes(tap.body) == b"".join(sent)
    assert tap.failures == 1


def test_a_generator_that_fails_before_producing_anything_forwards_the_chunk_as_it_came() -> None:
    def fails_at_once(_chunk: bytes) -> Iterator[bytes]:
        raise RuntimeError("the addon before us broke")
        yield b""  # a generator all the same

    tap = StreamTap(None, upstream=fails_at_once)
    sent = as_mitmproxy_forwards(tap(CHUNKS[0]))
    assert sent == [CHUNKS[0]]
    assert bytes(tap.body) == CHUNKS[0] and tap.failures == 1


def test_something_that_is_no_iterable_from_the_callable_before_forwards_the_chunk_as_it_came() -> None:
    def not_a_stream(_chunk: bytes) -> Any:
        return None

    tap = StreamTap(None, upstream=not_a_stream)
    assert as_mitmproxy_forwards(tap(CHUNKS[0])) == [CHUNKS[0]]
    assert bytes(tap.body) == CHUNKS[0] and tap.failures == 1


def test_the_callable_before_is_called_once_per_chunk() -> None:
    calls: list[bytes] = []

    def counting(chunk: bytes) -> Iterator[bytes]:
        calls.append(chunk)
        yield chunk

    tap = StreamTap(None, upstream=counting)
    run(tap, CHUNKS)
    assert calls == [*CHUNKS, b""]


# ---- a stream longer than the bound: the head and the tail are kept, cut at event boundaries


def events(count: int, size: int = 40) -> list[bytes]:
    return [f"id: {n}\ndata: {'x' * size} {n}\n\n".encode() for n in range(count)]


def test_past_the_bound_the_head_and_the_last_events_are_kept_as_a_valid_stream() -> None:
    from mcp_blackbox.analyzer.wire.sse_framing import split_sse

    stream = events(200)
    clock = iter(float(n) for n in range(1000))
    tap = StreamTap(1000, clock=lambda: next(clock))
    assert run(tap, stream) == b"".join(stream), "the client gets every byte"
    kept = tap.kept(framed=True)
    record = tap.metadata(kept, framed=True)
    ids = [int(e.id or -1) for e in split_sse(kept)[0]]
    assert ids[0] == 0 and ids[-1] == 199, "the first events and the last one (the answer's place) are there"
    assert ids == sorted(ids) and len(ids) < 200, "events in between are missing, none is broken"
    assert record["dropped_bytes"] == len(b"".join(stream)) - len(kept) > 0
    start, end = record["dropped_range"]
    assert b"".join(stream)[:start] == kept[:start], "the head is the stream's start, cut after an event"
    assert b"".join(stream)[end:] == kept[start:], "the tail is the stream's end, from an event boundary"
    # Each kept event is dated by the chunk that brought its closing blank line (one chunk per event here).
    assert record["event_times"] == [float(n + 1) for n in ids]


def test_a_stream_within_the_bound_is_kept_whole() -> None:
    stream = events(5)
    tap = StreamTap(10_000)
    run(tap, stream)
    kept = tap.kept(framed=True)
    assert kept == b"".join(stream) and tap.metadata(kept, framed=True)["dropped_range"] is None


def test_when_head_and_tail_overlap_nothing_is_missing() -> None:
    stream = events(30)
    tap = StreamTap(len(b"".join(stream)) - 10)  # the tail (as large as the bound) covers what the head lacks
    run(tap, stream)
    kept = tap.kept(framed=True)
    assert kept == b"".join(stream) and tap.metadata(kept, framed=True)["dropped_bytes"] == 0


def test_an_encoded_stream_keeps_its_head_only() -> None:
    stream = events(100)
    tap = StreamTap(500)
    run(tap, stream)
    kept = tap.kept(framed=False)
    assert kept == b"".join(stream)[:500]
    record = tap.metadata(kept, framed=False)
    assert record["dropped_bytes"] == len(b"".join(stream)) - 500 and record["event_times"] is None
