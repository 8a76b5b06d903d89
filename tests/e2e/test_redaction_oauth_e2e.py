"""OAuth's secrets out of every output, on a real OAuth flow: the TypeScript SDK's OAuth client provider against
the Python SDK's authorization server, recorded through mitmdump with the addon (the truth corpus's oauth family,
tests/truth/family_oauth.py, one run: 401, discovery, registration, authorize with PKCE, token, a refresh, a
second authorization).

The authorization codes (in each 302's Location and each token request's form) and the PKCE code verifiers
(form field, sent percent-encoded) are read from the raw flows with mitmproxy's FlowReader; then none of them is
anywhere in ``mcp-blackbox redact``'s output (bodies decoded), ``export --format har``, ``export`` (JSON) or the
HTML ``report``, while the ``--no-redact`` HAR still shows them (the test sees what it looks for).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.cli.main import main

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("node") is None, reason="the OAuth client is a Node app"),
]

SDK = Path(__file__).resolve().parents[1] / "clients" / "ts" / "node_modules" / "@modelcontextprotocol" / "sdk"


@dataclass(frozen=True)
class OAuthSecrets:
    codes: list[str]
    verifiers: list[str]  # decoded
    verifiers_sent: list[str]  # as the form carried them (percent-encoded)
    client_secret: str
    access_tokens: list[str]

    def oauth(self) -> list[str]:
        return sorted({*self.codes, *self.verifiers, *self.verifiers_sent})


def read(path: Path) -> list[HTTPFlow]:
    with path.open("rb") as f:
        return [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


def secrets_of(capture: Path) -> OAuthSecrets:
    """What the capture holds in clear: the codes from the 302s, the verifiers and codes of the token requests."""
    codes, verifiers, sent, secrets, tokens = [], [], [], set(), []
    for flow in read(capture):
        if flow.response is not None and flow.response.status_code == 302 and "location" in flow.response.headers:
            codes += parse_qs(urlsplit(flow.response.headers["location"]).query).get("code", [])
        form = flow.request.urlencoded_form if flow.request.method == "POST" else None
        if form and form.get("grant_type") == "authorization_code":
            assert form["code"] in codes, "the token request exchanges a code a 302 gave"
            verifiers.append(form["code_verifier"])
            raw = dict(part.split("=", 1) for part in (flow.request.text or "").split("&"))
            sent.append(raw["code_verifier"])
            secrets.add(form["client_secret"])
        if flow.request.path.startswith("/token") and flow.response is not None and flow.response.status_code == 200:
            tokens.append(json.loads(flow.response.text or "{}")["access_token"])
    assert len(codes) >= 2 and len(verifiers) == len(codes) and len(secrets) == 1 and tokens
    return OAuthSecrets(codes, verifiers, sent, secrets.pop(), tokens)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, OAuthSecrets]:
    assert SDK.is_dir(), "the MCP TypeScript SDK is not installed (make test runs npm ci in tests/clients/ts)"
    from tests.truth.family_oauth import record_family
    from tests.truth.harness import Plan

    out = tmp_path_factory.mktemp("oauth-e2e")
    record_family("oauth", out, Plan(runs=1))
    capture = out / "oauth.flows"
    return capture, secrets_of(capture)


def decoded(flows: list[HTTPFlow]) -> str:
    """Every part of the flows as text: state (headers, URLs, metadata) and bodies decoded."""
    parts = []
    for flow in flows:
        parts.append(json.dumps(flow.get_state(), default=lambda b: b.decode("utf-8", "replace")))
        for message in (flow.request, flow.response):
            if message is not None:
                parts.append(message.get_text(strict=False) or "")
    return "\n".join(parts)


def absent(text: str, secrets: list[str], where: str) -> None:
    found = [secret for secret in secrets if secret in text]
    assert not found, f"{where} shows {found}"


def test_redact_leaves_no_code_or_verifier_and_analyses_the_same(recorded: tuple[Path, OAuthSecrets]) -> None:
    capture, secrets = recorded
    shared = capture.with_name("shared.flows")
    assert main(["redact", str(capture), "-o", str(shared)]) == 0
    absent(decoded(read(shared)), [*secrets.oauth(), secrets.client_secret, *secrets.access_tokens], "redact")
    absent(shared.read_bytes().decode("utf-8", "replace"), secrets.oauth(), "redact's bytes")
    forms = [f.request.urlencoded_form for f in read(shared) if f.request.path == "/token"]
    assert {form["grant_type"] for form in forms} == {"authorization_code", "refresh_token"}  # kept
    assert all(form["code"].startswith("REDACTED-") for form in forms if "code" in form)
    original, redacted = analyze([capture]), analyze([shared])
    assert [(c["call_id"], c["outcome"], c["flags"]) for c in redacted.calls] == [
        (c["call_id"], c["outcome"], c["flags"]) for c in original.calls
    ]
    assert [a["step"] for a in redacted.auth_steps] == [a["step"] for a in original.auth_steps]


def test_the_har_export_shows_codes_and_verifiers_only_with_no_redact(
    recorded: tuple[Path, OAuthSecrets], tmp_path: Path
) -> None:
    capture, secrets = recorded
    kept = tmp_path / "kept.har"
    assert main(["export", str(capture), "--format", "har", "--no-redact", "-o", str(kept)]) == 0
    text = kept.read_text(encoding="utf-8")
    assert all(secret in text for secret in secrets.oauth()), "the unredacted HAR holds them: the test can see"
    har = tmp_path / "out.har"
    assert main(["export", str(capture), "--format", "har", "-o", str(har)]) == 0
    entries = json.loads(har.read_text(encoding="utf-8"))["log"]["entries"]
    # What the rules reach through the HAR's own redaction: headers (the Location), URLs and bodies as text.
    for entry in entries:
        request, response = entry["request"], entry["response"]
        shown = [request["url"], request["headers"], response["headers"], response["content"].get("text")]
        shown.append((request.get("postData") or {}).get("text"))
        absent(json.dumps(shown), secrets.oauth(), f"the HAR's {request['method']} {request['url']}")


def test_the_har_export_shows_no_code_or_verifier_anywhere(recorded: tuple[Path, OAuthSecrets], tmp_path: Path) -> None:
    capture, secrets = recorded
    har = tmp_path / "out.har"
    assert main(["export", str(capture), "--format", "har", "-o", str(har)]) == 0
    absent(har.read_text(encoding="utf-8"), secrets.oauth(), "the HAR")


def test_the_report_and_the_export_show_no_oauth_secret(recorded: tuple[Path, OAuthSecrets], tmp_path: Path) -> None:
    """The report shows the calls' exchanges (auth steps as one line each: method, path, status), so a code or
    a verifier would reach it only quoted by a peer; the --no-redact report shows the access tokens the calls
    carried, which the redacted one hides."""
    capture, secrets = recorded
    everything = [*secrets.oauth(), secrets.client_secret, *secrets.access_tokens]
    report, kept = tmp_path / "report.html", tmp_path / "kept.html"
    assert main(["report", str(capture), "-o", str(report)]) == 0
    assert main(["report", str(capture), "--no-redact", "-o", str(kept)]) == 0
    absent(report.read_text(encoding="utf-8"), everything, "the report")
    assert any(token in kept.read_text(encoding="utf-8") for token in secrets.access_tokens)
    export = tmp_path / "calls.json"
    assert main(["export", str(capture), "-o", str(export)]) == 0
    absent(export.read_text(encoding="utf-8"), everything, "the JSON export")
