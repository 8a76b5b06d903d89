"""The live verdict's process: judges the flows mitmdump's recorder sends it (``addon/verdict_worker.py``).

Run by path with the interpreter that runs mitmdump. It reads frames from stdin, each a flow's state as the
analysis reads it (``analyzer.calls.live.flow_state``) with a sequence number, and answers each, in order, on
stdout with the :class:`LiveVerdict` of ``judge_flow_state``: the same rules as the offline analysis, on the
other core. A frame is a 4-byte big-endian length, then a pickle; both ends are this package.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run by path, from a checkout or an installed package: bind the package mcp_blackbox to the folder that
    # holds this file's folder, as addon/mcp_recorder.py does when mitmdump loads it as a script.
    import importlib.machinery
    import importlib.util

    _spec = importlib.machinery.ModuleSpec("mcp_blackbox", None, is_package=True)
    _spec.submodule_search_locations = [str(Path(__file__).resolve().parent.parent)]
    sys.modules["mcp_blackbox"] = importlib.util.module_from_spec(_spec)

import contextlib
import os
import pickle
import struct
from typing import Any, BinaryIO

from mcp_blackbox.analyzer.calls.live import LiveVerdict, judge_flow_state

LENGTH = struct.Struct(">I")
CHUNK = 1 << 16  # bytes read from a pipe at a time
PRIORITY = 10  # nice increment: a verdict may come late, the traffic and the process lookup may not


def frame(payload: object) -> bytes:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(data)) + data


class Frames:
    """The payloads of a stream of frames, as chunks of it arrive: how both ends read the other's pipe."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buffer += data
        payloads = []
        while len(self.buffer) >= LENGTH.size:
            (size,) = LENGTH.unpack_from(self.buffer)
            end = LENGTH.size + size
            if len(self.buffer) < end:
                break
            payloads.append(pickle.loads(self.buffer[LENGTH.size : end]))
            del self.buffer[:end]
        return payloads


def judged(state: dict[str, object]) -> LiveVerdict | None:
    """None where the rules raised: the recorder judges that flow itself, and logs why."""
    try:
        return judge_flow_state(state)
    except Exception:
        return None


def serve(source: BinaryIO, sink: BinaryIO) -> None:
    """Answer every frame of ``source`` on ``sink``, in order, until ``source`` ends."""
    frames = Frames()
    while data := source.read1(CHUNK):  # type: ignore[attr-defined]  # what is there, without waiting for more
        for sequence, state in frames.feed(data):
            sink.write(frame((sequence, judged(state))))
        sink.flush()


def lower_priority() -> None:
    """Yield the CPU to everything else the recorder runs. On a busy machine the verdict competes with
    mitmdump's loop and with the client process lookup (addon/peer_lookup.py), which must find a short
    connection's socket before it closes: a CI run with both cores saturated had a call recorded without its
    process when the verdict worker ran at the same priority. Where Linux has it, the idle scheduling class
    as well: the worker then gives way to every other process of normal priority on the machine, and does
    not preempt mitmdump when it wakes (nice +10 alone still did). Measured with ``bench_addon.py``'s client,
    upstream and mitmdump on 2 cores, paired in the same runs: (c)/(bw) 1.250 -> 1.153 and 1.205 -> 1.152.
    On a machine saturated by other work the worker falls behind: verdicts, marks and console lines come
    late, until the recorder judges the flows itself past ``MAX_QUEUED_BYTES`` or ``MAX_WAITING``
    (addon/verdict_worker.py)."""
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(PRIORITY)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


if __name__ == "__main__":
    lower_priority()
    serve(sys.stdin.buffer, sys.stdout.buffer)
