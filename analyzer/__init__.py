"""Offline analyzer of MCP captures: load, extract, pair, classify, retries, export, report."""
