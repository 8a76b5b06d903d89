"""Taking secrets out of what a report or an export shows.

Captured traffic carries credentials: Authorization and cookie headers, API
keys in headers and query strings, bearer tokens and fields such as
``access_token`` or ``password`` in bodies. They are replaced by a marker that
keeps the kind and the length, so a reader can still tell "a token was sent"
from "no token". What remains possible (a secret inside free text the user's
tool chose to return) is said in SECURITY notes, not guessed at here.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token"}
)
# A header or field whose name contains one of these holds a secret.
SECRET_WORDS = ("token", "secret", "password", "passwd", "apikey", "api_key", "api-key", "credential", "session_key")
SECRET_FIELDS = frozenset({"authorization", "cookie", "private_key", "client_secret", "sig", "signature"})
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
# key=value or key: value in free text (logs, error messages)
SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b(access_token|refresh_token|token|api[_-]?key|secret|password)([\"']?\s*[=:]\s*[\"']?)([^\s&,;\"']{4,})"
)


def marker(value: str) -> str:
    return f"[redacted {len(value)} chars]"


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return lowered in SECRET_FIELDS or lowered in SECRET_HEADERS or any(w in lowered for w in SECRET_WORDS)


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        if name.lower() in SECRET_HEADERS or is_secret_name(name):
            kind = value.split(" ", 1)[0] if name.lower() in ("authorization", "proxy-authorization") else ""
            out[name] = f"{kind} {marker(value)}".strip() if kind and " " in value else marker(value)
        else:
            out[name] = redact_text(value)
    return out


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if not parts.query and not parts.password:
        return url
    pairs = [part.partition("=") for part in parts.query.split("&")]
    query = "&".join(f"{k}={marker(v)}" if is_secret_name(unquote(k)) else f"{k}{eq}{v}" for k, eq, v in pairs)
    netloc = parts.netloc.replace(parts.password, marker(parts.password)) if parts.password else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Bearer tokens in free text, and secret fields if the text is JSON."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            return json.dumps(redact_json(value), ensure_ascii=False)
    return _redact_free_text(text)


def _redact_free_text(text: str) -> str:
    text = BEARER.sub(lambda m: f"{m.group(1)} {marker(m.group(0))}", text)
    return SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{marker(m.group(3))}", text)


def redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (marker(json.dumps(v)) if is_secret_name(k) and v not in (None, "") else redact_json(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, str):
        # Tools often return JSON as text: look inside it too.
        return redact_text(value) if value.lstrip()[:1] in ("{", "[") else _redact_free_text(value)
    return value
