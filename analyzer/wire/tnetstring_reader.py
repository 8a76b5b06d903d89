"""Reading mitmproxy's tnetstring flow records fast, decoding only what the analyzer uses.

Every tnetstring value is ``LENGTH:PAYLOAD`` followed by a one-byte type tag,
so a value the analyzer does not need (the server connection, certificates,
TLS details) can be stepped over without being parsed. mitmproxy's own reader
parses everything and then builds Flow objects; the analyzer needs neither.

A ``Want`` says what to decode: ``True`` decodes the whole value, a dict decodes
only those keys of a dict value, ``ENCODED`` keeps the value as its bytes (an
``Encoded``, decoded by ``decode`` if it is ever needed).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import Any, BinaryIO, Final, Literal

ENCODED: Final = "encoded"
Want = bool | Literal["encoded"] | dict[str, "Want"]


class Encoded(bytes):
    """A value kept as its tnetstring bytes: ``decode(value)`` reads it."""


# The parts of a flow record (format 21) that the analyzer reads.
FLOW_FIELDS: dict[str, Want] = {
    "id": True,
    "type": True,
    "version": True,
    "request": True,
    "response": True,
    "error": True,
    "metadata": True,
    "client_conn": {"id": True, "peername": True},
    "timestamp_created": True,
    "websocket": True,
}
FLOW_ID: dict[str, Want] = {"id": True}  # a record's id alone: which flow it is
MAX_PREFIX = 12  # digits in a length prefix, as mitmproxy allows
READ_PIECE = 1 << 24  # a corrupt length prefix may claim up to a terabyte: read toward it in pieces this large


class RecordError(ValueError):
    """The bytes are not a (complete) tnetstring record."""


class RecordCutShort(RecordError):
    """The file ends inside a record: a length prefix was read, the bytes it announces were not all there."""


def framed_records(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(offset, end) of each record of a flow file from its start, found from the length prefixes and type
    tags alone (a few bytes read per record, nothing decoded); it stops where the framing does: a bad
    prefix, a record that runs past the end or is not a dict. It reached the end when the last ``end`` is
    ``size``."""
    offset = 0
    while offset < size:
        head = os.pread(fd, MAX_PREFIX + 1, offset)
        colon = head.find(b":")
        digits = head[:colon] if colon > 0 else b""
        if not digits.isdigit():
            return
        after = offset + colon + 1 + int(digits) + 1
        if after > size or os.pread(fd, 1, after - 1) != b"}":
            return
        yield offset, after
        offset = after


def record_framed(record: bytes | None) -> bool:
    """Whether ``read_record`` gave a whole record that ends as a flow record does (a dict).

    Damage inside such a record loses that record only: the next one starts where its length says.
    Anything else (no record, or a length prefix that did not land on a dict's end) means the
    framing itself is broken and what follows cannot be found.
    """
    return record is not None and record.endswith(b"}")


def read_record(handle: io.BufferedReader) -> bytes | None:
    """The next record's payload and type tag (its length prefix read off); None at the end of the file."""
    digits = b""
    while True:
        # peek() may return less than asked near the end of its buffer: gather the prefix piecewise.
        head = handle.peek(MAX_PREFIX + 1)[: MAX_PREFIX + 1 - len(digits)]
        if not head:
            if digits:
                raise RecordCutShort("record cut short inside its length prefix")
            return None
        colon = head.find(b":")
        handle.read(len(head) if colon < 0 else colon + 1)
        digits += head if colon < 0 else head[:colon]
        if colon >= 0:
            break
        if len(digits) > MAX_PREFIX:
            raise RecordError("not a tnetstring: missing or invalid length prefix")
    if not digits.isdigit():
        raise RecordError("not a tnetstring: missing or invalid length prefix")
    size = int(digits) + 1
    record = _read_up_to(handle, size)
    if len(record) < size:
        raise RecordCutShort(f"record cut short: {len(record)} of {size} bytes")
    return digits + b":" + record


def _read_up_to(handle: BinaryIO, size: int) -> bytes:
    """``size`` bytes, or what is left of the file: never a buffer of ``size`` before the bytes are there."""
    if size <= READ_PIECE:
        return handle.read(size)
    pieces = []
    while size > 0 and (piece := handle.read(min(size, READ_PIECE))):
        pieces.append(piece)
        size -= len(piece)
    return b"".join(pieces)


def decode(record: bytes, want: Want = True) -> Any:
    value, end = _value(record, 0, want)
    if end != len(record):
        raise RecordError("trailing bytes after the record")
    return value


def _bounds(buf: bytes, pos: int) -> tuple[int, int, int]:
    """(start, end, tag) of the value whose length prefix starts at ``pos``."""
    colon = buf.find(b":", pos, pos + MAX_PREFIX + 1)
    if colon <= pos:
        raise RecordError(f"not a tnetstring: invalid length prefix at {pos}")
    digits = buf[pos:colon]
    if not digits.isdigit():
        raise RecordError(f"not a tnetstring: invalid length prefix at {pos}")
    start = colon + 1
    end = start + int(digits)
    if end >= len(buf):
        raise RecordError(f"not a tnetstring: value at {pos} runs past the record")
    return start, end, buf[end]


# The loops below read a length prefix inline (three copies, on purpose) rather than through _bounds: a
# flow record holds a few hundred values (most of them header names and values), and a call per value was
# most of the time.


def _value(buf: bytes, pos: int, want: Want) -> tuple[Any, int]:
    start, end, tag = _bounds(buf, pos)
    after = end + 1
    if tag == 0x7D:  # } dict
        return _dict(buf, start, end, want), after
    if tag == 0x5D:  # ] list
        return _list(buf, start, end), after
    if tag == 0x2C:  # , bytes
        return buf[start:end], after
    return _scalar(buf, start, end, tag), after


def _scalar(buf: bytes, start: int, end: int, tag: int) -> Any:
    if tag == 0x3B:  # ; text
        return buf[start:end].decode("utf-8")
    if tag == 0x23:  # # integer
        return int(buf[start:end])
    if tag == 0x5E:  # ^ float
        return float(buf[start:end])
    if tag == 0x21:  # ! boolean
        literal = buf[start:end]
        if literal not in (b"true", b"false"):
            raise RecordError(f"not a tnetstring: invalid boolean {literal!r}")
        return literal == b"true"
    if tag == 0x7E:  # ~ null
        if start != end:
            raise RecordError("not a tnetstring: invalid null")
        return None
    if tag == 0x2C:  # , bytes
        return buf[start:end]
    raise RecordError(f"not a tnetstring: unknown type tag {tag!r}")


def _list(buf: bytes, pos: int, end: int) -> list[Any]:
    items: list[Any] = []
    append, find = items.append, buf.find
    while pos < end:
        colon = find(b":", pos, pos + MAX_PREFIX + 1)
        digits = buf[pos:colon]
        if colon <= pos or not digits.isdigit():
            raise RecordError(f"not a tnetstring: invalid length prefix at {pos}")
        start = colon + 1
        stop = start + int(digits)
        if stop >= end:
            raise RecordError(f"not a tnetstring: value at {pos} runs past its list")
        tag = buf[stop]
        if tag == 0x2C:  # bytes: a header's name or value
            append(buf[start:stop])
        elif tag == 0x5D:  # a header: [name, value]
            append(_list(buf, start, stop))
        elif tag == 0x7D:
            append(_dict(buf, start, stop, True))
        else:
            append(_scalar(buf, start, stop, tag))
        pos = stop + 1
    if pos != end:
        raise RecordError("not a tnetstring: list overruns its length")
    return items


def _dict(buf: bytes, pos: int, end: int, want: Want) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    find = buf.find
    # What each key asks for, looked up once per dict rather than tested per key (this loop is most of the
    # reader's time: a flow record is some 80 keys, most of them stepped over).
    everything = want is True
    wanted_keys = want if isinstance(want, dict) else {}
    while pos < end:
        # The key: text (mitmproxy's state) or bytes, read inline.
        colon = find(b":", pos, pos + MAX_PREFIX + 1)
        digits = buf[pos:colon]
        if colon <= pos or not digits.isdigit():
            raise RecordError(f"not a tnetstring: invalid length prefix at {pos}")
        start = colon + 1
        stop = start + int(digits)
        if stop >= end:
            raise RecordError(f"not a tnetstring: value at {pos} runs past its dict")
        tag = buf[stop]
        key: Any
        if tag == 0x3B:  # ; text
            key = name = buf[start:stop].decode("utf-8")
        elif tag == 0x2C:  # , bytes
            key = buf[start:stop]
            name = key.decode("utf-8", "replace")
        else:
            key = name = _scalar(buf, start, stop, tag)
        pos = stop + 1
        wanted = True if everything else wanted_keys.get(name, False)
        # The value: stepped over, or read.
        colon = find(b":", pos, pos + MAX_PREFIX + 1)
        digits = buf[pos:colon]
        if colon <= pos or not digits.isdigit():
            raise RecordError(f"not a tnetstring: invalid length prefix at {pos}")
        start = colon + 1
        stop = start + int(digits)
        if stop >= end:
            raise RecordError(f"not a tnetstring: value at {pos} runs past its dict")
        if wanted is False:
            pass
        elif wanted == ENCODED:
            result[key] = Encoded(buf[pos : stop + 1])
        else:
            tag = buf[stop]
            if tag == 0x7D:
                result[key] = _dict(buf, start, stop, wanted)
            elif tag == 0x5D:
                result[key] = _list(buf, start, stop)
            elif tag == 0x2C:
                result[key] = buf[start:stop]
            else:
                result[key] = _scalar(buf, start, stop, tag)
        pos = stop + 1
    if pos != end:
        raise RecordError("not a tnetstring: dict overruns its length")
    return result
