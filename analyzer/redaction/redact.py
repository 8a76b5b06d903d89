"""Taking secrets out of what a report or an export shows.

Captured traffic carries credentials: Authorization and cookie headers, API
keys in headers and query strings, bearer tokens and fields such as
``access_token`` or ``password`` in bodies. They are replaced by a marker that
keeps the kind and the length, so a reader can still tell "a token was sent"
from "no token". OAuth's flow around the calls too: the authorization code and
``state`` as parameters (a 302's Location, a token request's form body), the
PKCE verifier, ID tokens and assertion grants. What remains possible (a secret
inside free text the user's tool chose to return) is said in SECURITY notes,
not guessed at here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Sequence
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
    # OAuth and OpenID Connect names that mean nothing else (id_token, subject_token, ... end with "token"):
    "codeverifier",  # PKCE (RFC 7636): with the authorization code, it buys the tokens
    "clientassertion",  # a client's signed credential (RFC 7521/7523); client_assertion_type, its kind, is kept
    "devicecode",  # device grant (RFC 8628): the device polls the token endpoint with it
    "idtokenhint",  # an ID token sent back to the server (logout, re-authentication)
    "samlresponse",  # a SAML assertion posted to the client: a bearer credential
})  # fmt: skip
# OAuth's parameters that are secret only as parameters: in a URL's query or fragment (the authorization
# response's 302 Location, the callback URL, a Referer), in an application/x-www-form-urlencoded body (the token
# request), and after "?", "&" or "#" and before "=" in free text (a URL quoted in a log or an error). Elsewhere
# the names mean something else and are kept: in JSON "code" is a JSON-RPC error's code, "state" and
# "assertion" a tool's arguments; in prose "error code: -32602", "state: open".
# - code: the authorization code (RFC 6749 4.1.2), exchanged for tokens (grant_type=authorization_code);
# - assertion: a JWT or SAML bearer grant's credential (RFC 7521/7522/7523);
# - state: always, whatever it looks like. A server or client may put a signed or encrypted payload there
#   (a return URL, a user or tenant id, a nonce signed with its key), and nothing outside tells it from a plain
#   nonce by its look: a rule on length or alphabet would show a short signed blob or a base64 JSON payload.
#   Even a plain nonce is the CSRF binding of a flow in progress (RFC 6749 10.12). Nothing is lost: whether the
#   callback carried the state the request sent still reads from a redacted capture (one pseudonym per
#   value), from the HAR (numbered markers) and from the markers' lengths.
PARAMETER_SECRETS = frozenset({"code", "state", "assertion"})
# PKCE's challenge is the verifier itself when its method is "plain", or absent (RFC 7636 4.2): then secret too.
# With S256 (which MCP requires) it is a hash, and kept.
PKCE_CHALLENGE, PKCE_METHOD = "codechallenge", "codechallengemethod"
# Names that end like a secret but are none. Not needed, because nothing catches them: "tokenType" /
# "token_type" (says "Bearer", not which one), "nextCursor". Bare "key", "sessionId" and Mcp-Session-Id are no
# secret names either: "key" is any key (idempotency, cache, sort), and the session id is how the report tells
# sessions apart.
NOT_SECRET = frozenset({
    "progresstoken",  # MCP: pairs progress notifications with the request they report on
    "pagetoken", "nextpagetoken", "prevpagetoken", "previouspagetoken", "paginationtoken", "continuationtoken",
    "nexttoken", "synctoken", "nextsynctoken",  # pagination and sync cursors: opaque positions, not access
    "authorizationservers", "authorizationserver",  # protected-resource metadata (RFC 9728): where, no token
})  # fmt: skip
# OAuth discovery metadata (RFC 8414, OpenID Connect Discovery) names endpoints and what is supported, never a
# secret, though "authorization" is in many of its names (authorization_endpoint, ..._iss_parameter_supported).
NOT_SECRET_SUFFIXES = ("endpoint", "supported")
# Token counts (MCP sampling's maxTokens, LLM usage records): numbers, not credentials.
TOKEN_COUNTS = (
    "maxtokens", "inputtokens", "outputtokens", "totaltokens", "prompttokens", "completiontokens",
    "reasoningtokens", "cachedtokens", "audiotokens", "texttokens", "imagetokens", "numtokens", "counttokens",
)  # fmt: skip
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+([A-Za-z0-9._~+/=-]{6,})")
# key=value or key: value in free text (logs, error messages), and "key": "value" in JSON that is only text
# here: the analyzer cuts a tool's answer after 100 characters, and quotes it with repr() in the evidence.
# The whole name is taken (client_secret, x-api-key, --password) and judged by is_secret_name, as in JSON.
NAME_AND_SEPARATOR = re.compile(r"""(?<![\w-])([\w-]++)(["']?\s*[=:]\s*)""")
# A parameter's value in a URL quoted in free text: up to the next parameter, the fragment, a space or a quote.
QUERY_VALUE = re.compile(r"""[^\s&#"'<>\\]+""")
# A text that is a whole query string or form body ("grant_type=authorization_code&code=..."): its first name
# is a parameter too, though no "?" or "&" comes before it. One "&" at least: "code=-32602" alone is prose.
FORM = re.compile(r"[\w.~%+*-]+=[^\s&]*&\S*")
S256 = re.compile(r"(?i)code_challenge_method=S256(?![\w-])")
# A quoted value is taken whole, whatever it holds, up to its closing quote (a backslash, or a run of them,
# escapes the next character) or the end of a cut text; a bare one up to a space or a separator.
SECRET_VALUE = re.compile(r"""(?s)(["'])((?:\\+.|(?!\1)[^\\])*)(?:\1|\\*$)|([^\s&,;"']{4,})""")
# "Authorization: Bearer x" in free text: BEARER took the token and kept the scheme, as redact_headers does.
# Only a value that is nothing else: what follows the marker in the same value is redacted with it.
SCHEME_REDACTED = re.compile(r"""(["'])?(?i:bearer|basic) \[redacted \d+ chars\](?(1)(?:\1|$)|(?=[\s&,;"']|$))""")
# Credentials that say what they are without a name before them: a provider's key pasted into a prompt or
# returned by a tool. Only formats with a fixed prefix and a long random tail, so that prose never matches:
# OpenAI and Anthropic keys, GitHub tokens, Slack tokens, AWS access key ids, Google API keys, Stripe keys, JWTs.
SELF_EVIDENT = re.compile(
    r"(?<![\w-])(?:"
    r"sk-[A-Za-z0-9_-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")(?![\w-])"
)
# The names a session id goes by: the Mcp-Session-Id header, and the legacy HTTP+SSE transport's query parameter
# (also in its endpoint event's URL). Kept by the report; given a pseudonym by a capture's sanitizer.
SESSION_NAMES = frozenset({"mcpsessionid", "sessionid"})


def marker(value: str) -> str:
    return f"[redacted {len(value)} chars]"


class Mask:
    """How a secret is shown. This one, for reports and exports: a marker that keeps its length."""

    shown_credential = SCHEME_REDACTED  # "Bearer <what this mask made>", not to be redacted again in free text
    masks_sessions = False  # session ids are kept: the report tells sessions apart by them

    def secret(self, value: str) -> str:
        return marker(value)

    def credential(self, scheme: str, token: str, whole: str) -> str:
        """``whole``: the credential as written, the scheme included."""
        return f"{scheme} {marker(whole)}"

    def query_value(self, raw: str) -> str:
        """A query parameter's value, as sent (percent-encoded)."""
        return marker(raw)

    def cookies(self, header: str, value: str) -> str:
        """A Cookie or Set-Cookie header's value."""
        return marker(value)

    def json_value(self, value: Any) -> str:
        return marker(json.dumps(value))

    def session(self, value: str) -> str:
        return value

    def dump_json(self, redacted: Any, original: Any, text: str) -> str:
        """JSON text that was read as ``original`` and redacted to ``redacted``."""
        return json.dumps(redacted, ensure_ascii=False)

    def finish(self, text: str) -> str:
        """Free text after the rules: nothing more to do here."""
        return text


MARKERS = Mask()
PSEUDONYM = re.compile(r"REDACTED-[0-9a-f]{8,64}")
KNOWN_MIN_LENGTH = 8  # a secret this long is also looked for in any text; a shorter one only where it is named
# At most this many secrets are looked for in any text (a recorder left running meets new tokens all day; past
# this, new ones are still replaced wherever their name shows them).
KNOWN_MAX = 5_000


class Pseudonyms(Mask):
    """Consistent stand-ins, for a capture that is shared: the same secret always gets the same pseudonym
    (``REDACTED-`` and 8 hex digits of an HMAC-SHA256 under a key made for this run), a different secret a
    different one, so what matched still matches (credentials changed after a 401, one session's exchanges,
    a token sent in a header and echoed in a body) and nothing else is told. The key is never written: without
    it a pseudonym cannot be checked against a guess, not even for a short password.

    Every secret of ``KNOWN_MIN_LENGTH`` characters or more that was found by its name (a header, a JSON
    member, ``name=value``) is then replaced wherever else it appears as text, a tool echoing a password
    back in its answer for one (up to ``KNOWN_MAX`` of them). Session ids get pseudonyms too, a server may take
    one as a credential; they are found by their names only.
    """

    shown_credential = re.compile(
        r"""(["'])?(?i:bearer|basic) (?:\[redacted \d+ chars\]|REDACTED-[0-9a-f]{8,64})(?(1)(?:\1|$)|(?=[\s&,;"']|$))"""
    )
    masks_sessions = True

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self._names: dict[str, str] = {}  # secret -> pseudonym
        self._owners: dict[str, str] = {}  # pseudonym -> secret: a clash of 8 hex digits takes more digits
        self._known: dict[str, str] = {}  # the secrets looked for in any text
        self._pattern: re.Pattern[str] | None = None
        self._bytes_pattern: re.Pattern[bytes] | None = None

    def of(self, value: str, *, anywhere: bool = True) -> str:
        """The pseudonym of ``value``; a pseudonym (a capture redacted before) and nothing stay as they are.
        ``anywhere``: also replace ``value`` wherever it appears as text from now on."""
        if not value or PSEUDONYM.fullmatch(value):
            return value
        if (known := self._names.get(value)) is not None:
            if anywhere:
                self._look_for(value, known)
            return known
        digest = hmac.new(self._key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        width = 8
        while (name := f"REDACTED-{digest[:width]}") in self._owners:
            width += 4  # two secrets, one pseudonym: never (64 digits do not clash)
        self._names[value] = name
        self._owners[name] = value
        if anywhere:
            self._look_for(value, name)
        return name

    def _look_for(self, value: str, name: str) -> None:
        if len(value) >= KNOWN_MIN_LENGTH and value not in self._known and len(self._known) < KNOWN_MAX:
            self._known[value] = name
            self._pattern = self._bytes_pattern = None

    def secret(self, value: str) -> str:
        return self.of(value)

    def credential(self, scheme: str, token: str, whole: str) -> str:
        return f"{scheme} {self.of(token)}"

    def query_value(self, raw: str) -> str:
        return self.of(unquote(raw))

    def cookies(self, header: str, value: str) -> str:
        """Each cookie's value its own pseudonym, the names and a Set-Cookie's attributes kept: the session
        cookie a server set is the one the client sends back."""
        if header == "set-cookie":
            first, semicolon, attributes = value.partition(";")
            name, eq, cookie = first.partition("=")
            return f"{name}{eq}{self.of(cookie.strip())}{semicolon}{attributes}" if eq else self.of(value)
        pairs = [pair.partition("=") for pair in value.split(";")]
        return ";".join(f"{name}={self.of(cookie.strip())}" if eq else self.of(name) for name, eq, cookie in pairs)

    def json_value(self, value: Any) -> str:
        if isinstance(value, str):
            return self.of(value)
        return self.of(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))

    def session(self, value: str) -> str:
        # Found by name only (the header, the query, "session_id=" in the endpoint event): a recorder meets a
        # new session every few seconds, and each would lengthen the search every text goes through.
        return self.of(value, anywhere=False)

    def dump_json(self, redacted: Any, original: Any, text: str) -> str:
        return text if redacted == original else dump_json_like(redacted, text)

    def finish(self, text: str) -> str:
        return self.scrub(text)

    def scrub(self, text: str) -> str:
        """Every secret found so far, wherever it appears in ``text``, replaced by its pseudonym."""
        if not self._known:
            return text
        if self._pattern is None:
            self._pattern = re.compile("|".join(map(re.escape, sorted(self._known, key=len, reverse=True))))
        return self._pattern.sub(lambda m: self._known[m.group(0)], text)

    def scrub_bytes(self, data: bytes) -> bytes:
        """As ``scrub``, in bytes that are not text (their UTF-8 spelling)."""
        if not self._known:
            return data
        if self._bytes_pattern is None:
            spelled = sorted((v.encode("utf-8", "surrogatepass") for v in self._known), key=len, reverse=True)
            self._bytes_pattern = re.compile(b"|".join(map(re.escape, spelled)))
        names = {k.encode("utf-8", "surrogatepass"): v.encode() for k, v in self._known.items()}
        return self._bytes_pattern.sub(lambda m: names[m.group(0)], data)


def dump_json_like(value: Any, text: str) -> str:
    """``value`` as JSON in the spacing ``text`` used: compact as SDKs send it, or with ", " and ": "."""
    separators = (", ", ": ") if re.search(r'":\s', text) else (",", ":")
    try:
        dumped = json.dumps(value, ensure_ascii=False, separators=separators)
        dumped.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a JSON "\ud800"): kept as an escape
        dumped = json.dumps(value, separators=separators)
    return dumped


def is_session_name(name: str) -> bool:
    return name.lower().replace("-", "").replace("_", "") in SESSION_NAMES


def _normal(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def is_secret_name(name: str) -> bool:
    """Whether a value under this name is secret wherever the name is met (header, JSON member, parameter,
    ``name=value`` in free text)."""
    normal = _normal(name)
    if normal in NOT_SECRET or normal.endswith(TOKEN_COUNTS) or normal.endswith(NOT_SECRET_SUFFIXES):
        return False
    return normal in SECRET_NAMES or normal.endswith(SECRET_SUFFIXES) or any(w in normal for w in SECRET_WORDS)


def is_secret_parameter(name: str, *, plain_pkce: bool = False) -> bool:
    """Whether a parameter of a query string or a form body under this name is secret: by the name rule, or as
    one of OAuth's ``PARAMETER_SECRETS``. ``plain_pkce``: the same parameters carry no
    ``code_challenge_method=S256``, so a ``code_challenge`` is the verifier itself."""
    normal = _normal(name)
    return is_secret_name(name) or normal in PARAMETER_SECRETS or (plain_pkce and normal == PKCE_CHALLENGE)


def secret_parameters(pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """For each (name, value) of one query string or form body, names and values decoded: whether its value
    is secret. What the HAR's ``queryString`` and ``postData.params`` are judged by, as the query itself."""
    plain_pkce = not any(_normal(name) == PKCE_METHOD and value.strip().upper() == "S256" for name, value in pairs)
    return [is_secret_parameter(name, plain_pkce=plain_pkce) for name, _ in pairs]


def redact_strings(record: dict[str, Any]) -> dict[str, Any]:
    """A flat record whose text fields a peer chose (a User-Agent, a clientInfo name), each redacted."""
    return {k: redact_text(v) if isinstance(v, str) else v for k, v in record.items()}


def redact_headers(headers: dict[str, str], mask: Mask = MARKERS) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        if is_secret_name(name):
            kind = value.split(" ", 1)[0] if name.lower() in ("authorization", "proxy-authorization") else ""
            if kind and " " in value:
                out[name] = mask.credential(kind, value.split(" ", 1)[1].strip(), value)
            elif name.lower() in ("cookie", "set-cookie"):
                out[name] = mask.cookies(name.lower(), value)
            else:
                out[name] = mask.secret(value)
        elif mask.masks_sessions and is_session_name(name):
            out[name] = mask.session(value)
        else:
            out[name] = redact_text(value, mask)
    return out


def redact_url(url: str, mask: Mask = MARKERS) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL urllib reads (a captured path "x[y" runs into the host): the query alone
        base, mark, query = url.partition("?")
        return base + mark + _redact_query(query, mask)
    # A fragment of parameters: the implicit flow's "#access_token=...&state=..." in a Location.
    fragment_params = "=" in parts.fragment
    if not parts.query and not parts.password and not fragment_params:
        return url
    query = _redact_query(parts.query, mask)
    fragment = _redact_query(parts.fragment, mask) if fragment_params else parts.fragment
    netloc = parts.netloc.replace(parts.password, mask.secret(parts.password)) if parts.password else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_query(query: str, mask: Mask = MARKERS) -> str:
    """A query string or a form body, as sent (percent-encoded): each parameter judged by
    ``secret_parameters``."""

    def one(k: str, eq: str, v: str, secret: bool) -> str:
        if secret and eq:  # a bare name ("?code") has no value to hide, and stays as it is
            return f"{k}={mask.query_value(v)}"
        if mask.masks_sessions and is_session_name(unquote(k)) and v:
            return f"{k}={mask.session(unquote(v))}"
        return f"{k}{eq}{v}"

    pairs = [part.partition("=") for part in query.split("&")] if query else []
    secret = secret_parameters([(_unquote_form(k), _unquote_form(v)) for k, _, v in pairs])
    return "&".join(one(k, eq, v, s) for (k, eq, v), s in zip(pairs, secret, strict=True))


def _unquote_form(raw: str) -> str:
    return unquote(raw.replace("+", " "))


def redact_text(text: str, mask: Mask = MARKERS) -> str:
    """Bearer tokens in free text, and secret fields if the text is JSON."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            pass
        else:
            try:
                return mask.dump_json(redact_json(value, mask), value, text)
            except RecursionError:  # nested deeper than redaction goes: shown as nothing, not unredacted
                return marker(text)
    return _redact_free_text(text, mask)


def _redact_free_text(text: str, mask: Mask = MARKERS) -> str:
    text = BEARER.sub(lambda m: mask.credential(m.group(1), m.group(2), m.group(0)), text)
    # A loop, not re.sub: after a name that is no secret the search goes on right after its separator, so a
    # secret inside its value ("url=https://h/?token=...", 'error: "access_token=..."') is still found, and
    # no value is read twice.
    out = []
    done = position = 0
    form = FORM.fullmatch(text) is not None
    plain_pkce: bool | None = None  # whether the text says code_challenge_method=S256: looked up when needed
    while match := NAME_AND_SEPARATOR.search(text, position):
        position = match.end()
        name = match.group(1)
        start = match.start()
        # After "?", "&" (or "&amp;" in HTML) or "#": a URL's parameter; at the start: a form's first one.
        parameter = match.group(2) == "=" and (
            (text[start - 1] in "?&#" or text.endswith("&amp;", 0, start)) if start else form
        )
        if parameter and plain_pkce is None and _normal(name) == PKCE_CHALLENGE:
            plain_pkce = S256.search(text) is None
        secret = is_secret_parameter(name, plain_pkce=bool(plain_pkce)) if parameter else is_secret_name(name)
        if not (secret or (mask.masks_sessions and is_session_name(name))):
            continue
        if kept := mask.shown_credential.match(text, position):
            position = kept.end()
            continue
        if parameter and (in_query := QUERY_VALUE.match(text, position)):
            # A parameter's value as sent: the same pseudonym as in a query string or a form body.
            out.append(text[done:position])
            out.append(mask.query_value(in_query.group(0)) if secret else mask.session(unquote(in_query.group(0))))
            done = position = in_query.end()
        elif value := SECRET_VALUE.match(text, position):
            quote, quoted, bare = value.groups()
            hide = mask.secret if secret else mask.session
            out.append(text[done:position])
            out.append(f"{quote}{hide(quoted)}{quote}" if quote is not None else hide(bare))
            done = position = value.end()
    out.append(text[done:])
    # Last: a marker or pseudonym put in above is no key of any format, and is not taken again.
    return mask.finish(SELF_EVIDENT.sub(lambda m: mask.secret(m.group(0)), "".join(out)))


def redact_json(value: Any, mask: Mask = MARKERS) -> Any:
    if isinstance(value, dict):
        return {
            k: (mask.json_value(v) if is_secret_name(k) and v not in (None, "") else redact_json(v, mask))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_json(v, mask) for v in value]
    if isinstance(value, str):
        # Tools often return JSON as text: look inside it too.
        return redact_text(value, mask) if value.lstrip()[:1] in ("{", "[") else _redact_free_text(value, mask)
    return value
