"""Fixtures the analyzer's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write


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
