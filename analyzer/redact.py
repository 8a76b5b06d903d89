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

# One rule for every place a name is met (header, JSON member, query parameter, "name=value" in free text), on
# the name lower-cased without "-" and "_". A name is secret when
# - it holds one of SECRET_WORDS anywhere ("password", "api_keys", "credentials_json", "private_key_pem"):
#   no MCP or LLM field uses these words for something else;
# - or it ends with "token" or "tokens", or one of SECRET_SUFFIXES, or is one of SECRET_NAMES;
# unless NOT_SECRET has it. "token" only at the end: it is also how MCP and LLM APIs name things that are no
# secret (progressToken, token counts), and redacting those destroys what the report is for.
SECRET_WORDS = (
    "secret", "password", "passwd", "passphrase", "credential", "apikey", "accesskey", "secretkey", "privatekey",
    "sessionkey", "signingkey", "subscriptionkey", "authorization", "cookie",
)  # fmt: skip
SECRET_SUFFIXES = ("token", "tokens", "signature", "signatures")
SECRET_NAMES = frozenset({
    "sig",  # presigned URLs (Azure SAS "sig=", signed query strings): the signature is the credential
    "pwd",  # ODBC connection strings ("Pwd=") in error text; a directory would be "cwd" or "path"
    "jwt",
})  # fmt: skip
# Names that end like a secret but are none. Not needed, because nothing catches them: "tokenType" /
# "token_type" (says "Bearer", not which one), "nextCursor". Bare "key", "sessionId" and Mcp-Session-Id are no
# secret names either: "key" is any key (idempotency, cache, sort), and the session id is how the report tells
# sessions apart.
NOT_SECRET = frozenset({
    "progresstoken",  # MCP: pairs progress notifications with the request they report on
    "pagetoken", "nextpagetoken", "prevpagetoken", "previouspagetoken", "paginationtoken", "continuationtoken",
    "nexttoken", "synctoken", "nextsynctoken",  # pagination and sync cursors: opaque positions, not access
})  # fmt: skip
# Token counts (MCP sampling's maxTokens, LLM usage records): numbers, not credentials.
TOKEN_COUNTS = (
    "maxtokens", "inputtokens", "outputtokens", "totaltokens", "prompttokens", "completiontokens",
    "reasoningtokens", "cachedtokens", "audiotokens", "texttokens", "imagetokens", "numtokens", "counttokens",
)  # fmt: skip
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
# key=value or key: value in free text (logs, error messages), and "key": "value" in JSON that is only text
# here: the analyzer cuts a tool's answer after 100 characters, and quotes it with repr() in the evidence.
# The whole name is taken (client_secret, x-api-key, --password) and judged by is_secret_name, as in JSON.
NAME_AND_SEPARATOR = re.compile(r"""(?<![\w-])([\w-]++)(["']?\s*[=:]\s*)""")
# A quoted value is taken whole, whatever it holds, up to its closing quote (a backslash, or a run of them,
# escapes the next character) or the end of a cut text; a bare one up to a space or a separator.
SECRET_VALUE = re.compile(r"""(?s)(["'])((?:\\+.|(?!\1)[^\\])*)(?:\1|\\*$)|([^\s&,;"']{4,})""")
# "Authorization: Bearer x" in free text: BEARER took the token and kept the scheme, as redact_headers does.
# Only a value that is nothing else: what follows the marker in the same value is redacted with it.
SCHEME_REDACTED = re.compile(r"""(["'])?(?i:bearer|basic) \[redacted \d+ chars\](?(1)(?:\1|$)|(?=[\s&,;"']|$))""")


def marker(value: str) -> str:
    return f"[redacted {len(value)} chars]"


def is_secret_name(name: str) -> bool:
    normal = name.lower().replace("-", "").replace("_", "")
    if normal in NOT_SECRET or normal.endswith(TOKEN_COUNTS):
        return False
    return normal in SECRET_NAMES or normal.endswith(SECRET_SUFFIXES) or any(w in normal for w in SECRET_WORDS)


def redact_strings(record: dict[str, Any]) -> dict[str, Any]:
    """A flat record whose text fields a peer chose (a User-Agent, a clientInfo name), each redacted."""
    return {k: redact_text(v) if isinstance(v, str) else v for k, v in record.items()}


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        if is_secret_name(name):
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
    # A loop, not re.sub: after a name that is no secret the search goes on right after its separator, so a
    # secret inside its value ("url=https://h/?token=...", 'error: "access_token=..."') is still found, and
    # no value is read twice.
    out = []
    done = position = 0
    while match := NAME_AND_SEPARATOR.search(text, position):
        position = match.end()
        if not is_secret_name(match.group(1)):
            continue
        if kept := SCHEME_REDACTED.match(text, position):
            position = kept.end()
            continue
        if value := SECRET_VALUE.match(text, position):
            quote, quoted, bare = value.groups()
            out.append(text[done:position])
            out.append(f"{quote}{marker(quoted)}{quote}" if quote is not None else marker(bare))
            done = position = value.end()
    out.append(text[done:])
    return "".join(out)


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
