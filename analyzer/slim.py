"""What of a JSON-RPC message the analysis keeps once it has been read.

A capture of 100,000 calls does not fit in memory as parsed JSON. Each message
is cut down, as soon as it is parsed, to the members that pairing, verdicts and
retries read: the envelope, the tool name, progress and cancel references,
the ``_meta`` the protocol defines, the shape of a tool result with the start
of its text, and digests of the arguments (what a retry would repeat). ``analyze(..., keep_details=True)``
keeps messages whole.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

TEXT_LIMIT = 300  # characters of a text block kept
BLOCKS_KEPT = 3  # content blocks kept (the rest is counted)
SMALL = 4096  # bytes of JSON below which a value is kept whole

PARAM_KEYS = (
    "name",
    "progressToken",
    "progress",
    "total",
    "message",
    "requestId",
    "reason",
    "protocolVersion",
    "clientInfo",
    "level",
    "uri",
)
META_KEYS = ("progressToken", "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientInfo")
RESULT_KEYS = ("resultType", "isError", "protocolVersion", "serverInfo", "nextCursor")


def digest(value: Any) -> str:
    """A stable digest of a JSON value (key order does not matter)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(canonical.encode(), digest_size=12).hexdigest()


def _small(value: Any) -> bool:
    return len(json.dumps(value, default=str)) <= SMALL


def _interned(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) < 64 else value


def slim_message(value: dict[str, Any]) -> dict[str, Any]:
    # Envelope strings recur in every message ("2.0", method names): one copy of each.
    out = {key: _interned(value[key]) for key in ("jsonrpc", "id", "method") if key in value}
    if "params" in value:
        is_request = "method" in value and "id" in value
        out["params"] = _slim_request_params(value["params"]) if is_request else _slim_params(value["params"])
    if "error" in value:
        out["error"] = _slim_error(value["error"])
    if "result" in value:
        out["result"] = _slim_result(value["result"])
    return out


def _slim_params(params: Any) -> Any:
    """A notification's params: the references that tie it to a call, and its level."""
    if not isinstance(params, dict):
        return params if _small(params) else {"omitted": True}
    return {key: _interned(params[key]) for key in PARAM_KEYS if key in params}


def _slim_request_params(params: Any) -> Any:
    """A request's params: tool name, protocol ``_meta`` and digests of what a retry would repeat."""
    out = _slim_params(params)
    if not isinstance(params, dict):
        return out
    meta = params.get("_meta")
    if isinstance(meta, dict):
        out["_meta"] = {k: _interned(meta[k]) for k in META_KEYS if k in meta and _small(meta[k])}
    # MRTR rounds are linked by these, not by id (FIELD_NOTES.md); the arguments are in params_digest.
    for key in ("inputResponses", "requestState"):
        if key in params:
            out[f"{key}_digest"] = digest(params[key])
    out["params_digest"] = digest({k: v for k, v in params.items() if k != "_meta"})
    return out


def _slim_error(error: Any) -> Any:
    if not isinstance(error, dict):
        return error if _small(error) else {"omitted": True}
    out = {key: error[key] for key in ("code", "message") if key in error}
    if isinstance(out.get("message"), str):
        out["message"] = out["message"][: TEXT_LIMIT * 2]
    if "data" in error and _small(error["data"]):
        out["data"] = error["data"]
    return out


def _slim_result(result: Any) -> Any:
    if not isinstance(result, dict):
        return result if _small(result) else {"omitted": True}
    out = {key: _interned(result[key]) for key in RESULT_KEYS if key in result}
    if "content" in result:
        out["content"] = _slim_content(result["content"])
    if "structuredContent" in result:
        if _small(result["structuredContent"]):
            out["structuredContent"] = result["structuredContent"]
        else:
            out["structuredContentOmitted"] = True
    if isinstance(result.get("tools"), list):
        out["tools"] = [_slim_tool(tool) for tool in result["tools"]]
    for key in ("inputRequests", "requestState"):
        if key in result:
            out[f"{key}_digest"] = digest(result[key])
    return out


def _slim_content(content: Any) -> Any:
    if isinstance(content, str):
        return content[:TEXT_LIMIT]
    if not isinstance(content, list):
        return content if _small(content) else {"omitted": True}
    blocks = []
    for block in content[:BLOCKS_KEPT]:
        if isinstance(block, dict):
            kept = {k: _interned(block[k]) for k in ("type", "text", "uri", "mimeType") if k in block}
            if isinstance(kept.get("text"), str):
                kept["text"] = kept["text"][:TEXT_LIMIT]
            blocks.append(kept)
        else:
            blocks.append(block if _small(block) else None)
    if len(content) > BLOCKS_KEPT:
        blocks.append({"type": "omitted", "count": len(content) - BLOCKS_KEPT})
    return blocks


def _slim_tool(tool: Any) -> Any:
    if not isinstance(tool, dict):
        return tool
    return {key: tool[key] for key in ("name", "annotations", "outputSchema", "title") if key in tool}
