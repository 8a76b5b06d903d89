"""The report read at any scale, in real headless Chromium: wall-clock UTC times, idle gaps folded, lanes
grouped, drag-to-zoom, keyboard, card filters, search over bodies, details that follow the filter, retry chains
drawn as attempts, timeout anatomy, and links (the URL fragment) that open the same view."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from mcp_blackbox.analyzer.review.report import write_report
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write
from tests.report.layout import anatomies, column, records
from tests.report.layout import groups as retry_groups
from tests.support.browser import inspect_report

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))
AT = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
BODY_ONLY = "zebra-quokka-17"  # a string only a response body holds
BARS = "window.__report.bars()"
VIEW = "window.__report.view()"
DETAILS_ID = "document.getElementById('details').dataset.callId || null"
COUNT = "document.getElementById('count').textContent"
METHOD_TITLES = "[...document.querySelectorAll('#table-rows .row span:nth-child(5)')].map(s => s.title)"
ROW_IDS = "Array.from(document.querySelectorAll('#table-rows .row')).map(r => r.dataset.callId)"


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("review") / "report.html"
    return path, write_report(SAMPLES, path)


@pytest.fixture(scope="module")
def report_with_a_write_run_twice(
    tmp_path_factory: pytest.TempPathFactory, ran_twice: Path
) -> tuple[Path, dict[str, Any]]:
    """The samples and a write that ran twice: no sample has one (py-app-retry-after-503's 503 ran nothing)."""
    path = tmp_path_factory.mktemp("review-twice") / "report.html"
    return path, write_report([*SAMPLES, ran_twice], path)


def values(seen: dict[str, Any]) -> list[Any]:
    assert seen["page_errors"] == [] and seen["console_errors"] == [] and seen["requests"] == [], seen
    assert all(r["ok"] for r in seen["results"]), seen["results"]
    return [r["value"] for r in seen["results"]]


def burst_capture(tmp_path: Path) -> Path:
    """One call, a 150 s pause, then a burst of 30 sessions of one short call each."""
    flows = [exchange(tool_call(1, "warmup"), body=result(1, text_result()), at=AT, duration=0.05)]
    for n in range(30):
        headers = {"mcp-session-id": f"burst-session-{n:02d}", "user-agent": "burst-client/1"}
        flows.append(exchange(tool_call(n + 2, "burst"), body=result(n + 2, text_result()), request_headers=headers,
                              at=AT + 150 + n * 0.06, duration=0.05))  # fmt: skip
    return write(tmp_path, *flows, name="burst.flows")


def mixed_capture(tmp_path: Path) -> Path:
    """Successes, 503s, a body-only string, a session of its own and an empty server version."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    initialize = rpc(0, "initialize", hello)
    info = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "holdout", "version": ""}}
    session = {"mcp-session-id": "sess-mixed-4711"}
    return write(
        tmp_path,
        exchange(initialize, body=result(0, info), at=AT),
        exchange(tool_call(1, "echo"), body=result(1, text_result(f"the answer is {BODY_ONLY}")), at=AT + 1),
        exchange(tool_call(2, "write"), status=503, body=b"busy", content_type="text/plain", at=AT + 2),
        exchange(tool_call(3, "write"), status=503, body=b"busy", content_type="text/plain", at=AT + 3),
        exchange(tool_call(4, "echo"), body=result(4, text_result("plain")), request_headers=session, at=AT + 4),
        exchange(tool_call(5, "echo"), body=result(5, text_result("plain")), at=AT + 5),
        name="mixed.flows",
    )


def test_a_burst_after_a_long_pause_is_wide_enough_to_click_and_the_toggle_restores_the_scale(tmp_path: Path) -> None:
    report = tmp_path / "burst.html"
    data = write_report([burst_capture(tmp_path)], report)
    burst = [row["id"] for row in records(data) if row["tool"] == "burst"]
    assert len(burst) == 30
    target = burst[14]
    widths = f"Object.fromEntries({BARS}.map(b => [b.id, b.x1 - b.x0]))"
    bar = f"{BARS}.find(b => b.id === '{target}')"
    center = f"(() => {{ const b = {bar}; return [(b.x0 + b.x1) / 2, b.y + b.h / 2]; }})()"
    seen = inspect_report(report, [
        {"do": "eval", "expression": widths},
        {"do": "eval", "expression": center},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.gaps"},
    ])  # fmt: skip
    folded, (x, y), gaps = values(seen)
    assert all(folded[call_id] >= 6 for call_id in burst), {k: folded[k] for k in burst}
    assert "idle" in gaps and "2 min 30 s" in gaps, gaps
    seen = inspect_report(report, [
        {"do": "mouse", "selector": "#timeline", "points": [[x, y]]},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "click", "selector": "#toggle-gaps"},
        {"do": "eval", "expression": widths},
        {"do": "eval", "expression": f"{VIEW}.gapsShown"},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.gaps"},
    ])  # fmt: skip
    _, clicked, _, linear, shown, gaps_after = values(seen)
    assert clicked == target, "a real click on the bar opens that call"
    assert shown is True and gaps_after == ""
    # To scale, 50 ms of a 151 s span is under a pixel: the bars fall back to their 2 px minimum.
    assert all(linear[call_id] < 3 for call_id in burst), {k: linear[k] for k in burst}


def test_lanes_are_grouped_and_a_group_folds_on_click(tmp_path: Path) -> None:
    report = tmp_path / "burst.html"
    data = write_report([burst_capture(tmp_path)], report)
    rows = "window.__report.rows()"
    seen = inspect_report(report, [{"do": "eval", "expression": rows}])
    (before,) = values(seen)
    headers = [r for r in before if r["kind"] == "group"]
    lanes = [r for r in before if r["kind"] == "lane"]
    assert len(lanes) == len(data["lanes"]) == 31 and headers and all("burst.flows" in h["label"] for h in headers)
    assert any(r["label"].startswith("session burst-se") for r in lanes), "lanes named by their session's first digits"
    sizes = {}
    for row in before:
        if row["kind"] == "group":
            header = row["label"]
            sizes[header] = 0
        else:
            sizes[header] += 1
    biggest = next(h for h in headers if sizes[h["label"]] == max(sizes.values()))
    seen = inspect_report(report, [
        {"do": "mouse", "selector": "#timeline", "points": [[60, biggest["y"] + 8]]},
        {"do": "eval", "expression": rows},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
    ])  # fmt: skip
    _, after, bars = values(seen)
    folded = next(r for r in after if r["label"] == biggest["label"])
    assert folded["collapsed"] is True and len(after) < len(before)
    assert int(bars) == len(data["calls"]), "a folded group still draws its calls, in its header row"


def test_wall_clock_times_in_utc_on_the_axis_the_table_the_tooltip_and_the_details(tmp_path: Path) -> None:
    report = tmp_path / "mixed.html"
    data = write_report([mixed_capture(tmp_path)], report)
    first = data["calls"][0][0]
    seen = inspect_report(report, [
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.axis"},
        {"do": "text", "selector": "h2 .tz"},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{first}"]'},
        {"do": "text", "selector": f'#table-rows .row[data-call-id="{first}"] span:nth-child(2)'},
        {"do": "text", "selector": "#details .when"},
    ])  # fmt: skip
    axis, zone, _, start, when = values(seen)
    assert re.search(r"\b22:13:2\d\b", axis), axis
    assert "UTC" in zone
    assert start == "22:13:20.000"
    assert when.startswith("2023-11-14 22:13:20.000 UTC")


def test_header_names_a_server_without_a_version_by_its_name_alone(tmp_path: Path) -> None:
    report = tmp_path / "mixed.html"
    data = write_report([mixed_capture(tmp_path)], report)
    assert data["meta"]["servers"] == ["holdout"]
    html = report.read_text(encoding="utf-8")
    assert "servers: <b>holdout</b>" in html and "holdout/" not in html


def test_search_finds_a_session_a_status_and_a_string_only_a_body_holds(tmp_path: Path) -> None:
    report = tmp_path / "mixed.html"
    data = write_report([mixed_capture(tmp_path)], report)
    status = dict(zip(column(data, "id"), column(data, "status"), strict=True))
    with_503 = {call_id for call_id, s in status.items() if s == 503}
    echo_body = next(row["id"] for row in records(data) if row["rpc_id"] == 1)
    in_session = next(row["id"] for row in records(data) if row["rpc_id"] == 4)
    seen = inspect_report(report, [
        {"do": "fill", "selector": "#search", "value": "sess-mixed-4711"},
        {"do": "eval", "expression": ROW_IDS},
        {"do": "fill", "selector": "#search", "value": "503"},
        {"do": "eval", "expression": ROW_IDS},
        {"do": "fill", "selector": "#search", "value": BODY_ONLY.upper()},
        {"do": "eval", "expression": ROW_IDS},
        {"do": "eval", "expression": DETAILS_ID},
    ])  # fmt: skip
    _, session_rows, _, status_rows, _, body_rows, shown = values(seen)
    assert session_rows == [in_session]
    assert len(with_503) == 2 and with_503 <= set(status_rows) and len(status_rows) < len(status)
    assert body_rows == [echo_body] and shown == echo_body


def test_outcome_cards_filter_the_table_and_timeline_and_clear_on_a_second_click(
    sample_report: tuple[Path, dict[str, Any]],
) -> None:
    path, data = sample_report
    total = len(data["calls"])
    expected = column(data, "outcome").count("HTTP_ERROR")
    seen = inspect_report(path, [
        {"do": "click", "selector": '.card[data-outcome="HTTP_ERROR"]'},
        {"do": "eval", "expression": COUNT},
        {"do": "texts", "selector": "#table-rows .row .pill"},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
        {"do": "eval", "expression": "document.querySelector('.card.active').dataset.outcome"},
        {"do": "eval", "expression": "location.hash"},
        {"do": "click", "selector": '.card[data-outcome="HTTP_ERROR"]'},
        {"do": "eval", "expression": COUNT},
    ])  # fmt: skip
    _, count, pills, bars, active, hash_, _, cleared = values(seen)
    assert 0 < expected < total
    assert count == f"{expected} of {total} calls" and set(pills) == {"HTTP_ERROR"} and int(bars) == expected
    assert active == "HTTP_ERROR" and "outcome=HTTP_ERROR" in hash_
    assert cleared == f"{total} of {total} calls"


def test_the_ran_more_than_once_card_and_filter_show_its_calls(
    report_with_a_write_run_twice: tuple[Path, dict[str, Any]],
) -> None:
    """One card and one filter family: "ran more than once", either certainty, certain, possible."""
    path, data = report_with_a_write_run_twice
    certainty = data["meta"]["ran_more_than_once_calls"]
    assert certainty
    by = {c: {i for i, v in certainty.items() if v == c} for c in ("certain", "possible")}
    seen = inspect_report(path, [
        {"do": "click", "selector": '.card[data-set="ran-twice"]'},
        {"do": "eval", "expression": "window.__report.visible()"},
        {"do": "select", "selector": "#f-set", "value": "ran-twice-possible"},
        {"do": "eval", "expression": "window.__report.visible()"},
        {"do": "select", "selector": "#f-set", "value": "ran-twice-certain"},
        {"do": "eval", "expression": "window.__report.visible()"},
        {"do": "click", "selector": '.card[data-set=""]'},
        {"do": "eval", "expression": COUNT},
        {"do": "eval", "expression": "[...document.querySelectorAll('#f-set option')].map(o => o.textContent)"},
        {"do": "eval", "expression": "document.querySelector('.card[data-set=\"ran-twice\"]').title"},
    ])  # fmt: skip
    _, either, _, possible, _, certain, _, count, options, title = values(seen)
    assert set(either) == set(certainty)
    assert set(possible) == by["possible"] and set(certain) == by["certain"]
    assert count.startswith(f"{len(data['calls'])} of")
    assert [o for o in options if "more than once" in o] == [
        "ran more than once", "ran more than once · certain", "ran more than once · possible",
    ]  # fmt: skip
    assert not any("unsafe" in o or "twice" in o or "executed" in o for o in options), options
    descriptions = {c["name"]: c["description"] for c in data["vocabulary"]["certainties"]}
    assert descriptions["certain"] in title and descriptions["possible"] in title


def test_the_flags_that_feed_ran_more_than_once_are_pills_not_flag_filters(tmp_path: Path, ran_twice: Path) -> None:
    """DUPLICATE_EXECUTION and UNSAFE_RETRY stay in the export, but the page shows the one answer instead: a pill
    "ran more than once · possible" on each attempt, no flag card, no flag filter, no flag in the verdict."""
    report = tmp_path / "retry.html"
    data = write_report([ran_twice], report)
    assert {"UNSAFE_RETRY", "DUPLICATE_EXECUTION"} <= set(data["meta"]["flags"])
    seen = inspect_report(report, [
        {"do": "count", "selector": ".card[data-flag]"},
        {"do": "eval", "expression": "[...document.querySelectorAll('#f-flag option')].map(o => o.value)"},
        {"do": "texts", "selector": "#table-rows .row span:nth-child(9)"},
        {"do": "texts", "selector": "#table-rows .row .pill.twice"},
        {"do": "eval", "expression": "document.body.innerText"},
    ])  # fmt: skip
    cards, flag_options, verdicts, pills, text = values(seen)
    assert cards == 0 and flag_options == [""]
    assert verdicts and not any("UNSAFE_RETRY" in v or "DUPLICATE_EXECUTION" in v for v in verdicts)
    assert pills == ["ran more than once · possible"] * len(data["meta"]["ran_more_than_once_calls"])
    legend = text[text.index("How to read it") :]
    assert "UNSAFE_RETRY" not in text.replace(legend, "") and "DUPLICATE_EXECUTION" not in legend


def test_a_link_opens_the_same_call_and_filters_and_selecting_rewrites_it(
    sample_report: tuple[Path, dict[str, Any]],
) -> None:
    path, data = sample_report
    status = column(data, "status")
    errors = [
        row["id"] for row, s in zip(records(data), status, strict=True) if row["outcome"] == "HTTP_ERROR" and s == 503
    ]
    target = errors[-1]
    other = next(row["id"] for row in records(data) if row["outcome"] == "HTTP_ERROR" and row["id"] != target)
    fragment = f"#call={target}&outcome=HTTP_ERROR&q=503&zoom=0~600000"
    seen = inspect_report(path, [
        {"do": "open", "fragment": fragment},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "eval", "expression": "['f-outcome', 'search'].map(id => document.getElementById(id).value)"},
        {"do": "eval", "expression": ROW_IDS},
        {"do": "eval", "expression": VIEW},
        {"do": "eval", "expression": "document.querySelector('#table-rows .row.selected').dataset.callId"},
        {"do": "fill", "selector": "#search", "value": ""},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{other}"]'},
        {"do": "eval", "expression": "location.hash"},
        {"do": "eval", "expression": DETAILS_ID},
    ])  # fmt: skip
    _, opened, filters, rows, view, highlighted, _, _, hash_, now = values(seen)
    assert opened == target and highlighted == target
    assert filters == ["HTTP_ERROR", "503"]
    assert target in rows and all(
        r in {row["id"] for row in records(data) if row["outcome"] == "HTTP_ERROR"} for r in rows
    )
    assert abs(view["from"]) < 1 and abs(view["to"] - 600_000) < 1
    params = parse_qs(hash_[1:])
    assert params["call"] == [other] and now == other and params["outcome"] == ["HTTP_ERROR"] and "q" not in params


def test_drag_zooms_to_the_range_and_reset_zoom_undoes_it(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    seen = inspect_report(path, [
        {"do": "eval", "expression": VIEW},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
        {"do": "mouse", "selector": "#timeline", "points": [[400, 30], [520, 40], [640, 40]]},
        {"do": "eval", "expression": VIEW},
        {"do": "eval", "expression": "document.getElementById('timeline').dataset.bars"},
        {"do": "eval", "expression": "location.hash"},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "click", "selector": "#reset-zoom"},
        {"do": "eval", "expression": VIEW},
    ])  # fmt: skip
    before, bars_before, _, after, bars_after, hash_, selected, _, reset = values(seen)
    assert after["to"] - after["from"] < (before["to"] - before["from"]) / 3
    assert before["from"] <= after["from"] < after["to"] <= before["to"]
    assert int(bars_after) < int(bars_before) == len(data["calls"])
    assert "zoom=" in hash_ and selected is not None, "a drag is no click: the selection stays"
    assert reset == before


def test_shift_drag_pans_without_zooming(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, _ = sample_report
    seen = inspect_report(path, [
        {"do": "eval", "expression": VIEW},
        {"do": "mouse", "selector": "#timeline", "points": [[600, 40], [400, 40]], "modifiers": ["Shift"]},
        {"do": "eval", "expression": VIEW},
    ])  # fmt: skip
    before, _, after = values(seen)
    width = before["to"] - before["from"]
    assert after["from"] > before["from"]
    assert after["to"] - after["from"] == pytest.approx(width, rel=0.05)


def test_keyboard_moves_through_the_table_and_zooms(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    ids = column(data, "id")
    seen = inspect_report(path, [
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{ids[0]}"]'},
        {"do": "press", "selector": "body", "key": "ArrowDown"},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "press", "selector": "body", "key": "j"},
        {"do": "press", "selector": "body", "key": "j"},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "press", "selector": "body", "key": "k"},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "eval", "expression": "document.querySelector('#table-rows .row.selected').dataset.callId"},
        {"do": "eval", "expression": VIEW},
        {"do": "press", "selector": "body", "key": "+"},
        {"do": "eval", "expression": VIEW},
        {"do": "press", "selector": "body", "key": "Escape"},
        {"do": "eval", "expression": VIEW},
        {"do": "press", "selector": "body", "key": "Enter"},
        {"do": "eval", "expression": VIEW},
    ])  # fmt: skip
    got = values(seen)
    assert got[2] == ids[1] and got[5] == ids[3] and got[7] == ids[2] and got[8] == ids[2]
    full, plus, escaped, entered = got[9], got[11], got[13], got[15]
    assert plus["to"] - plus["from"] < (full["to"] - full["from"]) * 0.7
    assert escaped == full
    t0 = column(data, "t0")[2]
    assert entered["from"] <= t0 <= entered["to"] and entered["to"] - entered["from"] < 60_000


def test_details_follow_the_filter(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    outcomes = dict(zip(column(data, "id"), column(data, "outcome"), strict=True))
    seen = inspect_report(path, [
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "select", "selector": "#f-outcome", "value": "SUCCESS"},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "eval", "expression": ROW_IDS},
        {"do": "fill", "selector": "#search", "value": "no call holds this text"},
        {"do": "text", "selector": "#details"},
        {"do": "eval", "expression": DETAILS_ID},
    ])  # fmt: skip
    opened, _, followed, rows, _, empty_text, empty_id = values(seen)
    assert outcomes[opened] != "SUCCESS"
    assert followed == rows[0] and outcomes[followed] == "SUCCESS"
    assert "No call matches" in empty_text and empty_id is None


def test_retry_chain_is_drawn_as_attempts_that_select_each_other(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    group = max(retry_groups(data), key=lambda g: g["attempts"])
    first, second = group["members"][:2]
    seen = inspect_report(path, [
        {"do": "fill", "selector": "#search", "value": first},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{first}"]'},
        {"do": "eval", "expression": "[...document.querySelectorAll('#details .attempt')].map(a => a.dataset.callId)"},
        {"do": "eval", "expression": "getComputedStyle(document.querySelector('#details .attempt')).borderLeftColor"},
        {"do": "click", "selector": f'#details .attempt[data-call-id="{second}"]'},
        {"do": "eval", "expression": DETAILS_ID},
        {"do": "eval", "expression": "document.querySelector('#details .attempt.current').dataset.callId"},
    ])  # fmt: skip
    _, _, boxes, colour, _, now, current = values(seen)
    assert boxes[: len(group["members"])] == group["members"]
    assert colour != "rgb(0, 0, 0)"
    assert now == second and current == second


def test_ran_more_than_once_and_timeout_anatomy_in_the_details(
    report_with_a_write_run_twice: tuple[Path, dict[str, Any]],
) -> None:
    """A call of a "ran more than once" entry lists the entry's attempts, how each ended and its retry chain, and
    marks those of its own chain."""
    path, data = report_with_a_write_run_twice
    (entry,) = data["meta"]["ran_more_than_once"]
    second = entry["attempts"][1]["call_id"]
    anatomy_id, anatomy = next(iter(anatomies(data).items()))
    seen = inspect_report(path, [
        {"do": "fill", "selector": "#search", "value": second},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{second}"]'},
        {"do": "eval", "expression": "Array.from(document.querySelectorAll('#details h4')).map(h => h.textContent)"},
        {"do": "texts", "selector": "#details .twice-attempts li"},
        {"do": "count", "selector": "#details .twice-attempts li.this-chain"},
        {"do": "fill", "selector": "#search", "value": anatomy_id},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{anatomy_id}"]'},
        {"do": "text", "selector": "#details .anatomy"},
    ])  # fmt: skip
    _, _, headings, attempts, in_chain, _, _, shown = values(seen)
    assert any(h.startswith(f"Ran more than once ({entry['certainty']}): {entry['tool']}") for h in headings), headings
    assert len(attempts) == len(entry["attempts"])
    for line, attempt in zip(attempts, entry["attempts"], strict=True):
        assert line.startswith(attempt["call_id"]) and attempt["ran"] in line and str(attempt["outcome"]) in line
        assert f"retry chain {attempt['retry_group']}" in line if attempt["retry_group"] else "not in a retry" in line
    assert in_chain == sum(1 for a in entry["attempts"] if a["retry_group"] == entry["attempts"][1]["retry_group"])
    ending = next(e for e in data["vocabulary"]["endings"] if e["name"] == anatomy["ended_by"])
    assert anatomy["sentence"] in shown and ending["description"] in shown


def test_table_cells_are_not_cut_without_their_full_text(tmp_path: Path) -> None:
    samples = Path(__file__).resolve().parents[2] / "sample_captures"
    report = tmp_path / "cut.html"
    data = write_report([samples / "py-2025-cut-2026-no-resume.flows"], report)
    cut = next(row["id"] for row in records(data) if row["outcome"] == "STREAM_INCOMPLETE")
    fits = f"""(() => {{
        const row = document.querySelector('#table-rows .row[data-call-id="{cut}"]');
        const pill = row.querySelector('.pill'), cell = pill.parentElement;
        return [pill.getBoundingClientRect().right <= cell.getBoundingClientRect().right + 0.5, pill.title,
                Array.from(row.children).filter(c => c.scrollWidth > c.clientWidth + 1 && !c.title).length];
    }})()"""
    line = """(() => { const l = document.querySelector('#details .request-line');
        const heading = l.previousElementSibling;
        return [l.textContent, getComputedStyle(l).textTransform, getComputedStyle(heading).textTransform]; })()"""
    seen = inspect_report(report, [
        {"do": "fill", "selector": "#search", "value": cut},
        {"do": "click", "selector": f'#table-rows .row[data-call-id="{cut}"]'},
        {"do": "eval", "expression": fits},
        {"do": "eval", "expression": line},
        {"do": "eval", "expression": METHOD_TITLES},
    ], viewport=(1280, 900))  # fmt: skip
    _, _, (inside, title, cut_without_title), (text, transform, heading), titles = values(seen)
    assert inside and title == "STREAM_INCOMPLETE" and cut_without_title == 0
    request = data["details"][cut]["exchanges"][0]["request"]["line"]
    assert text == request and transform == "none" and heading == "none"
    assert titles and all(titles)


def test_report_data_carries_anatomy_and_lane_groups(sample_report: tuple[Path, dict[str, Any]]) -> None:
    _, data = sample_report
    anatomy = anatomies(data)
    assert anatomy and all(a["sentence"] and a["ended_by"] for a in anatomy.values())
    ids = set(column(data, "id"))
    assert set(anatomy) <= ids
    group = data["lane_columns"].index("group")
    assert {lane[group] for lane in data["lanes"]} == set(range(len(data["lane_groups"])))
    assert json.dumps(data["lane_groups"])  # plain data
