"""Secrets: which names and values are secret (``redact``), and a flow with them replaced by
consistent pseudonyms (``sanitize``). Used by every output and by the recorder's ``mcp_redact``.
"""
