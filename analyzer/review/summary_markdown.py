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
from dataclasses import dataclass, field
from typing import Any

from mcp_blackbox.analyzer.calls.anatomy import describe
from mcp_blackbox.analyzer.model.contract import AttemptRecord, CallRecord, RetryGroupRecord
from mcp_blackbox.analyzer.model.vocabulary import DOUBTED_SUCCESS, Certainty, Layer, RetryOrigin, is_failure
from mcp_blackbox.analyzer.outputs.analysis import Analysis, CallStream, protocol_version
from mcp_blackbox.analyzer.outputs.call_record import call_record
from mcp_blackbox.analyzer.outputs.export import ran_more_than_once_counts
from mcp_blackbox.analyzer.outputs.wallclock import iso_utc
from mcp_blackbox.analyzer.read.time_range import range_lines
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.captured import Captured
from mcp_blackbox.analyzer.review.check import short_sources
from mcp_blackbox.analyzer.review.said import attempt_said, finding_head, ran_twice_counts, ran_twice_head
from mcp_blackbox.analyzer.review.top_errors import ErrorTally

LISTED = 20  # rows of one list before "and N more"
REFS = 8  # call ids in one table cell before "and N more"
MARKUP = re.compile(r"([\\`*_\[\]<>|!&~#@])")  # what can open emphasis, code, links, HTML, entities, cells
AUTOLINK = re.compile(r"(?<=:)//|(?<=www)\.", re.IGNORECASE)  # GFM links bare URLs and www. names


def text(value: Any) -> str:
    """Untrusted text as literal Markdown on one line (CommonMark lets any ASCII punctuation be escaped)."""
    escaped = MARKUP.sub(r"\\\1", " ".join(str(value).split()))
    return AUTOLINK.sub(lambda m: "\\" + "\\".join(m.group()), escaped)


def ref(call_id: str) -> str:
    return f"`{call_id}`"  # ids are c + hex digits, ".", "~": nothing to escape in a code span


def refs(call_ids: Iterable[str], limit: int = REFS, total: int | None = None) -> str:
    """The first ``limit`` ids, then how many more of ``total`` (by default, of ``call_ids``) there are."""
    ids = list(call_ids)
    total = len(ids) if total is None else total
    shown = ", ".join(ref(i) for i in ids[:limit])
    return shown + (f" and {total - limit} more" if total > limit else "")


def summary_markdown(analysis: Analysis | CallStream, paths: list[str], *, redact: bool = True) -> str:
    """From a CallStream, as its calls become final (``cli`` reads one through a window): only what the
    sections print of the calls is kept (``_Seen``); the retry chains, the writes that ran more than once, the
    findings and what could not be read are the stream's, once every call has been read. From an Analysis:
    the same document."""
    seen, captured, redactor = _Seen(), Captured(), Redactor.of(redact)
    for call in analysis.final_calls():
        captured.add(call, analysis.facts)
        seen.add(redactor.call_record(call_record(call, protocol_version(call, analysis.facts))))
    sections = [
        ["# MCP capture summary", ""],
        _findings(analysis, redactor),
        _captured(analysis, captured.facts(paths, analysis.facts), seen.calls),
        _failed(seen),
        _doubted(seen),
        _retries([g.record() for g in analysis.retry_groups]),
        _ran_more_than_once(analysis),
        _top_errors(seen.errors),
        _unanswered(seen),
        _not_shown(analysis, redactor),
    ]
    return "\n".join(line for section in sections for line in section).rstrip() + "\n"


@dataclass
class _LayerFailures:
    """The failed calls of one layer, as the table's row shows them."""

    started_at: str | None  # the first one's
    count: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    calls: list[str] = field(default_factory=list)  # the first REFS ids: the row names no more


@dataclass
class _Seen:
    """What the sections about single calls print, gathered one export record at a time: counts, and the
    first rows of each list (LISTED; "and N more" needs only the count). Never a record kept whole, so the
    summary of a long capture costs what its lists show."""

    calls: int = 0
    failed: int = 0
    first_failure: str = ""  # "`id` method tool at time, outcome"
    layers: dict[str, _LayerFailures] = field(default_factory=dict)
    doubted: list[str] = field(default_factory=list)
    doubted_count: int = 0
    errors: ErrorTally = field(default_factory=ErrorTally)
    unanswered: list[str] = field(default_factory=list)
    unanswered_count: int = 0

    def add(self, record: CallRecord) -> None:
        self.calls += 1
        if is_failure(record["outcome"]):
            self._failure(record)
        elif DOUBTED_SUCCESS.intersection(record["flags"]):
            self.doubted_count += 1
            if len(self.doubted) < LISTED:
                self.doubted.append(_doubted_line(record))
        if (ending := record["ending"]) is not None:
            self.unanswered_count += 1
            if len(self.unanswered) < LISTED:
                sentence = describe(ending, record["carrier"])
                self.unanswered.append(
                    f"- {ref(record['call_id'])} {_what(record)}, {record['outcome']}: {text(sentence)}"
                )

    def _failure(self, record: CallRecord) -> None:
        if not self.failed:
            self.first_failure = (
                f"{ref(record['call_id'])} {_what(record)} at {record['started_at']}, {record['outcome']}"
            )
        self.failed += 1
        layer = self.layers.get(record["layer"])
        if layer is None:
            layer = self.layers[record["layer"]] = _LayerFailures(record["started_at"])
        layer.count += 1
        layer.outcomes[record["outcome"]] += 1
        if len(layer.calls) < REFS:
            layer.calls.append(record["call_id"])
        self.errors.add(record["call_id"], str(record["outcome"]), record["reason"])


def _captured(analysis: Analysis | CallStream, facts: dict[str, Any], calls: int) -> list[str]:
    names = short_sources(facts["captures"])
    lines = ["## What was captured", ""]
    lines.append(f"- Captures: {', '.join(text(names[c]) for c in facts['captures'])}")
    if analysis.time_range is not None:  # --since/--until: every count below is of the calls in it
        lines.append(f"- Range: {text(analysis.time_range.describe())}")
        lines += [f"- {text(line)}" for line in range_lines(analysis.time_range, analysis.range_record())[1:]]
    if calls:
        lines.append(f"- Time (UTC): {iso_utc(facts['start'])} to {iso_utc(facts['end'])}")
    lines.append(
        f"- {calls} calls in {analysis.analyzed} exchanges "
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


def _failed(seen: _Seen) -> list[str]:
    lines = ["## What failed", ""]
    if not seen.failed:
        return [*lines, f"No call failed ({seen.calls} calls).", ""]
    lines.append(f"{seen.failed} of {seen.calls} calls failed. The first: {seen.first_failure}.")
    lines += ["", "| layer | failed | outcomes | first failure | calls |", "|---|---:|---|---|---|"]
    for layer in Layer:
        if (failed := seen.layers.get(layer)) is None:
            continue
        outcomes = ", ".join(f"{o} {n}" for o, n in failed.outcomes.most_common())
        calls = refs(failed.calls, total=failed.count)
        lines.append(f"| {layer.value} | {failed.count} | {outcomes} | {failed.started_at} | {calls} |")
    return [*lines, ""]


def _doubted_line(record: CallRecord) -> str:
    flags = ", ".join(f for f in record["flags"] if f in DOUBTED_SUCCESS)
    head = f"- {ref(record['call_id'])} {_what(record)}, {record['outcome']} but {flags}"
    return f"{head}: {text(record['reason'])}"


def _doubted(seen: _Seen) -> list[str]:
    lines = ["## Successes in doubt", ""]
    if not seen.doubted_count:
        return [*lines, "None: no call that succeeded carries a flag that doubts it.", ""]
    return lines + seen.doubted + _more(seen.doubted_count) + [""]


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


def _findings(analysis: Analysis | CallStream, redactor: Redactor) -> list[str]:
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


def _ran_more_than_once(analysis: Analysis | CallStream) -> list[str]:
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


def _top_errors(tally: ErrorTally) -> list[str]:
    """The failed calls grouped by error, the figures that differ between calls set aside (review/top_errors.py)."""
    lines = ["## Top errors", ""]
    errors = tally.ranked()
    if not errors:
        return [*lines, "None.", ""]
    lines += ["| count | outcome | error | first |", "|---:|---|---|---|"]
    for error in errors[:LISTED]:
        lines.append(f"| {error.count} | {error.outcome} | {text(error.error)} | {ref(error.first)} |")
    return lines + _more(len(errors)) + [""]


def _unanswered(seen: _Seen) -> list[str]:
    lines = ["## Calls that got no answer", ""]
    if not seen.unanswered_count:
        return [*lines, "Every request was answered.", ""]
    return lines + seen.unanswered + _more(seen.unanswered_count) + [""]


def _not_shown(analysis: Analysis | CallStream, redactor: Redactor) -> list[str]:
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
