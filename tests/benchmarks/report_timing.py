"""Time to interactive of a report in headless Chromium: shared by bench_report.py and bench_scale.py.

``ready_ms`` is navigation start to the page setting ``window.__reportReady`` (table, filters and timeline
drawn), read by the browser harness (tests/support/browser.py) driving Debian's chromium. Each run opens the
page afresh and also selects an outcome filter, so that the page is seen to answer, not only to draw.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.browser import inspect_report  # noqa: E402

FILTER = [{"do": "select", "selector": "#f-outcome", "value": "HTTP_ERROR"}, {"do": "count", "selector": ".row"}]


def time_to_interactive(path: Path, runs: int = 3, timeout: float = 300) -> dict[str, Any]:
    """The median ``ready_ms`` of ``runs`` fresh loads (inf when none got ready), and the errors seen."""
    ready_timeout_ms = int(timeout * 1000) - 10_000
    seen = [inspect_report(path, FILTER, timeout=timeout, ready_timeout_ms=ready_timeout_ms) for _ in range(runs)]
    ready = sorted(r["ready_ms"] for r in seen if r["ready_ms"] is not None)
    return {
        "ready_ms": ready[len(ready) // 2] if ready else float("inf"),
        "ready_runs": len(ready),
        "runs": runs,
        "errors": sum(len(r["console_errors"]) + len(r["page_errors"]) for r in seen),
    }
