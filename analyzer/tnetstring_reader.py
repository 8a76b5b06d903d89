"""Reading mitmproxy's tnetstring flow records fast, decoding only what the analyzer uses.

Every tnetstring value is ``LENGTH:PAYLOAD`` followed by a one-byte type tag,
so a value the analyzer does not need (the server connection, certificates,
TLS details) can be stepped over without being parsed. mitmproxy's own reader
parses everything and then builds Flow objects; the analyzer needs neither.

A ``Want`` says what to decode: ``True`` decodes the whole value, a dict decodes
only those keys of a dict value.
"""

from __future__ import annotations

import io
from typing import Any, BinaryIO

Want = bool | dict[str, "Want"]

# The parts of a flow record (format 21) that the analyzer reads.
FLOW_FIELDS: Want = {
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
MAX_PREFIX = 12  # digits in a length prefix, as mitmproxy allows
READ_PIECE = 1 << 24  # a corrupt length prefix may claim up to a terabyte: read toward it in pieces this large


class RecordError(ValueError):
    """The bytes are not a (complete) tnetstring record."""


class RecordCutShort(RecordError):
    """The file ends inside a record: a length prefix was read, the bytes it announces were not all there."""


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


def _value(buf: bytes, pos: int, want: Want) -> tuple[Any, int]:
    start, end, tag = _bounds(buf, pos)
    after = end + 1
    if tag == 0x7D:  # } dict
        return _dict(buf, start, end, want), after
    if tag == 0x5D:  # ] list
        items = []
        while start < end:
            item, start = _value(buf, start, True)
            items.append(item)
        return items, after
    if tag == 0x2C:  # , bytes
        return buf[start:end], after
    if tag == 0x3B:  # ; text
        return buf[start:end].decode("utf-8"), after
    if tag == 0x23:  # # integer
        return int(buf[start:end]), after
    if tag == 0x5E:  # ^ float
        return float(buf[start:end]), after
    if tag == 0x21:  # ! boolean
        literal = buf[start:end]
        if literal not in (b"true", b"false"):
            raise RecordError(f"not a tnetstring: invalid boolean {literal!r}")
        return literal == b"true", after
    if tag == 0x7E:  # ~ null
        if start != end:
            raise RecordError("not a tnetstring: invalid null")
        return None, after
    raise RecordError(f"not a tnetstring: unknown type tag {tag!r}")


def _dict(buf: bytes, pos: int, end: int, want: Want) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    while pos < end:
        key, pos = _value(buf, pos, True)
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        wanted = want if want is True else want.get(name, False) if isinstance(want, dict) else False
        if wanted is False:
            _, skip_end, _ = _bounds(buf, pos)  # step over without parsing
            pos = skip_end + 1
        else:
            result[key], pos = _value(buf, pos, wanted)
    if pos != end:
        raise RecordError("not a tnetstring: dict overruns its length")
    return result
