"""The gate's verdict (``check.Gate``) as CI reads it: plain text, JUnit XML, GitHub workflow commands, JSON.

Every format carries the same facts: the failing calls with what failed them and the reason (the last
evidence line, redacted), the allowed calls with what allowed them, the inputs not read completely,
too few calls, and the verdict.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mcp_blackbox.analyzer.review.check import Gate, Judged, Passed, call_head, call_line

if TYPE_CHECKING:
    from junitparser import TestCase, TestSuite

FORMATS = ("text", "junit", "github", "json")


def render(gate: Gate, fmt: str) -> str:
    """The whole output in one format, ending with a newline."""
    renderers = {"text": text, "junit": junit, "github": github, "json": as_json}
    return renderers[fmt](gate)


# ---------------------------------------------------------------- text


def problem_lines(gate: Gate) -> Iterator[str]:
    for problem in gate.read_problems:
        where = f" at byte {problem['offset']}" if problem.get("offset") is not None else ""
        after = f" after {problem['flows_read']} flow(s)" if problem.get("flows_read") else ""
        allowed = "" if gate.incomplete else " (--allow-partial)"
        yield f"not fully read{allowed}: {problem['source']}: {problem['reason']}{where}{after}"
    if gate.too_few_calls:
        yield gate.too_few_line()
    for spec in gate.unused_allowances:
        yield f"note: --allow {spec} allowed no call"


def text(gate: Gate) -> str:
    """One line per failing call, then per allowed call, then what kept the gate from judging, then the verdict."""
    lines = [call_line(j) for j in gate.failing]
    lines += [call_line(j) for j in gate.allowed]
    lines += problem_lines(gate)
    lines.append(gate.summary())
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- JUnit XML

# XML 1.0 cannot carry these at all, escaped or not: a captured body may hold them.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(value: object) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else "\ufffd", str(value))


def junit(gate: Gate) -> str:
    """JUnit XML as GitLab and Jenkins read it: one testsuite per capture, one testcase per call.

    A failing call is a failure whose type is what failed it (its outcome, or the flags named), whose
    message is the reason and whose text is the evidence. An allowed call passes, with what allowed it in
    its system-out. Inputs not read completely and too few calls are a testsuite of their own,
    ``mcp-blackbox check``, so the call counts of the capture suites stay the call counts.
    """
    from junitparser import JUnitXml

    xml = JUnitXml("mcp-blackbox check")
    for capture, judged in _by_capture(gate).items():
        xml.add_testsuite(_suite(xml_safe(capture), [_call_testcase(j) for j in judged]))
    gate_cases = _gate_testcases(gate)
    if gate_cases:
        xml.add_testsuite(_suite("mcp-blackbox check", gate_cases))
    xml.update_statistics()
    out = io.BytesIO()
    xml.write(out)  # with the XML declaration
    return out.getvalue().decode("utf-8") + "\n"


def _by_capture(gate: Gate) -> dict[str, list[Judged | Passed]]:
    """The judged calls by capture: every capture given has a suite, in the order given, even without calls."""
    if gate.testcases is None:
        raise ValueError("JUnit has a testcase per call: judge(..., testcases=True) keeps them")
    by_capture: dict[str, list[Judged | Passed]] = {}
    for capture in gate.captures:
        by_capture.setdefault(gate.capture_name(capture), [])
    for j in gate.testcases:
        by_capture.setdefault(j.capture, []).append(j)
    return by_capture


def _suite(name: str, cases: list[TestCase]) -> TestSuite:
    from junitparser import TestSuite

    suite = TestSuite(name)
    # At once: add_testcase counts the whole suite again after each case, quadratic in a long capture's calls.
    suite.add_testcases(cases)
    return suite


def _call_testcase(j: Judged | Passed) -> TestCase:
    """A call's testcase: a failure if it fails, what allowed it if it was allowed, else a plain pass."""
    from junitparser import Failure, SystemOut, TestCase

    duration = j.duration_ms
    case = TestCase(xml_safe(j.name), xml_safe(j.classname), None if duration is None else round(duration / 1000, 6))
    if isinstance(j, Passed):
        return case
    if j.fails:
        failure = Failure(xml_safe(j.reason), xml_safe(",".join(j.failed_on)))
        failure.text = xml_safe("\n".join(j.evidence()))
        case.result = [failure]
    elif j.allowed:
        case.append(SystemOut(xml_safe(f"allowed: {'; '.join(j.allowed_by)}\nreason: {j.reason}")))
    return case


def _gate_testcases(gate: Gate) -> list[TestCase]:
    """What kept the gate from judging: each input not read completely (an error unless --allow-partial),
    then too few calls."""
    from junitparser import Error, Failure, SystemOut, TestCase

    gate_cases = []
    for problem in gate.read_problems:
        case = TestCase(xml_safe(f"read {problem['source']}"), "mcp-blackbox check")
        if gate.incomplete:
            case.result = [Error(xml_safe(problem["reason"]), "NOT_FULLY_READ")]
        else:
            case.append(SystemOut(xml_safe(f"allowed by --allow-partial: {problem['reason']}")))
        gate_cases.append(case)
    if gate.too_few_calls:
        case = TestCase(f"at least {gate.min_calls} calls", "mcp-blackbox check")
        case.result = [Failure(gate.too_few_line(), "TOO_FEW_CALLS")]
        gate_cases.append(case)
    return gate_cases


# ---------------------------------------------------------------- GitHub Actions


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does (``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``escapeProperty``): ':' and ',' end a property too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, title: str, message: str) -> str:
    return f"::{kind} title={escape_property(title)}::{escape_data(message)}"


def github(gate: Gate) -> str:
    """``::error`` per failing call and per problem, plain lines for the allowed calls, and the verdict:
    a ``::notice`` when the gate passes, a plain line otherwise (the errors above are the annotations)."""
    lines = []
    for j in gate.failing:
        title = f"{','.join(j.failed_on)}: {j.name} in {j.capture}"
        # The reason whole, newlines and all: escaped, they stay in the annotation.
        lines.append(command("error", title, f"{call_head(j.call, j.capture)} — {j.reason}"))
    lines += [call_line(j) for j in gate.allowed]
    for problem in gate.read_problems:
        message = f"{problem['source']}: {problem['reason']}"
        lines.append(command("error" if gate.incomplete else "warning", "capture not fully read", message))
    if gate.too_few_calls:
        lines.append(command("error", "too few MCP calls", gate.too_few_line()))
    lines += [f"note: --allow {spec} allowed no call" for spec in gate.unused_allowances]
    lines.append(command("notice", "mcp-blackbox check", gate.summary()) if gate.passed else gate.summary())
    return "\n".join(lines) + "\n"


_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_cell(value: object) -> str:
    """Captured text in a table cell, inert: every ASCII punctuation backslash-escaped (CommonMark allows
    it for all of them), so a server's message cannot become a link, an image, markup or a new cell."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(str(value).split()))


def step_summary(gate: Gate) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``: the verdict, a table of the failing calls, then the allowed ones."""
    out = ["### mcp-blackbox check", "", markdown_cell(gate.summary()), ""]
    columns = ("call", "method", "tool", "outcome", "flags", "capture", "reason")

    def table(rows: Sequence[Judged], extra: str | None = None) -> None:
        heads = (*columns, extra) if extra else columns
        out.append("| " + " | ".join(heads) + " |")
        out.append("|" + "---|" * len(heads))
        for j in rows:
            c = j.call
            cells = [c["call_id"], c["method"] or "", c["tool"] or "", c["outcome"], ",".join(c["flags"]), j.capture]
            cells.append(j.reason)
            if extra:
                cells.append("; ".join(j.allowed_by))
            out.append("| " + " | ".join(markdown_cell(cell) for cell in cells) + " |")
        out.append("")

    if gate.failing:
        out += ["Failing calls:", ""]
        table(gate.failing)
    if gate.allowed:
        out += ["Allowed calls:", ""]
        table(gate.allowed, "allowed by")
    for line in problem_lines(gate):
        out += [markdown_cell(line), ""]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- JSON


def call_entry(j: Judged) -> dict[str, Any]:
    c = j.call
    entry = {
        "call_id": c["call_id"],
        "method": c["method"],
        "tool": c["tool"],
        "jsonrpc_id": c["jsonrpc_id"],
        "outcome": c["outcome"],
        "flags": list(c["flags"]),
        "reason": j.reason,
        "capture": j.capture,
        "source": c["source"],
    }
    if j.fails:
        entry["failed_on"] = list(j.failed_on)
    else:
        entry["allowed_by"] = list(j.allowed_by)
    return entry


def as_json(gate: Gate) -> str:
    """One object: verdict, exit code, counts, failing and allowed calls, read problems."""
    document = {
        "verdict": "pass" if gate.passed else "fail",
        "exit_code": gate.exit_code,
        "summary": gate.summary(),
        "counts": {
            "calls": gate.calls,
            "failing": len(gate.failing),
            "allowed": len(gate.allowed),
            "flows": gate.flows_read,
            "captures": len(gate.captures),
            "not_fully_read": len(gate.read_problems),
        },
        "min_calls": gate.min_calls,
        "too_few_calls": gate.too_few_calls,
        "allow_partial": gate.allow_partial,
        "failing": [call_entry(j) for j in gate.failing],
        "allowed": [call_entry(j) for j in gate.allowed],
        "read_problems": gate.read_problems,
        "unused_allowances": gate.unused_allowances,
    }
    return json.dumps(document, indent=2, default=str) + "\n"
