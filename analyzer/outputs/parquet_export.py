"""``export --format parquet``: the export's call records as Parquet, one file per recording, written as the
stream goes (docs/ARCHITECTURE.md, "Export contract": Parquet).

A data team reads a fleet's recordings as one table with the engine it already runs::

    SELECT outcome, count(*) FROM 'out/*.parquet' GROUP BY 1

- **Rows**: one per call, the records ``iter_records`` yields for the JSON export, turned into Arrow
  ``RECORDS_AT_ONCE`` at a time (a record batch) and written ``BATCH_CALLS`` at a time (a row group) through
  ``pyarrow.parquet.ParquetWriter``: memory holds a row group's Arrow columns (about 10 MB) and a thousand
  Python records, whatever the recording's length.
- **Columns**: ``CallRecord``'s, in its order, typed by the rule the pandas frames follow
  (``frames.CALL_KINDS``): counts and codes int64, epoch seconds (``t_start``, ``t_end``) and other floats
  float64, vocabulary fields their value (string). What a frame keeps as a Python object is typed here by
  its type: text a string, a list a list, a record (``client``, ``ending``, ``stderr``'s lines) a struct, so
  that DuckDB reads ``client.lineage``, ``ending.ended_by``, ``list_contains(flags, 'UNSAFE_RETRY')`` and
  ``unnest(evidence)`` with no JSON parsing. ``jsonrpc_id`` (a number, a string or null as sent) is its
  JSON text, so 1 and "1" stay different ids. ``started_at`` and ``ended_at`` are timestamp[us, UTC]
  (``t_start`` and ``t_end`` to the microsecond) rather than ISO text, null where the JSON's are.
- **The rest of the export** (``retry_groups``, ``summary``, ``skipped``...): each section as the JSON
  export writes it, JSON text in the file's key-value metadata under ``mcp_blackbox.<key>``, so the
  glob reads calls only and each file is a whole export of its recording.
- **pyarrow** is the optional extra ``mcp-blackbox[parquet]``, imported only when a file is written;
  ``require_parquet`` says how to install it.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterable, Sequence
from enum import StrEnum
from itertools import batched
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from mcp_blackbox.analyzer.model.contract import CALL_COLUMNS, CallRecord
from mcp_blackbox.analyzer.outputs.export import Analyzed, Tally, iter_records
from mcp_blackbox.analyzer.outputs.extras import install_hint, require_extra
from mcp_blackbox.analyzer.outputs.frames import BOOLEAN, CALL_KINDS, FLOAT, INTEGER, OBJECT, TIME, column_kinds
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.wire.inputs import CAPTURE_SUFFIX, capture_names, recording_of
from mcp_blackbox.analyzer.wire.stdio_capture import SUFFIX as STDIO_SUFFIX

if TYPE_CHECKING:
    import pyarrow as pa

INSTALL_HINT = install_hint("parquet")
SUFFIX: Final = ".parquet"
BATCH_CALLS: Final = 10_000  # calls per row group: about 10 MB of Arrow columns held until written
# Records turned into Arrow at a time: a Python record takes about 5 kB, some five times its Arrow columns.
RECORDS_AT_ONCE: Final = 1_000
METADATA_PREFIX: Final = "mcp_blackbox."
# The ISO-8601 fields of a call and the epoch seconds each writes (outputs/call_record.py): a timestamp here.
TIMESTAMP_OF: Final = {"started_at": "t_start", "ended_at": "t_end"}
INT64 = range(-(2**63), 2**63)


def require_parquet() -> None:
    """Raise ExtraMissing, saying how to install it, unless pyarrow and its Parquet writer import."""
    require_extra("parquet", "Parquet export needs pyarrow", ("pyarrow", "pyarrow.parquet"))


def call_schema() -> pa.Schema:
    """The calls' Arrow schema: ``CallRecord``'s fields in order, each typed by its kind (``frames.CALL_KINDS``);
    every column nullable (the contract says which are never null)."""
    import pyarrow as pa

    hints = typing.get_type_hints(CallRecord, include_extras=True)
    timestamp = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            pa.field(name, timestamp if name in TIMESTAMP_OF else _arrow_type(CALL_KINDS[name], hints[name]))
            for name in CALL_COLUMNS
        ]
    )


def _arrow_type(kind: str | type[StrEnum], hint: Any) -> pa.DataType:
    """A field's Arrow type: its frame kind, or for an object (text, a list, a record, any JSON) its type."""
    import pyarrow as pa

    if isinstance(kind, type):  # a vocabulary: its members' values
        return pa.string()
    scalar: dict[str, pa.DataType] = {INTEGER: pa.int64(), FLOAT: pa.float64(), TIME: pa.float64(), BOOLEAN: pa.bool_()}
    if kind in scalar:
        return scalar[kind]
    assert kind == OBJECT, kind
    hint = _present(hint)
    if hint is str or hint is Any:  # Any: the JSON-RPC id, as its JSON text (_column)
        return pa.string()
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return pa.list_(_arrow_type(item if isinstance(item, type) and issubclass(item, StrEnum) else OBJECT, item))
    if typing.is_typeddict(hint):
        fields = typing.get_type_hints(hint, include_extras=True)
        return pa.struct([pa.field(name, _arrow_type(k, fields[name])) for name, k in column_kinds(hint).items()])
    raise TypeError(f"no Parquet column for a field of type {hint!r}: give it one in parquet_export._arrow_type")


def _present(hint: Any) -> Any:
    """``X | None`` as X."""
    arms = [arm for arm in typing.get_args(hint) if arm is not type(None)]
    return arms[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(arms) == 1 else hint


def write_parquet(
    analysis: Analyzed, out: IO[bytes] | str | Path, *, redact: bool = True, batch_calls: int = BATCH_CALLS
) -> int:
    """The export of ``analysis`` (a ``CallStream``: its calls converted as they become final, a row group
    written every ``batch_calls``) as one Parquet file: the calls as rows, the rest as key-value metadata.
    Returns the number of calls written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = call_schema()
    tally = Tally()
    with pq.ParquetWriter(out, schema) as writer:
        pending: list[pa.RecordBatch] = []
        for chunk in batched(iter_records(analysis, redact=redact), min(batch_calls, RECORDS_AT_ONCE)):
            pending.append(_record_batch([tally.add(record) for record in chunk], schema))
            if sum(batch.num_rows for batch in pending) >= batch_calls:
                writer.write_table(pa.Table.from_batches(pending, schema))  # one row group
                pending = []
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema))
        writer.add_key_value_metadata(
            {METADATA_PREFIX + key: json.dumps(value, default=str) for key, value in sections(analysis, tally, redact)}
        )
    return tally.calls


def sections(analysis: Analyzed, tally: Tally, redact: bool) -> Iterable[tuple[str, Any]]:
    """Every section of the JSON export but ``calls`` (``export.write_json``), as the JSON export writes it."""
    redactor = Redactor.of(redact)
    yield "retry_groups", [group.record() for group in analysis.retry_groups]
    yield "auth_steps", analysis.auth_steps
    yield "stream_events", [redactor.stream_event(event) for event in analysis.stream_events]
    yield "duplicate_executions", [duplicate.record() for duplicate in analysis.duplicate_executions]
    yield "ran_more_than_once", [entry.record() for entry in analysis.ran_more_than_once]
    yield "findings", [redactor.finding(finding) for finding in analysis.findings]
    yield "summary", tally.summary(analysis)
    yield "skipped", analysis.skipped
    if (cut := analysis.range_record()) is not None:
        yield "range", cut


def _record_batch(records: Sequence[CallRecord], schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    columns = [_column(name, records) for name in schema.names]
    try:
        return pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
        )
    except (UnicodeEncodeError, OverflowError):
        # Rare: a lone surrogate (a JSON "\\ud800" in a name) as an escape, as the CSV writes it; an integer
        # wider than int64 (a peer's error code) as null.
        arrays = [pa.array(_storable(c), f.type) for c, f in zip(columns, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _column(name: str, records: Sequence[CallRecord]) -> list[Any]:
    """A column's values as Arrow takes them: the JSON-RPC id as JSON text, an ISO time as its microseconds."""
    if name == "jsonrpc_id":
        return [None if r["jsonrpc_id"] is None else json.dumps(r["jsonrpc_id"]) for r in records]
    if name in TIMESTAMP_OF:
        seconds = TIMESTAMP_OF[name]
        # The ISO text is null for no time and for a time outside years 1 to 9999: the timestamp too.
        return [None if r[name] is None else round(r[seconds] * 1_000_000) for r in records]  # type: ignore[literal-required]
    return [r[name] for r in records]  # type: ignore[literal-required]


def _storable(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if value in INT64 else None
    if isinstance(value, list):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {key: _storable(item) for key, item in value.items()}
    return value


def recordings(captures: Iterable[str]) -> list[list[str]]:
    """The capture files grouped by recording (``inputs.recording_of``: a file, or the rotated files of one
    recorder's run), in the order each recording is first given."""
    grouped: dict[str, list[str]] = {}
    for capture in captures:
        grouped.setdefault(recording_of(capture), []).append(capture)
    return list(grouped.values())


def file_names(groups: Sequence[Sequence[str]]) -> list[str]:
    """Each recording's Parquet file name: its first capture file's name (``inputs.capture_names``: with as
    few of its directories as tell it from the others', joined by ``_``), the capture suffix replaced by
    ``.parquet``; ``-2``, ``-3``... where two would still be the same."""
    names = capture_names(group[0] for group in groups)
    taken: set[str] = set()
    files: list[str] = []
    for group in groups:
        stem = names[group[0]].replace("/", "_")
        for suffix in (STDIO_SUFFIX, CAPTURE_SUFFIX):
            if stem.endswith(suffix) and stem != suffix:
                stem = stem.removesuffix(suffix)
                break
        name, number = stem + SUFFIX, 1
        while name in taken:
            number += 1
            name = f"{stem}-{number}{SUFFIX}"
        taken.add(name)
        files.append(name)
    return files


def files_in(directory: str, groups: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    """Each file to write in ``directory`` -> the captures of its recording."""
    return {str(Path(directory) / name): list(group) for name, group in zip(file_names(groups), groups, strict=True)}
