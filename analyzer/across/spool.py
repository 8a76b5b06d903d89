"""A sequence kept in a temporary file: what a windowed stream settles and the outputs list at the end.

A windowed ``CallStream`` forgets each call once it is final, but the retry groups and duplicate
executions it settles are written after the calls (the export's ``retry_groups`` section, check's and the
summaries' lists): held in memory, they grew with the recording (3,178 group records per 40,000 calls of the
synthetic capture). A ``Spool`` writes each one to disk as it comes and reads them back in order, so memory
holds one offset per item.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, overload


class Spool[T](Sequence[T]):
    """Items appended, pickled into a temporary file (removed when the spool goes), read back by index,
    slice or in order: a list's uses, with memory of 8 bytes an item. The file holds only what this process
    wrote, so reading it back trusts it as the process's own."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._offsets = array("q")  # where each item starts

    def append(self, item: T) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="mcp-blackbox-spool-")  # noqa: SIM115 (closed by close())
        self._file.seek(0, os.SEEK_END)
        self._offsets.append(self._file.tell())
        pickle.dump(item, self._file, protocol=pickle.HIGHEST_PROTOCOL)

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._load(n) for n in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._load(index)

    def __iter__(self) -> Iterator[T]:
        n = 0
        while n < len(self):  # as a list's iterator: what is appended meanwhile is read too
            yield self._load(n)
            n += 1

    def _load(self, n: int) -> T:
        assert self._file is not None
        self._file.seek(self._offsets[n])
        item: T = pickle.load(self._file)
        return item

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._offsets = array("q")
