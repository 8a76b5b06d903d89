"""``summary --format markdown``: rendered by a CommonMark parser (with GFM tables, as GitHub renders it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream, analyze
from mcp_blackbox.analyzer.review.summary_markdown import summary_markdown
from tests.analyzer.flows import exchange, result, text_result, tool_call, write

HOUR_START = 1_796_000_000.0  # a capture's first call (2026-11-30 UTC)

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted(str(p.relative_to(REPO)) for p in (REPO / "sample_captures").glob("*.flows"))
RETRY_AFTER_503 = "sample_captures/py-app-retry-after-503.flows"
SECTIONS = [
    "What was captured",
    "What failed",
    "Successes in doubt",
    "Retries and who made them",
    "Ran more than once",
    "Top errors",
    "Calls that got no answer",
    "What the capture could not show",
]
CALL_REF = re.compile(r"<code>(c[0-9a-f]{12}(?:\.\d+)?(?:~\d+)?)</code>")


def render(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_blackbox.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def export(*paths: str) -> dict[str, Any]:
    done = cli("export", *paths)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_section_renders_in_order_and_names_only_real_calls() -> None:
    done = cli("summary", "--format", "markdown", *SAMPLES)
    assert done.returncode == 0, done.stderr
    html = render(done.stdout)
    assert re.findall(r"<h2>(.*?)</h2>", html) == SECTIONS
    assert html.count("<table>") == 3  # failed by layer, retries by origin, top errors
    calls = {c["call_id"]: c for c in export(*SAMPLES)["calls"]}
    referenced = set(CALL_REF.findall(html))
    assert referenced and referenced <= set(calls)
    failing = sorted((c for c in calls.values() if c["outcome"] not in ("SUCCESS", "TOOL_SUCCESS", "ACCEPTED",
                      "INPUT_REQUIRED")), key=lambda c: c["t_start"])  # fmt: skip
    first = failing[0]
    assert f"The first: <code>{first['call_id']}</code>" in html
    assert first["started_at"] in html


def test_the_503_story_names_the_retry_and_no_write_that_ran_twice() -> None:
    """The 503 was the fault layer's, sent before the request reached the server (issue 21: a 503 ran
    nothing), so the application's re-send is a safe retry and the write ran once."""
    markdown = cli("summary", "--format", "markdown", RETRY_AFTER_503).stdout
    calls = export(RETRY_AFTER_503)["calls"]
    (failed,) = [c for c in calls if c["outcome"] == "HTTP_ERROR"]
    (again,) = [c for c in calls if c["tool"] == "write_record" and c["outcome"] == "TOOL_SUCCESS"]
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL))
    assert (
        f"`{failed['call_id']}` → `{again['call_id']}`, ended TOOL_SUCCESS; safe"
        in sections["Retries and who made them"]
    )
    assert "app-retry" in sections["Retries and who made them"]
    # The 503 ran nothing (the fault layer refused it before the server): no write ran more than once.
    assert sections["Ran more than once"].strip().startswith("None")
    assert "HTTP 503: injected 503" in sections["Top errors"]  # the 503's body, not just its status
    assert f"`{failed['call_id']}`" in sections["Calls that got no answer"]
    assert "ended by http-status (HTTP 503)" in sections["Calls that got no answer"].replace("\\", "")


def test_ids_are_the_same_whichever_captures_are_loaded(tmp_path: Path) -> None:
    alone = set(CALL_REF.findall(render(cli("summary", "--format", "markdown", RETRY_AFTER_503).stdout)))
    together = set(CALL_REF.findall(render(cli("summary", "--format", "markdown", *SAMPLES).stdout)))
    assert alone and alone <= together


def test_hostile_captured_text_renders_as_text(tmp_path: Path) -> None:
    hostile = "![x](http://evil.example/p.png) <img src=x onerror=alert(1)> a|b www.evil.example &amp; *em* `c`"
    flows = [
        exchange(tool_call(1, "tool|name<b>"), body=result(1, text_result(hostile, isError=True))),
        exchange(tool_call(2, "echo"), status=503, body=hostile.encode(), content_type="text/html"),
    ]
    analysis = analyze([str(write(tmp_path, *flows))])
    html = render(summary_markdown(analysis, ["capture.flows"]))
    for markup in ("<img", "<a ", "<em>", "<b>"):
        assert markup not in html, markup
    (top,) = [t for t in html.split("<table>") if ">count</th>" in t]
    rows = re.findall(r"<tr>(.*?)</tr>", top, re.DOTALL)
    assert all(row.count("<td") in (0, 4) for row in rows), rows  # a "|" in the text opened no cell
    assert "![x](http://evil.example/p.png)" in html.replace("&lt;", "<").replace("&gt;", ">")
    assert "tool|name&lt;b&gt;" in html


def test_secrets_in_quoted_errors_are_redacted(tmp_path: Path) -> None:
    secret = "sk-live-4242424242424242"
    body = f"Authorization failed for Bearer {secret}".encode()
    analysis = analyze([str(write(tmp_path, exchange(tool_call(1, "echo"), status=401, body=body)))])
    assert secret not in summary_markdown(analysis, ["capture.flows"])
    assert secret in summary_markdown(analysis, ["capture.flows"], redact=False)


def test_a_swallowed_exception_is_a_success_in_doubt_and_a_clean_call_that_logs_is_not() -> None:
    """The stdio sample: the client got a success from `swallow` (an empty result, a traceback on stderr) and from
    `chatty` (a result, an info line on stderr): only the first is in doubt."""
    sample = "sample_captures/stdio-faults.stdio.jsonl"
    client = json.loads((REPO / "sample_captures/stdio-faults.stdio.client.json").read_text())
    tools = [step.get("tool") for run in client["runs"] for step in run["steps"] if step.get("op") == "call"]
    assert {"swallow", "chatty"} <= set(tools)
    analysis = analyze([REPO / sample])
    markdown = summary_markdown(analysis, [sample])
    section = markdown.split("## Successes in doubt", 1)[1].split("\n## ", 1)[0]
    by_tool = {c["tool"]: c for c in analysis.calls if c["method"] == "tools/call"}
    assert by_tool["swallow"]["outcome"] == "TOOL_SUCCESS" and by_tool["chatty"]["outcome"] == "TOOL_SUCCESS"
    assert f"`{by_tool['swallow']['call_id']}` tools/call swallow, TOOL_SUCCESS but " in section
    assert "STDERR_DURING_CALL" in section
    assert by_tool["chatty"]["call_id"] not in section
    assert (
        "None:"
        in summary_markdown(analyze([REPO / RETRY_AFTER_503]), [RETRY_AFTER_503])
        .split("## Successes in doubt", 1)[1]
        .split("\n## ", 1)[0]
    )


def an_hour_past_every_list(tmp_path: Path) -> Path:
    """An hour of calls, one every 30 s, so that a window of DEFAULT_WINDOW moves many times over it: a quarter
    fail with a 503 each in its own words, a quarter get an empty result, a quarter no answer: each list runs
    past LISTED rows and the transport layer's cell past its 8 ids."""
    flows = []
    for n in range(120):
        call, at = tool_call(n, f"tool{n % 5}"), HOUR_START + 30 * n
        if n % 4 == 0:
            flows.append(
                exchange(call, status=503, body=f"shard {n} is down".encode(), content_type="text/plain", at=at)
            )
        elif n % 4 == 1:
            flows.append(exchange(call, body=result(n, {"content": []}), at=at))
        elif n % 4 == 2:
            flows.append(exchange(call, status=None, error_message="Connection killed.", at=at))
        else:
            flows.append(exchange(call, body=result(n, text_result("done")), at=at))
    return write(tmp_path, *flows)


def test_the_streamed_document_is_the_whole_analysis_document(tmp_path: Path) -> None:
    """cli reads a windowed CallStream and keeps only what the document prints (counts, the first rows of each
    list, a count and a first call per error); the document is the whole analysis's, on every sample alone and
    on a capture whose lists are cut at LISTED rows."""
    hour = str(an_hour_past_every_list(tmp_path))
    for path in [*SAMPLES, "sample_captures/stdio-faults.stdio.jsonl", hour]:
        whole = summary_markdown(analyze([REPO / path]), [path], redact=False)
        streamed = summary_markdown(CallStream([REPO / path], window=DEFAULT_WINDOW), [path], redact=False)
        assert streamed == whole, path
    # The hour's lists run past what is printed: a document that kept every call would look the same.
    assert whole.count("more (mcp-blackbox export lists them all)") == 3  # doubted, top errors, unanswered
    assert re.search(r"\| transport \| 60 \| .* and 52 more \|", whole), whole
