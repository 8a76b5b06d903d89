"""One "noteworthy call" predicate (analyzer/model/noteworthy.py): the report's rows in a folded capture,
the calls whose bytes the report carries first, and the terminal summary's calls to look at are the same
calls, on every sample capture. Issue 20: the report's two copies disagreed, so the first run of a write
executed twice could get no details."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.review import report
from mcp_blackbox.analyzer.review.summary_text import summary_text
from tests.analyzer.test_duplicate_execution import app_loop_re_run

SAMPLES = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: Path(p).stem)
def test_the_report_and_the_summary_agree_on_which_calls_are_noteworthy(sample: str) -> None:
    analysis = analyze([sample])
    rows, folded = report._split_quiet_calls(analysis, aggregate_above=0)
    noteworthy = {c.call_id for c in rows}
    assert noteworthy.isdisjoint(c.call_id for c in folded)
    ranked = report._worth_opening(analysis.call_objects, report.ran_more_than_once(analysis))
    assert set(list(ranked)[: len(noteworthy)]) == noteworthy, "the details carry every noteworthy call first"
    listed = set(re.findall(r"^  (c[0-9a-f]{12}\S*) ", summary_text(analyze([sample]), width=200), re.M))
    assert listed == noteworthy


def test_the_first_run_of_a_write_executed_twice_is_noteworthy(tmp_path: Path) -> None:
    """The first write of an application loop that re-ran its sequence succeeded, unflagged, in no chain."""
    analysis = app_loop_re_run(tmp_path)
    (duplicate,) = analysis.duplicate_executions
    first = duplicate.calls[0]
    assert not first.flags and first.retry_group is None and first.outcome == "TOOL_SUCCESS"
    rows, _ = report._split_quiet_calls(analysis, aggregate_above=0)
    assert first in rows
    ranked = list(report._worth_opening(analysis.call_objects, report.ran_more_than_once(analysis)))
    assert ranked.index(first.call_id) < len(rows), "its bytes come before those of any uneventful call"
