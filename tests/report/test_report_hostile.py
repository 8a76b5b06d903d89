"""Captured content is untrusted: injected markup reads as text, and secrets do not reach the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcp_blackbox.analyzer.review.report import write_report
from tests.analyzer.flows import error, exchange, result, sse, text_result, tool_call, write
from tests.support.browser import inspect_report

PAYLOADS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "</script><script>alert(3)</script>",
    "<svg onload=alert(4)>",
    "{{7*7}}<!--",
    "\u2028</style><b>bold</b>",
]
SECRETS = ["SECRETTOKEN123456", "SECRETCOOKIE98765", "SECRETQUERYKEY55", "SECRETACCESS7777", "SECRETPASSWORD000"]


def hostile_capture(tmp_path: Path) -> Path:
    p = PAYLOADS
    call = tool_call(1, p[0])
    call["method"] = "tools/call"
    weird_method = {"jsonrpc": "2.0", "id": 2, "method": p[1], "params": {}}
    return write(
        tmp_path,
        exchange(call, body=result(1, text_result(p[2])), request_headers={"x-note": p[3]}),
        exchange(weird_method, body=error(2, -32601, p[4])),
        exchange(tool_call(3, "stream"), body=sse(result(3, text_result(p[5]))), content_type="text/event-stream"),
        exchange(tool_call(4, p[3]), status=503, body=p[0].encode(), content_type="text/html"),
        name="hostile.flows",
    )


def secret_capture(tmp_path: Path) -> Path:
    login = tool_call(1, "login")
    login["params"]["arguments"] = {"user": "ada", "password": SECRETS[4]}
    headers = {"authorization": f"Bearer {SECRETS[0]}", "cookie": f"session={SECRETS[1]}"}
    return write(
        tmp_path,
        exchange(login, path=f"/mcp?api_key={SECRETS[2]}", request_headers=headers,
                 body=result(1, text_result(json.dumps({"access_token": SECRETS[3]})))),
        exchange(tool_call(2, "echo"), status=401, body=f"bad token Bearer {SECRETS[0]}".encode(),
                 content_type="text/plain", response_headers={"set-cookie": f"s={SECRETS[1]}"}),
        name="secrets.flows",
    )  # fmt: skip


def test_injected_markup_never_runs_and_reads_as_text(tmp_path: Path) -> None:
    report = tmp_path / "hostile.html"
    data = write_report([hostile_capture(tmp_path)], report)
    ids = [row[0] for row in data["calls"]]
    injected = "img, svg, iframe, [onerror], [onload]"
    bold = "Array.from(document.querySelectorAll('b')).filter(b => b.textContent === 'bold').length"
    actions = [{"do": "count", "selector": injected}, {"do": "count", "selector": "script"}]
    actions.append({"do": "eval", "expression": bold})
    for call_id in ids:
        actions += [
            {"do": "fill", "selector": "#search", "value": call_id},
            {"do": "click", "selector": f'#table-rows .row[data-call-id="{call_id}"]'},
            {"do": "eval", "expression": "document.getElementById('details').textContent"},
        ]
    actions.append({"do": "eval", "expression": "document.body.textContent"})
    seen = inspect_report(report, actions)
    assert seen["dialogs"] == [] and seen["page_errors"] == [] and seen["requests"] == []
    assert seen["results"][0]["value"] == 0, "no element came from captured content"
    assert seen["results"][1]["value"] == 2, "only the report's own data and code scripts"
    assert seen["results"][2]["value"] == 0
    shown = "".join(str(r["value"]) for r in seen["results"][3:])
    for payload in PAYLOADS:
        assert payload.replace("\u2028", "") in shown.replace("\u2028", ""), payload


def test_secrets_are_redacted_in_report_and_exports(tmp_path: Path) -> None:
    capture = secret_capture(tmp_path)
    report = tmp_path / "report.html"
    write_report([capture], report)
    html = report.read_text()
    cli = str(Path(sys.executable).with_name("mcp-blackbox"))
    exports = [
        subprocess.run(
            [cli, "export", str(capture), "--format", fmt], capture_output=True, text=True, check=True
        ).stdout
        for fmt in ("json", "csv")
    ]
    for secret in SECRETS:
        assert secret not in html, secret
        for text in exports:
            assert secret not in text, secret
    assert "[redacted" in html and "secrets: <b>redacted</b>" in html


def test_no_redact_keeps_secrets_and_says_so(tmp_path: Path) -> None:
    capture = secret_capture(tmp_path)
    report = tmp_path / "raw.html"
    write_report([capture], report, redact=False)
    html = report.read_text()
    assert all(secret in html for secret in SECRETS[:4])
    assert "NOT redacted" in html


def test_report_command_redacts_unless_told_not_to(tmp_path: Path) -> None:
    capture = secret_capture(tmp_path)
    cli = str(Path(sys.executable).with_name("mcp-blackbox"))
    for flag, leaked in (([], False), (["--no-redact"], True)):
        out = tmp_path / f"report{len(flag)}.html"
        done = subprocess.run([cli, "report", str(capture), "-o", str(out), *flag], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        html = out.read_text()
        assert (SECRETS[0] in html) is leaked and ("NOT redacted" in done.stdout) is leaked
