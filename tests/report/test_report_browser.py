"""The report in real headless Chromium: it loads clean, filters, opens details, draws every call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.review.report import write_report
from tests.report.layout import column
from tests.support.browser import inspect_report

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("report") / "report.html"
    data = write_report(SAMPLES, path)
    return path, data


def test_report_loads_clean_and_offline(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    seen = inspect_report(path, [
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
        {"do": "count", "selector": "#table-rows .row"},
        {"do": "text", "selector": "#count"},
    ])  # fmt: skip
    assert seen["console_errors"] == [] and seen["page_errors"] == [] and seen["dialogs"] == []
    assert seen["requests"] == [], "a self-contained report loads nothing"
    assert seen["ready_ms"] is not None
    bars, rows, count = (r["value"] for r in seen["results"])
    assert int(bars) == len(data["calls"]), "one bar per call"
    assert rows > 10 and count == f"{len(data['calls'])} of {len(data['calls'])} calls"


def test_filter_narrows_the_table(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    expected = column(data, "outcome").count("HTTP_ERROR")
    seen = inspect_report(path, [
        {"do": "select", "selector": "#f-outcome", "value": "HTTP_ERROR"},
        {"do": "count", "selector": "#table-rows .row"},
        {"do": "texts", "selector": "#table-rows .row .pill"},
        {"do": "fill", "selector": "#search", "value": "write_record"},
        {"do": "texts", "selector": "#table-rows .row span:nth-child(6)"},  # the tool column
    ])  # fmt: skip
    _, count, pills, _, tools = (r["value"] for r in seen["results"])
    assert 0 < expected < len(data["calls"]) and count == expected
    assert set(pills) == {"HTTP_ERROR"}
    assert tools and set(tools) == {"write_record"}


def test_click_opens_the_details_of_a_call(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    groups = column(data, "group")
    target = next(call_id for call_id, group in zip(column(data, "id"), groups, strict=True) if group)
    seen = inspect_report(path, [
        {"do": "fill", "selector": "#search", "value": target},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{target}"]'},
        {"do": "text", "selector": "#details h3"},
        {"do": "count", "selector": "#details .evidence li"},
        {"do": "count", "selector": "#details table.retry"},
        {"do": "count", "selector": "#details pre"},
    ])  # fmt: skip
    assert all(r["ok"] for r in seen["results"]), seen["results"]
    _, _, title, evidence, retry, bodies = (r["value"] for r in seen["results"])
    assert title.startswith(target + " ")
    assert evidence == len(data["details"][target]["evidence"]) > 0
    assert retry == 1 and bodies >= 1
    assert seen["page_errors"] == []


def test_report_data_is_escaped_for_the_script_element(sample_report: tuple[Path, dict[str, Any]]) -> None:
    html = sample_report[0].read_text()
    start = html.index('<script type="application/json" id="report-data">') + 49
    payload = html[start : html.index("</script>", start)]
    assert "<" not in payload and ">" not in payload
    assert json.loads(payload)["meta"]["calls"] == len(sample_report[1]["calls"])
