"""The recorder with a part of it switched off, for ``bench_recorder_parts.py`` (a mitmdump script).

``MCP_BLACKBOX_BENCH_OFF`` names what is off:
  ``everything``: an addon with the recorder's hooks, each returning at once (what mitmproxy's calling them costs);
  ``judge``: the recorder recognises MCP and writes, but makes no record and sends nothing (``_judge``);
  ``verdict``: the record is made, the flow is not sent to the verdict worker nor described for the console.
Unset: the recorder as shipped.
"""

from __future__ import annotations

import os
from typing import Any

from mcp_blackbox.addon import mcp_recorder
from mcp_blackbox.addon.rotation import CaptureWriter


class Idle:
    """The hooks the recorder and its writer have, doing nothing."""

    def client_connected(self, client: Any) -> None: ...
    def request(self, flow: Any) -> None: ...
    def responseheaders(self, flow: Any) -> None: ...
    def response(self, flow: Any) -> None: ...
    def error(self, flow: Any) -> None: ...


OFF = os.environ.get("MCP_BLACKBOX_BENCH_OFF", "")
if OFF == "judge":
    mcp_recorder.McpRecorder._judge = lambda self, *args: None  # type: ignore[method-assign]
elif OFF == "verdict":
    mcp_recorder.McpRecorder._send_for_verdict = lambda self, *args: None  # type: ignore[method-assign]
addons: list[Any] = [Idle(), Idle()] if OFF == "everything" else [mcp_recorder.McpRecorder(), CaptureWriter()]
