"""The terminal summary: the findings, counts, the calls that did not succeed, the writes that ran more than
once, the retry chains; 80 columns."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping
from typing import Any

from mcp_blackbox.analyzer.model.contract import CallRecord, FindingRecord, RanMoreThanOnceRecord
from mcp_blackbox.analyzer.model.noteworthy import noteworthy
from mcp_blackbox.analyzer.model.vocabulary import RAN_TWICE_FLAGS
from mcp_blackbox.analyzer.outputs.analysis import Analysis, CallStream
from mcp_blackbox.analyzer.outputs.export import Tally, iter_records
from mcp_blackbox.analyzer.read.time_range import range_lines
from mcp_blackbox.analyzer.review.said import attempt_said, ran_twice_counts, ran_twice_head

INDENT = "    "


def summary_text(analysis: Analysis | CallStream, width: int = 80) -> str:
    """From a CallStream, as its calls become final: only the lines of the calls to look at are kept.

    The findings, the counts, the calls to look at, the writes that ran more than once, the retry chains;
    all but the calls are read once every call has been (a CallStream knows them only then)."""
    tally, failing, ran_again, settled, senders = Tally(), [], set[str](), 0, Counter[str]()
    for call in iter_records(analysis):
        tally.add(call)
        if call["client"] and (process := call["client"]["process"]):
            senders[f"pid {process['pid']} ({process['name']})"] += 1
        # A stream settles a duplicate execution after its first run is final: that run is listed with the
        # writes that ran more than once below; the later ones (flagged) are listed here too.
        for duplicate in analysis.duplicate_executions[settled:]:
            ran_again.update(duplicate.record()["calls"])
        settled = len(analysis.duplicate_executions)
        failing += _call_to_look_at(call, width, call["call_id"] in ran_again)
    lines = _finding_lines(analysis.findings, width)
    # --since/--until before the counts: every count below is of the calls in the range.
    lines += [line for said in range_lines(analysis.time_range, analysis.range_record()) for line in wrap(said, width)]
    lines += _count_lines(tally.summary(analysis), width)
    if senders:  # measured by the recorder (addon/peer_process.py): the processes that sent the calls
        lines += counts("client processes:", dict(senders.most_common(10)), width)
    if failing:
        lines += ["", "calls to look at:", *failing]
    lines += _ran_twice_lines([entry.record() for entry in analysis.ran_more_than_once], width)
    lines += _retry_chain_lines(analysis, width)
    return "\n".join(lines)


def _call_to_look_at(call: CallRecord, width: int, ran_again: bool) -> list[str]:
    """A noteworthy call's lines: its id, method, tool, JSON-RPC id, outcome, flags and retry chain, then its
    reason (if it has evidence). No lines for any other call."""
    if not noteworthy(call["outcome"], call["flags"], call["retry_group"], ran_again):
        return []
    what = call["method"] or "(response)"
    if call["tool"]:
        what += f" {call['tool']}"
    shown = [flag for flag in call["flags"] if flag not in RAN_TWICE_FLAGS]  # said below, once
    flags = f" [{', '.join(shown)}]" if shown else ""
    chain = f" (retry {call['retry_group']} attempt {call['attempt']})" if call["retry_group"] else ""
    lines = wrap(f"  {call['call_id']} {what} id={call['jsonrpc_id']} {call['outcome']}{flags}{chain}", width)
    if call["evidence"]:
        # Evidence quotes what servers said: redacted (iter_records), like the export and the report;
        # wrapped, never cut: the reason is what the reader came for.
        lines += wrap(f"{INDENT}{call['reason']}", width)
    return lines


def _count_lines(summary: Mapping[str, Any], width: int) -> list[str]:
    """How many calls in how many exchanges, then the counts by outcome, layer, method and tool, and the flags
    (each only if there are any)."""
    lines = wrap(
        f"{summary['calls']} calls in {summary['flows_analyzed']} exchanges "
        f"({summary['flows_read']} flows read, {summary['flows_skipped']} skipped)",
        width,
    )
    for title, key in (("outcome", "by_outcome"), ("layer", "by_layer"), ("method", "by_method"), ("tool", "by_tool")):
        if summary[key]:
            lines += counts(f"by {title}:", summary[key], width)
    if flags := {flag: n for flag, n in summary["flags"].items() if flag not in RAN_TWICE_FLAGS}:
        lines += counts("flags:", flags, width)
    lines += wrap(f"ran more than once: {ran_twice_counts(summary['ran_more_than_once'])}", width)
    return lines


def _finding_lines(findings: list[FindingRecord], width: int) -> list[str]:
    """The findings first, each with its evidence; none: no lines."""
    if not findings:
        return []
    lines = ["findings:"]
    for finding in findings:
        lines += wrap(f"  {finding['title']}", width)
        lines += wrap(f"{INDENT}{finding['summary']}", width)
        lines += [line for evidence in finding["evidence"] for line in wrap(f"{INDENT}- {evidence}", width)]
    return [*lines, ""]


def _ran_twice_lines(entries: list[RanMoreThanOnceRecord], width: int) -> list[str]:
    """Each write that ran more than once, with every attempt and how it ended; none: no lines."""
    if not entries:
        return []
    lines = ["", *wrap("ran more than once (same client, same arguments):", width)]
    for entry in entries:
        lines += wrap(f"  {ran_twice_head(entry)}", width)
        lines += [line for attempt in entry["attempts"] for line in wrap(f"{INDENT}{attempt_said(attempt)}", width)]
    return lines


def _retry_chain_lines(analysis: Analysis | CallStream, width: int) -> list[str]:
    """Each retry chain: its origin and confidence, its attempts, how it ended and whether it was safe (and,
    when its write ran more than once, how sure that is: the entry above lists the same attempts); none: no
    lines."""
    if not analysis.retry_groups:
        return []
    ran_twice = {a.call_id: entry.certainty for entry in analysis.ran_more_than_once for a in entry.attempts}
    lines = ["", "retry chains:"]
    for group in analysis.retry_groups:
        record = group.record()
        safety = record["safety"] if record["failure_retry"] else "not a failure"
        lines += wrap(
            f"  {record['retry_group']} {record['origin']} [{record['confidence']}]: "
            f"{' -> '.join(record['members'])} = {record['final_outcome']}, {safety}",
            width,
        )
        if certainty := next((ran_twice[m] for m in record["members"] if m in ran_twice), None):
            lines.append(f"{INDENT}ran more than once: {certainty}")
    return lines


def counts(title: str, counted: Mapping[str, int], width: int) -> list[str]:
    """``title NAME n, NAME n, ...`` wrapped between items, so a name stays beside its count."""
    items = [f"{name} {count}" for name, count in counted.items()]
    lines, line, holds_items = [], title, False
    for number, item in enumerate(items):
        item += "," if number < len(items) - 1 else ""
        if holds_items and len(line) + 1 + len(item) > width:
            lines.append(line)
            line = INDENT + item
        else:
            line += " " + item
        holds_items = True
    lines.append(line)
    return [cut(line, width) for line in lines]


def wrap(text: str, width: int) -> list[str]:
    """Words onto indented lines; only a word longer than a whole line is broken."""
    indent = INDENT + " " * (len(text) - len(text.lstrip(" ")))
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False, drop_whitespace=True) or [""]


def cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"
