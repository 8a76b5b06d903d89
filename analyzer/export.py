"""The export contract (DESIGN.md): calls, retry groups, summary and skipped flows, as JSON or CSV."""

from __future__ import annotations

import csv
import json
from collections import Counter
from typing import IO, Any

from analyzer.analysis import Analysis
from analyzer.call_record import COLUMNS


def summarize(analysis: Analysis, records: list[dict[str, Any]]) -> dict[str, Any]:
    def count(key: str) -> dict[str, int]:
        return dict(Counter(str(r[key]) for r in records if r[key] is not None).most_common())

    return {
        "flows_read": analysis.flows_read,
        "flows_analyzed": analysis.analyzed,
        "flows_skipped": len(analysis.skipped),
        "calls": len(records),
        "by_outcome": count("outcome"),
        "by_layer": count("layer"),
        "by_method": count("method"),
        "by_tool": count("tool"),
        "flags": dict(Counter(f for r in records for f in r["flags"]).most_common()),
        "read_problems": analysis.read_problems,
        "notes": analysis.notes,
    }


def export_document(analysis: Analysis) -> dict[str, Any]:
    records = analysis.calls
    return {
        "calls": records,
        "retry_groups": [],
        "summary": summarize(analysis, records),
        "skipped": analysis.skipped,
    }


def write_json(analysis: Analysis, out: IO[str]) -> None:
    json.dump(export_document(analysis), out, indent=1, default=str)
    out.write("\n")


def write_csv(analysis: Analysis, out: IO[str]) -> None:
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    for record in analysis.calls:
        row = dict(record)
        for key in ("flags", "exchanges", "evidence"):
            row[key] = json.dumps(row[key])
        writer.writerow(row)
