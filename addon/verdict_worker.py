"""The live verdict off mitmdump's event loop: a process of its own judges each flow (issue 23).

Judging an exchange (``analyzer.calls.live``: extract, pair, classify) costs some 70 µs of Python per POST,
and mitmdump's event loop runs one thing at a time: done on the loop, even after the response was passed on
(``addon/after_response.py``), it delays the next request a client sends. So the recorder sends each flow's
state, as the analysis reads it (``flow_state``, a few µs to take and pickle), to ``addon/verdict_process.py``,
started with the recorder, which answers with the verdict on the other core; the recorder then puts the
verdict into the live flow's record and mark, and prints its console line. (The flow was written already, in
its hook: the file holds the capture, not the live verdict.)

Where the worker cannot serve (no event loop yet, the process failed to start or died, or it is behind), the
recorder judges on its own loop, after the response: nothing is lost but time. At shutdown the flows still
out are judged by the recorder (``settle``), before the streams still open are judged and written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from mitmproxy import http

from mcp_blackbox.addon.verdict_process import Frames, frame
from mcp_blackbox.analyzer.calls.live import LiveVerdict, flow_state

logger = logging.getLogger("mcp_blackbox")

PROCESS = Path(__file__).with_name("verdict_process.py")
# A worker behind (a burst of large streams: their bodies are in the state sent) gets no more flows while this
# much is queued for it, or this many flows wait for its answer: the recorder judges those itself, so the
# memory the queue takes stays bounded.
MAX_QUEUED_BYTES = 8 << 20
MAX_WAITING = 10_000

# Called with the flow's verdict, or None where it must be judged on the loop (the worker could not).
Answer = Callable[[LiveVerdict | None], None]


class VerdictWorker:
    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.requests: asyncio.WriteTransport | None = None
        self.failed = False
        self.sequence = 0
        self.waiting: dict[int, Answer] = {}
        self.answers = Frames()

    async def start(self) -> None:
        """Start the process and connect its pipes to the event loop; on failure the recorder judges alone."""
        if self.process is not None or self.failed:
            return
        try:
            self.process = subprocess.Popen(
                [sys.executable, str(PROCESS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
            )
            assert self.process.stdin is not None and self.process.stdout is not None
            loop = asyncio.get_running_loop()
            self.requests, _ = await loop.connect_write_pipe(asyncio.Protocol, self.process.stdin)
            await loop.connect_read_pipe(lambda: _Answers(self), self.process.stdout)
        except (OSError, AssertionError) as e:
            self._fail(f"cannot start {PROCESS.name}: {e}")

    def judge(self, flow: http.HTTPFlow, answer: Answer) -> bool:
        """Send the flow to be judged; ``answer`` is called with its verdict. False: not sent (judge it here)."""
        if self.requests is None or self.failed or self.requests.is_closing():
            return False
        if self.requests.get_write_buffer_size() > MAX_QUEUED_BYTES or len(self.waiting) >= MAX_WAITING:
            return False
        self.sequence += 1
        self.waiting[self.sequence] = answer
        self.requests.write(frame((self.sequence, flow_state(flow))))
        return True

    def data_received(self, data: bytes) -> None:
        for sequence, verdict in self.answers.feed(data):  # the process this module started, from its own pipe
            answer = self.waiting.pop(sequence, None)
            if answer is not None:
                answer(verdict if isinstance(verdict, LiveVerdict) else None)

    def settle(self) -> None:
        """Every flow still out is answered with None (judged by the recorder); the worker stops."""
        waiting, self.waiting = self.waiting, {}
        for answer in waiting.values():
            answer(None)
        self.close()

    def lost(self, reason: str) -> None:
        if not self.failed:
            self._fail(reason)
        self.settle()

    def _fail(self, reason: str) -> None:
        self.failed = True
        logger.warning("mcp_blackbox: the verdict worker stopped (%s); verdicts are made on mitmdump's loop", reason)

    def close(self) -> None:
        self.failed = True  # no flow is sent after this
        if self.requests is not None:
            self.requests.close()
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(1)


class _Answers(asyncio.Protocol):
    def __init__(self, worker: VerdictWorker) -> None:
        self.worker = worker

    def data_received(self, data: bytes) -> None:
        try:
            self.worker.data_received(data)
        except Exception:  # an answer that cannot be read: stop using the worker, judge here
            logger.exception("mcp_blackbox: a verdict from the worker could not be read")
            self.worker.lost("an unreadable answer")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.worker.failed:
            self.worker.lost(f"it exited ({exc or 'end of its output'})")
