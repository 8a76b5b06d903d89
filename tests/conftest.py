"""Fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mitmproxy.test import taddons

from mcp_blackbox.addon.mcp_recorder import McpRecorder


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
