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
# key=value or key: value in free text (logs, error messages), and "key": "value" in JSON that is only text
# here: the analyzer cuts a tool's answer after 100 characters, and quotes it with repr() in the evidence.
# The name may end a longer one (client_secret); a quoted value is taken whole, whatever it holds, up to its
# closing quote (a backslash, or a run of them, escapes the next character) or the end of a cut text.
SECRET_ASSIGNMENT = re.compile(
    r"""(?is)(?<![a-z0-9])(access_token|refresh_token|token|api[_-]?key|secret|password)(["']?\s*[=:]\s*)"""
    r"""(?:(["'])((?:\\+.|(?!\3)[^\\])*)(?:\3|\\*$)|([^\s&,;"']{4,}))"""
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
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL urllib reads (a captured path "x[y" runs into the host): the query alone
        base, mark, query = url.partition("?")
        return base + mark + _redact_query(query)
    if not parts.query and not parts.password:
        return url
    query = _redact_query(parts.query)
    netloc = parts.netloc.replace(parts.password, marker(parts.password)) if parts.password else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_query(query: str) -> str:
    pairs = [part.partition("=") for part in query.split("&")] if query else []
    return "&".join(f"{k}={marker(v)}" if is_secret_name(unquote(k)) else f"{k}{eq}{v}" for k, eq, v in pairs)


def redact_text(text: str) -> str:
    """Bearer tokens in free text, and secret fields if the text is JSON."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            pass
        else:
            try:
                return json.dumps(redact_json(value), ensure_ascii=False)
            except RecursionError:  # nested deeper than redaction goes: shown as nothing, not unredacted
                return marker(text)
    return _redact_free_text(text)


def _redact_free_text(text: str) -> str:
    text = BEARER.sub(lambda m: f"{m.group(1)} {marker(m.group(0))}", text)
    return SECRET_ASSIGNMENT.sub(_redact_assignment, text)


def _redact_assignment(match: re.Match[str]) -> str:
    name, separator, quote, quoted, bare = match.groups()
    if quote is not None:
        return f"{name}{separator}{quote}{marker(quoted)}{quote}"
    return f"{name}{separator}{marker(bare)}"


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
