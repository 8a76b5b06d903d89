"""One "noteworthy call" predicate (analyzer/model/noteworthy.py): the report's rows in a folded capture,
the calls whose bytes the report carries first, and the terminal summary's calls to look at are the same
calls, on every sample capture. Issue 20: the report's two copies disagreed, so the first run of a write
executed twice could get no details. Issue 23: the report is built from a stream, whose calls are final
before a later call shows that one of them ran again; such a call still gets its row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.outputs.analysis import CallStream, analyze
from mcp_blackbox.analyzer.review.report import build_report
from mcp_blackbox.analyzer.review.summary_text import summary_text
from tests.analyzer.test_duplicate_execution import app_loop_re_run

SAMPLES = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


def row_ids(data: dict[str, Any]) -> list[str]:
    return [row[data["columns"].index("id")] for row in data["calls"]]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: Path(p).stem)
def test_the_report_and_the_summary_agree_on_which_calls_are_noteworthy(sample: str) -> None:
    analysis = analyze([sample])
    data = build_report([sample], aggregate_above=0)  # every uneventful call folded
    noteworthy = set(row_ids(data))
    assert len(noteworthy) + data["meta"]["aggregated"] == len(analysis.call_objects)
    assert set(list(data["details"])[: len(noteworthy)]) == noteworthy, "the details carry every noteworthy call"
    listed = set(re.findall(r"^  (c[0-9a-f]{12}\S*) ", summary_text(analysis, width=200), re.M))
    assert listed == noteworthy


@pytest.mark.parametrize("window", [None, 0.3], ids=["whole", "windowed"])
def test_the_first_run_of_a_write_executed_twice_is_noteworthy(tmp_path: Path, window: float | None) -> None:
    """The first write of an application loop that re-ran its sequence succeeded, unflagged, in no chain. With
    a 0.3 s window it is final (and kept) 0.9 s before the write that ran it again is read."""
    analysis = app_loop_re_run(tmp_path)
    (duplicate,) = analysis.duplicate_executions
    first = duplicate.calls[0]
    assert not first.flags and first.retry_group is None and first.outcome == "TOOL_SUCCESS"
    (capture,) = tmp_path.glob("*.flows")
    stream = CallStream([capture], window=window)
    data = build_report([capture], analysis=stream, aggregate_above=0)
    assert first.call_id in row_ids(data), "a row of its own, not folded"
    assert data["meta"]["aggregated"] == len(analysis.call_objects) - len(data["calls"]) > 0, "others are folded"
    assert first.call_id in data["details"], "its bytes are carried"
