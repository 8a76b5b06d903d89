"""The verdicts on the real captures in sample_captures/, recorded with the official SDK clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze

SAMPLES = Path(__file__).resolve().parents[2] / "sample_captures"

# Per capture: (method, tool, outcome, flags, retry flags included) of each call that is not plumbing (initialize,
# notifications, tools/list, server/discover), in the order the calls started.
EXPECTED: dict[str, list[tuple[str | None, str | None, str, list[str]]]] = {
    "py-2025-session-tools": [
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "add", "TOOL_SUCCESS", []),
        ("tools/call", "tool_error", "TOOL_ERROR", []),
        ("tools/call", "protocol_error", "JSONRPC_ERROR", []),
        ("tools/call", "raise_error", "TOOL_ERROR", []),
        ("tools/call", "progress", "TOOL_SUCCESS", []),
        ("tools/call", "ask_name", "TOOL_SUCCESS", []),
        ("elicitation/create", None, "SUCCESS", []),
        ("tools/call", "write_record", "TOOL_SUCCESS", []),
    ],
    "ts-2025-session-tools": [
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "add", "TOOL_SUCCESS", []),
        ("tools/call", "tool_error", "TOOL_ERROR", []),
        ("tools/call", "protocol_error", "JSONRPC_ERROR", []),
        ("tools/call", "raise_error", "TOOL_ERROR", []),
        ("tools/call", "progress", "TOOL_SUCCESS", []),
        ("tools/call", "ask_name", "TOOL_SUCCESS", []),
        ("elicitation/create", None, "SUCCESS", []),
        ("tools/call", "write_record", "TOOL_SUCCESS", []),
    ],
    "ts-2025-resume-after-cut": [
        ("tools/call", "progress", "TOOL_SUCCESS", ["LATE_RESPONSE"]),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
    ],
    "py-2026-stateless": [
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "tool_error", "TOOL_ERROR", []),
        # The SDK sends -32602 with HTTP 400 in 2026-07-28: that version's status, no mismatch.
        ("tools/call", "protocol_error", "JSONRPC_ERROR", []),
        ("tools/call", "progress", "TOOL_SUCCESS", []),
        ("tools/call", "ask_name", "INPUT_REQUIRED", []),
        ("tools/call", "ask_name", "TOOL_SUCCESS", []),
    ],
    "py-2025-cut-2026-no-resume": [
        ("tools/call", "progress", "STREAM_INCOMPLETE", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
    ],
    "py-2024-legacy-sse": [
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "tool_error", "TOOL_ERROR", []),
        ("tools/call", "progress", "TOOL_SUCCESS", []),
    ],
    "py-app-retry-after-503": [
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "write_record", "HTTP_ERROR", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        # The 503 ran nothing (the fault layer answered it before the server): the re-send ran it once.
        ("tools/call", "write_record", "TOOL_SUCCESS", []),
    ],
    "py-session-expired": [
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "echo", "HTTP_ERROR", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
    ],
    "ts-protocol-faults": [
        ("tools/call", "echo", "HTTP_ERROR", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "echo", "MALFORMED_JSON", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "echo", "INVALID_ENVELOPE", []),
        (None, None, "INVALID_ENVELOPE", ["ORPHAN_RESPONSE"]),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "add", "INVALID_ENVELOPE", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
        ("tools/call", "add", "INVALID_TOOL_RESULT", []),
        ("tools/call", "echo", "TOOL_SUCCESS", []),
    ],
    "py-auth-retry": [("tools/call", "echo", "TOOL_SUCCESS", [])],
    "py-protocol-fallback": [("tools/call", "echo", "TOOL_SUCCESS", [])],
    "plain-mitmdump-progress": [
        ("tools/call", "progress", "TOOL_SUCCESS", []),
    ],
}
PLUMBING = {"initialize", "tools/list", "server/discover"}


def interesting(calls: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (c["method"], c["tool"], c["outcome"], c["flags"])
        for c in calls
        if c["method"] not in PLUMBING and not (c["method"] or "").startswith("notifications/")
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_capture_verdicts(name: str) -> None:
    analysis = analyze([SAMPLES / f"{name}.flows"])
    assert analysis.read_problems == [] and analysis.skipped == []
    assert analysis.analyzed == analysis.flows_read
    assert interesting(analysis.calls) == EXPECTED[name]
    plumbing = [c for c in analysis.calls if c["method"] in PLUMBING or (c["method"] or "").startswith("notif")]
    # Set-up fails only where the client then tried again (a refused probe, a 401 before the token).
    failed = [c for c in plumbing if c["outcome"] not in ("SUCCESS", "ACCEPTED")]
    assert all(c["retry_group"] and c["attempt"] == 1 for c in failed), failed


def test_every_sample_is_covered() -> None:
    assert {p.stem for p in SAMPLES.glob("*.flows")} == set(EXPECTED)


def by(name: str, **match: Any) -> list[dict[str, Any]]:
    return [c for c in analyze([SAMPLES / f"{name}.flows"]).calls if all(c[k] == v for k, v in match.items())]


def test_2025_session_pairs_everything_in_one_scope() -> None:
    calls = by("py-2025-session-tools")
    assert len({c["scope"] for c in calls}) == 1 and calls[0]["scope"].startswith("session:")
    assert {c["protocol_version"] for c in calls} == {"2025-11-25"}
    (progress,) = by("py-2025-session-tools", tool="progress")
    assert progress["sse_events"] == 4, "three progress notifications and the result"
    (elicit,) = by("py-2025-session-tools", method="elicitation/create")
    assert elicit["direction"] == "server->client" and len(elicit["exchanges"]) == 2


def test_resumed_answer_is_linked_to_the_cut_post() -> None:
    (progress,) = by("ts-2025-resume-after-cut", tool="progress")
    assert len(progress["exchanges"]) == 2
    assert any("resumed GET (Last-Event-ID" in e for e in progress["evidence"])
    assert progress["sse_events"] == 6, "five progress notifications across both streams and the result"


def test_2026_calls_are_scoped_per_exchange() -> None:
    calls = by("py-2026-stateless")
    assert all(c["scope"].startswith("exchange:") for c in calls)
    assert {c["protocol_version"] for c in calls if c["method"] == "tools/call"} == {"2026-07-28"}
    (cut,) = by("py-2025-cut-2026-no-resume", tool="progress")
    assert any("cancellation or loss" in e for e in cut["evidence"])


def test_legacy_answers_come_from_the_get_stream() -> None:
    calls = by("py-2024-legacy-sse", method="tools/call")
    assert all(c["http_status"] == 202 and len(c["exchanges"]) == 2 for c in calls)
    assert len({c["scope"] for c in calls}) == 1 and calls[0]["scope"].startswith("sse-session:")


def test_app_retry_runs_in_two_sessions_with_the_same_id() -> None:
    attempts = by("py-app-retry-after-503", tool="write_record")
    assert [c["jsonrpc_id"] for c in attempts] == [4, 4]
    assert attempts[0]["scope"] != attempts[1]["scope"]
    assert not any("ID_REUSED" in c["flags"] for c in attempts), "ids restart in every session"


def test_plain_capture_says_what_it_lacks() -> None:
    analysis = analyze([SAMPLES / "plain-mitmdump-progress.flows"])
    assert any("without per-event times" in note for note in analysis.notes)


def test_library_entry_point_gives_a_dataframe() -> None:
    from mcp_blackbox.analyzer.outputs.call_record import COLUMNS

    analysis = analyze([SAMPLES / "ts-protocol-faults.flows", SAMPLES / "py-2026-stateless.flows"])
    frame = analysis.calls_frame
    assert list(frame.columns) == COLUMNS and len(frame) == len(analysis.calls)
    failing = frame[frame["layer"] == "protocol"]
    assert set(failing["outcome"]) == {"MALFORMED_JSON", "INVALID_ENVELOPE", "INVALID_TOOL_RESULT", "JSONRPC_ERROR"}
    assert frame.groupby("outcome").size()["HTTP_ERROR"] == 1
