"""An MCP aggregator in front of one backend server: FastMCP's proxy (``fastmcp.server.create_proxy``), a real
gateway of the ecosystem, run as its own process. While its backend is down it still answers: every
tools/call gets HTTP 200 with ``isError: true`` and its own text ("Error calling tool 'echo': All connection
attempts failed").

    python -m tests.support.mcp_aggregator --backend URL --port-file FILE
    with start_aggregator(backend_url) as port: ...      # streamable HTTP at http://127.0.0.1:port/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import REPO_ROOT, child_env, stop_process, wait_for_port_file


def main() -> None:
    from fastmcp.server import create_proxy  # in the child only: the test process needs no fastmcp server

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", required=True, help="the backend's MCP URL")
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until the server takes them: the port is usable at once
    partial = args.port_file.with_suffix(".partial")  # atomically: the parent reads the file as soon as it exists
    partial.write_text(str(sock.getsockname()[1]))
    partial.replace(args.port_file)
    proxy = create_proxy(args.backend, name="testbed-aggregator")
    asyncio.run(
        proxy.run_http_async(show_banner=False, transport="http", path="/mcp", log_level="warning", sockets=[sock])
    )


@contextmanager
def start_aggregator(backend_url: str, timeout: float = 20.0) -> Iterator[int]:
    """The aggregator in front of ``backend_url`` for the duration of the block; yields its port."""
    with tempfile.TemporaryDirectory(prefix="mcp-aggregator-") as tmp, tempfile.TemporaryFile() as stderr:
        port_file = Path(tmp) / "port"
        argv = [sys.executable, "-m", "tests.support.mcp_aggregator", "--backend", backend_url]
        argv += ["--port-file", str(port_file)]
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr
        )
        try:
            yield wait_for_port_file(port_file, proc, stderr, timeout)
        finally:
            stop_process(proc)


if __name__ == "__main__":
    main()
