"""mitmproxy addon that records MCP HTTP/SSE exchanges without changing them.

Load it with ``mitmdump -s addon/mcp_recorder.py``. The wire-format helpers
(``sse_framing``, ``jsonrpc``) are shared with the offline analyzer.
"""
