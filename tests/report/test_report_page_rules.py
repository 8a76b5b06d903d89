"""The report page keeps its own rules: only its own script runs, requests read as sent, and what is
not a failure (an input_required round) is neither red nor the call the page opens on."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from mcp_blackbox.analyzer.review.report import write_report
from tests.analyzer.flows import exchange, result, text_result, tool_call, write
from tests.report.layout import column
from tests.support.browser import inspect_report


def small_capture(tmp_path: Path, path: str = "/mcp") -> Path:
    return write(
        tmp_path,
        exchange(tool_call(1, "ask"), path=path, body=result(1, {"resultType": "input_required"}), at=100.0),
        exchange(tool_call(2, "write"), body=result(2, text_result("boom", isError=True)), at=101.0),
        exchange(tool_call(3, "echo"), body=result(3, text_result("ok")), at=102.0),
    )


def csp_of(html: str) -> str:
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert found is not None
    return found.group(1).replace("&#39;", "'")


def test_policy_names_the_page_script_and_style_by_hash_and_nothing_inline(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    write_report([small_capture(tmp_path)], report)
    html = report.read_text(encoding="utf-8")
    policy = csp_of(html)
    assert "unsafe-inline" not in policy and "default-src 'none'" in policy
    script = re.search(r"<script>(.*?)</script>", html, re.S)
    assert script is not None
    style = re.search(r"<style>(.*?)</style>", html, re.S)
    assert style is not None

    def digest(text: str) -> str:
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"script-src 'sha256-{digest(script.group(1))}'" in policy
    assert f"style-src 'sha256-{digest(style.group(1))}'" in policy
    assert "\r" not in script.group(1) + style.group(1), "line ends as the browser hashes them"


def test_markup_that_escaped_escaping_would_not_run(tmp_path: Path) -> None:
    """If an escaping bug ever let a script into the page, the policy still stops it; the page's own runs."""
    report = tmp_path / "report.html"
    write_report([small_capture(tmp_path)], report)
    html = report.read_text(encoding="utf-8")
    injected = '<script>window.__injected = 1</script><img src="data:," onerror="window.__injected = 2">'
    report.write_text(html.replace("<h2>Timeline</h2>", injected + "<h2>Timeline</h2>", 1), encoding="utf-8")
    seen = inspect_report(report, [{"do": "eval", "expression": "String(window.__injected)"}])
    assert seen["ready_error"] is None, "the page's own script ran"
    assert seen["results"][0]["value"] == "undefined"


def test_request_line_is_shown_as_sent(tmp_path: Path) -> None:
    sent = "/mcp?tag=a&tag=b&q=x%20y"
    data = write_report([small_capture(tmp_path, sent)], tmp_path / "report.html")
    first = data["details"][data["calls"][0][0]]["exchanges"][0]
    assert first["request"]["line"] == f"POST http://127.0.0.1:8000{sent}"


def test_input_required_is_not_red_and_the_page_opens_on_the_first_failure(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    data = write_report([small_capture(tmp_path)], report)
    outcomes = dict(zip(column(data, "id"), column(data, "outcome"), strict=True))
    assert sorted(outcomes.values()) == ["INPUT_REQUIRED", "TOOL_ERROR", "TOOL_SUCCESS"]
    cards = "Array.from(document.querySelectorAll('.card.bad')).map(c => c.textContent.trim()).join('|')"
    seen = inspect_report(
        report,
        [
            {"do": "eval", "expression": "document.getElementById('details').dataset.callId"},
            {"do": "eval", "expression": cards},
        ],
    )
    opened = seen["results"][0]["value"]
    assert outcomes[opened] == "TOOL_ERROR"
    assert "INPUT_REQUIRED" not in seen["results"][1]["value"] and "TOOL_ERROR" in seen["results"][1]["value"]


SENDER = {"pid": 4242, "name": "agent-host", "started_at": 1_800_000_000.5, "parents": [{"pid": 1, "name": "init"}]}


def test_details_name_the_client_and_search_finds_it(tmp_path: Path) -> None:
    agent = {"user-agent": "agent-under-test/7", "mcp-session-id": "sess-4711"}
    flow = exchange(tool_call(1, "echo"), request_headers=agent, body=result(1, text_result()))
    # As the recorder measured it (addon/peer_process.py): the process that owned the client's socket.
    flow.metadata["mcp_blackbox"] = {"version": 1, "mcp": "test", "client_process": SENDER}
    capture = write(tmp_path, flow)
    report = tmp_path / "report.html"
    data = write_report([capture], report)
    (client,) = [
        dict(zip(data["client_columns"], (data["strings"][n] for n in c), strict=True)) for c in data["clients"]
    ]
    assert (client["user_agent"], client["session"], client["lineage"]) == ("agent-under-test/7", "sess-4711", "k1")
    assert client["process"] == "pid 4242 (agent-host)"
    seen = inspect_report(
        report,
        [
            {"do": "click", "selector": f'#table-rows .row[data-call-id="{data["calls"][0][0]}"]'},
            {"do": "eval", "expression": "document.querySelector('#details table.client').textContent"},
            {"do": "fill", "selector": "#search", "value": "sess-4711"},
            {"do": "eval", "expression": "document.getElementById('count').textContent"},
            {"do": "fill", "selector": "#search", "value": "another-session"},
            {"do": "eval", "expression": "document.getElementById('count').textContent"},
            {"do": "fill", "selector": "#search", "value": "pid 4242"},
            {"do": "eval", "expression": "document.getElementById('count').textContent"},
        ],
    )
    assert seen["page_errors"] == [] and seen["console_errors"] == []
    shown = seen["results"][1]["value"]
    assert "k1" in shown and "agent-under-test/7" in shown and "session sess-4711" in shown
    assert "pid 4242 (agent-host)" in shown
    assert seen["results"][3]["value"].startswith("1 of 1") and seen["results"][5]["value"].startswith("0 of 1")
    assert seen["results"][7]["value"].startswith("1 of 1")


def test_header_counts_what_ran_more_than_once_in_one_card(tmp_path: Path, ran_twice: Path) -> None:
    """One card, one list, one answer (issue 22, item 1): no "unsafe replays", "may have run twice" or "writes
    executed more than once" beside it."""
    report = tmp_path / "report.html"
    data = write_report([ran_twice], report)
    (entry,) = data["meta"]["ran_more_than_once"]
    assert entry["tool"] == "write_record" and len(entry["attempts"]) == 2
    html = report.read_text(encoding="utf-8")
    card = r'<button type="button" class="card bad" data-set="ran-twice"[^>]*><span class="n">1</span>ran more than'
    assert len(re.findall(card, html)) == 1
    counts = data["meta"]["ran_more_than_once_counts"]
    assert f"{counts['certain']} certain · {counts['possible']} possible" in html
    for old in ("unsafe replays", "may have run twice", "writes executed more than once"):
        assert old not in html.lower(), old
