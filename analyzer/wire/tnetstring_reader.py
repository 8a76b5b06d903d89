"""Reading mitmproxy's tnetstring flow records fast, decoding only what the analyzer uses.

Every tnetstring value is ``LENGTH:PAYLOAD`` followed by a one-byte type tag,
so a value the analyzer does not need (the server connection, certificates,
TLS details) can be stepped over without being parsed. mitmproxy's own reader
parses everything and then builds Flow objects; the analyzer needs neither.

A ``Want`` says what to decode: ``True`` decodes the whole value, a dict decodes
only those keys of a dict value, ``ENCODED`` keeps the value as its bytes (an
``Encoded``, decoded by ``decode`` if it is ever needed).

This module frames records; ``decode`` is ``tnetstring_decoder.decode``, compiled by mypyc where the
package was built with a C compiler (``setup.py``; ``COMPILED`` says which runs). The compiled copy is used
only if it was built from the decoder's source as it is (a digest of it is compiled in): an editable
checkout edited since its build runs the source. ``MCP_BLACKBOX_PURE_READER=1`` runs the source always.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

from mcp_blackbox.analyzer.wire import tnetstring_decoder
from mcp_blackbox.analyzer.wire.tnetstring_values import (
    ENCODED,
    MAX_PREFIX,
    Encoded,
    RecordCutShort,
    RecordError,
    Want,
)

PURE_ENV = "MCP_BLACKBOX_PURE_READER"
COMPILED_MODULE = "mcp_blackbox.analyzer.wire._tnetstring_compiled"  # what setup.py builds


def compiled_decoder() -> ModuleType | None:
    """The mypyc-compiled decoder, if it was built and built from ``tnetstring_decoder.py`` as it is now."""
    if os.environ.get(PURE_ENV):
        return None
    try:
        compiled = importlib.import_module(COMPILED_MODULE)
    except ImportError:
        return None
    source = Path(tnetstring_decoder.__file__).read_bytes()
    return compiled if getattr(compiled, "SOURCE_DIGEST", None) == source_digest(source) else None


def source_digest(source: bytes) -> str:
    """What the compiled decoder carries of the source it was built from (setup.py writes it in)."""
    return hashlib.sha256(source).hexdigest()


_compiled = compiled_decoder()
COMPILED = _compiled is not None
decode: Callable[..., Any] = (_compiled or tnetstring_decoder).decode  # (record, want=True) -> the value


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
READ_PIECE = 1 << 24  # a corrupt length prefix may claim up to a terabyte: read toward it in pieces this large


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


__all__ = [
    "COMPILED",
    "ENCODED",
    "FLOW_FIELDS",
    "FLOW_ID",
    "MAX_PREFIX",
    "READ_PIECE",
    "Encoded",
    "RecordCutShort",
    "RecordError",
    "Want",
    "decode",
    "framed_records",
    "read_record",
    "record_framed",
]
