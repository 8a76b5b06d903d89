"""A mitmdump script for memory tests: on SIGUSR1, collect garbage, give freed heap back, report RSS.

RSS read right after a load says as much about glibc and the garbage collector's timing as about what
is alive: freed heap pages stay mapped, and flows wait in reference cycles for the next collection.
A leak check that compares such readings fails on noise (a run saw 5.4 MiB of difference between two
identical rounds, all of it pages a collection and ``malloc_trim`` gave back). On the signal this
script runs ``gc.collect()`` and ``malloc_trim(0)`` inside mitmdump, on its event loop, then writes
``{"settled": n, "rss_kib": ...}`` to ``heap-settled.json`` in mitmdump's working directory; what is
left is what is alive.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import signal
from pathlib import Path

REPORT = Path("heap-settled.json")


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


class HeapSettle:
    def __init__(self) -> None:
        self.settled = 0
        libc = ctypes.util.find_library("c")
        self.trim = getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None

    def running(self) -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, self.settle)

    def settle(self) -> None:
        gc.collect()
        if self.trim is not None:
            self.trim(0)
        self.settled += 1
        temporary = REPORT.with_suffix(".tmp")
        temporary.write_text(json.dumps({"settled": self.settled, "rss_kib": rss_kib()}))
        temporary.replace(REPORT)  # the test never reads half a file


addons = [HeapSettle()]
