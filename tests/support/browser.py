"""Open an HTML report in real headless Chromium and say what it did: tests/browser/inspect_report.mjs.

    result = inspect_report(report_path, [{"do": "count", "selector": "tbody tr"}])
    assert result["requests"] == [] and result["page_errors"] == []
    assert result["results"][0] == {"ok": True, "value": 12, "error": None}

The runner (its header has the full contract) prints {"console_errors", "page_errors", "dialogs",
"requests", "ready_ms", "ready_error", "launch_ms", "results"}; one result {"ok", "value", "error"} per
action. Chromium is Debian's /usr/bin/chromium and playwright-core comes from tests/browser's
package-lock.json; `make test` installs both.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.support.processes import REPO_ROOT, ProcessFailure, run_json_command

BROWSER_DIR = REPO_ROOT / "tests" / "browser"
INSPECT_SCRIPT = BROWSER_DIR / "inspect_report.mjs"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
MAX_INLINE_ACTIONS = 64_000


class BrowserMissing(ProcessFailure):
    """Chromium, node or tests/browser/node_modules is not installed."""


def browser_missing() -> str | None:
    """Why the browser harness cannot run here, or None if it can."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing: run `make test` (it installs Debian's chromium)"
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        return "tests/browser/node_modules is missing: run `make test` (it runs `npm ci` in tests/browser)"
    return None


def inspect_report(
    report: Path,
    actions: list[dict[str, Any]],
    timeout: float = 60,
    *,
    ready_timeout_ms: int = 30_000,
    action_timeout_ms: int = 5_000,
    viewport: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Run inspect_report.mjs on `report` with `actions`; return its JSON document.

    `timeout` bounds the whole run (Chromium start, waiting for window.__reportReady, the actions).
    Raises BrowserMissing if the harness is not installed, ProcessFailure (quoting stderr) if the runner
    fails or refuses its arguments (exit 2).
    """
    missing = browser_missing()
    if missing:
        raise BrowserMissing(missing)
    report = Path(report).resolve()
    if not report.is_file():
        raise FileNotFoundError(report)
    with tempfile.TemporaryDirectory(prefix="inspect-report-") as tmp:
        actions_json = json.dumps(actions)
        if len(actions_json) > MAX_INLINE_ACTIONS:  # one argv string is limited to 128 KiB on Linux
            actions_file = Path(tmp) / "actions.json"
            actions_file.write_text(actions_json, encoding="utf-8")
            actions_json = f"@{actions_file}"
        argv = ["node", str(INSPECT_SCRIPT), "--report", str(report), "--actions", actions_json]
        argv += ["--ready-timeout-ms", str(ready_timeout_ms), "--action-timeout-ms", str(action_timeout_ms)]
        if viewport is not None:
            argv += ["--viewport", f"{viewport[0]}x{viewport[1]}"]
        return run_json_command(argv, timeout=timeout)
