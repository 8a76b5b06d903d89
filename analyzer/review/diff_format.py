"""A diff (analyzer/review/diff.py) as text for a terminal, Markdown for a pull request or an incident, or JSON."""

from __future__ import annotations

import json
from typing import Any

from mcp_blackbox.analyzer.review.summary_markdown import ref, text


def diff_json(result: dict[str, Any], before: str, after: str) -> str:
    return json.dumps({"before": before, "after": after, **result}, indent=1, default=str) + "\n"


def _cut(result: dict[str, Any]) -> list[tuple[str, str]]:
    """(side, what its range is) with --since/--until: both sides are cut alike (a time of day on each
    side's own day); [] without."""
    cut = result.get("range")
    return [] if not cut else [(side, cut[side]["described"]) for side in ("before", "after")]


def _ids(entry: dict[str, Any]) -> tuple[str, str]:
    def one(side: dict[str, Any] | None) -> str:
        return side["call_id"] if side else "-"

    return one(entry["before"]), one(entry["after"])


def _verdicts(entry: dict[str, Any]) -> str:
    """Each side's first attempt's verdict, and how its retry chain ended when it has one."""

    def one(side: dict[str, Any] | None, missing: str) -> str:
        if side is None:
            return missing
        verdict = side["outcome"] + (f" [{','.join(side['flags'])}]" if side["flags"] else "")
        attempts = side.get("attempts", 1)
        return verdict + (f" (ended {side['final_outcome']} after {attempts} attempts)" if attempts > 1 else "")

    return f"{one(entry['before'], '(no such call)')} -> {one(entry['after'], '(not called)')}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _latency_cells(row: dict[str, Any]) -> tuple[str, str, str]:
    b, a = row["before"], row["after"]
    ratio = f"x{a['p95'] / b['p95']:.2f}" if a["p95"] is not None and b["p95"] else ""
    return (
        f"{_ms(b['p50'])} / {_ms(b['p95'])} ({b['calls']})",
        f"{_ms(a['p50'])} / {_ms(a['p95'])} ({a['calls']})",
        ratio + (" slower" if row["slower"] else ""),
    )


def diff_text(result: dict[str, Any], before: str, after: str) -> str:
    calls, failures = result["calls"], result["failures"]
    lines = [
        f"before: {before}: {calls['before']} calls, {failures['before']} failed",
        f"after:  {after}: {calls['after']} calls, {failures['after']} failed",
        f"matched {calls['matched']} requests (a retry chain is one; by server, method, tool, arguments and "
        f"order); {result['only_before']} only before, {result['only_after']} only after",
    ]
    lines += [f"{side}: {said}" for side, said in _cut(result)]
    for title, key in (
        ("new failures", "new_failures"),
        ("now needs a retry", "needs_retry"),
        ("fixed, recovered without a retry, or no longer called", "fixed"),
        ("verdicts changed", "changed"),
    ):
        entries = result[key]
        lines.append(f"{title}: {len(entries)}")
        for entry in entries:
            was, now = _ids(entry)
            lines.append(f"  {was} -> {now} {entry['what']}: {_verdicts(entry)}")
    for title, key in (("retry chains", "retries"), ("ran more than once", "ran_more_than_once")):
        lines.append(f"{title}:" + (" no change" if not result[key] else ""))
        lines += [f"  {row['what']}: {row['before']} -> {row['after']}" for row in result[key]]
    if result["latency"]:
        lines.append("latency per tool, p50 / p95 ms (calls): before -> after")
        for row in result["latency"]:
            was, now, ratio = _latency_cells(row)
            lines.append(f"  {row['tool']}: {was} -> {now} {ratio}".rstrip())
    if result["regressions"]:
        lines.append(f"WORSE: {len(result['regressions'])} regression(s)")
        lines += [f"  {line}" for line in result["regressions"]]
    else:
        lines.append("NOT WORSE: no new failure, new retry, write run more than once or slower tool")
    return "\n".join(lines) + "\n"


def diff_markdown(result: dict[str, Any], before: str, after: str) -> str:
    """The diff as Markdown: the verdict, the two captures side by side, then a section for each kind of change
    that has any (regressions, verdicts, repetitions, latency)."""
    calls, failures = result["calls"], result["failures"]
    verdict = (
        f"**Worse:** {len(result['regressions'])} regression(s)."
        if result["regressions"]
        else "**Not worse:** no new failure, new retry, write run more than once or slower tool."
    )
    lines = [
        "# MCP capture diff",
        "",
        verdict,
        "",
        "| | capture | calls | failed |",
        "|---|---|---:|---:|",
        f"| before | {text(before)} | {calls['before']} | {failures['before']} |",
        f"| after | {text(after)} | {calls['after']} | {failures['after']} |",
        "",
        f"{calls['matched']} requests (a retry chain is one) matched by server, method, tool, arguments and order; "
        f"{result['only_before']} only before, {result['only_after']} only after.",
        "",
    ]
    if cut := _cut(result):
        lines += [*(f"- Range {side}: {text(said)}" for side, said in cut), ""]
    lines += _regression_section(result)
    lines += _verdict_sections(result)
    lines += _repetition_section(result)
    lines += _latency_section(result)
    return "\n".join(lines).rstrip() + "\n"


def _regression_section(result: dict[str, Any]) -> list[str]:
    if not result["regressions"]:
        return []
    return ["## Regressions", "", *(f"- {text(line)}" for line in result["regressions"]), ""]


def _verdict_sections(result: dict[str, Any]) -> list[str]:
    """A table each of the new failures, the fixed calls and the changed verdicts; none for an empty one."""
    lines: list[str] = []
    for title, key in (
        ("New failures", "new_failures"),
        ("Now needs a retry", "needs_retry"),
        ("Fixed, recovered without a retry, or no longer called", "fixed"),
        ("Verdicts changed", "changed"),
    ):
        if not result[key]:
            continue
        lines += [f"## {title}", "", "| before | after | call | verdict |", "|---|---|---|---|"]
        for entry in result[key]:
            was, now = _ids(entry)
            lines.append(f"| {_linked(was)} | {_linked(now)} | {text(entry['what'])} | {_verdicts(entry)} |")
        lines.append("")
    return lines


def _linked(call_id: str) -> str:
    """A call id as a reference to its call; "-" (no call on that side) as it is."""
    return ref(call_id) if call_id != "-" else "-"


def _repetition_section(result: dict[str, Any]) -> list[str]:
    """One table of what changed in the retry chains and the writes that ran more than once."""
    changes = [
        (title, row)
        for title, key in (("retry chain", "retries"), ("ran more than once", "ran_more_than_once"))
        for row in result[key]
    ]
    if not changes:
        return []
    lines = ["## Retries, writes run more than once", "", "| what | | before | after |"]
    lines += ["|---|---|---:|---:|"]
    lines += [f"| {title} | {text(row['what'])} | {row['before']} | {row['after']} |" for title, row in changes]
    lines.append("")
    return lines


def _latency_section(result: dict[str, Any]) -> list[str]:
    if not result["latency"]:
        return []
    lines = ["## Latency per tool", "", "| tool | before p50 / p95 ms (calls) | after | p95 ratio |"]
    lines += ["|---|---|---|---|"]
    for row in result["latency"]:
        was, now, ratio = _latency_cells(row)
        lines.append(f"| {text(row['tool'])} | {was} | {now} | {ratio} |")
    lines.append("")
    return lines
