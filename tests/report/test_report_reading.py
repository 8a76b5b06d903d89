"""The report as a reviewer reads it (issue 22, item 4, and the page side of item 2), in real headless Chromium:
the table follows the zoom and sorts, the header leaves the timeline and the first rows on the first screen,
the details fit their labels and pills, nothing prints "None", the top errors group what differs only in its
figures, the captures are named without the machine's directories, and the findings open the page."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.review.report import build_report, render_report, write_report
from mcp_blackbox.analyzer.review.summary_markdown import summary_markdown
from tests.analyzer.flows import exchange, result, text_result, tool_call, write
from tests.report.layout import column, records
from tests.support.browser import inspect_report

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted([*(REPO / "sample_captures").glob("*.flows"), *(REPO / "sample_captures").glob("*.stdio.jsonl")])
AT = 1_700_000_000.0
COUNT = "document.getElementById('count').textContent"
ROW_IDS = "Array.from(document.querySelectorAll('#table-rows .row')).map(r => r.dataset.callId)"
VISIBLE = "window.__report.visible()"


def values(seen: dict[str, Any]) -> list[Any]:
    assert seen["page_errors"] == [] and seen["console_errors"] == [] and seen["requests"] == [], seen
    assert all(r["ok"] for r in seen["results"]), seen["results"]
    return [r["value"] for r in seen["results"]]


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Every sample, named by absolute paths (as a user's shell may expand them)."""
    path = tmp_path_factory.mktemp("reading") / "report.html"
    return path, write_report([p.resolve() for p in SAMPLES], path)


def test_the_table_follows_the_zoom_and_its_count_says_so(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    total = len(data["calls"])
    t0 = dict(zip(column(data, "id"), column(data, "t0"), strict=True))
    ends = {r["id"]: r["t0"] + r["dur"] for r in records(data)}
    seen = inspect_report(path, [
        {"do": "mouse", "selector": "#timeline", "points": [[300, 30], [420, 40], [520, 40]]},
        {"do": "eval", "expression": "window.__report.view()"},
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": COUNT},
        {"do": "click", "selector": "#reset-zoom"},
        {"do": "eval", "expression": COUNT},
        {"do": "eval", "expression": VISIBLE},
    ], viewport=(1600, 1000))  # fmt: skip
    _, view, zoomed, count, _, reset, everything = values(seen)
    assert 0 < len(zoomed) < total, "a zoom into part of the capture lists only the calls in it"
    # The view is in real time (folded gaps unfolded): every listed call reaches it, every other one does not.
    inside = {i for i in t0 if ends[i] >= view["from"] - 1 and t0[i] <= view["to"] + 1}
    assert set(zoomed) <= inside and len(zoomed) >= len(inside) - 2  # a call at an edge of a folded gap may differ
    assert count == f"{len(zoomed)} of {total} calls in the zoomed range"
    assert reset == f"{total} of {total} calls" and len(everything) == total


def test_a_column_header_sorts_the_table_and_a_second_press_reverses_it(
    sample_report: tuple[Path, dict[str, Any]],
) -> None:
    path, data = sample_report
    dur = dict(zip(column(data, "id"), column(data, "dur"), strict=True))
    sort = '#table-head .sort[data-sort="dur"]'
    state = "document.querySelector('#table-head .sort[data-sort=\"dur\"]').parentElement.getAttribute('aria-sort')"
    seen = inspect_report(path, [
        {"do": "press", "selector": sort, "key": "Enter"},  # the keyboard: a header is a button
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": state},
        {"do": "eval", "expression": "location.hash"},
        {"do": "press", "selector": sort, "key": "Enter"},
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": state},
        {"do": "click", "selector": '#table-head .sort[data-sort="outcome"]'},
        {"do": "eval", "expression": VISIBLE},
        {"do": "open", "fragment": "#sort=-dur"},
        {"do": "eval", "expression": VISIBLE},
    ])  # fmt: skip
    _, up, up_state, hash_, _, down, down_state, _, by_outcome, _, linked = values(seen)
    assert [dur[i] for i in up] == sorted(dur.values()) and up_state == "ascending" and "sort=dur" in hash_
    assert [dur[i] for i in down] == sorted(dur.values(), reverse=True) and down_state == "descending"
    outcome = dict(zip(column(data, "id"), column(data, "outcome"), strict=True))
    assert [outcome[i] for i in by_outcome] == sorted(outcome[i] for i in by_outcome)
    assert linked == down, "a link keeps the order"


def test_the_header_leaves_the_timeline_and_the_first_rows_on_the_first_screen(
    sample_report: tuple[Path, dict[str, Any]],
) -> None:
    path, data = sample_report
    where = """(() => {
        const box = s => { const r = document.querySelector(s).getBoundingClientRect(); return [r.top, r.bottom]; };
        const rows = [...document.querySelectorAll('#table-rows .row')].slice(0, 3)
            .map(r => r.getBoundingClientRect().bottom);
        return {header: box('header'), timeline: box('#timeline'), rows: rows};
    })()"""
    seen = inspect_report(path, [
        {"do": "eval", "expression": where},
        {"do": "eval", "expression": "window.__report.bars().length"},
    ], viewport=(1600, 1000))  # fmt: skip
    layout, bars = values(seen)
    assert layout["header"][1] <= 200, layout  # the header was 55% of this screen (issue 22)
    assert layout["timeline"][1] <= 1000 - 100, layout
    assert len(layout["rows"]) == 3 and max(layout["rows"]) <= 1000, layout
    assert bars == len(data["calls"]), "folded to fit, the timeline still draws every call"


# For each label cell of the details' tables: its words, and for each word the number of lines it is drawn on.
BROKEN_LABELS = """(() => {
    const broken = [];
    document.querySelectorAll('#details td:first-child').forEach(td => {
        const text = td.firstChild;
        if (!text || text.nodeType !== 3) return;
        const range = document.createRange();
        for (const m of text.data.matchAll(/\\S+/g)) {
            range.setStart(text, m.index); range.setEnd(text, m.index + m[0].length);
            const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
            if (lines.size > 1) broken.push(m[0]);
        }
    });
    return broken;
})()"""
CUT_PILLS = """(() => [...document.querySelectorAll('.pill')]
    .filter(p => p.offsetParent !== null && p.scrollWidth > p.clientWidth + 0.5).map(p => p.textContent))()"""


def test_details_labels_are_whole_words_and_pills_are_not_cut(sample_report: tuple[Path, dict[str, Any]]) -> None:
    path, data = sample_report
    rows = records(data)
    anatomy = next(r["id"] for r in rows if r["outcome"] == "STREAM_INCOMPLETE")
    chained = next(r["id"] for r in rows if r["group"])
    outcomes = sorted({r["outcome"] for r in rows}, key=len, reverse=True)
    actions: list[dict[str, Any]] = []
    for call in (anatomy, chained):
        actions += [
            {"do": "open", "fragment": f"#call={call}"},
            {"do": "eval", "expression": BROKEN_LABELS},
            {"do": "eval", "expression": "document.querySelectorAll('#details td:first-child').length"},
            {"do": "eval", "expression": CUT_PILLS},
        ]
    for outcome in outcomes:  # every outcome's pill, in the table and in the details
        actions += [{"do": "open", "fragment": f"#outcome={outcome}"}, {"do": "eval", "expression": CUT_PILLS}]
    for size in ((1600, 1000), (1280, 800)):
        seen = inspect_report(path, actions, viewport=size)
        got = values(seen)
        for k in (0, 4):
            broken, labels, cut = got[k + 1], got[k + 2], got[k + 3]
            assert labels >= 4 and broken == [], (size, broken)
            assert cut == [], (size, cut)
        assert all(cut == [] for cut in got[9::2]), (size, got[9::2])


NONE = re.compile(r"\b(None|null|undefined|NaN)\b")


def test_no_none_null_or_undefined_is_printed_anywhere(sample_report: tuple[Path, dict[str, Any]]) -> None:
    """Every call's details opened in turn, and the page's text read: a missing value is said, never printed as
    Python's None or the script's null (issue 22: "(HTTP None)" in the header's auth steps)."""
    path, data = sample_report
    every = f"""(async () => {{
        const found = [];
        const seen = t => {{ const m = t.match(/\\b(None|null|undefined|NaN)\\b/g); return m ? m : []; }};
        document.querySelectorAll('details').forEach(d => {{ d.open = true; }});
        seen(document.body.innerText).forEach(m => found.push(['page', m]));
        for (const id of {json.dumps(column(data, "id"))}) {{
            location.hash = '#call=' + id;
            await new Promise(r => setTimeout(r, 0));
            seen(document.getElementById('details').innerText).forEach(m => found.push([id, m]));
        }}
        return found;
    }})()"""
    seen = inspect_report(path, [{"do": "eval", "expression": every}], timeout=120)
    (found,) = values(seen)
    assert found == []
    assert not NONE.search(" ".join(data["meta"]["auth_steps"]))


def test_top_errors_group_what_differs_only_in_its_figures(tmp_path: Path) -> None:
    """Calls "after 58 ms" and "after 54 ms" fail with one error, a port or an id too; another status is another. The
    report and the Markdown summary group them by one function (analyzer/review/top_errors.py)."""

    def gateway(n: int, status: int, text: str) -> Any:
        return exchange(tool_call(n, "fetch"), status=status, body=text.encode(), content_type="text/plain",
                        at=AT + n)  # fmt: skip

    capture = write(
        tmp_path,
        gateway(1, 504, "upstream timed out after 58 ms (10.0.0.7:8081, request 7f3a9c2e41d0b8aa)"),
        gateway(2, 504, "upstream timed out after 54 ms (10.0.0.9:8082, request 0b1c2d3e4f5a6b7c)"),
        gateway(3, 504, "upstream timed out after 61 ms (10.0.0.7:8081, request 99aa88bb77cc66dd)"),
        gateway(4, 502, "upstream timed out after 58 ms (10.0.0.7:8081, request 7f3a9c2e41d0b8aa)"),
        exchange(tool_call(5, "fetch"), body=result(5, text_result()), at=AT + 5),
    )
    report = tmp_path / "report.html"
    data = write_report([capture], report)
    top = data["meta"]["top_errors"]
    assert [(e["count"], e["outcome"]) for e in top] == [(3, "HTTP_ERROR"), (1, "HTTP_ERROR")]
    assert top[0]["error"] == "HTTP 504: upstream timed out after <n> ms (<ip>:<port>, request <id>)"
    assert top[1]["error"].startswith("HTTP 502: ")
    markdown = summary_markdown(analyze([capture]), [str(capture)])
    section = markdown[markdown.index("## Top errors") :].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2 and rows[0].startswith("| 3 | HTTP_ERROR |"), section
    first_three = column(data, "id")[:3]
    seen = inspect_report(report, [
        {"do": "click", "selector": "#top-errors > summary"},
        {"do": "texts", "selector": "#top-errors tbody tr"},
        {"do": "click", "selector": '#top-errors tbody tr[data-set="error-1"]'},
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": "document.getElementById('f-set').value"},
    ])  # fmt: skip
    _, lines, _, shown, chosen = values(seen)
    assert len(lines) == 2 and lines[0].startswith("3")
    assert shown == first_three and chosen == "error-1"


def test_captures_are_named_without_the_machines_directories(tmp_path: Path) -> None:
    where = tmp_path / "home" / "someone" / "incident-4711"
    where.mkdir(parents=True)
    capture = write(where, exchange(tool_call(1, "echo"), status=503, body=b"busy", content_type="text/plain"))
    report = tmp_path / "report.html"
    write_report([capture.resolve()], report)
    html = report.read_text(encoding="utf-8")
    assert "capture.flows" in html and "incident-4711" not in html and str(tmp_path) not in html
    markdown = summary_markdown(analyze([capture.resolve()]), [str(capture.resolve())])
    assert "capture.flows" in markdown and "incident-4711" not in markdown
    for given in ([str(capture.resolve())], [str(where)]):  # a file, or the directory that holds it
        done = subprocess.run(
            [sys.executable, "-m", "mcp_blackbox.cli.main", "export", *given],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        (call,) = json.loads(done.stdout)["calls"]
        assert call["source"] == "capture.flows", given


FINDINGS = [
    {
        "rule": "upstream-marked-down",
        "title": "Upstream marked down <img src=x onerror=alert(1)>",
        "summary": "2 gateway 504s, then 3 502s: no live upstream.",
        "evidence": ["c1 HTTP 504 after 30 s", "then 502 no live upstream <b>bold</b>"],
        "calls": [],
        "start": 0.0,
        "end": 0.0,
    },
    {
        "rule": "retry-storm",
        "title": "Retry storm",
        "summary": "4 requests on the wire per logical call.",
        "evidence": ["x4"],
        "calls": [],
        "start": 0.0,
        "end": 0.0,
    },
]


def findings_report(tmp_path: Path, findings: list[dict[str, Any]]) -> tuple[Path, dict[str, Any], list[str]]:
    """A burst of calls 10 s apart, with ``findings`` put into the page's data (the rules are the analyzer's;
    this is the page's side of the contract: data.meta.findings)."""
    flows = [
        exchange(tool_call(n, "fetch"), status=504 if n < 3 else 200, body=b"timeout" if n < 3 else None,
                 content_type="text/plain", at=AT + 10 * n, duration=0.5)
        for n in range(1, 7)
    ]  # fmt: skip
    capture = write(tmp_path, *flows)
    data = build_report([capture])
    ids = column(data, "id")
    data["meta"]["findings"] = [
        {**f, "calls": ids[1:3], "start": AT + 20, "end": AT + 30.5} if n == 0 else {**f, "calls": ids[4:6],
         "start": AT + 50, "end": AT + 60.5}
        for n, f in enumerate(findings)
    ]  # fmt: skip
    report = tmp_path / "report.html"
    report.write_text(render_report(data), encoding="utf-8")
    return report, data, ids


def test_findings_open_the_report_and_show_their_calls_and_time(tmp_path: Path) -> None:
    report, _, ids = findings_report(tmp_path, FINDINGS)
    first = "document.querySelector('header').nextElementSibling.querySelector('.finding')"
    seen = inspect_report(report, [
        {"do": "eval", "expression": f"{first} !== null"},
        {"do": "texts", "selector": ".finding .title"},
        {"do": "texts", "selector": ".finding .summary"},
        {"do": "count", "selector": ".finding img, .finding b"},
        {"do": "eval", "expression": "document.querySelector('.finding').open"},
        {"do": "click", "selector": ".finding > summary .title"},
        {"do": "eval", "expression": "document.querySelector('.finding').open"},
        {"do": "texts", "selector": ".finding[open] li"},
        {"do": "click", "selector": '.finding .show[data-set="finding-1"]'},
        {"do": "eval", "expression": VISIBLE},
        {"do": "eval", "expression": "window.__report.view()"},
        {"do": "eval", "expression": "location.hash"},
        {"do": "click", "selector": '.finding .show[data-set="finding-1"]'},
        {"do": "eval", "expression": COUNT},
    ])  # fmt: skip
    opens, titles, summaries, markup, closed, _, opened, evidence, _, shown, view, hash_, _, cleared = values(seen)
    assert opens, "the findings are the first thing under the header"
    assert titles == [f["title"] for f in FINDINGS] and summaries == [f["summary"] for f in FINDINGS]
    assert markup == 0, "a finding's text is text"
    assert closed is False and opened is True and evidence == FINDINGS[0]["evidence"]
    assert shown == ids[1:3] and "set=finding-1" in hash_
    # ms after the first call (AT + 10): the finding's start and end, with a little room
    assert 5_000 <= view["from"] <= 10_000 and 20_500 <= view["to"] <= 26_000, view
    assert cleared == f"{len(ids)} of {len(ids)} calls"


def test_without_findings_one_quiet_line(tmp_path: Path) -> None:
    report, _, _ = findings_report(tmp_path, [])
    seen = inspect_report(report, [
        {"do": "count", "selector": ".finding"},
        {"do": "texts", "selector": ".no-findings"},
    ])  # fmt: skip
    assert values(seen) == [0, ["No cross-call pattern found."]]


def test_two_captures_of_one_name_are_told_apart_by_as_little_as_needed() -> None:
    from mcp_blackbox.analyzer.wire.inputs import capture_name, capture_names

    names = capture_names(["/home/a/run/x.flows", "/home/b/run/x.flows", "/srv/y.flows", "rel/z.flows"])
    assert names == {"/home/a/run/x.flows": "a/run/x.flows", "/home/b/run/x.flows": "b/run/x.flows",
                     "/srv/y.flows": "y.flows", "rel/z.flows": "z.flows"}  # fmt: skip
    assert capture_name("/home/a/run/x.flows") == "x.flows"
