"""One Redactor at the boundary (analyzer/redaction/redactor.py): the outputs print a peer's text only
through it, and it decides for every field a peer wrote, on or off (issue 20: report.py alone had ten
``if redact`` sites)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.outputs.export import iter_records
from mcp_blackbox.analyzer.redaction.redactor import AS_CAPTURED, REDACTED, Redactor

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"
# HAR keeps masks of its own (one number per secret over the file), applied where the Redactor says.
OWN_MASKS = {"analyzer/outputs/har_export.py"}


def test_no_output_decides_redaction_itself() -> None:
    for folder in ("analyzer/outputs", "analyzer/review", "cli"):
        for path in sorted((ROOT / folder).glob("*.py")):
            name = str(path.relative_to(ROOT))
            source = path.read_text()
            assert not re.search(r"\bif (not )?redact\b|\bredact else\b", source), f"{name} decides redaction"
            if name not in OWN_MASKS:
                assert "redaction.redact import" not in source, f"{name} redacts without the Redactor"


def a_record_with_secrets() -> Any:
    sample = next((ROOT / "sample_captures").glob("py-2025-session-tools.flows"))
    record = next(r for r in iter_records(analyze([str(sample)]), redact=False) if r["method"] == "tools/call")
    said = f"Authorization: Bearer {SECRET}"
    record.update(evidence=[said], error_message=said, reason=said, result_excerpt=said)
    record["resource_uri"] = f"file:///x?api_key={SECRET}"
    record["endpoint"] = f"http://127.0.0.1:1/mcp?token={SECRET}"
    assert record["client"] is not None
    record["client"] = {**record["client"], "user_agent": said, "client_info": said}
    return record


def test_the_redactor_masks_every_field_a_peer_wrote_and_as_captured_keeps_them() -> None:
    assert SECRET not in json.dumps(REDACTED.call_record(a_record_with_secrets()))
    kept = json.dumps(AS_CAPTURED.call_record(a_record_with_secrets()))
    assert kept.count(SECRET) == 8
    assert Redactor.of(True) is REDACTED and Redactor.of(False) is AS_CAPTURED
    assert SECRET not in json.dumps(REDACTED.headers({"authorization": f"Bearer {SECRET}"}))
    assert AS_CAPTURED.url(f"http://h/?key={SECRET}").endswith(SECRET)
