"""A stdio MCP server on the official Python SDK, with the faults stdio servers have in the field.

    python tests/stdio_servers/py_server.py [--banner]

Tools:
- ``echo(text)``: the text back;
- ``big(size)``: a text result of ``size`` characters (a line of several MB on stdout);
- ``swallow()``: catches its own exception, logs the traceback to stderr and returns an empty success;
- ``chatty(text)``: logs an info line to stderr (no exception: a look-alike of ``swallow``) and echoes the text;
- ``crash(how, once)``: dies mid-call: ``exit`` (os._exit(3)) or ``signal`` (SIGKILL to itself), after a line on
  stderr; with ``once`` (a path) only the first time.

``--banner`` prints a line to stdout before serving, the mistake of a server that greets on stdout: the
SDK points fd 1 at stderr only once it serves, so the greeting reaches the client as a non-JSON line.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from mcp.server.mcpserver import MCPServer

logger = logging.getLogger("py_server")
PATTERN = "0123456789abcdé€"  # multi-byte characters, so that a byte limit can fall inside one


def build() -> MCPServer:
    mcp = MCPServer("stdio-testbed", version="1.0.0")

    @mcp.tool(structured_output=False)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool(structured_output=False)
    def big(size: int) -> str:
        """A text of `size` characters."""
        return (PATTERN * (size // len(PATTERN) + 1))[:size]

    @mcp.tool(structured_output=False)
    def swallow() -> str:
        """Read a settings file that is not there; say nothing of it to the client."""
        try:
            with open("/nonexistent/settings.json") as settings:
                return settings.read()
        except OSError:
            logger.exception("could not read the settings")
            return ""

    @mcp.tool(structured_output=False)
    def chatty(text: str) -> str:
        """Log what is done on stderr, as servers do, and return the text."""
        print(f"INFO chatty: echoing {len(text)} characters, no errors", file=sys.stderr, flush=True)
        return text

    @mcp.tool(structured_output=False)
    def crash(how: str = "exit", once: str | None = None) -> str:
        """Die in the middle of the call; with ``once`` (a path), only if that file does not exist yet (it
        is made first), so a restarted server answers the same call."""
        if once is not None:
            if os.path.exists(once):
                return "survived"
            open(once, "w").close()
        print(f"crash: dying by {how}", file=sys.stderr, flush=True)
        if how == "signal":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--banner", action="store_true", help="greet on stdout before serving")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if args.banner:
        print("stdio-testbed 1.0.0 starting", flush=True)
    build().run("stdio")


if __name__ == "__main__":
    main()
