"""What `mcp-blackbox run` needs to know about a run that the capture cannot show.

Loaded by `run` as a second script after the recorder (``-s mcp_recorder.py -s run_monitor.py``): it
counts the HTTP exchanges that went through the proxy (and which of them the recorder took for MCP),
the TLS handshakes that failed with the client (a client that does not trust the run's CA, or pins
certificates) and with servers (a certificate the recorder could not verify), and writes them as JSON
to ``mcp_run_stats`` when mitmdump stops. It changes nothing in the traffic. It imports the package: the
recorder, loaded first, has bound it to the folder beside this file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from mitmproxy import ctx, http, tls

from mcp_blackbox.analyzer.wire.metadata import METADATA_KEY

MAX_LISTED = 20  # failed handshakes listed with their details; all are counted


class RunMonitor:
    def __init__(self) -> None:
        self.exchanges = 0
        self.mcp_exchanges = 0
        self.other_hosts: dict[str, int] = {}
        self.tls_failed: dict[str, list[dict[str, Any]]] = {"client": [], "server": []}
        self.tls_failed_count = {"client": 0, "server": 0}

    def load(self, loader: Any) -> None:
        loader.add_option("mcp_run_stats", str | None, None, "Write the run's counts here (JSON) when stopping.")

    def response(self, flow: http.HTTPFlow) -> None:
        self._count(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._count(flow)

    def _count(self, flow: http.HTTPFlow) -> None:
        self.exchanges += 1
        record = flow.metadata.get(METADATA_KEY)
        if isinstance(record, dict) and "mcp" in record:
            self.mcp_exchanges += 1
        else:
            host = f"{flow.request.host}:{flow.request.port}"
            self.other_hosts[host] = self.other_hosts.get(host, 0) + 1

    def tls_failed_client(self, data: tls.TlsData) -> None:
        self._tls_failed("client", data)

    def tls_failed_server(self, data: tls.TlsData) -> None:
        self._tls_failed("server", data)

    def _tls_failed(self, side: str, data: tls.TlsData) -> None:
        self.tls_failed_count[side] += 1
        if len(self.tls_failed[side]) < MAX_LISTED:
            server = data.context.server
            host = data.conn.sni or (server.address[0] if server.address else None)
            port = server.address[1] if server.address else None
            self.tls_failed[side].append({"host": host, "port": port, "error": data.conn.error})

    def done(self) -> None:
        path = ctx.options.mcp_run_stats
        if not path:
            return
        stats = {
            "exchanges": self.exchanges,
            "mcp_exchanges": self.mcp_exchanges,
            "other_hosts": self.other_hosts,
            "tls_failed": self.tls_failed,
            "tls_failed_count": self.tls_failed_count,
        }
        fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=Path(path).name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(stats, f)
        os.replace(tmp, path)


addons = [RunMonitor()]
