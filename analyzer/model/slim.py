"""What of a JSON-RPC message the analysis keeps once it has been read.

A capture of 100,000 calls does not fit in memory as parsed JSON. As soon as a
message is parsed it is reduced to the facts that pairing, verdicts and retries
read: the tool name, progress and cancel references, the protocol version in
``_meta``, digests of what a retry would repeat, the shape of a result with the
start of its text, and an error's code and message. Only the few results the
whole capture depends on (``tools/list``, ``initialize``) keep a body.
``analyze(..., keep_details=True)`` keeps every message whole as well.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from typing import Any

from mcp_blackbox.analyzer.model.pickling import pickled_by_fields

TEXT_LIMIT = 100  # characters of text kept
SMALL = 4096  # bytes of JSON below which a value is kept whole
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_META = "io.modelcontextprotocol/clientInfo"
# W3C Trace Context in _meta (SEP-414): kept as sent, up to the lengths a propagator reads; checked by its reader
# (analyzer/outputs/otlp.py).
TRACEPARENT, TRACESTATE = "traceparent", "tracestate"
TRACEPARENT_LIMIT, TRACESTATE_LIMIT = 512, 8192


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        # Pickled by name (a worker process sends results back): unpickled as this module's own marker, so
        # the verdicts' identity checks (`is MISSING`) hold across processes.
        return self.name


MISSING: Any = _Marker("MISSING")  # the member is absent
OMITTED: Any = _Marker("OMITTED")  # present, but too large to keep


def digest(value: Any) -> str:
    """A stable digest of a JSON value (key order does not matter)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(canonical.encode(), digest_size=12).hexdigest()


def interned(value: Any) -> Any:
    """Short strings recur in every message ("2.0", method and tool names): keep one copy."""
    return sys.intern(value) if isinstance(value, str) and len(value) < 64 else value


def _small(value: Any) -> bool:
    return len(json.dumps(value, default=str)) <= SMALL


def reference(value: Any) -> str | None:
    """An id or token as a key: 1 and "1" are different in JSON-RPC."""
    return None if value is None else f"{type(value).__name__}:{value}"


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class RequestFacts:
    tool: str | None  # the tool a tools/call names
    token: str | None  # its progress token, as a reference
    version: str | None  # the protocol version in its _meta (2026-07-28)
    digest: str  # of params without _meta: what a retry repeats
    round_digest: str | None  # of inputResponses/requestState: links MRTR rounds
    client: str | None = None  # clientInfo "name/version", from initialize or 2026 _meta
    target: str | None = None  # the prompt a prompts/get names, or the URI a resources/* request names
    trace: tuple[str, str | None] | None = None  # _meta's traceparent and its tracestate, as sent


def request_facts(method: str, params: Any) -> RequestFacts:
    if not isinstance(params, dict):
        return RequestFacts(None, None, None, digest(params), None)
    meta = given if isinstance(given := params.get("_meta"), dict) else {}
    name = params.get("name")
    rounds = {k: params[k] for k in ("inputResponses", "requestState") if k in params}
    version = meta.get(VERSION_META)
    return RequestFacts(
        tool=interned(name) if method == "tools/call" and isinstance(name, str) else None,
        token=reference(meta.get("progressToken")),
        version=interned(version) if isinstance(version, str) else None,
        digest=digest({k: v for k, v in params.items() if k != "_meta"}),
        round_digest=digest(rounds) if rounds else None,
        client=_client(params.get("clientInfo") if method == "initialize" else meta.get(CLIENT_META)),
        target=_target(method, params),
        trace=_trace(meta),
    )


def _trace(meta: dict[str, Any]) -> tuple[str, str | None] | None:
    """_meta's W3C trace context as sent (strings, not too long); whether it is valid is not judged here."""
    parent, state = meta.get(TRACEPARENT), meta.get(TRACESTATE)
    if not isinstance(parent, str) or len(parent) > TRACEPARENT_LIMIT:
        return None
    return parent, state if isinstance(state, str) and len(state) <= TRACESTATE_LIMIT else None


def _target(method: str, params: dict[str, Any]) -> str | None:
    """What a prompt or resource request is about: its name or URI (cut: a URI may be long)."""
    key = "name" if method == "prompts/get" else "uri" if method.startswith("resources/") else None
    value = params.get(key) if key else None
    return value[:TEXT_LIMIT] if isinstance(value, str) else None


def _client(info: Any) -> str | None:
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    return interned(f"{info['name']}/{info.get('version', '?')}")


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ResultShape:
    """A result as the verdict reads it."""

    kind: str  # JSON type of the result: object, array, string, ...
    result_type: Any  # the raw resultType, or MISSING
    content: Any  # "array" with content_count, or the raw value when not an array, or MISSING
    content_count: int
    first_text: str | None  # start of the first text block
    is_error: Any  # the raw isError, or MISSING
    structured: Any  # structuredContent, MISSING, or OMITTED when too large
    reads_like_error: bool = False  # the first text is an error object or message (judged on all of it)


def json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def result_shape(result: Any) -> ResultShape:
    if not isinstance(result, dict):
        return ResultShape(json_kind(result), MISSING, MISSING, 0, None, MISSING, MISSING)
    content = result.get("content", MISSING)
    text = None
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                text = block["text"]
                break
    structured = result.get("structuredContent", MISSING)
    if structured is not MISSING and not _small(structured):
        structured = OMITTED
    return ResultShape(
        kind="object",
        result_type=interned(result.get("resultType", MISSING)),
        content="array" if isinstance(content, list) else (content if _small(content) else OMITTED),
        content_count=len(content) if isinstance(content, list) else 0,
        first_text=text[:TEXT_LIMIT] if text is not None else None,
        is_error=result.get("isError", MISSING),
        structured=structured,
        reads_like_error=text is not None and reads_like_error(text),
    )


def reads_like_error(text: str) -> bool:
    """A success whose text is an error object or an error message (the soft-error channel)."""
    stripped = text.strip()
    if stripped[:1] == "{":
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            return False
        if isinstance(value, dict):
            keys = {k.lower() for k in value}
            return "error" in keys or ("code" in keys and "message" in keys) or value.get("ok") is False
        return False
    lowered = stripped[:40].lower()
    return lowered.startswith(("error:", "error ", "exception", "traceback", "failed:"))


def error_facts(error: dict[str, Any]) -> tuple[int, str]:
    return error["code"], interned(error["message"][: TEXT_LIMIT * 2])


def capture_wide_body(result: Any) -> dict[str, Any] | None:
    """The part of a result that every call's verdict may need: tools and the negotiated version."""
    if not isinstance(result, dict):
        return None
    kept: dict[str, Any] = {}
    if isinstance(result.get("tools"), list):
        kept["tools"] = [
            {k: tool[k] for k in ("name", "annotations", "outputSchema", "title") if k in tool}
            for tool in result["tools"]
            if isinstance(tool, dict)
        ]
    if isinstance(result.get("protocolVersion"), str):
        kept["protocolVersion"] = result["protocolVersion"]
    server = result.get("serverInfo")
    if isinstance(server, dict) and isinstance(server.get("name"), str):
        kept["serverInfo"] = {"name": server["name"], "version": str(server.get("version", ""))[:40]}
    if not kept:
        return None
    # Clients list the same tools again and again: keep one copy of each distinct answer.
    return _SHARED.setdefault(digest(kept), {"result": kept}) if len(_SHARED) < 1024 else {"result": kept}


_SHARED: dict[str, dict[str, Any]] = {}
