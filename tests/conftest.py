"""Fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mitmproxy.test import taddons

from mcp_blackbox.addon.mcp_recorder import McpRecorder
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write


@pytest.fixture
def recorder(caplog: pytest.LogCaptureFixture) -> Iterator[McpRecorder]:
    """The recording addon in a mitmproxy test context, console off."""
    addon = McpRecorder()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcp_console=False)
        yield addon
    # The hooks swallow their own exceptions to protect traffic; a test still fails on one.
    swallowed = [r for r in caplog.records if "traffic is unaffected" in r.getMessage()]
    assert not swallowed, swallowed[0].exc_text


@pytest.fixture(scope="session")
def ran_twice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A write answered 500 (it may have run) and sent again in its session, where it ran: an unsafe
    retry and a duplicate execution. No sample capture has one: py-app-retry-after-503's 503 ran nothing."""
    headers = {"mcp-session-id": "A"}
    tools = {"tools": [{"name": "write_record", "annotations": {"destructiveHint": True}}]}
    return write(
        tmp_path_factory.mktemp("ran-twice"),
        exchange(rpc(1, "tools/list"), body=result(1, tools), request_headers=headers, at=1),
        exchange(tool_call(2, "write_record"), status=500, body=b"boom", request_headers=headers, at=2),
        exchange(tool_call(3, "write_record"), body=result(3, text_result()), request_headers=headers, at=3),
    )
