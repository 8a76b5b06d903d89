"""The report of a huge capture, in real headless Chromium: above a number of calls the uneventful ones
(success, no flag, no retry chain, no repeated run) are folded per lane and time bucket, and every other call
keeps its row, its details, its filters and its search. The threshold is lowered here (``aggregate_above``) so
that a capture of 2,000 synthetic calls triggers it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.model.noteworthy import noteworthy
from mcp_blackbox.analyzer.model.vocabulary import is_failure
from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.review.report import write_report
from tests.benchmarks import synthetic_capture
from tests.report.layout import anatomies, column
from tests.support.browser import inspect_report

CALLS = 2000
THRESHOLD = 500
COUNT = "document.getElementById('count').textContent"
ROW_IDS = "Array.from(document.querySelectorAll('#table-rows .row:not(.aggregate)')).map(r => r.dataset.callId)"
AGG_ROWS = "document.querySelectorAll('#table-rows .row.aggregate').length"
DETAILS_ID = "document.getElementById('details').dataset.callId || null"
VISIBLE = "window.__report.visible()"
AGG_TOTAL = "window.__report.aggregates().reduce((s, a) => s + a.count, 0)"


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Any]:
    folder = tmp_path_factory.mktemp("aggregated")
    capture = folder / "synthetic.flows"
    synthetic_capture.generate(capture, CALLS, seed=3, clients=4)
    analysis = analyze([capture])
    path = folder / "report.html"
    data = write_report([capture], path, analysis=analysis, aggregate_above=THRESHOLD)
    return path, data, analysis


def eventful(call: Any, duplicates: set[str]) -> bool:
    return noteworthy(call.outcome, call.flags, call.retry_group, call.call_id in duplicates)


def values(seen: dict[str, Any]) -> list[Any]:
    assert seen["page_errors"] == [] and seen["console_errors"] == [] and seen["requests"] == [], seen
    assert all(r["ok"] for r in seen["results"]), seen["results"]
    return [r["value"] for r in seen["results"]]


def test_every_eventful_call_has_a_row_and_the_aggregates_count_the_others(
    huge: tuple[Path, dict[str, Any], Any],
) -> None:
    _, data, analysis = huge
    duplicates = {c.call_id for d in analysis.duplicate_executions for c in d.calls}
    calls = analysis.call_objects
    wanted = [c.call_id for c in calls if eventful(c, duplicates)]
    quiet = [c for c in calls if not eventful(c, duplicates)]
    assert len(calls) > THRESHOLD and wanted and quiet
    assert column(data, "id") == wanted, "one row per eventful call, in the analysis' order"
    assert {c.call_id for c in calls if is_failure(c.outcome)} <= set(wanted), "no failure is aggregated"
    counts = data["aggregate_columns"].index("count")
    assert sum(a[counts] for a in data["aggregates"]) == len(quiet) == data["meta"]["aggregated"]
    assert data["meta"]["calls"] == len(calls), "the header counts every call"
    lanes = {a[0] for a in data["aggregates"]}
    assert lanes <= set(range(len(data["lanes"])))
    per_bucket = {(a[0], int(a[1] // data["meta"]["bucket_ms"])) for a in data["aggregates"]}
    assert len(per_bucket) <= len(data["aggregates"])
    assert set(data["details"]) <= set(wanted) and set(anatomies(data)) <= set(wanted)


def test_below_the_threshold_every_call_has_its_row(tmp_path: Path, huge: tuple[Path, dict[str, Any], Any]) -> None:
    path, _, analysis = huge
    capture = path.with_name("synthetic.flows")
    full = write_report([capture], tmp_path / "r.html", analysis=analysis, aggregate_above=len(analysis.call_objects))
    assert len(full["calls"]) == len(analysis.call_objects) and full["aggregates"] == []
    assert full["meta"]["aggregated"] == 0 and "aggregated-note" not in (tmp_path / "r.html").read_text()


def test_the_page_says_how_many_calls_are_aggregated_and_that_the_export_has_them_all(
    huge: tuple[Path, dict[str, Any], Any],
) -> None:
    path, data, _ = huge
    aggregated, rows = data["meta"]["aggregated"], len(data["calls"])
    seen = inspect_report(path, [
        {"do": "text", "selector": "#aggregated-note"},
        {"do": "eval", "expression": COUNT},
        {"do": "eval", "expression": AGG_TOTAL},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.aggregateBars"},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
    ])  # fmt: skip
    note, count, total, agg_bars, bars = values(seen)
    assert f"{aggregated} uneventful calls are aggregated" in note and "mcp-blackbox export" in note
    assert f"{rows} calls" in note
    assert (
        count == f"{rows} of {rows} eventful calls, {aggregated} of {aggregated} uneventful calls in "
        f"{len(data['aggregates'])} summary rows"
    )
    assert total == aggregated, "the aggregate rows hold every uneventful call"
    assert int(agg_bars) > 0 and int(bars) > 0, "both drawn in the lanes in view"


def test_every_failing_call_is_listed_and_opens_its_details(huge: tuple[Path, dict[str, Any], Any]) -> None:
    path, data, _ = huge
    outcomes = dict(zip(column(data, "id"), column(data, "outcome"), strict=True))
    failing = [call_id for call_id, outcome in outcomes.items() if is_failure(outcome)]
    by_outcome: dict[str, str] = {}
    for call_id in failing:
        by_outcome.setdefault(outcomes[call_id], call_id)
    actions: list[dict[str, Any]] = [{"do": "eval", "expression": VISIBLE}]
    for call_id in by_outcome.values():
        actions += [
            {"do": "fill", "selector": "#search", "value": call_id},
            {"do": "click", "selector": f'#table-rows .row[data-call-id="{call_id}"]'},
            {"do": "eval", "expression": DETAILS_ID},
            {"do": "count", "selector": "#details .evidence li"},
        ]
    got = values(inspect_report(path, actions, timeout=120))
    assert set(failing) <= set(got[0]) and len(got[0]) == len(data["calls"])
    assert len(by_outcome) >= 4, by_outcome
    for n, call_id in enumerate(by_outcome.values()):
        _, _, opened, evidence = got[1 + 4 * n : 5 + 4 * n]
        assert opened == call_id and evidence >= 1


def test_filters_and_search_work_on_the_eventful_rows(huge: tuple[Path, dict[str, Any], Any]) -> None:
    path, data, _ = huge
    ids, outcomes, flags = column(data, "id"), column(data, "outcome"), column(data, "flags")
    errors = [i for i, o in zip(ids, outcomes, strict=True) if o == "HTTP_ERROR"]
    flag = next(f.split()[0] for f in flags if f)
    flagged = [i for i, f in zip(ids, flags, strict=True) if flag in f.split()]
    target = errors[len(errors) // 2]
    seen = inspect_report(path, [
        {"do": "select", "selector": "#f-outcome", "value": "HTTP_ERROR"},
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": AGG_ROWS},
        {"do": "select", "selector": "#f-outcome", "value": ""},
        {"do": "select", "selector": "#f-flag", "value": flag},
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": AGG_ROWS},
        {"do": "select", "selector": "#f-flag", "value": ""},
        {"do": "fill", "selector": "#search", "value": target},
        {"do": "eval", "expression": ROW_IDS},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "eval", "expression": AGG_ROWS},
        {"do": "fill", "selector": "#search", "value": ""},
        {"do": "select", "selector": "#f-outcome", "value": "TOOL_SUCCESS"},
        {"do": "eval", "expression": AGG_ROWS},
    ])  # fmt: skip
    got = values(seen)
    assert got[1] == errors and got[2] == 0, "an outcome filter on a failure shows its calls, no summary row"
    assert got[5] == flagged and got[6] == 0, "flagged calls are never aggregated"
    assert got[9] == [target] and got[10] == target and got[11] == 0, "search finds an eventful call by id"
    assert got[14] > 0, "a success outcome also shows the summary rows that hold such calls"


def test_a_summary_row_and_an_aggregate_bar_open_the_summary(huge: tuple[Path, dict[str, Any], Any]) -> None:
    path, data, _ = huge
    bar = (
        "(() => { const b = window.__report.aggregateBars()[0]; "
        "return [(b.x0 + b.x1) / 2, b.y + b.h / 2, b.aggregate]; })()"
    )
    seen = inspect_report(path, [
        {"do": "click", "selector": "#table-rows .row.aggregate"},
        {"do": "text", "selector": "#details h3"},
        {"do": "text", "selector": "#details .aggregate-note"},
        {"do": "eval", "expression": "document.getElementById('details').dataset.aggregate"},
        {"do": "eval", "expression": bar},
    ])  # fmt: skip
    _, title, note, index, (x, y, k) = values(seen)
    count = data["aggregates"][int(index)][data["aggregate_columns"].index("count")]
    assert title.startswith(f"Σ {count} uneventful call") and "mcp-blackbox export" in note
    seen = inspect_report(path, [
        {"do": "mouse", "selector": "#timeline", "points": [[x, y]]},
        {"do": "eval", "expression": "document.getElementById('details').dataset.aggregate"},
        {"do": "eval", "expression": DETAILS_ID},
    ])  # fmt: skip
    _, clicked, call = values(seen)
    assert call is None and clicked is not None
    assert int(clicked) == k or data["aggregates"][int(clicked)][0] == data["aggregates"][k][0]
