"""HAR out (analyzer/outputs/har_export.py): HAR 1.2 by mitmproxy's writer, each entry's verdicts in `_mcp`; the HAR
analyzes as the capture did (same call ids and verdicts), and `_mcp` says what the export says."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.cli.main import main
from tests.analyzer.flows import error, exchange, result, rpc, tool_call, write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_captures"
CAPTURES = sorted(SAMPLES.glob("*.flows"))
VERDICT = ("outcome", "layer", "flags", "reason", "retry_group", "attempt", "retry_origin", "retry_confidence")


def export_har(capture: Path | str, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["export", str(capture), "--format", "har", "-o", str(out), *extra]) == 0
    har: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return har


def export_json(capture: Path | str, out: Path) -> dict[str, Any]:
    assert main(["export", str(capture), "-o", str(out)]) == 0
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


def verdicts(path: Path | str) -> dict[str, tuple[Any, ...]]:
    return {c["call_id"]: tuple(c[k] for k in VERDICT) for c in analyze([path]).calls}


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_har_is_valid_reads_back_with_the_same_verdicts_and_mcp_matches_the_export(
    capture: Path, tmp_path: Path
) -> None:
    har = export_har(capture, tmp_path / "out.har")
    log = har["log"]
    assert log["version"] == "1.2" and log["creator"]["name"] == "mcp-blackbox" and log["pages"] == []
    assert len(log["entries"]) == analyze([capture]).analyzed
    for entry in log["entries"]:
        datetime.fromisoformat(entry["startedDateTime"])
        assert isinstance(entry["time"], int | float) and entry["time"] >= 0
        request, response, timings = entry["request"], entry["response"], entry["timings"]
        assert {"method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"} <= set(
            request
        )
        assert {"status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL"} <= set(response)
        assert all(isinstance(timings[k], int | float) for k in ("send", "wait", "receive"))
        assert isinstance(entry["cache"], dict)
        assert all(isinstance(h["name"], str) and isinstance(h["value"], str) for h in request["headers"])

    # Read back through the analyzer: the same calls, under the same ids, with the same verdicts.
    assert verdicts(tmp_path / "out.har") == verdicts(capture)

    # _mcp says what the export says, on every entry that carried a part of the call.
    exported = export_json(capture, tmp_path / "out.json")["calls"]
    by_flow = {e["_mcp_blackbox"]["flow_id"]: e["_mcp"]["calls"] for e in log["entries"]}
    listed = 0
    for call in exported:
        for number, flow_id in enumerate(call["exchanges"]):
            (mine,) = [v for v in by_flow[flow_id] if v["call_id"] == call["call_id"]]
            assert {k: mine[k] for k in ("method", "tool", "jsonrpc_id", "outcome", "layer", "flags", "reason")} == {
                k: call[k] for k in ("method", "tool", "jsonrpc_id", "outcome", "layer", "flags", "reason")
            }
            assert mine["carried"] == ("request" if number == 0 else "answer")
            listed += 1
    assert listed == sum(len(v) for v in by_flow.values())


def test_har_of_a_har_reads_the_same(tmp_path: Path) -> None:
    capture = SAMPLES / "py-2024-legacy-sse.flows"  # answers on the session's stream: per-event times matter
    export_har(capture, tmp_path / "one.har")
    export_har(tmp_path / "one.har", tmp_path / "two.har")
    assert verdicts(tmp_path / "two.har") == verdicts(capture)


def test_secrets_redacted_by_default_yet_new_credentials_still_read(tmp_path: Path) -> None:
    capture = SAMPLES / "py-auth-retry.flows"
    text = json.dumps(export_har(capture, tmp_path / "redacted.har"))
    assert "s3cret" not in text and "Bearer [redacted" in text
    assert verdicts(tmp_path / "redacted.har") == verdicts(capture)  # auth-retry: the credentials changed
    assert "s3cret" in json.dumps(export_har(capture, tmp_path / "kept.har", "--no-redact"))


def test_no_response_and_body_secrets(tmp_path: Path) -> None:
    session = {"mcp-session-id": "s1"}
    capture = write(
        tmp_path,
        exchange(rpc(1, "initialize", {}), body=result(1, {"protocolVersion": "2025-11-25"}), response_headers=session),
        exchange(
            tool_call(2, "db"),
            body=error(2, -32603, "bad"),
            request_headers={**session, "cookie": "sid=abcdef123", "x-api-key": "k-123456789"},
        ),
        exchange(
            rpc(3, "tools/call", {"name": "login", "arguments": {"password": "hunter2-long"}}),
            status=None,
            error_message="Connection reset by peer",
            request_headers=session,
        ),
    )
    har = export_har(capture, tmp_path / "out.har")
    text = json.dumps(har)
    for secret in ("abcdef123", "k-123456789", "hunter2-long"):
        assert secret not in text
    gone = har["log"]["entries"][2]
    assert gone["response"]["status"] == 0 and gone["response"]["_error"] == "Connection reset by peer"
    assert gone["_mcp"]["calls"][0]["outcome"] == "NO_RESPONSE"
    assert verdicts(tmp_path / "out.har") == verdicts(capture)
