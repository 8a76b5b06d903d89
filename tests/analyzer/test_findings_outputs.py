"""Findings open the text summary and the Markdown summary, are in the export, and are redacted in each
(issue 22, item 2). The capture is the stdio sample, recorded from a real server that exited with code 3
while a call waited (sample_captures/record_stdio_sample.py): its crash is a finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcp_blackbox.analyzer.model.contract import FindingRecord
from mcp_blackbox.analyzer.redaction.redactor import Redactor

REPO = Path(__file__).resolve().parents[2]
STDIO = "sample_captures/stdio-faults.stdio.jsonl"
SECRET = "sk-live-0123456789abcdefghijklmnop"


def cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_blackbox.cli.main", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_findings_open_the_summaries_and_are_in_the_export() -> None:
    exported = json.loads(cli("export", STDIO))
    (crash,) = [f for f in exported["findings"] if f["rule"] == "stdio_server_crash"]
    assert exported["summary"]["findings"] == len(exported["findings"])
    assert crash["calls"] and set(crash["calls"]) <= {c["call_id"] for c in exported["calls"]}
    text = cli("summary", STDIO)
    assert text.splitlines()[:2] == ["findings:", f"  {crash['title']}"]
    markdown = cli("summary", "--format", "markdown", STDIO)
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Findings"
    assert f"`{crash['calls'][0]}`" in markdown.split("## What was captured")[0]


def test_a_finding_is_redacted_as_a_call_is() -> None:
    finding: FindingRecord = {
        "rule": "auth_refresh_loop",
        "title": f"loop with Authorization: Bearer {SECRET}",
        "summary": f"api_key={SECRET}",
        "evidence": [f'{{"access_token": "{SECRET}"}}'],
        "calls": ["c0123456789ab"],
        "start": 1.0,
        "end": 2.0,
    }
    redacted = Redactor.of(True).finding(finding)
    assert SECRET not in json.dumps(redacted)
    assert (redacted["rule"], redacted["calls"], redacted["start"]) == ("auth_refresh_loop", ["c0123456789ab"], 1.0)
    assert Redactor.of(False).finding(finding) == finding
