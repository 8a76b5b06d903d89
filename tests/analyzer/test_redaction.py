"""Redaction keeps MCP and LLM-API fields that only end like a secret, and still takes out every secret.

One name rule (analyzer/redaction/redact.py, ``is_secret_name``) decides for headers, JSON members, query parameters
and ``name=value`` / ``"name": "value"`` in free text, so each place is checked with the same names.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.analyzer.redaction.redact import (
    is_secret_name,
    marker,
    redact_headers,
    redact_json,
    redact_text,
    redact_url,
)
from mcp_blackbox.analyzer.review.report import build_report
from tests.analyzer.flows import error, exchange, result, rpc, sse, text_result, tool_call, write

# Fields of MCP (progress, pagination) and LLM APIs (sampling, usage) that are no secret.
KEPT_NAMES = [
    "progressToken", "progress_token", "maxTokens", "max_tokens", "input_tokens", "output_tokens",
    "nextPageToken", "next_page_token", "pageToken", "page_token", "continuationToken", "nextCursor",
    "tokenType", "token_type", "total_tokens", "maxOutputTokens",
]  # fmt: skip
SECRET_NAMES = [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-API-Key", "api-key", "api_key", "apiKey",
    "x-auth-token", "access_token", "accessToken", "refresh_token", "id_token", "authToken", "csrf_token",
    "client_secret", "password", "passwd", "private_key", "session_key", "credentials", "secret", "token", "sig",
    "X-Amz-Signature", "X-Amz-Security-Token",
]  # fmt: skip
# Names that end like a secret ("token") and are kept only because the allow-list has them.
ALLOWED_LOOKALIKES = ["progressToken", "progress_token", "nextPageToken", "next_page_token", "page_token"]
VALUE = "s3cr3t-VALUE-9f8e7d"  # no character a bare value stops at, long enough for free text (4+)


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize("name", KEPT_NAMES)
def test_mcp_and_llm_fields_are_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_are_secret_names(name: str) -> None:
    assert is_secret_name(name)


def test_token_counts_are_kept() -> None:
    """maxTokens and input_tokens are numbers; "tokens" in other names is still a secret."""
    for name in ("maxTokens", "input_tokens", "output_tokens", "max_completion_tokens", "cache_read_input_tokens"):
        assert not is_secret_name(name), name
    assert is_secret_name("bot_token") and is_secret_name("webhookSecret") and is_secret_name("db_password")


def test_a_name_with_token_elsewhere_than_at_its_end_is_kept() -> None:
    for name in ("tokenizer", "token_endpoint", "tokenType", "token_type", "tokenCount"):
        assert not is_secret_name(name), name


@pytest.mark.parametrize(
    "name",
    ["secrets", "api_keys", "passwords", "access_tokens", "refresh_tokens", "private_key_pem", "credentials_json",
     "clientSecretValue", "tokens", "signatures"],
)  # fmt: skip
def test_plural_and_container_names_of_secrets_are_secret(name: str) -> None:
    """A plural or a container of a secret leaks as much as the secret: only "token" is judged at the end."""
    assert is_secret_name(name)
    assert "sk-abc123456" not in redact_text(json.dumps({name: ["sk-abc123456"]}))


# ---------------------------------------------------------------- kept: JSON bodies, free text, query strings


def test_progress_token_and_max_tokens_are_kept_in_json_bodies() -> None:
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "t", "arguments": {}, "_meta": {"progressToken": "progress-42"}},
    }  # fmt: skip
    sampling = {"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage", "params": {"maxTokens": 512}}
    usage = {"usage": {"input_tokens": 1200, "output_tokens": 87}, "nextPageToken": "page-2-abc"}
    for message in (body, sampling, usage):
        assert json.loads(redact_text(json.dumps(message))) == message
        assert redact_json(message) == message


@pytest.mark.parametrize("name", ALLOWED_LOOKALIKES)
def test_allowed_lookalikes_are_kept_in_free_text(name: str) -> None:
    for text in (f"{name}={VALUE}", f"got {name}: {VALUE} twice", f'{{"x": 1, "{name}": "{VALUE}"'):
        assert redact_text(text) == text, text


@pytest.mark.parametrize("name", KEPT_NAMES)
def test_no_mcp_or_llm_field_is_redacted_in_free_text(name: str) -> None:
    for text in (f"{name}={VALUE}", f"{name}: 4096", f"'{name}': '{VALUE}'"):
        assert redact_text(text) == text, text


def test_progress_token_and_max_tokens_are_kept_in_query_strings() -> None:
    url = "https://h/mcp?progressToken=p-1&maxTokens=512&input_tokens=9&output_tokens=3&nextPageToken=n-2"
    assert redact_url(url) == url


# ---------------------------------------------------------------- redacted: every place


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_headers_are_redacted(name: str) -> None:
    shown = redact_headers({name: VALUE, "mcp-session-id": "sess-1", "accept": "text/event-stream"})
    assert shown == {name: marker(VALUE), "mcp-session-id": "sess-1", "accept": "text/event-stream"}


def test_authorization_header_keeps_its_scheme() -> None:
    assert redact_headers({"Authorization": f"Bearer {VALUE}"}) == {
        "Authorization": f"Bearer {marker('Bearer ' + VALUE)}"
    }


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_json_members_are_redacted_at_any_depth(name: str) -> None:
    body = {"params": {"arguments": {"list": [{name: VALUE, "page": 7}]}}, name: {"nested": VALUE}}
    shown = json.loads(redact_text(json.dumps(body)))
    assert shown["params"]["arguments"]["list"][0] == {name: marker(json.dumps(VALUE)), "page": 7}
    assert shown[name] == marker(json.dumps({"nested": VALUE}))


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_members_of_json_inside_a_string_are_redacted(name: str) -> None:
    answer = {"content": [{"type": "text", "text": json.dumps({name: VALUE, "page": 7})}]}
    shown = json.loads(redact_text(json.dumps(answer)))
    inner = json.loads(shown["content"][0]["text"])
    assert inner == {name: marker(json.dumps(VALUE)), "page": 7}


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secrets_are_redacted_in_free_text(name: str) -> None:
    for text, shown in (
        (f"{name}={VALUE}", f"{name}={marker(VALUE)}"),
        (f"failed: {name}: {VALUE}, retrying", f"failed: {name}: {marker(VALUE)}, retrying"),
        (f'{{"page": 3, "{name}": "{VALUE}"}} (cut)', f'{{"page": 3, "{name}": "{marker(VALUE)}"}} (cut)'),
        (f"'{name}': '{VALUE}'", f"'{name}': '{marker(VALUE)}'"),
    ):
        assert redact_text(text) == shown


@pytest.mark.parametrize("name", [n for n in SECRET_NAMES if n not in ("Authorization", "Proxy-Authorization")])
def test_secret_query_parameters_are_redacted(name: str) -> None:
    url = f"https://h/mcp?cursor=c-1&{name}={VALUE}&page=2"
    assert redact_url(url) == f"https://h/mcp?cursor=c-1&{name}={marker(VALUE)}&page=2"


def test_url_password_is_redacted() -> None:
    assert redact_url(f"https://ada:{VALUE}@h/mcp") == f"https://ada:{marker(VALUE)}@h/mcp"


def test_bearer_tokens_in_free_text_keep_their_scheme() -> None:
    assert redact_text(f"401: bad Bearer {VALUE}") == f"401: bad Bearer {marker('Bearer ' + VALUE)}"
    text = f"sent Authorization: Bearer {VALUE}; progressToken: 3"
    assert redact_text(text) == f"sent Authorization: Bearer {marker('Bearer ' + VALUE)}; progressToken: 3"


def test_a_secret_inside_the_value_of_a_field_that_is_no_secret_is_redacted() -> None:
    assert redact_text(f"url=https://h/cb?access_token={VALUE}") == f"url=https://h/cb?access_token={marker(VALUE)}"
    assert redact_text(f'error: "refused access_token={VALUE}"') == f'error: "refused access_token={marker(VALUE)}"'


def test_quoted_values_are_taken_whole_with_escapes_and_when_cut() -> None:
    assert (
        redact_text(r'"password": "a \"b\" c", "maxTokens": 5') == r'"password": "[redacted 9 chars]", "maxTokens": 5'
    )
    assert redact_text('{"note": "", "client_secret": "ab cd') == '{"note": "", "client_secret": "[redacted 5 chars]"'
    assert redact_text('{"access_token": "abc\\') == '{"access_token": "[redacted 3 chars]"'


def test_short_bare_values_and_empty_values_are_left() -> None:
    """A bare value of under four characters is too likely to be prose ("token: no"); an empty one hides nothing."""
    assert redact_text("token: no") == "token: no"
    assert redact_json({"password": "", "token": None}) == {"password": "", "token": None}


def test_a_chain_of_names_is_read_once_and_its_last_secret_redacted() -> None:
    """Every "a=" starts a bare value that runs to the end: read from each name, the text would take minutes;
    taken whole as the value of the first "a", the token would be shown."""
    text = "a=" * 100_000 + f"token={VALUE}"
    assert redact_text(text) == "a=" * 100_000 + f"token={marker(VALUE)}"


# ---------------------------------------------------------------- through the report and the JSON export

BEARER_VALUE = "sk-live-abcdef0123456789"
ACCESS_TOKEN = "ya29.a0AfH6SMBsecret"
ERROR_TOKEN = "gho_16C7e42F292c6912E7710c838347Ae178B4a"


def mcp_capture(tmp_path: Path) -> Path:
    """A tools/call with a progress token, answered on a stream that carries progress and a sampling request;
    the client answers the sampling request; a second call fails with a token in its error message."""
    call = tool_call(1, "summarize", progressToken="progress-7f3a")
    sampling = rpc("s1", "sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": "summarize"}}], "maxTokens": 512,
    })  # fmt: skip
    progress = rpc(None, "notifications/progress", {"progressToken": "progress-7f3a", "progress": 1, "total": 2})
    del progress["id"]
    answer = result(1, text_result(json.dumps({"access_token": ACCESS_TOKEN, "token_type": "Bearer"})))
    headers = {"authorization": f"Bearer {BEARER_VALUE}"}
    sampled = result("s1", {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"})
    refused = error(2, -32000, f"upstream refused access_token={ERROR_TOKEN} (progress_token=pt-9)")
    return write(
        tmp_path,
        exchange(call, body=sse(progress, sampling, answer), content_type="text/event-stream",
                 request_headers=headers, at=1.0, duration=3.0),
        exchange(sampled, status=202, body=b"", request_headers=headers, at=2.0),
        exchange(tool_call(2, "fetch"), body=refused, request_headers=headers, at=5.0),
    )  # fmt: skip


def test_report_keeps_progress_token_and_max_tokens_and_redacts_secrets(tmp_path: Path) -> None:
    capture = mcp_capture(tmp_path)
    data = build_report([capture])
    shown = "\n".join(strings(data))
    assert '"progressToken": "progress-7f3a"' in shown  # the call's _meta and the progress notification
    assert '"maxTokens": 512' in shown
    assert "token_type" in shown and "progress_token=pt-9" in shown
    for secret in (BEARER_VALUE, ACCESS_TOKEN, ERROR_TOKEN):
        assert secret not in shown, secret
    first = data["details"][data["calls"][0][0]]["exchanges"][0]["request"]
    assert first["headers"]["authorization"] == f"Bearer {marker('Bearer ' + BEARER_VALUE)}"
    assert json.loads(first["body"])["params"]["_meta"] == {"progressToken": "progress-7f3a"}


def test_json_export_keeps_progress_token_and_redacts_the_token_in_an_error_message(tmp_path: Path) -> None:
    out = io.StringIO()
    write_json(analyze([mcp_capture(tmp_path)]), out)
    exported = out.getvalue()
    assert ERROR_TOKEN not in exported and "progress_token=pt-9" in exported
    failed = [c for c in json.loads(exported)["calls"] if c["error_message"]]
    assert failed and failed[0]["error_message"].startswith(f"upstream refused access_token={marker(ERROR_TOKEN)}")
