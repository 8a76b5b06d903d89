"""The options that ``record`` and ``run`` share, defined once: an argparse parent parser."""

from __future__ import annotations

import argparse


def recording_options() -> argparse.ArgumentParser:
    """What both recording commands pass to the addon. ``-p``'s default is each command's own
    (``set_defaults``): record listens where a client is pointed, run anywhere free."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("-p", "--port", type=int, help="the recorder's port (0: any free port)")
    options.add_argument(
        "--filter",
        metavar="EXPR",
        help="a mitmproxy filter narrowing which MCP exchanges are annotated (mcp_filter, e.g. '~d api.example.com')",
    )
    options.add_argument(
        "--redact",
        action="store_true",
        help="write secrets to the capture as consistent pseudonyms (mcp_redact); the traffic is unchanged",
    )
    return options
