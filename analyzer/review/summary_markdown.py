"""``summary --format markdown``: the capture's story for an incident document.

Sections in the order a review reads them: the findings (named patterns across
calls), what was captured, what failed (by layer, with the first failure's
time), successes in doubt (a flag of ``DOUBTED_SUCCESS``: a swallowed exception
on stderr, an empty result, an error-looking text), retries and who made them,
the writes that ran more than once, top errors, calls without an answer, and
what the capture could not show. Calls are named by their stable ids (analyzer/across/call_ids.py), so
the document and the HTML report point at the same calls.

Captured text (tool names, error messages, client names) is untrusted: the
characters that could start markup in it are backslash-escaped, and URL and
"www." autolinks are broken, so it renders as the text it is, never as a link,
an image, HTML, an entity or a table cell border.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from mcp_blackbox.analyzer.calls.anatomy import describe
from mcp_blackbox.analyzer.model.contract import AttemptRecord, CallRecord, RetryGroupRecord
from mcp_blackbox.analyzer.model.vocabulary import DOUBTED_SUCCESS, Certainty, Layer, RetryOrigin, is_failure
from mcp_blackbox.analyzer.outputs.analysis import Analysis
from mcp_blackbox.analyzer.outputs.export import iter_records, ran_more_than_once_counts
from mcp_blackbox.analyzer.outputs.wallclock import iso_utc
from mcp_blackbox.analyzer.read.time_range import range_lines
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.captured import captured_facts
from mcp_blackbox.analyzer.review.check import short_sources
from mcp_blackbox.analyzer.review.said import attempt_said, finding_head, ran_twice_counts, ran_twice_head
from mcp_blackbox.analyzer.review.top_errors import top_errors

LISTED = 20  # rows of one list before "and N more"
MARKUP = re.compile(r"([\\`*_\[\]<>|!&~#@])")  # what can open emphasis, code, links, HTML, entities, cells
AUTOLINK = re.compile(r"(?<=:)//|(?<=www)\.", re.IGNORECASE)  # GFM links bare URLs and www. names


def text(value: Any) -> str:
    """Untrusted text as literal Markdown on one line (CommonMark lets any ASCII punctuation be escaped)."""
    escaped = MARKUP.sub(r"\\\1", " ".join(str(value).split()))
    return AUTOLINK.sub(lambda m: "\\" + "\\".join(m.group()), escaped)


def ref(call_id: str) -> str:
    return f"`{call_id}`"  # ids are c + hex digits, ".", "~": nothing to escape in a code span


def refs(call_ids: Iterable[str], limit: int = 8) -> str:
    ids = list(call_ids)
    shown = ", ".join(ref(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def summary_markdown(analysis: Analysis, paths: list[str], *, redact: bool = True) -> str:
    records = list(iter_records(analysis, redact=redact))
    groups = [g.record() for g in analysis.retry_groups]
    sections = [
        ["# MCP capture summary", ""],
        _findings(analysis, Redactor.of(redact)),
        _captured(analysis, paths, records),
        _failed(records),
        _doubted(records),
        _retries(groups),
        _ran_more_than_once(analysis),
        _top_errors(records),
        _unanswered(records),
        _not_shown(analysis, Redactor.of(redact)),
    ]
    return "\n".join(line for section in sections for line in section).rstrip() + "\n"


def _captured(analysis: Analysis, paths: list[str], records: list[CallRecord]) -> list[str]:
    facts = captured_facts(analysis, paths)
    names = short_sources(facts["captures"])
    lines = ["## What was captured", ""]
    lines.append(f"- Captures: {', '.join(text(names[c]) for c in facts['captures'])}")
    if analysis.time_range is not None:  # --since/--until: every count below is of the calls in it
        lines.append(f"- Range: {text(analysis.time_range.describe())}")
        lines += [f"- {text(line)}" for line in range_lines(analysis.time_range, analysis.range)[1:]]
    if records:
        lines.append(f"- Time (UTC): {iso_utc(facts['start'])} to {iso_utc(facts['end'])}")
    lines.append(
        f"- {len(records)} calls in {analysis.analyzed} exchanges "
        f"({analysis.flows_read} flows read, {len(analysis.skipped)} skipped)"
    )
    named = {
        "Clients": facts["clients"] + facts["user_agents"],
        "Client processes": facts["processes"],
        "Servers": facts["servers"],
        "Protocol versions": facts["versions"],
    }
    lines += [f"- {title}: {', '.join(text(v) for v in values)}" for title, values in named.items() if values]
    return [*lines, ""]


def _failed(records: list[CallRecord]) -> list[str]:
    failed = [r for r in records if is_failure(r["outcome"])]
    lines = ["## What failed", ""]
    if not failed:
        return [*lines, f"No call failed ({len(records)} calls).", ""]
    first = failed[0]
    lines.append(
        f"{len(failed)} of {len(records)} calls failed. The first: {ref(first['call_id'])} "
        f"{_what(first)} at {first['started_at']}, {first['outcome']}."
    )
    lines += ["", "| layer | failed | outcomes | first failure | calls |", "|---|---:|---|---|---|"]
    for layer in Layer:
        in_layer = [r for r in failed if r["layer"] == layer]
        if not in_layer:
            continue
        outcomes = Counter(r["outcome"] for r in in_layer)
        lines.append(
            f"| {layer.value} | {len(in_layer)} | {', '.join(f'{o} {n}' for o, n in outcomes.most_common())} "
            f"| {in_layer[0]['started_at']} | {refs(r['call_id'] for r in in_layer)} |"
        )
    return [*lines, ""]


def _doubted(records: list[CallRecord]) -> list[str]:
    lines = ["## Successes in doubt", ""]
    doubted = [r for r in records if not is_failure(r["outcome"]) and DOUBTED_SUCCESS.intersection(r["flags"])]
    if not doubted:
        return [*lines, "None: no call that succeeded carries a flag that doubts it.", ""]
    for record in doubted[:LISTED]:
        flags = ", ".join(f for f in record["flags"] if f in DOUBTED_SUCCESS)
        head = f"- {ref(record['call_id'])} {_what(record)}, {record['outcome']} but {flags}"
        lines.append(f"{head}: {text(record['reason'])}")
    return lines + _more(len(doubted)) + [""]


def _retries(groups: list[RetryGroupRecord]) -> list[str]:
    lines = ["## Retries and who made them", ""]
    if not groups:
        return [*lines, "No call was sent again.", ""]
    by_origin: dict[str, list[RetryGroupRecord]] = {}
    for group in groups:
        by_origin.setdefault(group["origin"], []).append(group)
    lines += ["| origin | chains | confidence | meaning |", "|---|---:|---|---|"]
    for origin, members in sorted(by_origin.items(), key=lambda item: -len(item[1])):
        confidence = Counter(g["confidence"] for g in members)
        lines.append(
            f"| {origin} | {len(members)} | {', '.join(f'{c} {n}' for c, n in confidence.most_common())} "
            f"| {RetryOrigin(origin).description} |"
        )
    lines.append("")
    for group in groups[:LISTED]:
        attempts = " → ".join(ref(m) for m in group["members"])
        safety = group["safety"] if group["failure_retry"] else "not a failure"
        lines.append(
            f"- {group['retry_group']} ({group['origin']}, {group['confidence']}): {attempts}, "
            f"ended {group['final_outcome']}; {safety}"
        )
    return lines + _more(len(groups)) + [""]


def _findings(analysis: Analysis, redactor: Redactor) -> list[str]:
    """Named patterns across calls, each with its evidence and its calls; none: no section."""
    if not analysis.findings:
        return []
    lines = ["## Findings", ""]
    for finding in (redactor.finding(f) for f in analysis.findings):
        lines.append(f"- **{finding_head(finding, text)}** ({iso_utc(finding['start'])} to {iso_utc(finding['end'])})")
        lines += [f"  - {text(line)}" for line in finding["evidence"]]
        if finding["calls"]:
            lines.append(f"  - Calls: {refs(finding['calls'])}")
    return [*lines, ""]


def _ran_more_than_once(analysis: Analysis) -> list[str]:
    lines = ["## Ran more than once", ""]
    entries = [entry.record() for entry in analysis.ran_more_than_once]
    if not entries:
        return [*lines, "None: no tool that is not read-only or idempotent ran twice with the same arguments.", ""]
    counted = ran_twice_counts(ran_more_than_once_counts(analysis.ran_more_than_once))
    meaning = " ".join(f"*{certainty.value.capitalize()}*: {certainty.description}" for certainty in Certainty)
    lines += [f"{counted}. {meaning}", ""]
    for entry in entries[:LISTED]:
        lines.append(f"- {ran_twice_head(entry, text)}")
        lines += [f"  - {_attempt(attempt)}" for attempt in entry["attempts"]]
    return lines + _more(len(entries)) + [""]


def _attempt(attempt: AttemptRecord) -> str:
    """An attempt's line, its call id as a code span like every other reference."""
    said = attempt_said(attempt)
    return ref(attempt["call_id"]) + said[len(attempt["call_id"]) :]


def _top_errors(records: list[CallRecord]) -> list[str]:
    """The failed calls grouped by error, the figures that differ between calls set aside (review/top_errors.py)."""
    lines = ["## Top errors", ""]
    failed = ((r["call_id"], str(r["outcome"]), r["reason"]) for r in records if is_failure(r["outcome"]))
    errors = top_errors(failed)
    if not errors:
        return [*lines, "None.", ""]
    lines += ["| count | outcome | error | first |", "|---:|---|---|---|"]
    for error in errors[:LISTED]:
        lines.append(f"| {error.count} | {error.outcome} | {text(error.error)} | {ref(error.first)} |")
    return lines + _more(len(errors)) + [""]


def _unanswered(records: list[CallRecord]) -> list[str]:
    lines = ["## Calls that got no answer", ""]
    unanswered = [(r, ending) for r in records if (ending := r["ending"]) is not None]
    if not unanswered:
        return [*lines, "Every request was answered.", ""]
    for record, ending in unanswered[:LISTED]:
        sentence = describe(ending, record["carrier"])
        lines.append(f"- {ref(record['call_id'])} {_what(record)}, {record['outcome']}: {text(sentence)}")
    return lines + _more(len(unanswered)) + [""]


def _not_shown(analysis: Analysis, redactor: Redactor) -> list[str]:
    lines = ["## What the capture could not show", ""]
    items = [f"{text(p['source'])}: {text(p['reason'])}" for p in analysis.read_problems]
    reasons = Counter(s["reason"] for s in analysis.skipped)
    items += [f"{n} flow(s) skipped: {text(reason)}" for reason, n in reasons.most_common(LISTED)]
    items += [text(note) for note in analysis.notes]
    if not redactor.redacts:
        items.append("secrets are NOT redacted in this summary (--no-redact)")
    if not items:
        return [*lines, "Nothing: every flow was read, and every exchange was MCP or part of its authorization.", ""]
    return lines + [f"- {item}" for item in items] + [""]


def _what(record: CallRecord) -> str:
    method = text(record["method"] or "(response)")
    return f"{method} {text(record['tool'])}" if record["tool"] else method


def _more(total: int) -> list[str]:
    return [f"- and {total - LISTED} more (mcp-blackbox export lists them all)"] if total > LISTED else []
