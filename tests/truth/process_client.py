"""One client process of the truth corpus's process family (tests/truth/family_process.py): the official
Python SDK's client, run as a process of its own so that the recorder measures it, driving a script of
labelled tools/calls and printing what it saw.

    python -m tests.truth.process_client (--url URL | --stdio JSON-ARGV) --script JSON

The script is a list of calls, run in order in one session:

    {"tool": NAME, "args": {...}, "label": {...}, "progress": false,
     "retry": {"times": 1, "delay": 0.5, "new_session": true, "origin": "app-retry", "reexecutes": false,
               "rerun": [call, ...]}}

When a call fails (an exception, not isError) and has a ``retry``, the client waits ``delay`` seconds and
sends it again, up to ``times`` times, each under the next attempt's label (kind retry, the origin and
reexecutes given): in the same session, or after closing it, in a new session (new connections, or for
stdio a new server process), where before the first retry it runs ``rerun`` (an application that starts
its job over). The calls after it run in whichever session is open. ``--start-at T`` holds the first call
until the epoch time T, once the session is open (processes that call at the same moment). A session that
cannot be opened (the server not listening yet) is tried again every 0.5 s, for 20 s at most. Prints one
JSON object: {"pid": N, "attempts": [Attempt.record(), ...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.truth.driver import CLIENT_MODE, READ_TIMEOUT_S, Attempt, call, open_session  # noqa: E402
from tests.truth.labels import Label  # noqa: E402


def label_of(raw: dict[str, Any]) -> Label:
    return Label(**raw)


def retry_label(previous: Label, retry: dict[str, Any]) -> dict[str, Any]:
    """The next attempt of the same logical request: what the client is about to do."""
    label = Label(previous.request, previous.attempt + 1, "retry", retry.get("origin"), retry.get("reexecutes", False))
    return asdict(label)


def later_retries(retry: dict[str, Any]) -> dict[str, Any]:
    """What is left of a retry rule once it was used: one time less, and no rerun (done once)."""
    return {**retry, "times": retry.get("times", 1) - 1, "rerun": []}


MAX_RECONNECTS = 40  # a session that could not be opened is tried again, for 20 s at most
RECONNECT_DELAY_S = 0.5


class Script:
    def __init__(self, args: argparse.Namespace) -> None:
        self.url: str | None = args.url
        self.stdio: list[str] | None = json.loads(args.stdio) if args.stdio else None
        self.calls: list[dict[str, Any]] = json.loads(args.script)
        self.start_at: float | None = args.start_at
        self.attempts: list[Attempt] = []
        self.reconnects = 0

    def session(self) -> AbstractAsyncContextManager[Client]:
        if self.url is not None:
            return open_session(self.url)
        return self._stdio_session()

    @asynccontextmanager
    async def _stdio_session(self) -> AsyncIterator[Client]:
        assert self.stdio is not None
        params = StdioServerParameters(command=self.stdio[0], args=self.stdio[1:], env=dict(os.environ))
        client = Client(stdio_client(params, errlog=sys.stderr), mode=CLIENT_MODE, read_timeout_seconds=READ_TIMEOUT_S)
        async with client:
            yield client

    async def run(self) -> None:
        pending = list(self.calls)
        while pending:
            pending = await self._in_one_session(pending)

    async def _in_one_session(self, pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run calls in one session until one fails with a retry in a new session; return what is left for
        that session (kept when closing the dead session fails too)."""
        rest: list[dict[str, Any]] = []
        opened = False
        try:
            async with self.session() as session:
                opened = True
                rest = await self._until_new_session(session, pending)
        except Exception as exc:  # a dead server or session: what was seen is kept
            print(f"session ended: {type(exc).__name__}: {exc}", file=sys.stderr)
        if not opened and self.reconnects < MAX_RECONNECTS:
            # The server is not up (yet): an application waits and connects again, as a restarted server
            # takes a moment to listen (longer on a loaded machine).
            self.reconnects += 1
            await anyio.sleep(RECONNECT_DELAY_S)
            return pending
        return rest

    async def _until_new_session(self, session: Client, pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await self._hold()
        while pending:
            step = pending.pop(0)
            attempt = await self._call(session, step)
            retry = step.get("retry")
            if attempt.outcome != "error" or not retry or not retry.get("times", 1):
                continue
            await anyio.sleep(retry.get("delay", 0))
            again = {**step, "label": retry_label(attempt.label, retry), "retry": later_retries(retry)}
            if retry.get("new_session"):
                return [*retry.get("rerun", []), again, *pending]
            pending.insert(0, again)
        return []

    async def _hold(self) -> None:
        if self.start_at is not None:
            await anyio.sleep(max(0.0, self.start_at - time.time()))
            self.start_at = None

    async def _call(self, session: Client, step: dict[str, Any]) -> Attempt:
        label, progress = label_of(step["label"]), step.get("progress", False)
        attempt = await call(session, step["tool"], step["args"], label, with_progress=progress)
        self.attempts.append(attempt)
        return attempt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.truth.process_client")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the MCP endpoint (Streamable HTTP)")
    where.add_argument("--stdio", help="the server's argv as JSON: the SDK's stdio client starts it")
    parser.add_argument("--script", required=True, help="the calls, as JSON (see the module's docstring)")
    parser.add_argument("--start-at", type=float, default=None, help="epoch time of the first call")
    script = Script(parser.parse_args(argv))
    anyio.run(script.run)
    print(json.dumps({"pid": os.getpid(), "attempts": [a.record() for a in script.attempts]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
