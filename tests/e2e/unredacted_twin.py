"""A second writer for tests: every HTTP flow as it is, into ``twin_file``, at the hooks where -w writes.

Loaded after addon/mcp_recorder.py (``-s`` order), it sees each flow with the recorder's record in it, as
-w does: the original capture of the very traffic that ``mcp_redact`` writes redacted, flow ids included.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from mitmproxy import ctx, http
from mitmproxy.io import FlowWriter


class UnredactedTwin:
    def __init__(self) -> None:
        self.file: BinaryIO | None = None
        self.writer: FlowWriter | None = None
        self.open: dict[str, http.HTTPFlow] = {}

    def load(self, loader: Any) -> None:
        loader.add_option("twin_file", str, "", "Write every flow unredacted here.")

    def configure(self, updated: set[str]) -> None:
        if "twin_file" in updated and ctx.options.twin_file:
            self.file = open(ctx.options.twin_file, "wb")  # noqa: SIM115 - closed in done
            self.writer = FlowWriter(self.file)

    def request(self, flow: http.HTTPFlow) -> None:
        self.open[flow.id] = flow

    def response(self, flow: http.HTTPFlow) -> None:
        self._write(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._write(flow)

    def done(self) -> None:
        for flow in list(self.open.values()):
            self._write(flow)
        if self.file is not None:
            self.file.close()

    def _write(self, flow: http.HTTPFlow) -> None:
        self.open.pop(flow.id, None)
        if self.writer is not None:
            self.writer.add(flow)
            assert self.file is not None
            self.file.flush()


addons = [UnredactedTwin()]
