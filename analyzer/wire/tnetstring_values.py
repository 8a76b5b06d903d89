"""The values the tnetstring reader deals in: what to decode (``Want``), a value kept encoded (``Encoded``), and
its errors. A module of their own, in Python always: the decoder (``tnetstring_decoder.py``) may run compiled,
and a ``bytes`` subclass that is pickled between processes, or an exception the loader catches, must be one
class whichever decoder made it.
"""

from __future__ import annotations

from typing import Final, Literal

ENCODED: Final = "encoded"
Want = bool | Literal["encoded"] | dict[str, "Want"]
MAX_PREFIX: Final = 12  # digits in a length prefix, as mitmproxy allows


class Encoded(bytes):
    """A value kept as its tnetstring bytes: ``decode(value)`` reads it."""


class RecordError(ValueError):
    """The bytes are not a (complete) tnetstring record."""


class RecordCutShort(RecordError):
    """The file ends inside a record: a length prefix was read, the bytes it announces were not all there."""
