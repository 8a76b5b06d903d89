"""The recorder's live verdict and the offline analysis agree on every sample flow.

The addon judges each exchange as it ends (``analyzer.live``); the analysis judges every call
with the whole capture in view. For every flow of every sample capture: when the live verdict
says FAILED, the analysis failed a call of that exchange; when it says nothing, the analysis
failed none; *pending* (an answer that can still come on another exchange) is allowed only
where the analysis saw the answer arrive elsewhere or saw none at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mitmproxy import io as flow_io

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.calls.live import judge_flow
from mcp_blackbox.analyzer.model.records import C2S, Call
from mcp_blackbox.analyzer.model.vocabulary import Flag, is_failure

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


def answered_elsewhere(call: Call) -> bool:
    return Flag.LATE_RESPONSE in call.flags or any(m.exchange is not call.exchange for m in call.responses)


@pytest.mark.parametrize("capture", SAMPLES, ids=lambda p: p.name)
def test_live_verdict_matches_the_analysis(capture: Path) -> None:
    analysis = analyze([capture])
    calls_by_flow: dict[str, list[Call]] = {}
    for call in analysis.call_objects:
        if call.direction == C2S:
            calls_by_flow.setdefault(call.exchange.flow_id, []).append(call)
    analyzed = {exchange.flow_id for exchange in analysis.exchanges}
    judged = 0
    with capture.open("rb") as handle:
        for flow in flow_io.FlowReader(handle).stream():
            if flow.id not in analyzed:
                continue
            judged += 1
            live = judge_flow(flow)  # as the addon calls it
            calls = calls_by_flow.get(flow.id, [])
            failed = [c for c in calls if is_failure(c.outcome)]
            where = f"{flow.request.method} {flow.request.path} -> {[(c.method, c.outcome) for c in calls]}"
            if live.failed:
                assert failed, f"live says {live.text}, the analysis no failure: {where}"
            elif live.pending:
                assert all(is_failure(c.outcome) or answered_elsewhere(c) for c in calls), where
            else:
                assert not failed, f"live says nothing, the analysis {[c.outcome for c in failed]}: {where}"
    assert judged == len(analyzed)


def test_live_verdict_fails_what_the_analysis_fails_in_the_faults_capture() -> None:
    """The protocol-faults capture holds failures in every layer: the live verdict names the same outcomes."""
    capture = next(p for p in SAMPLES if p.name == "ts-protocol-faults.flows")
    analysis = analyze([capture])
    expected = {
        c.exchange.flow_id: str(c.outcome)
        for c in analysis.call_objects
        if c.direction == C2S and is_failure(c.outcome)
    }
    seen = {}
    with capture.open("rb") as handle:
        for flow in flow_io.FlowReader(handle).stream():
            live = judge_flow(flow)
            if live.failed:
                assert live.reason is not None
                seen[flow.id] = live.reason.split(":", 1)[0]
    assert len(expected) >= 3
    assert seen == expected
