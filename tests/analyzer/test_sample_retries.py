"""Retry origins on real captures: every origin the official SDK clients produce here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze

SAMPLES = Path(__file__).resolve().parents[2] / "sample_captures"


def groups_of(name: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    analysis = analyze([SAMPLES / f"{name}.flows"])
    return [g.record() for g in analysis.retry_groups], {c["call_id"]: c for c in analysis.calls}


@pytest.mark.parametrize(
    ("name", "origin", "confidence", "methods", "failure_retry"),
    [
        ("ts-2025-resume-after-cut", "transport-resume", "high", ["tools/call"], True),
        ("py-protocol-fallback", "protocol-fallback", "high", ["server/discover", "initialize"], False),
        # Recorded before the recorder named processes: the fresh session began about 1 s after the first went
        # quiet, as long as a new process takes to start, so it may be the next run (low). With the process
        # recorded, medium and high (test_a_recorded_process_makes_the_samples_links_sure).
        ("py-app-retry-after-503", "app-retry", "low", ["tools/call", "tools/call"], True),
        ("py-session-expired", "session-reinit", "low", ["tools/call", "tools/call"], True),
        ("py-2026-stateless", "mrtr-round", "high", ["tools/call", "tools/call"], False),
        ("py-auth-retry", "auth-retry", "high", ["initialize", "initialize"], True),
    ],
)
def test_origin_of_each_real_retry(
    name: str, origin: str, confidence: str, methods: list[str], failure_retry: bool
) -> None:
    groups, calls = groups_of(name)
    (group,) = groups
    assert (group["origin"], group["confidence"]) == (origin, confidence)
    assert [calls[m]["method"] for m in group["members"]] == methods
    assert group["failure_retry"] is failure_retry
    for attempt, member in enumerate(group["members"], 1):
        assert (calls[member]["retry_group"], calls[member]["attempt"]) == (group["retry_group"], attempt)
    assert calls[group["members"][-1]]["retry_origin"] == origin


@pytest.mark.parametrize(
    ("name", "origin", "confidence"),
    [("py-app-retry-after-503", "app-retry", "medium"), ("py-session-expired", "session-reinit", "high")],
)
def test_a_recorded_process_makes_the_samples_links_sure(
    tmp_path: Path, name: str, origin: str, confidence: str
) -> None:
    """The same sample, as the recorder writes it now: every flow names the one process that sent it."""
    from mitmproxy import io as flow_io

    from tests.analyzer.flows import from_process, write

    with (SAMPLES / f"{name}.flows").open("rb") as stream:
        flows = list(flow_io.FlowReader(stream).stream())
    analysis = analyze([write(tmp_path, *from_process(4242, *flows))])  # type: ignore[arg-type]
    (group,) = [g.record() for g in analysis.retry_groups]
    assert (group["origin"], group["confidence"]) == (origin, confidence)
    assert not any("next run" in e for e in group["evidence"])


def test_app_retry_groups_the_same_id_across_sessions_and_the_503_ran_nothing() -> None:
    (group,), calls = groups_of("py-app-retry-after-503")
    first, second = (calls[m] for m in group["members"])
    assert first["jsonrpc_id"] == second["jsonrpc_id"] == 4 and first["scope"] != second["scope"]
    assert (first["outcome"], second["outcome"]) == ("HTTP_ERROR", "TOOL_SUCCESS")
    # The fault layer's 503 answered before the server had the request: it ran nothing (issue 21), so the
    # re-send ran the write once and was safe.
    assert second["flags"] == [] and group["safety"] == "safe"
    assert group["may_have_run_twice"] is False


def test_no_retry_is_invented_in_clean_captures() -> None:
    for name in ("py-2025-session-tools", "ts-2025-session-tools", "py-2024-legacy-sse", "ts-protocol-faults"):
        groups, _ = groups_of(name)
        assert groups == [], name
