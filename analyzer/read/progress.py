"""A progress line on stderr while a large capture is analyzed (only on a terminal)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO

from mcp_blackbox.analyzer.read.load import LoadReport

THRESHOLD = 20_000_000  # bytes of input below which the analysis is quick enough not to need one
INTERVAL = 0.5  # seconds between two lines at most


def total_size(paths: Iterable[str | os.PathLike[str]]) -> int:
    size = 0
    for path in paths:
        with contextlib.suppress(OSError):  # the analysis says why it cannot be read
            size += os.path.getsize(path)
    return size


class ProgressLine:
    """Polls a LoadReport from a thread: ``reading: 12,345 flows, 41 of 370 MB, 38.2 MB/s``, overwritten in place.

    A thread rather than a callback: the reading loop stays free of clocks, and a line appears even while
    one large record is being decoded.
    """

    def __init__(self, report: LoadReport, total: int, out: IO[str] = sys.stderr, interval: float = INTERVAL) -> None:
        self.report, self.total, self.out, self.interval = report, total, out, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcp-blackbox-progress", daemon=True)
        self._start = time.monotonic()
        self._shown = 0

    def __enter__(self) -> ProgressLine:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._shown:
            self.out.write("\r" + " " * self._shown + "\r")  # the results start on a clean line
            self.out.flush()

    def line(self) -> str:
        flows, done = self.report.flows_read, self.report.bytes_read
        elapsed = max(time.monotonic() - self._start, 1e-6)
        if done >= self.total:
            return f"analyzing: {flows:,} flows read in {elapsed:.0f} s"
        rate = done / 1e6 / elapsed
        return f"reading: {flows:,} flows, {done / 1e6:.0f} of {self.total / 1e6:.0f} MB, {rate:.1f} MB/s"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            text = self.line()[:79]
            self.out.write("\r" + text.ljust(self._shown))
            self.out.flush()
            self._shown = max(self._shown, len(text))


def wanted(paths: Iterable[str | os.PathLike[str]], out: IO[str] = sys.stderr) -> int | None:
    """The input size when a progress line is worth showing (a terminal, more than 20 MB), else None."""
    if not out.isatty():
        return None
    size = total_size(paths)
    return size if size > THRESHOLD else None
