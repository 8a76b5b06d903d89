"""The live verdict, the console line and the addon's write wait until the response has been passed on
(addon/after_response.py), and still reach the file in order, at shutdown too."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow
from mitmproxy.test import taddons

from mcp_blackbox.addon.after_response import AfterResponse
from mcp_blackbox.addon.mcp_recorder import FAILURE_MARKER, METADATA_KEY, McpRecorder
from mcp_blackbox.addon.rotation import CaptureWriter
from tests.analyzer.flows import error, exchange, tool_call


def read(path: Path) -> list[HTTPFlow]:
    with path.open("rb") as f:
        return [f for f in flow_io.FlowReader(f).stream() if isinstance(f, HTTPFlow)]


def test_work_runs_in_the_loops_next_step_in_order() -> None:
    after, ran = AfterResponse(), []

    async def hook() -> list[str]:
        after.defer(lambda: ran.append("first"))
        after.defer(lambda: ran.append("second"))
        seen_by_the_hook = list(ran)
        await asyncio.sleep(0)
        return seen_by_the_hook

    assert asyncio.run(hook()) == [], "nothing runs before the hook has returned"
    assert ran == ["first", "second"]


def test_a_failing_piece_of_work_is_logged_and_the_rest_runs(caplog: pytest.LogCaptureFixture) -> None:
    after, ran = AfterResponse(), []

    def broken() -> None:
        raise ValueError("boom")

    async def hook() -> None:
        after.defer(broken)
        after.defer(lambda: ran.append("after it"))
        await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="mcp_blackbox"):
        asyncio.run(hook())
    assert ran == ["after it"]
    assert any("failed after the response" in r.getMessage() for r in caplog.records)


def test_without_a_loop_work_runs_at_once() -> None:
    after, ran = AfterResponse(), []
    after.defer(lambda: ran.append(1))
    assert ran == [1]


def test_the_flow_is_written_in_the_hook_and_judged_after_it(tmp_path: Path) -> None:
    """The write is the capture (a recorder killed after a response was passed on still has the flow); the
    verdict, the mark and the console line come once the hook has returned."""
    recorder, writer, path = McpRecorder(), CaptureWriter(), tmp_path / "capture.flows"
    failing = exchange(tool_call(1, "echo"), body=error(1))
    with taddons.context(recorder, writer) as tctx:
        tctx.configure(recorder, mcp_console=False, mcp_client_process=False)
        tctx.configure(writer, mcp_write=str(path))
        writer.running()

        async def hooks_as_mitmproxy_calls_them() -> dict[str, object]:
            writer.request(failing)
            recorder.response(failing)
            writer.response(failing)
            # What the hooks left when they returned, that is when mitmproxy passed the response on:
            left = {"record": dict(failing.metadata[METADATA_KEY]), "marked": failing.marked, "written": read(path)}
            await asyncio.sleep(0)
            return left

        left = asyncio.run(hooks_as_mitmproxy_calls_them())
        writer.done()
    record = left["record"]
    assert isinstance(record, dict) and record == {"version": record["version"], "mcp": "JSON-RPC request body"}
    assert not left["marked"]
    (written,) = left["written"]  # type: ignore[misc]
    assert written.metadata[METADATA_KEY] == record, "written with the facts, before the verdict"
    assert failing.metadata[METADATA_KEY]["failure"] == "JSONRPC_ERROR: JSON-RPC error -32602: bad"
    assert failing.marked == FAILURE_MARKER


def test_the_flow_goes_to_the_verdict_worker_after_the_hook() -> None:
    """Issue 23: taking the flow's state and sending it to the worker was half of the response hook's time;
    the hook leaves it to the loop's next step, once the response is passed on. The worker is real."""
    recorder = McpRecorder()
    failing = exchange(tool_call(1, "echo"), body=error(1))
    with taddons.context(recorder) as tctx:
        tctx.configure(recorder, mcp_console=False, mcp_client_process=False)

        async def with_the_worker() -> tuple[int, int, bool]:
            await recorder.verdicts.start()
            try:
                recorder.response(failing)
                sent_by_the_hook = recorder.verdicts.sequence
                await asyncio.sleep(0)
                sent_after_it = recorder.verdicts.sequence
                async with asyncio.timeout(20):
                    while "failure" not in failing.metadata[METADATA_KEY]:
                        await asyncio.sleep(0.01)
                return sent_by_the_hook, sent_after_it, recorder.verdicts.failed
            finally:
                recorder.verdicts.close()

        sent_by_the_hook, sent_after_it, worker_failed = asyncio.run(with_the_worker())
    assert (sent_by_the_hook, sent_after_it, worker_failed) == (0, 1, False)
    assert failing.metadata[METADATA_KEY]["failure"] == "JSONRPC_ERROR: JSON-RPC error -32602: bad"
    assert failing.marked == FAILURE_MARKER
