"""The export contract is defined once (analyzer/model/contract.py), and everything that writes or documents
it follows that definition: the records the analysis builds, the CSV's and the frames' columns and dtypes,
and docs/ARCHITECTURE.md's "Export contract"."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from mcp_blackbox.analyzer import Analysis, analyze
from mcp_blackbox.analyzer.model import contract
from mcp_blackbox.analyzer.model.contract import (
    CALL_COLUMNS,
    RETRY_GROUP_COLUMNS,
    CallRecord,
    ClientRecord,
    DuplicateRecord,
    EndingRecord,
    RetryGroupRecord,
)
from mcp_blackbox.analyzer.outputs.export import write_csv, write_json
from mcp_blackbox.analyzer.outputs.frames import CALL_KINDS, RETRY_GROUP_KINDS
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write

ROOT = Path(__file__).resolve().parents[2]
FLOWS = sorted(str(p) for p in (ROOT / "sample_captures").glob("*.flows"))
SAMPLES = [*FLOWS, str(ROOT / "sample_captures" / "stdio-faults.stdio.jsonl")]


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return analyze(SAMPLES)


def keys(record_type: type) -> list[str]:
    return list(record_type.__annotations__)


def test_every_call_record_has_the_contracts_fields_in_its_order(analysis: Analysis) -> None:
    assert len(analysis.calls) > 100
    for record in analysis.calls:
        assert list(record) == list(CALL_COLUMNS), record["call_id"]
        if record["client"] is not None:
            assert list(record["client"]) == keys(ClientRecord)
        if record["ending"] is not None:
            assert list(record["ending"]) == keys(EndingRecord)
            assert list(record["ending"]["server_sent"]) == keys(contract.ServerSent)


def test_the_groups_and_duplicates_have_their_records_fields(tmp_path: Path) -> None:
    """A write answered 500 (it may have run), sent again in the same session and run: a group and a
    duplicate execution (the sample captures have no write that ran twice)."""
    headers = {"mcp-session-id": "A"}
    write_tool = {"name": "write_record", "annotations": {"destructiveHint": True}}
    analysis = analyze(
        [
            write(
                tmp_path,
                exchange(rpc(1, "tools/list"), body=result(1, {"tools": [write_tool]}), request_headers=headers, at=1),
                exchange(tool_call(2, "write_record"), status=500, body=b"boom", request_headers=headers, at=2),
                exchange(tool_call(3, "write_record"), body=result(3, text_result()), request_headers=headers, at=3),
            )
        ]
    )
    assert analysis.retry_groups and analysis.duplicate_executions
    for group in analysis.retry_groups:
        assert list(group.record()) == list(RETRY_GROUP_COLUMNS)
    for duplicate in analysis.duplicate_executions:
        assert list(duplicate.record()) == keys(DuplicateRecord)
    (entry,) = [e.record() for e in analysis.ran_more_than_once]
    assert list(entry) == keys(contract.RanMoreThanOnceRecord)
    assert [list(attempt) for attempt in entry["attempts"]] == [keys(contract.AttemptRecord)] * 2


def test_the_json_export_reads_back_as_the_records(analysis: Analysis) -> None:
    out = io.StringIO()
    write_json(analysis, out, redact=False)
    exported = json.loads(out.getvalue())
    assert [list(call) for call in exported["calls"]] == [list(CALL_COLUMNS)] * len(analysis.calls)
    assert [list(group) for group in exported["retry_groups"]] == [list(RETRY_GROUP_COLUMNS)] * len(
        analysis.retry_groups
    )
    # Every finding of the samples (a stdio server's crash, at least) reads back with the contract's fields.
    assert exported["findings"] and all(list(f) == keys(contract.FindingRecord) for f in exported["findings"])


def test_the_csv_columns_are_the_call_records_keys(analysis: Analysis) -> None:
    out = io.StringIO()
    write_csv(analysis, out, redact=False)
    assert next(csv.reader(io.StringIO(out.getvalue()))) == list(CALL_COLUMNS)


def test_the_frames_dtypes_follow_the_record_types(analysis: Analysis) -> None:
    calls, groups = analysis.to_pandas(redact=False), analysis.retry_groups_to_pandas()
    assert list(calls.columns) == list(CALL_COLUMNS)
    assert list(groups.columns) == list(RETRY_GROUP_COLUMNS)
    expected = {
        "call_id": "object",
        "jsonrpc_id": "object",
        "http_status": "Int64",
        "error_code": "Int64",
        "sse_events": "Int64",
        "attempt": "Int64",
        "t_start": "datetime64[ns, UTC]",
        "t_end": "datetime64[ns, UTC]",
        "duration_ms": "float64",
        "flags": "object",
        "carrier": "object",
    }
    assert {name: str(calls[name].dtype) for name in expected} == expected
    for name in ("outcome", "layer", "retry_origin", "retry_confidence"):
        assert isinstance(calls[name].dtype, pd.CategoricalDtype), name
    assert str(groups["attempts"].dtype) == "Int64" and str(groups["failure_retry"].dtype) == "bool"
    assert isinstance(groups["safety"].dtype, pd.CategoricalDtype)
    # Every field has a rule, so a field added to the contract cannot fall through unnoticed.
    assert set(CALL_KINDS) == set(CALL_COLUMNS) and set(RETRY_GROUP_KINDS) == set(RETRY_GROUP_COLUMNS)


def test_a_field_added_to_the_contract_gets_its_column_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_blackbox.analyzer.model.vocabulary import Outcome
    from mcp_blackbox.analyzer.outputs.frames import column_kinds

    module = types.ModuleType("a_new_contract")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    source = (
        "from __future__ import annotations\n"
        "from typing import Annotated, TypedDict\n"
        "from mcp_blackbox.analyzer.model.contract import EpochSeconds\n"
        "from mcp_blackbox.analyzer.model.vocabulary import Outcome\n"
        "class Record(TypedDict):\n"
        "    when: Annotated[float, EpochSeconds] | None\n"
        "    count: int | None\n"
        "    share: float\n"
        "    verdict: Outcome\n"
        "    ok: bool\n"
        "    note: str\n"
    )
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    assert column_kinds(module.Record) == {
        "when": "datetime64[ns, UTC]",
        "count": "Int64",
        "share": "float64",
        "verdict": Outcome,
        "ok": "bool",
        "note": "object",
    }


def test_architecture_documents_every_field() -> None:
    """Each field of the call record, the client, the ending and the retry group is named in the Export
    contract section, and the section names no top-level call field the record lacks."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text[text.index("## Export contract") : text.index("### OpenTelemetry")]
    named = set(re.findall(r"`([a-z_]+)`", section))
    for record_type in (
        CallRecord,
        ClientRecord,
        EndingRecord,
        RetryGroupRecord,
        DuplicateRecord,
        contract.RanMoreThanOnceRecord,
        contract.AttemptRecord,
        contract.FindingRecord,
    ):
        missing = [key for key in keys(record_type) if key not in named]
        assert not missing, f"{record_type.__name__}: not in ARCHITECTURE's Export contract: {missing}"
