"""Offline analyzer of MCP captures: read, pair and judge each call, link calls across, export, report.

The public API, what a notebook or a script imports; every other module may change between releases::

    from mcp_blackbox.analyzer import analyze
    result = analyze(["capture.flows"])
    result.calls          # one dict per call (the export contract)
    result.calls_frame    # the same as a pandas DataFrame
    result.skipped        # flows not analyzed, with the reason
    result.read_problems  # where and why a file stopped being readable

``CallStream`` yields the same calls one at a time, as they become final, for captures too long to hold.
"""

from mcp_blackbox.analyzer.across.call_stream import CallStream
from mcp_blackbox.analyzer.outputs.analysis import Analysis, analyze
from mcp_blackbox.analyzer.version import NOT_INSTALLED, installed_version

__version__ = installed_version() or NOT_INSTALLED

__all__ = ["Analysis", "CallStream", "__version__", "analyze"]
