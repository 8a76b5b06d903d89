"""The browser harness itself (tests/browser/inspect_report.mjs via tests.support.browser), on small static
pages: actions work, and requests, dialogs and uncaught errors are seen. Real headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import inspect_report
from tests.support.processes import ProcessFailure

CLEAN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>harness page</title></head>
<body>
<button id="toggle" type="button">show details</button>
<label>kind <select id="kind"><option value="all">All</option><option value="err">Errors only</option></select></label>
<label>filter <input id="filter" type="search"></label>
<p id="out">nothing yet</p>
<ul id="rows"><li>alpha</li><li>beta</li><li>gamma</li></ul>
<script>
  const out = document.getElementById("out");
  document.getElementById("toggle").addEventListener("click", (e) => { e.target.textContent = "hide details"; });
  document.getElementById("kind").addEventListener("change", (e) => { out.textContent = "kind=" + e.target.value; });
  document.getElementById("filter").addEventListener("input", (e) => { out.textContent = "filter=" + e.target.value; });
  window.__reportReady = false;
  // Ready only once the page has rendered, as a report that builds its DOM from embedded data would be.
  requestAnimationFrame(() => setTimeout(() => { window.__reportReady = true; }, 20));
</script>
</body></html>
"""

BAD_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>bad page</title></head>
<body>
<p>leaks</p>
<img src="http://127.0.0.1:9/x.png" alt="">
<script>
  window.__reportReady = true;
  alert(1);
  setTimeout(() => { throw new Error("boom from the harness test"); }, 0);
</script>
</body></html>
"""


def write_page(tmp_path: Path, name: str, html: str) -> Path:
    page = tmp_path / name
    page.write_text(html, encoding="utf-8")
    return page


def test_actions_on_a_clean_page(tmp_path: Path) -> None:
    page = write_page(tmp_path, "clean.html", CLEAN_PAGE)
    shot = tmp_path / "clean.png"
    actions = [
        {"do": "count", "selector": "#rows li"},
        {"do": "text", "selector": "#toggle"},
        {"do": "click", "selector": "#toggle"},
        {"do": "text", "selector": "#toggle"},
        {"do": "fill", "selector": "#filter", "value": "be"},
        {"do": "text", "selector": "#out"},
        {"do": "select", "selector": "#kind", "value": "err"},
        {"do": "text", "selector": "#out"},
        {"do": "texts", "selector": "#rows li", "limit": 2},
        {"do": "eval", "expression": "({title: document.title, n: document.querySelectorAll('li').length})"},
        {"do": "click", "selector": "#no-such-button", "timeout_ms": 200},  # fails; the run goes on
        {"do": "wait", "ms": 10},
        {"do": "screenshot", "path": str(shot)},
        {"do": "eval", "expression": "window.__reportReady"},
    ]
    result = inspect_report(page, actions, timeout=30)

    assert result["console_errors"] == []
    assert result["page_errors"] == []
    assert result["dialogs"] == []
    assert result["requests"] == []
    assert result["ready_error"] is None
    assert isinstance(result["ready_ms"], int | float) and 0 < result["ready_ms"] < 30_000

    values = [r["value"] for r in result["results"]]
    assert [r["ok"] for r in result["results"]] == [True] * 10 + [False] + [True] * 3
    assert values[0] == 3
    assert values[1] == "show details"
    assert values[3] == "hide details"
    assert values[5] == "filter=be"
    assert values[6] == ["err"]
    assert values[7] == "kind=err"
    assert values[8] == ["alpha", "beta"]
    assert values[9] == {"title": "harness page", "n": 3}
    failed = result["results"][10]
    assert failed["value"] is None and "#no-such-button" in failed["error"] and "Timeout" in failed["error"]
    assert values[12] == str(shot) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert values[13] is True


def test_requests_dialogs_and_uncaught_errors_are_seen(tmp_path: Path) -> None:
    page = write_page(tmp_path, "bad.html", BAD_PAGE)
    result = inspect_report(page, [{"do": "wait", "ms": 100}], timeout=30)

    assert [r["url"] for r in result["requests"]] == ["http://127.0.0.1:9/x.png"]
    assert result["requests"][0]["resource_type"] == "image"
    assert result["dialogs"] == [{"type": "alert", "message": "1"}]
    assert [e["message"] for e in result["page_errors"]] == ["boom from the harness test"]
    # The blocked image load is also a console error.
    assert any("127.0.0.1:9" in (e["url"] or "") for e in result["console_errors"])
    assert result["ready_ms"] is not None


def test_a_page_that_never_gets_ready_still_runs_its_actions(tmp_path: Path) -> None:
    page = write_page(tmp_path, "never.html", "<!doctype html><title>t</title><p id='p'>static</p>")
    result = inspect_report(page, [{"do": "text", "selector": "#p"}], timeout=30, ready_timeout_ms=800)

    assert result["ready_ms"] is None
    assert "__reportReady" in result["ready_error"]
    assert result["results"] == [{"ok": True, "value": "static", "error": None}]


def test_unknown_action_is_a_usage_error(tmp_path: Path) -> None:
    page = write_page(tmp_path, "clean.html", CLEAN_PAGE)
    with pytest.raises(ProcessFailure, match=r"exited with 2(.|\n)*unknown \"do\""):
        inspect_report(page, [{"do": "hover", "selector": "p"}], timeout=30)


POINTER_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pointer page</title></head>
<body style="margin:0">
<div style="height:1400px"></div>
<div id="pad" style="width:300px;height:100px;background:#eee"></div>
<script>
  const log = [];
  const pad = document.getElementById("pad");
  const at = (e) => Math.round(e.clientX - pad.getBoundingClientRect().left) + "," +
    Math.round(e.clientY - pad.getBoundingClientRect().top) + (e.shiftKey ? "+shift" : "");
  pad.addEventListener("mousedown", (e) => log.push("down " + at(e)));
  pad.addEventListener("mouseup", (e) => log.push("up " + at(e)));
  pad.addEventListener("click", () => log.push("click"));
  window.__log = log;
  window.__loads = (Number(sessionStorage.getItem("loads") || 0) + 1);
  sessionStorage.setItem("loads", String(window.__loads));
  window.__reportReady = true;
</script>
</body></html>
"""


def test_mouse_clicks_and_drags_inside_an_element_and_open_loads_a_fragment(tmp_path: Path) -> None:
    page = write_page(tmp_path, "pointer.html", POINTER_PAGE)
    result = inspect_report(page, [
        {"do": "mouse", "selector": "#pad", "points": [[10, 20]]},
        {"do": "mouse", "selector": "#pad", "points": [[50, 50], [150, 60], [250, 70]], "modifiers": ["Shift"]},
        {"do": "eval", "expression": "window.__log"},
        {"do": "open", "fragment": "#call=c1&q=a%20b"},
        {"do": "eval", "expression": "[location.hash, window.__loads, window.__log.length]"},
        {"do": "mouse", "selector": "#no-such-pad", "points": [[1, 1]], "timeout_ms": 200},
    ], timeout=30)  # fmt: skip
    assert result["page_errors"] == [] and result["requests"] == []
    oks = [r["ok"] for r in result["results"]]
    assert oks == [True] * 5 + [False]
    log = result["results"][2]["value"]
    assert log == ["down 10,20", "up 10,20", "click", "down 50,50+shift", "up 250,70+shift", "click"]
    # A fresh document at that fragment: the six entries logged before are gone. The load counter lives in
    # sessionStorage, which Chromium 156 no longer carries from one file:// document to the next.
    fragment, loads, logged = result["results"][4]["value"]
    assert (fragment, logged) == ("#call=c1&q=a%20b", 0), "a fresh load of the page at that fragment"
    assert loads in (1, 2)


def test_mouse_needs_points(tmp_path: Path) -> None:
    page = write_page(tmp_path, "clean.html", CLEAN_PAGE)
    with pytest.raises(ProcessFailure, match=r"exited with 2(.|\n)*\"points\""):
        inspect_report(page, [{"do": "mouse", "selector": "p", "points": []}], timeout=30)
