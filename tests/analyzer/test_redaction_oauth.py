"""Redaction covers OAuth (issue 22, item 7): the authorization code, the PKCE verifier, state, ID tokens and
assertion grants are secrets in every output, by the rules of analyzer/redaction/redact.py, and the look-alikes
(a JSON-RPC error's ``code``, a tool's ``state`` argument, ``progressToken``, ``max_tokens``, discovery
metadata that names ``code`` and ``id_token``) are kept.

Two kinds of rule: names that mean a secret wherever they are met (``code_verifier``, ``client_assertion``,
``device_code``, ``id_token``, ...), and names that are secret only as a parameter (``code``, ``state``,
``assertion``): in a URL's query or fragment (a 302 Location, a callback, a Referer), in a form body (the
token request), and after "?", "&" or "#" in free text.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.analyzer.outputs.har_export import write_har
from mcp_blackbox.analyzer.redaction.redact import (
    PSEUDONYM,
    Pseudonyms,
    is_secret_name,
    is_secret_parameter,
    marker,
    redact_headers,
    redact_json,
    redact_text,
    redact_url,
    secret_parameters,
)
from mcp_blackbox.analyzer.redaction.redactor import AS_CAPTURED, REDACTED
from mcp_blackbox.analyzer.redaction.sanitize import Sanitizer, redact_files
from mcp_blackbox.analyzer.review.report import build_report
from tests.analyzer.flows import error, exchange, result, text_result, tool_call, write

CODE = "SplxlOBeZQQYbYS6WxSbIA"  # RFC 6749's example code
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk~"  # RFC 7636's, with a "~" the form encodes as %7E
VERIFIER_SENT = quote(VERIFIER, safe="")
STATE = "xyz-nonce-42"  # a plain short nonce: redacted too
SIGNED_STATE = "cmV0dXJuPS9ob21lJnVzZXI9NDI.c2lnbmVkLWJ5LXRoZS1jbGllbnQ"  # a payload and a signature
ID_TOKEN = "id-token-of-the-user-0123456789"
ASSERTION = "PHNhbWw6QXNzZXJ0aW9uIElEPSJfMSI-c2FtbC1ncmFudA"  # a SAML grant: no key format would catch it
CLIENT_ASSERTION = "client-assertion-0123456789abcdef"
DEVICE_CODE = "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS"
CLIENT_SECRET = "client-secret-5e7e0abcb7108c5b"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuWjtIkfiiU"  # S256 of the verifier: a hash, kept
CALLBACK = "http://127.0.0.1:9/oauth/callback"
SECRETS = (CODE, VERIFIER, VERIFIER_SENT, STATE, SIGNED_STATE, ID_TOKEN, ASSERTION, CLIENT_ASSERTION, DEVICE_CODE)


def location(code: str = CODE, state: str = STATE) -> str:
    """An authorization response: the 302's Location to the client's callback (RFC 6749 4.1.2, RFC 9207)."""
    return f"{CALLBACK}?code={code}&state={state}&iss=https%3A%2F%2Fas.example"


def token_request(*, code_first: bool = False) -> str:
    """The token request's form body, as the TypeScript SDK sends it (client_secret_post)."""
    params = [
        ("grant_type", "authorization_code"),
        ("code", CODE),
        ("code_verifier", VERIFIER_SENT),
        ("redirect_uri", quote(CALLBACK, safe="")),
        ("client_id", "6b7b6708-b7a5"),
        ("client_secret", CLIENT_SECRET),
    ]
    if code_first:
        params.insert(0, params.pop(1))
    return "&".join(f"{k}={v}" for k, v in params)


def no_secret_in(text: str, *secrets: str) -> None:
    for secret in secrets or SECRETS:
        assert secret not in text, secret


# ---------------------------------------------------------------- the rule table


@pytest.mark.parametrize(
    "name",
    ["code_verifier", "codeVerifier", "client_assertion", "clientAssertion", "device_code", "id_token", "idToken",
     "id_token_hint", "SAMLResponse"],
)  # fmt: skip
def test_oauth_names_that_mean_nothing_else_are_secret_everywhere(name: str) -> None:
    assert is_secret_name(name) and is_secret_parameter(name)
    assert redact_json({name: "v4lue-0123"}) == {name: marker(json.dumps("v4lue-0123"))}
    assert redact_text(f"sent {name}=v4lue-0123 twice") == f"sent {name}={marker('v4lue-0123')} twice"
    assert redact_headers({name: "v4lue-0123"}) == {name: marker("v4lue-0123")}


@pytest.mark.parametrize("name", ["code", "state", "assertion", "Code", "STATE"])
def test_code_state_and_assertion_are_secret_as_parameters_only(name: str) -> None:
    assert is_secret_parameter(name)
    assert not is_secret_name(name)


# Names beside them that are no secret: the kinds and the methods, what discovery says is supported.
KEPT_PARAMETERS = [
    "client_assertion_type", "code_challenge_method", "response_type", "grant_type", "redirect_uri", "client_id",
    "scope", "resource", "iss", "nonce", "error", "error_description", "progressToken", "nextCursor", "cursor",
    "max_tokens", "maxTokens", "token_type", "expires_in", "codeVerified", "statement", "zipcode",
]  # fmt: skip


@pytest.mark.parametrize("name", KEPT_PARAMETERS)
def test_look_alike_parameters_are_kept(name: str) -> None:
    assert not is_secret_parameter(name)
    url = f"https://h/cb?{name}=kept-value-1"
    assert redact_url(url) == url
    assert redact_text(f"redirected to {url}") == f"redirected to {url}"
    assert redact_text(f"a={name}&{name}=kept-value-1") == f"a={name}&{name}=kept-value-1"


def test_pkce_challenge_is_kept_under_s256_and_redacted_when_it_is_the_verifier() -> None:
    """With ``plain`` (or no method: plain is the default, RFC 7636 4.2) the challenge IS the verifier."""
    assert secret_parameters([("code_challenge", CHALLENGE), ("code_challenge_method", "S256")]) == [False, False]
    assert secret_parameters([("code_challenge", VERIFIER), ("code_challenge_method", "plain")]) == [True, False]
    assert secret_parameters([("code_challenge", VERIFIER)]) == [True]
    s256 = f"/authorize?response_type=code&code_challenge={CHALLENGE}&code_challenge_method=S256&client_id=c"
    assert redact_url(s256) == s256
    assert redact_text(f"GET {s256}") == f"GET {s256}"
    plain = f"/authorize?response_type=code&code_challenge={VERIFIER_SENT}&code_challenge_method=plain"
    for shown in (redact_url(plain), redact_text(f"GET {plain}")):
        no_secret_in(shown, VERIFIER_SENT)
        assert "response_type=code" in shown and "code_challenge_method=plain" in shown


# ---------------------------------------------------------------- the authorization response: a 302's Location


def test_code_and_state_are_redacted_in_a_location_and_the_rest_kept() -> None:
    redirect = location()
    expected = f"{CALLBACK}?code={marker(CODE)}&state={marker(STATE)}&iss=https%3A%2F%2Fas.example"
    assert redact_url(redirect) == expected
    assert redact_headers({"Location": redirect, "Referer": redirect}) == {"Location": expected, "Referer": expected}
    assert redact_text(f"302 to {redirect} (followed)") == f"302 to {expected} (followed)"


def test_a_signed_state_is_redacted_like_a_nonce() -> None:
    shown = redact_url(location(state=SIGNED_STATE))
    assert f"state={marker(SIGNED_STATE)}" in shown
    no_secret_in(shown)


def test_a_url_quoted_in_html_or_json_loses_its_code() -> None:
    html = f'<a href="{CALLBACK}?code={CODE}&amp;state={STATE}">continue</a>'
    assert redact_text(html) == f'<a href="{CALLBACK}?code={marker(CODE)}&amp;state={marker(STATE)}">continue</a>'
    answer = {"content": [{"type": "text", "text": f"open {location()}"}], "isError": False}
    no_secret_in(redact_text(json.dumps(answer)))


def test_the_implicit_flows_fragment_is_redacted() -> None:
    """Tokens in a Location's fragment (implicit and hybrid flows): the fragment is read as parameters."""
    redirect = f"{CALLBACK}#access_token=at-0123456789&id_token={ID_TOKEN}&state={STATE}&token_type=Bearer"
    expected = (
        f"{CALLBACK}#access_token={marker('at-0123456789')}&id_token={marker(ID_TOKEN)}&state={marker(STATE)}"
        "&token_type=Bearer"
    )
    assert redact_url(redirect) == expected
    assert redact_headers({"location": redirect}) == {"location": expected}
    for kept in ("https://h/docs#section-2", "https://h/docs#code", "https://h/app#/route"):
        assert redact_url(kept) == kept


def test_an_error_redirect_keeps_what_it_says() -> None:
    redirect = f"{CALLBACK}?error=access_denied&error_description=user+said+no&state={STATE}"
    assert redact_url(redirect) == (
        f"{CALLBACK}?error=access_denied&error_description=user+said+no&state={marker(STATE)}"
    )


# ---------------------------------------------------------------- the token request: a form body


@pytest.mark.parametrize("code_first", [False, True])
def test_the_token_requests_code_and_verifier_are_redacted(code_first: bool) -> None:
    body = token_request(code_first=code_first)
    shown = redact_text(body)
    no_secret_in(shown, CODE, VERIFIER_SENT, CLIENT_SECRET)
    assert f"code={marker(CODE)}" in shown and f"code_verifier={marker(VERIFIER_SENT)}" in shown
    assert "grant_type=authorization_code" in shown and f"redirect_uri={quote(CALLBACK, safe='')}" in shown
    assert "client_id=6b7b6708-b7a5" in shown


@pytest.mark.parametrize(
    "body, secret",
    [
        (f"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={ASSERTION}&scope=mcp",
         ASSERTION),
        (f"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Asaml2-bearer&assertion={ASSERTION}", ASSERTION),
        ("grant_type=client_credentials&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type"
         f"%3Ajwt-bearer&client_assertion={CLIENT_ASSERTION}", CLIENT_ASSERTION),
        (f"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&device_code={DEVICE_CODE}&client_id=c",
         DEVICE_CODE),
        (f"id_token_hint={ID_TOKEN}&post_logout_redirect_uri=https%3A%2F%2Fapp", ID_TOKEN),
        (f"assertion={ASSERTION}&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer", ASSERTION),
    ],
)  # fmt: skip
def test_assertion_and_device_grants_are_redacted(body: str, secret: str) -> None:
    shown = redact_text(body)
    assert secret not in shown and marker(secret) in shown
    assert "grant_type=" in shown or "post_logout_redirect_uri=" in shown
    assert "client_assertion_type=urn%3Aietf" in shown or "client_assertion_type" not in body


def test_the_token_response_and_id_token_are_redacted() -> None:
    answer = {"access_token": "at-1", "id_token": ID_TOKEN, "token_type": "Bearer", "expires_in": 3600}
    assert json.loads(redact_text(json.dumps(answer))) == {
        "access_token": marker('"at-1"'), "id_token": marker(json.dumps(ID_TOKEN)), "token_type": "Bearer",
        "expires_in": 3600,
    }  # fmt: skip


# ---------------------------------------------------------------- look-alikes that must stay


def test_a_json_rpc_errors_code_and_a_tools_state_argument_are_kept() -> None:
    messages: list[Any] = [
        error(1, -32602, "Invalid params: code must be a string"),
        tool_call(2, "run_python"),
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "set_state", "arguments": {
            "code": "print('hi')", "state": "CA", "assertion": "x > 1", "zip_code": "94107",
        }}},
        result(4, text_result("ok", structuredContent={"code": 200, "state": "open", "statusCode": 404})),
        result(5, {"content": [], "nextCursor": "c-2", "_meta": {"progressToken": "p-1"}}),
        {"jsonrpc": "2.0", "id": 6, "method": "sampling/createMessage", "params": {"maxTokens": 512}},
    ]  # fmt: skip
    for message in messages:
        assert redact_json(message) == message
        assert json.loads(redact_text(json.dumps(message))) == message


def test_discovery_metadata_that_names_code_and_id_token_is_kept() -> None:
    metadata = {
        "issuer": "https://as.example", "authorization_endpoint": "https://as.example/authorize",
        "token_endpoint": "https://as.example/token", "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"], "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt"],
        "device_authorization_endpoint": "https://as.example/device",
        "authorization_response_iss_parameter_supported": True,
    }  # fmt: skip
    protected_resource = {"resource": "https://h/mcp", "authorization_servers": ["https://as.example"]}
    assert json.loads(redact_text(json.dumps(protected_resource))) == protected_resource
    assert json.loads(redact_text(json.dumps(metadata))) == metadata


@pytest.mark.parametrize(
    "text",
    [
        "JSON-RPC error code: -32602", "code=-32602", "error code=-32602, retrying", "state: open", "state=closed",
        "HTTP 500 code=internal state=failed", "progressToken=p-1&nextCursor=c-2&max_tokens=512",
        "see https://h/search?q=code&lang=en", "response_type=code&client_id=abc", "tokens used: 512",
    ],
)  # fmt: skip
def test_prose_and_mcp_fields_that_say_code_or_state_are_kept(text: str) -> None:
    assert redact_text(text) == text


# ---------------------------------------------------------------- every output


def oauth_flows() -> list[HTTPFlow]:
    """The authorization request (302 with the code), the token request (code and verifier in a form), and a
    tools/call that fails quoting both (the report and the export show calls)."""
    authorize = exchange(
        None, method="GET", status=302, body=b"", content_type="text/plain", at=1.0,
        path=f"/authorize?response_type=code&client_id=c1&code_challenge={CHALLENGE}&code_challenge_method=S256"
        f"&redirect_uri={quote(CALLBACK, safe='')}&state={STATE}",
        response_headers={"location": location()},
    )  # fmt: skip
    token = exchange(
        token_request().encode(), path="/token", at=2.0,
        request_headers={"content-type": "application/x-www-form-urlencoded"},
        body={"access_token": "at-0123456789abcdef", "id_token": ID_TOKEN, "token_type": "Bearer"},
    )  # fmt: skip
    failed = exchange(
        tool_call(1, "login"), at=3.0, request_headers={"referer": location()},
        body=error(1, -32000, f"redirected to {location()}; then sent {token_request()}"),
    )  # fmt: skip
    return [authorize, token, failed]


def test_the_report_shows_no_oauth_secret_and_the_no_redact_report_shows_them(tmp_path: Path) -> None:
    capture = write(tmp_path, *oauth_flows())
    shown = json.dumps(build_report([capture]))
    no_secret_in(shown, CODE, VERIFIER_SENT, STATE)
    assert "-32000" in shown and "grant_type=authorization_code" in shown
    kept = json.dumps(build_report([capture], redact=False))
    assert CODE in kept and VERIFIER_SENT in kept and STATE in kept


def test_the_export_shows_no_oauth_secret(tmp_path: Path) -> None:
    out = io.StringIO()
    write_json(analyze([write(tmp_path, *oauth_flows())]), out)
    no_secret_in(out.getvalue(), CODE, VERIFIER_SENT, STATE)
    assert REDACTED.text(f"at {location()}") != AS_CAPTURED.text(f"at {location()}") == f"at {location()}"


def test_the_har_redacts_oauth_secrets_in_headers_urls_and_bodies(tmp_path: Path) -> None:
    out = io.StringIO()
    write_har(analyze([write(tmp_path, *oauth_flows())]), out)
    entries = json.loads(out.getvalue())["log"]["entries"]
    authorize, token = entries[0], entries[1]
    no_secret_in(json.dumps(authorize["request"]["url"]), STATE)
    no_secret_in(json.dumps(authorize["response"]["headers"]), CODE, STATE)
    no_secret_in(token["request"]["postData"]["text"], CODE, VERIFIER_SENT, CLIENT_SECRET)
    assert "grant_type=authorization_code" in token["request"]["postData"]["text"]


def test_the_har_redacts_oauth_secrets_in_its_parsed_copies(tmp_path: Path) -> None:
    out = io.StringIO()
    write_har(analyze([write(tmp_path, *oauth_flows())]), out)
    no_secret_in(out.getvalue(), CODE, VERIFIER, VERIFIER_SENT, STATE, CLIENT_SECRET)


def test_a_shared_capture_gives_the_code_one_pseudonym_in_the_location_and_the_token_request(tmp_path: Path) -> None:
    out = tmp_path / "shared.flows"
    with out.open("wb") as f:
        redact_files([write(tmp_path, *oauth_flows())], f)
    data = out.read_bytes().decode("utf-8", "replace")
    no_secret_in(data)
    with out.open("rb") as f:
        authorize, token, _ = (flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow))
    redirect_code = authorize.response.headers["location"].split("code=")[1].split("&")[0]
    form = token.request.urlencoded_form
    assert PSEUDONYM.fullmatch(redirect_code) and form["code"] == redirect_code
    assert PSEUDONYM.fullmatch(form["code_verifier"]) and form["grant_type"] == "authorization_code"
    assert authorize.request.query["state"] == authorize.response.headers["location"].split("state=")[1].split("&")[0]
    assert authorize.request.query["code_challenge"] == CHALLENGE  # S256: a hash, kept
    steps = [{**s, "source": None} for s in analyze([out]).auth_steps]
    assert steps == [{**s, "source": None} for s in analyze([tmp_path / "capture.flows"]).auth_steps]
    assert [s["step"] for s in steps] == ["authorization request", "token exchange"]


def test_the_verifier_gets_one_pseudonym_whether_sent_encoded_or_quoted_decoded() -> None:
    names = Pseudonyms(b"k")
    sanitizer = Sanitizer(names)
    copy = sanitizer.copy(oauth_flows()[1])
    assert copy is not None
    assert copy.request.urlencoded_form["code_verifier"] == names.of(VERIFIER)
    assert names.scrub(f"the verifier {VERIFIER} again") == f"the verifier {names.of(VERIFIER)} again"
