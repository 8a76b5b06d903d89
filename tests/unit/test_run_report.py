"""What `mcp-blackbox run` says once COMMAND has exited (cli/run_command.py ``report``), from a capture and the
recorder's counts, without starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_blackbox.cli.run_command import report
from tests.analyzer.flows import exchange, result, rpc, write

BARE_ENVIRONMENT = "a stdio server was started with a bare environment"


def said(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_no_mcp_exchange_names_a_stdio_server_started_with_a_bare_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SDKs' stdio clients start servers with a default set of variables only: a stdio bridge (mcp-remote
    under the Python SDK's stdio_client) never sees HTTP_PROXY. The hint names that cause and its fixes."""
    capture = tmp_path / "nothing.flows"
    capture.write_bytes(b"")
    report(str(capture), {}, recorded_all=False)
    text = said(capsys)
    assert "no MCP exchange was seen: no HTTP request came through the recorder" in text, text
    assert "The client may ignore the proxy settings" in text, "the first cause stays"
    assert BARE_ENVIRONMENT in text and "mcp-remote under the Python SDK's stdio_client" in text, text
    assert "pass the environment through" in text and "record the stdio server with mcp-blackbox record --stdio" in text


def test_a_run_that_saw_mcp_gives_no_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = write(tmp_path, exchange(rpc(1, "tools/list"), body=result(1, {"tools": []})))
    report(str(capture), {"exchanges": 1}, recorded_all=False)
    text = said(capsys)
    assert "MCP server http://127.0.0.1:8000: 1 call, 0 failed" in text, text
    assert "no MCP exchange was seen" not in text and BARE_ENVIRONMENT not in text
