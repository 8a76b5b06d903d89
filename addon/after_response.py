"""Work that waits until mitmproxy has passed the response on: the live verdict and the console line.

mitmproxy calls the ``response`` and ``error`` hooks before it sends the response on (a hook may change it),
and sends it in the same step of its event loop once every addon's hook has returned (``hook_task``, then
``server_event``: no ``await`` that yields in between). Work handed to :class:`AfterResponse` runs in the
loop's next step: after the response's bytes are in the client's socket. The recorder hands it what the
live verdict needs: the console line's view and the flow's state sent to its verdict worker
(``addon/verdict_worker.py``), or the verdict itself where the worker cannot take the flow. ``flush`` runs
what is queued now, at shutdown, where the loop may not get to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

logger = logging.getLogger("mcp_blackbox")


class AfterResponse:
    def __init__(self) -> None:
        self.queue: deque[Callable[[], None]] = deque()
        self.scheduled = False

    def defer(self, work: Callable[[], None]) -> None:
        """Run ``work`` once the response has been passed on; at once where no event loop runs (mitmproxy's
        test context, a script's ``done``)."""
        self.queue.append(work)
        if self.scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self.scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        """Run everything queued, in order; one piece of work failing never stops the others (nor the traffic)."""
        self.scheduled = False
        while self.queue:
            work = self.queue.popleft()
            try:
                work()
            except Exception:
                logger.exception("mcp_blackbox: %s failed after the response; traffic is unaffected", work)
