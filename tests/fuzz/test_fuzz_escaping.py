"""Captured content never becomes markup, and secrets never reach the report or the exports.

Random strings (markup, comment openers, "</script>", U+2028, NUL, any non-surrogate character) go into
every captured field the report shows; the page must still parse into the template's own elements,
with every string inside the JSON data. A few examples are opened in real Chromium as well.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz import properties
from tests.support.browser import inspect_report

pytestmark = pytest.mark.fuzz

FAST = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@seed(6201)
@settings(FAST, max_examples=80)
@given(properties.captured)
def test_captured_text_stays_data(c: properties.Captured) -> None:
    properties.check_escaping(c)


@seed(6202)
@settings(FAST, max_examples=4)  # each example starts Chromium: a few seconds
@given(properties.captured)
def test_captured_text_in_chromium(c: properties.Captured) -> None:
    page = properties.check_escaping(c)
    # The calls' ids name their flows (analyzer/across/call_ids.py): read them from the page's own data.
    start = page.index(properties.PAYLOAD_OPEN) + len(properties.PAYLOAD_OPEN)
    ids = [row[0] for row in json.loads(page[start : page.index("</script>", start)])["calls"]]
    assert len(ids) == 5
    with tempfile.TemporaryDirectory(prefix="fuzz-browser-") as tmp:
        report = Path(tmp) / "report.html"
        report.write_text(page, encoding="utf-8")
        actions = []
        for call_id in ids:
            actions += [
                {"do": "fill", "selector": "#search", "value": call_id},
                {"do": "click", "selector": f'#table-rows .row[data-call-id="{call_id}"]'},
                {"do": "eval", "expression": "document.getElementById('details').textContent"},
            ]
        actions.append({"do": "eval", "expression": "document.querySelector('header').textContent"})
        actions.append({"do": "count", "selector": "script, img, svg, iframe, [onerror], [onload]"})
        seen = inspect_report(report, actions)
    assert seen["dialogs"] == [] and seen["page_errors"] == [] and seen["requests"] == [], seen
    assert [r for r in seen["results"] if not r["ok"]] == [], seen["results"]
    assert seen["results"][-1]["value"] == 2, "only the page's own two scripts"
    shown = "\x01".join(str(r["value"]) for r in seen["results"][:-1])
    assert properties.not_shown(c, shown) == []


@seed(6203)
@settings(FAST, max_examples=80, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(properties.secrets)
def test_secrets_never_reach_the_report_or_the_exports(s: properties.Secrets) -> None:
    """Authorization, Cookie and X-Api-Key headers, api_key and token query parameters, password,
    access_token and client_secret JSON fields (secrets of 4 characters or more: see properties.secret_text)
    never appear, raw or escaped, in the redacted report or JSON and CSV exports."""
    properties.check_secrets(s)
