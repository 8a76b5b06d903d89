"""The live verdict's worker process (addon/verdict_worker.py): the same verdicts as the recorder's own
judging, in order, and nothing lost when the process dies."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from mitmproxy.http import HTTPFlow

from mcp_blackbox.addon import verdict_process, verdict_worker
from mcp_blackbox.addon.verdict_worker import VerdictWorker
from mcp_blackbox.analyzer.calls.live import LiveVerdict, judge_flow
from tests.analyzer.flows import error, exchange, result, text_result, tool_call


def flows() -> list[HTTPFlow]:
    return [
        exchange(tool_call(1, "echo"), body=error(1)),
        exchange(tool_call(2, "echo"), body=result(2, text_result())),
        exchange(tool_call(3, "echo"), body=result(3, text_result("boom", isError=True))),
        exchange(tool_call(4, "echo"), status=202, body=None),
        exchange(tool_call(5, "echo"), status=503, body=None),
    ]


async def judged_by_the_worker(worker: VerdictWorker, sent: list[HTTPFlow]) -> list[LiveVerdict | None]:
    answers: dict[int, LiveVerdict | None] = {}
    done = asyncio.Event()

    def answer_for(i: int) -> object:
        def answer(verdict: LiveVerdict | None) -> None:
            answers[i] = verdict
            if len(answers) == len(sent):
                done.set()

        return answer

    assert all(worker.judge(flow, answer_for(i)) for i, flow in enumerate(sent))  # type: ignore[arg-type]
    async with asyncio.timeout(20):
        await done.wait()
    return [answers[i] for i in range(len(sent))]


def test_the_worker_judges_as_the_recorder_would() -> None:
    sent = flows()

    async def scenario() -> tuple[list[LiveVerdict | None], int, int]:
        worker = VerdictWorker()
        await worker.start()
        try:
            verdicts = await judged_by_the_worker(worker, sent)
            assert worker.process is not None
            pid = worker.process.pid
            return verdicts, os.getpriority(os.PRIO_PROCESS, pid), os.sched_getscheduler(pid)
        finally:
            worker.close()

    verdicts, niceness, policy = asyncio.run(scenario())
    # It yields the CPU to the traffic and the process lookup (it had answered, so it had lowered itself).
    assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + verdict_process.PRIORITY)
    assert policy == os.SCHED_IDLE, "it runs on what the traffic leaves, never preempting it"
    assert verdicts == [judge_flow(flow) for flow in sent]
    assert [v.failed for v in verdicts if v is not None] == [True, False, True, False, True]
    assert verdicts[3] is not None and verdicts[3].pending, "202: the answer comes on the session's stream"


def test_a_worker_that_dies_leaves_its_flows_to_the_recorder(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[list[LiveVerdict | None], bool]:
        worker = VerdictWorker()
        await worker.start()
        assert worker.process is not None
        worker.process.kill()
        sent = flows()
        answers: list[LiveVerdict | None] = []
        for flow in sent:
            if not worker.judge(flow, answers.append):
                answers.append(judge_flow(flow))  # what the recorder does with a flow not taken
        async with asyncio.timeout(20):
            while len(answers) < len(sent):
                await asyncio.sleep(0.01)
        taken_after = worker.judge(sent[0], answers.append)
        worker.close()
        return answers, taken_after

    with caplog.at_level(logging.WARNING, logger="mcp_blackbox"):
        answers, taken_after = asyncio.run(scenario())
    # Each flow answered once: by the worker's None (judge it here) or judged by the recorder at once.
    assert len(answers) == 5 and not taken_after
    assert any("the verdict worker stopped" in r.getMessage() for r in caplog.records)


def test_without_a_loop_nothing_is_sent() -> None:
    assert not VerdictWorker().judge(flows()[0], lambda verdict: None)


def test_a_worker_behind_gets_no_more_flows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flows waiting for its answers are bounded: beyond, the recorder judges them itself."""
    monkeypatch.setattr(verdict_worker, "MAX_WAITING", 2)
    sent = flows()

    async def scenario() -> list[bool]:
        worker = VerdictWorker()
        await worker.start()
        try:
            return [worker.judge(flow, lambda verdict: None) for flow in sent]  # none answered yet: no await
        finally:
            worker.close()

    assert asyncio.run(scenario()) == [True, True, False, False, False]
