"""Python client runner: drives the official MCP Python SDK client through a list of steps.

    python -m tests.clients.py_client --url URL --steps JSON
        [--transport streamable-http|sse] [--mode legacy|auto|2026-07-28]
        [--auth-token T | --auth-retry-token T] [--timeout S] [--step-timeout S]

Prints exactly one JSON object on stdout and exits 0:
    {"client": "python-mcp", "transport", "mode", "protocol_version", "steps": [...], "fatal": null | {...}}
Steps: {"op": "list_tools"} | {"op": "call", "tool": NAME, "args": {...}}.
The URL's host:port is replaced by <HOST> everywhere in the output, so runs made directly and
through a proxy on another port compare equal.

--auth-token T sends `Authorization: Bearer T` on every request from the start. --auth-retry-token T
sends the first request without it and retries after a 401, the way the SDK's OAuth support does
(see RetryBearerAuth).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Generator
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult
from pydantic import BaseModel

CLIENT_NAME = "python-mcp"
ELICIT_ANSWER = {"name": "Ada"}
STEP_GUARD_MARGIN = 2.0  # seconds past --step-timeout before the runner abandons a step

# Errors after which the session's streams are gone: later steps could only fail the same way.
_SESSION_DEAD = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


def leaf_exception(exc: BaseException) -> BaseException:
    """Unwrap single-member exception groups (anyio task groups wrap everything) to the real error."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> dict[str, Any]:
    exc = leaf_exception(exc)
    code = exc.code if isinstance(exc, MCPError) else None
    return {"type": type(exc).__name__, "code": code, "message": str(exc) or repr(exc)}


def dump(result: Any) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return result


async def accept_elicitation(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content=dict(ELICIT_ANSWER))


class RetryBearerAuth(httpx2.Auth):
    """Send without a token until the server answers 401, then re-send the same request with one.

    The retry of the SDK's OAuth support (mcp.client.auth.OAuthClientProvider, an httpx2.Auth flow)
    without its discovery, registration and token requests, which need an authorization server:
    on a 401 it obtains a token, sets `Authorization: Bearer` on the very request object that got
    the 401 (same body, same JSON-RPC id) and yields it again; from then on every request carries
    the token from the start.
    """

    def __init__(self, token: str) -> None:
        self.token = token
        self.have_token = False  # the OAuth provider starts with no stored tokens

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        if self.have_token:
            request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401 and not self.have_token:
            self.have_token = True  # where the OAuth provider would run its flow and store the token
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def make_transport(
    url: str, transport: str, auth_token: str | None, auth_retry_token: str | None = None
) -> AbstractAsyncContextManager[Any]:
    headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else None
    auth = RetryBearerAuth(auth_retry_token) if auth_retry_token else None
    if transport == "sse":
        return sse_client(url, headers=headers, auth=auth)
    # The SDK's own client factory keeps its default timeouts; we only add the auth header or flow.
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers, auth=auth))


class Runner:
    def __init__(self, args: argparse.Namespace, steps: list[dict[str, Any]]) -> None:
        self.args = args
        self.steps = steps
        self.results: list[dict[str, Any]] = []
        self.fatal: dict[str, Any] | None = None
        self.protocol_version: str | None = None

    async def run(self) -> None:
        try:
            with anyio.fail_after(self.args.timeout):
                await self._session()
                if self.args.rerun_on_failure and not all(record["ok"] for record in self.results):
                    await self._session()  # the application's loop: every step again, in a new session
        except TimeoutError:
            self.fatal = self.fatal or {
                "type": "TimeoutError",
                "code": None,
                "message": f"overall timeout of {self.args.timeout}s exceeded",
            }
        except Exception as exc:  # connection failures surface here, wrapped in task-group groups
            self.fatal = self.fatal or describe(exc)
        for record in self.results:
            if record["t_end"] is None:  # interrupted by the deadline or a session-level failure
                record["error"] = record["error"] or self.fatal
                record["t_end"] = time.time()

    async def _session(self) -> None:
        client = Client(
            make_transport(self.args.url, self.args.transport, self.args.auth_token, self.args.auth_retry_token),
            mode=self.args.mode,
            elicitation_callback=accept_elicitation,
            read_timeout_seconds=self.args.step_timeout,
        )
        async with client:
            self.protocol_version = client.protocol_version
            for step in self.steps:
                record = await self._step(client, step)
                if record.pop("_dead", False):
                    self.fatal = {**record["error"], "message": f"session unusable: {record['error']['message']}"}
                    return

    async def _step(self, client: Client, step: dict[str, Any]) -> dict[str, Any]:
        op = step.get("op")
        record: dict[str, Any] = {
            "op": op,
            "tool": step.get("tool"),
            "ok": False,
            "result": None,
            "error": None,
            "progress": [],
            "t_start": time.time(),
            "t_end": None,
        }
        # Listed before it runs, so a step cut short by the overall deadline still shows up.
        self.results.append(record)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            record["progress"].append({"progress": progress, "total": total, "message": message, "t": time.time()})

        try:
            # The SDK's own read timeout (MCPError -32001) fires first; this guard only catches a
            # step that hangs outside any single request (e.g. several MRTR rounds).
            with anyio.fail_after(self.args.step_timeout + STEP_GUARD_MARGIN):
                if op == "list_tools":
                    result = await client.list_tools()
                elif op == "call":
                    result = await client.call_tool(step["tool"], step.get("args") or {}, progress_callback=on_progress)
                else:
                    raise ValueError(f"unknown op {op!r}")
            record["ok"], record["result"] = True, dump(result)
        except TimeoutError:
            record["error"] = {"type": "TimeoutError", "code": None, "message": "step timed out"}
        except Exception as exc:
            record["error"] = describe(exc)
            record["_dead"] = isinstance(leaf_exception(exc), _SESSION_DEAD)
        record["t_end"] = time.time()
        return record

    def output(self) -> dict[str, Any]:
        return {
            "client": CLIENT_NAME,
            "transport": self.args.transport,
            "mode": self.args.mode,
            "protocol_version": self.protocol_version,
            "steps": self.results,
            "fatal": self.fatal,
        }


def host_scrubber(url: str) -> Callable[[str], str]:
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    return lambda text: text.replace(netloc, "<HOST>") if netloc else text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.py_client")
    parser.add_argument("--url", required=True)
    parser.add_argument("--steps", required=True, help='JSON list, e.g. [{"op": "list_tools"}]')
    parser.add_argument("--transport", choices=("streamable-http", "sse"), default="streamable-http")
    parser.add_argument("--mode", default="auto", help="legacy | auto | 2026-07-28 (the SDK's Client mode)")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth-token", default=None, help="send Authorization: Bearer T on every request")
    auth.add_argument("--auth-retry-token", default=None, help="send no token until a 401, then retry with T")
    parser.add_argument("--timeout", type=float, default=20.0, help="overall deadline, seconds")
    parser.add_argument("--step-timeout", type=float, default=10.0, help="per-step deadline, seconds")
    parser.add_argument(
        "--rerun-on-failure",
        action="store_true",
        help="when a step failed, run every step once more in a new session of the same process (an app loop)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SDK log lines go to stderr; stdout carries only the JSON document.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        steps = json.loads(args.steps)
        if not isinstance(steps, list):
            raise ValueError("--steps must be a JSON list")
    except ValueError as exc:
        print(f"bad --steps: {exc}", file=sys.stderr)
        return 2
    runner = Runner(args, steps)
    try:
        anyio.run(runner.run)
    except BaseException as exc:  # last resort: the JSON document must still be printed
        runner.fatal = runner.fatal or describe(exc)
    scrub = host_scrubber(args.url)
    print(scrub(json.dumps(runner.output())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
