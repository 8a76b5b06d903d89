"""Offline analyzer of MCP captures: load, extract, pair, classify, retries, export, report.

from mcp_blackbox.analyzer import analyze
result = analyze(["capture.flows"])
result.calls          # one dict per call (the export contract)
result.calls_frame    # the same as a pandas DataFrame
result.skipped        # flows not analyzed, with the reason
result.read_problems  # where and why a file stopped being readable
"""

from mcp_blackbox.analyzer.analysis import Analysis, analyze

__all__ = ["Analysis", "analyze"]
