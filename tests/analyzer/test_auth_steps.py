"""The OAuth flow around MCP calls is recognised as auth steps: analyzed, neither calls nor skipped."""

from __future__ import annotations

import io
import json
from pathlib import Path

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from tests.analyzer.flows import exchange, result, text_result, tool_call, write

UA = {"user-agent": "client/1"}


def test_a_401_then_discovery_registration_token_and_the_retry(tmp_path: Path) -> None:
    capture = write(
        tmp_path,
        exchange(tool_call(1, "echo"), status=401, body=b"", response_headers={"www-authenticate": "Bearer"},
                 request_headers=UA, at=100.0, duration=0.01),
        exchange(None, method="GET", path="/.well-known/oauth-protected-resource/mcp", body={"resource": "x"},
                 request_headers=UA, at=100.1, duration=0.01),
        exchange(None, method="GET", path="/.well-known/oauth-authorization-server", body={"issuer": "x"},
                 request_headers=UA, at=100.2, duration=0.01),
        exchange({"redirect_uris": ["http://localhost/cb"], "client_name": "c"}, path="/register", status=201,
                 body={"client_id": "abc"}, request_headers=UA, at=100.3, duration=0.01),
        exchange(None, method="GET", path="/authorize?response_type=code&client_id=abc", status=302, body=b"",
                 request_headers=UA, at=100.4, duration=0.01),
        exchange(b"grant_type=authorization_code&code=xyz", path="/token", body={"access_token": "SECRET-TOKEN-1"},
                 request_headers={**UA, "content-type": "application/x-www-form-urlencoded"}, at=100.5, duration=0.01),
        exchange(tool_call(1, "echo"), body=result(1, text_result("hi")),
                 request_headers={**UA, "authorization": "Bearer SECRET-TOKEN-1"}, at=100.6, duration=0.01),
        exchange(None, method="GET", path="/favicon.ico", status=404, body=b"", content_type="text/html", at=101.0),
    )  # fmt: skip
    analysis = analyze([capture])
    assert [c["method"] for c in analysis.calls] == ["tools/call", "tools/call"]
    assert [s["step"] for s in analysis.auth_steps] == [
        "protected-resource metadata",
        "authorization-server metadata",
        "client registration",
        "authorization request",
        "token exchange",
    ]
    assert [s["reason"][:7] for s in analysis.skipped] == ["not MCP"], "the favicon is still not MCP"
    assert analysis.flows_read == analysis.analyzed + len(analysis.skipped)
    (group,) = [g.record() for g in analysis.retry_groups]
    assert (group["origin"], group["confidence"]) == ("auth-retry", "high")
    out = io.StringIO()
    write_json(analysis, out)
    exported = out.getvalue()
    assert len(json.loads(exported)["auth_steps"]) == 5 and "SECRET-TOKEN-1" not in exported
