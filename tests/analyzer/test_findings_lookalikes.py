"""Look-alikes that a precision review of the findings rules found firing (issue 22, item 2), each built
from what its peer does on the wire, and a stdio capture the recorder wrote: none of them is the pattern
its rule names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import exchange, result, text_result, tool_call, write

AT = 1_800_000_000.0


def rules(path: Path) -> list[str]:
    return [finding["rule"] for finding in analyze([path]).findings]


def test_a_servers_own_fast_504s_are_no_gateway_timeout(tmp_path: Path) -> None:
    """An MCP server's own 504s ("upstream service unavailable"), answered in 5 ms, no gateway in the path:
    no timeout cut them."""
    flows = [
        exchange(tool_call(n, "fetch"), status=504, body=b"upstream service unavailable", content_type="text/plain",
                 at=AT + n * 7, duration=0.005)
        for n in range(1, 4)
    ]  # fmt: skip
    flows.append(exchange(tool_call(9, "fetch"), body=result(9, text_result()), at=AT + 40))
    assert rules(write(tmp_path, *flows)) == []


def test_a_gateways_504s_at_one_duration_are_its_timeout_but_a_servers_own_are_not_counted(tmp_path: Path) -> None:
    """Three 504s at 1.0 s: two say Server: nginx, the third is the server's own. Only the gateway's count,
    and two are not a pattern."""
    nginx = {"server": "nginx/1.22.1"}
    flows = [
        exchange(tool_call(1, "slow"), status=504, body=b"<html>504 Gateway Time-out</html>", content_type="text/html",
                 response_headers=nginx, at=AT, duration=1.0),
        exchange(tool_call(2, "slow"), status=504, body=b"<html>504 Gateway Time-out</html>", content_type="text/html",
                 response_headers=nginx, at=AT + 2, duration=1.0),
        exchange(tool_call(3, "slow"), status=504, body=b"timed out", content_type="text/plain", at=AT + 4,
                 duration=1.0),
    ]  # fmt: skip
    assert "gateway_timeout" not in rules(write(tmp_path, *flows))


def test_unknown_tools_are_no_dead_backend(tmp_path: Path) -> None:
    """An agent with a stale tool list calls tools the server does not have; the Python SDK answers isError
    "Unknown tool: X" for each: the server answered for itself, no backend was asked."""
    flows = []
    for n, tool in enumerate(["search_docs", "get_weather", "searchDocs"], 1):
        body = result(n, {"content": [{"type": "text", "text": f"Unknown tool: {tool}"}], "isError": True})
        flows.append(exchange(tool_call(n, tool), body=body, at=AT + n))
    flows.append(exchange(tool_call(4, "echo"), body=result(4, text_result()), at=AT + 5))
    assert rules(write(tmp_path, *flows)) == []


def refused(n: int, at: float, token: str) -> Any:
    return exchange(
        tool_call(n, "echo"),
        status=401,
        body=b'{"error":"invalid_token"}',
        request_headers={"authorization": f"Bearer {token}"},
        response_headers={"www-authenticate": 'Bearer error="invalid_token"'},
        at=at,
        duration=0.01,
    )


def new_token(at: float) -> Any:
    return exchange(
        b"grant_type=refresh_token&refresh_token=r",
        path="/token",
        body=json.dumps({"access_token": "new", "token_type": "Bearer"}).encode(),
        request_headers={"content-type": "application/x-www-form-urlencoded"},
        at=at,
        duration=0.02,
    )


def answered(n: int, at: float) -> Any:
    return exchange(
        tool_call(n, "echo"),
        body=result(n, text_result()),
        request_headers={"authorization": "Bearer new"},
        at=at,
        duration=0.02,
    )


def test_clients_refreshing_one_after_another_are_no_auth_loop(tmp_path: Path) -> None:
    """Three clients whose old token expired: 401, refresh, 401 (the next client's old token), refresh...,
    then every client is answered. No new token was ever refused."""
    flows = [refused(1, AT, "old"), new_token(AT + 0.05), refused(2, AT + 0.10, "old"), new_token(AT + 0.15),
             refused(3, AT + 0.20, "old"), new_token(AT + 0.25), answered(11, AT + 0.30), answered(12, AT + 0.31),
             answered(13, AT + 0.32)]  # fmt: skip
    assert "auth_refresh_loop" not in rules(write(tmp_path, *flows))


def test_new_tokens_refused_round_after_round_are_an_auth_loop(tmp_path: Path) -> None:
    """The rule still fires when each 401 refuses the token the refresh before it issued."""
    flows = [refused(1, AT, "t0"), new_token(AT + 0.05), refused(2, AT + 0.10, "t1"), new_token(AT + 0.15),
             refused(3, AT + 0.20, "t2"), new_token(AT + 0.25), refused(4, AT + 0.30, "t3")]  # fmt: skip
    assert "auth_refresh_loop" in rules(write(tmp_path, *flows))
