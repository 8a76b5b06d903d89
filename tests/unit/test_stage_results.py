"""A call's outcome, flags and evidence are read from the stages' typed results, in one documented order
(ARCHITECTURE, "The pipeline"): the verdict's evidence, then the findings by stage, whatever order the
stages ran in."""

from __future__ import annotations

import dataclasses

import pytest

from mcp_blackbox.analyzer.model.records import C2S, Call, Exchange, Finding, Message, RetryLink, Stage, Verdict
from mcp_blackbox.analyzer.model.vocabulary import Confidence, Flag, Outcome, RetryOrigin


def a_call() -> Call:
    exchange = Exchange("f1", "a.flows", 0, "POST", "http://x/mcp", "/mcp", "", {}, None, None, 1.0)
    return Call(Message(exchange, C2S, "request", 1, "tools/call", None, 1.0), scope="s")


def test_findings_follow_the_verdict_by_stage_whatever_order_they_came_in() -> None:
    call = a_call()
    call.verdict = Verdict(Outcome.TOOL_SUCCESS, ("POST /mcp", "HTTP 200"), (Flag.SUSPECT_SOFT_ERROR,))
    call.found(Finding(Stage.EXECUTIONS, "ran again", Flag.DUPLICATE_EXECUTION))
    call.found(Finding(Stage.RETRIES, "retried unchanged"))
    call.found(Finding(Stage.PAIRING, "id 1 was used before", Flag.ID_REUSED))
    call.found(Finding(Stage.RETRIES, "then this"))
    assert call.evidence == (
        "POST /mcp", "HTTP 200", "id 1 was used before", "retried unchanged", "then this", "ran again"
    )  # fmt: skip
    assert call.flags == tuple(sorted([Flag.DUPLICATE_EXECUTION, Flag.ID_REUSED, Flag.SUSPECT_SOFT_ERROR]))
    assert call.outcome is Outcome.TOOL_SUCCESS and call.layer is Outcome.TOOL_SUCCESS.layer


def test_an_unjudged_call_has_no_outcome_and_no_link_reads_as_a_first_attempt() -> None:
    call = a_call()
    assert call.outcome is None and call.flags == () and call.evidence == ()
    assert (call.retry_group, call.attempt, call.retry_origin) == (None, 1, None)
    call.link = RetryLink("r3", 2, RetryOrigin.APP_RETRY, Confidence.HIGH)
    assert (call.retry_group, call.attempt, call.retry_origin, call.retry_confidence) == (
        "r3", 2, RetryOrigin.APP_RETRY, Confidence.HIGH
    )  # fmt: skip


def test_results_are_frozen() -> None:
    verdict = Verdict(Outcome.SUCCESS, ("result",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.outcome = Outcome.TOOL_ERROR  # type: ignore[misc]
