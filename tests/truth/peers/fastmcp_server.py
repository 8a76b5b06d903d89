"""A FastMCP server (the `fastmcp` package, not the official SDK's server) for the agent family of the
truth corpus (tests/truth/family_agent.py), run as its own process:

    python tests/truth/peers/fastmcp_server.py [--port-file FILE]

It binds 127.0.0.1 on a free port itself (no race with another process picking the same one), writes
the port to FILE (or prints it), and serves streamable HTTP at /mcp until SIGTERM/SIGINT.

Tools:
  lookup(order)           readOnlyHint; an unknown order raises ToolError, which FastMCP answers as an
                          isError result: what makes an agent framework re-call the tool.
  add_note(order, note)   a write without readOnlyHint or idempotentHint.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from mcp_types import ToolAnnotations

# Orders the server knows; anything else is "unknown" (isError).
ORDERS = {f"A-{n}": f"order A-{n}: shipped" for n in range(1, 1000)}

server: FastMCP = FastMCP("truth-orders")
notes: dict[str, list[str]] = {}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(order: str) -> str:
    """Look an order up by its id (A-<number>)."""
    if order not in ORDERS:
        raise ToolError(f"unknown order {order!r}: ids look like A-<number>")
    return ORDERS[order]


@server.tool
def add_note(order: str, note: str) -> str:
    """Append a note to an order (a write: running it twice appends twice)."""
    notes.setdefault(order, []).append(note)
    return f"{order}: {len(notes[order])} note(s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port-file", type=Path, help="write the bound port here (else print it)")
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if args.port_file:  # atomically: the parent polls for the file and reads it at once
        partial = args.port_file.with_suffix(".partial")
        partial.write_text(f"{port}\n")
        partial.replace(args.port_file)
    else:
        print(port, flush=True)
    asyncio.run(
        server.run_http_async(show_banner=False, transport="http", path="/mcp", log_level="warning", sockets=[sock])
    )


if __name__ == "__main__":
    main()
