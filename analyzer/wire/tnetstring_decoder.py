"""Decoding one tnetstring record: the flow-file reader's hot loop (``tnetstring_reader.py`` says what it reads).

Every tnetstring value is ``LENGTH:PAYLOAD`` followed by a one-byte type tag, so a value the analyzer does not
need is stepped over without being parsed. This module is plain, typed Python, and it is also compiled with
mypyc when the package is built where a C compiler is (``setup.py``): ``tnetstring_reader`` then uses the
compiled copy, which decodes about twice as fast, if it was built from this very source.
"""

from __future__ import annotations

from typing import Any

from mcp_blackbox.analyzer.wire.tnetstring_values import ENCODED, MAX_PREFIX, Encoded, RecordError, Want


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
