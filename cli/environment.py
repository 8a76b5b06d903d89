"""What the recording commands find on this machine: mitmdump, and the addon's script for its ``-s``."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path


def mitmdump_executable() -> str:
    """mitmdump from this Python's environment first, so the addon and mitmproxy match."""
    beside_python = Path(sys.executable).with_name("mitmdump")
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("mitmdump")
    if found is None:
        raise SystemExit("mcp-blackbox record: mitmdump not found; install mitmproxy (pip install mitmproxy)")
    return found


def addon_path() -> Path:
    """The installed addon's script, for ``mitmdump -s`` and ``mitmweb -s``.

    Found without importing it: the addon loads mitmproxy, which the analysis commands do not need.
    """
    spec = importlib.util.find_spec("mcp_blackbox.addon.mcp_recorder")
    assert spec is not None and spec.origin is not None, "mcp_blackbox.addon is part of this package"
    return Path(spec.origin).resolve()
