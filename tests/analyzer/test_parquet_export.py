"""``export --format parquet`` (analyzer/outputs/parquet_export.py): one file per recording, read back as one
table by DuckDB and pandas, with the JSON export's counts, records and sections, and the types a data team
queries (docs/ARCHITECTURE.md, "Export contract": Parquet)."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mcp_blackbox.analyzer.model.contract import CALL_COLUMNS, CallRecord
from mcp_blackbox.analyzer.outputs.analysis import CallStream
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.analyzer.outputs.parquet_export import (
    INSTALL_HINT,
    METADATA_PREFIX,
    _record_batch,
    call_schema,
    file_names,
    recordings,
    write_parquet,
)
from mcp_blackbox.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_captures"
STDIO = SAMPLES / "stdio-faults.stdio.jsonl"
CAPTURES = [*sorted(SAMPLES.glob("*.flows")), STDIO]
RETRY_SAMPLE = SAMPLES / "py-app-retry-after-503.flows"
COUNTED = ("outcome", "tool", "retry_origin")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Every sample capture (each its own recording) exported to Parquet, one file each, and to JSON at once."""
    out = tmp_path_factory.mktemp("fleet")
    assert main(["export", *map(str, CAPTURES), "--format", "parquet", "-o", f"{out}/parquet/"]) == 0
    assert main(["export", *map(str, CAPTURES), "--format", "json", "-o", str(out / "calls.json")]) == 0
    return out / "parquet", json.loads((out / "calls.json").read_text(encoding="utf-8"))


def json_export(captures: list[Path]) -> dict[str, Any]:
    out = io.StringIO()
    write_json(CallStream([str(c) for c in captures], window=600), out)
    return json.loads(out.getvalue())


def test_one_file_per_recording_read_as_one_table_counts_as_the_json_export(
    exported: tuple[Path, dict[str, Any]],
) -> None:
    directory, export = exported
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"{p.name.split('.')[0]}.parquet" for p in CAPTURES)
    glob = f"{directory}/*.parquet"
    for column in COUNTED:
        in_duckdb = dict(duckdb.execute(f"SELECT {column}, count(*) FROM '{glob}' GROUP BY 1").fetchall())
        assert in_duckdb == Counter(call[column] for call in export["calls"]), column
    frame = pd.read_parquet(directory)  # pandas reads the directory as one table too
    for column in COUNTED:
        counted = Counter(call[column] for call in export["calls"])
        assert frame[column].value_counts().to_dict() == {k: n for k, n in counted.items() if k is not None}, column
        assert frame[column].isna().sum() == counted[None], column
    assert sorted(frame.call_id) == sorted(call["call_id"] for call in export["calls"])
    # Retry groups by origin, from the groups in each file's metadata, as the JSON export counts them.
    origins = duckdb.execute(
        f"""SELECT g.origin, count(*) FROM parquet_kv_metadata('{glob}'),
            unnest(from_json(decode(value), '[{{"origin": "VARCHAR"}}]')) AS t(g)
            WHERE decode(key) = '{METADATA_PREFIX}retry_groups' GROUP BY 1"""
    ).fetchall()
    assert dict(origins) == export["summary"]["retries_by_origin"] != {}


def test_the_readme_query_runs_as_shown(
    exported: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's export command (run as written by tests/test_readme_commands.py) and its query, in DuckDB."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"^    (\.venv/bin/mcp-blackbox export .*--format parquet.*)$", readme, re.MULTILINE)
    output = re.search(r"-o (\S+)", command)
    assert output is not None and output.group(1) == "out/"
    # The query as the README runs it: DuckDB's Python package (the test extra), no DuckDB CLI needed.
    (query_command,) = re.findall(r"^    (\.venv/bin/python -c .*duckdb.*)$", readme, re.MULTILINE)
    (query,) = re.findall(r'duckdb\.sql\(\\"(.*)\\"\)', query_command)
    os.symlink(exported[0], tmp_path / "out")
    monkeypatch.chdir(tmp_path)
    rows = dict(duckdb.execute(query).fetchall())
    assert rows == Counter(call["outcome"] for call in exported[1]["calls"])
    shown = subprocess.run(
        [str(REPO / ".venv/bin/python"), *shlex.split(query_command)[1:]], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert all(outcome in shown.stdout for outcome in rows), shown.stdout


def test_the_manuals_queries_run(
    exported: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQL docs/analysis.md shows for a fleet, on the samples exported as it says."""
    manual = (REPO / "docs" / "analysis.md").read_text(encoding="utf-8")
    section = manual[manual.index("## Parquet") :]
    queries = re.findall(r"^    SELECT .*?(?=\n\n|\Z)", section, re.MULTILINE | re.DOTALL)
    assert len(queries) == 2, queries
    os.symlink(exported[0], tmp_path / "out")
    monkeypatch.chdir(tmp_path)
    by_tool, groups = (duckdb.execute(query).fetchall() for query in queries)
    assert sum(calls for _, _, calls, *_ in by_tool) == sum(c["method"] == "tools/call" for c in exported[1]["calls"])
    assert len(groups) == len(exported[1]["retry_groups"])


def test_the_types_are_the_contracts(exported: tuple[Path, dict[str, Any]]) -> None:
    schema = pq.read_schema(next(exported[0].iterdir()))
    assert schema.names == list(CALL_COLUMNS)
    assert schema.remove_metadata() == call_schema()
    assert schema.field("call_id").type == schema.field("retry_group").type == pa.string()
    assert schema.field("jsonrpc_id").type == pa.string()  # JSON text: 1 and "1" stay apart
    assert schema.field("http_status").type == pa.int64() and schema.field("http_status").nullable
    assert schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("t_start").type == pa.float64()
    assert schema.field("flags").type == pa.list_(pa.string())
    assert pa.types.is_struct(schema.field("client").type) and pa.types.is_struct(schema.field("ending").type)
    described = {
        name: kind for name, kind, *_ in duckdb.execute(f"DESCRIBE SELECT * FROM '{exported[0]}/*.parquet'").fetchall()
    }
    assert described["call_id"] == described["jsonrpc_id"] == "VARCHAR"
    assert described["http_status"] == "BIGINT"
    assert described["started_at"] == "TIMESTAMP WITH TIME ZONE"
    assert described["client"].startswith("STRUCT(lineage VARCHAR")
    assert described["evidence"] == "VARCHAR[]"


@pytest.mark.parametrize("capture", [RETRY_SAMPLE, STDIO], ids=lambda p: p.name)
def test_each_row_and_section_is_the_json_exports_of_its_recording(
    exported: tuple[Path, dict[str, Any]], capture: Path
) -> None:
    """A recording's file holds what its JSON export holds: each call, typed, and every other section."""
    export = json_export([capture])
    path = exported[0] / f"{capture.name.split('.')[0]}.parquet"
    rows = pq.read_table(path).to_pylist()
    assert [row_as_json(row) for row in rows] == export["calls"]
    metadata = pq.read_metadata(path).metadata or {}
    sections = {k.decode()[len(METADATA_PREFIX) :]: json.loads(v) for k, v in metadata.items() if b"ARROW" not in k}
    assert sections == {key: value for key, value in export.items() if key != "calls"}


def row_as_json(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as the JSON export writes the call: the id's JSON text parsed, times as ISO text."""
    row = dict(row, jsonrpc_id=None if row["jsonrpc_id"] is None else json.loads(row["jsonrpc_id"]))
    for name in ("started_at", "ended_at"):
        if row[name] is not None:
            row[name] = row[name].strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return row


def test_written_a_batch_at_a_time(tmp_path: Path) -> None:
    """Every ``batch_calls`` calls a record batch and a row group: the stream's records are not gathered first."""
    path = tmp_path / "calls.parquet"
    calls = write_parquet(CallStream([str(RETRY_SAMPLE)], window=600), str(path), batch_calls=3)
    table = pq.ParquetFile(path)
    assert table.metadata.num_rows == calls == 10
    assert table.num_row_groups == 4
    assert [row["call_id"] for row in table.read().to_pylist()] == [
        c["call_id"] for c in json_export([RETRY_SAMPLE])["calls"]
    ]


def test_what_arrow_cannot_take_is_written_as_the_csv_writes_it() -> None:
    """A lone surrogate (a JSON "\\ud800" in a name) as an escape; an error code wider than int64 as null."""
    record: CallRecord = json_export([RETRY_SAMPLE])["calls"][0]
    odd = dict(record, tool="tool\ud800", error_code=2**70, evidence=["x\udcff"])
    batch = _record_batch([record, odd], call_schema())  # type: ignore[list-item]
    assert batch.column("tool").to_pylist()[1] == "tool\\ud800"
    assert batch.column("error_code").to_pylist()[1] is None
    assert batch.column("evidence").to_pylist()[1] == ["x\\udcff"]


def test_file_names_are_the_captures_own() -> None:
    assert file_names([["a/x.flows"], ["b/x.flows"], ["c/x.stdio.jsonl"], ["run.har"]]) == [
        "a_x.parquet",
        "b_x.parquet",
        "x.parquet",
        "run.har.parquet",
    ]
    assert file_names([["a.flows"], ["a.stdio.jsonl"]]) == ["a.parquet", "a-2.parquet"]
    assert recordings(map(str, CAPTURES[:3])) == [[str(c)] for c in CAPTURES[:3]]


def test_one_recording_to_a_file_through_the_console_script(tmp_path: Path) -> None:
    console_script = Path(sys.executable).with_name("mcp-blackbox")
    out = tmp_path / "retry.parquet"
    done = subprocess.run(
        [console_script, "export", RETRY_SAMPLE, "--format", "parquet", "-o", out, "--no-redact"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith(f"10 call(s) written to {out}")
    assert out.stat().st_mode & 0o777 == 0o600  # it keeps the capture's secrets: as the flow file
    assert pd.read_parquet(out).outcome.value_counts().to_dict() == Counter(
        c["outcome"] for c in json_export([RETRY_SAMPLE])["calls"]
    )


@pytest.mark.parametrize(
    ("output", "said"),
    [
        (None, "--format parquet writes files, one per recording: -o FILE.parquet (one recording) or -o DIR/"),
        ("-", "--format parquet writes files, one per recording"),
        ("{tmp}/all.parquet", f"the captures are {len(CAPTURES)} recordings and --format parquet writes one file per"),
        ("{tmp}/file/sub/", "cannot write {tmp}/file/sub/: Not a directory"),
        ("{tmp}/missing/all.parquet", "cannot write {tmp}/missing/all.parquet: No such file or directory"),
    ],
)
def test_an_output_it_cannot_write_is_one_line_and_exit_2(
    output: str | None, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    captures = [str(RETRY_SAMPLE)] if "missing" in (output or "") else list(map(str, CAPTURES))
    target = [] if output is None else ["-o", output.format(tmp=tmp_path)]
    assert main(["export", *captures, "--format", "parquet", *target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mcp-blackbox export: ")
    assert said.format(tmp=tmp_path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_nothing_read_leaves_no_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path / "none.flows"), "--format", "parquet", "-o", f"{tmp_path}/out/"]) == 2
    assert list((tmp_path / "out").iterdir()) == []


def test_without_the_extra_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert main(["export", str(RETRY_SAMPLE), "--format", "parquet", "-o", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert err == f"mcp-blackbox export: Parquet export needs pyarrow (pyarrow is missing): {INSTALL_HINT}\n"
    assert INSTALL_HINT == "pip install 'mcp-blackbox[parquet]'"
    assert list(tmp_path.iterdir()) == []
