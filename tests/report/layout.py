"""The report's compact data read back for the tests (analyzer/review/report.py writes it, templates/report.js
decodes it the same way): texts out of the string table, times in milliseconds, retry groups and timeout
anatomies as records keyed by call id."""

from __future__ import annotations

from typing import Any


def column(data: dict[str, Any], name: str) -> list[Any]:
    """One column of the rows, decoded: texts, t0 and dur in ms after the first call, group as its id."""
    strings, index = data["strings"], data["columns"].index(name)
    raw = [row[index] for row in data["calls"]]
    if name in data["string_columns"]:
        return [strings[v] for v in raw]
    if name == "t0":
        out, t = [], 0
        for step in raw:
            t += step
            out.append(t / 1000)
        return out
    if name == "dur":
        return [v / 1000 for v in raw]
    if name == "group":
        ids = [g[data["group_columns"].index("retry_group")] for g in data["groups"]]
        return [None if v is None else ids[v] for v in raw]
    return raw


def records(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row as a record of decoded columns."""
    columns = {name: column(data, name) for name in data["columns"]}
    return [{name: columns[name][n] for name in columns} for n in range(len(data["calls"]))]


def groups(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The retry groups as records: members as call ids, texts decoded, total_ms."""
    strings, ids = data["strings"], column(data, "id")
    out = []
    for g in data["groups"]:
        record = dict(zip(data["group_columns"], g, strict=True))
        for key in ("origin", "confidence", "final_outcome", "safety"):
            record[key] = strings[record[key]]
        record["members"] = [ids[n] for n in record["members"]]
        record["attempts"] = len(record["members"])
        record["evidence"] = [strings[n] for n in record["evidence"]]
        record["total_ms"] = record.pop("total_us") / 1000
        out.append(record)
    return out


def anatomies(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """call id -> its timeout anatomy, with ended_by, detail and sentence as texts."""
    strings, ids = data["strings"], column(data, "id")
    out = {}
    for a in data["anatomy"]:
        record = dict(zip(data["anatomy_columns"], a, strict=True))
        for key in ("ended_by", "detail", "sentence"):
            record[key] = strings[record[key]]
        out[ids[record.pop("row")]] = record
    return out
