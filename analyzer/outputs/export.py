"""The export contract (docs/ARCHITECTURE.md): calls, retry groups, summary and skipped flows, as JSON or CSV.

Records are built and written one call at a time, so exporting a large capture
does not hold a second copy of it in memory.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, Protocol

from mcp_blackbox.analyzer.across.repeated_runs import RanMoreThanOnce
from mcp_blackbox.analyzer.calls.classify import CaptureFacts, protocol_version
from mcp_blackbox.analyzer.model.contract import CallRecord, FindingRecord
from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.model.vocabulary import Certainty
from mcp_blackbox.analyzer.outputs.call_record import COLUMNS, call_record
from mcp_blackbox.analyzer.redaction.redactor import Redactor


class Analyzed(Protocol):
    """What an export reads of an analysis: the whole one (``outputs.analysis.Analysis``) or a stream of it
    (``across.call_stream.CallStream``), whose calls become final as it is read."""

    facts: CaptureFacts

    @property
    def retry_groups(self) -> Sequence[Any]: ...  # a windowed stream's on disk (across/spool.py)
    @property
    def duplicate_executions(self) -> Sequence[Any]: ...

    ran_more_than_once: list[RanMoreThanOnce]
    findings: list[FindingRecord]
    stream_events: list[dict[str, Any]]
    auth_steps: list[dict[str, Any]]
    notes: list[str]

    @property
    def flows_read(self) -> int: ...
    @property
    def analyzed(self) -> int: ...
    @property
    def skipped(self) -> list[dict[str, Any]]: ...
    @property
    def read_problems(self) -> list[dict[str, Any]]: ...
    def final_calls(self) -> Iterable[Call]: ...
    def range_record(self) -> dict[str, Any] | None: ...


# The summary's counts: its name -> the record's field it counts (a call without that field is not counted).
COUNTED: dict[str, Callable[[CallRecord], str | None]] = {
    "by_outcome": lambda record: record["outcome"],
    "by_layer": lambda record: record["layer"],
    "by_method": lambda record: record["method"],
    "by_tool": lambda record: record["tool"],
}


class Tally:
    """Counts by outcome, layer, method, tool and flag, fed one record at a time."""

    def __init__(self) -> None:
        self.calls = 0
        self.counts = {name: Counter[str]() for name in COUNTED}
        self.flags = Counter[str]()

    def add(self, record: CallRecord) -> CallRecord:
        self.calls += 1
        for name, field_of in COUNTED.items():
            if (value := field_of(record)) is not None:
                self.counts[name][str(value)] += 1
        self.flags.update(record["flags"])
        return record

    def summary(self, analysis: Analyzed) -> dict[str, Any]:
        return {
            "flows_read": analysis.flows_read,
            "flows_analyzed": analysis.analyzed,
            "flows_skipped": len(analysis.skipped),
            "calls": self.calls,
            **{name: dict(counter.most_common()) for name, counter in self.counts.items()},
            "flags": dict(self.flags.most_common()),
            "retry_groups": len(analysis.retry_groups),
            "retries_by_origin": dict(Counter(g.origin for g in analysis.retry_groups).most_common()),
            "duplicate_executions": len(analysis.duplicate_executions),
            "ran_more_than_once": ran_more_than_once_counts(analysis.ran_more_than_once),
            "findings": len(analysis.findings),
            "stream_events": len(analysis.stream_events),
            "auth_steps": len(analysis.auth_steps),
            "read_problems": analysis.read_problems,
            "notes": analysis.notes,
        }


def ran_more_than_once_counts(entries: Iterable[RanMoreThanOnce]) -> dict[str, int]:
    """How many writes ran more than once, by certainty: every certainty named, none omitted."""
    counted = Counter(entry.certainty for entry in entries)
    return {certainty.value: counted[certainty] for certainty in Certainty}


def summarize(analysis: Analyzed, records: Iterable[CallRecord]) -> dict[str, Any]:
    tally = Tally()
    for record in records:
        tally.add(record)
    return tally.summary(analysis)


def iter_records(analysis: Analyzed, *, redact: bool = True) -> Iterator[CallRecord]:
    """The calls' export records, built one at a time (``analysis.calls`` keeps them all); from a
    ``CallStream``, as its calls become final.

    Evidence and error messages quote what servers said, which may hold a token: redacted by default
    (``Redactor.call_record`` says which fields).
    """
    for _, record in iter_calls_and_records(analysis, redact=redact):
        yield record


def iter_calls_and_records(analysis: Analyzed, *, redact: bool = True) -> Iterator[tuple[Call, CallRecord]]:
    """Each final call with its export record (``iter_records``), for a reader that needs the call too."""
    redactor = Redactor.of(redact)
    for call in analysis.final_calls():
        yield call, redactor.call_record(call_record(call, protocol_version(call, analysis.facts)))


def write_json(analysis: Analyzed, out: IO[str], *, redact: bool = True) -> None:
    """The whole export; from a ``CallStream``, each call written as it becomes final, the rest at the end."""
    tally = Tally()
    out.write('{"calls": [')
    for number, record in enumerate(iter_records(analysis, redact=redact)):
        out.write(",\n " if number else "\n ")
        out.write(json.dumps(tally.add(record), default=str))
    out.write('\n],\n"retry_groups": [')
    for number, group in enumerate(analysis.retry_groups):
        out.write(",\n " if number else "\n ")
        out.write(json.dumps(group.record(), default=str))
    out.write('\n],\n"auth_steps": ')
    out.write(json.dumps(analysis.auth_steps, default=str))
    out.write(',\n"stream_events": ')
    out.write(json.dumps([Redactor.of(redact).stream_event(e) for e in analysis.stream_events], default=str))
    out.write(',\n"duplicate_executions": ')
    out.write(json.dumps([d.record() for d in analysis.duplicate_executions], default=str))
    out.write(',\n"ran_more_than_once": [')
    for number, entry in enumerate(analysis.ran_more_than_once):
        out.write(",\n " if number else "\n ")
        out.write(json.dumps(entry.record(), default=str))
    out.write('\n],\n"findings": ')
    findings = [Redactor.of(redact).finding(f) for f in analysis.findings]
    out.write(json.dumps(findings, indent=1, default=str))
    out.write(',\n"summary": ')
    out.write(json.dumps(tally.summary(analysis), indent=1, default=str))
    out.write(',\n"skipped": ')
    out.write(json.dumps(analysis.skipped, indent=1, default=str))
    if (cut := analysis.range_record()) is not None:  # --since/--until; known once every call is read
        out.write(',\n"range": ')
        out.write(json.dumps(cut, indent=1, default=str))
    out.write("}\n")


def write_csv(analysis: Analyzed, out: IO[str], *, redact: bool = True) -> None:
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    for record in iter_records(analysis, redact=redact):
        row: dict[str, Any] = dict(record)
        for key in ("flags", "exchanges", "evidence", "client", "ending", "stderr"):
            row[key] = json.dumps(row[key])
        writer.writerow({key: _encodable(value) for key, value in row.items()})


def _encodable(value: Any) -> Any:
    """Lone surrogates (a JSON "\\ud800" in a tool name, a file name that is not UTF-8) as escapes:
    the CSV is written as UTF-8. (The JSON export escapes them itself.)"""
    if isinstance(value, str) and not value.isascii():
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value
